"""`spec.propagate` (issue 24 §2): the entries refused with a field path — by the model (what
`fedspread simulate` and the Valid condition report, exit 2) and by the hub webhook, which also
knows the versions the hub serves — and the coordinator's side: a listed object rides in the
assignments of the clusters with replicas, a PodDisruptionBudget's absolute budget divided among
them, a Service without the hub's allocations, and a hub change re-sends exactly those spreads.
The agent's side and the real apiservers: tests/integration/test_dependencies_sandbox.py."""

from __future__ import annotations

import copy
import datetime
import json
import pathlib
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation import cli
from federation.api import names, problems
from federation.api import propagate as propagate_api
from federation.api import spread as spread_api
from federation.coordinator import facade
from federation.coordinator.hub import admission
from federation.coordinator.model import hub_objects, loop, world
from federation.coordinator.wire import assignments
from federation.core import member_copy
from federation.rpc import assignment
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
SUBSETS: list[dict[str, Any]] = [{"name": "onprem", "clusters": ["dc1"], "maxReplicas": 2},
                                 {"name": "cloud", "clusters": ["aws"]}]
SERVICE = {"apiVersion": "v1", "kind": "Service", "name": "web"}
BUDGET = {"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "name": "web"}


def spread_doc(*entries: dict[str, Any], propagate_dependencies: bool = True) -> dict[str, Any]:
    return {"apiVersion": "fedspread.io/v1alpha1", "kind": "FederatedSpread",
            "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web", "generation": 1},
            "spec": {"targetRef": {"name": "web"}, "subsets": SUBSETS,
                     "propagateDependencies": propagate_dependencies, "propagate": list(entries)}}


def refused(doc: dict[str, Any]) -> dict[str, str]:
    """Path -> message of every problem of `doc`."""
    with pytest.raises(problems.InvalidInput) as raised:
        problems.validate(spread_api.FederatedSpread, doc, what="shop/web")
    return {p.path: p.message for p in raised.value.problems}


def test_a_service_and_a_budget_are_valid_entries() -> None:
    parsed = problems.validate(spread_api.FederatedSpread, spread_doc(SERVICE, BUDGET), what="shop/web")
    assert [e.described for e in parsed.spec.propagate] == ["Service/web", "PodDisruptionBudget/web"]


def test_refused_entries_name_their_field_path() -> None:
    found = refused(spread_doc(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "reader"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w"},
        {"apiVersion": "policy/v2", "kind": "PodDisruptionBudget", "name": "web"},
        SERVICE, SERVICE))
    assert "cluster-scoped" in found["spec.propagate[0].kind"]
    assert "the spread's own workload" in found["spec.propagate[1]"]
    assert "not a kind fedspread propagates" in found["spec.propagate[2].kind"]
    assert "v1 Service" in found["spec.propagate[2].kind"]
    assert found["spec.propagate[3].apiVersion"] == (
        "PodDisruptionBudget is propagated as policy/v1, policy/v1beta1, not policy/v2")
    assert found["spec.propagate[5]"] == "Service/web is already listed (propagate[4])"
    assert set(found) == {"spec.propagate[0].kind", "spec.propagate[1]", "spec.propagate[2].kind",
                          "spec.propagate[3].apiVersion", "spec.propagate[5]"}


def test_entries_need_the_dependencies_propagated() -> None:
    found = refused(spread_doc(SERVICE, propagate_dependencies=False))
    assert "propagateDependencies" in found["spec.propagate"]


def test_an_entry_without_a_name_is_refused() -> None:
    assert "spec.propagate[0].name" in refused(spread_doc({"apiVersion": "v1", "kind": "Service"}))


def test_simulate_refuses_a_cluster_scoped_entry_with_exit_2(tmp_path: pathlib.Path) -> None:
    spread_file, clusters_file = tmp_path / "spread.yaml", tmp_path / "clusters.yaml"
    spread_file.write_text(yaml.safe_dump(spread_doc(
        SERVICE, {"apiVersion": "v1", "kind": "Namespace", "name": "shop"})))
    clusters_file.write_text(yaml.safe_dump({"clusters": [
        {"name": name, "nodePools": [{"count": 2, "allocatable": {"cpu": "4", "pods": "110"}}]}
        for name in ("dc1", "aws")]}))
    result = CliRunner().invoke(cli.main, ["simulate", "-f", str(spread_file), "--clusters",
                                           str(clusters_file), "--replicas", "3"])
    assert result.exit_code == 2, result.output
    assert "spec.propagate[1].kind: Namespace is cluster-scoped" in result.stderr
    assert "Traceback" not in result.output


