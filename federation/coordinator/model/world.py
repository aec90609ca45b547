"""The coordinator's in-memory model of the federation, fed by events.

Why a separate, pure model: the hub watcher, the agent streams and the failover tick all change
what the coordinator knows, in any order (a Deployment may be seen before its spread, an agent may
report before its MemberCluster is listed). Keeping every fact here, and turning them into the
inputs of `placement.place` in one place, lets the placement loop be tested with plain event
sequences and an injected clock — no Ray, Kubernetes or gRPC.

Each event method returns the spread keys it affects, so the loop recomputes only those: a spread
edit or a scale affects that spread; a cluster's labels, taints or readiness affect the spreads
whose subsets can select that cluster; its inventory or pod counts (free capacity) only those of
them that are not settled — a spread with every replica placed keeps its counts whatever the
capacity (a capacity change alone never moves replicas), so re-placing it would only redo work
(one cluster of a region may be selectable by a thousand spreads).

Why the World owns an index and views: with thousands of spreads and clusters, a
request must cost the clusters its spread can use, not every cluster times every spread. The
`selection_index.SelectionIndex` knows which spreads name, select or occupy a cluster and which
clusters a spread selects; the `member_views.MemberViews` keep one `overcommit.Ledger` per cluster
with every placed spread's pending pods charged and build `view_for`'s views from them. Neither
holds a fact of its own: both read the World's dictionaries, and the World tells them what
changed. Placements are stored through `store` and `drop` only, so the ledgers stay in step;
`placements` is a read-only view.

A MemberCluster deleted on the hub is not a cluster gone (`delete_cluster`): its facts stay until
it is decommissioned (`spec.decommission`, out of every selection) and holds nothing.
"""

from __future__ import annotations

import collections
import datetime
import itertools
import types
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from federation.api import cluster, common
from federation.api import spread as spread_api
from federation.coordinator.model import (
    brakes,
    facts,
    failover,
    hub_objects,
    lifecycle,
    marks,
    member_views,
    pod_reports,
    rebalancing,
    selection_index,
)
from federation.core import fit, overcommit, placement, status

DEFAULT_LOST_SECONDS = 60

SpreadEntry = facts.SpreadEntry
"""One spread as the coordinator knows it (defined in `facts`; this is the name other modules use)."""


