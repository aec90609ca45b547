"""The coordinator's in-memory model of the federation, fed by events (plan: "world").

Why a separate, pure model: the hub watcher, the agent streams and the failover tick all change
what the coordinator knows, in any order (a Deployment may be seen before its spread, an agent may
report before its MemberCluster is listed). Keeping every fact here, and turning them into the
inputs of `placement.place` in one place, lets the placement loop be tested with plain event
sequences and an injected clock — no Ray, Kubernetes or gRPC.

Each event method returns the spread keys it affects, so the loop recomputes only those: a spread
edit or a scale affects that spread; a cluster's labels, taints, inventory, pod counts or
readiness affect the spreads whose subsets can select that cluster.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from federation.api import cluster, common
from federation.api import spread as spread_api
from federation.coordinator import failover
from federation.core import matching, placement, status

DEFAULT_LOST_SECONDS = 60


@dataclasses.dataclass
class SpreadEntry:
    """One spread as the coordinator knows it: the object, its target's replicas and template."""

    spread: spread_api.FederatedSpread
    generation: int
    replicas: int | None = None
    template: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        """`namespace/name`."""
        return self.spread.key

    @property
    def spec(self) -> spread_api.FederatedSpreadSpec:
        """The spread's spec."""
        return self.spread.spec

    @property
    def lost_after(self) -> datetime.timedelta:
        """How long an agent may be silent before its cluster counts as lost for this spread."""
        return datetime.timedelta(seconds=self.spec.failover.cluster_lost_seconds)


@dataclasses.dataclass(frozen=True)
class _Member:
    labels: dict[str, str]
    taints: tuple[common.Taint, ...]


@dataclasses.dataclass(frozen=True)
class _Target:
    replicas: int | None
    template: dict[str, Any] | None


