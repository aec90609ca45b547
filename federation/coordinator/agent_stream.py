"""One agent's welcomed stream as the coordinator holds it: its outbox and what it last reported.

Why a module of its own: an agent reports in full or in deltas (inventory by sequence number, pod
counts per spread), and the coordinator keeps each stream's latest picture so that a delta lands
on the state it was made against. Merging a report into that picture is bookkeeping of one stream
— no placement, no other stream — so it lives beside the stream, and the facade
(`coordinator.facade`) only hands the merged picture to the world and publishes what changed.

- **Inventory deltas name their base.** A delta whose `base_sequence` is not the sequence this
  stream holds cannot be applied (a report was lost or reordered): the agent is asked for a full
  inventory instead (`ResyncRequest`), and nothing changes meanwhile.
- **Pod counts replace per spread.** A full report replaces everything; a partial one replaces
  the spreads it names, each with all of its facts (a spread's conflicts, misplaced pods and
  autoscalers go with its counts, so a spread reported again without them has none left).
- **Closing is a value.** The writer of a stream drains its outbox until it meets a close
  reason: `END` (the agent half-closed) or `SUPERSEDED` (a newer stream of the same cluster).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TypeVar

from federation.api import cluster
from federation.coordinator.wire import convert, inbound, outbox
from federation.core import status
from federation.rpc import agent_pb2

END = object()  # the close reason when the agent half-closed its stream: the writer returns
SUPERSEDED = object()  # the close reason when a newer stream for the same cluster replaced this one

Fact = TypeVar("Fact")


def _per_spread(
    old: Mapping[str, Fact], new: Mapping[str, Fact], *, named: Collection[str],
) -> dict[str, Fact]:
    """`old` less the spreads a partial report `named`, then `new` (what it said of them)."""
    return {**{k: v for k, v in old.items() if k not in named}, **new}


class AgentStream:
    """One welcomed stream: the outbox its writer drains, and per-stream report state."""

    def __init__(self, cluster_name: str, *, applied: Iterable[agent_pb2.AppliedSpread] = ()) -> None:
        self.cluster = cluster_name
        self.applied: dict[str, set[str]] = {}
        """The Hello's applied spreads, for the (possibly later) resync: key -> the spread uids
        listed for it ("" from an agent that does not say)."""
        self.subset_pods: dict[str, dict[str, int]] = {}
        """The Hello's count of each listed spread's pods per subset (whatever their uid: a spread
        of the same key adopts them); absent when none or unknown."""
        for item in applied:
            self.applied.setdefault(item.spread, set()).add(item.spread_uid)
            for subset, count in item.subset_pods.items():  # the same counts on every entry
                if count > 0:
                    row = self.subset_pods.setdefault(item.spread, {})
                    row[subset] = max(row.get(subset, 0), count)
        self.outgoing = outbox.Outbox()
        """Bounded and coalescing per spread (`wire.outbox`): a slow agent holds at most two
        messages per spread it is being sent, whatever happens meanwhile."""
        self.resynced = False
        self.inventory_sequence = 0
        self.pools: dict[str, cluster.NodePool] = {}
        self.counts: dict[str, dict[str, status.ClusterPods]] = {}
        self.workloads: dict[str, status.WorkloadStatus] = {}
        self.conflicts: dict[str, str] = {}
        self.dependency_conflicts: dict[str, tuple[str, ...]] = {}
        self.misplaced: dict[str, str] = {}
        self.autoscalers: dict[str, tuple[str, ...]] = {}
        self.awaiting_report: set[str] = set()
        """Spreads this agent holds that no longer select its cluster, found at the resync: placed
        again once its first report says what runs there (`lifecycle.Leftover.deselected`)."""

    def send(self, **body: object) -> None:
        """Queue one CoordinatorMessage, e.g. `send(assignment=...)` (coalesced per spread)."""
        self.outgoing.put(agent_pb2.CoordinatorMessage(**body))  # type: ignore[arg-type]

    def send_assignment(self, *, spread: str, message: bytes) -> None:
        """Queue the serialized CoordinatorMessage `message` carrying an assignment of spread
        `spread` as it is (coalesced per spread as `send(assignment=...)`; never parsed:
        `wire.outbox.Outbox.put_assignment`)."""
        self.outgoing.put_assignment(spread=spread, message=message)

    def take_inventory(self, report: agent_pb2.InventoryReport) -> list[cluster.NodePool] | None:
        """Merge an InventoryReport: the cluster's node pools now, by name; None when it was a
        delta on another sequence (a full inventory was asked for; nothing changed)."""
        pools = inbound.node_pools(report)
        if report.full:
            self.pools = pools
        elif report.base_sequence != self.inventory_sequence:
            self.send(resync=agent_pb2.ResyncRequest(
                inventory=True, reason=f"delta on {report.base_sequence}, "
                                       f"coordinator holds {self.inventory_sequence}"))
            return None
        else:
            self.pools.update(pools)
            for gone in report.removed_pools:
                self.pools.pop(gone, None)
        self.inventory_sequence = report.sequence
        return [self.pools[k] for k in sorted(self.pools)]

    def take_pod_counts(self, report: agent_pb2.PodCountsReport) -> convert.PodCounts:
        """Merge a PodCountsReport (checked by `inbound.check_pod_counts` first) into this
        stream's picture; what the report itself said (its `assigned` spreads among it)."""
        inbound.check_pod_counts(report)
        found = convert.counts_from_pb(report)
        if report.full:
            self.counts, self.workloads, self.conflicts = found.counts, found.workloads, found.conflicts
            self.dependency_conflicts, self.misplaced = found.dependency_conflicts, found.misplaced
            self.autoscalers = found.autoscalers
            return found
        named = found.counts.keys()
        self.counts = {**self.counts, **found.counts}
        self.workloads = {**self.workloads, **found.workloads}
        self.conflicts = {**self.conflicts, **found.conflicts}
        self.dependency_conflicts = _per_spread(self.dependency_conflicts, found.dependency_conflicts,
                                                named=named)
        self.misplaced = _per_spread(self.misplaced, found.misplaced, named=named)
        self.autoscalers = _per_spread(self.autoscalers, found.autoscalers, named=named)
        return found
