"""Whose pod is it (agents.owners): a pod counts as a spread's only while its owner chain leads to
the spread's marked member Deployment — row by row, through the cache's views and store, and
through a real `Reconciler` round over a fake cache (no counts, costs or reschedule deletes for a
released Deployment's pods, another controller's or a bare pod), and the webhook's rule."""

from __future__ import annotations

import dataclasses
import datetime
import json
import threading
from typing import Any

import pytest

from agents import bookkeeping, metrics, outbox, owners
from agents.cache import store, views
from agents.controller import reconciler
from agents.webhook import handler, review
from federation.api import names
from federation.rpc import assignment

AT = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
DEPLOY_UID = "11111111-1111-1111-1111-111111111111"
RS_UID = "22222222-2222-2222-2222-222222222222"
RELEASED_DEPLOY_UID = "33333333-3333-3333-3333-333333333333"
RELEASED_RS_UID = "44444444-4444-4444-4444-444444444444"
OTHER_UID = "55555555-5555-5555-5555-555555555555"

VALUE = assignment.Assignment(
    spread="shop/web", generation=1, namespace="shop", workload="web", replicas=4, template={},
    template_revision="r", subsets=(assignment.SubsetRule(name="a", index=0, quota=4),), subset_count=1,
    spread_uid="spread-uid", federation="prod",
    strategy=assignment.Strategy(type="Adaptive", reschedule_critical_seconds=1, unschedulable_seconds=60))


def deployment(*, uid: str = DEPLOY_UID, federation: str = "prod", spread_uid: str = "spread-uid",
               label: str = "web") -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "shop", "uid": uid,
                         "labels": {names.SPREAD_LABEL: label, names.FEDERATION_LABEL: federation},
                         "annotations": {names.SPREAD_UID_ANNOTATION: spread_uid,
                                         names.SPREAD_KEY_ANNOTATION: "shop/web"}},
            "spec": {"replicas": 4}}


def replicaset(name: str, uid: str, owner: str | None) -> dict[str, Any]:
    refs = [{"kind": "Deployment", "name": "web", "uid": owner, "controller": True}] if owner else []
    return {"metadata": {"name": name, "namespace": "shop", "uid": uid, "ownerReferences": refs,
                         "labels": {names.SPREAD_LABEL: "web"}}}


def revisioned(name: str, uid: str, *, template_hash: str, revision: str | None) -> dict[str, Any]:
    """A ReplicaSet of the member Deployment with its template hash and revision number."""
    made = replicaset(name, uid, DEPLOY_UID)
    made["metadata"]["labels"][names.REVISION_LABEL] = template_hash
    if revision is not None:
        made["metadata"]["annotations"] = {views.DEPLOYMENT_REVISION_ANNOTATION: revision}
    return made


def pod(name: str, *, owner: tuple[str, str] | None, ready: bool = True,
        stuck: bool = False) -> dict[str, Any]:
    """Pod `name` of spread shop/web in subset a; `owner`: its controller (kind, uid)."""
    refs = [{"kind": owner[0], "name": "x", "uid": owner[1], "controller": True}] if owner else []
    status: dict[str, Any] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False",
         "lastTransitionTime": "2026-01-01T11:00:00Z"}]}
    spec: dict[str, Any] = {"nodeName": "n1"}
    if stuck:
        spec, status = {}, {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "lastTransitionTime": "2026-01-01T11:00:00Z"}]}
    return {"metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}",
                         "creationTimestamp": "2026-01-01T10:00:00Z", "ownerReferences": refs,
                         "labels": {names.SPREAD_LABEL: "web", names.REVISION_LABEL: ""},
                         "annotations": {names.SUBSET_ANNOTATION: "a"}},
            "spec": spec, "status": status}


PODS = {
    "mine": ("ReplicaSet", RS_UID),
    "direct": ("Deployment", DEPLOY_UID),
    "released": ("ReplicaSet", RELEASED_RS_UID),
    "statefulset": ("StatefulSet", OTHER_UID),
    "bare": None,
}


