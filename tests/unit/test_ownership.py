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
                     ownership.CONFLICT, id="an earlier spread of the name"),
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
    ],
)
def test_claim(labels: dict[str, str], annotations: dict[str, str], value: assignment.Assignment,
               verdict: str) -> None:
    found = ownership.claim(labels=labels, annotations=annotations, value=value, where="shop/own")
    assert found.verdict == verdict
    assert bool(found.reason) is (verdict != ownership.OWNED)


@pytest.mark.parametrize(
    ("labels", "annotations", "federation", "prunable"),
    [
        pytest.param(OURS_LABELS, {names.SPREAD_UID_ANNOTATION: "uid-gone"}, "prod", True, id="ours, gone"),
        pytest.param(OURS_LABELS, {names.SPREAD_UID_ANNOTATION: "uid-1"}, "prod", False, id="ours, assigned"),
        pytest.param(OURS_LABELS, {names.SPREAD_UID_ANNOTATION: "uid-gone"}, "staging", False,
                     id="another federation resynced"),
        pytest.param(OURS_LABELS, {names.SPREAD_UID_ANNOTATION: "uid-gone"}, "", False, id="no resync"),
        pytest.param({names.SPREAD_LABEL: "own"}, LEGACY_ANNOTATIONS, "prod", False, id="legacy"),
        pytest.param(OURS_LABELS, {}, "prod", False, id="no uid"),
    ],
)
def test_prunable(labels: dict[str, str], annotations: dict[str, str], federation: str,
                  prunable: bool) -> None:
    keep = {("uid-1", "shop", "own")}
    assert ownership.prunable(labels=labels, annotations=annotations, where=("shop", "own"),
                              federation=federation, keep=keep) is prunable


def test_a_renamed_target_prunes_the_old_name() -> None:
    keep = {("uid-1", "shop", "own-v2")}
    assert ownership.prunable(labels=OURS_LABELS, annotations={names.SPREAD_UID_ANNOTATION: "uid-1"},
                              where=("shop", "own"), federation="prod", keep=keep)


def test_each_welcome_withdraws_the_right_to_prune_until_its_resync() -> None:
    state = ownership.FederationState()
    assert state.prunable() == ""
    state.welcomed("prod")
    assert (state.current, state.prunable()) == ("prod", "")
    state.resync_complete()
    assert state.prunable() == "prod"
    state.welcomed("staging")  # another coordinator: nothing of prod may be pruned, nor yet of staging
    assert (state.current, state.prunable()) == ("staging", "")


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


class FakeCache:
    """Only Deployments labelled with the spread label, as the agent's watch sees them."""

    synced = True

    def __init__(self, apps: FakeApps) -> None:
        self.apps = apps

    def deployments(self) -> list[views.DeploymentView]:
        return [views.deployment_view(i) for i in self.apps.items.values()
                if names.SPREAD_LABEL in (i["metadata"].get("labels") or {})]

    def deployment(self, namespace: str, name: str) -> views.DeploymentView | None:
        return next((v for v in self.deployments() if (v.namespace, v.name) == (namespace, name)), None)


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


def test_a_deployment_of_another_federation_is_neither_adopted_nor_pruned() -> None:
    foreign = users_own(**{names.SPREAD_LABEL: "own", names.FEDERATION_LABEL: "staging"})
    foreign["metadata"]["annotations"] = OURS_ANNOTATIONS
    apps = FakeApps(foreign, users_own("other", **{names.SPREAD_LABEL: "other",
                                                   names.FEDERATION_LABEL: "staging"}))
    sync = sync_over(apps, VALUE)
    sync.federation.welcomed("prod")
    sync.federation.resync_complete()
    assert sync.sync_once() == {workload.CONFLICT: 1}
    assert apps.writes == []
    assert "federation 'staging'" in sync.conflicts()["shop/own"]
    assert sync.remove("shop/other", federation="prod") == 0 and apps.writes == []


def test_created_ours_then_pruned_after_a_resync_of_the_same_federation_only() -> None:
    apps, books = FakeApps(), bookkeeping.Bookkeeping()
    books.set_assignment(VALUE)
    sync = workload.WorkloadSync(apps, books, FakeCache(apps))  # type: ignore[arg-type]
    assert sync.sync_once() == {workload.CREATED: 1} and sync.conflicts() == {}
    created = apps.items["shop", "own"]
    assert created["metadata"]["labels"][names.FEDERATION_LABEL] == "prod"
    assert created["metadata"]["annotations"][names.SPREAD_UID_ANNOTATION] == "uid-1"
    created["metadata"]["uid"] = "k8s-own"
    books.remove_assignment(VALUE.spread)  # the spread is gone from the full set
    sync.federation.welcomed("staging")
    sync.federation.resync_complete()
    assert sync.sync_once() == {} and ("shop", "own") in apps.items, "another federation prunes nothing"
    sync.federation.welcomed("prod")
    assert sync.sync_once() == {} and ("shop", "own") in apps.items, "nothing before ResyncComplete"
    sync.federation.resync_complete()
    assert sync.sync_once() == {workload.DELETED: 1} and ("shop", "own") not in apps.items


def test_an_earlier_agents_deployment_is_adopted() -> None:
    legacy = users_own(**{names.SPREAD_LABEL: "own"})
    legacy["metadata"]["annotations"] = LEGACY_ANNOTATIONS
    apps = FakeApps(legacy)
    sync = sync_over(apps, VALUE)
    assert sync.sync_once() == {workload.UPDATED: 1}
    adopted = apps.items["shop", "own"]["metadata"]
    assert (adopted["labels"][names.FEDERATION_LABEL], adopted["annotations"][names.SPREAD_UID_ANNOTATION]) \
        == ("prod", "uid-1")


def test_an_orphaned_deployment_is_never_pruned_between_its_removal_and_its_release() -> None:
    apps, books = FakeApps(), bookkeeping.Bookkeeping()
    books.set_assignment(VALUE)
    sync = workload.WorkloadSync(apps, books, FakeCache(apps))  # type: ignore[arg-type]
    sync.federation.welcomed("prod")
    sync.federation.resync_complete()
    assert sync.sync_once() == {workload.CREATED: 1}
    apps.items["shop", "own"]["metadata"]["uid"] = "k8s-own"
    sync.hold(VALUE.spread)  # the link saw an orphaning removal: the hold comes before the quotas go
    books.remove_assignment(VALUE.spread)
    assert sync.sync_once() == {} and ("shop", "own") in apps.items, "a prune raced the release"
    assert sync.release(VALUE.spread, federation="prod") == 1
    released = apps.items["shop", "own"]["metadata"]
    assert names.FEDERATION_LABEL not in released["labels"], released
    assert names.SPREAD_UID_ANNOTATION not in released.get("annotations", {}), released
    assert sync.sync_once() == {} and ("shop", "own") in apps.items, "a released Deployment is not ours"