def test_unserved_versions_are_named() -> None:
    served = {"v1", "policy/v1beta1", "apps/v1"}
    assert propagate_api.unserved_problems(["v1", "policy/v1", 7, "example.com/v1"], served=served) == [
        ("spec.propagate[1].apiVersion", "the hub does not serve policy/v1 (it serves policy/v1beta1)"),
        ("spec.propagate[3].apiVersion",
         "the hub does not serve example.com/v1 (it serves no version of that group)")]


def review(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "operation": "CREATE", "name": "web", "namespace": "shop",
        "kind": {"group": "fedspread.io", "version": "v1alpha1", "kind": "FederatedSpread"},
        "resource": {"group": "fedspread.io", "version": "v1alpha1", "resource": "federatedspreads"},
        "object": obj}}


@pytest.mark.parametrize(("served", "allowed"), [
    pytest.param(frozenset({"v1", "policy/v1beta1"}), True, id="served"),
    pytest.param(frozenset({"v1", "policy/v1"}), False, id="not-served"),
    pytest.param(None, True, id="not-known-yet"),
])
def test_the_webhook_refuses_a_version_the_hub_does_not_serve(served: frozenset[str] | None,
                                                              allowed: bool) -> None:
    clock = ManualClock(T0)
    door = admission.SpecAdmission(facade.Coordinator(world.World(clock), clock=clock, coordinator_id="t"),
                                   hub_synced=lambda: True, served=lambda: served)
    answer = json.loads(door.respond(json.dumps(review(spread_doc(SERVICE, BUDGET))).encode()))["response"]
    assert answer["allowed"] is allowed, answer
    if not allowed:
        assert ("spec.propagate[1].apiVersion: the hub does not serve policy/v1beta1"
                in answer["status"]["message"])


def test_a_cluster_scoped_entry_is_refused_at_the_webhook_beside_an_unserved_version() -> None:
    clock = ManualClock(T0)
    door = admission.SpecAdmission(facade.Coordinator(world.World(clock), clock=clock, coordinator_id="t"),
                                   hub_synced=lambda: True,
                                   served=lambda: frozenset({"v1", "policy/v1beta1"}))
    doc = spread_doc({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                      "name": "x"}, {**BUDGET, "apiVersion": "policy/v1"})
    answer = json.loads(door.respond(json.dumps(review(doc)).encode()))["response"]
    assert answer["allowed"] is False
    message = answer["status"]["message"]
    assert "spec.propagate[0].kind: ClusterRoleBinding is cluster-scoped" in message
    assert "spec.propagate[1].apiVersion: the hub does not serve policy/v1" in message
    assert "spec.propagate[0].apiVersion" in message, "rbac.authorization.k8s.io/v1 is not served either"


# --- the coordinator: assignments -----------------------------------------------------------------


def hub_object(api_version: str, kind: str, name: str, **body: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}", "resourceVersion": "7"},
            **body}


