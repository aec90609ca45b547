"""Which member Deployments an agent may touch (agents.ownership), and what the workload sync does
with one it does not own: row by row, and through `WorkloadSync` against a fake apps API."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from kubernetes.client import exceptions

from agents import bookkeeping, ownership
from agents.cache import views
from agents.controller import workload
from federation.api import names
from federation.rpc import assignment

VALUE = assignment.Assignment(
    spread="shop/own", generation=1, namespace="shop", workload="own", replicas=2, template={},
    template_revision="r", subsets=(), subset_count=0, spread_uid="uid-1", federation="prod")
OURS_LABELS = {names.SPREAD_LABEL: "own", names.FEDERATION_LABEL: "prod"}
OURS_ANNOTATIONS = {names.SPREAD_KEY_ANNOTATION: "shop/own", names.SPREAD_UID_ANNOTATION: "uid-1"}
LEGACY_ANNOTATIONS = {names.SPREAD_KEY_ANNOTATION: "shop/own", names.DESIRED_HASH_ANNOTATION: "abc"}


@pytest.mark.parametrize(
    ("labels", "annotations", "value", "verdict"),
    [
        pytest.param(OURS_LABELS, OURS_ANNOTATIONS, VALUE, ownership.OWNED, id="ours"),
        pytest.param({"app": "own"}, {}, VALUE, ownership.CONFLICT, id="a user's own"),
        pytest.param({**OURS_LABELS, names.FEDERATION_LABEL: "staging"}, OURS_ANNOTATIONS, VALUE,
                     ownership.CONFLICT, id="another federation"),
        pytest.param(OURS_LABELS, {**OURS_ANNOTATIONS, names.SPREAD_UID_ANNOTATION: "uid-0"}, VALUE,
                     ownership.ADOPT, id="an earlier spread of the key (a restored hub)"),
        pytest.param(OURS_LABELS,
                     {names.SPREAD_KEY_ANNOTATION: "shop/other", names.SPREAD_UID_ANNOTATION: "uid-0"},
                     VALUE, ownership.CONFLICT, id="another spread of the federation"),
        pytest.param(OURS_LABELS, {names.SPREAD_UID_ANNOTATION: "uid-0"}, VALUE, ownership.CONFLICT,
                     id="another uid without a spread key"),
        pytest.param({**OURS_LABELS, names.FEDERATION_LABEL: "staging"},
                     {**OURS_ANNOTATIONS, names.SPREAD_UID_ANNOTATION: "uid-0"}, VALUE, ownership.CONFLICT,
                     id="an earlier spread of the key in another federation"),
        pytest.param(OURS_LABELS, {names.SPREAD_KEY_ANNOTATION: "shop/own"}, VALUE, ownership.CONFLICT,
                     id="federation without uid"),
        pytest.param({names.SPREAD_LABEL: "own"}, LEGACY_ANNOTATIONS, VALUE, ownership.ADOPT,
                     id="made by an earlier agent"),
        pytest.param({names.SPREAD_LABEL: "own"}, {names.SPREAD_KEY_ANNOTATION: "shop/own"}, VALUE,
                     ownership.CONFLICT, id="spread key without the agent's hash"),
        pytest.param({names.SPREAD_LABEL: "own"},
                     {**LEGACY_ANNOTATIONS, names.SPREAD_KEY_ANNOTATION: "shop/x"}, VALUE,
                     ownership.CONFLICT, id="an earlier agent's, for another spread"),
        pytest.param(OURS_LABELS, OURS_ANNOTATIONS, dataclasses.replace(VALUE, federation=""),
                     ownership.CONFLICT, id="coordinator sent no identity"),
        pytest.param({"app": "own"}, {names.RELEASED_FROM_ANNOTATION: "prod/shop/own"}, VALUE,
                     ownership.ADOPT, id="released by an earlier spread of the key"),
        pytest.param({"app": "own"}, {names.RELEASED_FROM_ANNOTATION: "staging/shop/own"}, VALUE,
                     ownership.CONFLICT, id="released in another federation"),
        pytest.param({"app": "own"}, {names.RELEASED_FROM_ANNOTATION: "prod/shop/other"}, VALUE,
                     ownership.CONFLICT, id="released by another spread (a successor of the target)"),
        pytest.param({"app": "own"}, {names.RELEASED_FROM_ANNOTATION: "prod/shop/own"},
                     dataclasses.replace(VALUE, federation=""), ownership.CONFLICT,
                     id="released, but the coordinator sent no identity"),
    ],
)
def test_claim(labels: dict[str, str], annotations: dict[str, str], value: assignment.Assignment,
               verdict: str) -> None:
    found = ownership.claim(labels=labels, annotations=annotations, value=value, where="shop/own")
    assert found.verdict == verdict
    assert bool(found.reason) is (verdict != ownership.OWNED)


@pytest.mark.parametrize(
    ("label", "annotations", "federation", "marked"),
    [
        pytest.param("prod", OURS_ANNOTATIONS, "prod", ("shop/own", "uid-1"), id="ours"),
        pytest.param("prod", OURS_ANNOTATIONS, "staging", None, id="another federation's"),
        pytest.param("prod", OURS_ANNOTATIONS, "", None, id="no federation known yet"),
        pytest.param("", OURS_ANNOTATIONS, "prod", None, id="released (no federation label)"),
        pytest.param("prod", {names.SPREAD_KEY_ANNOTATION: "shop/own"}, "prod", None, id="no uid"),
        pytest.param("prod", {names.SPREAD_UID_ANNOTATION: "uid-1"}, "prod", None, id="no spread key"),
        pytest.param("", LEGACY_ANNOTATIONS, "prod", None, id="an earlier agent's, unmarked"),
    ],
)
def test_marked_spread(label: str, annotations: dict[str, str], federation: str,
                       marked: tuple[str, str] | None) -> None:
    assert ownership.marked_spread(federation_label=label, annotations=annotations,
                                   federation=federation) == marked


def test_the_federation_listed_is_the_last_welcomes_else_the_expected_one() -> None:
    state = ownership.FederationState("prod")
    assert (state.current, state.listed) == ("", "prod")
    state.welcomed("staging")  # a coordinator of another federation: its own Deployments are listed
    assert (state.current, state.listed) == ("staging", "staging")
    assert (ownership.FederationState().listed, ownership.FederationState("x").expected) == ("", "x")


# --- the sync against a fake apps API ----------------------------------------------------------------


class FakeApps:
    """Deployments by (namespace, name) as JSON; records every write."""

    def __init__(self, *items: dict[str, Any]) -> None:
        self.items = {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in items}
        self.writes: list[tuple[str, str]] = []

    def read_namespaced_deployment(self, name: str, namespace: str, **_: Any) -> Any:
        if (namespace, name) not in self.items:
            raise exceptions.ApiException(status=404)
        return type("Response", (), {"data": json.dumps(self.items[namespace, name])})()

    def replace_namespaced_deployment(self, name: str, namespace: str, body: Any, **_: Any) -> None:
        self.writes.append(("replace", name))
        self.items[namespace, name] = body

    def create_namespaced_deployment(self, namespace: str, body: Any, **_: Any) -> None:
        self.writes.append(("create", body["metadata"]["name"]))
        self.items[namespace, body["metadata"]["name"]] = body

    def delete_namespaced_deployment(self, name: str, namespace: str, **_: Any) -> None:
        self.writes.append(("delete", name))
        self.items.pop((namespace, name), None)

    def patch_namespaced_deployment(self, name: str, namespace: str, body: Any, **_: Any) -> None:
        """A JSON merge patch of metadata labels and annotations (None removes a key)."""
        self.writes.append(("patch", name))
        meta = self.items[namespace, name]["metadata"]
        for part in ("labels", "annotations"):
            merged = {**(meta.get(part) or {}), **body["metadata"].get(part, {})}
            meta[part] = {k: v for k, v in merged.items() if v is not None}

    def list_deployment_for_all_namespaces(self, **_: Any) -> Any:
        return type("Response", (), {"data": json.dumps({"items": list(self.items.values())})})()

    def list_replica_set_for_all_namespaces(self, **_: Any) -> Any:
        return type("Response", (), {"data": json.dumps({"items": []})})()  # Deployments only

    list_stateful_set_for_all_namespaces = list_replica_set_for_all_namespaces


class FakeCache:
    """Only Deployments labelled with the spread label, as the agent's watch sees them."""

    synced = True

    def autoscalers(self, kind: str, namespace: str, name: str) -> tuple[str, ...]:
        return ()  # no member HPA

    def __init__(self, apps: FakeApps) -> None:
        self.apps = apps

    def deployments(self) -> list[views.WorkloadView]:
        return [views.workload_view(i) for i in self.apps.items.values()
                if names.SPREAD_LABEL in (i["metadata"].get("labels") or {})]

    def deployment(self, namespace: str, name: str) -> views.WorkloadView | None:
        return next((v for v in self.deployments() if (v.namespace, v.name) == (namespace, name)), None)

    def member_workload(self, kind: str, namespace: str, name: str) -> views.WorkloadView | None:
        return self.deployment(namespace, name) if kind == "Deployment" else None


