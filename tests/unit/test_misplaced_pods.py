"""StatefulSet pods whose ordinal maps to another subset now are reported, never deleted (issue 24 §1):
the agent finds them from its cached pods (`agents.controller.misplaced`), its reconciler puts the
report in the pod counts (`SpreadPodCounts.misplaced`), the coordinator keeps it per cluster and the
spread shows it as the `PodsMisplaced` condition — the path a `Conflict` takes. The cache is faked
as in test_member_status.py; the real watch and pods: tests/integration/test_statefulset_spread.py."""

from __future__ import annotations

import datetime
import threading
from typing import Any

from agents import bookkeeping, outbox, pod_ledger
from agents.cache import views
from agents.controller import misplaced, reconciler
from federation.api import names
from federation.coordinator.model import world
from federation.coordinator.wire import convert
from federation.core import placement, spread_conditions, spread_status
from federation.rpc import assignment
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
STS_UID = "0c5e4f3a-1b2c-4d5e-8f90-a1b2c3d4e5f6"


def statefulset_assignment(*, quota_a: int = 2, quota_b: int = 2, kind: str = "StatefulSet",
                           adaptive: bool = True) -> assignment.Assignment:
    """Spread shop/db over subsets a then b in this cluster (the member StatefulSet shop/db)."""
    return assignment.Assignment(
        spread="shop/db", generation=2, namespace="shop", workload="db", replicas=quota_a + quota_b,
        template={}, template_revision="r",
        subsets=(assignment.SubsetRule(name="b", index=1, quota=quota_b),
                 assignment.SubsetRule(name="a", index=0, quota=quota_a)),
        subset_count=2, spread_uid="spread-uid", federation="prod", kind=kind,
        strategy=assignment.Strategy(type="Adaptive" if adaptive else "Fixed", reschedule_critical_seconds=1))


def member(replicas: int) -> views.WorkloadView:
    return views.workload_view({"metadata": {
        "name": "db", "namespace": "shop", "uid": STS_UID,
        "labels": {names.SPREAD_LABEL: "db", names.FEDERATION_LABEL: "prod"},
        "annotations": {names.SPREAD_UID_ANNOTATION: "spread-uid"}}, "spec": {"replicas": replicas}})


def pod(name: str, subset: str | None, *, phase: str = "Running", deleting: bool = False) -> views.SpreadPod:
    record = pod_ledger.PodRecord(name=name, subset=subset, revision="", phase=phase,
                                   ready=phase == "Running", node_name="n1", created=T0, deleting=deleting,
                                   unschedulable_since=T0 if phase == "Pending" else None)
    return views.SpreadPod(namespace="shop", spread="shop/db", uid=f"uid-{name}", record=record,
                           owner=views.compact_uid(STS_UID))


# a's quota went from 3 to 2: db-2, admitted into a, now maps to b; db-5 is beyond 4 replicas (being
# removed); a deleting and a finished pod are not reported; a pod of no subset whose ordinal has one is.
PODS = [pod("db-0", "a"), pod("db-1", "a"), pod("db-2", "a"), pod("db-3", None), pod("db-5", "b"),
        pod("db-4", "b", deleting=True), pod("db-6", "a", phase="Succeeded")]


def test_the_pods_whose_ordinal_maps_to_another_subset_are_named_with_both_subsets() -> None:
    text = misplaced.misplaced_report(statefulset_assignment(), PODS, member(replicas=4))
    assert text.startswith("2 pods of StatefulSet db are not in the subset their ordinal maps to: "
                           "db-2 (subset a, ordinal maps to subset b), "
                           "db-3 (no subset, ordinal maps to subset b);")
    assert "left in place" in text


def test_nothing_to_report_when_every_pod_holds_its_range_or_the_kind_has_no_ranges() -> None:
    placed = [pod("db-0", "a"), pod("db-1", "a"), pod("db-2", "b"), pod("db-3", "b")]
    assert misplaced.misplaced_report(statefulset_assignment(), placed, member(replicas=4)) == ""
    assert misplaced.misplaced_report(statefulset_assignment(kind="Deployment"), PODS, member(4)) == ""
    # beyond the quotas' sum (4) a pod is on its way out, whatever the member StatefulSet says yet:
    # an ordinary scale-down (quotas first, the member StatefulSet a moment later) reports nothing
    assert misplaced.misplaced_report(statefulset_assignment(), PODS, None) == \
        misplaced.misplaced_report(statefulset_assignment(), PODS, member(replicas=6))
    shrinking = [pod(f"db-{n}", "a" if n < 2 else "b") for n in range(6)]
    assert misplaced.misplaced_report(statefulset_assignment(), shrinking, member(replicas=6)) == ""


