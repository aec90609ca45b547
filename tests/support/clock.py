"""The tests' clock: a `federation.clock.Clock` that stands still until the test moves it.

Why one: heartbeats, grace periods, unschedulable marks and pod TTLs are all timed; a test that
depends on the wall clock is slow or flaky. Code under test takes a `Clock`; tests pass this one
and move it with `advance` (or set `now`), so every timed rule is checked at exact instants.
"""

from __future__ import annotations

import datetime

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
"""The default start: a fixed instant, so that test output does not depend on the day it runs."""


class ManualClock:
    """Callable like `federation.clock.utcnow`; returns `now`, which only the test changes.

    It only moves forward, as the clock the code reads in production does (`federation.clock`):
    a test that rewinds it checks a world that cannot happen, so that raises ValueError.
    """

    def __init__(self, start: datetime.datetime = T0) -> None:
        self._now = start

    def __call__(self) -> datetime.datetime:
        return self._now

    @property
    def now(self) -> datetime.datetime:
        """The instant the clock shows."""
        return self._now

    @now.setter
    def now(self, value: datetime.datetime) -> None:
        if value < self._now:
            raise ValueError(f"a ManualClock only moves forward: {self._now} -> {value}")
        self._now = value

    def advance(self, seconds: float) -> None:
        """Move the clock forward by `seconds` (not negative)."""
        if seconds < 0:
            raise ValueError(f"a ManualClock only moves forward: advance({seconds})")
        self.now += datetime.timedelta(seconds=seconds)