def users_own(name: str = "own", **labels: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "shop", "name": name, "uid": f"k8s-{name}",
                         "labels": {"app": name, **labels}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"image": "busybox:own"}]}}}}


def sync_over(apps: FakeApps, *values: assignment.Assignment) -> workload.WorkloadSync:
    books = bookkeeping.Bookkeeping()
    for value in values:
        books.set_assignment(value)
    return workload.WorkloadSync(apps, books, FakeCache(apps))  # type: ignore[arg-type]


def test_a_users_own_deployment_is_never_touched_and_is_a_conflict() -> None:
    apps = FakeApps(users_own())
    sync = sync_over(apps, VALUE)
    assert sync.sync_once() == {workload.CONFLICT: 1}
    assert sync.sync_once() == {workload.CONFLICT: 1}, "looked at again only after CONFLICT_PAUSE"
    assert apps.writes == [] and apps.items["shop", "own"] == users_own()
    assert "not created by fedspread" in sync.conflicts()["shop/own"]


def test_a_deployment_of_another_federation_is_neither_adopted_nor_removed() -> None:
    foreign = users_own(**{names.SPREAD_LABEL: "own", names.FEDERATION_LABEL: "staging"})
    foreign["metadata"]["annotations"] = OURS_ANNOTATIONS
    apps = FakeApps(foreign, users_own("other", **{names.SPREAD_LABEL: "other",
                                                   names.FEDERATION_LABEL: "staging"}))
    sync = sync_over(apps, VALUE)
    assert sync.sync_once() == {workload.CONFLICT: 1}
    assert apps.writes == []
    assert "federation 'staging'" in sync.conflicts()["shop/own"]
    assert sync.remove("shop/other", federation="prod") == 0 and apps.writes == []
    assert sync.release("shop/own", federation="prod") == 0 and apps.writes == []


