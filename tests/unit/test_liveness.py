"""The World's liveness: one call per event keeps the tracker, the rate limit and cached readiness in step.

Why: the heartbeat tracker, the failover rate limit and the readiness the member views read used to
be updated one by one at each event (`World.heartbeat` beat the tracker, cleared the rate limit's
admission and bumped the views' counter). `liveness.Liveness` does each event in one call; these
tests hold that a heartbeat, a forgotten cluster and a restarted grace each reach every piece, and
that cached readiness is reused only while nothing could have changed it (a property test checks
every cached answer against a fresh reading of the tracker, after any sequence of events).
"""

from __future__ import annotations

import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from federation.coordinator.model import liveness
from tests.support.clock import ManualClock

LIMIT = datetime.timedelta(seconds=60)
NAMES = ("dc1", "dc2", "dc3")


def make(clock: ManualClock, *, per_minute: int | None = 1) -> liveness.Liveness:
    return liveness.Liveness(
        clock, grace_from=None, failover_per_minute=per_minute, cluster_names=lambda: NAMES)


def test_a_heartbeat_ends_failover_and_the_wait_for_budget_and_refreshes_readiness() -> None:
    clock = ManualClock()
    alive = make(clock)
    for name in NAMES:
        alive.heard(name)
    clock.advance(61)
    assert alive.readiness(LIMIT).silent == frozenset(NAMES)
    assert alive.failover_limit.admit(["dc1", "dc2"], now=clock()) == {"dc1"}  # dc2 waits for budget
    assert alive.failover_limit.has_budget(clock()) is False
    alive.heard("dc1")
    assert alive.failover_limit.has_budget(clock())  # dc1's admission ended: dc2 may be admitted now
    alive.heard("dc2")
    assert not alive.failover_limit.has_budget(clock())  # and dc2 no longer waits for the budget
    readiness = alive.readiness(LIMIT)  # not the cached answer: two clusters were heard since
    assert readiness.ready == {"dc1": True, "dc2": True, "dc3": False}
    assert readiness.silent == {"dc3"}
    assert alive.failover_limit.admit(["dc3"], now=clock()) == {"dc3"}  # dc1 no longer spends the minute


def test_readiness_is_cached_until_a_heartbeat_or_the_clock_could_change_it() -> None:
    clock = ManualClock()
    alive = make(clock)
    alive.heard("dc1")
    first = alive.readiness(LIMIT)
    assert alive.readiness(LIMIT) is first
    clock.advance(30)
    assert alive.readiness(LIMIT) is first  # dc1 is ready until 60 s after its heartbeat
    clock.advance(31)
    later = alive.readiness(LIMIT)
    assert later is not first and later.ready["dc1"] is False
    alive.heard("dc1")
    assert alive.readiness(LIMIT).ready["dc1"] is True


def test_a_forgotten_cluster_is_neither_heard_nor_silent_nor_failing_over() -> None:
    clock = ManualClock()
    alive = make(clock)
    alive.heard("dc1")
    clock.advance(61)
    assert alive.failover_limit.admit(["dc1"], now=clock()) == {"dc1"}
    assert alive.readiness(LIMIT).silent == {"dc1"}
    alive.forget_cluster("dc1")
    assert alive.tracker.last("dc1") is None
    assert alive.readiness(LIMIT).silent == frozenset()  # never heard: not silent, and no grace
    assert alive.readiness(LIMIT).ready["dc1"] is False
    assert alive.tracker.newly_lost(after=LIMIT) == []


def test_a_restarted_grace_counts_a_never_heard_cluster_as_heard_then() -> None:
    clock = ManualClock()
    alive = make(clock, per_minute=None)
    assert alive.readiness(LIMIT).ready == dict.fromkeys(NAMES, False)
    alive.restart_grace(clock())
    assert alive.readiness(LIMIT).ready == dict.fromkeys(NAMES, True)
    assert alive.heard_from_any(LIMIT)
    assert not alive.lost("dc2", after=LIMIT)
    clock.advance(61)
    assert not alive.heard_from_any(LIMIT)
    assert alive.lost("dc2", after=LIMIT)
    assert alive.silent_among(frozenset(NAMES), after=LIMIT) == frozenset()  # none was ever heard


def test_a_heartbeat_of_a_cluster_ready_everywhere_keeps_the_cached_answers() -> None:
    clock = ManualClock()
    alive = make(clock)
    for name in NAMES:
        alive.heard(name)
    first, wide = alive.readiness(LIMIT), alive.readiness(LIMIT * 2)
    clock.advance(30)
    alive.heard("dc2")  # ready in both answers: it is only ready for longer
    assert alive.readiness(LIMIT) is first and alive.readiness(LIMIT * 2) is wide
    clock.advance(31)  # dc1 and dc3 are lost for LIMIT; dc2, heard at 30 s, is not
    later = alive.readiness(LIMIT)
    assert later is not first
    assert later.ready == {"dc1": False, "dc2": True, "dc3": False} and later.silent == {"dc1", "dc3"}
    alive.heard("dc1")  # not ready in the current answer: the answer is stale at once
    assert alive.readiness(LIMIT).ready["dc1"] is True


@st.composite
def _events(draw: st.DrawFn) -> list[tuple[str, str, int]]:
    """Heartbeats (some with a time of their own, some older than the last), clock steps,
    forgotten clusters, restarted graces and readiness reads, in any order."""
    kinds = st.sampled_from(["beat", "beat_at", "advance", "forget", "grace", "read"])
    return draw(st.lists(st.tuples(kinds, st.sampled_from(NAMES), st.integers(0, 90)), max_size=40))


@settings(max_examples=300, deadline=None)
@given(events=_events(), grace=st.booleans())
def test_cached_readiness_is_always_what_a_fresh_reading_says(events: list[tuple[str, str, int]],
                                                             grace: bool) -> None:
    clock = ManualClock()
    alive = liveness.Liveness(clock, grace_from=clock() if grace else None, failover_per_minute=None,
                              cluster_names=lambda: NAMES)
    grace_from = clock() if grace else None
    for kind, name, seconds in events:
        if kind == "beat":
            alive.heard(name)
        elif kind == "beat_at":  # a heartbeat stamped up to 90 s before now (an older one counts for nothing)
            alive.heard(name, clock() - datetime.timedelta(seconds=seconds))
        elif kind == "advance":
            clock.advance(seconds)
        elif kind == "forget":
            alive.forget_cluster(name)
        elif kind == "grace":
            alive.restart_grace(clock())
            grace_from = clock()
        for after in (LIMIT, LIMIT / 2):
            found = alive.readiness(after)
            fresh = {}
            for each in NAMES:
                last = alive.tracker.last(each)
                heard = last if last is not None else grace_from
                fresh[each] = heard is not None and clock() - heard <= after
            assert found.ready == fresh, (kind, name, after)
            assert found.silent == {n for n in NAMES if not fresh[n] and alive.tracker.last(n) is not None}
