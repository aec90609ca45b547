"""Which member clusters are alive, and how far failover may act on those that are not.

Why one object: whether a cluster's replicas move when its agent falls silent is decided by three
pieces of state that change together — when each agent was last heard (`failover.HeartbeatTracker`,
with the restarted coordinator's grace), each spread's failover brake (`brakes.Brakes`: the fault
looks like ours, keep the silent clusters) and the federation's failover rate limit
(`brakes.FailoverRateLimit`: a few lost clusters at a time). A heartbeat ends a cluster's failover
and its wait for the budget at once; a forgotten cluster leaves all of them. Kept apart, each event
had to remember every piece (and the readiness cached for the member views); here each is one
call, and the World owns one `Liveness` and delegates to it.

Readiness is cached per clusterLostSeconds (`readiness`): with thousands of spreads, each asking
which of its clusters are ready, the answer is recomputed only when a heartbeat or the clock could
have changed it. A heartbeat of a cluster every cached answer already counts as ready changes no
answer: it only makes that cluster ready for longer, and each answer is kept no longer than its
earliest deadline (`Readiness.until`) anyway. So only a beat that could change an answer (a cluster
not ready, unknown, or heard at an earlier time than before) makes them stale; with a thousand
agents beating, the others would otherwise have every placement recompute every cluster's readiness.

Pure: no I/O; the clock is injected. Used under the coordinator's lock, like the World (the
tracker alone is also beaten from the agent streams' threads).
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
from collections.abc import Callable

from federation.coordinator.model import brakes, failover


@dataclasses.dataclass(frozen=True)
class Readiness:
    """Which clusters are ready for one clusterLostSeconds, and which others were heard once (silent
    longer), valid between `since` and `until`."""

    beats: int
    names: tuple[str, ...]
    since: datetime.datetime
    until: datetime.datetime | None
    ready: dict[str, bool]
    silent: frozenset[str]
    serial: int
    """Unique to this reading among the Liveness's: what a memo of an answer read from it keeps,
    rather than the reading itself (`WorldState.ready_selected`)."""


class Liveness:
    """The heartbeats, the failover brakes and the failover rate limit of one World."""

    def __init__(
        self, clock: Callable[[], datetime.datetime], *, grace_from: datetime.datetime | None,
        failover_per_minute: int | None, cluster_names: Callable[[], tuple[str, ...]],
    ) -> None:
        self._clock = clock
        self._grace_from = grace_from
        self._cluster_names = cluster_names
        """The World's clusters, by name (the same tuple until the set changes)."""
        self.tracker = failover.HeartbeatTracker(clock, grace_from=grace_from)
        """When each cluster's agent was last heard, and which were reported lost."""
        self.brakes = brakes.Brakes()
        """Per spread, the failover brake (lost clusters kept as ready when the fault looks ours)."""
        self.failover_limit = brakes.FailoverRateLimit(failover_per_minute)
        """How many lost clusters may start failing over per minute, across the federation."""
        self._beats = 0
        """Bumped on every forgotten cluster, restart of the grace and heartbeat that could change a
        cached readiness (`heard`): cached readiness is stale."""
        self._readiness: dict[datetime.timedelta, Readiness] = {}
        self._serials = itertools.count(1)

    # --- events --------------------------------------------------------------------------------

    def heard(self, name: str, at: datetime.datetime | None = None) -> None:
        """Cluster `name`'s agent was heard (now, unless `at`): it is no longer failing over, nor
        waiting to."""
        before = self._heard_at(name)
        self.tracker.beat(name, at)
        self.failover_limit.heard(name)
        heard = self._heard_at(name)
        if before is None or heard is None or heard < before or not self._ready_in_every_answer(name):
            self._beats += 1

    def forget_cluster(self, name: str) -> None:
        """Cluster `name` is gone from the World: nothing of it is heard, lost or failing over."""
        self.tracker.forget(name)
        self.failover_limit.heard(name)
        self._beats += 1

    def forget_spread(self, key: str) -> None:
        """Spread `key` is gone: its brake with it."""
        self.brakes.forget(key)

    def restart_grace(self, at: datetime.datetime) -> None:
        """Count a cluster never heard as heard at `at` from now on (`failover`): the coordinator
        begins acting only now (a standby's World is made long before it leads)."""
        self.tracker.restart_grace(at)
        self._grace_from = at
        self._beats += 1

    def _heard_at(self, name: str) -> datetime.datetime | None:
        """When cluster `name` counts as heard: its last heartbeat, else the grace's start."""
        last = self.tracker.last(name)
        return last if last is not None else self._grace_from

    def _ready_in_every_answer(self, name: str) -> bool:
        """Whether every cached readiness still current counts cluster `name` as ready."""
        return all(found.ready.get(name, False) for found in self._readiness.values()
                   if found.beats == self._beats)

    # --- readers -------------------------------------------------------------------------------

    def lost(self, name: str, *, after: datetime.timedelta) -> bool:
        """Cluster `name` silent for longer than `after` (never heard: since the grace began)."""
        return self.tracker.lost(name, after=after)

    def readiness(self, after: datetime.timedelta) -> Readiness:
        """Every cluster's readiness for `after` (as `lost`, at one reading of the clock),
        recomputed only when a heartbeat or the clock could have changed one."""
        now = self._clock()
        names = self._cluster_names()
        cached = self._readiness.get(after)
        if cached is not None and cached.beats == self._beats and cached.names is names \
                and cached.since <= now and (cached.until is None or now <= cached.until):
            return cached
        ready: dict[str, bool] = {}
        silent: list[str] = []
        until: datetime.datetime | None = None
        for name in names:
            last = self.tracker.last(name)
            heard = last if last is not None else self._grace_from
            flag = heard is not None and not now - heard > after
            ready[name] = flag
            if flag and heard is not None:
                deadline = heard + after
                until = deadline if until is None else min(until, deadline)
            elif not flag and last is not None:
                silent.append(name)
        found = self._readiness[after] = Readiness(self._beats, names, now, until, ready, frozenset(silent),
                                                      next(self._serials))
        return found

    def heard_from_any(self, after: datetime.timedelta) -> bool:
        """Whether any cluster's agent was heard within `after` (a never-heard one: in the grace)."""
        return any(self.readiness(after).ready.values())

    def silent_among(self, names: frozenset[str], *, after: datetime.timedelta) -> frozenset[str]:
        """Of the clusters `names` (known ones), those heard once and silent for longer than `after`."""
        return names & self.readiness(after).silent
