"""Which member clusters are lost: heartbeats against an injected clock.

Why a separate, pure piece: failover (`spec.failover.clusterLostSeconds`) is a timing
rule — an agent silent longer than the limit makes its cluster not ready and its replicas move —
and timing rules are only testable with a clock the test controls. The tracker records when each
agent was last heard; the coordinator asks it, on every tick, which clusters are ready, which were
just lost (to recompute placements once, not on every tick) and which came back.

Each spread has its own `clusterLostSeconds`, so the limit is an argument of every query rather
than a property of the tracker. Edge-triggered reports (`newly_lost`, `returned`) use the limit
of the call that asked; the coordinator passes its global limit there.

A restarted coordinator has heard nobody yet. Counting every cluster as lost until its agent
reconnects would move every replica at startup, so a tracker made with `grace_from` (the
coordinator's start) treats a cluster it has never heard as ready until the limit has passed
since then — exactly as if its agent had beaten at the start. A standby is made long before it
leads, so the grace restarts when it begins to act (`restart_grace`). Agents reconnect within seconds;
one that does not is failed over one `clusterLostSeconds` after the start, not never.

Thread-safe: the gRPC servicer threads beat while the placement loop reads. Pure: no I/O.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Iterable


class HeartbeatTracker:
    """Last heartbeat per cluster, and the clusters reported lost that have not beaten since."""

    def __init__(
        self, clock: Callable[[], datetime.datetime], *, grace_from: datetime.datetime | None = None
    ) -> None:
        self._clock = clock
        self._grace_from = grace_from
        self._lock = threading.Lock()
        self._last: dict[str, datetime.datetime] = {}
        self._reported_lost: set[str] = set()
        self._returned: list[str] = []

    def restart_grace(self, at: datetime.datetime) -> None:
        """Treat a cluster never heard as heard at `at` (the coordinator began acting then)."""
        with self._lock:
            self._grace_from = at

    def beat(self, cluster: str, at: datetime.datetime | None = None) -> None:
        """Record a heartbeat from `cluster` (now, unless `at` is given); an older one changes nothing."""
        when = at if at is not None else self._clock()
        with self._lock:
            last = self._last.get(cluster)
            if last is not None and when <= last:
                return
            self._last[cluster] = when
            if cluster in self._reported_lost:
                self._reported_lost.discard(cluster)
                if cluster not in self._returned:
                    self._returned.append(cluster)

    def forget(self, cluster: str) -> None:
        """Drop everything known about `cluster` (its MemberCluster was deleted)."""
        with self._lock:
            self._last.pop(cluster, None)
            self._reported_lost.discard(cluster)
            if cluster in self._returned:
                self._returned.remove(cluster)

    def last(self, cluster: str) -> datetime.datetime | None:
        """When `cluster` was last heard, or None."""
        with self._lock:
            return self._last.get(cluster)

    def silent_for(self, cluster: str) -> datetime.timedelta | None:
        """How long since `cluster` was last heard, or None if never."""
        last = self.last(cluster)
        return None if last is None else self._clock() - last

    def lost(self, cluster: str, *, after: datetime.timedelta) -> bool:
        """Silent for longer than `after`; never heard counts as heard at `grace_from`, if given."""
        silent = self.silent_for(cluster)
        if silent is None:
            return self._grace_from is None or self._clock() - self._grace_from > after
        return silent > after

    def ready_clusters(self, names: Iterable[str], *, after: datetime.timedelta) -> list[str]:
        """Those of `names` heard within `after`, in the given order."""
        return [name for name in names if not self.lost(name, after=after)]

    def newly_lost(self, *, after: datetime.timedelta) -> list[str]:
        """Clusters that went silent for longer than `after` since the last call, sorted; each once.

        Only clusters heard at least once qualify (a never-connected cluster has nothing to move).
        A cluster is reported again only after it beats and goes silent again.
        """
        now = self._clock()
        with self._lock:
            found = sorted(
                name for name, last in self._last.items()
                if name not in self._reported_lost and now - last > after
            )
            self._reported_lost.update(found)
            return found

    def returned(self) -> list[str]:
        """Clusters that beat again after `newly_lost` reported them, in order of return; each once."""
        with self._lock:
            back, self._returned = self._returned, []
            return back
