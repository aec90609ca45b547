"""The agent's inventory: identical nodes grouped into pools, cordoned/unready left out, totals."""

from __future__ import annotations

from typing import Any

import pytest

from federation.api import cluster, quantity
from federation.core import inventory

ALLOC = {"cpu": "8", "memory": "32Gi", "pods": "110"}
NO_SCHEDULE = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def node(name: str, **kwargs: Any) -> inventory.NodeView:
    labels = {"kubernetes.io/hostname": name, "type": "ecs", **kwargs.pop("labels", {})}
    return inventory.NodeView(
        name=name, labels=labels, allocatable=kwargs.pop("allocatable", ALLOC), **kwargs
    )


def pod(node_name: str, **requests: str) -> inventory.PodUsage:
    return inventory.PodUsage(
        node_name=node_name, requests={k: quantity.parse_quantity(v) for k, v in requests.items()}
    )


def summary(pools: list[Any]) -> list[tuple[str, int]]:
    return [(p.name, p.count) for p in pools]


CASES = [
    pytest.param(
        [node("n1"), node("n2"), node("n3")],
        [],
        [("n1+2", 3)],
        id="identical-nodes-one-pool-hostname-ignored",
    ),
    pytest.param(
        [node("n1"), node("n2", labels={"type": "vk"}), node("n3")],
        [],
        [("n1+1", 2), ("n2", 1)],
        id="differing-label-splits",
    ),
    pytest.param(
        [node("n1", labels={"node-name": "n1"}), node("n2", labels={"node-name": "n2"})],
        [],
        [("n1+1", 2)],
        id="label-valued-node-name-ignored",
    ),
    pytest.param(
        [
            node("n1", taints=(NO_SCHEDULE,)),
            node("n2"),
            node("n3", taints=({**NO_SCHEDULE, "timeAdded": "t"},)),
        ],
        [],
        [("n1+1", 2), ("n2", 1)],
        id="differing-taints-split-time-added-ignored",
    ),
    pytest.param(
        [
            node("n1"),
            node("n2", allocatable={**ALLOC, "cpu": "16"}),
            node("n3", allocatable={**ALLOC, "cpu": "8000m"}),
        ],
        [],
        [("n1+1", 2), ("n2", 1)],
        id="differing-allocatable-splits-equal-quantities-group",
    ),
    pytest.param(
        [node("n1"), node("n2"), node("n3"), node("n4")],
        [pod("n1", cpu="1"), pod("n2", cpu="500m"), pod("n2", cpu="500m"), pod("n3", cpu="1")],
        [("n1+1", 2), ("n2", 1), ("n4", 1)],
        id="differing-requested-splits-requests-and-pod-count",
    ),
    pytest.param(
        [node("n1", unschedulable=True), node("n2", ready=False), node("n3")],
        [pod("n1", cpu="1")],
        [("n3", 1)],
        id="cordoned-and-unready-excluded",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        [pod("gone", cpu="1"), pod("", cpu="1")],
        [("n1+1", 2)],
        id="pods-on-unknown-or-no-node-ignored",
    ),
    pytest.param([], [pod("n1")], [], id="no-nodes"),
]


@pytest.mark.parametrize(("nodes", "usage", "expected"), CASES)
def test_pools(nodes: list[inventory.NodeView], usage: list[inventory.PodUsage], expected: Any) -> None:
    assert summary(inventory.pools(nodes, usage)) == expected


def test_pool_contents() -> None:
    nodes = [node("b", taints=(NO_SCHEDULE,)), node("a", taints=(NO_SCHEDULE,))]
    usage = [pod("a", cpu="250m", memory="1Gi"), pod("b", cpu="250m", memory="1Gi"), pod("b", cpu="0")]
    usage.append(pod("a"))
    [pool] = inventory.pools(nodes, usage)
    assert pool.name == "a+1" and pool.count == 2
    assert pool.labels == {"type": "ecs"}
    assert [t.model_dump(exclude={"time_added"}) for t in pool.taints] == [NO_SCHEDULE]
    assert pool.allocatable == ALLOC
    assert pool.requested == {"cpu": "250m", "memory": "1Gi", "pods": "2"}
    assert cluster.NodePool.model_validate(pool.model_dump(by_alias=True)) == pool


def test_idle_node_requests_zero_pods() -> None:
    [pool] = inventory.pools([node("n1")], [])
    assert pool.requested == {"pods": "0"}


def test_deterministic_whatever_the_input_order() -> None:
    nodes = [node(f"n{i}", labels={"type": "ab"[i % 2]}) for i in range(10)]
    usage = [pod(f"n{i % 4}", cpu="1") for i in range(12)]
    assert inventory.pools(nodes, usage) == inventory.pools(nodes[::-1], usage[::-1])


def test_five_thousand_nodes_twenty_thousand_pods() -> None:
    kinds = [{"cpu": "8", "memory": "32Gi", "pods": "110"}, {"cpu": "16", "memory": "64Gi", "pods": "110"}]
    nodes = [
        node(
            f"node-{i:05d}",
            labels={"zone": f"z{i % 3}", "type": "ab"[i % 2]},
            allocatable=kinds[i % 2],
            unschedulable=i % 100 == 99,
        )
        for i in range(5000)
    ]
    # 4 pods per node: the load repeats every 6 nodes, so loads and kinds make few distinct pools.
    usage = [pod(f"node-{i % 5000:05d}", cpu=f"{(i % 6 + 1) * 100}m", memory="256Mi") for i in range(20000)]
    pools = inventory.pools(nodes, usage)
    assert sum(p.count for p in pools) == 5000 - 50
    assert len(pools) == len({p.name for p in pools}) <= 3 * 2 * 6
    assert all(p.requested["pods"] == "4" for p in pools)
    count, allocatable, requested = inventory.capacity_summary(nodes, usage)
    assert count == 5000
    assert allocatable == {"cpu": "60000", "memory": "240000Gi", "pods": "550000"}
    assert requested["pods"] == "20000" and requested["memory"] == "5000Gi"


def test_capacity_summary_totals() -> None:
    nodes = [
        node("n1"),
        node("n2", allocatable={"cpu": "3500m", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "1"}),
        node("n3", unschedulable=True),
    ]
    usage = [pod("n1", cpu="1", memory="512Mi"), pod("n3", cpu="250m"), pod("gone", cpu="99")]
    count, allocatable, requested = inventory.capacity_summary(nodes, usage)
    assert count == 3
    assert allocatable == {"cpu": "19500m", "memory": "80Gi", "nvidia.com/gpu": "1", "pods": "330"}
    assert requested == {"cpu": "1250m", "memory": "512Mi", "pods": "2"}


def test_capacity_summary_empty() -> None:
    assert inventory.capacity_summary([], []) == (0, {}, {"pods": "0"})


def test_bad_allocatable_names_the_node() -> None:
    with pytest.raises(ValueError, match="node 'n1'"):
        inventory.pools([node("n1", allocatable={"cpu": "lots"})], [])