class World:
    """Spreads, targets, clusters, inventories, pod counts, marks, heartbeats and last placements."""

    def __init__(
        self, clock: Callable[[], datetime.datetime], *, grace_from: datetime.datetime | None = None,
        failover_per_minute: int | None = None,
    ) -> None:
        self.clock = clock
        self.tracker = failover.HeartbeatTracker(clock, grace_from=grace_from)
        self.brakes = brakes.Brakes()
        """Per spread, the failover brake (lost clusters kept as ready when the fault looks ours)."""
        self.failover_limit = brakes.FailoverRateLimit(failover_per_minute)
        self._seeded: dict[str, dict[str, dict[str, int]]] = {}
        self.seeded: Mapping[str, dict[str, dict[str, int]]] = types.MappingProxyType(self._seeded)
        self._previous: collections.OrderedDict[str, dict[str, dict[str, int]]] = collections.OrderedDict()
        """Per deleted spread (the most recent `lifecycle.REMEMBERED_DELETIONS`), its last placement:
        a spread of the same key created again starts from it (re-creation adopts what ran)."""
        """Per spread, the placement its hub status recorded: `current` until the first recompute."""
        self._placed: dict[str, placement.Placement] = {}
        self.placements: Mapping[str, placement.Placement] = types.MappingProxyType(self._placed)
        """The last placement per spread (read-only: write through `store` and `drop`)."""
        self._placed_ready: dict[str, frozenset[str]] = {}
        self.placed_ready: Mapping[str, frozenset[str]] = types.MappingProxyType(self._placed_ready)
        self._placed_departing: dict[str, frozenset[str]] = {}
        """Per spread, the clusters leaving its selection that kept its pods when it was placed."""
        """Per placed spread, the selected clusters that were ready when it was placed."""
        self._placed_held: dict[str, frozenset[str]] = {}
        """Per spread, the lost clusters whose replicas the brake or the rate limit held when it was
        last placed (their shares did not move, so they are not "returned" when heard again)."""
        self._spreads: dict[str, SpreadEntry] = {}
        self._targets: dict[str, facts.Target] = {}
        self._members: dict[str, facts.ClusterFacts] = {}
        self._pools: dict[str, list[cluster.NodePool]] = {}
        self._decommissioned: set[str] = set()
        """Clusters whose MemberCluster says `decommission` (kept after the object is deleted)."""
        self.pods = pod_reports.PodReports()
        """What the agents last reported of each spread's pods, and which reports still hold."""
        self._marks = marks.Marks()
        self._counter = itertools.count(1)
        self.hub_objects = hub_objects.HubObjects()
        """The hub's ConfigMaps, Secrets, ServiceAccounts and claims spreads' pods may need."""
        self.lifecycle = lifecycle.Lifecycle()
        """Target holders, refusals, deletion policies of deleted spreads (`lifecycle`)."""
        self.rebalancing = rebalancing.Rebalancings()
        """Per spread, the failback step in flight and the last move (`rebalancing`)."""
        # Indexes and caches (see the module docstring); none of them is a fact of its own.
        self._index = selection_index.SelectionIndex(self._spreads, self._members, pools=self._pools,
                                                     decommissioned=self._decommissioned)
        self._views = member_views.MemberViews(
            self._spreads, self._placed, pods=self.pods.by_spread, clusters=self._members,
            index=self._index, tracker=self.tracker, clock=clock, grace_from=grace_from,
        )

    # --- events --------------------------------------------------------------------------------

    def upsert_spread(self, item: spread_api.FederatedSpread) -> set[str]:
        """A FederatedSpread was created or changed; a status-only update (our own write) affects nothing."""
        key = item.key
        old = self._spreads.get(key)
        if old is not None and old.spread.spec == item.spec and old.uid == SpreadEntry(item, 0).uid:
            old.spread = item
            return set()
        if old is None and key not in self._placed and item.status is not None:
            recorded = {s.name: s.placed() for s in item.status.subset_statuses if s.clusters}
            if recorded:  # the rule's answer is `current`; the pods it kept are recomputed (`rule_counts`)
                self._seeded[key] = {s.name: s.ruled() for s in item.status.subset_statuses if s.clusters}
                self.pods.recorded(key, recorded)  # unknown is not zero: held until reported
            self.rebalancing.seed(key, item.status.rebalancing)  # a failback step in flight resumes
        previous = self._previous.pop(key, None) if old is None else None
        if previous is not None and key not in self._seeded and key not in self._placed:
            self._seeded[key] = previous  # created again: placed from what the deleted one ran
        target = self._targets.get(key)
        if old is not None:
            self._index.unregister(key)
            if marks.spent(old.spec, item.spec):
                self._marks.drop_spread(key)
        self._spreads[key] = SpreadEntry(
            spread=item,
            generation=item.metadata.generation or next(self._counter),
            replicas=target.replicas if target else None,
            template=target.template if target else None,
        )
        self._index.register(key, item.spec)
        self._forget_plan(key)
        self._track_references(key)
        return {key}

    def delete_spread(self, key: str, *, deleted: bool = True) -> set[str]:
        """A FederatedSpread was deleted (its placement is dropped by the next recompute, and its
        removals orphan its workloads unless its `deletionPolicy` is Delete). `deleted` False: it
        lives on, refused (displaced by a claimant that ranks first, `lifecycle`): it leaves the
        World but is not remembered as deleted, so no resync removes what it may run."""
        self._seeded.pop(key, None)
        if key not in self._spreads:
            return set()
        if deleted:
            self.lifecycle.deleted(key, self._spreads[key].spec.deletion_policy)
        self._index.unregister(key)
        del self._spreads[key]
        self._forget_plan(key)
        self._views.recharge(key)
        self._marks.drop_spread(key)
        self.brakes.forget(key)
        self.rebalancing.forget(key)
        # (What lost clusters hold of it stays: they were sent no removal, and a spread created
        # again under the key adopts their workloads; `PodReports.removed` lets it go.)
        self.hub_objects.forget(key)
        return {key}

    def hub_object(self, kind: str, key: str, obj: Mapping[str, Any] | None) -> set[str]:
        """An object `key` (`namespace/name`) of a copied kind (`hub_objects`) of the hub was seen
        (`obj`) or deleted (None): the spreads whose assignments carry it, if it changed."""
        namespace, _, name = key.partition("/")
        if not self.hub_objects.put(namespace, kind, name, obj):
            return set()
        return self.hub_objects.affected(
            namespace, kind, name,
            ((e.key, e.spec.propagate_dependencies, e.template, hub_objects.propagated(e.spec.propagate))
             for e in self._spreads.values()))

    def set_target(self, key: str, *, replicas: int | None, template: dict[str, Any] | None) -> set[str]:
        """The hub Deployment of spread `key` was seen: its `spec.replicas` and the object itself."""
        target = facts.Target(replicas, template)
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
        self._track_references(key)
        return {key}

    def _track_references(self, key: str) -> None:
        """Spread `key`'s spec or template changed: note what it references now, so the data of the
        Secrets it needs is kept and that of Secrets nothing needs any more is dropped (`hub_objects`)."""
        entry = self._spreads[key]
        if not entry.spec.propagate_dependencies:
            self.hub_objects.forget(key)
            return
        self.hub_objects.references(key, entry.template, hub_objects.propagated(entry.spec.propagate))

    def upsert_cluster(
        self, name: str, *, labels: Mapping[str, str], taints: Sequence[common.Taint] = (),
        decommission: bool = False,
    ) -> set[str]:
        """A MemberCluster was created or changed (topology labels, cluster taints, decommission:
        a decommissioned cluster leaves every spread's selection)."""
        old = self._members.get(name)
        member = facts.ClusterFacts(dict(labels), cluster.stamped(
            taints, before=old.taints if old is not None else (), now=self.clock()))
        retiring = decommission != (name in self._decommissioned)
        if old == member and not retiring:
            return set()
        before = self._index.selecting(name)
        self._members[name] = member
        if retiring:
            (self._decommissioned.add if decommission else self._decommissioned.discard)(name)
        self._views.touch(name)
        if old is None or old.labels != member.labels or retiring:
            self._relabel()
        return before | self._index.selecting(name)

    def delete_cluster(self, name: str) -> set[str]:
        """A MemberCluster was deleted. The hub object is not the cluster: unless it was
        decommissioned, everything is kept (its agent's shell recreates the object while connected;
        a silent agent makes it lost, as any). A decommissioned one stays out of every selection
        and is forgotten once no spread holds anything there (else kept until the next restart)."""
        if name not in self._decommissioned or self.held_at(name):
            return set()
        affected = self._index.selecting(name)
        self._members.pop(name, None)
        self._pools.pop(name, None)
        self._views.mark_stale(self.pods.forget(name))
        self._marks.drop_cluster(name)
        self.tracker.forget(name)
        self.failover_limit.heard(name)  # nothing of it is failing over any more
        self._views.beats += 1
        self._views.forget_pools(name)
        self._relabel()
        return affected

    def inventory(self, name: str, pools: Sequence[cluster.NodePool]) -> set[str]:
        """A full InventoryReport from `name`'s agent (latest wins)."""
        if self._pools.get(name) == list(pools):
            return set()
        known = name in self._pools or name in self._members
        self._pools[name] = list(pools)
        self._views.set_pools(name, pools)
        if not known:
            self._relabel()
            return self._index.selecting(name)
        return self._capacity_bound(self._index.selecting(name))

    def pod_counts(
        self, name: str, counts: Mapping[str, Mapping[str, status.ClusterPods]], *,
        workloads: Mapping[str, status.WorkloadStatus] | None = None,
        conflicts: Mapping[str, str] | None = None, assigned: Collection[str] | None = None,
        dependency_conflicts: Mapping[str, Sequence[str]] | None = None,
        misplaced: Mapping[str, str] | None = None,
        autoscalers: Mapping[str, Sequence[str]] | None = None,
    ) -> set[str]:
        """A full PodCountsReport from `name`'s agent: per spread, per subset (latest wins), for
        the spreads in `assigned` (None: every spread; `pod_reports` says why).

        Affects the spreads whose counts changed (all with pods there when the report verifies a
        cluster that returned after being lost) and, through overcommit protection, every spread
        that can use the cluster and is not settled. `workloads` (the member Deployments' status
        per spread), `conflicts` (why a same-name Deployment is not ours) and `misplaced` (StatefulSet
        pods whose ordinal maps to another subset) and `autoscalers` (member HPAs scaling its member
        workload) feed status only.
        """
        reported = self.pods.report(name, counts, workloads=workloads, conflicts=conflicts,
                                    dependency_conflicts=dependency_conflicts,
                                    assigned=assigned, misplaced=misplaced, autoscalers=autoscalers)
        if reported is None:
            return set()
        changed = reported & set(self._spreads)
        self._views.mark_stale(changed)
        return changed | self._capacity_bound(self._index.selecting(name))

    def announce_workloads(self, name: str, pods: Mapping[str, int]) -> set[str]:
        """Cluster `name`'s Hello counted, per spread key, the pods its member workloads run:
        unknown is not zero, so until its reports verify a spread the cluster holds at least those
        (`PodReports.announced`), in a subset placing it, else in one selecting it. The spreads
        whose held pods grew (to be placed again before the agent's resync)."""
        grown: set[str] = set()
        for key, count in sorted(pods.items()):
            entry = self._spreads.get(key)
            if entry is None:  # not a live spread: nothing is placed that could lower it
                continue
            placing = [subset for subset, per in self.current_for(key).items() if per.get(name)]
            selection = zip(entry.spec.subsets, self._index.selection_of(key), strict=True)
            selecting = [subset.name for subset, members in selection if name in members]
            if self.pods.announced(name, key, pods=count, subsets=placing + selecting):
                grown.add(key)
        self._views.mark_stale(grown)
        return grown

    def release_pods(self, name: str, key: str) -> None:
        """Cluster `name` was sent an orphaning removal of spread `key` (`PodReports.released`)."""
        self.pods.released(name, key)

    def forget_pods(self, name: str, key: str) -> None:
        """Cluster `name` was sent the removal of spread `key`: its counts there no longer count."""
        self._views.mark_stale(self.pods.removed(name, key))

    def _capacity_bound(self, keys: set[str]) -> set[str]:
        """Of `keys`, the spreads a change of free capacity can move: not placed yet, or with
        replicas that did not fit. A settled spread (`placement.settled`) is not placed again;
        only its subsets' simulated `capacity` would differ, and Explain recomputes that. A spread
        that fails back (`spec.rebalance.policy: WhenRoom`) is placed again: room is what it waits for."""
        placed = self._placed
        return {k for k in keys if (p := placed.get(k)) is None or not placement.settled(p)
                or ((e := self._spreads.get(k)) is not None and e.spec.rebalance.policy == "WhenRoom")}

    def unschedulable(
        self, name: str, *, spread: str, subset: str, since: datetime.datetime
    ) -> set[str]:
        """An agent marked (subset, cluster) of `spread` unschedulable at `since`; the latest wins."""
        if not self._marks.mark(spread=spread, subset=subset, cluster=name, since=since):
            return set()
        entry = self._spreads.get(spread)  # a Fixed spread is placed as if there were no marks
        return {spread} if entry is not None and entry.spec.schedule_strategy.is_adaptive else set()

    def heartbeat(self, name: str, at: datetime.datetime | None = None) -> set[str]:
        """`name`'s agent was heard; affects the spreads for which it was lost and is ready again."""
        users = self._index.selecting(name)
        limits = {self._spreads[k].lost_after for k in users}
        lost_before = {after for after in limits if self.tracker.lost(name, after=after)}
        if lost_before:
            self.pods.lost(name)  # its last report is from before: its pods must report again
        self.tracker.beat(name, at)
        self.failover_limit.heard(name)
        self._views.beats += 1
        back = {after for after in lost_before if not self.tracker.lost(name, after=after)}
        return {k for k in users if self._spreads[k].lost_after in back}

    def restart_grace(self, at: datetime.datetime) -> None:
        """Count a cluster never heard as heard at `at` from now on (`failover`): the coordinator
        begins acting only now (a standby's World is made long before it leads)."""
        self.tracker.restart_grace(at)
        self._views.restart_grace(at)

    # --- placements ----------------------------------------------------------------------------

    def store(self, key: str, result: placement.Placement) -> set[str]:
        """Record spread `key`'s new placement; the clusters where its pending pods changed."""
        old = self._placed.get(key)
        self._placed[key] = result
        if old is not None:  # what clusters lost now ran before (their agents keep the last assignment)
            self.pods.remember_away(key, old, lost=self.selected(key) - self.ready_selected(key))
        if old is not None and not self._views.is_stale(key) and old.same_counts(result):
            return set()  # same replicas where they were, same pods running: same pending pods
        occupied = selection_index.occupancy(result)
        self._index.index_placed(key, occupied)
        return self._views.recharge(key, occupied)

    def settled_placement(self, key: str, *, held: frozenset[str] = frozenset()) -> None:
        """Spread `key` was placed from the live world: its recorded hub placement is spent, and the
        clusters it selects that are ready now are remembered (a change of readiness re-places it),
        with the lost ones whose replicas the brake or the failover rate limit `held` (their
        shares never moved: when they return, there is nothing to take back)."""
        self._seeded.pop(key, None)
        self._placed_ready[key] = self.ready_selected(key)
        departing = self.departing(key)
        if departing:
            self._placed_departing[key] = departing
        else:
            self._placed_departing.pop(key, None)
        self._placed_held[key] = held

    def drop(self, key: str) -> bool:
        """Forget spread `key`'s placement; whether it had one."""
        self._placed_ready.pop(key, None)
        self._placed_departing.pop(key, None)
        self._placed_held.pop(key, None)
        old = self._placed.pop(key, None)
        if old is None:
            return False
        if key not in self._spreads:  # deleted: kept for a re-creation of the key
            self._previous[key] = old.rule_counts()
            self._previous.move_to_end(key)
            while len(self._previous) > lifecycle.REMEMBERED_DELETIONS:
                self._previous.popitem(last=False)
        self._index.index_placed(key, [])
        self._views.recharge(key)
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
        return list(self._index.cluster_names())

    def ready(self, name: str, *, after: datetime.timedelta) -> bool:
        """Heard within `after`."""
        return not self.tracker.lost(name, after=after)

    def snapshot_for(self, key: str) -> cluster.CapacitySnapshot:
        """Every cluster as spread `key` sees it: ready within its clusterLostSeconds."""
        entry = self._spreads.get(key)
        after = entry.lost_after if entry else datetime.timedelta(seconds=DEFAULT_LOST_SECONDS)
        clusters = []
        for name in self.cluster_names():
            member = self._members.get(name, facts.ClusterFacts({}, ()))
            clusters.append(cluster.ClusterCapacity(
                name=name, labels=dict(member.labels), ready=self.ready(name, after=after),
                taints=list(member.taints), node_pools=list(self._pools.get(name, [])),
                decommissioned=name in self._decommissioned,
            ))
        return cluster.CapacitySnapshot(clusters=clusters)

    def ready_selected(self, key: str) -> frozenset[str]:
        """The clusters spread `key`'s subsets select that are ready for it now."""
        entry = self._spreads.get(key)
        if entry is None:
            return frozenset()
        ready = self._views.readiness(entry.lost_after).ready
        found: set[str] = set()
        selection = self._index.selection_of(key)
        for index, (subset, selector) in enumerate(
                zip(entry.spec.subsets, self._index.selector_keys[key], strict=True)):
            if subset.clusters is not None:
                for name in selection[index]:  # the named ones, less any decommissioned
                    flag = ready.get(name)
                    if flag or (flag is None and self.ready(name, after=entry.lost_after)):
                        found.add(name)  # (a named cluster the World does not know: ask the tracker)
            elif selector is not None:
                found |= self._index.ready_members(selector, ready)
        return frozenset(found)

    def departing_lost(self) -> set[str]:
        """The spreads placed while a cluster leaving their selection kept their pods, that
        cluster since lost: its kept pods are no longer heard of (place them again)."""
        return {key for key, seen in self._placed_departing.items() if not seen <= self.departing(key)}

    def departing(self, key: str) -> frozenset[str]:
        """Clusters that hold pods of spread `key` (as last reported) but that its subsets no
        longer select, and whose agents are heard: they keep their Ready pods until the spread
        can spare them (deselection is a move, `federation.core.handover`)."""
        entry = self._spreads.get(key)
        if entry is None:
            return frozenset()
        holding = self.pods.holders(key) - self.selected(key)
        return frozenset(name for name in holding if self.ready(name, after=entry.lost_after))

    def heard_from_any(self, after: datetime.timedelta) -> bool:
        """Whether any cluster's agent was heard within `after` (a never-heard one: in the grace)."""
        return any(self._views.readiness(after).ready.values())

    def silent_among(self, names: frozenset[str], *, after: datetime.timedelta) -> frozenset[str]:
        """Of the clusters `names` (known ones), those heard once and silent for longer than `after`."""
        return names & self._views.readiness(after).silent

    def member(self, name: str) -> facts.ClusterFacts | None:
        """What cluster `name`'s MemberCluster last said (labels, stamped taints), if known."""
        return self._members.get(name)

    def decommissioned(self, name: str) -> bool:
        """Whether cluster `name`'s MemberCluster said `spec.decommission` (deleted since, or not)."""
        return name in self._decommissioned

    def held_at(self, name: str) -> frozenset[str]:
        """The live spreads with replicas placed on cluster `name` or pods reported there (active
        or being deleted): a decommission is complete when none is left. (A deleted spread's
        workload released there runs on, no longer the federation's: it does not hold the cluster.)"""
        reported = self.pods.by_cluster.get(name, {})
        return self._index.occupying(name) | frozenset(
            key for key, per_subset in reported.items()
            if key in self._spreads and any(pods.active or pods.deleting for pods in per_subset.values()))

    def taints_of(self, name: str) -> tuple[common.Taint, ...]:
        """Cluster `name`'s MemberCluster taints, each with its `timeAdded` (first seen, if unset)."""
        return found.taints if (found := self._members.get(name)) is not None else ()

    def selected(self, key: str, *, known: bool = False) -> frozenset[str]:
        """Every cluster spread `key`'s subsets name or select (`known`: only clusters the World knows)."""
        if key not in self._spreads:
            return frozenset()
        found = frozenset(name for names in self._index.selection_of(key) for name in names)
        return found & self._index.cluster_set() if known else found

    def marks_for(self, key: str) -> list[placement.UnschedulableMark]:
        """Spread `key`'s unschedulable marks (expiry is the placement's business); none under Fixed."""
        if (entry := self._spreads.get(key)) is not None and not entry.spec.schedule_strategy.is_adaptive:
            return []
        return self._marks.of_spread(key)

    def current_for(self, key: str) -> dict[str, dict[str, int]]:
        """Spread `key`'s last placement per subset per cluster; before the first, what its hub
        status recorded (a restarted coordinator keeps what the last one placed), else empty. A
        cluster that was lost when the spread was last placed and is ready again holds (at least)
        the pods it last reported running: its surplus goes by the spread's scale-down order, not
        because it was away (`federation.core.handover` keeps them until the spread can spare them)."""
        last = self._placed.get(key)
        if last is None:
            return {subset: dict(counts) for subset, counts in self._seeded.get(key, {}).items()}
        counts = last.rule_counts()  # not the pods the handover kept: they are recomputed each round
        kept = {s.name: s.kept_clusters for s in last.subsets}
        returned = (self.ready_selected(key) - self._placed_ready.get(key, frozenset())
                    - self._placed_held.get(key, frozenset()))
        for name in returned:  # lost when last placed, heard again: what it runs counts again
            for subset, count in self.pods.held_by(name, key).items():  # (less what was kept there)
                held = counts.setdefault(subset, {})
                held[name] = max(held.get(name, 0), count - kept.get(subset, {}).get(name, 0))
        return counts

    def waiting_for(self, key: str) -> dict[str, dict[str, int]]:
        """Spread `key`'s replicas its last placement left waiting for capacity, per subset per cluster."""
        last = self._placed.get(key)
        return {} if last is None else {s.name: dict(s.waiting_clusters) for s in last.subsets if s.waiting}

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
        return self._views.plan(key).shape

    def plan_for(self, key: str) -> member_views.Plan:
        """Spread `key`'s pods per subset (`member_views.Plan`; ValueError: a malformed template)."""
        return self._views.plan(key)

    def lift_charges(self, keys: Collection[str]) -> Mapping[str, Sequence[fit.Pool]]:
        """A round of spreads `keys` begins (`loop.recompute`): their pending pods come out of the
        ledgers until each is stored again (`store`) or the round gives up (`restore_charges`), so
        every view built meanwhile is the round's snapshot. The snapshot's pools per cluster (read
        lazily; valid until the first `store`)."""
        self._views.lift(keys)
        return self._views.snapshot_pools()

    def restore_charges(self) -> None:
        """A round did not finish: its lifted spreads' last placements are charged again."""
        self._views.restore()

    def view_for(self, key: str) -> placement.View:
        """Spread `key`'s placement view: its selected clusters, every other spread's pending pods
        charged (`placement.view_of` of the deducted `snapshot_for`, from the ledgers)."""
        return self._views.view_for(key)

    def pending_pods(self, *, besides: str = "") -> list[overcommit.PendingPods]:
        """Every other spread's pending pods (`MemberViews.pending_pods`; ValueError: a bad template)."""
        return self._views.pending_pods(besides=besides)

    # --- helpers -------------------------------------------------------------------------------

    def _relabel(self) -> None:
        """The set of clusters or their labels changed: selections must be matched again."""
        self._index.relabel()
        self._views.groups.clear()

    def _forget_plan(self, key: str) -> None:
        """Spread `key`'s spec or template changed: its shapes and charges are computed again."""
        self._views.forget_plan(key)
        self._index.forget(key)

