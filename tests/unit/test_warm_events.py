"""A warm standby's hub events: one per object, newest state, first-seen order, current targets.

Why these cases: what `WarmEvents.drain` hands the new leader must be what a listing of the hub
at that moment would give, or the World it starts from differs from the hub's — an object
changed three times is one ADDED with its last state, a deleted one is nothing, SYNCED stays
where the first list ended, and a spread carries the Deployment as it is now, not as it was when
the spread last changed (applied after a newer Deployment event, the stale one would undo it).
"""

from __future__ import annotations

import datetime

import pytest

from federation.coordinator.hub import warm_events, watcher
from federation.coordinator.model import world
from tests.support import builders

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def spread_event(type_: watcher.EventType, name: str, *, target: watcher.WorkloadInfo | None = None,
                 generation: int = 1) -> watcher.HubEvent:
    item = builders.federated_spread(name, [{"name": "a", "clusters": ["c1"]}], generation=generation)
    return watcher.HubEvent("spread", type_, f"shop/{name}", spread=item, generation=generation,
                            target=target)


def deployment_event(type_: watcher.EventType, name: str, replicas: int) -> watcher.HubEvent:
    info = watcher.parse_workload("Deployment", builders.deployment(name, replicas, namespace="shop"))
    return watcher.HubEvent("deployment", type_, f"shop/{name}", workload=info)


def test_each_object_is_one_added_event_with_its_newest_state_in_first_seen_order() -> None:
    warm = warm_events.WarmEvents()
    warm.put(spread_event("ADDED", "web", generation=1))
    warm.put(deployment_event("ADDED", "web", 2))
    warm.put(watcher.HubEvent("spread", "SYNCED"))
    warm.put(spread_event("MODIFIED", "web", generation=3))
    warm.put(spread_event("ADDED", "late"))
    drained = warm.drain()
    assert [(e.kind, e.type, e.key) for e in drained] == [
        ("spread", "ADDED", "shop/web"), ("deployment", "ADDED", "shop/web"), ("spread", "SYNCED", ""),
        ("spread", "ADDED", "shop/late")]
    assert drained[0].generation == 3
    assert warm.seen == 5


def test_an_object_deleted_before_the_takeover_is_not_handed_over() -> None:
    warm = warm_events.WarmEvents()
    warm.put(spread_event("ADDED", "gone"))
    warm.put(spread_event("MODIFIED", "gone", generation=2))
    warm.put(spread_event("DELETED", "gone"))
    warm.put(spread_event("ADDED", "kept"))
    assert [e.key for e in warm.drain()] == ["shop/kept"]


def test_a_spread_carries_its_deployment_as_it_is_at_the_takeover() -> None:
    warm = warm_events.WarmEvents()
    old = deployment_event("ADDED", "web", 2)
    warm.put(old)
    warm.put(spread_event("ADDED", "web", target=old.workload))
    warm.put(deployment_event("MODIFIED", "web", 7))
    spread = next(e for e in warm.drain() if e.kind == "spread")
    assert spread.target is not None and spread.target.replicas == 7


def test_a_spread_whose_deployment_went_away_carries_none() -> None:
    warm = warm_events.WarmEvents()
    old = deployment_event("ADDED", "web", 2)
    warm.put(old)
    warm.put(spread_event("ADDED", "web", target=old.workload))
    warm.put(deployment_event("DELETED", "web", 2))
    assert [e.target for e in warm.drain()] == [None]


def test_applied_in_order_the_drained_events_build_the_world_a_listing_would() -> None:
    """Drained events through the one path (`apply_to_world`) equal the hub's final state applied."""
    warm = warm_events.WarmEvents()
    first = deployment_event("ADDED", "web", 2)
    warm.put(first)  # the Deployment first seen before its spread: handed over before it too
    warm.put(spread_event("ADDED", "web", target=first.workload))
    warm.put(deployment_event("MODIFIED", "web", 5))
    warmed = world.World(lambda: NOW)
    for event in warm.drain():
        watcher.apply_to_world(warmed, event)
    entry = warmed.spread("shop/web")
    assert entry is not None and entry.replicas == 5


def test_nothing_is_taken_after_the_handover() -> None:
    warm = warm_events.WarmEvents()
    warm.drain()
    with pytest.raises(RuntimeError, match="already handed over"):
        warm.put(spread_event("ADDED", "web"))
