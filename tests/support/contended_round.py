"""A world whose round of all its spreads is contended: the one the round tests on both backends use.

Twelve Adaptive spreads of one-cpu pods, 1 to 3 replicas each, fill the first cluster (one node of
four cpu) first and overflow to the others: placed against one snapshot, each would take the first
cluster's slots, so the round must place some of them again.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from federation.api import spread as spread_api
from federation.coordinator.model import world
from tests.support import builders


def contended_world(
    nodes: Mapping[str, int], *, now: datetime.datetime, patched: bool = False,
) -> world.World:
    """Clusters `nodes` (name: nodes of 4 cpu; the first is the contended one, the others the rest),
    every one heard at `now`, and the twelve spreads, none placed yet. `patched`: every third
    spread's first subset raises its pods to two cpu (a subset's patch), so its subsets' pods differ."""
    names = list(nodes)
    model = world.World(lambda: now)
    for name, count in nodes.items():
        model.upsert_cluster(name, labels={})
        model.inventory(name, [builders.node_pool(count)])
        model.heartbeat(name)
    for i in range(12):
        small: dict[str, object] = {"name": "small", "clusters": names[:1]}
        if patched and i % 3 == 0:
            raised = {"name": "m", "resources": {"requests": {"cpu": "2"}}}
            small["patch"] = {"spec": {"containers": [raised]}}
        item = spread_api.FederatedSpread.model_validate({
            "metadata": {"name": f"s{i:02d}", "namespace": "shop"},
            "spec": {"targetRef": {"name": f"s{i:02d}"}, "scheduleStrategy": {"type": "Adaptive"},
                     "subsets": [small, {"name": "rest", "clusters": names[1:]}]}})
        model.upsert_spread(item)
        model.set_target(item.key, replicas=1 + i % 3, template={"spec": {"template": {"spec": {
            "containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}}}})
    return model