class StatefulSetCache:
    """What the reconciler reads of the cache: the member StatefulSet and its pods."""

    def __init__(self, pods: list[views.SpreadPod]) -> None:
        self.pods = pods
        self.stop = threading.Event()
        self.synced = True

    def spread_snapshot(self, spread: str) -> tuple[int, list[views.SpreadPod]]:
        return 1, list(self.pods)

    def member_workload(self, kind: str, namespace: str, name: str) -> views.WorkloadView | None:
        return member(replicas=4) if (kind, namespace, name) == ("StatefulSet", "shop", "db") else None

    def replicasets_of(self, deployment_uid: str) -> frozenset[int | str]:
        return frozenset()

    def revisions_of(self, deployment_uid: str) -> tuple[str, ...]:
        return ()

    def autoscalers(self, kind: str, namespace: str, name: str) -> tuple[str, ...]:
        return ()  # no member HPA

    def nodes(self) -> list[Any]:
        return []


class CoreCalls:
    """A stand-in CoreV1Api that records every call (none is expected) and answers nothing."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> None:
            self.calls.append(name)
        return call


def test_the_reconciler_reports_them_with_the_counts_and_deletes_nothing() -> None:
    books, box = bookkeeping.Bookkeeping(clock=lambda: T0), outbox.ReportOutbox()
    books.set_assignment(statefulset_assignment())
    pending = pod("db-1", "a", phase="Pending")  # stuck past rescheduleCriticalSeconds: still kept
    cache = StatefulSetCache([pod("db-0", "a"), pending, pod("db-2", "a"), pod("db-3", "b")])
    core = CoreCalls()
    loop = reconciler.Reconciler(core, books, box, cache,  # type: ignore[arg-type]
                                 clock=lambda: T0 + datetime.timedelta(minutes=5), heartbeat_seconds=3600)
    done = loop.reconcile_once()
    assert (done.deleted, done.patched, done.counts_sent) == (0, 0, True)
    assert core.calls == [], "no pod deleted, no cost written"
    (message,) = [m for m in box.latest() if m.WhichOneof("body") == "pod_counts"]
    (item,) = message.pod_counts.spreads
    assert item.misplaced.startswith("1 pod of StatefulSet db is not in the subset their ordinal maps to: "
                                     "db-2 (subset a, ordinal maps to subset b);"), item.misplaced

    cache.pods[2] = pod("db-2", "b")  # recreated (a user's delete): admitted by its ordinal
    assert loop.reconcile_once().counts_sent, "the report changed: sent at once"
    (message,) = [m for m in box.latest() if m.WhichOneof("body") == "pod_counts"]
    assert message.pod_counts.spreads[0].misplaced == ""


def test_the_coordinator_shows_them_as_the_podsmisplaced_condition_until_the_report_clears() -> None:
    clock = ManualClock(T0)
    model = world.World(clock)
    report = "1 pod of StatefulSet db is not in the subset its ordinal maps to: db-2 (...)"
    sent = outbox.counts_message({"shop/db": {"a": pod_ledger.SubsetCounts(running=3)}}, sequence=1,
                                 generations={}, observed_at=T0, misplaced={"shop/db": report})
    found = convert.counts_from_pb(sent.pod_counts)
    assert found.misplaced == {"shop/db": report}
    model.pod_counts("dc1", found.counts, misplaced=found.misplaced)
    model.pod_counts("aws", {}, misplaced={})
    assert model.pods.misplaced_for("shop/db") == {"dc1": report}

    spec = builders.spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": 2},
                                {"name": "b", "clusters": ["dc1"]})
    result = placement.place(spec, replicas=4, snapshot=builders.snapshot(
        builders.member("dc1", builders.pool(4))), now=T0)

    def conditions(moved: dict[str, str]) -> dict[str, Any]:
        made = spread_status.spread_status(placement=result, spec=spec, generation=1, reports={}, marks=[],
                                           previous=None, now=T0, misplaced=moved)
        return {c.type: c for c in made.conditions}

    shown = conditions(model.pods.misplaced_for("shop/db"))[spread_conditions.PODS_MISPLACED]
    assert (shown.status, shown.reason) == ("True", "OrdinalRangesMoved")
    assert shown.message == f"1 cluster (dc1: {report})"
    model.pod_counts("dc1", found.counts, misplaced={})
    assert spread_conditions.PODS_MISPLACED not in conditions(model.pods.misplaced_for("shop/db"))
