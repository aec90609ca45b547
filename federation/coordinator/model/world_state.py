"""What the coordinator's World knows, and every question asked of it.

Why a module of its own: the World (`world`) is one object that events change and the placement
loop, the statuses and the services read. Its records and its readers are here, its event methods
in `world.World`, which is this class with the events: the questions a placement asks (which
clusters a spread selects and which of them are ready, where it starts from, what it may take) are
read far more often than the world changes, and reading them needs none of the bookkeeping by
which an event keeps the indexes, ledgers and caches in step.

Who keeps what: the spreads, their targets and the clusters' facts are plain dictionaries here;
the pod reports (`pod_reports`), marks (`marks`), hub objects (`hub_objects`), lifecycle
(`lifecycle`), failback (`rebalancing`) and placement records (`placement_records`) are objects of
their own; the selection index (`selection_index`) and member views (`member_views`, with the
pending-pod ledgers of `pending_charges`) are caches, none of them a fact of its own; the
heartbeats, failover brakes and failover rate limit are one object, `liveness.Liveness`.
"""

from __future__ import annotations

import datetime
import itertools
import types
from collections.abc import Callable, Collection, Mapping, Sequence

from federation.api import cluster, common
from federation.coordinator.model import brakes as failover_brakes
from federation.coordinator.model import (
    facts,
    failover,
    hub_objects,
    lifecycle,
    liveness,
    marks,
    member_views,
    pending_charges,
    placement_records,
    pod_reports,
    rebalancing,
    selection_index,
)
from federation.core import fit, pending_deduction, placement

DEFAULT_LOST_SECONDS = 60

SpreadEntry = facts.SpreadEntry
"""One spread as the coordinator knows it (defined in `facts`; this is the name other modules use)."""


def workload_of(entry: SpreadEntry) -> tuple[str, str, str]:
    """The hub workload spread `entry` names: (namespace, kind, name)."""
    ref = entry.spec.target_ref
    return entry.key.partition("/")[0], ref.kind, ref.name


