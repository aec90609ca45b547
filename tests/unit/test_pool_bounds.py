"""Bounded node pools (issue 15, item 4): few pools, every node in one, never more room than real.

Claims: for any nodes, pods, budget and pod shape, the pools promise no node more pods than it
takes (per node, so also summed), through the Fraction fit and through the coordinator's numbers;
every Ready, uncordoned node is in exactly one pool, with its class's labels, taints and
allocatable; the pool count stays within the budget whenever the classes do, and exact grouping is
kept whenever it fits; a node's stated requested exceeds its real one by at most the reported
distortion. And the issue's numbers: 5,000 nodes of a few machine types with varied load fold into
at most 100 pools that keep most of the room.
"""

from __future__ import annotations

import fractions
import random
from collections.abc import Mapping, Sequence
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.api import cluster, common, quantity
from federation.core import fit, inventory

PROPERTY = hypothesis.settings(max_examples=300, deadline=None,
                               suppress_health_check=[hypothesis.HealthCheck.too_slow])

KINDS = (
    {"cpu": "4", "memory": "16Gi", "pods": "20"},
    {"cpu": "7910m", "memory": "31391952Ki", "pods": "58", "nvidia.com/gpu": "1"},
    {"cpu": "2", "memory": "8Gi"},  # no pods limit: the fit counts 110
    {"cpu": "1", "memory": "4Gi", "pods": "8", "hugepages-2Mi": "0"},
)
REQUESTS = {
    "cpu": ("0", "50m", "100m", "250m", "333m", "1", "1500m", "3"),
    "memory": ("0", "64Mi", "100M", "1Gi", "3Gi"),
    "nvidia.com/gpu": ("1",),
    "example.com/fpga": ("1",),  # offered by no node: must not matter
    "hugepages-2Mi": ("2Mi",),  # offered at 0 by one kind
}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@st.composite
def requests(draw: st.DrawFn) -> dict[str, str]:
    """A pod's requests (maybe none), sometimes of resources few or no nodes offer."""
    found = {"cpu": draw(st.sampled_from(REQUESTS["cpu"]))}
    if draw(st.booleans()):
        found["memory"] = draw(st.sampled_from(REQUESTS["memory"]))
    for name in ("nvidia.com/gpu", "example.com/fpga", "hugepages-2Mi"):
        if draw(st.integers(0, 9)) == 0:
            found[name] = REQUESTS[name][0]
    return found


@st.composite
def members(draw: st.DrawFn) -> tuple[list[inventory.NodeView], list[inventory.PodUsage]]:
    """1-30 nodes of a few classes (some not Ready or cordoned) and 0-4 pods on each, some of
    which overcommit their node (as pods that predate a resize or bypass the scheduler can)."""
    nodes = []
    usage = []
    for i in range(draw(st.integers(1, 30))):
        name = f"n{i:02d}"
        kind = draw(st.integers(0, len(KINDS) - 1))
        labels = {"kubernetes.io/hostname": name, "zone": draw(st.sampled_from(("a", "b")))}
        taints = (GPU_TAINT,) if draw(st.integers(0, 4)) == 0 else ()
        nodes.append(inventory.NodeView(
            name=name, labels=labels, taints=taints, allocatable=KINDS[kind],
            ready=draw(st.integers(0, 9)) > 0, unschedulable=draw(st.integers(0, 9)) == 0))
        for _ in range(draw(st.integers(0, 4))):
            usage.append(pod(name, draw(requests())))
    return nodes, usage


@st.composite
def shapes(draw: st.DrawFn) -> fit.PodShape:
    """A pod shape: some requests, maybe a zone selector, maybe tolerating the GPU taint."""
    selector = {"zone": draw(st.sampled_from(("a", "b")))} if draw(st.booleans()) else {}
    tolerations = (common.Toleration(key="nvidia.com/gpu", operator="Exists"),) if draw(st.booleans()) else ()
    return fit.PodShape(requests=parsed(draw(requests())), node_selector=selector, tolerations=tolerations)


