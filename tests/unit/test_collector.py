"""The coordinator's garbage collector (`federation.collector`): thresholds set where a coordinator or
a shard actor runs, restorable, and never the interpreter's defaults there; paused during a
placement round and on again after it, whatever the round does."""

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


def test_a_coordinators_round_runs_with_the_collector_paused() -> None:
    """`publish` places and delivers with no cycle collection (its `on_round` hook runs inside);
    the collector is on again when it returns, also when a round fails."""
    clock = ManualClock(datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC))
    model = world.World(clock)
    for name in ("aws", "dc1"):
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    model.upsert_spread(builders.federated_spread(subsets=[{
        "name": "eu", "clusterSelector": {"matchLabels": {names.REGION_LABEL: "eu"}}}]))
    model.set_target("shop/web", replicas=4, template=builders.deployment(namespace="shop"))
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