def spread_pods(*, stuck: bool = False) -> list[views.SpreadPod]:
    made = [views.spread_pod(pod(name, owner=owner, stuck=stuck)) for name, owner in PODS.items()]
    return [p for p in made if p is not None]


def unstarted_cache() -> store.Cache:
    """A cache that is never started: the tests feed it watch events by hand (`_apply`)."""

    class Lister:
        def __call__(self, **_: Any) -> Any:
            raise AssertionError("not started")

    core = type("Core", (), {"list_node": Lister(), "list_pod_for_all_namespaces": Lister()})()
    apps = type("Apps", (), {"list_deployment_for_all_namespaces": Lister(),
                             "list_replica_set_for_all_namespaces": Lister(),
                             "list_stateful_set_for_all_namespaces": Lister()})()
    return store.Cache(core, apps)


def test_views_keep_each_pods_controller_and_each_replicasets_deployment() -> None:
    seen = {p.record.name: p for p in spread_pods()}
    assert seen["mine"].owner == views.compact_uid(RS_UID) and seen["mine"].record.owned
    assert seen["bare"].owner == "" and not seen["bare"].record.owned
    made = views.replicaset_view(replicaset("web-1", RS_UID, DEPLOY_UID))
    assert made == views.ReplicaSetView(RS_UID, DEPLOY_UID)
    assert views.replicaset_view(replicaset("loose", RS_UID, None)).owner == ""


def test_the_cache_indexes_replicasets_by_their_deployment() -> None:
    cache = unstarted_cache()
    cache._apply(store.REPLICASETS, "ADDED", "shop/web-1", replicaset("web-1", RS_UID, DEPLOY_UID))
    released = replicaset("old", RELEASED_RS_UID, RELEASED_DEPLOY_UID)
    cache._apply(store.REPLICASETS, "ADDED", "shop/old", released)
    assert cache.replicasets_of(DEPLOY_UID) == {views.compact_uid(RS_UID)}
    assert cache.replicaset("shop", "web-1") == views.ReplicaSetView(RS_UID, DEPLOY_UID)
    assert cache.revisions_of(DEPLOY_UID) == ()  # the test's ReplicaSets have no template hash
    cache._apply(store.REPLICASETS, "DELETED", "shop/web-1", {})
    assert cache.replicasets_of(DEPLOY_UID) == frozenset() and cache.replicasets_of("") == frozenset()


def chain_of(view: views.WorkloadView | None) -> owners.Controllers:
    sets = {DEPLOY_UID: {views.compact_uid(RS_UID)},
            RELEASED_DEPLOY_UID: {views.compact_uid(RELEASED_RS_UID)}}
    return owners.controllers(VALUE, view, lambda uid: sets.get(uid, set()))


@pytest.mark.parametrize(
    ("member", "expected"),
    [
        pytest.param(deployment(), {"mine", "direct"}, id="the marked member Deployment's pods only"),
        pytest.param(None, set(), id="no member Deployment: no pod is the spread's"),
        pytest.param(deployment(federation="staging"), set(), id="another federation's Deployment"),
        pytest.param(deployment(spread_uid="old-uid"), set(), id="an earlier spread's, not adopted yet"),
        pytest.param(deployment(label="other"), set(), id="labelled for another spread"),
    ],
)
def test_owned_pods_follow_the_owner_chain(member: dict[str, Any] | None, expected: set[str]) -> None:
    view = None if member is None else views.workload_view(member)
    assert {p.record.name for p in owners.owned(spread_pods(), chain_of(view))} == expected