def parsed(texts: Mapping[str, str]) -> dict[str, fractions.Fraction]:
    return {name: quantity.parse_quantity(text) for name, text in texts.items()}


def pod(node: str, texts: Mapping[str, str]) -> inventory.PodUsage:
    return inventory.PodUsage(node_name=node, requests=parsed(texts))


def real_pools(nodes: Sequence[inventory.NodeView], usage: Sequence[inventory.PodUsage]
               ) -> dict[str, cluster.NodePool]:
    """Per schedulable node, a pool of that node alone with its exact requested amounts."""
    exact = inventory.pooling(nodes, usage, budget=10**6)
    return {name: pool.model_copy(update={"count": 1, "name": name})
            for pool in exact.pools for name in exact.members[pool.name]}


def schedulable(nodes: Sequence[inventory.NodeView]) -> set[str]:
    return {n.name for n in nodes if n.ready and not n.unschedulable}


@PROPERTY
@hypothesis.given(member=members(), budget=st.integers(1, 12),
                  pod_shapes=st.lists(shapes(), min_size=1, max_size=4))
def test_bounded_pools_never_promise_more_than_the_nodes_take(
    member: tuple[list[inventory.NodeView], list[inventory.PodUsage]], budget: int,
    pod_shapes: list[fit.PodShape],
) -> None:
    nodes, usage = member
    found = inventory.pooling(nodes, usage, budget=budget)
    real = real_pools(nodes, usage)
    for shape in pod_shapes:
        requests = fit.requests_of(shape)
        promised = 0
        for pool in found.pools:
            per_node = fit.pool_capacity(pool.model_copy(update={"count": 1}), shape)
            numbers = fit.pool_of(pool)
            admitted = fit.pool_admits(pool, shape)
            coordinator = fit.free_pods(numbers.allocatable, numbers.requested, requests) if admitted else 0
            assert coordinator == per_node
            for name in found.members[pool.name]:
                assert fit.pool_capacity(real[name], shape) >= per_node, (pool, real[name], shape)
            promised += fit.pool_capacity(pool, shape)
        assert sum(fit.pool_capacity(p, shape) for p in real.values()) >= promised


@PROPERTY
@hypothesis.given(member=members(), budget=st.integers(1, 12))
def test_every_node_in_one_pool_within_the_budget(
    member: tuple[list[inventory.NodeView], list[inventory.PodUsage]], budget: int,
) -> None:
    nodes, usage = member
    found = inventory.pooling(nodes, usage, budget=budget)
    exact = inventory.pooling(nodes, usage, budget=10**6)
    listed = [name for pool in found.pools for name in found.members[pool.name]]
    assert sorted(listed) == sorted(schedulable(nodes))
    assert sum(p.count for p in found.pools) == len(listed)
    assert all(p.count == len(found.members[p.name]) for p in found.pools)
    by_name = {n.name: n for n in nodes}
    for pool in found.pools:
        for name in found.members[pool.name]:
            node = by_name[name]
            assert pool.allocatable == node.allocatable
            assert pool.labels == {k: v for k, v in node.labels.items() if k != "kubernetes.io/hostname"}
            assert [t.model_dump(exclude={"time_added"}) for t in pool.taints] == list(node.taints)
    assert found.classes == len({(p.model_dump_json(include={"labels", "taints", "allocatable"}))
                                 for p in exact.pools})
    assert found.exact == len(exact.pools)
    if found.classes <= budget:
        assert len(found.pools) <= budget and not found.over_budget
    else:
        assert len(found.pools) == found.classes and found.over_budget
    if len(exact.pools) <= budget:
        assert found.pools == exact.pools and found.distortion == 0.0


@PROPERTY
@hypothesis.given(member=members(), budget=st.integers(1, 12))
def test_stated_requests_exceed_real_ones_by_at_most_the_distortion(
    member: tuple[list[inventory.NodeView], list[inventory.PodUsage]], budget: int,
) -> None:
    nodes, usage = member
    found = inventory.pooling(nodes, usage, budget=budget)
    real = real_pools(nodes, usage)
    for pool in found.pools:
        for name in found.members[pool.name]:
            within(pool, real[name], distortion=found.distortion)
    assert all(0.0 <= share <= 1.0 for share in found.kept.values())


