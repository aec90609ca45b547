"""Shard routing (stable across processes) and failover timing with an injected clock (DESIGN §5).

The expected shard numbers are fixed: they were checked against `sha256sum`, and a change to them
would move every spread to another actor after an upgrade.
"""

from __future__ import annotations

import collections
import datetime
import os
import subprocess
import sys
import threading

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.coordinator.model import failover, routing
from tests.support.clock import ManualClock

# --- routing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "shards", "expected"), [
    pytest.param("shop/web", 8, 2, id="shop/web on 8 shards"),
    pytest.param("default/api", 8, 4, id="default/api on 8 shards"),
    pytest.param("dc1", 8, 0, id="cluster dc1 on 8 shards"),
    pytest.param("aws-eu", 8, 6, id="cluster aws-eu on 8 shards"),
    pytest.param("shop/web", 3, 1, id="shop/web on 3 shards"),
    pytest.param("anything", 1, 0, id="one shard owns everything"),
])
def test_shard_of_is_fixed(key: str, shards: int, expected: int) -> None:
    assert routing.shard_of(key, shards=shards) == expected


def test_shard_of_is_the_same_in_another_process_with_another_hash_seed() -> None:
    keys = ["shop/web", "default/api", "dc1", "ünïcode/名前"]
    code = ("import sys; from federation.coordinator.model import routing; "
            "print([routing.shard_of(k, shards=7) for k in sys.argv[1:]])")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code, *keys], env=env, check=True, capture_output=True,
                         text=True, cwd=os.getcwd()).stdout.strip()
    assert out == str([routing.shard_of(k, shards=7) for k in keys])


@hypothesis.given(st.text(), st.integers(1, 1000))
def test_shard_of_is_in_range(key: str, shards: int) -> None:
    assert 0 <= routing.shard_of(key, shards=shards) < shards


@pytest.mark.parametrize("shards", [2, 7, 16])
def test_shard_of_is_roughly_uniform(shards: int) -> None:
    keys = (f"ns-{i % 97}/spread-{i}" for i in range(10_000))
    counts = collections.Counter(routing.shard_of(key, shards=shards) for key in keys)
    mean = 10_000 / shards
    assert set(counts) == set(range(shards))
    assert all(0.7 * mean <= n <= 1.3 * mean for n in counts.values()), counts


