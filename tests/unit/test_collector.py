"""The coordinator's garbage-collector thresholds (`federation.collector`): set where a coordinator or
a shard actor runs, restorable, and never the interpreter's defaults there."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from federation import collector
from federation.coordinator import shards


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


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
