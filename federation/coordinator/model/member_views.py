"""What each cluster can still take, as each spread placing on it sees it.

Why ledgers and cached views: with thousands of spreads and clusters, a request must cost
the clusters its spread can use, not every cluster times every spread. So the World's member views
parse a cluster's pools once per inventory report into one `overcommit.Ledger` per cluster, with
every placed spread's pending pods (placed minus running) charged, updated when a placement, a pod
count, a spec or a template changes; profile each spread's pods once per spec or template change
(`Plan`: per subset, the pod its webhook admits, patch applied; subsets whose pods request the same
share one kind), spreads with equal pods sharing a signature; build a cluster's member view once per
signature and readiness until the cluster is touched; share the member views of one selector's
clusters as a group, brought up to date from a log of touched clusters; and cache which clusters
are ready until a heartbeat or the clock could change one.

`view_for` gives `placement.place_view` exactly the view that `placement_view.view_of` would build
from `World.snapshot_for` after `overcommit.deduct_pending` of the other spreads' pending pods (a
unit test compares them on random worlds). The views read the World's facts through references to its
dictionaries and never write them; the World tells them what changed.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

from federation.api import cluster
from federation.api import spread as spread_api
from federation.coordinator.model import facts, failover, selection_index
from federation.core import fit, overcommit, placement, placement_round, placement_view, status

_TOUCH_LOG = 65536
"""Touched clusters remembered before the log starts again (groups behind it compare versions)."""

_Pods = Mapping[str, dict[str, dict[str, status.ClusterPods]]]
"""Per spread, per cluster, per subset: the pods agents counted."""


def _pending(placed: int, counted: status.ClusterPods | None) -> int:
    """Placed-but-not-running pods of one subset in one cluster: placed minus what its agent last
    reported running there (none reported: all placed are pending)."""
    return placed - (counted.running if counted is not None else 0)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a spread's spec and template give, computed once per change of either."""

    shape: fit.PodShape
    kinds: tuple[tuple[fit.Requests, ...], tuple[int, ...]]
    """The distinct requests of the subsets' pods, and each subset's number among them (`fit.kinds`)."""
    profiles: tuple[fit.Profile, ...]
    """Per subset in spec order: the pods the webhook admits into it (term, tolerations, patch)."""
    by_subset: dict[str, fit.Profile]
    signature: int
    """Equal for spreads whose pods have equal requests and admission per subset."""


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
class _Readiness:
    """Which clusters are ready for one clusterLostSeconds, and which others were heard once (silent
    longer), valid between `since` and `until`."""

    beats: int
    names: tuple[str, ...]
    since: datetime.datetime
    until: datetime.datetime | None
    ready: dict[str, bool]
    silent: frozenset[str]