@pytest.mark.parametrize(
    ("references", "verdict"),
    [
        pytest.param([{"kind": "ReplicaSet", "name": "web-1", "uid": RS_UID, "controller": True}],
                     owners.OURS, id="a ReplicaSet of the member Deployment"),
        pytest.param([{"kind": "ReplicaSet", "name": "old", "uid": RELEASED_RS_UID, "controller": True}],
                     owners.FOREIGN, id="a ReplicaSet of a released Deployment"),
        pytest.param([{"kind": "ReplicaSet", "name": "new", "uid": OTHER_UID, "controller": True}],
                     owners.UNKNOWN, id="a ReplicaSet the cache does not know yet (as before)"),
        pytest.param([{"kind": "ReplicaSet", "name": "web-1", "uid": OTHER_UID, "controller": True}],
                     owners.UNKNOWN, id="a ReplicaSet of that name made again (uid differs)"),
        pytest.param([{"kind": "StatefulSet", "name": "db", "uid": OTHER_UID, "controller": True}],
                     owners.FOREIGN, id="another controller's pod"),
        pytest.param([{"kind": "Deployment", "name": "web", "uid": DEPLOY_UID, "controller": True}],
                     owners.OURS, id="the member Deployment itself"),
        pytest.param([{"kind": "ReplicaSet", "name": "web-1", "uid": RS_UID}], owners.UNKNOWN,
                     id="no controller reference: a bare pod (as before)"),
        pytest.param(None, owners.UNKNOWN, id="no ownerReferences"),
    ],
)
def test_admission_rule(references: Any, verdict: str) -> None:
    known = {"web-1": views.ReplicaSetView(RS_UID, DEPLOY_UID),
             "old": views.ReplicaSetView(RELEASED_RS_UID, RELEASED_DEPLOY_UID)}
    found = owners.admission(VALUE, namespace="shop", owner_references=references,
                             workload=views.workload_view(deployment()),
                             replicaset=lambda _namespace, name: known.get(name))
    assert found == verdict


def test_admission_without_a_marked_member_deployment_takes_no_known_replicaset_as_ours() -> None:
    ref = [{"kind": "ReplicaSet", "name": "web-1", "uid": RS_UID, "controller": True}]
    found = owners.admission(VALUE, namespace="shop", owner_references=ref, workload=None,
                             replicaset=lambda _n, _m: views.ReplicaSetView(RS_UID, DEPLOY_UID))
    assert found == owners.FOREIGN


