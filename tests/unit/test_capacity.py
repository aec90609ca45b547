"""Capacity simulations (the ClusterShard's answers) and what the coordinator keeps per cluster.

Pure: `capacity.free_capacity`, `capacity.queries_for`, the in-process backend, the World's
member-workload bookkeeping, and the Valid=False status of a spread whose spec was rejected.
"""

from __future__ import annotations

import datetime

from federation.api import cluster, common
from federation.api import spread as spread_api
from federation.coordinator import backends
from federation.coordinator.model import capacity, world
from federation.core import fit, pending_deduction, placement, spread_status, status

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
ONE_CPU = fit.shape_from_pod_spec({"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]})
GPU_POOL = cluster.NodePool(name="gpu", count=1, labels={"pool": "gpu"},
                            allocatable={"cpu": "8", "pods": "110"})
STD_POOL = cluster.NodePool(name="std", count=2, labels={"pool": "std"},
                            allocatable={"cpu": "4", "pods": "110"}, requested={"cpu": "1"})


def spec() -> spread_api.FederatedSpreadSpec:
    return spread_api.FederatedSpreadSpec.model_validate({
        "targetRef": {"name": "web"},
        "subsets": [
            {"name": "gpu", "clusters": ["dc1"], "requiredNodeSelectorTerm": {
                "matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}},
            {"name": "any", "clusters": ["dc1", "aws"]},
        ],
    })


def test_free_capacity_counts_pending_pods_and_knows_when_it_knows_nothing() -> None:
    query = capacity.CapacityQuery(cluster="dc1", shape=ONE_CPU)
    assert capacity.free_capacity([STD_POOL], query) == 6  # 2 nodes x (4 - 1) cpu
    pending = (pending_deduction.PendingPods(cluster="dc1", shape=ONE_CPU, count=2),
               pending_deduction.PendingPods(cluster="aws", shape=ONE_CPU, count=5))  # another cluster's
    assert capacity.free_capacity([STD_POOL], capacity.CapacityQuery("dc1", ONE_CPU, pending)) == 4
    assert capacity.free_capacity([], query) == 0
    assert capacity.free_capacity(None, query) is None


def test_queries_follow_each_subsets_node_selection() -> None:
    snap = cluster.CapacitySnapshot(clusters=[
        cluster.ClusterCapacity(name="dc1", node_pools=[GPU_POOL, STD_POOL]),
        cluster.ClusterCapacity(name="aws", node_pools=[STD_POOL]),
    ])
    result = placement.place(spec(), replicas=3, snapshot=snap, shape=ONE_CPU)
    queries = capacity.queries_for(spec(), result, shape=ONE_CPU)
    assert sorted(queries) == [("any", "aws"), ("any", "dc1"), ("gpu", "dc1")]
    answers = dict(zip(queries, capacity.answer_on(snap, list(queries.values())), strict=True))
    assert answers[("gpu", "dc1")] == 8  # only the gpu node: 8 cpu
    assert answers[("any", "dc1")] == 14  # both pools
    assert answers[("any", "aws")] == 6


def test_the_local_backend_answers_from_the_latest_report() -> None:
    backend = backends.LocalBackend()
    query = capacity.CapacityQuery(cluster="dc1", shape=ONE_CPU)
    assert backend.free_capacity([query]) == [None]
    backend.report_inventory("dc1", [STD_POOL])
    backend.report_inventory("dc1", [STD_POOL, GPU_POOL])
    assert backend.free_capacity([query, query]) == [14, 14]
    backend.forget_cluster("dc1")
    assert backend.free_capacity([query]) == [None]


def test_the_world_keeps_member_workloads_per_cluster_without_replacing() -> None:
    model = world.World(lambda: NOW)
    model.upsert_cluster("dc1", labels={})
    item = spread_api.FederatedSpread.model_validate(
        {"metadata": {"name": "web", "namespace": "shop"}, "spec": spec().model_dump(by_alias=True)})
    model.upsert_spread(item)
    up = status.WorkloadStatus(replicas=3, ready=2, available=2, updated=3)
    assert model.pod_counts("dc1", {}, workloads={"shop/web": up}) == set()  # feeds status only
    assert model.pods.workloads_for("shop/web") == {"dc1": up}
    model.pod_counts("dc1", {}, workloads={})  # latest wins
    assert model.pods.workloads_for("shop/web") == {}
    model.pod_counts("dc1", {}, workloads={"shop/web": up})
    model.delete_cluster("dc1")  # the hub object only: the cluster is kept
    assert model.pods.workloads_for("shop/web") == {"dc1": up}
    model.upsert_cluster("dc1", labels={}, decommission=True)
    model.delete_cluster("dc1")  # decommissioned, nothing held: forgotten
    assert model.pods.workloads_for("shop/web") == {}


def test_a_rejected_spec_keeps_the_last_valid_status_and_says_why() -> None:
    ready = common.Condition(type="Ready", status="True", reason="AllReady", last_transition_time=NOW)
    base = spread_api.FederatedSpreadStatus(observed_generation=3, replicas=5, conditions=[
        common.Condition(type="Valid", status="True", reason="SpecValid", last_transition_time=NOW), ready])
    later = NOW + datetime.timedelta(minutes=5)
    found = [f"spec.subsets[{i}].maxReplicas: must be at most 100%" for i in range(12)]
    got = spread_status.invalid_spread_status(base, generation=4, problems=found, now=later)
    valid = next(c for c in got.conditions if c.type == "Valid")
    assert (valid.status, valid.reason, valid.observed_generation) == ("False", "InvalidSpec", 4)
    assert valid.message.startswith("spec.subsets[0].maxReplicas: must be at most 100%; ")
    assert "and 2 more" in valid.message and "last valid spec stays in force" in valid.message
    assert valid.last_transition_time == later.replace(microsecond=0)
    assert got.observed_generation == 3 and got.replicas == 5  # still the last valid spec's
    assert ready in got.conditions
    again = spread_status.invalid_spread_status(
        got, generation=4, problems=found, now=later + datetime.timedelta(1))
    kept = next(c for c in again.conditions if c.type == "Valid")
    assert kept.last_transition_time == valid.last_transition_time
    never = spread_status.invalid_spread_status(None, generation=1, problems=["spec: bad"], now=NOW)
    assert [c.type for c in never.conditions] == ["Valid"]
    assert "nothing is placed" in never.conditions[0].message
