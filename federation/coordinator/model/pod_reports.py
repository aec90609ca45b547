"""What the agents last reported of each spread's pods, and which of those reports still hold.

Why a store of its own: pod counts are the coordinator's only evidence of what runs where, and two
rules read them with different trust. Overcommit protection and status take the last report as
it is. The handover rule (`federation.core.handover`) must not count a pod as Ready on stale
evidence: a cluster that was lost kept its last report while it was away, and its pods may have
died meanwhile. So a cluster found lost is marked *unverified* until its agent sends a full report
again; until then its pods are kept (never told to go) but not counted as Ready.

What a lost cluster holds is the larger of two pieces of evidence: its last report, and the share
it was last told to run before its replicas moved away (`away`). The report alone is not enough: an
agent reports pod counts when they change, so one that dies a moment after its pods became Ready
may have last said "0 running" — while its Deployment, which keeps the last assigned replicas,
runs them all.

Reports arrive per cluster; readers ask per spread. Both shapes are kept (`by_spread` is shared
with the member views, which charge every spread's pending pods), and the World tells this store
what happened. Pure: no clock, no I/O; used under the coordinator's lock.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Mapping

from federation.core import placement, status

PerSubset = dict[str, status.ClusterPods]


class PodReports:
    """Per cluster and per spread, the last pod counts, member Deployment statuses and conflicts."""

    def __init__(self) -> None:
        self.by_cluster: dict[str, dict[str, PerSubset]] = {}
        """Per cluster, per spread key, per subset: the last full report."""
        self.by_spread: dict[str, dict[str, PerSubset]] = {}
        """The same counts per spread key, per cluster (shared with `member_views.MemberViews`)."""
        self._workloads: dict[str, dict[str, status.WorkloadStatus]] = {}
        self._conflicts: dict[str, dict[str, str]] = {}
        self._unverified: set[str] = set()
        self._away: dict[str, dict[str, dict[str, int]]] = {}
        """Per lost cluster, per spread key, per subset: the share it ran before its replicas moved."""

    # --- events --------------------------------------------------------------------------------

    def report(
        self, name: str, counts: Mapping[str, Mapping[str, status.ClusterPods]], *,
        workloads: Mapping[str, status.WorkloadStatus] | None = None,
        conflicts: Mapping[str, str] | None = None,
    ) -> set[str] | None:
        """A full report from `name`'s agent; the spread keys whose counts changed — every spread
        with pods there when the report verifies a returned cluster (its counts now count) — or
        None when the report says nothing new."""
        self._workloads[name] = dict(workloads or {})
        self._conflicts[name] = dict(conflicts or {})
        new = {key: dict(per_subset) for key, per_subset in counts.items()}
        old = self.by_cluster.get(name, {})
        verified = name in self._unverified
        self._unverified.discard(name)
        if verified:
            self._away.pop(name, None)
        if old == new:
            return set(new) if verified else None
        self.by_cluster[name] = new
        for key in set(old) - set(new):
            self.by_spread.get(key, {}).pop(name, None)
        for key, per_subset in new.items():
            self.by_spread.setdefault(key, {})[name] = per_subset
        if verified:
            return set(old) | set(new)
        return {k for k in set(old) | set(new) if old.get(k) != new.get(k)}

    def lost(self, name: str) -> None:
        """`name` was found lost: its last report no longer proves that its pods are Ready."""
        if name in self.by_cluster or name in self._away:
            self._unverified.add(name)

    def remember_away(self, key: str, old: placement.Placement, *, lost: Collection[str]) -> None:
        """Spread `key` is placed anew; of its previous placement `old`, remember the shares of the
        `lost` clusters (the largest seen while each is away): what they run meanwhile."""
        for subset in old.subsets if lost else ():
            for name in lost:
                share = subset.clusters.get(name, 0)
                if share:
                    held = self._away.setdefault(name, {}).setdefault(key, {})
                    held[subset.name] = max(held.get(subset.name, 0), share)

    def forget(self, name: str) -> set[str]:
        """`name`'s MemberCluster was deleted; the spreads that had pods counted there."""
        keys = set(self.by_cluster.pop(name, {}))
        for key in keys:
            self.by_spread.get(key, {}).pop(name, None)
        self._workloads.pop(name, None)
        self._conflicts.pop(name, None)
        self._unverified.discard(name)
        self._away.pop(name, None)
        return keys

    def forget_spread(self, key: str) -> None:
        """Spread `key` was deleted: what lost clusters held of it no longer matters."""
        for held in self._away.values():
            held.pop(key, None)

    # --- readers -------------------------------------------------------------------------------

    def unverified(self, name: str) -> bool:
        """Whether `name` returned after being lost and has not sent a full report since."""
        return name in self._unverified

    def pods_for(self, key: str) -> dict[str, dict[str, status.ClusterPods]]:
        """Spread `key`'s pod counts per subset per cluster (clusters by name)."""
        found: dict[str, dict[str, status.ClusterPods]] = {}
        per_cluster = self.by_spread.get(key, {})
        for name in sorted(per_cluster):
            for subset, pods in per_cluster[name].items():
                found.setdefault(subset, {})[name] = pods
        return found

    def running_for(self, key: str) -> dict[str, dict[str, int]]:
        """Spread `key`'s running pods per subset per cluster, as last reported."""
        return {subset: {name: pods.running for name, pods in per_cluster.items()}
                for subset, per_cluster in self.pods_for(key).items()}

    def ready_for(self, key: str, *, usable: Container[str]) -> dict[str, dict[str, int]]:
        """Spread `key`'s verified Ready pods per subset per cluster, of the `usable` clusters only
        (a lost cluster's report, or a returned one's before its next report, proves nothing)."""
        found: dict[str, dict[str, int]] = {}
        for name, per_subset in self.by_spread.get(key, {}).items():
            if name in usable and name not in self._unverified:
                for subset, pods in per_subset.items():
                    if pods.ready:
                        found.setdefault(subset, {})[name] = pods.ready
        return found

    def holding(self, key: str) -> frozenset[str]:
        """The clusters whose last report counts pods of spread `key` (running, pending, being
        created or being deleted): they keep its assignment until their pods are gone."""
        return frozenset(name for name, per_subset in self.by_spread.get(key, {}).items()
                         if any(pods.active or pods.deleting for pods in per_subset.values()))

    def held_by(self, name: str, key: str) -> dict[str, int]:
        """What cluster `name` holds of spread `key` per subset, as far as the coordinator knows:
        its last report's running pods, or the share it ran before it was lost, whichever is more."""
        held = {subset: pods.running for subset, pods in self.by_spread.get(key, {}).get(name, {}).items()}
        for subset, share in self._away.get(name, {}).get(key, {}).items():
            held[subset] = max(held.get(subset, 0), share)
        return {subset: count for subset, count in held.items() if count}

    def unverified_for(self, key: str, *, usable: Container[str]) -> dict[str, dict[str, int]]:
        """Of the `usable` clusters that returned and have not reported since, what each holds of
        spread `key` per subset (`held_by`): what the handover keeps until they report again."""
        found: dict[str, dict[str, int]] = {}
        for name in self._unverified:
            if name in usable:
                for subset, count in self.held_by(name, key).items():
                    found.setdefault(subset, {})[name] = count
        return found

    def workloads_for(self, key: str) -> dict[str, status.WorkloadStatus]:
        """Spread `key`'s member Deployment status per cluster, as agents last reported it."""
        return {name: found[key] for name, found in sorted(self._workloads.items()) if key in found}

    def conflicts_for(self, key: str) -> dict[str, str]:
        """Spread `key`'s ownership conflicts per cluster, as agents last reported them."""
        return {name: found[key] for name, found in sorted(self._conflicts.items()) if key in found}
