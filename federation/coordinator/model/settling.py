"""A restored hub's spreads wait for the federation to gather before their first placement.

Why: a coordinator that starts (or takes over) lists the hub, then places every spread. A spread
whose hub status records a placement is placed from it, and each cluster holds at least its
recorded share until it reports (unknown is not zero). A hub restored from a backup may hold the
spreads without their statuses (backup tools drop `status`) and without the MemberClusters (they
are cluster-scoped, so a namespaced backup leaves them out). Such a coordinator knows no cluster
until agents reconnect, and no placement: the first agent back is the only cluster the spread can
use, is given every replica, and the others' running pods are then handed over to it — a move no
rule asked for, decided by which agent reconnected first.

The rule: the spreads that are live when the hub is listed and whose status records no placement
(no `Placed` condition) are the *candidates*. Within `window` after the listing, a candidate waits:
it is not placed, its placement (made on no evidence) is dropped, and nothing of it — no
assignment, no quota 0, no removal — is sent to any agent, which keeps what it runs (fail static).
When the window ends it is placed, with the federation whole. Every candidate waits, not only one
that the agents connected so far run: a spread that only a later agent runs would otherwise be
placed on the clusters back first, and the later one's pods handed over to them. The price is that
a spread created while no coordinator ran (or just before its status write) is placed up to
`window` later. Every spread whose status records its placement is placed at once (the ordinary
restart: each cluster then holds its recorded share until it reports), and so is every spread
created after the listing (the coordinator saw what ran before it: a re-creation adopts,
`lifecycle`). A candidate deleted meanwhile stops waiting: its deletion is carried out as any other.

This module is the bookkeeping only (pure, no clock of its own): the facade asks `deferred` on
every publish and at each agent's resync, and places `released` keys from its timer.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable

WINDOW = datetime.timedelta(seconds=30)
"""How long a restored spread waits at most for the agents to reconnect (agents retry within
seconds; a member whose agent is not back by then is treated as any silent cluster)."""


class Settling:
    """Which spreads wait for the federation to gather, and until when."""

    def __init__(self, *, window: datetime.timedelta = WINDOW) -> None:
        self.window = window
        self._until: datetime.datetime | None = None
        self._candidates: set[str] = set()
        self._waiting: set[str] = set()

    def begin(self, *, now: datetime.datetime, candidates: Iterable[str]) -> None:
        """The hub was listed at `now`, with `candidates`: the live spreads whose status records
        no placement. The window opens."""
        self._until = now + self.window
        self._candidates = set(candidates)

    def open(self, *, now: datetime.datetime) -> bool:
        """Whether candidates may still wait."""
        if self._until is not None and now >= self._until:
            self._until = None
            self._candidates.clear()
        return self._until is not None

    def deferred(
        self, keys: Iterable[str], *, now: datetime.datetime, live: Callable[[str], bool],
    ) -> set[str]:
        """Of `keys`, those that wait now: the live candidates. A candidate no longer `live`
        (deleted) stops being one."""
        if not self.open(now=now):
            return set()
        waiting: set[str] = set()
        for key in set(keys) & self._candidates:
            if not live(key):
                self._candidates.discard(key)
                self._waiting.discard(key)
            else:
                waiting.add(key)
        self._waiting |= waiting
        return waiting

    def released(self, *, now: datetime.datetime) -> set[str]:
        """The spreads that waited and may be placed now (the window closed), once each."""
        if not self._waiting or self.open(now=now):
            return set()
        released, self._waiting = self._waiting, set()
        return released

    def until(self) -> datetime.datetime | None:
        """When the window closes (None: it is closed)."""
        return self._until

    def waiting(self) -> frozenset[str]:
        """The spreads waiting now: nothing of them is sent to any agent."""
        return frozenset(self._waiting)
