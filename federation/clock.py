"""The one definition of "now" for fedspread: aware UTC datetimes, and the type of an injected clock.

Why a module of its own: the coordinator, the agent and the certificate authority all compare
timestamps that cross processes (heartbeats, unschedulable marks, certificate validity), so they
must agree on one kind of time (timezone-aware, UTC). Code that needs the time takes a `Clock`
and defaults it to `utcnow`, so tests can pass a clock they move by hand. Pure standard library,
so every layer may import it.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TypeAlias

Clock: TypeAlias = Callable[[], datetime.datetime]
"""A source of the current time: returns an aware UTC datetime each call."""


def utcnow() -> datetime.datetime:
    """The current time, timezone-aware UTC."""
    return datetime.datetime.now(datetime.UTC)
