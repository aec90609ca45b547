"""What each cluster can still take, as each spread placing on it sees it.

Why cached views: with thousands of spreads and clusters, a request must cost the clusters its
spread can use, not every cluster times every spread. On the per-cluster ledgers of pending pods
(`pending_charges`, which these views own and the World feeds), a cluster's member view is built
once per signature of a spread's pods and readiness until the cluster is touched; the member views
of one selector's clusters are shared as a group, brought up to date from a log of touched
clusters. Which clusters are ready comes from the World's liveness (`liveness.Liveness`), which
caches it until a heartbeat or the clock could change it.

`view_for` gives `placement.place_view` exactly the view that `placement_view.view_of` would build
from `World.snapshot_for` after `pending_deduction.deduct_pending` of the other spreads' pending pods (a
unit test compares them on random worlds). The views read the World's records through named,
read-only inputs (`Inputs`) and never write them; the World tells them what changed through named
notifications (`cluster_changed`, `clusters_relabelled`, ...), never by writing their state.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping, Sequence

from federation.api import cluster
from federation.api import spread as spread_api
from federation.coordinator.model import facts, liveness, pending_charges, selection_index
from federation.core import placement, placement_view

_TOUCH_LOG = 65536
"""Touched clusters remembered before the log starts again (groups behind it compare versions)."""


@dataclasses.dataclass
class Group:
    """The shared member views of one selector's clusters for spreads with equal pods (signature).

    `cursor` is how far into the touch log the group is up to date; `versions` the version of each
    member it holds; `rooms`, per subset number, each member's room.
    """

    names: tuple[str, ...]
    ready: dict[str, bool]
    members: dict[str, placement_view.Member]
    versions: dict[str, int]
    cursor: int
    rooms: dict[int, dict[str, int]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What the views read of the World: its records as read-only mappings (the views never write
    them; the World tells the views what changed through their notifications)."""

    spreads: Mapping[str, facts.SpreadEntry]
    placements: Mapping[str, placement.Placement]
    """Each spread's last placement (its pending pods are charged, `pending_charges`)."""
    pods: pending_charges.Pods
    """Per spread, per cluster, per subset: the pods the agents counted."""
    clusters: Mapping[str, facts.ClusterFacts]
    """Each MemberCluster's labels and taints."""
    index: selection_index.SelectionIndex
    """Which clusters each spread selects (kept by the World)."""
    readiness: Callable[[datetime.timedelta], liveness.Readiness]
    """Which clusters are ready for a clusterLostSeconds (`liveness.Liveness.readiness`)."""
    clock: Callable[[], datetime.datetime]


