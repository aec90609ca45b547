"""When a leading coordinator gives its Lease up because it stalled: the rule, pure.

Why: without leader election, a coordinator whose hub-events or timer loop stops turning turns
its readiness NOT_SERVING (`federation.watchdog`) and its Service stops routing to it. Under
`--leader-elect` that changes nothing: the pod's readiness asks `liveness` and the Service routes
by the leader label (`hub.pod_label`), while the election thread, which needs neither loop, keeps
renewing the Lease. A stalled leader would keep the federation standing still with a healthy
standby waiting. So a leader whose critical loop has not turned for the watchdog's limit plus a
grace gives up (`coordinator.leading` then stops acting as on a lost lease and releases the
Lease). This module decides when, on the watchdog's view and an injected monotonic clock.

What counts as "stalled" (docs/decisions.md, "A stalled leader gives up its Lease"):

* **The critical loops only** — those the watchdog registered critical, the ones that make a
  lone coordinator unready (hub events, timer). They wait on no hub call: a stall there is this
  process's fault (a lock held for ever, a Ray shard that hangs under the lock), which a standby
  does not share. The loops that wait on the hub alone (status, the hub watches) never count: stalled,
  they say the hub is slow or away, which the standby would meet as well, so giving up would
  only churn; and a leader whose own way to the hub is cut loses the Lease anyway, as its
  renewals take that way too (the renew deadline).
* **The hub must answer this process** (`hub_answers`, asked at most every `PROBE_EVERY` s while
  a stall is past its bound): should a critical loop ever come to wait on the hub, a hub that
  answers nobody would stall the standby alike, and the release could not even be written.
  Meanwhile the leader keeps the Lease (`hub_away` says so).
* **Judged from the first listing on** (`begin`): the first full round places every spread at
  once under the coordinator's lock (about 20 s at 10,000 spreads, 100 s at 100,000 on 2 busy
  cores, bench/README.md), holding both critical loops; a standby would take as long, so giving
  up during it would only churn. A stall counts from the loop's last turn or from `begin`,
  whichever is later.
* **Past the watchdog's limit plus a grace** (`GRACE_SECONDS`, the coordinator's
  `leader_stall_grace_seconds`): the limit is when readiness would turn (hub events 15 s, timer
  10 s); a round that holds the lock for tens of seconds (a failover of a cluster that thousands
  of spreads use) is work, not a stall. A stall that clears within it changes nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from federation import watchdog as watchdog_mod

GRACE_SECONDS = 60.0
"""Seconds a critical loop may stay stalled past the watchdog's limit before the leader gives up."""
PROBE_EVERY = 10.0
"""While a stall is past its bound and the hub did not answer, ask the hub again this often."""


@dataclasses.dataclass(frozen=True)
class Stall:
    """Critical loops that have not turned for their limit plus the grace."""

    loops: tuple[str, ...]
    seconds: float
    """The longest of their stalls (counted from `begin` at the earliest)."""


class StallJudge:
    """Says when a leader should give up: `begin` once the hub is listed, then `verdict` often."""

    def __init__(self, watchdog: watchdog_mod.Watchdog, *, grace: float = GRACE_SECONDS,
                 clock: watchdog_mod.Monotonic = time.monotonic, probe_every: float = PROBE_EVERY) -> None:
        """`clock` must be the watchdog's (both are `time.monotonic` in the process)."""
        if grace < 0 or probe_every < 0:
            raise ValueError(f"the stall grace and probe period must be >= 0 (got {grace}, {probe_every})")
        self.watchdog = watchdog
        self.grace = grace
        self.probe_every = probe_every
        self._clock = clock
        self._since: float | None = None
        self._probed_at: float | None = None
        self._hub_answered = False
        self.hub_away = False
        """A stall is past its bound, but the hub did not answer the last probe: the Lease is kept."""

    def begin(self) -> None:
        """Judge from now on (the leader has listed the hub)."""
        if self._since is None:
            self._since = self._clock()

    def stalled(self) -> Stall | None:
        """The critical loops stalled past their limit plus the grace, now; None if none (or
        before `begin`)."""
        if self._since is None:
            return None
        judged = self._clock() - self._since
        over = []
        for state in self.watchdog.snapshot():
            if not state.critical:
                continue
            seconds = min(state.seconds_since_turn, judged)
            if seconds > self.watchdog.limit(state.name) + self.grace:
                over.append((state.name, seconds))
        if not over:
            return None
        return Stall(loops=tuple(name for name, _ in over), seconds=max(seconds for _, seconds in over))

    def verdict(self, hub_answers: Callable[[], bool]) -> Stall | None:
        """The stall to give up for; None while no critical loop is past its bound, or while the
        hub does not answer (`hub_answers`, asked at most every `probe_every` seconds)."""
        stall = self.stalled()
        if stall is None:
            self._probed_at, self.hub_away = None, False
            return None
        now = self._clock()
        if self._probed_at is None or now - self._probed_at >= self.probe_every:
            self._probed_at = now
            self._hub_answered = hub_answers()
        self.hub_away = not self._hub_answered
        return stall if self._hub_answered else None