def within(pool: cluster.NodePool, node: cluster.NodePool, *, distortion: float) -> None:
    """Per resource, the pool states at least the node's requested; per resource the node offers
    (and so that can bind a pod) below its allocatable, at most `distortion` of allocatable more."""
    for name, text in node.requested.items():
        stated, really = quantity.parse_quantity(pool.requested[name]), quantity.parse_quantity(text)
        assert stated >= really, (name, pool, node)
        offered = quantity.parse_quantity(node.allocatable.get(name, "0"))
        if name == fit.PODS and fit.PODS not in node.allocatable:
            offered = fractions.Fraction(fit.DEFAULT_MAX_PODS)
        if offered > 0 and really < offered:
            assert float((min(stated, offered) - really) / offered) <= distortion + 1e-9, (name, pool, node)


def test_small_members_are_exact_and_named_as_before() -> None:
    nodes = [inventory.NodeView(name=f"n{i}", allocatable=KINDS[0]) for i in range(4)]
    usage = [pod("n1", {"cpu": "1"}), pod("n2", {"cpu": "500m"}), pod("n2", {"cpu": "500m"})]
    found = inventory.pooling(nodes, usage)
    assert [(p.name, p.count, p.requested) for p in found.pools] == [
        ("n0+1", 2, {"pods": "0"}), ("n1", 1, {"cpu": "1", "pods": "1"}),
        ("n2", 1, {"cpu": "1", "pods": "2"})]
    assert (found.classes, found.exact, found.distortion, found.kept) == (1, 3, 0.0, {})
    assert not found.over_budget


def test_over_budget_merges_load_and_states_the_most() -> None:
    nodes = [inventory.NodeView(name=f"n{i}", allocatable=KINDS[0]) for i in range(4)]
    usage = [pod("n1", {"cpu": "1", "memory": "1Gi"}), pod("n2", {"cpu": "3"}), pod("n2", {"cpu": "500m"})]
    [whole] = inventory.pools(nodes, usage, budget=1)
    assert (whole.name, whole.count) == ("n0+3", 4)
    assert whole.requested == {"cpu": "3500m", "memory": "1Gi", "pods": "2"}
    two = inventory.pooling(nodes, usage, budget=2)
    assert len(two.pools) == 2 and sum(p.count for p in two.pools) == 4 and two.exact == 3
    assert 0.0 < two.distortion < 1.0


def test_more_classes_than_the_budget_one_pool_each_nodes_kept() -> None:
    nodes = [inventory.NodeView(name=f"n{i}", labels={"rack": str(i % 5)}, allocatable=KINDS[0])
             for i in range(20)]
    usage = [pod(f"n{i}", {"cpu": f"{i * 100}m"}) for i in range(20)]
    found = inventory.pooling(nodes, usage, budget=3)
    assert found.over_budget and found.classes == 5 and len(found.pools) == 5
    assert sum(p.count for p in found.pools) == 20
    assert inventory.pooling(nodes, usage, budget=5).over_budget is False


def test_the_order_of_nodes_and_pods_does_not_matter() -> None:
    rng = random.Random(3)
    nodes = [inventory.NodeView(name=f"n{i:03d}", labels={"zone": "ab"[i % 2]}, allocatable=KINDS[i % 2])
             for i in range(120)]
    usage = [pod(f"n{rng.randrange(120):03d}", {"cpu": rng.choice(REQUESTS["cpu"])}) for _ in range(400)]
    assert inventory.pools(nodes, usage, budget=9) == inventory.pools(nodes[::-1], usage[::-1], budget=9)


def test_a_budget_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        inventory.pools([], [], budget=0)


@pytest.mark.parametrize(("amount", "resource", "text"), [
    (fractions.Fraction(1, 4), "cpu", "250m"),
    (fractions.Fraction(3 * 2**30), "memory", "3Gi"),
    (fractions.Fraction(1, 3), "cpu", "333333334n"),
    (fractions.Fraction(1, 10**12), "cpu", "1n"),
    (fractions.Fraction(7), "pods", "7"),
])
def test_requested_texts_never_round_down(amount: fractions.Fraction, resource: str, text: str) -> None:
    assert quantity.format_at_least(amount, resource=resource) == text
    assert quantity.parse_quantity(text) >= amount


