"""Each spread's failover brake, kept between placements.

Why a registry of its own: the brake's rule is pure (`federation.core.brake`), but whether a brake
holds depends on its previous state — when it began, when it lifted, which clusters it keeps — so
the coordinator keeps one `BrakeState` per spread. The placement loop updates it before every
placement of the spread (`loop.request_for`), the failover timer asks which graces have ended
(`due`), and the status pass reads it for the `FailoverSuspended` condition.

Thread-safety: used under the coordinator's lock, like the World that owns it.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection

from federation.core import brake


class Brakes:
    """Per spread key, its brake state (absent: failover works normally)."""

    def __init__(self) -> None:
        self._states: dict[str, brake.BrakeState] = {}
        self._graces: dict[str, datetime.timedelta] = {}

    def update(
        self, key: str, *, selectable: Collection[str], lost: Collection[str], heard_from_any: bool,
        now: datetime.datetime, grace: datetime.timedelta,
    ) -> frozenset[str]:
        """Spread `key`'s brake after looking at its clusters now: the lost clusters to treat as ready."""
        state = brake.next_state(self._states.get(key), selectable=selectable, lost=lost,
                                 heard_from_any=heard_from_any, now=now, grace=grace)
        if state is None:
            self.forget(key)
            return frozenset()
        self._states[key] = state
        self._graces[key] = grace
        return state.clusters

    def state(self, key: str) -> brake.BrakeState | None:
        """Spread `key`'s brake, if it holds or is in its grace."""
        return self._states.get(key)

    def due(self, now: datetime.datetime) -> set[str]:
        """Spreads whose grace after lifting has ended by `now`: place them again (failover resumes)."""
        found = set()
        for key, state in self._states.items():
            ends = state.grace_ends(self._graces[key])
            if ends is not None and now > ends:
                found.add(key)
        return found

    def forget(self, key: str) -> None:
        """Spread `key` is gone, or its brake no longer holds."""
        self._states.pop(key, None)
        self._graces.pop(key, None)
