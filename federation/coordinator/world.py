"""The coordinator's in-memory model of the federation, fed by events (plan: "world").

Why a separate, pure model: the hub watcher, the agent streams and the failover tick all change
what the coordinator knows, in any order (a Deployment may be seen before its spread, an agent may
report before its MemberCluster is listed). Keeping every fact here, and turning them into the
inputs of `placement.place` in one place, lets the placement loop be tested with plain event
sequences and an injected clock — no Ray, Kubernetes or gRPC.

Each event method returns the spread keys it affects, so the loop recomputes only those: a spread
edit or a scale affects that spread; a cluster's labels, taints, inventory, pod counts or
readiness affect the spreads whose subsets can select that cluster.

Why it keeps indexes and caches (issue 7): with thousands of spreads and clusters, a request must
cost the clusters its spread can use, not every cluster times every spread. So the World parses
a cluster's pools once per report, keeps one `overcommit.Ledger` per cluster with every placed
spread's pending pods charged (updated when a placement, a pod count, a spec or a template
changes), caches each spread's pod shape and cluster selection, and indexes which spreads name,
select or occupy a cluster. `view_for` gives `placement.place_view` exactly the view that
`placement.view_of` would build from `snapshot_for` after `overcommit.deduct_pending` of the other
spreads' pending pods (a unit test compares them on random worlds). Placements are stored through
`store` and `drop` only, so the ledgers stay in step; `placements` is a read-only view.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import operator
import types
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from federation.api import cluster, common
from federation.api import spread as spread_api
from federation.coordinator import failover
from federation.core import fit, matching, overcommit, placement, status

DEFAULT_LOST_SECONDS = 60

_TOUCH_LOG = 65536
"""Touched clusters remembered before the log starts again (groups behind it compare versions)."""

_Occupancy = list[tuple[str, list[tuple[str, int]]]]
"""Per subset of a placement (in its order), the clusters holding replicas and how many."""


def _occupancy(result: placement.Placement) -> _Occupancy:
    return [(s.name, list(filter(_COUNT, s.clusters.items()))) for s in result.subsets]


_COUNT = operator.itemgetter(1)


def _same_counts(old: placement.Placement, new: placement.Placement) -> bool:
    """Both place the same replicas per subset per cluster (`Placement.counts` equal)."""
    return len(old.subsets) == len(new.subsets) and all(
        a.name == b.name and a.clusters == b.clusters for a, b in zip(old.subsets, new.subsets, strict=True)
    )


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

    @property
    def cordoned(self) -> bool:
        return any(t.effect in matching.BINDING_TAINT_EFFECTS for t in self.taints)


@dataclasses.dataclass(frozen=True)
class _Target:
    replicas: int | None
    template: dict[str, Any] | None


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What a spread's spec and template give, computed once per change of either."""

    shape: fit.PodShape
    requests: fit.Requests
    profiles: tuple[fit.Profile, ...]
    """Per subset in spec order: the pods after the subset's term and tolerations are injected."""
    by_subset: dict[str, fit.Profile]
    signature: int
    """Equal for spreads whose pods have equal requests and admission per subset."""


@dataclasses.dataclass
class _Selector:
    """One distinct cluster selector, the spreads using it, and the clusters it matches."""

    selector: common.LabelSelector
    users: set[str]
    epoch: int = -1
    members: tuple[str, ...] = ()
    ready: tuple[int, dict[str, bool], frozenset[str]] | None = None
    """(epoch, readiness map, the members ready in it): `ready_selected` for this selector."""