class WorldState:
    """Spreads, targets, clusters, inventories, pod counts, marks, heartbeats and last placements,
    and the questions a placement, a status or a service asks of them."""

    def __init__(
        self, clock: Callable[[], datetime.datetime], *, grace_from: datetime.datetime | None = None,
        failover_per_minute: int | None = None,
    ) -> None:
        self.clock = clock
        self._records = placement_records.PlacementRecords()
        self.seeded = self._records.seeded
        """Per spread, the placement its hub status recorded: `current` until the first recompute."""
        self._placed = self._records.placements
        self.placements = self._records.placements
        """The last placement per spread (read-only: write through `store` and `drop`)."""
        self.placed_ready = self._records.placed_ready
        """Per placed spread, the selected clusters that were ready when it was placed."""
        self._spreads: dict[str, SpreadEntry] = {}
        self._least_lost_after: datetime.timedelta | None = None
        """The shortest `failover.clusterLostSeconds` of any spread (None: not known; `World.heartbeat`
        computes it, `World._keep_least_lost_after` keeps it as spreads come, change and go)."""
        self._by_workload: dict[tuple[str, str, str], set[str]] = {}
        """Per hub workload (namespace, kind, name), the spreads that name it: a workload event
        finds its spreads without a scan of every spread."""
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
        spreads = types.MappingProxyType(self._spreads)
        members = types.MappingProxyType(self._members)
        self._index = selection_index.SelectionIndex(
            spreads, members, pools=types.MappingProxyType(self._pools), decommissioned=self._decommissioned)
        self.liveness = liveness.Liveness(
            clock, grace_from=grace_from, failover_per_minute=failover_per_minute,
            cluster_names=self._index.cluster_names)
        """Heartbeats, failover brakes and the failover rate limit (`liveness`)."""
        self._views = member_views.MemberViews(member_views.Inputs(
            spreads=spreads, placements=self._placed, pods=types.MappingProxyType(self.pods.by_spread),
            clusters=members, index=self._index, readiness=self.liveness.readiness, clock=clock,
        ))
        self._charges = self._views.charges
        self._ready_selected: dict[str, tuple[SpreadEntry, int, object, frozenset[str]]] = {}
        """Per spread, `ready_selected`'s last answer with the entry, the readiness's serial and the
        selection it was read from (any of them replaced: read again). Not the readiness itself: a
        reading of every cluster, one kept per spread asked at a different time would add up.
        Dropped with the spread's plan (`World._forget_plan`: spec or template changed, deleted)."""

    # --- readers -------------------------------------------------------------------------------

    @property
    def tracker(self) -> failover.HeartbeatTracker:
        """When each cluster's agent was last heard (the liveness's)."""
        return self.liveness.tracker

    @property
    def brakes(self) -> failover_brakes.Brakes:
        """Per spread, the failover brake (the liveness's)."""
        return self.liveness.brakes

    @property
    def failover_limit(self) -> failover_brakes.FailoverRateLimit:
        """The federation's failover rate limit (the liveness's)."""
        return self.liveness.failover_limit

    def spreads(self) -> list[SpreadEntry]:
        """Every known spread, by key."""
        return [self._spreads[k] for k in sorted(self._spreads)]

    def spreads_targeting(self, namespace: str, kind: str, name: str) -> list[SpreadEntry]:
        """The spreads whose `targetRef` names hub workload `kind` `namespace/name`, by key."""
        return [self._spreads[k] for k in sorted(self._by_workload.get((namespace, kind, name), ()))]

    def spread(self, key: str) -> SpreadEntry | None:
        """The spread `key`, if known."""
        return self._spreads.get(key)

    def cluster_names(self) -> list[str]:
        """Clusters known from a MemberCluster or an agent's inventory, by name."""
        return list(self._index.cluster_names())

    def ready(self, name: str, *, after: datetime.timedelta) -> bool:
        """Heard within `after`."""
        return not self.liveness.lost(name, after=after)

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

    def node_pools(self, name: str) -> tuple[cluster.NodePool, ...]:
        """Cluster `name`'s node pools as its agent last reported them (none: not reported)."""
        return tuple(self._pools.get(name, ()))

    def ready_selected(self, key: str) -> frozenset[str]:
        """The clusters spread `key`'s subsets select that are ready for it now (remembered per
        spread while its entry, its selection and the readiness it was read from stand: a round
        asks up to five times per spread)."""
        entry = self._spreads.get(key)
        if entry is None:
            return frozenset()
        readiness = self.liveness.readiness(entry.lost_after)
        selection = self._index.selection_of(key)
        kept = self._ready_selected.get(key)
        if kept is not None and kept[0] is entry and kept[1] == readiness.serial and kept[2] is selection:
            return kept[3]
        ready, found, complete = readiness.ready, set[str](), True
        for index, (subset, selector) in enumerate(
                zip(entry.spec.subsets, self._index.selector_keys[key], strict=True)):
            if subset.clusters is not None:
                for name in selection[index]:  # the named ones, less any decommissioned
                    flag = ready.get(name)
                    if flag is None:  # a named cluster the World does not know: ask the liveness
                        complete = False
                        flag = self.ready(name, after=entry.lost_after)
                    if flag:
                        found.add(name)
            elif selector is not None:
                found |= self._index.ready_members(selector, ready)
        every = self._index.selected_of(key)  # (`found` is part of it: the same size, the same set)
        result = every if len(found) == len(every) else frozenset(found)
        if complete:  # (the liveness answers for an unknown cluster from the clock: not kept)
            self._ready_selected[key] = (entry, readiness.serial, selection, result)
        else:
            self._ready_selected.pop(key, None)
        return result

    def departing_lost(self) -> set[str]:
        """The spreads placed while a cluster leaving their selection kept their pods, that
        cluster since lost: its kept pods are no longer heard of (place them again)."""
        return self._records.departing_lost(self.departing)

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
        return self.liveness.heard_from_any(after)

    def silent_among(self, names: frozenset[str], *, after: datetime.timedelta) -> frozenset[str]:
        """Of the clusters `names` (known ones), those heard once and silent for longer than `after`."""
        return self.liveness.silent_among(names, after=after)

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
        found = self._index.selected_of(key)
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
        return self._records.current_for(key, ready_now=self.ready_selected, held_by=self.pods.held_by)

    def waiting_for(self, key: str) -> dict[str, dict[str, int]]:
        """Spread `key`'s replicas its last placement left waiting for capacity, per subset per cluster."""
        return self._records.waiting_for(key)

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
        return self._charges.plan(key).shape

    def plan_for(self, key: str) -> pending_charges.Plan:
        """Spread `key`'s pods per subset (`pending_charges.Plan`; ValueError: a malformed template)."""
        return self._charges.plan(key)

    def lift_charges(self, keys: Collection[str]) -> Mapping[str, Sequence[fit.Pool]]:
        """A round of spreads `keys` begins (`loop.recompute`): their pending pods come out of the
        ledgers until each is stored again (`store`) or the round gives up (`restore_charges`), so
        every view built meanwhile is the round's snapshot. The snapshot's pools per cluster (read
        lazily; valid until the first `store`)."""
        self._charges.lift(keys)
        return self._charges.snapshot_pools()

    def restore_charges(self) -> None:
        """A round did not finish: its lifted spreads' last placements are charged again."""
        self._charges.restore()

    def view_for(self, key: str) -> placement.View:
        """Spread `key`'s placement view: its selected clusters, every other spread's pending pods
        charged (`placement.view_of` of the deducted `snapshot_for`, from the ledgers)."""
        return self._views.view_for(key)

    def pending_pods(self, *, besides: str | None = None) -> list[pending_deduction.PendingPods]:
        """Every other spread's pending pods (`PendingCharges.pending_pods`; ValueError: a bad template)."""
        return self._charges.pending_pods(besides=besides)