# --- the issue's numbers ------------------------------------------------------------------------

MACHINES = (
    {"cpu": "7910m", "memory": "31391952Ki", "pods": "58"},
    {"cpu": "15890m", "memory": "63946588Ki", "pods": "234"},
    {"cpu": "15890m", "memory": "128989180Ki", "pods": "234"},
    {"cpu": "7910m", "memory": "31391952Ki", "pods": "58", "nvidia.com/gpu": "1"},
)


def issue_member(seed: int = 15) -> tuple[list[inventory.NodeView], list[inventory.PodUsage]]:
    """5,000 nodes: four machine types in three zones, on-demand or spot (24 classes), loaded
    from idle to full, a pod count each, the GPU taken on half the GPU nodes."""
    rng = random.Random(seed)
    nodes: list[inventory.NodeView] = []
    usage: list[inventory.PodUsage] = []
    for i in range(5000):
        kind = rng.choices(range(len(MACHINES)), weights=(35, 30, 30, 5))[0]
        name = f"ip-10-0-{i // 256}-{i % 256}"
        labels: dict[str, Any] = {"kubernetes.io/hostname": name, "zone": f"z{i % 3}",
                                  "type": f"m{kind}", "spot": str(rng.random() < 0.2)}
        taints = ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},) if kind == 3 else ()
        nodes.append(inventory.NodeView(name=name, labels=labels, taints=taints, allocatable=MACHINES[kind]))
        allocatable = parsed(MACHINES[kind])
        load = rng.betavariate(2, 2)  # most nodes half full, some idle, some full
        pods = max(1, round(load * int(allocatable["pods"]) * rng.uniform(0.2, 0.6)))
        cpu = allocatable["cpu"] * fractions.Fraction(load).limit_denominator(1000) / pods
        share = fractions.Fraction(load * rng.uniform(0.3, 1)).limit_denominator(1000)
        memory = allocatable["memory"] * share / pods
        for _ in range(pods):
            usage.append(inventory.PodUsage(name, {"cpu": fractions.Fraction(round(cpu * 1000), 1000),
                                                   "memory": fractions.Fraction(round(memory))}))
        if kind == 3 and rng.random() < 0.5:
            usage.append(inventory.PodUsage(name, {"nvidia.com/gpu": fractions.Fraction(1)}))
    return nodes, usage


def test_five_thousand_nodes_of_varied_load_fold_into_at_most_a_hundred_pools() -> None:
    nodes, usage = issue_member()
    found = inventory.pooling(nodes, usage)
    assert found.exact > 4000, "exact grouping fragments: almost every node is a pool"
    assert found.classes == 24 and len(found.pools) <= 100 and not found.over_budget
    assert sum(p.count for p in found.pools) == 5000
    real = real_pools(nodes, usage)
    for pool in found.pools:
        for name in found.members[pool.name]:
            within(pool, real[name], distortion=found.distortion)
    web = fit.PodShape(requests=parsed({"cpu": "600m", "memory": "640Mi"}))
    gpu = fit.PodShape(requests=parsed({"cpu": "1", "nvidia.com/gpu": "1"}),
                       tolerations=(common.Toleration(key="nvidia.com/gpu", operator="Exists"),))
    # Measured with this seed: 82% of the web pods and 73% of the GPU pods that really fit, 81% of
    # the free cpu (load spread evenly from idle to full is the hard case; the benchmark's ~87%).
    for shape, share in ((web, 0.75), (gpu, 0.65)):
        exact = sum(fit.pool_capacity(p, shape) for p in real.values())
        bounded = sum(fit.pool_capacity(p, shape) for p in found.pools)
        assert share * exact <= bounded <= exact, (shape, bounded, exact)
    assert 0.75 <= found.kept["cpu"] <= 1.0, found.kept