@dataclasses.dataclass
class _Group:
    """The shared member views of one selector's clusters for spreads with equal pods (signature).

    `cursor` is how far into the World's touch log the group is up to date; `versions` the
    version of each member it holds; `rooms`, per subset number, each member's room.
    """

    names: tuple[str, ...]
    ready: dict[str, bool]
    members: dict[str, placement.Member]
    versions: dict[str, int]
    cursor: int
    rooms: dict[int, dict[str, int]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class _Readiness:
    """Which clusters are ready for one clusterLostSeconds, valid between `since` and `until`."""

    beats: int
    names: tuple[str, ...]
    since: datetime.datetime
    until: datetime.datetime | None
    ready: dict[str, bool]


class World:
    """Spreads, targets, clusters, inventories, pod counts, marks, heartbeats and last placements."""

    def __init__(
        self, clock: Callable[[], datetime.datetime], *, grace_from: datetime.datetime | None = None
    ) -> None:
        self.clock = clock
        self.tracker = failover.HeartbeatTracker(clock, grace_from=grace_from)
        self._grace_from = grace_from
        self.seeded: dict[str, dict[str, dict[str, int]]] = {}
        """Per spread, the placement its hub status recorded: `current` until the first recompute."""
        self._placed: dict[str, placement.Placement] = {}
        self.placements: Mapping[str, placement.Placement] = types.MappingProxyType(self._placed)
        """The last placement per spread (read-only: write through `store` and `drop`)."""
        self.placed_ready: dict[str, frozenset[str]] = {}
        self._spreads: dict[str, SpreadEntry] = {}
        self._targets: dict[str, _Target] = {}
        self._members: dict[str, _Member] = {}
        self._pools: dict[str, list[cluster.NodePool]] = {}
        self._pods: dict[str, dict[str, dict[str, status.ClusterPods]]] = {}
        self._workloads: dict[str, dict[str, status.WorkloadStatus]] = {}
        self._marks: dict[tuple[str, str, str], datetime.datetime] = {}
        self._counter = itertools.count(1)
        # Indexes and caches (see the module docstring); none of them is a fact of its own.
        self._names: tuple[str, ...] | None = None
        self._epoch = 0
        """Bumped when the set of clusters or their labels change: selections are stale."""
        self._named: dict[str, set[str]] = {}
        self._selectors: dict[str, _Selector] = {}
        self._selector_keys: dict[str, tuple[str | None, ...]] = {}
        self._selection: dict[str, tuple[int, tuple[tuple[str, ...], ...]]] = {}
        self._placed_on: dict[str, set[str]] = {}
        self._pods_by_spread: dict[str, dict[str, dict[str, status.ClusterPods]]] = {}
        self._marks_by_spread: dict[str, list[placement.UnschedulableMark]] | None = None
        self._plans: dict[str, _Plan] = {}
        self._signatures: dict[Hashable, int] = {}
        self._ledgers: dict[str, overcommit.Ledger] = {}
        self._charged: dict[str, set[str]] = {}
        self._stale: set[str] = set()
        """Spreads whose charges in the ledgers must be recomputed before the next view."""
        self._beats = 0
        self._readiness: dict[datetime.timedelta, _Readiness] = {}
        self._versions: dict[str, int] = {}
        """Per cluster, bumped whenever its member view may change (charges, pools, taints, labels)."""
        self._member_views: dict[str, tuple[int, dict[tuple[int, bool], placement.Member]]] = {}
        self._own_views: dict[str, dict[str, tuple[int, bool, placement.Member]]] = {}
        """Per cluster (until `_touch`), per spread with pending pods there, its own member view."""
        self._groups: dict[tuple[str, int, datetime.timedelta], _Group] = {}
        self._touched: list[str] = []
        """Clusters whose member view changed, in order (`_touch`); entry i has number base + i."""
        self._touched_base = 0
        self._occupied: dict[str, frozenset[str]] = {}

    # --- events --------------------------------------------------------------------------------

    def upsert_spread(self, item: spread_api.FederatedSpread) -> set[str]:
        """A FederatedSpread was created or changed; a status-only update (our own write) affects nothing."""
        key = item.key
        old = self._spreads.get(key)
        if old is not None and old.spread.spec == item.spec:
            old.spread = item
            return set()
        if old is None and key not in self._placed and item.status is not None:
            recorded = {s.name: dict(s.clusters) for s in item.status.subset_statuses if s.clusters}
            if recorded:
                self.seeded[key] = recorded
        target = self._targets.get(key)
        if old is not None:
            self._unregister(key)
        self._spreads[key] = SpreadEntry(
            spread=item,
            generation=item.metadata.generation or next(self._counter),
            replicas=target.replicas if target else None,
            template=target.template if target else None,
        )
        self._register(key, item.spec)
        self._forget_plan(key)
        return {key}

    def delete_spread(self, key: str) -> set[str]:
        """A FederatedSpread was deleted (its placement is dropped by the next recompute)."""
        self.seeded.pop(key, None)
        if key not in self._spreads:
            return set()
        self._unregister(key)
        del self._spreads[key]
        self._forget_plan(key)
        self._recharge(key)
        self._marks = {k: v for k, v in self._marks.items() if k[0] != key}
        self._marks_by_spread = None
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
        self._forget_plan(key)
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
        self._touch(name)
        if old is None or old.labels != member.labels:
            self._relabel()
        return before | self._selecting(name)

    def delete_cluster(self, name: str) -> set[str]:
        """A MemberCluster was deleted: forget everything about it."""
        affected = self._selecting(name)
        self._members.pop(name, None)
        self._pools.pop(name, None)
        for key in self._pods.pop(name, {}):
            self._spread_pods(key).pop(name, None)
            self._stale.add(key)
        self._workloads.pop(name, None)
        self._marks = {k: v for k, v in self._marks.items() if k[2] != name}
        self._marks_by_spread = None
        self.tracker.forget(name)
        self._beats += 1
        ledger = self._ledgers.get(name)
        if ledger is not None:
            ledger.set_pools(())
        self._touch(name)
        self._relabel()
        return affected

    def inventory(self, name: str, pools: Sequence[cluster.NodePool]) -> set[str]:
        """A full InventoryReport from `name`'s agent (latest wins)."""
        if self._pools.get(name) == list(pools):
            return set()
        known = name in self._pools or name in self._members
        self._pools[name] = list(pools)
        numbers = [fit.pool_of(p) for p in pools]
        ledger = self._ledgers.get(name)
        if ledger is None:
            self._ledgers[name] = overcommit.Ledger(numbers)
        else:
            ledger.set_pools(numbers)
        self._touch(name)
        if not known:
            self._relabel()
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
        for key in set(old) - set(new):
            self._spread_pods(key).pop(name, None)
        for key, per_subset in new.items():
            self._spread_pods(key)[name] = per_subset
        changed = {k for k in set(old) | set(new) if old.get(k) != new.get(k) and k in self._spreads}
        self._stale |= changed
        return changed | self._selecting(name)

    def unschedulable(
        self, name: str, *, spread: str, subset: str, since: datetime.datetime
    ) -> set[str]:
        """An agent marked (subset, cluster) of `spread` unschedulable at `since`; the latest wins."""
        mark = (spread, subset, name)
        if self._marks.get(mark) == since:
            return set()
        self._marks[mark] = since
        self._marks_by_spread = None
        return {spread} if spread in self._spreads else set()

    def heartbeat(self, name: str, at: datetime.datetime | None = None) -> set[str]:
        """`name`'s agent was heard; affects the spreads for which it was lost and is ready again."""
        users = self._selecting(name)
        limits = {self._spreads[k].lost_after for k in users}
        lost_before = {after for after in limits if self.tracker.lost(name, after=after)}
        self.tracker.beat(name, at)
        self._beats += 1
        back = {after for after in lost_before if not self.tracker.lost(name, after=after)}
        return {k for k in users if self._spreads[k].lost_after in back}

    # --- placements ----------------------------------------------------------------------------

    def store(self, key: str, result: placement.Placement) -> set[str]:
        """Record spread `key`'s new placement; the clusters where its pending pods changed."""
        old = self._placed.get(key)
        self._placed[key] = result
        if old is not None and key not in self._stale and _same_counts(old, result):
            return set()  # same replicas where they were, same pods running: same pending pods
        occupied = _occupancy(result)
        self._index_placed(key, occupied)
        return self._recharge(key, occupied)

    def drop(self, key: str) -> bool:
        """Forget spread `key`'s placement; whether it had one."""
        old = self._placed.pop(key, None)
        if old is None:
            return False
        self._index_placed(key, [])
        self._recharge(key)
        return True

    # --- readers -------------------------------------------------------------------------------

    def spreads(self) -> list[SpreadEntry]:
        """Every known spread, by key."""
        return [self._spreads[k] for k in sorted(self._spreads)]

    def spread(self, key: str) -> SpreadEntry | None:
        """The spread `key`, if known."""
        return self._spreads.get(key)

    def cluster_names(self) -> list[str]:
        """Clusters known from a MemberCluster or an agent's inventory, by name."""
        return list(self._cluster_names())

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
        ready = self._ready_map(entry.lost_after)
        found: set[str] = set()
        for subset, selector in zip(entry.spec.subsets, self._selector_keys[key], strict=True):
            if subset.clusters is not None:
                for name in subset.clusters:
                    flag = ready.get(name)
                    if flag or (flag is None and self.ready(name, after=entry.lost_after)):
                        found.add(name)  # (a named cluster the World does not know: ask the tracker)
            elif selector is not None:
                found |= self._ready_members(selector, ready)
        return frozenset(found)

    def selected(self, key: str) -> frozenset[str]:
        """Every cluster spread `key`'s subsets name or select."""
        if key not in self._spreads:
            return frozenset()
        return frozenset(name for names in self._selection_of(key) for name in names)

    def marks_for(self, key: str) -> list[placement.UnschedulableMark]:
        """Spread `key`'s unschedulable marks (expiry is the placement's business)."""
        if self._marks_by_spread is None:
            index: dict[str, list[placement.UnschedulableMark]] = {}
            for (spread_key, subset, name), since in sorted(self._marks.items()):
                index.setdefault(spread_key, []).append(
                    placement.UnschedulableMark(subset=subset, cluster=name, since=since))
            self._marks_by_spread = index
        return list(self._marks_by_spread.get(key, ()))

    def pods_for(self, key: str) -> dict[str, dict[str, status.ClusterPods]]:
        """Spread `key`'s pod counts per subset per cluster."""
        found: dict[str, dict[str, status.ClusterPods]] = {}
        per_cluster = self._pods_by_spread.get(key, {})
        for name in sorted(per_cluster):
            for subset, pods in per_cluster[name].items():
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
        last = self._placed.get(key)
        if last is not None:
            return last.counts()
        return {subset: dict(counts) for subset, counts in self.seeded.get(key, {}).items()}

    def min_lost_seconds(self) -> int:
        """The smallest clusterLostSeconds among spreads (the default when there are none)."""
        return min(
            (e.spec.failover.cluster_lost_seconds for e in self._spreads.values()),
            default=DEFAULT_LOST_SECONDS,
        )

    def shape_for(self, key: str) -> fit.PodShape:
        """What one pod of spread `key`'s hub Deployment requests (empty before the template is known).

        ValueError when the template is malformed.
        """
        return self._plan(key).shape

    def view_for(self, key: str) -> placement.View:
        """Spread `key`'s placement view: its selected clusters, every other spread's pending pods
        charged (`placement.view_of` of the deducted `snapshot_for`, from the ledgers)."""
        entry = self._spreads[key]
        plan = self._plan(key)
        self._settle()
        selected = self._selection_of(key)
        after = entry.lost_after
        ready = self._ready_map(after)
        members: dict[str, placement.Member] = {}
        rooms: list[dict[str, int]] = []
        for index, (subset, selector) in enumerate(
                zip(entry.spec.subsets, self._selector_keys[key], strict=True)):
            if subset.clusters is not None:
                found: dict[str, int] = {}
                for name in subset.clusters:
                    flag = ready.get(name)
                    if flag is not None:
                        member = members.get(name) or self._member_view(name, plan, ready=flag)
                        members[name] = member
                        found[name] = member.room(index)
                rooms.append(found)
            elif selector is not None:
                group = self._group(selector, plan, after=after, ready=ready)
                members.update(group.members)
                shared = group.rooms.get(index)
                if shared is None:
                    shared = group.rooms[index] = {n: m.room(index) for n, m in group.members.items()}
                rooms.append(dict(shared))
            else:
                rooms.append({})
        for name in self._charged.get(key, ()):
            if name in members:  # its own pending pods here are not deducted from its capacity
                member = members[name] = self._own_view(name, key, plan=plan, ready=members[name].ready)
                for index, found in enumerate(rooms):
                    if name in found:
                        found[name] = member.room(index)
        return placement.View(
            names=self._cluster_names(), selected=selected, members=members, rooms=tuple(rooms))

    def pending_pods(self, *, besides: str = "") -> list[overcommit.PendingPods]:
        """Placed-but-not-running pods of every spread but `besides`, with each subset's shape: by
        spread key, then subset in placement order, then cluster (ValueError: a malformed template)."""
        found: list[overcommit.PendingPods] = []
        for key in sorted(self._placed):
            if key == besides or key not in self._spreads:
                continue
            plan = self._plan(key)
            pods = self._pods_by_spread.get(key, {})
            for result in self._placed[key].subsets:
                profile = plan.by_subset.get(result.name)
                if profile is None:
                    continue
                for name, placed in sorted(result.clusters.items()):
                    counted = pods.get(name, {}).get(result.name)
                    count = placed - (counted.running if counted is not None else 0)
                    if count > 0:
                        found.append(overcommit.PendingPods(cluster=name, shape=profile.shape, count=count))
        return found

    # --- selection -----------------------------------------------------------------------------

    def _cluster_names(self) -> tuple[str, ...]:
        if self._names is None:
            self._names = tuple(sorted(set(self._members) | set(self._pools)))
        return self._names

    def _relabel(self) -> None:
        """The set of clusters or their labels changed: selections must be matched again."""
        self._names = None
        self._epoch += 1
        self._groups.clear()

    def _labels(self, name: str) -> dict[str, str]:
        member = self._members.get(name)
        return member.labels if member else {}

    def _register(self, key: str, spec: spread_api.FederatedSpreadSpec) -> None:
        keys: list[str | None] = []
        for subset in spec.subsets:
            found: str | None = None
            if subset.clusters is not None:
                for name in subset.clusters:
                    self._named.setdefault(name, set()).add(key)
            if subset.cluster_selector is not None:
                found = subset.cluster_selector.model_dump_json()
                entry = self._selectors.get(found)
                if entry is None:
                    entry = self._selectors[found] = _Selector(subset.cluster_selector, set())
                entry.users.add(key)
            keys.append(found)
        self._selector_keys[key] = tuple(keys)

    def _unregister(self, key: str) -> None:
        entry = self._spreads.get(key)
        if entry is not None:
            for subset in entry.spec.subsets:
                for name in subset.clusters or ():
                    users = self._named.get(name)
                    if users is not None:
                        users.discard(key)
                        if not users:
                            del self._named[name]
        for found in self._selector_keys.pop(key, ()):
            if found is None or found not in self._selectors:
                continue
            users = self._selectors[found].users
            users.discard(key)
            if not users:
                del self._selectors[found]
        self._selection.pop(key, None)

    def _selector_members(self, found: str) -> tuple[str, ...]:
        entry = self._selectors[found]
        if entry.epoch != self._epoch:
            entry.members = tuple(
                n for n in self._cluster_names()
                if matching.label_selector_matches(entry.selector, self._labels(n))
            )
            entry.epoch = self._epoch
        return entry.members

    def _ready_members(self, found: str, ready: dict[str, bool]) -> frozenset[str]:
        entry = self._selectors[found]
        members = self._selector_members(found)
        cached = entry.ready
        if cached is None or cached[0] != self._epoch or cached[1] is not ready:
            cached = entry.ready = (self._epoch, ready, frozenset(n for n in members if ready.get(n)))
        return cached[2]

    def _selection_of(self, key: str) -> tuple[tuple[str, ...], ...]:
        """Per subset its member clusters in fill order (`placement.selected_clusters`)."""
        cached = self._selection.get(key)
        if cached is not None and cached[0] == self._epoch:
            return cached[1]
        selected: list[tuple[str, ...]] = []
        for subset, found in zip(self._spreads[key].spec.subsets, self._selector_keys[key], strict=True):
            if subset.clusters is not None:
                selected.append(tuple(subset.clusters))
            elif found is not None:
                selected.append(self._selector_members(found))
            else:
                selected.append(())
        self._selection[key] = (self._epoch, tuple(selected))
        return self._selection[key][1]

    def _selecting(self, name: str) -> set[str]:
        """Spreads whose subsets can select cluster `name`, or that have replicas placed there."""
        found = set(self._named.get(name, ()))
        labels = self._labels(name)
        for selector in self._selectors.values():
            if matching.label_selector_matches(selector.selector, labels):
                found |= selector.users
        found.update(key for key in self._placed_on.get(name, ()) if key in self._spreads)
        return found

    def _index_placed(self, key: str, occupied: _Occupancy) -> None:
        before = self._occupied.pop(key, frozenset())
        after = frozenset(name for _subset, counts in occupied for name, _count in counts)
        if after:
            self._occupied[key] = after
        for name in before - after:
            users = self._placed_on.get(name)
            if users is not None:
                users.discard(key)
                if not users:
                    del self._placed_on[name]
        for name in after - before:
            self._placed_on.setdefault(name, set()).add(key)

    # --- readiness -----------------------------------------------------------------------------

    def _ready_map(self, after: datetime.timedelta) -> dict[str, bool]:
        """Every cluster's readiness for `after`, recomputed only when a heartbeat or the clock
        could have changed one (the same answers as `ready`, at one reading of the clock)."""
        now = self.clock()
        names = self._cluster_names()
        cached = self._readiness.get(after)
        if cached is not None and cached.beats == self._beats and cached.names is names \
                and cached.since <= now and (cached.until is None or now <= cached.until):
            return cached.ready
        ready: dict[str, bool] = {}
        until: datetime.datetime | None = None
        for name in names:
            last = self.tracker.last(name)
            heard = last if last is not None else self._grace_from
            flag = heard is not None and not now - heard > after
            ready[name] = flag
            if flag and heard is not None:
                deadline = heard + after
                until = deadline if until is None else min(until, deadline)
        self._readiness[after] = _Readiness(self._beats, names, now, until, ready)
        return ready

    # --- pending pods ----------------------------------------------------------------------------

    def _spread_pods(self, key: str) -> dict[str, dict[str, status.ClusterPods]]:
        return self._pods_by_spread.setdefault(key, {})

    def _forget_plan(self, key: str) -> None:
        """Spread `key`'s spec or template changed: its shapes and charges are computed again."""
        self._plans.pop(key, None)
        self._selection.pop(key, None)
        self._stale.add(key)

    def _plan(self, key: str) -> _Plan:
        plan = self._plans.get(key)
        if plan is None:
            entry = self._spreads[key]
            shape = fit.shape_from_deployment(entry.template) if entry.template else fit.empty_shape()
            requests = fit.requests_of(shape)
            plain: fit.Profile | None = None  # subsets injecting nothing share the pod's own profile
            made: list[fit.Profile] = []
            for subset in entry.spec.subsets:
                subset_shape = fit.with_subset(shape, subset)
                if subset_shape is not shape:
                    made.append(fit.profile(subset_shape, requests=requests))
                    continue
                if plain is None:
                    plain = fit.profile(shape, requests=requests)
                made.append(plain)
            profiles = tuple(made)
            signature = (requests, tuple(p.admission for p in profiles))
            number = self._signatures.setdefault(signature, len(self._signatures))
            by_subset = {s.name: p for s, p in zip(entry.spec.subsets, profiles, strict=True)}
            plan = self._plans[key] = _Plan(shape, requests, profiles, by_subset, number)
        return plan

    def _charges_of(
        self, key: str, occupied: _Occupancy | None = None
    ) -> dict[str, tuple[overcommit.Charge, ...]]:
        """Spread `key`'s pending pods per cluster: placed minus running, per subset in placement order."""
        last = self._placed.get(key)
        if last is None or key not in self._spreads:
            return {}
        plan = self._plan(key)
        pods = self._pods_by_spread.get(key, {})
        found: dict[str, list[overcommit.Charge]] = {}
        for subset, counts in occupied if occupied is not None else _occupancy(last):
            profile = plan.by_subset.get(subset)
            if profile is None:
                continue
            for name, placed in counts:
                counted = pods.get(name, {}).get(subset) if pods else None
                count = placed - (counted.running if counted is not None else 0)
                if count > 0:
                    found.setdefault(name, []).append(overcommit.Charge(profile, count))
        return {name: tuple(items) for name, items in found.items()}

    def _recharge(self, key: str, occupied: _Occupancy | None = None) -> set[str]:
        """Bring spread `key`'s charges in the ledgers up to date; the clusters where they changed."""
        new = self._charges_of(key, occupied)
        changed: set[str] = set()
        for name in self._charged.get(key, set()) | set(new):
            ledger = self._ledgers.get(name)
            if ledger is None:
                ledger = self._ledgers[name] = overcommit.Ledger()
                self._touch(name)
            if ledger.set_charges(key, new.get(name, ())):
                changed.add(name)
                self._touch(name)
        if new:
            self._charged[key] = set(new)
        else:
            self._charged.pop(key, None)
        self._stale.discard(key)
        return changed

    def _settle(self) -> None:
        """Recompute the charges of every stale spread (ValueError: a malformed template)."""
        if self._stale:
            for key in sorted(self._stale):
                self._recharge(key)
            self._stale = set()  # a set never shrinks: an emptied big one still costs its table to scan

    def _touch(self, name: str) -> None:
        """Cluster `name`'s member view may have changed."""
        self._versions[name] = self._versions.get(name, 0) + 1
        self._member_views.pop(name, None)
        self._own_views.pop(name, None)
        self._touched.append(name)
        if len(self._touched) > _TOUCH_LOG:
            self._touched_base += len(self._touched)
            self._touched = []

    def _member_view(self, name: str, plan: _Plan, *, ready: bool) -> placement.Member:
        """Cluster `name` for spreads with this plan's pods and no pending pods of their own there."""
        version = self._versions.get(name, 0)
        cached = self._member_views.get(name)
        if cached is None or cached[0] != version:
            cached = self._member_views[name] = (version, {})
        found = cached[1].get((plan.signature, ready))
        if found is None:
            found = cached[1][(plan.signature, ready)] = self._build_member(name, "", plan=plan, ready=ready)
        return found

    def _own_view(self, name: str, key: str, *, plan: _Plan, ready: bool) -> placement.Member:
        """Cluster `name` for spread `key`, which has pending pods there (not deducted for itself)."""
        views = self._own_views.setdefault(name, {})
        cached = views.get(key)
        if cached is not None and cached[0] == plan.signature and cached[1] == ready:
            return cached[2]
        member = self._build_member(name, key, plan=plan, ready=ready)
        views[key] = (plan.signature, ready, member)
        return member

    def _group(
        self, selector: str, plan: _Plan, *, after: datetime.timedelta, ready: dict[str, bool]
    ) -> _Group:
        """The member views of a selector's clusters for this plan's pods, kept up to date.

        Only the clusters touched since the group was last read are looked at again: from the
        touch log when that is shorter than the group, else by comparing versions.
        """
        key = (selector, plan.signature, after)
        group = self._groups.get(key)
        end = self._touched_base + len(self._touched)
        versions = self._versions
        if group is None:
            names = self._selector_members(selector)
            members = {name: self._member_view(name, plan, ready=ready[name]) for name in names}
            seen = {name: versions.get(name, 0) for name in names}
            group = self._groups[key] = _Group(names, ready, members, seen, end)
            return group
        members = group.members
        if group.cursor >= self._touched_base and end - group.cursor <= len(group.names):
            changed = {n for n in self._touched[group.cursor - self._touched_base:] if n in members}
        else:
            seen = group.versions
            changed = {n for n in group.names if versions.get(n, 0) != seen[n]}
        if group.ready is not ready:
            changed |= {name for name in group.names if members[name].ready != ready[name]}
            group.ready = ready
        for name in changed:
            member = members[name] = self._member_view(name, plan, ready=ready[name])
            group.versions[name] = versions.get(name, 0)
            for index, rooms in group.rooms.items():
                rooms[name] = member.room(index)
        group.cursor = end
        return group

    def _build_member(self, name: str, key: str, *, plan: _Plan, ready: bool) -> placement.Member:
        """Cluster `name` as spread `key` sees it (`key` empty: a spread without pending pods there)."""
        ledger = self._ledgers.get(name)
        member = self._members.get(name)
        cordoned = member.cordoned if member is not None else False
        if ledger is None:
            return placement.Member(ready, cordoned, (), tuple(() for _ in plan.profiles))
        return placement.Member(
            ready, cordoned, ledger.slots(key, plan.requests), ledger.admits(plan.signature, plan.profiles))
