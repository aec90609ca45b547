"""Waiting in a test for something another thread or process does: poll a predicate with a deadline.

Why one helper: tests against real gRPC servers, agents and subprocesses cannot be told when the
other side is done, only asked; each such test file had its own copy of this loop. A wait that
runs out fails the test with what it waited for, never hangs it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

Found = TypeVar("Found")

INTERVAL = 0.02
"""Seconds between two looks."""


def wait(predicate: Callable[[], Found], *, what: str, timeout: float) -> Found:
    """`predicate()`'s first truthy answer within `timeout` seconds; AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(INTERVAL)
    raise AssertionError(f"no {what} within {timeout:g} s")
