"""The coordinator's garbage collector (`federation.collector`): thresholds set where a coordinator or
a shard actor runs, restorable, and never the interpreter's defaults there; paused during a
placement round and on again after it, whatever the round does; what a large round leaves alive
frozen where the process freezes rounds, thawed `THAW_SECONDS` later and not frozen again before a
full collection has walked it. The real collector throughout (its freeze count, its stats)."""

from __future__ import annotations

import datetime
import gc
from collections.abc import Iterator

import pytest

from federation import collector
from federation.api import names
from federation.coordinator import facade, shards
from federation.coordinator.model import world
from tests.support import builders
from tests.support.clock import ManualClock


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    before, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*before)
    collector.freeze_rounds(False)  # and thawed
    if enabled:
        gc.enable()


def test_tune_sets_the_thresholds_and_returns_the_ones_before() -> None:
    gc.set_threshold(700, 10, 10)
    assert collector.tune() == (700, 10, 10)
    assert gc.get_threshold() == collector.THRESHOLDS
    assert collector.tune((1000, 5, 5)) == collector.THRESHOLDS
    assert gc.get_threshold() == (1000, 5, 5)


def test_collections_come_later_than_the_interpreters() -> None:
    young, middle, old = collector.THRESHOLDS
    assert young > 700 and middle >= 10 and old >= 10


def test_a_spread_shard_actor_tunes_its_process() -> None:
    gc.set_threshold(700, 10, 10)
    shards.SpreadShard()
    assert gc.get_threshold() == collector.THRESHOLDS


def test_a_pause_turns_the_collector_off_inside_and_on_again_after_even_on_an_error() -> None:
    gc.enable()
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector.paused():
        assert not gc.isenabled()
        raise RuntimeError("a round that fails")
    assert gc.isenabled()


def test_a_pause_inside_a_pause_or_with_the_collector_off_leaves_it_off() -> None:
    gc.enable()
    with collector.paused():
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "the inner pause must not turn it on inside the outer"
    assert gc.isenabled()
    gc.disable()
    with collector.paused():
        assert not gc.isenabled()
    assert not gc.isenabled(), "a collector someone else turned off stays off"


def test_a_kept_pause_freezes_what_is_alive_only_where_rounds_are_frozen() -> None:
    gc.enable()
    with collector.paused() as pause:
        pause.keep()
    assert gc.get_freeze_count() == 0, "a process that does not freeze rounds (the tests') freezes nothing"
    assert collector.freeze_rounds() is False
    with collector.paused():
        pass
    assert gc.get_freeze_count() == 0, "a pause not kept (a small round) freezes nothing"
    with collector.paused() as pause:
        pause.keep()
    assert gc.get_freeze_count() > 0 and gc.isenabled()
    assert collector.freeze_rounds(False) is True
    assert gc.get_freeze_count() == 0, "turned off, everything frozen is thawed"


def test_frozen_objects_are_thawed_in_time_and_not_frozen_again_before_a_full_collection() -> None:
    seconds = [0.0]
    collector.freeze_rounds(clock=lambda: seconds[0])
    gc.enable()
    with collector.paused() as pause:
        pause.keep()
    first = gc.get_freeze_count()
    assert first > 0
    seconds[0] = collector.THAW_SECONDS - 1
    with collector.paused() as pause:
        pause.keep()
    assert gc.get_freeze_count() >= first, "within THAW_SECONDS of the first freeze: frozen still"
    seconds[0] = collector.THAW_SECONDS
    with collector.paused():
        pass
    assert gc.get_freeze_count() == 0, "THAW_SECONDS after the first freeze: thawed, a small round too"
    with collector.paused() as pause:
        pause.keep()
    assert gc.get_freeze_count() == 0, "thawed objects are walked by a full collection before any freeze"
    gc.collect()
    with collector.paused() as pause:
        pause.keep()
    assert gc.get_freeze_count() > 0, "after a full collection, a large round freezes again"
    seconds[0] += collector.THAW_SECONDS - 1
    with collector.paused():
        pass
    assert gc.get_freeze_count() > 0, "the thaw counts from the first freeze after the last thaw"


def test_a_large_round_keeps_its_survivors_and_a_small_one_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    model, clock = _world()
    coordinator = facade.Coordinator(model, clock=clock, hub_synced=False, coordinator_id="test",
                                     settle=datetime.timedelta(0))
    collector.freeze_rounds()
    gc.enable()
    monkeypatch.setattr(collector, "FREEZE_FROM", 2)
    coordinator.mark_hub_synced()  # one spread: below FREEZE_FROM
    assert gc.get_freeze_count() == 0
    monkeypatch.setattr(collector, "FREEZE_FROM", 1)
    model.set_target("shop/web", replicas=5, template=builders.deployment(namespace="shop"))
    assert coordinator.publish(["shop/web"]).placements
    assert gc.get_freeze_count() > 0 and gc.isenabled()


def _world() -> tuple[world.World, ManualClock]:
    clock = ManualClock(datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC))
    model = world.World(clock)
    for name in ("aws", "dc1"):
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    model.upsert_spread(builders.federated_spread(subsets=[{
        "name": "eu", "clusterSelector": {"matchLabels": {names.REGION_LABEL: "eu"}}}]))
    model.set_target("shop/web", replicas=4, template=builders.deployment(namespace="shop"))
    return model, clock


def test_a_coordinators_round_runs_with_the_collector_paused() -> None:
    """`publish` places and delivers with no cycle collection (its `on_round` hook runs inside);
    the collector is on again when it returns, also when a round fails."""
    model, clock = _world()
    coordinator = facade.Coordinator(model, clock=clock, hub_synced=False, coordinator_id="test",
                                     settle=datetime.timedelta(0))
    seen: list[bool] = []
    coordinator.on_round = lambda result, seconds: seen.append(gc.isenabled())
    gc.enable()
    coordinator.mark_hub_synced()
    assert seen == [False] and gc.isenabled()

    def failing(result: object, seconds: float) -> None:
        raise RuntimeError("an observer that fails")

    coordinator.on_round = failing
    model.set_target("shop/web", replicas=5, template=builders.deployment(namespace="shop"))
    with pytest.raises(RuntimeError):
        coordinator.publish(["shop/web"])
    assert gc.isenabled()
