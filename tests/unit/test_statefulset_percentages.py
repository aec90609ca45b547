"""A StatefulSet spread with a percentage it cannot honour is refused with a field path (issue 24 §2):
by the model (the Valid condition; the last valid spec stays in force, as for every invalid spec),
by the hub webhook and by `fedspread simulate` (exit 2). The rule: `federation/api/ordinal_rules.py`."""

from __future__ import annotations

import datetime
import json
import pathlib
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from federation import cli
from federation.api import problems
from federation.api import spread as spread_api
from federation.coordinator import facade
from federation.coordinator.hub import admission
from federation.coordinator.model import world
from federation.core import ordinals
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
EU = {"matchLabels": {"region": "eu"}}


def spread_doc(subsets: list[dict[str, Any]], *, kind: str = "StatefulSet") -> dict[str, Any]:
    return {"apiVersion": "fedspread.io/v1alpha1", "kind": "FederatedSpread",
            "metadata": {"name": "db", "namespace": "shop", "uid": "uid-db", "generation": 1},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": kind, "name": "db"}, "subsets": subsets}}


def found(doc: dict[str, Any]) -> dict[str, str]:
    """Path -> message of every problem of `doc` ({} when it is valid)."""
    try:
        problems.validate(spread_api.FederatedSpread, doc, what="shop/db")
    except problems.InvalidInput as error:
        return {p.path: p.message for p in error.problems}
    return {}


def test_a_percentage_cap_before_a_subset_in_the_same_cluster_is_refused_at_its_field() -> None:
    refused = found(spread_doc([{"name": "fast", "clusters": ["dc1", "dc2"], "maxReplicas": "50%"},
                                {"name": "slow", "clusters": ["dc2"]}]))
    assert set(refused) == {"spec.subsets[0].maxReplicas"}
    message = refused["spec.subsets[0].maxReplicas"]
    assert "subsets[1] ('slow')" in message and "both list dc2" in message and "integer cap" in message


def test_a_label_selector_may_share_a_cluster_so_the_cap_is_refused() -> None:
    refused = found(spread_doc([{"name": "fast", "clusterSelector": EU, "maxReplicas": "30%"},
                                {"name": "slow", "clusters": ["us1"]}]))
    assert "a clusterSelector may select the same cluster" in refused["spec.subsets[0].maxReplicas"]


@pytest.mark.parametrize("floor", ["20%", 2])
def test_a_floor_after_a_subset_in_the_same_cluster_is_refused_whatever_its_kind(floor: int | str) -> None:
    refused = found(spread_doc([{"name": "fast", "clusters": ["dc1"], "maxReplicas": 4},
                                {"name": "slow", "clusters": ["dc1"], "minReplicas": floor}]))
    assert set(refused) == {"spec.subsets[1].minReplicas"}
    assert "the first the StatefulSet removes" in refused["spec.subsets[1].minReplicas"]


@pytest.mark.parametrize("subsets", [
    pytest.param([{"name": "a", "clusters": ["dc1"], "maxReplicas": "50%"},
                  {"name": "b", "clusters": ["dc2"], "maxReplicas": "50%"}], id="clusters-of-their-own"),
    pytest.param([{"name": "a", "clusters": ["dc1"], "maxReplicas": 2},
                  {"name": "b", "clusters": ["dc1"], "maxReplicas": 6}], id="integer-caps"),
    pytest.param([{"name": "a", "clusters": ["dc1"], "maxReplicas": "60%"},
                  {"name": "b", "clusters": ["dc1"], "maxReplicas": "40%"}][1:], id="one-subset"),
    pytest.param([{"name": "a", "clusters": ["dc1"], "minReplicas": "20%", "maxReplicas": 3},
                  {"name": "b", "clusterSelector": EU, "maxReplicas": 9}], id="floor-on-the-first"),
    pytest.param([{"name": "a", "clusters": ["dc1"], "maxReplicas": 2},
                  {"name": "b", "clusters": ["dc1"], "maxReplicas": 4},
                  {"name": "c", "clusters": ["dc2"], "minReplicas": "10%"}],
                 id="floor-in-a-cluster-of-its-own"),
])
def test_what_a_statefulset_can_honour_is_accepted(subsets: list[dict[str, Any]]) -> None:
    assert found(spread_doc(subsets)) == {}


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet"])
def test_other_kinds_keep_their_percentages(kind: str) -> None:
    assert found(spread_doc([{"name": "fast", "clusters": ["dc1"], "maxReplicas": "50%"},
                             {"name": "slow", "clusters": ["dc1"], "minReplicas": "20%"}], kind=kind)) == {}


def test_why_a_shared_percentage_cap_breaks_on_scale_down() -> None:
    """The reason, on the pure ranges: a 50% cap over 6 replicas is a: 0-2, b: 3-5; the StatefulSet
    scaled to 4 removes 5 and 4 (both b's) and keeps a's three pods, above 50% of 4."""
    ranges = ordinals.ordinal_ranges([("a", 3), ("b", 3)])
    lost = ordinals.scale_down_losses(ranges, before=6, after=4)
    assert lost == {"a": 0, "b": 2}
    assert 3 - lost["a"] > 4 * 50 // 100


def test_simulate_refuses_it_with_exit_2(tmp_path: pathlib.Path) -> None:
    statefulset = {"apiVersion": "apps/v1", "kind": "StatefulSet",
                   "metadata": {"name": "db", "namespace": "shop"},
                   "spec": {"replicas": 4, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                            "template": {"metadata": {"labels": {"app": "db"}},
                                         "spec": {"containers": [{"name": "db", "image": "db"}]}}}}
    spread_file, clusters_file = tmp_path / "spread.yaml", tmp_path / "clusters.yaml"
    spread_file.write_text(yaml.safe_dump_all([statefulset, spread_doc(
        [{"name": "fast", "clusters": ["dc1"], "maxReplicas": "50%"},
         {"name": "slow", "clusters": ["dc1"]}])]))
    clusters_file.write_text(yaml.safe_dump({"clusters": [
        {"name": "dc1", "nodePools": [{"count": 2, "allocatable": {"cpu": "4", "pods": "110"}}]}]}))
    result = CliRunner().invoke(cli.main, ["simulate", "-f", str(spread_file),
                                           "--clusters", str(clusters_file)])
    assert result.exit_code == 2, result.output
    assert "spec.subsets[0].maxReplicas: a StatefulSet cannot honour a percentage cap" in result.stderr
    assert "Traceback" not in result.output


def test_the_hub_webhook_refuses_it_with_the_field_path() -> None:
    clock = ManualClock(T0)
    door = admission.SpecAdmission(facade.Coordinator(world.World(clock), clock=clock, coordinator_id="t"),
                                   hub_synced=lambda: True, served=lambda: frozenset({"v1", "apps/v1"}))
    doc = spread_doc([{"name": "fast", "clusters": ["dc1"]}, {"name": "slow", "clusters": ["dc1"],
                                                             "minReplicas": "25%"}])
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "operation": "CREATE", "name": "db", "namespace": "shop",
        "kind": {"group": "fedspread.io", "version": "v1alpha1", "kind": "FederatedSpread"},
        "resource": {"group": "fedspread.io", "version": "v1alpha1", "resource": "federatedspreads"},
        "object": doc}}
    answer = json.loads(door.respond(json.dumps(review).encode()))["response"]
    assert answer["allowed"] is False, answer
    message = answer["status"]["message"]
    assert "spec.subsets[1].minReplicas: a StatefulSet cannot keep a floor here" in message
    doc["spec"]["targetRef"]["kind"] = "Deployment"
    assert json.loads(door.respond(json.dumps(review).encode()))["response"]["allowed"] is True