def service() -> dict[str, Any]:
    return hub_object("v1", "Service", "web", spec={
        "selector": {"app": "web"}, "type": "NodePort", "clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"],
        "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}]})


def budget(**spec: Any) -> dict[str, Any]:
    return hub_object("policy/v1beta1", "PodDisruptionBudget", "web",
                      spec={"selector": {"matchLabels": {"app": "web"}}, **spec},
                      status={"currentHealthy": 0})


def placed_world(replicas: int, *entries: dict[str, Any]) -> tuple[world.World, ManualClock]:
    clock = ManualClock(T0)
    model = world.World(clock)
    for name in ("dc1", "aws"):
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    item = problems.validate(spread_api.FederatedSpread, spread_doc(*entries), what="shop/web")
    keys = model.upsert_spread(item) | model.set_target("shop/web", replicas=replicas,
                                                        template=builders.deployment("web", namespace="shop"))
    loop.recompute(model, keys, now=clock())
    return model, clock


def sent(model: world.World, clock: ManualClock) -> dict[str, assignment.Assignment]:
    entry = model.spread("shop/web")
    assert entry is not None
    messages = assignments.for_clusters(entry, model.placements["shop/web"], now=clock(),
                                        objects=model.hub_objects)
    return {name: assignment.Assignment.from_proto(m) for name, m in messages.items()}


def copies(share: assignment.Assignment) -> dict[str, Any]:
    return {d.ref: (d.api_version, d.body) for d in share.dependencies}


def test_listed_objects_ride_in_the_assignments_of_the_clusters_with_replicas() -> None:
    model, clock = placed_world(2, SERVICE, BUDGET)
    assert model.hub_object("Service", "shop/web", service()) == {"shop/web"}
    assert model.hub_object("PodDisruptionBudget", "shop/web", budget(minAvailable=2)) == {"shop/web"}
    got = sent(model, clock)
    assert sorted(got) == ["dc1"], "aws runs no replica: it is sent nothing"
    found = copies(got["dc1"])
    assert sorted(found) == ["PodDisruptionBudget/web", "Service/web"]
    version, body = found["Service/web"]
    assert version == "v1"
    assert body["spec"] == {"selector": {"app": "web"}, "type": "NodePort",
                            "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}
    assert "uid" not in body["metadata"]
    version, body = found["PodDisruptionBudget/web"]
    assert version == "policy/v1beta1"
    assert body["spec"]["minAvailable"] == 2 and "status" not in body


def test_an_absolute_budget_is_divided_in_proportion_and_a_percentage_copied() -> None:
    model, clock = placed_world(3, SERVICE, BUDGET)  # dc1 2 (its cap), aws 1
    model.hub_object("PodDisruptionBudget", "shop/web", budget(minAvailable=3))
    got = sent(model, clock)
    assert {name: copies(share)["PodDisruptionBudget/web"][1]["spec"]["minAvailable"]
            for name, share in got.items()} == {"dc1": 2, "aws": 1}
    model.hub_object("PodDisruptionBudget", "shop/web", budget(minAvailable=2))
    got = sent(model, clock)
    assert {name: copies(share)["PodDisruptionBudget/web"][1]["spec"]["minAvailable"]
            for name, share in got.items()} == {"dc1": 1, "aws": 1}, "largest remainder: the parts sum to 2"
    model.hub_object("PodDisruptionBudget", "shop/web", budget(maxUnavailable="50%"))
    got = sent(model, clock)
    assert {name: copies(share)["PodDisruptionBudget/web"][1]["spec"]
            for name, share in got.items()} == {name: {"selector": {"matchLabels": {"app": "web"}},
                                                       "maxUnavailable": "50%"} for name in ("dc1", "aws")}


def test_a_listed_object_the_hub_lacks_is_missing_and_named_without_a_copy() -> None:
    model, clock = placed_world(2, SERVICE)
    entry = model.spread("shop/web")
    assert entry is not None
    assert [(r.kind, r.name) for r in model.hub_objects.missing(
        "shop/web", entry.template, hub_objects.propagated(entry.spec.propagate))] == [("Service", "web")]
    assert copies(sent(model, clock)["dc1"]) == {"Service/web": ("v1", None)}


def test_an_object_no_spread_lists_concerns_none() -> None:
    model, _ = placed_world(2, SERVICE)
    assert model.hub_object("Service", "shop/other", hub_object("v1", "Service", "other", spec={})) == set()
    assert model.hub_object("PodDisruptionBudget", "shop/web", budget(minAvailable=1)) == set()
    changed = copy.deepcopy(service())
    assert model.hub_object("Service", "shop/web", changed) == {"shop/web"}
    assert model.hub_object("Service", "shop/web", changed) == set(), "unchanged: nothing re-sent"


def test_a_headless_service_stays_headless_in_a_member() -> None:
    headless = hub_object("v1", "Service", "db", spec={"clusterIP": "None", "clusterIPs": ["None"],
                                                       "selector": {"app": "db"}, "ports": [{"port": 5432}]})
    assert member_copy.member_copy(headless, marks={})["spec"] == {
        "clusterIP": "None", "selector": {"app": "db"}, "ports": [{"port": 5432}]}
    assert "clusterIP" not in member_copy.member_copy(service(), marks={})["spec"]