class MemberViews:
    """Per-cluster ledgers of pending pods, and the member views and placement views built on them."""

    def __init__(
        self, spreads: Mapping[str, facts.SpreadEntry], placed: Mapping[str, placement.Placement], *,
        pods: _Pods, clusters: Mapping[str, facts.ClusterFacts], index: selection_index.SelectionIndex,
        tracker: failover.HeartbeatTracker, clock: Callable[[], datetime.datetime],
        grace_from: datetime.datetime | None,
    ) -> None:
        self._spreads = spreads
        self._placed = placed
        self._pods_by_spread = pods
        self._clusters = clusters
        self._index = index
        self._selector_keys = index.selector_keys
        self._tracker = tracker
        self._clock = clock
        self._grace_from = grace_from
        self._plans: dict[str, Plan] = {}
        self._signatures: dict[Hashable, int] = {}
        self._ledgers: dict[str, overcommit.Ledger] = {}
        self._charged: dict[str, set[str]] = {}
        self._stale: set[str] = set()
        """Spreads whose charges in the ledgers must be recomputed before the next view."""
        self._lifted: set[str] = set()
        """Spreads of a round whose charges are out of the ledgers until they are stored (`lift`)."""
        self.beats = 0
        """Bumped on every heartbeat and forgotten cluster: cached readiness is stale."""
        self._readiness: dict[datetime.timedelta, _Readiness] = {}
        self._versions: dict[str, int] = {}
        """Per cluster, bumped whenever its member view may change (charges, pools, taints, labels)."""
        self._member_views: dict[str, tuple[int, dict[tuple[int, bool], placement_view.Member]]] = {}
        self._own_views: dict[str, dict[str, tuple[int, bool, placement_view.Member]]] = {}
        """Per cluster (until `touch`), per spread with pending pods there, its own member view."""
        self.groups: dict[tuple[str, int, datetime.timedelta], Group] = {}
        """Cleared by the World when the set of clusters or their labels change."""
        self._touched: list[str] = []
        """Clusters whose member view changed, in order (`touch`); entry i has number base + i."""
        self._touched_base = 0

    def restart_grace(self, at: datetime.datetime) -> None:
        """A cluster never heard counts as heard at `at` from now on (cached readiness is stale)."""
        self._grace_from = at
        self.beats += 1

    # --- pools, plans and charges --------------------------------------------------------------

    def set_pools(self, name: str, pools: Sequence[cluster.NodePool]) -> None:
        """Cluster `name`'s agent reported these node pools."""
        numbers = [fit.pool_of(p) for p in pools]
        ledger = self._ledgers.get(name)
        if ledger is None:
            self._ledgers[name] = overcommit.Ledger(numbers)
        else:
            ledger.set_pools(numbers)
        self.touch(name)

    def forget_pools(self, name: str) -> None:
        """Cluster `name` was deleted: it has no pools left (its charges go with their spreads)."""
        ledger = self._ledgers.get(name)
        if ledger is not None:
            ledger.set_pools(())
        self.touch(name)

    def forget_plan(self, key: str) -> None:
        """Spread `key`'s spec or template changed: its shapes and charges are computed again."""
        self._plans.pop(key, None)
        self._stale.add(key)

    def mark_stale(self, keys: Iterable[str]) -> None:
        """The pods of spreads `keys` changed: recompute their charges before the next view."""
        self._stale.update(keys)

    def is_stale(self, key: str) -> bool:
        """Whether spread `key`'s charges wait to be recomputed (or were lifted for a round)."""
        return key in self._stale or key in self._lifted

    def lift(self, keys: Iterable[str]) -> None:
        """A round places spreads `keys` against one snapshot (`loop.recompute`): take their pending
        pods out of the ledgers (their new placements replace them), every other spread's charges
        brought up to date first, so the ledgers then hold the round's snapshot. A lifted spread
        stays out, and counts as stale, until it is charged again (`recharge`, through the World's
        `store`) or `restore`d."""
        self._settle()
        for key in sorted(keys, reverse=True):  # the last key of a ledger comes off by subtraction
            for name in self._charged.pop(key, ()):
                ledger = self._ledgers.get(name)
                if ledger is not None and ledger.set_charges(key, ()):
                    self.touch(name)
            self._lifted.add(key)

    def restore(self) -> None:
        """Charge the spreads still lifted again from their stored placements (a round that did not
        finish: its spreads keep their last placements, and their charges with them)."""
        self.mark_stale(self._lifted)
        self._lifted = set()

    def snapshot_pools(self) -> Mapping[str, Sequence[fit.Pool]]:
        """Per cluster, its node pools with what the ledger holds now as `requested` (after `lift`:
        the round's snapshot), read lazily: a round reads only the clusters it charges."""
        self._settle()
        return placement_round.LedgerPools(self._ledgers)

    def plan(self, key: str) -> Plan:
        """Spread `key`'s pod shape and per-subset profiles (ValueError: a malformed template)."""
        plan = self._plans.get(key)
        if plan is None:
            entry = self._spreads[key]
            shape = fit.shape_from_deployment(entry.template) if entry.template else fit.empty_shape()
            plain = fit.profile(shape)  # subsets injecting nothing share the pod's own profile
            shapes = [fit.with_subset(shape, subset) for subset in entry.spec.subsets]
            profiles = tuple(plain if s is shape else fit.profile(s) for s in shapes)
            kinds = fit.kinds([p.requests for p in profiles])
            signature = (kinds, tuple(p.admission for p in profiles))
            number = self._signatures.setdefault(signature, len(self._signatures))
            by_subset = {s.name: p for s, p in zip(entry.spec.subsets, profiles, strict=True)}
            plan = self._plans[key] = Plan(shape, kinds, profiles, by_subset, number)
        return plan

    def _charges_of(
        self, key: str, occupied: selection_index.Occupancy | None = None
    ) -> dict[str, tuple[overcommit.Charge, ...]]:
        """Spread `key`'s pending pods per cluster: placed minus running, per subset in placement order."""
        last = self._placed.get(key)
        if last is None or key not in self._spreads:
            return {}
        plan = self.plan(key)
        pods = self._pods_by_spread.get(key, {})
        found: dict[str, list[overcommit.Charge]] = {}
        for subset, counts in occupied if occupied is not None else selection_index.occupancy(last):
            profile = plan.by_subset.get(subset)
            if profile is None:
                continue
            for name, placed in counts:
                count = _pending(placed, pods.get(name, {}).get(subset) if pods else None)
                if count > 0:
                    found.setdefault(name, []).append(overcommit.Charge(profile, count))
        return {name: tuple(items) for name, items in found.items()}

    def recharge(self, key: str, occupied: selection_index.Occupancy | None = None) -> set[str]:
        """Bring spread `key`'s charges in the ledgers up to date; the clusters where they changed."""
        new = self._charges_of(key, occupied)
        changed: set[str] = set()
        for name in self._charged.get(key, set()) | set(new):
            ledger = self._ledgers.get(name)
            if ledger is None:
                ledger = self._ledgers[name] = overcommit.Ledger()
                self.touch(name)
            if ledger.set_charges(key, new.get(name, ())):
                changed.add(name)
                self.touch(name)
        if new:
            self._charged[key] = set(new)
        else:
            self._charged.pop(key, None)
        self._stale.discard(key)
        self._lifted.discard(key)
        return changed

    def _settle(self) -> None:
        """Recompute the charges of every stale spread (ValueError: a malformed template)."""
        if self._stale:
            for key in sorted(self._stale):
                self.recharge(key)
            self._stale = set()  # a set never shrinks: an emptied big one still costs its table to scan

    def pending_pods(self, *, besides: str = "") -> list[overcommit.PendingPods]:
        """Placed-but-not-running pods of every spread but `besides`, with each subset's shape: by
        spread key, then subset in placement order, then cluster (ValueError: a malformed template)."""
        found: list[overcommit.PendingPods] = []
        for key in sorted(self._placed):
            if key == besides or key not in self._spreads:
                continue
            plan = self.plan(key)
            pods = self._pods_by_spread.get(key, {})
            for result in self._placed[key].subsets:
                profile = plan.by_subset.get(result.name)
                if profile is None:
                    continue
                for name, placed in sorted(result.clusters.items()):
                    count = _pending(placed, pods.get(name, {}).get(result.name))
                    if count > 0:
                        found.append(overcommit.PendingPods(cluster=name, shape=profile.shape, count=count))
        return found

    # --- readiness -----------------------------------------------------------------------------

    def readiness(self, after: datetime.timedelta) -> _Readiness:
        """Every cluster's readiness for `after` (as `World.ready`, at one reading of the clock),
        recomputed only when a heartbeat or the clock could have changed one."""
        now = self._clock()
        names = self._index.cluster_names()
        cached = self._readiness.get(after)
        if cached is not None and cached.beats == self.beats and cached.names is names \
                and cached.since <= now and (cached.until is None or now <= cached.until):
            return cached
        ready: dict[str, bool] = {}
        silent: list[str] = []
        until: datetime.datetime | None = None
        for name in names:
            last = self._tracker.last(name)
            heard = last if last is not None else self._grace_from
            flag = heard is not None and not now - heard > after
            ready[name] = flag
            if flag and heard is not None:
                deadline = heard + after
                until = deadline if until is None else min(until, deadline)
            elif not flag and last is not None:
                silent.append(name)
        found = self._readiness[after] = _Readiness(self.beats, names, now, until, ready, frozenset(silent))
        return found

    # --- member views --------------------------------------------------------------------------

    def touch(self, name: str) -> None:
        """Cluster `name`'s member view may have changed."""
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
        plan = self.plan(key)
        self._settle()
        selected = self._index.selection_of(key)
        after = entry.lost_after
        ready = self.readiness(after).ready
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
        for name in self._charged.get(key, ()):
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

    def _member_view(self, name: str, plan: Plan, *, ready: bool) -> placement_view.Member:
        """Cluster `name` for spreads with this plan's pods and no pending pods of their own there."""
        version = self._versions.get(name, 0)
        cached = self._member_views.get(name)
        if cached is None or cached[0] != version:
            cached = self._member_views[name] = (version, {})
        found = cached[1].get((plan.signature, ready))
        if found is None:
            found = cached[1][(plan.signature, ready)] = self._build_member(name, "", plan=plan, ready=ready)
        return found

    def _own_view(self, name: str, key: str, *, plan: Plan, ready: bool) -> placement_view.Member:
        """Cluster `name` for spread `key`, which has pending pods there (not deducted for itself)."""
        views = self._own_views.setdefault(name, {})
        cached = views.get(key)
        if cached is not None and cached[0] == plan.signature and cached[1] == ready:
            return cached[2]
        member = self._build_member(name, key, plan=plan, ready=ready)
        views[key] = (plan.signature, ready, member)
        return member

    def _group(
        self, selector: str, plan: Plan, *, after: datetime.timedelta, ready: dict[str, bool]
    ) -> Group:
        """The member views of a selector's clusters for this plan's pods, kept up to date.

        Only the clusters touched since the group was last read are looked at again: from the
        touch log when that is shorter than the group, else by comparing versions.
        """
        key = (selector, plan.signature, after)
        group = self.groups.get(key)
        end = self._touched_base + len(self._touched)
        versions = self._versions
        if group is None:
            names = self._index.selector_members(selector)
            members = {name: self._member_view(name, plan, ready=ready[name]) for name in names}
            seen = {name: versions.get(name, 0) for name in names}
            group = self.groups[key] = Group(names, ready, members, seen, end)
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

    def _build_member(self, name: str, key: str, *, plan: Plan, ready: bool) -> placement_view.Member:
        """Cluster `name` as spread `key` sees it (`key` empty: a spread without pending pods there)."""
        ledger = self._ledgers.get(name)
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