def test_nothing_is_deleted_when_its_assignment_is_gone_only_by_an_explicit_removal() -> None:
    apps, books = FakeApps(), bookkeeping.Bookkeeping()
    books.set_assignment(VALUE)
    sync = workload.WorkloadSync(apps, books, FakeCache(apps))  # type: ignore[arg-type]
    assert sync.sync_once() == {workload.CREATED: 1} and sync.conflicts() == {}
    created = apps.items["shop", "own"]
    assert created["metadata"]["labels"][names.FEDERATION_LABEL] == "prod"
    assert created["metadata"]["annotations"][names.SPREAD_UID_ANNOTATION] == "uid-1"
    created["metadata"]["uid"] = "k8s-own"
    books.remove_assignment(VALUE.spread)  # absent from a (complete) resync: an empty hub, say
    for _ in range(3):
        assert sync.sync_once() == {}
    assert ("shop", "own") in apps.items and apps.writes == [("create", "own")], "deleted by absence"
    assert sync.remove(VALUE.spread, federation="staging") == 0, "a removal of another federation"
    assert sync.remove(VALUE.spread, federation="prod") == 1 and ("shop", "own") not in apps.items


def test_a_deployment_of_an_earlier_spread_of_the_key_is_adopted_with_the_new_uid() -> None:
    earlier = users_own(**{names.SPREAD_LABEL: "own", names.FEDERATION_LABEL: "prod"})
    earlier["metadata"]["annotations"] = {**OURS_ANNOTATIONS, names.SPREAD_UID_ANNOTATION: "uid-0"}
    apps = FakeApps(earlier)
    sync = sync_over(apps, VALUE)
    assert sync.sync_once() == {workload.UPDATED: 1} and sync.conflicts() == {}
    adopted = apps.items["shop", "own"]
    assert adopted["metadata"]["annotations"][names.SPREAD_UID_ANNOTATION] == "uid-1"
    assert adopted["spec"]["replicas"] == VALUE.replicas


