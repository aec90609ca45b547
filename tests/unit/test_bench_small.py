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

from bench import failover, inventory
from bench import run as runner


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--quick` means a tiny member cluster and a tiny federation."""
    monkeypatch.setattr(inventory, "QUICK", inventory.Size(nodes=60, pods=240))
    monkeypatch.setattr(failover, "QUICK", failover.Size(spreads=16, clusters=4))


@pytest.mark.usefixtures("tiny")
def test_both_benchmarks_record_their_keys_through_the_runner() -> None:
    lines: list[str] = []
    results = runner.run_all(quick=True, only=("inventory", "failover"), report=lines.append)

    found: dict[str, Any] = {name: results[name] for name in ("inventory", "failover")}
    assert all("error" not in item for item in found.values()), found
    json.dumps(results)  # the runner writes it as JSON
    store = found["inventory"]
    assert {"nodes", "pods", "rss_mb", "fit_ms", "pools", "pool_build_ms", "method"} <= set(store)
    assert (store["nodes"], store["pods"]) == (60, 240)
    assert store["pools"] > 0 and store["fit_ms"] > 0 and store["pool_build_ms"] > 0
    assert store["fit_pods"] > 0 and store["bound_pods"] <= 240
    moved = found["failover"]
    assert {"spreads", "clusters", "reconverge_s", "affected_spreads", "method"} <= set(moved)
    assert (moved["spreads"], moved["clusters"]) == (16, 4)
    assert moved["affected_spreads"] > 0 and moved["moved_replicas"] > 0
    assert 0 < moved["tick_s"] <= moved["reconverge_s"]
    assert any(line.startswith("inventory: ") for line in lines)
    assert any(line.startswith("failover: ") and " lost: " in line for line in lines)


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