def test_the_webhook_admits_a_foreign_pod_untouched_and_records_nothing() -> None:
    book = bookkeeping.Bookkeeping()
    book.set_assignment(VALUE)
    book.observe(VALUE.spread, [])
    verdicts = iter([owners.FOREIGN, owners.UNKNOWN])
    hook = handler.AdmissionHandler(book, metrics.AgentMetrics(cluster="c"),
                                    owner_check=lambda _value, _namespace, _refs: next(verdicts))
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "r1", "operation": "CREATE", "namespace": "shop", "name": "p",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
        "object": {"metadata": {"name": "p", "labels": {names.SPREAD_LABEL: "web"}},
                   "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    request = review.parse(json.dumps(body).encode())
    assert "patch" not in hook.handle(request)["response"]
    assert book.pending_entries(VALUE.spread) == ({}, {}), "a foreign pod holds no quota"
    assert "patch" in hook.handle(request)["response"], "an unknown owner is admitted by label, as before"


# --- a real reconcile round over a fake cache -------------------------------------------------------


class FakeCache:
    """A synced cache holding the five pods, the member Deployment and its ReplicaSet."""

    synced = True

    def autoscalers(self, kind: str, namespace: str, name: str) -> tuple[str, ...]:
        return ()  # no member HPA

    def __init__(self, pods: list[views.SpreadPod]) -> None:
        self.pods = pods
        self.member = views.workload_view(deployment())

    def spread_snapshot(self, spread: str) -> tuple[int, list[views.SpreadPod]]:
        return 1, list(self.pods)

    def deployment(self, namespace: str, name: str) -> views.WorkloadView | None:
        return self.member

    def member_workload(self, kind: str, namespace: str, name: str) -> views.WorkloadView | None:
        return self.deployment(namespace, name) if kind == "Deployment" else None

    def replicasets_of(self, deployment_uid: str) -> frozenset[int | str]:
        return frozenset({views.compact_uid(RS_UID)}) if deployment_uid == DEPLOY_UID else frozenset()

    def revisions_of(self, deployment_uid: str) -> tuple[str, ...]:
        return ()

    def nodes(self) -> list[Any]:
        return []

    def version(self, *kinds: str) -> int:
        return 0

    def wait_for_change(self, since: int, *, timeout: float, kinds: tuple[str, ...] = ()) -> int:
        return since


@dataclasses.dataclass
class FakeCore:
    """Records the pod writes a round makes."""

    patched: list[str] = dataclasses.field(default_factory=list)
    deleted: list[str] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def patch_namespaced_pod(self, name: str, namespace: str, body: Any, **_: Any) -> None:
        self.patched.append(name)

    def delete_namespaced_pod(self, name: str, namespace: str, **_: Any) -> None:
        self.deleted.append(name)


def reconciler_over(
        pods: list[views.SpreadPod]) -> tuple[reconciler.Reconciler, bookkeeping.Bookkeeping, FakeCore]:
    """A real `Reconciler` holding `VALUE`'s assignment over a fake cache of `pods`; its bookkeeping
    and the pod writes it makes."""
    books, core = bookkeeping.Bookkeeping(clock=lambda: AT), FakeCore()
    books.set_assignment(VALUE)
    loop = reconciler.Reconciler(core, books, outbox.ReportOutbox(), FakeCache(pods),  # type: ignore[arg-type]
                                 clock=lambda: AT)
    return loop, books, core


def test_a_round_counts_costs_and_reschedules_only_the_spreads_own_pods() -> None:
    loop, books, core = reconciler_over(spread_pods())
    loop.reconcile_once()
    assert {p.name for p in books.pods(VALUE.spread)} == {"mine", "direct"}
    assert books.counts(VALUE.spread)["a"].ready == 2, "released, foreign, bare: not ours"
    assert set(core.patched) <= {"mine", "direct"}, f"a cost written on a pod not ours: {core.patched}"
    assert loop.costs_written(VALUE), "the round wrote this assignment's costs"
    assert not loop.costs_written(dataclasses.replace(VALUE, generation=2)), "not a newer one's"

    stuck, _, stuck_core = reconciler_over(spread_pods(stuck=True))
    assert stuck.reconcile_once().deleted == 2
    assert sorted(stuck_core.deleted) == ["direct", "mine"], "only the spread's own stuck pods are deleted"


def test_the_cache_orders_a_deployments_template_revisions_newest_first() -> None:
    cache = unstarted_cache()
    cache._apply(store.REPLICASETS, "ADDED", "shop/web-1", revisioned("web-1", RS_UID, template_hash="h1",
                                                                      revision="1"))
    cache._apply(store.REPLICASETS, "ADDED", "shop/web-2", revisioned("web-2", OTHER_UID, template_hash="h2",
                                                                      revision="2"))
    assert cache.revisions_of(DEPLOY_UID) == ("h2", "h1")
    # A rollback to h1: the Deployment controller gives its ReplicaSet the next number.
    cache._apply(store.REPLICASETS, "MODIFIED", "shop/web-1", revisioned("web-1", RS_UID, template_hash="h1",
                                                                         revision="3"))
    assert cache.revisions_of(DEPLOY_UID) == ("h1", "h2")
    assert cache.revisions_of(RELEASED_DEPLOY_UID) == () and cache.revisions_of("") == ()
    unnumbered = views.replicaset_view(revisioned("web-3", RS_UID, template_hash="h3", revision="x"))
    assert (unnumbered.template_hash, unnumbered.revision) == ("h3", 0)
