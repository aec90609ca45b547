"""A watchdog over long-running loops: each loop beats every turn; a loop that stops turning is seen.

Why: every network call has a deadline (`federation.kube.deadlines`), but a loop can still stop
turning for reasons no deadline covers — a lock never released, a call someone added without a
deadline, a library that waits on its own. Such a loop fails silently: the process looks alive,
its health says SERVING, and the statuses on the hub (or the agent's quotas) quietly go stale.
So each long-running loop of the coordinator (hub events, timer, status, the hub watches) and of
the agent (workload sync, reconciler, inventory reporter, link) calls `beat` once per turn, and
a watchdog thread checks that each has turned within its `period` times `factor` (and never
less than `floor` seconds: a busy 2-core machine delays a 1 s loop by seconds without anything
being wrong). A turn that failed counts as a turn: the watchdog is about loops that are stuck,
not about calls that fail — those are logged and counted where they happen.

What it reports, through the owner: a structured warning once when a loop stalls and once when
it turns again (never one per check), `snapshot()` for the metrics (`loop_stalled{loop}`,
seconds since each loop's last turn), and `critical_stalled()` for readiness — only the loops
registered `critical` make the process unready, because for some (a link whose coordinator is
away, a watch that waits quietly) being unready helps nobody.

Pure logic on an injected monotonic clock, so the rules are tested without waiting; the thread
(`start`/`stop`) only calls `check` every `interval` seconds.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

FACTOR = 3.0
"""A loop is stalled after `FACTOR` periods without a turn."""
FLOOR = 10.0
"""...and never before this many seconds: scheduling delays on a busy machine are not stalls."""
INTERVAL = 1.0
"""Seconds between two checks of the watchdog's thread."""

Monotonic = Callable[[], float]


@dataclasses.dataclass
class _Loop:
    period: float
    critical: bool
    last: float
    turns: int = 0
    stalled: bool = False
    stalls: int = 0


@dataclasses.dataclass(frozen=True)
class LoopState:
    """One loop as the watchdog last saw it (for metrics and tests)."""

    name: str
    seconds_since_turn: float
    stalled: bool
    critical: bool
    turns: int
    stalls: int
    """How many times it stalled (each recovery ends one)."""


@dataclasses.dataclass(frozen=True)
class Change:
    """A loop that stalled, or turned again after a stall."""

    name: str
    stalled: bool
    seconds_since_turn: float


class Watchdog:
    """Loops register (`register`), beat (`beat`), and are checked (`check`, or the thread)."""

    def __init__(self, owner: str, *, clock: Monotonic = time.monotonic, factor: float = FACTOR,
                 floor: float = FLOOR, on_change: Callable[[Change], None] | None = None) -> None:
        if factor < 1.0 or floor < 0.0:
            raise ValueError(f"watchdog factor must be >= 1 and floor >= 0 (got {factor}, {floor})")
        self.owner = owner
        self.factor = factor
        self.floor = floor
        self._clock = clock
        self._on_change = on_change
        self._loops: dict[str, _Loop] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def register(self, name: str, *, period: float, critical: bool = True) -> Callable[[], None]:
        """Watch loop `name`, expected to turn every `period` seconds; its beat function. The loop
        counts as having turned now (it is about to start)."""
        if period <= 0:
            raise ValueError(f"loop {name}: period must be positive, got {period}")
        with self._lock:
            if name in self._loops:
                raise ValueError(f"loop {name} is registered already")
            self._loops[name] = _Loop(period=period, critical=critical, last=self._clock())
        return lambda: self.beat(name)

    def beat(self, name: str) -> None:
        """Loop `name` turned (cheap: called every turn of every loop). Unknown names are ignored,
        so a part built without a watchdog can be given a beat that does nothing."""
        with self._lock:
            loop = self._loops.get(name)
            if loop is not None:
                loop.last = self._clock()
                loop.turns += 1

    def limit(self, name: str) -> float:
        """Seconds without a turn after which `name` is stalled."""
        with self._lock:
            return self._limit(self._loops[name])

    def check(self) -> list[Change]:
        """Compare every loop with its limit; the loops that stalled or recovered since the last
        check (each logged once, and passed to `on_change`)."""
        now = self._clock()
        changes = []
        with self._lock:
            for name, loop in self._loops.items():
                age = now - loop.last
                stalled = age > self._limit(loop)
                if stalled != loop.stalled:
                    loop.stalled = stalled
                    loop.stalls += stalled
                    changes.append(Change(name, stalled, age))
        for change in changes:
            self._report(change)
        return changes

    def stalled(self) -> frozenset[str]:
        """The loops stalled at the last check."""
        with self._lock:
            return frozenset(name for name, loop in self._loops.items() if loop.stalled)

    def critical_stalled(self) -> bool:
        """Whether a critical loop was stalled at the last check (the process is then not ready)."""
        with self._lock:
            return any(loop.stalled and loop.critical for loop in self._loops.values())

    def snapshot(self) -> list[LoopState]:
        """Every loop, by name: seconds since its last turn (now) and its state at the last check."""
        now = self._clock()
        with self._lock:
            return [LoopState(name, max(0.0, now - loop.last), loop.stalled, loop.critical, loop.turns,
                              loop.stalls)
                    for name, loop in sorted(self._loops.items())]

    # --- the thread ----------------------------------------------------------------------------

    def start(self, *, interval: float = INTERVAL) -> None:
        """Check every `interval` seconds on a daemon thread until `stop()`."""
        if self._thread is not None:
            raise RuntimeError("the watchdog is running already")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True,
                                        name=f"{self.owner}-watchdog")
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (safe to call twice, or without `start`)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5)

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.check()
            except Exception:  # an on_change that failed must not end the watching
                log.exception("watchdog check failed", extra={"owner": self.owner})

    # --- internals -----------------------------------------------------------------------------

    def _limit(self, loop: _Loop) -> float:
        return max(loop.period * self.factor, self.floor)

    def _report(self, change: Change) -> None:
        with self._lock:
            loop = self._loops[change.name]
            fields = {"owner": self.owner, "loop": change.name, "critical": loop.critical,
                      "seconds_since_turn": round(change.seconds_since_turn, 1),
                      "limit_seconds": self._limit(loop)}
        if change.stalled:
            log.warning("loop stalled: no turn within its limit", extra=fields)
        else:
            log.warning("loop turns again after a stall", extra=fields)
        if self._on_change is not None:
            self._on_change(change)