@pytest.mark.parametrize("shards", [0, -1])
def test_shards_must_be_positive(shards: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        routing.shard_of("a", shards=shards)
    with pytest.raises(ValueError, match="at least 1"):
        routing.partition(["a"], shards=shards)


@hypothesis.given(st.lists(st.text(max_size=8)), st.integers(1, 9))
def test_partition_covers_every_key_once(keys: list[str], shards: int) -> None:
    groups = routing.partition(keys, shards=shards)
    assert len(groups) == shards
    flat = [k for group in groups for k in group]
    assert sorted(flat) == sorted(set(keys))
    for index, group in enumerate(groups):
        assert all(routing.shard_of(k, shards=shards) == index for k in group)


# --- failover -------------------------------------------------------------------------------------

T0 = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
LIMIT = datetime.timedelta(seconds=60)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def tracker(clock: ManualClock) -> failover.HeartbeatTracker:
    return failover.HeartbeatTracker(clock)


@pytest.mark.parametrize(("silent", "lost"), [
    pytest.param(0, False, id="just heard"),
    pytest.param(59, False, id="59 s of a 60 s limit"),
    pytest.param(60, False, id="exactly at the limit is not yet lost"),
    pytest.param(60.001, True, id="just past the limit"),
    pytest.param(3600, True, id="an hour"),
])
def test_lost_after_the_threshold_and_not_before(clock: ManualClock, tracker: failover.HeartbeatTracker,
                                                 silent: float, lost: bool) -> None:
    tracker.beat("dc1")
    clock.advance(silent)
    assert tracker.lost("dc1", after=LIMIT) is lost
    assert tracker.silent_for("dc1") == datetime.timedelta(seconds=silent)
    assert tracker.ready_clusters(["dc1"], after=LIMIT) == ([] if lost else ["dc1"])


def test_never_heard_clusters_are_lost(tracker: failover.HeartbeatTracker) -> None:
    assert tracker.lost("gcp-eu", after=LIMIT)
    assert tracker.last("gcp-eu") is None and tracker.silent_for("gcp-eu") is None
    assert tracker.newly_lost(after=LIMIT) == []  # nothing to move: it never had replicas


def test_a_restarted_coordinator_counts_unheard_clusters_ready_for_one_limit(clock: ManualClock) -> None:
    tracker = failover.HeartbeatTracker(clock, grace_from=clock())
    clock.advance(60)
    assert not tracker.lost("gcp-eu", after=LIMIT)  # as if it had beaten at the start
    clock.advance(0.5)
    assert tracker.lost("gcp-eu", after=LIMIT)  # its agent never came back: now it is lost
    tracker.beat("gcp-eu")
    assert not tracker.lost("gcp-eu", after=LIMIT)


def test_each_spread_may_have_its_own_limit(clock: ManualClock, tracker: failover.HeartbeatTracker) -> None:
    tracker.beat("dc1")
    clock.advance(90)
    assert tracker.lost("dc1", after=LIMIT)
    assert not tracker.lost("dc1", after=datetime.timedelta(seconds=120))


def test_ready_clusters_keeps_the_given_order(clock: ManualClock, tracker: failover.HeartbeatTracker) -> None:
    tracker.beat("b")
    tracker.beat("old", at=T0 - datetime.timedelta(seconds=61))
    tracker.beat("a")
    assert tracker.ready_clusters(["old", "b", "never", "a"], after=LIMIT) == ["b", "a"]


def test_beat_at_an_older_time_does_not_move_time_back(tracker: failover.HeartbeatTracker) -> None:
    tracker.beat("dc1")
    tracker.beat("dc1", at=T0 - datetime.timedelta(seconds=30))
    assert tracker.last("dc1") == T0


def test_newly_lost_and_returned_are_edge_triggered(
    clock: ManualClock, tracker: failover.HeartbeatTracker
) -> None:
    tracker.beat("dc1")
    tracker.beat("aws-eu")
    clock.advance(30)
    tracker.beat("aws-eu")
    clock.advance(31)  # dc1 silent 61 s, aws-eu 31 s
    assert tracker.newly_lost(after=LIMIT) == ["dc1"]
    assert tracker.newly_lost(after=LIMIT) == []  # reported once
    clock.advance(30)
    assert tracker.newly_lost(after=LIMIT) == ["aws-eu"]
    assert tracker.returned() == []
    clock.advance(5)
    tracker.beat("dc1")
    assert tracker.returned() == ["dc1"]
    assert tracker.returned() == []  # reported once
    tracker.beat("dc1")
    assert tracker.returned() == []  # beating on does not return it again
    clock.advance(61)
    assert tracker.newly_lost(after=LIMIT) == ["dc1"]  # silent again: a new loss


def test_a_stale_beat_does_not_bring_a_lost_cluster_back(clock: ManualClock,
                                                         tracker: failover.HeartbeatTracker) -> None:
    tracker.beat("dc1")
    clock.advance(61)
    assert tracker.newly_lost(after=LIMIT) == ["dc1"]
    tracker.beat("dc1", at=T0)
    assert tracker.returned() == []
    assert tracker.lost("dc1", after=LIMIT)


def test_forget_drops_everything(clock: ManualClock, tracker: failover.HeartbeatTracker) -> None:
    tracker.beat("dc1")
    clock.advance(61)
    assert tracker.newly_lost(after=LIMIT) == ["dc1"]
    tracker.beat("dc1")
    tracker.forget("dc1")
    assert tracker.returned() == []
    assert tracker.last("dc1") is None and tracker.lost("dc1", after=LIMIT)
    tracker.forget("never-known")  # no error
    tracker.beat("dc1")
    clock.advance(61)
    assert tracker.newly_lost(after=LIMIT) == ["dc1"]


def test_threads_beating_concurrently(clock: ManualClock, tracker: failover.HeartbeatTracker) -> None:
    names = [f"c{i}" for i in range(16)]
    start = threading.Barrier(len(names) + 1)
    errors: list[BaseException] = []

    def agent(name: str) -> None:
        try:
            start.wait()
            for i in range(2000):
                tracker.beat(name, at=T0 + datetime.timedelta(milliseconds=i))
        except BaseException as error:  # surfaced by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=agent, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    start.wait()
    for _ in range(200):  # the placement loop reading while agents beat
        tracker.newly_lost(after=LIMIT)
        tracker.returned()
        tracker.ready_clusters(names, after=LIMIT)
    for thread in threads:
        thread.join()
    assert errors == []
    assert all(tracker.last(n) == T0 + datetime.timedelta(milliseconds=1999) for n in names)
    clock.advance(62)
    assert tracker.newly_lost(after=LIMIT) == sorted(names)
