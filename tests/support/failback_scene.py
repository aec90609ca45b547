"""A spread that overflowed, for the failback tests (issue 28): dc1 full with its own pods, aws the rest.

dc1 has one 4-cpu node, which the spread's 4 one-cpu pods fill (its agent reports them requested);
aws runs the other 2 of 6. `NEW` is the node added to dc1 that gives the preferred subset room again.
"""

from __future__ import annotations

from typing import Any

from federation.api import cluster, names
from federation.api import spread as spread_api
from federation.coordinator.model import loop, world
from federation.core import status
from tests.support import builders
from tests.support.clock import ManualClock

KEY = "shop/web"
SUBSETS: list[dict[str, Any]] = [
    {"name": "onprem", "clusters": ["dc1"]},
    {"name": "cloud", "clusters": ["aws"]},
]
FULL = cluster.NodePool(name="full", count=1, allocatable={"cpu": "4", "pods": "110"}, requested={"cpu": "4"})
NEW = builders.node_pool(1, name="new")


def the_spread(policy: str, *, cooldown: int = 60, max_surge: int = 1) -> spread_api.FederatedSpread:
    """shop/web: onprem (dc1) first, then cloud (aws), Adaptive, with `spec.rebalance` as given."""
    item = builders.federated_spread(subsets=SUBSETS, strategy="Adaptive")
    spec = item.spec.model_dump(by_alias=True, exclude_none=True)
    spec["rebalance"] = {"policy": policy, "cooldownSeconds": cooldown, "maxSurge": max_surge}
    return item.model_copy(update={"spec": spread_api.FederatedSpreadSpec.model_validate(spec)})


def overflowed(clock: ManualClock, item: spread_api.FederatedSpread) -> world.World:
    """A world where `item` runs 4 Ready pods in the full dc1 and 2 in aws."""
    model = world.World(clock)
    for name in ("dc1", "aws"):
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(2 if name == "aws" else 1)])
        model.heartbeat(name)
    keys = model.upsert_spread(item) | model.set_target(
        KEY, replicas=6, template=builders.deployment("web", namespace="shop", cpu="1"))
    loop.recompute(model, keys, now=clock())
    assert model.placements[KEY].counts() == {"onprem": {"dc1": 4}, "cloud": {"aws": 2}}
    report(model, dc1=4, aws=2)
    loop.recompute(model, model.inventory("dc1", [FULL]) | {KEY}, now=clock())
    return model


def report(model: world.World, *, dc1: int, aws: int, dc1_pending: int = 0) -> set[str]:
    """Both agents report the spread's pods (all running ones Ready) and are heard."""
    keys = model.pod_counts("dc1", {KEY: {"onprem": status.ClusterPods(running=dc1, ready=dc1,
                                                                       pending=dc1_pending)}})
    keys |= model.pod_counts("aws", {KEY: {"cloud": status.ClusterPods(running=aws, ready=aws)}})
    return keys | model.heartbeat("dc1") | model.heartbeat("aws")


def place(model: world.World, keys: set[str], clock: ManualClock) -> dict[str, dict[str, int]]:
    """Run a round for `keys` and the spread; its placement per subset per cluster."""
    loop.recompute(model, keys | {KEY}, now=clock())
    return model.placements[KEY].counts()
