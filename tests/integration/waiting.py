"""Polling with a deadline, for tests on real (asynchronous) control planes.

Why: controllers, the scheduler and the node simulator act some time after a request; a test waits
for the state it expects and, if that never comes, fails with a message saying what it waited for
and what it last saw, instead of hanging or asserting on timing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The awaited condition did not hold before the deadline."""


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    message: str | Callable[[], str],
    interval: float = 0.2,
) -> T:
    """Call `probe` until it returns something truthy, and return that.

    Fails with `message` (a string, or a callable evaluated at the deadline so it can describe the
    last observed state) after `timeout` seconds. Exceptions from `probe` propagate: a probe that
    expects transient errors should catch them itself.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise WaitTimeout(f"after {timeout:.0f} s: {text}")
        time.sleep(interval)
