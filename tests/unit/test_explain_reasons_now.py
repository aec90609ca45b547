"""Explain gives each subset the reasons of placing it now, where that gives the numbers it holds.

A settled spread is not placed again when only free capacity changes, so the reasons stored with its
placement can be those of an older inventory. Seen in the demo's sandbox test: dc1's pods were
placed while its agent's report still showed room, so the stored placement said the placement's
stability held onprem at 4; the next report showed dc1 full, the spread was not placed again, and
Explain kept saying nothing of dc1's capacity. Explain now reads the reasons of the placement it
simulates whenever that placement gives the subset the same replicas in the same clusters.
"""

from __future__ import annotations

import datetime

from federation.api import names
from federation.coordinator import facade
from federation.coordinator.model import loop, world
from federation.coordinator.services import source
from federation.core import placement
from federation.core.reasons import ReasonKind
from tests.support import builders
from tests.support.clock import ManualClock

KEY = "shop/web"
SUBSETS = [{"name": "onprem", "clusters": ["dc1"], "maxReplicas": 6},
           {"name": "eu", "clusterSelector": {"matchLabels": {names.REGION_LABEL: "eu"}}}]
FULL = [builders.node_pool(2, cpu="2")]
"""dc1 as the demo has it: two 2-CPU nodes, room for four 1-CPU pods."""


def placed_twelve(clock: ManualClock) -> world.World:
    """The demo scaled to 12: onprem holds 4 of its cap of 6 in dc1, eu the rest."""
    model = world.World(clock)
    model.upsert_cluster("dc1", labels={names.REGION_LABEL: "onprem"})
    model.upsert_cluster("eu1", labels={names.REGION_LABEL: "eu"})
    model.inventory("dc1", FULL)
    model.inventory("eu1", [builders.node_pool(10)])
    for name in ("dc1", "eu1"):
        model.heartbeat(name)
    keys = model.upsert_spread(builders.federated_spread(subsets=SUBSETS, strategy="Adaptive"))
    keys |= model.set_target(KEY, replicas=12, template=builders.deployment(namespace="shop"))
    loop.recompute(model, keys, now=clock())
    return model


def kinds(subset: placement.SubsetPlacement) -> set[ReasonKind]:
    return {reason.kind for reason in subset.reasons}


def test_explain_names_the_capacity_an_inventory_that_caught_up_shows() -> None:
    clock = ManualClock(datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC))
    model = placed_twelve(clock)
    assert model.placements[KEY].subsets[0].clusters == {"dc1": 4}
    model.inventory("dc1", [builders.node_pool(3, cpu="2")])  # a report that still shows room
    loop.recompute(model, {KEY}, now=clock())
    stored = model.placements[KEY].subsets[0]
    assert stored.clusters == {"dc1": 4} and kinds(stored) == {ReasonKind.ROOM_LEFT}
    assert not model.inventory("dc1", FULL)  # full again: nothing is placed again for it

    explained = source.WorldSource(facade.Coordinator(model, clock=clock, coordinator_id="t")).explained(KEY)

    assert explained is not None
    onprem = explained.placement.subsets[0]
    assert (onprem.clusters, onprem.capacity) == ({"dc1": 4}, 4)
    assert onprem.reason_texts == ("capacity: dc1 fits 4 (cpu)",)
    assert model.placements[KEY].subsets[0].reasons == stored.reasons  # a question stores nothing


def test_explain_keeps_the_stored_reasons_where_placing_now_would_give_other_numbers() -> None:
    """With room for two more in dc1 and the spread scaled to 14 but not placed yet, placing now
    would give onprem 6: the stored reasons explain the stored 4, so they stay; the capacity is
    today's."""
    clock = ManualClock(datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC))
    model = placed_twelve(clock)
    stored = model.placements[KEY].subsets[0]
    model.inventory("dc1", [builders.node_pool(3, cpu="2")])
    model.set_target(KEY, replicas=14, template=builders.deployment(namespace="shop"))

    explained = source.WorldSource(facade.Coordinator(model, clock=clock, coordinator_id="t")).explained(KEY)

    assert explained is not None
    onprem = explained.placement.subsets[0]
    assert onprem.clusters == {"dc1": 4} and onprem.reasons == stored.reasons
    assert onprem.capacity == 6
