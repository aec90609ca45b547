"""The World's liveness: one call per event keeps the tracker, the rate limit and cached readiness in step.

Why: the heartbeat tracker, the failover rate limit and the readiness the member views read used to
be updated one by one at each event (`World.heartbeat` beat the tracker, cleared the rate limit's
admission and bumped the views' counter). `liveness.Liveness` does each event in one call; these
tests hold that a heartbeat, a forgotten cluster and a restarted grace each reach every piece, and
that cached readiness is reused only while nothing could have changed it.
"""

from __future__ import annotations

import datetime

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