class World:
    """Spreads, targets, clusters, inventories, pod counts, marks, heartbeats and last placements."""

    def __init__(
        self, clock: Callable[[], datetime.datetime], *, grace_from: datetime.datetime | None = None
    ) -> None:
        self.clock = clock
        self.tracker = failover.HeartbeatTracker(clock, grace_from=grace_from)
        self.seeded: dict[str, dict[str, dict[str, int]]] = {}
        """Per spread, the placement its hub status recorded: `current` until the first recompute."""
        self.placements: dict[str, placement.Placement] = {}
        self.placed_ready: dict[str, frozenset[str]] = {}
        self._spreads: dict[str, SpreadEntry] = {}
        self._targets: dict[str, _Target] = {}
        self._members: dict[str, _Member] = {}
        self._pools: dict[str, list[cluster.NodePool]] = {}
        self._pods: dict[str, dict[str, dict[str, status.ClusterPods]]] = {}
        self._workloads: dict[str, dict[str, status.WorkloadStatus]] = {}
        self._marks: dict[tuple[str, str, str], datetime.datetime] = {}
        self._counter = itertools.count(1)

    # --- events --------------------------------------------------------------------------------

    def upsert_spread(self, item: spread_api.FederatedSpread) -> set[str]:
        """A FederatedSpread was created or changed; a status-only update (our own write) affects nothing."""
        key = item.key
        old = self._spreads.get(key)
        if old is not None and old.spread.spec == item.spec:
            old.spread = item
            return set()
        if old is None and key not in self.placements and item.status is not None:
            recorded = {s.name: dict(s.clusters) for s in item.status.subset_statuses if s.clusters}
            if recorded:
                self.seeded[key] = recorded
        target = self._targets.get(key)
        self._spreads[key] = SpreadEntry(
            spread=item,
            generation=item.metadata.generation or next(self._counter),
            replicas=target.replicas if target else None,
            template=target.template if target else None,
        )
        return {key}

    def delete_spread(self, key: str) -> set[str]:
        """A FederatedSpread was deleted (its placement is dropped by the next recompute)."""
        self.seeded.pop(key, None)
        if self._spreads.pop(key, None) is None:
            return set()
        self._marks = {k: v for k, v in self._marks.items() if k[0] != key}
        return {key}

    def set_target(self, key: str, *, replicas: int | None, template: dict[str, Any] | None) -> set[str]:
        """The hub Deployment of spread `key` was seen: its `spec.replicas` and the object itself."""
        target = _Target(replicas, template)
        if self._targets.get(key) == target:
            return set()
        self._targets[key] = target
        entry = self._spreads.get(key)
        if entry is None:
            return set()
        entry.replicas, entry.template = replicas, template
        if entry.spread.metadata.generation is None:
            entry.generation = next(self._counter)
        return {key}

    def upsert_cluster(
        self, name: str, *, labels: Mapping[str, str], taints: Sequence[common.Taint] = ()
    ) -> set[str]:
        """A MemberCluster was created or changed (topology labels, cluster taints)."""
        member = _Member(dict(labels), tuple(taints))
        old = self._members.get(name)
        if old == member:
            return set()
        before = self._selecting(name)
        self._members[name] = member
        return before | self._selecting(name)

    def delete_cluster(self, name: str) -> set[str]:
        """A MemberCluster was deleted: forget everything about it."""
        affected = self._selecting(name)
        self._members.pop(name, None)
        self._pools.pop(name, None)
        self._pods.pop(name, None)
        self._workloads.pop(name, None)
        self._marks = {k: v for k, v in self._marks.items() if k[2] != name}
        self.tracker.forget(name)
        return affected

    def inventory(self, name: str, pools: Sequence[cluster.NodePool]) -> set[str]:
        """A full InventoryReport from `name`'s agent (latest wins)."""
        if self._pools.get(name) == list(pools):
            return set()
        self._pools[name] = list(pools)
        return self._selecting(name)

    def pod_counts(
        self, name: str, counts: Mapping[str, Mapping[str, status.ClusterPods]], *,
        workloads: Mapping[str, status.WorkloadStatus] | None = None,
    ) -> set[str]:
        """A full PodCountsReport from `name`'s agent: per spread, per subset (latest wins).

        Affects the spreads whose counts changed and, through overcommit protection, every spread
        that can use the cluster. `workloads` (the member Deployments' status per spread) feeds
        the hub Deployment's status only, so it affects no placement.
        """
        self._workloads[name] = dict(workloads or {})
        new = {key: dict(per_subset) for key, per_subset in counts.items()}
        old = self._pods.get(name, {})
        if old == new:
            return set()
        self._pods[name] = new
        changed = {k for k in set(old) | set(new) if old.get(k) != new.get(k) and k in self._spreads}
        return changed | self._selecting(name)

    def unschedulable(
        self, name: str, *, spread: str, subset: str, since: datetime.datetime
    ) -> set[str]:
        """An agent marked (subset, cluster) of `spread` unschedulable at `since`; the latest wins."""
        mark = (spread, subset, name)
        if self._marks.get(mark) == since:
            return set()
        self._marks[mark] = since
        return {spread} if spread in self._spreads else set()

    def heartbeat(self, name: str, at: datetime.datetime | None = None) -> set[str]:
        """`name`'s agent was heard; affects the spreads for which it was lost and is ready again."""
        users = [self._spreads[k] for k in sorted(self._selecting(name))]
        lost_before = {e.key for e in users if self.tracker.lost(name, after=e.lost_after)}
        self.tracker.beat(name, at)
        return {
            e.key for e in users
            if e.key in lost_before and not self.tracker.lost(name, after=e.lost_after)
        }

    # --- readers -------------------------------------------------------------------------------

    def spreads(self) -> list[SpreadEntry]:
        """Every known spread, by key."""
        return [self._spreads[k] for k in sorted(self._spreads)]

    def spread(self, key: str) -> SpreadEntry | None:
        """The spread `key`, if known."""
        return self._spreads.get(key)

    def cluster_names(self) -> list[str]:
        """Clusters known from a MemberCluster or an agent's inventory, by name."""
        return sorted(set(self._members) | set(self._pools))

    def ready(self, name: str, *, after: datetime.timedelta) -> bool:
        """Heard within `after`."""
        return not self.tracker.lost(name, after=after)

    def snapshot_for(self, key: str) -> cluster.CapacitySnapshot:
        """Every cluster as spread `key` sees it: ready within its clusterLostSeconds."""
        entry = self._spreads.get(key)
        after = entry.lost_after if entry else datetime.timedelta(seconds=DEFAULT_LOST_SECONDS)
        clusters = []
        for name in self.cluster_names():
            member = self._members.get(name, _Member({}, ()))
            clusters.append(cluster.ClusterCapacity(
                name=name, labels=dict(member.labels), ready=self.ready(name, after=after),
                taints=list(member.taints), node_pools=list(self._pools.get(name, [])),
            ))
        return cluster.CapacitySnapshot(clusters=clusters)

    def ready_selected(self, key: str) -> frozenset[str]:
        """The clusters spread `key`'s subsets select that are ready for it now."""
        entry = self._spreads.get(key)
        if entry is None:
            return frozenset()
        return frozenset(n for n in self._selected_by(entry) if self.ready(n, after=entry.lost_after))

    def marks_for(self, key: str) -> list[placement.UnschedulableMark]:
        """Spread `key`'s unschedulable marks (expiry is the placement's business)."""
        return [
            placement.UnschedulableMark(subset=subset, cluster=name, since=since)
            for (spread_key, subset, name), since in sorted(self._marks.items())
            if spread_key == key
        ]

    def pods_for(self, key: str) -> dict[str, dict[str, status.ClusterPods]]:
        """Spread `key`'s pod counts per subset per cluster."""
        found: dict[str, dict[str, status.ClusterPods]] = {}
        for name in sorted(self._pods):
            for subset, pods in self._pods[name].get(key, {}).items():
                found.setdefault(subset, {})[name] = pods
        return found

    def workloads_for(self, key: str) -> dict[str, status.WorkloadStatus]:
        """Spread `key`'s member Deployment status per cluster, as agents last reported it."""
        return {name: found[key] for name, found in sorted(self._workloads.items()) if key in found}

    def running_for(self, key: str) -> dict[str, dict[str, int]]:
        """Spread `key`'s running pods per subset per cluster."""
        return {
            subset: {name: pods.running for name, pods in per_cluster.items()}
            for subset, per_cluster in self.pods_for(key).items()
        }

    def current_for(self, key: str) -> dict[str, dict[str, int]]:
        """Spread `key`'s last placement per subset per cluster; before the first, what its hub
        status recorded (a restarted coordinator keeps what the last one placed), else empty."""
        last = self.placements.get(key)
        if last is not None:
            return last.counts()
        return {subset: dict(counts) for subset, counts in self.seeded.get(key, {}).items()}

    def min_lost_seconds(self) -> int:
        """The smallest clusterLostSeconds among spreads (the default when there are none)."""
        return min(
            (e.spec.failover.cluster_lost_seconds for e in self._spreads.values()),
            default=DEFAULT_LOST_SECONDS,
        )

    # --- selection -----------------------------------------------------------------------------

    def _selected_by(self, entry: SpreadEntry) -> set[str]:
        names: set[str] = set()
        for subset in entry.spec.subsets:
            if subset.clusters is not None:
                names.update(subset.clusters)
            elif subset.cluster_selector is not None:
                names.update(
                    n for n in self.cluster_names()
                    if matching.label_selector_matches(subset.cluster_selector, self._labels(n))
                )
        return names

    def _labels(self, name: str) -> dict[str, str]:
        member = self._members.get(name)
        return member.labels if member else {}

    def _selecting(self, name: str) -> set[str]:
        """Spreads whose subsets can select cluster `name`, or that have replicas placed there."""
        found = {e.key for e in self._spreads.values() if self._can_select(e.spec.subsets, name)}
        found.update(
            key for key, last in self.placements.items()
            if key in self._spreads and last.clusters.get(name, 0)
        )
        return found

    def _can_select(self, subsets: Iterable[spread_api.Subset], name: str) -> bool:
        labels = self._labels(name)
        for subset in subsets:
            if subset.clusters is not None and name in subset.clusters:
                return True
            if subset.cluster_selector is not None and matching.label_selector_matches(
                subset.cluster_selector, labels
            ):
                return True
        return False
