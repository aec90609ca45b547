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

Why the World owns an index and views: with thousands of spreads and clusters, a request must
cost the clusters its spread can use, not every cluster times every spread. The
`selection_index.SelectionIndex` knows which spreads name, select or occupy a cluster and which
clusters a spread selects; the `member_views.MemberViews` keep one `overcommit.Ledger` per cluster
with every placed spread's pending pods charged (`pending_charges`) and build `view_for`'s views
from them. Neither holds a fact of its own: both read the World's dictionaries through read-only
mappings, and the World tells them what changed through named notifications (never by writing
their state). Placements are stored through `store` and `drop` only, so the ledgers stay in step;
`placements` is a read-only view.

A MemberCluster deleted on the hub is not a cluster gone (`delete_cluster`): its facts stay until
it is decommissioned (`spec.decommission`, out of every selection) and holds nothing.

This module holds the events; the records and the readers are `world_state.WorldState`, which the
World extends (why: `world_state`).
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from federation.api import cluster, common
from federation.api import spread as spread_api
from federation.coordinator.model import (
    facts,
    hub_objects,
    marks,
    selection_index,
    world_state,
)
from federation.core import placement, pod_shape, status

SpreadEntry = facts.SpreadEntry
"""One spread as the coordinator knows it (defined in `facts`; this is the name other modules use)."""


