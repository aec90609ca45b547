"""The inventory and failover benchmarks at a tiny size, through the runner (issue 7).

Why: a benchmark is run rarely and at a size that takes minutes, so a broken one is found late.
At a tiny size both run the whole path — the inventory in a fresh interpreter through the agent's
real cache, the failover on a real gRPC server with real agent links — and the runner records
results of the shape issue 7 fixes. The numbers are not checked: they are the benchmark's output.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import failover, inventory, synthetic_cluster
from bench import run as runner
from federation.api import quantity


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--quick` means a tiny member cluster and a tiny federation."""
    monkeypatch.setattr(inventory, "QUICK", inventory.Size(nodes=60, pods=1200))
    monkeypatch.setattr(failover, "QUICK", failover.Size(spreads=16, clusters=4))


@pytest.mark.usefixtures("tiny")
def test_both_benchmarks_record_their_keys_through_the_runner() -> None:
    lines: list[str] = []
    results = runner.run_all(quick=True, only=("inventory", "failover"), report=lines.append)

    found: dict[str, Any] = {name: results[name] for name in ("inventory", "failover")}
    assert all("error" not in item for item in found.values()), found
    json.dumps(results)  # the runner writes it as JSON
    store = found["inventory"]
    assert {"nodes", "pods", "rss_mb", "fit_p50_ms", "fit_p99_ms", "pools", "pools_exact", "pool_build_ms",
            "within_goals", "method"} <= set(store)
    assert (store["nodes"], store["pods"]) == (60, 1200)
    assert 0 < store["pools"] <= 100 and store["fit_p50_ms"] > 0 and store["pool_build_ms"] > 0
    assert store["fit_p99_ms"] >= store["fit_p50_ms"] and store["rss_mb"] > store["rss_growth_mb"]
    assert 0 < store["fit_pods"] <= store["fit_pods_exact"] and store["bound_pods"] <= 1200
    moved = found["failover"]
    assert {"spreads", "clusters", "reconverge_s", "affected_spreads", "method"} <= set(moved)
    assert (moved["spreads"], moved["clusters"]) == (16, 4)
    assert moved["affected_spreads"] > 0 and moved["moved_replicas"] > 0
    assert 0 < moved["tick_s"] <= moved["reconverge_s"]
    assert any(line.startswith("inventory: ") for line in lines)
    assert any(line.startswith("failover: ") and " lost: " in line for line in lines)
    for item in found.values():  # every result states the machine's load at its start and end
        assert len(item["load"]["at_start"]) == 3 and len(item["load"]["at_end"]) == 3
    assert results["commit"] and results["command"].startswith("python -m bench.run")


def test_synthesized_cluster_has_the_asked_size_and_variety() -> None:
    plan = inventory.plan(inventory.Size(nodes=200, pods=800))
    assert (len(plan.nodes), len(plan.pods)) == (200, 800)
    phases = {pod[3] for pod in plan.pods}
    assert {"Running", "Pending"} <= phases
    assert any(pod[2] < 0 for pod in plan.pods), "some pods are unschedulable"
    assert any(w.spread for w in plan.workloads) and any(w.daemon for w in plan.workloads)
    node = inventory.node_json(plan, 3)
    pod = inventory.pod_json(plan, 5)
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == node["metadata"]["name"]
    assert pod["spec"]["containers"] and pod["metadata"]["namespace"]


def test_synthesized_load_fits_the_nodes_and_varies_from_node_to_node() -> None:
    """Pods are bound only where they fit (as the scheduler binds them), and the load differs enough
    from node to node that grouping nodes by exact load would make almost one pool per node."""
    plan = inventory.plan(inventory.Size(nodes=300, pods=6000))
    load: dict[int, list[int]] = {}
    for workload, _, node, phase in plan.pods:
        if node >= 0 and phase != "Succeeded":
            needs = synthetic_cluster.pod_needs(plan.workloads[workload])
            load[node] = [a + b for a, b in zip(load.get(node, [0, 0, 0, 0]), needs, strict=True)]
    for node, (cpu, memory, pods, gpus) in load.items():
        kind = synthetic_cluster.NODE_KINDS[plan.nodes[node][0]]
        assert cpu <= quantity.parse_quantity(kind.allocatable_cpu) * 1000 and pods <= int(kind.pods)
        assert memory <= quantity.parse_quantity(kind.allocatable_memory) and gpus <= kind.gpus
    assert len({tuple(v) for v in load.values()}) >= 0.9 * len(load)
    assert sum(1 for p in plan.pods if p[2] < 0) < 0.05 * len(plan.pods), "few pods find no room"
