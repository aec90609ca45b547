"""The inventory reporter: this member's node pools, sent to the coordinator on change and heartbeat.

Why pools and not nodes: the coordinator simulates capacity per node kind; nodes that only their
load tells apart fold into one `NodePool` with a count (`federation.core.inventory`), and the pools
stay within a budget (`max_pools`, the agent's `--max-node-pools`, 100 by default) by merging
nodes of different load into pools that state the most any of them requested
(`federation.core.pool_bounds`), so a 5,000-node cluster of a few machine types reports at most
100 pools and never more room than it has. A cluster with more kinds of node than the budget
reports one pool per kind, over the budget, and says so in a warning.

Why it is cheap enough for 5,000 nodes and 100,000 pods: the cache already holds each node as a
`NodeView` and each bound pod as a `PodUsage` whose requests were computed once, when the pod
arrived; the cache does not count an event as a change when the compact view is unchanged (node
heartbeats, most pod status updates). So the pools are recomputed — one pass over nodes and pods,
no JSON — only when something that matters changed, at most every `min_gap` seconds, and sent only
when they differ from the last report or the heartbeat interval has passed.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
import time

from agents import outbox, runnable
from agents.cache import heap
from agents.cache import store as cache_mod
from federation import clock as clock_mod
from federation.api import cluster
from federation.core import inventory, pool_bounds

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class InventorySettings:
    """What the inventory is told (`agents.main.AgentConfig.inventory`)."""

    max_node_pools: int = pool_bounds.DEFAULT_BUDGET
    """The most node pools a report states (`--max-node-pools`; `federation.core.pool_bounds`)."""


class InventoryReporter:
    """Puts the member's InventoryReport into the outbox when the pools change and on heartbeat (an
    `agents.runnable.Runnable`; not critical: it only talks to the coordinator)."""

    name = "reporter"
    critical = False

    def __init__(self, cache: cache_mod.Cache, box: outbox.ReportOutbox, *,
                 clock: clock_mod.Clock = clock_mod.utcnow, heartbeat_seconds: float = 10.0,
                 max_pools: int = pool_bounds.DEFAULT_BUDGET) -> None:
        self._cache = cache
        self.max_pools = max_pools
        self._over_budget = False
        self._outbox = box
        self._clock = clock
        self.heartbeat_seconds = heartbeat_seconds
        self._lock = threading.Lock()
        self._seen = -1
        self._pools: list[cluster.NodePool] = []
        self._observed_at: datetime.datetime | None = None
        self._sent: list[cluster.NodePool] | None = None
        self._last_sent = float("-inf")
        self._sequence = 0

    @property
    def period(self) -> float:
        """The watchdog's period: a report goes out at least every heartbeat."""
        return self.heartbeat_seconds

    def pools(self) -> list[cluster.NodePool]:
        """The node pools as of the cache now (recomputed only if nodes or bound pods changed)."""
        with self._lock:
            version = self._cache.version(cache_mod.NODES, cache_mod.USAGE)
            if version != self._seen:
                found = inventory.pooling(self._cache.nodes(), self._cache.usage(), budget=self.max_pools)
                self._note(found)
                self._pools = found.pools
                self._observed_at = self._clock()
                self._seen = version
                heap.release()  # the copies of the cache's views the build took are garbage now
            return list(self._pools)

    def _note(self, found: inventory.Pooling) -> None:
        """Log how the pools were bounded: a warning when the node classes alone exceed the budget
        (once, until they fit again), the loss of room at debug level."""
        if found.over_budget and not self._over_budget:
            LOG.warning("inventory over its pool budget: %d node classes (labels, taints, allocatable) "
                        "exceed max_pools; one pool per class", found.classes,
                        extra={"max_pools": self.max_pools})
        self._over_budget = found.over_budget
        if found.exact > len(found.pools):
            LOG.debug("inventory pools bounded",
                      extra={"pools": len(found.pools), "exact": found.exact,
                             "classes": found.classes,
                             "kept": ",".join(f"{k}:{v:.3f}" for k, v in found.kept.items()),
                             "distortion": f"{found.distortion:.3f}"})

    def summary(self) -> cluster.CapacitySummary:
        """Totals over every node (for MemberCluster status), cordoned and unready ones included."""
        count, allocatable, requested = inventory.capacity_summary(self._cache.nodes(), self._cache.usage())
        return cluster.CapacitySummary(nodes=count, allocatable=allocatable, requested=requested)

    def report_once(self, *, force: bool = False) -> bool:
        """Put a report when the pools changed, the heartbeat is due, or `force`; True if put."""
        current = self.pools()
        now = time.monotonic()
        with self._lock:
            due = now - self._last_sent >= self.heartbeat_seconds
            if not force and not due and current == self._sent:
                return False
            self._sequence += 1
            observed_at = self._observed_at or self._clock()
            self._outbox.put_inventory(outbox.inventory_message(
                current, sequence=self._sequence, observed_at=observed_at))
            if current != self._sent:
                LOG.debug("inventory changed",
                          extra={"pools": len(current),
                                 "nodes": sum(p.count for p in current)})
            self._sent, self._last_sent = current, now
            return True

    def run(self, stop: threading.Event, beat: runnable.Beat, *, min_gap: float = 2.0) -> None:
        """Report until `stop`: after nodes or bound pods change, at most every `min_gap` seconds
        (a recount of 5,000 nodes and 100,000 pods costs about half a second), and at least every
        heartbeat. `beat` is called every turn (the watchdog's heartbeat, `federation.watchdog`)."""
        while not stop.is_set():
            beat()
            seen = self._cache.version(cache_mod.NODES, cache_mod.USAGE)
            try:
                self.report_once()
            except Exception as error:  # a malformed node must not end the loop
                LOG.warning("inventory report failed", extra={"error": str(error)[:300]})
            if stop.wait(min(min_gap, self._until_due())):
                break
            self._cache.wait_for_change(seen, timeout=self._until_due(),
                                        kinds=(cache_mod.NODES, cache_mod.USAGE))

    def _until_due(self) -> float:
        """Seconds until the next heartbeat report is due (0 if it is)."""
        with self._lock:
            return max(0.0, self.heartbeat_seconds - (time.monotonic() - self._last_sent))
