"""The workload loop: removals first, then the objects pods need, then one workload sync round.

Why a loop of its own (an `agents.runnable.Runnable`, critical): the link's callbacks must be quick
and never call the apiserver, so an assignment only wakes this loop, and a removal is queued for
it. Each turn applies the queued removals in arrival order — `WorkloadSync.remove`, or
`WorkloadSync.release` when the removal orphans the workload (it keeps running, unmanaged) — each
for the federation of the stream it arrived on, and the same for the spread's copies of the objects
its pods need (`dependencies.DependencySync`: `remove` or `release`); then it runs
`DependencySync.sync_once`, so a spread's ConfigMaps, Secrets and ServiceAccount exist before its
workload is written, and `WorkloadSync.sync_once`. A failed turn
is logged and retried at the next (a removal that failed is queued again); the webhook enforces
the quotas meanwhile.
"""

from __future__ import annotations

import logging
import queue
import threading

from agents import runnable
from agents.controller import dependencies, workload

log = logging.getLogger(__name__)

WAIT = 1.0
"""The workload loop turns at least this often (its watchdog period)."""

Removal = tuple[str, bool, str]
"""(spread, orphan, federation) of a SpreadRemoval."""


class WorkloadLoop:
    """Runs `WorkloadSync` rounds on assignments and removals (`agents.runnable.Runnable`)."""

    name = "workload"
    period = WAIT
    critical = True
    """Critical: the member workloads are what the webhook's quotas are for."""

    def __init__(self, sync: workload.WorkloadSync, *,
                 copies: dependencies.DependencySync | None = None) -> None:
        self.sync = sync
        self.copies = copies
        """The objects the spreads' pods need (None: not copied, as in tests of the workload alone)."""
        self._wake = threading.Event()
        self._removals: queue.Queue[Removal] = queue.Queue()

    def wake(self) -> None:
        """Run a round now (an assignment arrived); quick, for the link thread."""
        self._wake.set()

    def removed(self, spread: str, *, orphan: bool, federation: str) -> None:
        """Queue a SpreadRemoval received from a coordinator of `federation`, and wake the loop."""
        self._removals.put((spread, orphan, federation))
        self._wake.set()

    def interrupt(self) -> None:
        """Wake the loop so that it sees its stop event now (`agents.runnable.Interruptible`)."""
        self._wake.set()

    def run(self, stop: threading.Event, beat: runnable.Beat) -> None:
        """Turn until `stop`: removals, then `sync_once`; `beat` every turn."""
        while not stop.is_set():
            beat()
            self._wake.wait(WAIT)
            self._wake.clear()
            removal: Removal | None = None
            try:
                while not self._removals.empty():
                    removal = self._removals.get_nowait()
                    spread, orphan, federation = removal
                    # An orphaned workload keeps running, unmanaged; otherwise it is deleted.
                    (self.sync.release if orphan else self.sync.remove)(spread, federation=federation)
                    if self.copies is not None:
                        (self.copies.release if orphan else self.copies.remove)(spread, federation=federation)
                    removal = None
                if self.copies is not None:
                    self.copies.sync_once()
                self.sync.sync_once()
            except Exception as error:  # the next round retries; the webhook enforces meanwhile
                if removal is not None:
                    self._removals.put(removal)
                log.warning("workload sync failed",
                            extra={"spread": removal[0] if removal else None, "error": str(error)[:300]})