class MemberViews:
    """Member views and placement views, built on per-cluster ledgers of pending pods (`charges`).

    Notifications (the World's only way to change them): `cluster_changed`, `clusters_relabelled`,
    and the ledgers' own (`charges`)."""

    def __init__(self, inputs: Inputs) -> None:
        self._spreads = inputs.spreads
        self._clusters = inputs.clusters
        self._index = inputs.index
        self._selector_keys = inputs.index.selector_keys
        self._readiness = inputs.readiness
        self._clock = inputs.clock
        self._versions: dict[str, int] = {}
        """Per cluster, bumped whenever its member view may change (charges, pools, taints, labels)."""
        self._member_views: dict[str, tuple[int, dict[tuple[int, bool], placement_view.Member]]] = {}
        self._own_views: dict[str, dict[str, tuple[int, bool, placement_view.Member]]] = {}
        """Per cluster (until `cluster_changed`), per spread with pending pods there, its own view."""
        self._groups: dict[tuple[str, int, datetime.timedelta], Group] = {}
        """Cleared when the set of clusters or their labels change (`clusters_relabelled`)."""
        self._touched: list[str] = []
        """Clusters whose member view changed, in order (`cluster_changed`); entry i is number base + i."""
        self._touched_base = 0
        self.charges = pending_charges.PendingCharges(
            inputs.spreads, inputs.placements, pods=inputs.pods, changed=self.cluster_changed)
        """The ledgers the member views are built on (the World feeds them)."""

    # --- notifications -------------------------------------------------------------------------

    def clusters_relabelled(self) -> None:
        """The set of clusters or their labels changed: every selector's group is built again."""
        self._groups.clear()

    # --- member views --------------------------------------------------------------------------

    def cluster_changed(self, name: str) -> None:
        """Cluster `name`'s member view may have changed (its charges, pools, taints or labels)."""
        self._versions[name] = self._versions.get(name, 0) + 1
        self._member_views.pop(name, None)
        self._own_views.pop(name, None)
        self._touched.append(name)
        if len(self._touched) > _TOUCH_LOG:
            self._touched_base += len(self._touched)
            self._touched = []

    def view_for(self, key: str) -> placement_view.View:
        """Spread `key`'s placement view: its selected clusters, every other spread's pending pods
        charged (`placement_view.view_of` of the deducted `World.snapshot_for`, from the ledgers)."""
        entry = self._spreads[key]
        plan = self.charges.plan(key)
        self.charges.settle()
        selected = self._index.selection_of(key)
        after = entry.lost_after
        ready = self._readiness(after).ready
        members: dict[str, placement_view.Member] = {}
        rooms: list[dict[str, int]] = []
        for index, (subset, selector) in enumerate(
                zip(entry.spec.subsets, self._selector_keys[key], strict=True)):
            if subset.clusters is not None:
                found: dict[str, int] = {}
                for name in selected[index]:  # the named ones, less any decommissioned
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
        for name in self.charges.charged_at(key):
            if name in members:  # its own pending pods here are not deducted from its capacity
                member = members[name] = self._own_view(name, key, plan=plan, ready=members[name].ready)
                for index, found in enumerate(rooms):
                    if name in found:
                        found[name] = member.room(index)
        if entry.spec.cluster_tolerations:
            self._tolerate(members, entry.spec.cluster_tolerations)
        # `names`: the placement lists the clusters this spread can select, not every cluster of
        # the federation (10k spreads x 1k clusters of zeros would be ~10M dict entries).
        labels = ({name: dict(facts_of.labels) for name in members
                   if (facts_of := self._clusters.get(name)) is not None}
                  if entry.spec.topology_spread else {})
        return placement_view.View(
            names=tuple(members), selected=selected, members=members, rooms=tuple(rooms), labels=labels)

    def _tolerate(
        self, members: dict[str, placement_view.Member], tolerations: Sequence[spread_api.ClusterToleration]
    ) -> None:
        """Lift from `members` (one spread's, a copy of the shared views) the cordons the spread's
        clusterTolerations tolerate. Applied here, not in the cached member views: those are shared
        by every spread with equal pods, whatever it tolerates."""
        for name, member in members.items():
            if member.cordon:
                found = self._clusters.get(name)
                cordon = (cluster.cordon_of(found.taints, tolerations=tolerations, now=self._clock())
                          if found is not None else "")
                if cordon != member.cordon:
                    members[name] = member._replace(cordon=cordon)

    def _member_view(self, name: str, plan: pending_charges.Plan, *, ready: bool) -> placement_view.Member:
        """Cluster `name` for spreads with this plan's pods and no pending pods of their own there."""
        version = self._versions.get(name, 0)
        cached = self._member_views.get(name)
        if cached is None or cached[0] != version:
            cached = self._member_views[name] = (version, {})
        found = cached[1].get((plan.signature, ready))
        if found is None:
            found = self._build_member(name, None, plan=plan, ready=ready)
            cached[1][(plan.signature, ready)] = found
        return found

    def _own_view(
        self, name: str, key: str, *, plan: pending_charges.Plan, ready: bool
    ) -> placement_view.Member:
        """Cluster `name` for spread `key`, which has pending pods there (not deducted for itself)."""
        views = self._own_views.setdefault(name, {})
        cached = views.get(key)
        if cached is not None and cached[0] == plan.signature and cached[1] == ready:
            return cached[2]
        member = self._build_member(name, key, plan=plan, ready=ready)
        views[key] = (plan.signature, ready, member)
        return member

    def _group(
        self, selector: str, plan: pending_charges.Plan, *, after: datetime.timedelta, ready: dict[str, bool]
    ) -> Group:
        """The member views of a selector's clusters for this plan's pods, kept up to date.

        Only the clusters touched since the group was last read are looked at again: from the
        log of changed clusters when that is shorter than the group, else by comparing versions.
        """
        key = (selector, plan.signature, after)
        group = self._groups.get(key)
        end = self._touched_base + len(self._touched)
        versions = self._versions
        if group is None:
            names = self._index.selector_members(selector)
            members = {name: self._member_view(name, plan, ready=ready[name]) for name in names}
            seen = {name: versions.get(name, 0) for name in names}
            group = self._groups[key] = Group(names, ready, members, seen, end)
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

    def _build_member(
        self, name: str, key: str | None, *, plan: pending_charges.Plan, ready: bool
    ) -> placement_view.Member:
        """Cluster `name` as spread `key` sees it (None: a spread without pending pods there)."""
        ledger = self.charges.ledger(name)
        member = self._clusters.get(name)
        cordon = member.cordon if member is not None else ""
        distinct, numbers = plan.kinds
        if ledger is None:
            return placement_view.Member(
                ready, cordon, tuple(() for _ in distinct), tuple(() for _ in plan.profiles), numbers, (),
                placement_view.Limits((), (), distinct))
        slots, state = ledger.kinds(key, distinct)
        limits = placement_view.Limits(ledger.allocatable, state, distinct)  # worked out if a reason asks
        return placement_view.Member(ready, cordon, slots, ledger.admits(plan.signature, plan.profiles),
                                     numbers, ledger.nodes, limits)