def test_an_earlier_agents_deployment_is_adopted() -> None:
    legacy = users_own(**{names.SPREAD_LABEL: "own"})
    legacy["metadata"]["annotations"] = LEGACY_ANNOTATIONS
    apps = FakeApps(legacy)
    sync = sync_over(apps, VALUE)
    assert sync.sync_once() == {workload.UPDATED: 1}
    adopted = apps.items["shop", "own"]["metadata"]
    assert (adopted["labels"][names.FEDERATION_LABEL], adopted["annotations"][names.SPREAD_UID_ANNOTATION]) \
        == ("prod", "uid-1")


def test_an_orphaning_removal_releases_the_deployment_and_nothing_deletes_it_afterwards() -> None:
    apps, books = FakeApps(), bookkeeping.Bookkeeping()
    books.set_assignment(VALUE)
    sync = workload.WorkloadSync(apps, books, FakeCache(apps))  # type: ignore[arg-type]
    assert sync.sync_once() == {workload.CREATED: 1}
    apps.items["shop", "own"]["metadata"]["uid"] = "k8s-own"
    books.remove_assignment(VALUE.spread)
    assert sync.sync_once() == {} and ("shop", "own") in apps.items
    assert sync.release(VALUE.spread, federation="prod") == 1
    released = apps.items["shop", "own"]["metadata"]
    assert names.FEDERATION_LABEL not in released["labels"], released
    assert names.SPREAD_UID_ANNOTATION not in released.get("annotations", {}), released
    assert sync.sync_once() == {} and ("shop", "own") in apps.items, "a released Deployment is not ours"
    assert sync.remove(VALUE.spread, federation="prod") == 0, "a released Deployment is not ours"


def released_then_recreated(value: assignment.Assignment) -> tuple[FakeApps, bookkeeping.Bookkeeping,
                                                                      workload.WorkloadSync]:
    """Spread `VALUE`'s Deployment, made and then released by an orphaning removal; `value` (a spread
    created again, of the same or another key) assigned afterwards."""
    apps, books = FakeApps(), bookkeeping.Bookkeeping()
    books.set_assignment(VALUE)
    sync = workload.WorkloadSync(apps, books, FakeCache(apps))  # type: ignore[arg-type]
    assert sync.sync_once() == {workload.CREATED: 1}
    apps.items["shop", "own"]["metadata"]["uid"] = "k8s-own"
    books.remove_assignment(VALUE.spread)
    assert sync.release(VALUE.spread, federation="prod") == 1
    books.set_assignment(value)
    return apps, books, sync


def test_a_released_deployment_is_adopted_by_the_spread_of_its_key_created_again() -> None:
    again = dataclasses.replace(VALUE, spread_uid="uid-2", generation=1, replicas=3)
    apps, _, sync = released_then_recreated(again)
    released_spec = json.dumps(apps.items["shop", "own"]["spec"]["template"], sort_keys=True)
    mark = apps.items["shop", "own"]["metadata"]["annotations"][names.RELEASED_FROM_ANNOTATION]
    assert mark == "prod/shop/own"
    assert sync.sync_once() == {workload.UPDATED: 1} and sync.conflicts() == {}
    adopted = apps.items["shop", "own"]
    meta = adopted["metadata"]
    assert (meta["labels"][names.FEDERATION_LABEL], meta["annotations"][names.SPREAD_UID_ANNOTATION]) \
        == ("prod", "uid-2")
    assert names.RELEASED_FROM_ANNOTATION not in meta["annotations"], "adopted: managed again"
    assert meta["uid"] == "k8s-own" and adopted["spec"]["replicas"] == 3, "the same Deployment, scaled"
    assert json.dumps(adopted["spec"]["template"], sort_keys=True) == released_spec, "no rollout"
    assert ("delete", "own") not in apps.writes


