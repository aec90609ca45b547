"""What the hub holds of the statuses this process writes, as far as it knows: so that a status
pass reads from the hub only what may have changed there.

Why: a status pass runs every ~2 s and used to read every placed spread's status and its hub
workload's before deciding there was nothing to write: two GETs per spread per pass, so at 1,000
spreads a pass took longer than its period and at 10,000 it would take minutes, the hub serving
reads no one needed (`bench.placement_hub` measured it). Every change to a hub object, ours or
anyone's, comes back on the coordinator's watch of it; so once a write (or a read that found
nothing to write) has told us what the hub holds, that stays true until the next watch event for
the object. Then the status pass skips the object while what it would write equals what is held.

The rule, for each object (a spread, or the hub workload a spread writes):

* `seen` (called for every watch event of it, our own writes' echoes included) forgets what is
  held and counts the event;
* a pass that would write V skips the object when `holds` says V is held; otherwise it takes a
  `mark` (the count of events so far), writes (the writer reads, compares, patches or not), and
  on success `remember`s V — unless an event came in between (the mark moved): then what the hub
  holds is unknown again, and the next pass reads it;
* everything is forgotten every `REREAD_SECONDS` anyway: a watch that missed an event (it should
  not: a relist replays every object) costs at most that long.

Forgetting is always safe — it only costs a read.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Hashable

REREAD_SECONDS = 600.0
"""Every status is read from the hub at least this often, whatever the watch said."""

Same = Callable[[object, object], bool]


class HeldStatuses:
    """Per object, the status the hub holds as last confirmed by this process (thread-safe)."""

    def __init__(self, *, reread_seconds: float = REREAD_SECONDS) -> None:
        self._lock = threading.Lock()
        self._held: dict[Hashable, object] = {}
        self._events: dict[Hashable, int] = {}
        self._reread = datetime.timedelta(seconds=reread_seconds)
        self._since: datetime.datetime | None = None

    def seen(self, ident: Hashable) -> None:
        """A watch event for the object: what it holds is unknown until read or written again."""
        with self._lock:
            self._held.pop(ident, None)
            self._events[ident] = self._events.get(ident, 0) + 1

    def forget(self, ident: Hashable) -> None:
        """The object is gone (or no longer ours to write)."""
        with self._lock:
            self._held.pop(ident, None)
            self._events.pop(ident, None)

    def start_pass(self, now: datetime.datetime) -> None:
        """Forget everything when it was last forgotten `REREAD_SECONDS` ago or more."""
        with self._lock:
            if self._since is None or now - self._since >= self._reread:
                self._held.clear()
                self._since = now

    def holds(self, ident: Hashable, value: object, *, same: Same | None = None) -> bool:
        """Whether the hub holds `value` for the object, as far as this process knows (`same`:
        how two values compare; equality by default)."""
        with self._lock:
            if ident not in self._held:
                return False
            held = self._held[ident]
        return same(held, value) if same is not None else held == value

    def mark(self, ident: Hashable) -> int:
        """The object's events so far: take it before a write, give it to `remember` after."""
        with self._lock:
            return self._events.get(ident, 0)

    def remember(self, ident: Hashable, value: object, *, mark: int) -> None:
        """After a write that succeeded (patched, or found `value` there): the hub holds `value`,
        unless an event for the object came in since `mark` (then nothing is remembered)."""
        with self._lock:
            if self._events.get(ident, 0) == mark:
                self._held[ident] = value
