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
    """Callable like `federation.clock.utcnow`; returns `now`, which only the test changes."""

    def __init__(self, start: datetime.datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by `seconds`."""
        self.now += datetime.timedelta(seconds=seconds)
