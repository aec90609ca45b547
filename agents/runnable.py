"""One contract for the agent's long-running loops, and the one place that starts and stops them.

Why: the agent grows by workload kinds, and each kind may bring a loop. When every loop is started
its own way (a patched `beat` attribute, a `beat=` keyword, a thread the part makes itself) each new
one is a new way to forget the watchdog, a thread name or the stop order. So, as controller-runtime's
`Runnable`s, every loop is a `Runnable`: a `name` (its watchdog name and, as `agent-<name>`, its
thread's), a watchdog `period`, whether a stall makes the agent unready (`critical`), and
`run(stop, beat)`, which turns until `stop` is set and calls `beat` every turn. `Loops` takes them
as one list: it registers each with the watchdog (in list order), runs each on a thread of its own
(in list order, with an optional step just before one of them: the agent registers its webhook
before the link starts), and stops them in reverse (with the mirror step just after one of them).

A loop that waits on something other than `stop` (an event of its own, a gRPC stream) also
offers `interrupt()` (`Interruptible`): `Loops.stop` sets `stop`, interrupts them all in reverse
order, then joins them in reverse order, so every loop ends at once rather than at its next turn.

Shared by `agents.main` (which owns the list) and the parts (which implement the contract without
importing one another).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from federation import watchdog as watchdog_mod

Beat = Callable[[], None]
"""A loop's heartbeat for the watchdog (`federation.watchdog`): call it every turn."""

JOIN_SECONDS = 5.0
"""How long `Loops.stop` waits for each loop's thread to end."""


def no_beat() -> None:
    """A beat that tells nobody (a loop run without a watchdog, as in tests)."""


class Runnable(Protocol):
    """A long-running loop of the agent."""

    @property
    def name(self) -> str:
        """Its watchdog name; its thread is `agent-<name>`."""

    @property
    def period(self) -> float:
        """Seconds between two turns when all is well (the watchdog's period)."""

    @property
    def critical(self) -> bool:
        """Whether the agent is unready (/readyz 503) while this loop is stalled."""

    def run(self, stop: threading.Event, beat: Beat) -> None:
        """Turn until `stop` is set, calling `beat` every turn; never raise for one bad turn."""


@runtime_checkable
class Interruptible(Protocol):
    """A loop that blocks on more than `stop`: `interrupt()` wakes it once `stop` is set."""

    def interrupt(self) -> None:
        """Wake the loop so that it sees `stop` now."""


class Loops:
    """Starts a list of runnables, each on its own thread with its watchdog beat; stops them in reverse."""

    def __init__(self, runnables: Sequence[Runnable], *, stop: threading.Event,
                 watchdog: watchdog_mod.Watchdog, join_seconds: float = JOIN_SECONDS) -> None:
        self.runnables = tuple(runnables)
        self._stop = stop
        self._watchdog = watchdog
        self._join_seconds = join_seconds
        self._beats: dict[str, Beat] = {}
        self._threads: dict[str, threading.Thread] = {}

    def start(self, *, before: Mapping[str, Callable[[], None]] | None = None) -> None:
        """Register every runnable with the watchdog (in list order) and start the watchdog, then
        run each on a daemon thread of its own (in list order); `before[name]`, when given, runs
        just before that runnable's thread starts (and may raise: the later ones then never start)."""
        for runnable in self.runnables:
            self._beats[runnable.name] = self._watchdog.register(
                runnable.name, period=runnable.period, critical=runnable.critical)
        self._watchdog.start()
        for runnable in self.runnables:
            if before and runnable.name in before:
                before[runnable.name]()
            thread = threading.Thread(target=runnable.run, args=(self._stop, self._beats[runnable.name]),
                                      name=f"agent-{runnable.name}", daemon=True)
            thread.start()
            self._threads[runnable.name] = thread

    def stop(self, *, after: Mapping[str, Callable[[], None]] | None = None) -> None:
        """Set `stop`, stop the watchdog, interrupt the runnables in reverse order, then join their
        threads in reverse order; `after[name]`, when given, runs just after that runnable's thread
        ended (or its join timed out), and also when it never started (the mirror of `start`'s
        `before`: the agent removes its webhook right after the link stops). Safe to call twice."""
        self._stop.set()
        self._watchdog.stop()
        for runnable in reversed(self.runnables):
            if runnable.name in self._threads and isinstance(runnable, Interruptible):
                runnable.interrupt()
        for runnable in reversed(self.runnables):
            thread = self._threads.get(runnable.name)
            if thread is not None:
                thread.join(timeout=self._join_seconds)
            if after and runnable.name in after:
                after[runnable.name]()
