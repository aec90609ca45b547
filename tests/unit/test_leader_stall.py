"""When a stalled leader gives its Lease up (`model.stall`), on a real Watchdog and a clock the test moves.

The coordinator's loops as `process._watch_loops` registers them: hub events (period 5 s: limit
15 s) and timer (1 s: limit 10 s) critical, status (2 s: limit 10 s) not. The hub probe is a
function the test answers, and counts how often it was asked.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from federation import watchdog
from federation.coordinator import startup
from federation.coordinator.model import stall

GRACE = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Hub:
    """The hub probe: answers `up`, counts the questions."""

    def __init__(self, *, up: bool = True) -> None:
        self.up, self.asked = up, 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.up


def coordinator_loops(clock: Clock) -> tuple[watchdog.Watchdog, dict[str, Callable[[], None]]]:
    dog = watchdog.Watchdog("coordinator", clock=clock)
    beats = {"hub-events": dog.register("hub-events", period=5.0),
             "timer": dog.register("timer", period=1.0),
             "status": dog.register("status", period=2.0, critical=False),
             "hub-watch-spread": dog.register("hub-watch-spread", period=330.0, critical=False)}
    return dog, beats


def judged(clock: Clock) -> tuple[stall.StallJudge, dict[str, Callable[[], None]]]:
    dog, beats = coordinator_loops(clock)
    return stall.StallJudge(dog, grace=GRACE, clock=clock), beats


def turn(beats: dict[str, Callable[[], None]], *names: str) -> None:
    for name in names or tuple(beats):
        beats[name]()


def test_the_default_grace_is_the_coordinators_setting() -> None:
    assert startup.CoordinatorConfig(hub_kubeconfig=None).leader_stall_grace_seconds == stall.GRACE_SECONDS
    assert stall.GRACE_SECONDS == GRACE


def test_a_critical_loop_stalled_past_its_limit_plus_the_grace_gives_up() -> None:
    clock, hub = Clock(), Hub()
    judge, beats = judged(clock)
    judge.begin()
    clock.now += 5.0
    turn(beats, "hub-events", "status")  # the timer last turned at 1000
    clock.now = 1000.0 + 10.0 + GRACE  # exactly the limit plus the grace: not past it
    turn(beats, "hub-events", "status")
    assert judge.verdict(hub) is None
    assert hub.asked == 0, "no stall past its bound: the hub is not asked"
    clock.now += 0.5
    found = judge.verdict(hub)
    assert found == stall.Stall(loops=("timer",), seconds=70.5)
    assert hub.asked == 1


def test_each_loop_has_its_own_limit() -> None:
    clock, hub = Clock(), Hub()
    judge, beats = judged(clock)
    judge.begin()
    clock.now += 71.0
    turn(beats, "timer", "status")  # hub events: 71 s without a turn, its limit is 15 s
    assert judge.verdict(hub) is None
    clock.now += 5.0
    turn(beats, "timer", "status")
    found = judge.verdict(hub)
    assert found is not None and found.loops == ("hub-events",) and found.seconds == 76.0


def test_a_stall_that_clears_within_the_grace_changes_nothing() -> None:
    clock, hub = Clock(), Hub()
    judge, beats = judged(clock)
    judge.begin()
    for _ in range(10):  # stalls of 60 s: past the limit (readiness would turn), within the grace
        clock.now += 60.0
        assert judge.verdict(hub) is None
        turn(beats)
    assert hub.asked == 0


def test_loops_that_wait_on_the_hub_never_count() -> None:
    clock, hub = Clock(), Hub()
    judge, beats = judged(clock)
    judge.begin()
    for _ in range(20):
        clock.now += 5.0
        turn(beats, "hub-events", "timer")
        assert judge.verdict(hub) is None
    assert {s.name for s in judge.watchdog.snapshot() if s.seconds_since_turn > 90} == {
        "status", "hub-watch-spread"}
    assert hub.asked == 0


def test_nothing_is_judged_before_the_hub_is_listed_and_a_stall_counts_from_then() -> None:
    clock, hub = Clock(), Hub()
    judge, _beats = judged(clock)
    clock.now += 500.0  # the first full round: every loop held
    assert judge.stalled() is None and judge.verdict(hub) is None
    judge.begin()
    clock.now += 10.0 + GRACE
    assert judge.verdict(hub) is None, "judged for 70 s only"
    clock.now += 1.0
    found = judge.verdict(hub)
    assert found is not None and found.loops == ("timer",) and found.seconds == 71.0
    clock.now += 5.0
    found = judge.verdict(hub)
    assert found is not None and found.loops == ("hub-events", "timer")


def test_while_the_hub_does_not_answer_the_lease_is_kept_and_the_hub_asked_again_now_and_then() -> None:
    clock, hub = Clock(), Hub(up=False)
    judge, _beats = judged(clock)
    judge.begin()
    clock.now += 100.0
    assert judge.verdict(hub) is None and judge.hub_away
    for _ in range(9):
        clock.now += 1.0
        assert judge.verdict(hub) is None
    assert hub.asked == 1, "asked once per probe period"
    clock.now += 1.0
    assert judge.verdict(hub) is None and hub.asked == 2
    hub.up = True
    assert judge.verdict(hub) is None, "the last answer holds until the next probe"
    clock.now += stall.PROBE_EVERY
    found = judge.verdict(hub)
    assert found is not None and not judge.hub_away and hub.asked == 3


def test_a_stall_that_clears_while_the_hub_is_away_ends_the_excuse() -> None:
    clock, hub = Clock(), Hub(up=False)
    judge, beats = judged(clock)
    judge.begin()
    clock.now += 100.0
    assert judge.verdict(hub) is None and judge.hub_away
    turn(beats)
    assert judge.verdict(hub) is None and not judge.hub_away
    hub.up = True
    clock.now += 10.0 + GRACE + 1.0
    assert judge.verdict(hub) is not None and hub.asked == 2, "a new stall asks the hub anew"


@pytest.mark.parametrize(("grace", "every"), [(-1.0, 10.0), (60.0, -1.0)])
def test_a_negative_grace_or_probe_period_is_refused(grace: float, every: float) -> None:
    dog, _ = coordinator_loops(Clock())
    with pytest.raises(ValueError, match="must be >= 0"):
        stall.StallJudge(dog, grace=grace, probe_every=every)