class World(world_state.WorldState):
    """The World, changed by events: each event method returns the spread keys it affects."""

    # --- events --------------------------------------------------------------------------------

    def upsert_spread(self, item: spread_api.FederatedSpread) -> set[str]:
        """A FederatedSpread was created or changed; a status-only update (our own write) affects nothing."""
        key = item.key
        old = self._spreads.get(key)
        if old is not None and old.spread.spec == item.spec and old.uid == facts.uid_of(item):
            old.refresh(item)
            return set()
        if old is None and key not in self._placed and item.status is not None:
            recorded = {s.name: s.placed() for s in item.status.subset_statuses if s.clusters}
            if recorded:  # the rule's answer is `current`; the pods it kept are recomputed (`rule_counts`)
                ruled = {s.name: s.ruled() for s in item.status.subset_statuses if s.clusters}
                self._records.seed(key, ruled)
                self.pods.recorded(key, recorded)  # unknown is not zero: held until reported
            self.rebalancing.seed(key, item.status.rebalancing)  # a failback step in flight resumes
        if old is None:
            self._records.adopt_previous(key)  # created again: placed from what the deleted one ran
        target = self._targets.get(key)
        generation = item.metadata.generation or next(self._counter)
        if old is not None:
            self._index.unregister(key)
            self._unname(old)
            if marks.spent(old.spec, item.spec):
                self._marks.drop_spread(key, spent_at=generation)
        self._spreads[key] = entry = SpreadEntry(
            spread=item,
            generation=generation,
            replicas=target.replicas if target else None,
            template=target.template if target else None,
        )
        self._keep_least_lost_after(entry, old)
        self._index.register(key, item.spec)
        self._by_workload.setdefault(world_state.workload_of(self._spreads[key]), set()).add(key)
        self._forget_plan(key)
        self._track_references(key)
        return {key}

    def delete_spread(self, key: str, *, deleted: bool = True) -> set[str]:
        """A FederatedSpread was deleted (its placement is dropped by the next recompute, and its
        removals orphan its workloads unless its `deletionPolicy` is Delete). `deleted` False: it
        lives on, refused (displaced by a claimant that ranks first, `lifecycle`): it leaves the
        World but is not remembered as deleted, so no resync removes what it may run."""
        self._records.forget_seed(key)
        if key not in self._spreads:
            return set()
        if deleted:
            self.lifecycle.deleted(key, self._spreads[key].spec.deletion_policy)
        self._index.unregister(key)
        self._unname(self._spreads[key])
        self._keep_least_lost_after(None, self._spreads.pop(key))
        self._forget_plan(key)
        self._charges.recharge(key)
        self._marks.drop_spread(key)
        self.liveness.forget_spread(key)
        self.rebalancing.forget(key)
        # (What lost clusters hold of it stays: they were sent no removal, and a spread created
        # again under the key adopts their workloads; `PodReports.removed` lets it go.)
        self.hub_objects.forget(key)
        return {key}

    def _unname(self, entry: SpreadEntry) -> None:
        """Spread `entry` no longer names its hub workload (deleted, or its target edited)."""
        workload = world_state.workload_of(entry)
        named = self._by_workload.get(workload, set())
        named.discard(entry.key)
        if not named:
            self._by_workload.pop(workload, None)

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
        same_pods = pod_shape.pod_template_of(entry.template) == pod_shape.pod_template_of(template)
        entry.replicas, entry.template = replicas, template
        if entry.spread.metadata.generation is None:
            entry.generation = next(self._counter)
        self._forget_plan(key, keep_shapes=same_pods)
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
        self._views.cluster_changed(name)
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
        self._charges.mark_stale(self.pods.forget(name))
        self._marks.drop_cluster(name)
        self.liveness.forget_cluster(name)  # nothing of it is heard, lost or failing over any more
        self._charges.forget_pools(name)
        self._relabel()
        return affected

    def inventory(self, name: str, pools: Sequence[cluster.NodePool]) -> set[str]:
        """A full InventoryReport from `name`'s agent (latest wins)."""
        if self._pools.get(name) == list(pools):
            return set()
        known = name in self._pools or name in self._members
        self._pools[name] = list(pools)
        self._charges.set_pools(name, pools)
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
        self._charges.mark_stale(changed)
        return changed | self._capacity_bound(self._index.selecting(name))

    def announce_pods(self, name: str, pods: Mapping[str, Mapping[str, int]]) -> set[str]:
        """Cluster `name`'s Hello counted, per spread key, its pods per subset: unknown is not
        zero, so until its reports verify a spread the cluster holds at least those
        (`PodReports.announced`). The spreads whose held pods grew (to be placed again before the
        agent's resync); a spread that is not live is left alone."""
        grown = {key for key, counts in sorted(pods.items())
                 if key in self._spreads and self.pods.announced(name, key, counts)}
        self._charges.mark_stale(grown)
        return grown

    def release_pods(self, name: str, key: str) -> None:
        """Cluster `name` was sent an orphaning removal of spread `key` (`PodReports.released`)."""
        self.pods.released(name, key)

    def forget_pods(self, name: str, key: str) -> None:
        """Cluster `name` was sent the removal of spread `key`: its counts there no longer count."""
        self._charges.mark_stale(self.pods.removed(name, key))

    def _capacity_bound(self, keys: set[str]) -> set[str]:
        """Of `keys`, the spreads a change of free capacity can move: not placed yet, or with
        replicas that did not fit. A settled spread (`placement.settled`) is not placed again;
        only its subsets' simulated `capacity` would differ, and Explain recomputes that. A spread
        that fails back (`spec.rebalance.policy: WhenRoom`) is placed again: room is what it waits for."""
        placed = self._placed
        return {k for k in keys if (p := placed.get(k)) is None or not placement.settled(p)
                or ((e := self._spreads.get(k)) is not None and e.spec.rebalance.policy == "WhenRoom")}

    def unschedulable(
        self, name: str, *, spread: str, subset: str, since: datetime.datetime, generation: int = 0,
    ) -> set[str]:
        """An agent marked (subset, cluster) of `spread` unschedulable at `since`, holding the
        assignment of `generation`; the latest wins (one found under a spec whose marks an edit
        has spent since is refused: `Marks.mark`)."""
        if not self._marks.mark(spread=spread, subset=subset, cluster=name, since=since,
                                generation=generation):
            return set()
        entry = self._spreads.get(spread)  # a Fixed spread is placed as if there were no marks
        return {spread} if entry is not None and entry.spec.schedule_strategy.is_adaptive else set()

    def heartbeat(self, name: str, at: datetime.datetime | None = None) -> set[str]:
        """`name`'s agent was heard; affects the spreads for which it was lost and is ready again.

        Most heartbeats find their cluster lost for no spread: one silent for less than the shortest
        limit of all spreads is heard without a look at the spreads that select it (1,000 agents
        beating together after a coordinator's start each cost the facade's lock a pass over the
        spreads of their cluster: a thousand each in a federation of wide spreads)."""
        if self._least_lost_after is None and self._spreads:
            self._least_lost_after = min(entry.lost_after for entry in self._spreads.values())
        if self._least_lost_after is None or not self.liveness.lost(name, after=self._least_lost_after):
            self.liveness.heard(name, at)
            return set()
        users = self._index.selecting(name)
        limits = {self._spreads[k].lost_after for k in users}
        lost_before = {after for after in limits if self.liveness.lost(name, after=after)}
        if lost_before:
            self.pods.lost(name)  # its last report is from before: its pods must report again
        self.liveness.heard(name, at)
        back = {after for after in lost_before if not self.liveness.lost(name, after=after)}
        return {k for k in users if self._spreads[k].lost_after in back}

    def _keep_least_lost_after(self, new: SpreadEntry | None, old: SpreadEntry | None) -> None:
        """Keep `heartbeat`'s shortest limit true as spread `old` becomes `new` (None: created, or
        deleted). Never longer than the true one (a longer one would hear a lost cluster as not
        lost); it is dropped, to be computed again, when the spread that held it lets it go."""
        least = self._least_lost_after
        if least is None:
            return
        if old is not None and old.lost_after <= least and (new is None or new.lost_after > least):
            self._least_lost_after = None
        elif new is not None:
            self._least_lost_after = min(least, new.lost_after)

    def restart_grace(self, at: datetime.datetime) -> None:
        """Count a cluster never heard as heard at `at` from now on (`failover`): the coordinator
        begins acting only now (a standby's World is made long before it leads)."""
        self.liveness.restart_grace(at)

    # --- placements ----------------------------------------------------------------------------

    def store(self, key: str, result: placement.Placement, *, charge: bool = True) -> set[str]:
        """Record spread `key`'s new placement; the clusters where its pending pods changed. Without
        `charge` (a round's spreads), its pending pods are charged with the round's others by
        `settle_charges`, all at once, and no cluster is named."""
        old = self._records.store(key, result)
        if old is not None:  # what clusters lost now ran before (their agents keep the last assignment)
            self.pods.remember_away(key, old, lost=self.selected(key) - self.ready_selected(key))
        if old is not None and not self._charges.is_stale(key) and old.same_counts(result):
            return set()  # same replicas where they were, same pods running: same pending pods
        occupied = selection_index.occupancy(result)
        self._index.index_placed(key, occupied)
        if not charge:
            self._charges.stored(key)
            return set()
        return self._charges.recharge(key, occupied)

    def settle_charges(self) -> None:
        """Charge the pending pods of every spread stored without them (`store`), at once."""
        self._charges.settle()

    def settled_placement(self, key: str, *, held: frozenset[str] = frozenset()) -> None:
        """Spread `key` was placed from the live world: its recorded hub placement is spent, and the
        clusters it selects that are ready now are remembered (a change of readiness re-places it),
        with the lost ones whose replicas the brake or the failover rate limit `held` (their
        shares never moved: when they return, there is nothing to take back)."""
        self._records.settled(key, ready=self.ready_selected(key), departing=self.departing(key), held=held)

    def drop(self, key: str) -> bool:
        """Forget spread `key`'s placement; whether it had one."""
        deleted = key not in self._spreads  # a deleted spread's is kept for a re-creation of the key
        if self._records.drop(key, deleted=deleted) is None:
            return False
        self._index.index_placed(key, [])
        self._charges.recharge(key)
        return True
    # --- helpers -------------------------------------------------------------------------------

    def _relabel(self) -> None:
        """The set of clusters or their labels changed: selections must be matched again."""
        self._index.relabel()
        self._views.clusters_relabelled()

    def _forget_plan(self, key: str, *, keep_shapes: bool = False) -> None:
        """Spread `key`'s spec or template changed: its shapes and charges are computed again
        (`keep_shapes`: its pod template did not change, only the hub workload's replicas or
        metadata, so its plan stands; the same objects let the SpreadShards keep holding it)."""
        if keep_shapes:
            self._charges.mark_stale((key,))
        else:
            self._charges.forget_plan(key)
        self._index.forget(key)
        self._ready_selected.pop(key, None)

