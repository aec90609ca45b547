"""The watchdog's rules on a clock the test moves: a loop that stops turning is seen once, and its
recovery once; only critical loops count for readiness; the floor keeps short loops from flapping."""

from __future__ import annotations

import logging
import threading

import pytest

from federation import watchdog


class Ticks:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


def test_a_loop_that_stops_turning_is_stalled_once_and_recovers_once(
        ticks: Ticks, caplog: pytest.LogCaptureFixture) -> None:
    changes: list[watchdog.Change] = []
    dog = watchdog.Watchdog("coordinator", clock=ticks, factor=3.0, floor=1.0, on_change=changes.append)
    beat = dog.register("status", period=2.0)
    assert dog.limit("status") == 6.0
    for _ in range(3):
        ticks.now += 2.0
        beat()
        assert dog.check() == []
    with caplog.at_level(logging.WARNING, logger="federation.watchdog"):
        ticks.now += 6.0
        assert dog.check() == []  # exactly at the limit: not yet
        ticks.now += 0.5
        assert [(c.name, c.stalled) for c in dog.check()] == [("status", True)]
        for _ in range(5):  # still stalled: nothing new to say
            ticks.now += 10.0
            assert dog.check() == []
        assert dog.stalled() == {"status"} and dog.critical_stalled()
        beat()
        assert [(c.name, c.stalled) for c in dog.check()] == [("status", False)]
        assert dog.check() == []
    assert [c.stalled for c in changes] == [True, False]
    stalled, recovered = caplog.records
    assert stalled.getMessage().startswith("loop stalled")
    assert (stalled.loop, stalled.owner, stalled.seconds_since_turn) == ("status", "coordinator", 6.5)  # type: ignore[attr-defined]
    assert recovered.getMessage().startswith("loop turns again")
    assert not dog.stalled() and not dog.critical_stalled()
    (state,) = dog.snapshot()
    assert (state.turns, state.stalls, state.stalled) == (4, 1, False)


def test_only_critical_loops_make_the_owner_unready(ticks: Ticks) -> None:
    dog = watchdog.Watchdog("agent", clock=ticks, floor=0.0)
    dog.register("link", period=1.0, critical=False)
    reconciler = dog.register("reconciler", period=1.0)
    ticks.now += 5.0
    reconciler()
    dog.check()
    assert dog.stalled() == {"link"}
    assert not dog.critical_stalled()
    ticks.now += 5.0
    dog.check()
    assert dog.stalled() == {"link", "reconciler"}
    assert dog.critical_stalled()


def test_the_floor_keeps_a_short_loop_from_stalling_on_a_scheduling_delay(ticks: Ticks) -> None:
    dog = watchdog.Watchdog("coordinator", clock=ticks, factor=3.0, floor=10.0)
    dog.register("timer", period=1.0)
    assert dog.limit("timer") == 10.0
    ticks.now += 9.0
    assert dog.check() == [] and not dog.stalled()
    ticks.now += 2.0
    assert [c.name for c in dog.check()] == ["timer"]


def test_snapshot_gives_seconds_since_each_turn(ticks: Ticks) -> None:
    dog = watchdog.Watchdog("coordinator", clock=ticks)
    beat_a = dog.register("a", period=1.0)
    dog.register("b", period=1.0, critical=False)
    ticks.now += 4.0
    beat_a()
    ticks.now += 1.5
    assert [(s.name, s.seconds_since_turn, s.critical) for s in dog.snapshot()] == [
        ("a", 1.5, True), ("b", 5.5, False)]


def test_registration_errors_and_unknown_beats(ticks: Ticks) -> None:
    dog = watchdog.Watchdog("coordinator", clock=ticks)
    dog.register("a", period=1.0)
    with pytest.raises(ValueError, match="registered already"):
        dog.register("a", period=1.0)
    with pytest.raises(ValueError, match="period must be positive"):
        dog.register("b", period=0.0)
    with pytest.raises(ValueError, match="factor"):
        watchdog.Watchdog("x", factor=0.5)
    dog.beat("never-registered")  # ignored
    assert [s.name for s in dog.snapshot()] == ["a"]


def test_the_thread_checks_and_survives_a_failing_callback() -> None:
    stalled, recovered = threading.Event(), threading.Event()

    def on_change(change: watchdog.Change) -> None:
        if change.stalled:
            stalled.set()
            raise RuntimeError("a broken callback")
        recovered.set()

    dog = watchdog.Watchdog("coordinator", factor=1.0, floor=0.0, on_change=on_change)
    beat = dog.register("loop", period=0.05)
    dog.start(interval=0.01)
    try:
        with pytest.raises(RuntimeError, match="running already"):
            dog.start()
        assert stalled.wait(60)  # no beat: the thread sees the stall; the callback raises
        for _ in range(6000):  # the thread went on: a loop turning again is seen
            beat()
            if recovered.wait(0.01):
                break
        assert recovered.is_set()
    finally:
        dog.stop()
        dog.stop()
