"""A heartbeat brings back exactly the spreads for which its cluster was lost, whatever path it takes.

Why these tests: `World.heartbeat` hears a cluster without looking at its spreads when it was
silent for less than the shortest `clusterLostSeconds` of any spread. That shortcut is right only
while the shortest limit it keeps is the shortest there is: a spread created, edited to a shorter
limit or deleted must change it. Each case below fails if the kept limit goes stale in either
direction — a returning cluster whose spreads are not placed again (its replicas stay where
failover moved them), or spreads placed again for a cluster that was never lost.
"""

from __future__ import annotations

import datetime
from typing import Any

from federation.coordinator.model import world as world_model
from tests.support import builders
from tests.support.clock import ManualClock


def _spread(name: str, clusters: list[str], *, lost_seconds: int, generation: int = 1) -> Any:
    return builders.federated_spread(name, [{"name": "home", "clusters": clusters}], generation=generation,
                                     lost_seconds=lost_seconds, uid=f"uid-{name}")


def _federation() -> tuple[world_model.World, ManualClock]:
    clock = ManualClock()
    model = world_model.World(clock)
    for name in ("dc1", "dc2"):
        model.upsert_cluster(name, labels={})
        model.heartbeat(name)
    return model, clock


def test_a_cluster_silent_past_its_spreads_limit_brings_them_back() -> None:
    model, clock = _federation()
    model.upsert_spread(_spread("web", ["dc1"], lost_seconds=60))
    clock.advance(30)
    assert model.heartbeat("dc1") == set(), "silent 30 s of 60: never lost"
    clock.advance(90)
    assert model.heartbeat("dc1") == {"shop/web"}, "silent 90 s of 60: lost, and back now"


def test_the_shortest_limit_follows_spreads_created_edited_and_deleted() -> None:
    model, clock = _federation()
    model.upsert_spread(_spread("web", ["dc1"], lost_seconds=60))
    model.heartbeat("dc1")  # the shortest limit is now known: 60 s
    model.delete_spread("shop/web")
    model.upsert_spread(_spread("api", ["dc1"], lost_seconds=120))
    clock.advance(90)
    assert model.heartbeat("dc1") == set(), "the 60 s spread is gone: 90 s of 120 is not lost"
    model.upsert_spread(_spread("api", ["dc1"], lost_seconds=60, generation=2))  # edited: shorter
    clock.advance(90)
    assert model.heartbeat("dc1") == {"shop/api"}, "edited to 60 s: 90 s silent is lost, and back"
    model.upsert_spread(_spread("api", ["dc1"], lost_seconds=120, generation=3))
    model.heartbeat("dc2")  # the shortest limit is now known: 120 s
    model.upsert_spread(_spread("fast", ["dc2"], lost_seconds=10))  # created: shorter
    clock.advance(30)
    assert model.heartbeat("dc2") == {"shop/fast"}, "silent 30 s of 10: lost, and back"
    assert model.heartbeat("dc1") == set(), "a shorter limit of another cluster's spread loses none here"


def test_a_federation_without_spreads_hears_every_cluster() -> None:
    model, clock = _federation()
    clock.advance(3600)
    assert model.heartbeat("dc1") == set()
    assert not model.liveness.lost("dc1", after=datetime.timedelta(seconds=1)), "heard just now"