def test_a_released_deployment_stays_a_conflict_for_another_spread() -> None:
    other = dataclasses.replace(VALUE, spread="shop/successor", spread_uid="uid-9")
    apps, _, sync = released_then_recreated(other)
    before = json.dumps(apps.items["shop", "own"], sort_keys=True)
    assert sync.sync_once() == {workload.CONFLICT: 1}
    assert "released by 'prod/shop/own'" in sync.conflicts()["shop/successor"]
    assert json.dumps(apps.items["shop", "own"], sort_keys=True) == before


def test_a_removal_followed_by_an_assignment_of_the_same_key_neither_deletes_nor_releases() -> None:
    # The link applies a removal and then the new spread's assignment before the workload thread
    # gets to the removal: the Deployment the assignment names is adopted, not deleted or released.
    for orphan in (False, True):
        apps, books = FakeApps(), bookkeeping.Bookkeeping()
        books.set_assignment(VALUE)
        sync = workload.WorkloadSync(apps, books, FakeCache(apps))  # type: ignore[arg-type]
        assert sync.sync_once() == {workload.CREATED: 1}
        books.remove_assignment(VALUE.spread)
        books.set_assignment(dataclasses.replace(VALUE, spread_uid="uid-2"))
        acted = (sync.release if orphan else sync.remove)(VALUE.spread, federation="prod")
        assert acted == 0 and ("shop", "own") in apps.items, orphan
        assert sync.sync_once() == {workload.UPDATED: 1}, orphan
        assert apps.items["shop", "own"]["metadata"]["annotations"][names.SPREAD_UID_ANNOTATION] == "uid-2"


def test_a_successor_of_the_target_does_not_shield_the_old_spreads_deployment_from_its_delete() -> None:
    # Spread a (Delete) is deleted and spread b, of another name, takes its target over: b's
    # assignment may reach the agent first (the coordinator holds a's delete for a re-creation),
    # but b can never own a Deployment marked for a, so a's delete goes ahead and b makes its own.
    apps, books = FakeApps(), bookkeeping.Bookkeeping()
    books.set_assignment(VALUE)
    sync = workload.WorkloadSync(apps, books, FakeCache(apps))  # type: ignore[arg-type]
    assert sync.sync_once() == {workload.CREATED: 1}
    books.remove_assignment(VALUE.spread)
    successor = dataclasses.replace(VALUE, spread="shop/successor", spread_uid="uid-9")
    books.set_assignment(successor)
    assert sync.sync_once() == {workload.CONFLICT: 1}
    assert sync.remove(VALUE.spread, federation="prod") == 1 and ("shop", "own") not in apps.items


def test_a_scale_down_waits_for_the_deletion_costs_of_its_assignment(monkeypatch: pytest.MonkeyPatch) -> None:
    apps = FakeApps()
    four = dataclasses.replace(VALUE, replicas=4)
    sync = sync_over(apps, four)
    written: set[int] = set()
    sync.costs_written = lambda value: id(value) in written
    assert sync.sync_once() == {workload.CREATED: 1}, "a creation is never held back"
    two = dataclasses.replace(VALUE, replicas=2, generation=2)
    sync._books.set_assignment(two)
    assert sync.sync_once() == {workload.DEFERRED: 1}
    assert apps.items["shop", "own"]["spec"]["replicas"] == 4, "not lowered before its costs are written"
    written.add(id(two))
    assert sync.sync_once() == {workload.UPDATED: 1}
    assert apps.items["shop", "own"]["spec"]["replicas"] == 2
    six = dataclasses.replace(VALUE, replicas=6, generation=3)
    sync._books.set_assignment(six)
    assert sync.sync_once() == {workload.UPDATED: 1}, "a scale-up is never held back"
    one = dataclasses.replace(VALUE, replicas=1, generation=4)
    sync._books.set_assignment(one)
    monkeypatch.setattr(workload, "SCALE_DOWN_WAIT", 0.0)  # the costs never come: it goes ahead
    assert sync.sync_once() == {workload.UPDATED: 1}
    assert apps.items["shop", "own"]["spec"]["replicas"] == 1
