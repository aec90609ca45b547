"""The placement rules: replicas per (subset, cluster), pure and deterministic.

Why it is shaped like this: the coordinator, `fedspread simulate`, the SDK's what-if and the
benchmarks all need the same answer from the same inputs, so the whole decision is one function of
(spec, replicas, capacity snapshot, current placement, unschedulable marks, clock). It works in
three passes over the subsets in spec order:

1. **Keep** what is already placed on usable clusters (stability: capacity alone moves nothing),
   trimmed to each subset's cap and, when replicas shrink, trimmed from the last subset first. A
   cluster cordoned with a `NoSchedule` taint keeps what it holds under the same trimming but takes
   nothing new; one that is not ready or has a `NoExecute` taint keeps nothing.
2. **Add** the missing replicas in order, each subset taking min(cap room, what is left) — and in
   Adaptive also no more than its simulated capacity, so the rest overflows to the next subset.
3. **Wait**: in Adaptive, what fits nowhere waits (Pending) in the highest-priority subset whose
   cap still has room, counted as capacity-exhausted; what no cap allows is unplaced.

Capacity is a ledger of pod slots per (cluster, node pool) for the template's requests; subsets
that share a pool draw from the same slots, so two subsets never promise the same node twice.

The decision reads its snapshot through a `View`: the selected clusters only, each with its
readiness and free pod slots per pool for this spread's pods. `place` builds the view from a
snapshot; the coordinator builds the same view from what it keeps per cluster (parsed pools,
other spreads' pending pods already charged) and calls `place_view`, so a spread costs the
clusters it can use, not every cluster of the federation.
"""

from __future__ import annotations

import dataclasses
import datetime
import operator
import typing
from collections.abc import Collection, Mapping, Sequence

from federation.api import cluster, placement_json, spread
from federation.core import apportion, brake, division, fit, matching

Counts = Mapping[str, Mapping[str, int]]


@dataclasses.dataclass(frozen=True)
class UnschedulableMark:
    """An agent found `subset` unable to schedule in `cluster` at `since`."""

    subset: str
    cluster: str
    since: datetime.datetime


@dataclasses.dataclass(frozen=True)
class SubsetPlacement:
    """One subset's share: per cluster in the subset's order, with why it got what it got."""

    name: str
    replicas: int
    clusters: dict[str, int]
    cap: int | None
    capacity: int | None
    waiting: int
    reasons: tuple[str, ...]
    kept: int = 0
    """Ready pods kept above the rule's share until their replacements are Ready (`handover`);
    included in `replicas` and `clusters`."""


@dataclasses.dataclass(frozen=True)
class Placement:
    """The answer: every subset in spec order, every snapshot cluster's total."""

    replicas: int
    unplaced: int
    capacity_exhausted: int
    subsets: tuple[SubsetPlacement, ...]
    clusters: dict[str, int]

    @property
    def placed(self) -> int:
        """Replicas assigned to some (subset, cluster)."""
        return sum(s.replicas for s in self.subsets)

    def counts(self) -> dict[str, dict[str, int]]:
        """Replicas per subset per cluster, zeros included: the next round's `current`."""
        return {s.name: dict(s.clusters) for s in self.subsets}

    def to_json(self) -> dict[str, object]:
        """The placement document of `fedspread simulate -o json` (no `"ready"`: nothing runs)."""
        return placement_json.document(
            replicas=self.replicas, unplaced=self.unplaced, clusters=self.clusters, subsets=self.subsets)


def settled(result: Placement) -> bool:
    """Every replica placed, none waiting for capacity: a capacity change alone cannot change its
    counts (only new replicas follow capacity: placement is stable), only its subsets' `capacity`."""
    return not result.unplaced and not result.capacity_exhausted and not any(
        s.waiting for s in result.subsets)


def selected_clusters(subset: spread.Subset, snapshot: cluster.CapacitySnapshot) -> list[str]:
    """The clusters a subset names, in fill order: as listed, else matching ones by name."""
    if subset.clusters is not None:
        return list(subset.clusters)
    selector = subset.cluster_selector
    if selector is None:
        return []
    return sorted(c.name for c in snapshot.clusters if matching.label_selector_matches(selector, c.labels))


class Member(typing.NamedTuple):
    """A selected cluster as one spread's placement sees it (a tuple: views hold thousands)."""

    ready: bool
    cordon: cluster.Cordon
    """The cluster taints' cordon: none (""), "NoSchedule" (keeps what it holds, takes nothing new)
    or "NoExecute" (holds nothing)."""
    slots: tuple[int, ...]
    """Per node pool, how many more pods of the spread's shape fit (other spreads' pending charged)."""
    admits: tuple[tuple[int, ...], ...]
    """Per subset in spec order, the pools (with nodes) whose nodes admit that subset's pods."""

    def room(self, subset: int) -> int:
        """How many more pods of subset number `subset` fit here, before anything is placed."""
        admitted = self.admits[subset]
        if len(admitted) == 1:
            return self.slots[admitted[0]]
        return sum(self.slots[i] for i in admitted)


@dataclasses.dataclass(frozen=True)
class View:
    """What a placement reads of a snapshot, for one spec and pod shape."""

    names: tuple[str, ...]
    """The clusters the placement's `clusters` lists: every snapshot cluster, in snapshot order,
    for `view_of` (`simulate`); the selectable ones for the coordinator's views."""
    selected: tuple[tuple[str, ...], ...]
    """Per subset in spec order, its member clusters in fill order (`selected_clusters`)."""
    members: Mapping[str, Member]
    """Every selected cluster that is in the snapshot."""
    rooms: tuple[Mapping[str, int], ...]
    """Per subset, `Member.room` of each of its members in the snapshot, in fill order (`rooms_of`)."""


def rooms_of(selected: Sequence[Sequence[str]], members: Mapping[str, Member]) -> tuple[dict[str, int], ...]:
    """Per subset, the room of each selected member before anything is placed."""
    return tuple(
        {name: members[name].room(index) for name in names if name in members}
        for index, names in enumerate(selected)
    )


def holding(view: View, names: Collection[str]) -> View:
    """`view` with lost clusters `names` keeping their replicas but taking no new ones, as under a
    NoSchedule cordon (the failover brake holds, or their failover waits for the rate limit)."""
    if not any(name in view.members and not view.members[name].ready for name in names):
        return view
    members = dict(view.members)
    for name in names:
        member = members.get(name)
        if member is not None and not member.ready:
            cordon: cluster.Cordon = member.cordon or "NoSchedule"
            members[name] = member._replace(ready=True, cordon=cordon)
    return dataclasses.replace(view, members=members)


def braked(view: View, *, heard_from_any: bool) -> View:
    """`view` under the failover brake, judged on this one view (what-ifs: no history): when more
    than half of the selectable clusters are unready, or none is ready anywhere, they keep their
    replicas and take no new ones. The coordinator keeps the brake's state across placements."""
    selectable = {name for names in view.selected for name in names if name in view.members}
    lost = [name for name in selectable if not view.members[name].ready]
    if brake.suspends(selectable=len(selectable), lost=len(lost), heard_from_any=heard_from_any):
        return holding(view, lost)
    return view


def view_of(
    spec: spread.FederatedSpreadSpec, *, snapshot: cluster.CapacitySnapshot, shape: fit.PodShape
) -> View:
    """The view of `snapshot` for `spec`'s subsets and pods of `shape` (cordons net of the spec's
    clusterTolerations)."""
    clusters = snapshot.by_name()
    shapes = [fit.with_subset(shape, subset) for subset in spec.subsets]
    selected = tuple(tuple(selected_clusters(subset, snapshot)) for subset in spec.subsets)
    tolerations = spec.cluster_tolerations
    members: dict[str, Member] = {}
    for names in selected:
        for name in names:
            found = clusters.get(name)
            if found is None or name in members:
                continue
            pools = found.node_pools
            members[name] = Member(
                ready=found.ready, cordon=cluster.cordon_of(found.taints, tolerations=tolerations),
                slots=tuple(p.count * fit.pods_per_node(p, shape) for p in pools),
                admits=tuple(
                    tuple(i for i, p in enumerate(pools) if p.count and fit.pool_admits(p, s)) for s in shapes
                ),
            )
    return View(
        names=tuple(c.name for c in snapshot.clusters), selected=selected, members=members,
        rooms=rooms_of(selected, members),
    )


@dataclasses.dataclass
class _Subset:
    """Working state of one subset during a placement."""

    spec: spread.Subset
    index: int
    cap: int | None
    members: tuple[str, ...]
    usable: list[str]
    held: dict[str, int]
    added: dict[str, int]
    cordoned: list[str] = dataclasses.field(default_factory=list)
    """Members cordoned with NoSchedule: in `held` (what they hold stays, within caps), not `usable`."""
    waiting: int = 0
    capacity: int | None = None
    reasons: list[str] = dataclasses.field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.held.values()) + sum(self.added.values())

    def cap_room(self) -> int | None:
        return None if self.cap is None else max(0, self.cap - self.total)


class _Ledger:
    """Free pod slots per (cluster, node pool) for the template, consumed as replicas are placed."""

    def __init__(self, view: View) -> None:
        self._view = view
        self._left: dict[str, list[int]] = {}

    def rooms(self, subset: _Subset) -> dict[str, int]:
        """How many more pods of the subset fit in each of its usable clusters now."""
        before = self._view.rooms[subset.index]
        usable = subset.usable
        # Every member usable (the usual case): the view lists them all already.
        found = dict(before) if len(usable) == len(before) else {name: before[name] for name in usable}
        for name, slots in self._left.items():  # clusters an earlier subset took from
            if name in found:
                admitted = self._view.members[name].admits[subset.index]
                found[name] = sum(slots[i] for i in admitted)
        return found

    def take(self, subset: _Subset, name: str, count: int) -> None:
        """Consume slots for `count` new pods, first admitting pool first."""
        member = self._view.members[name]
        slots = self._left.get(name)
        if slots is None:
            slots = self._left[name] = list(member.slots)
        for i in member.admits[subset.index]:
            used = min(slots[i], count)
            slots[i] -= used
            count -= used
            if not count:
                return


_COUNT = operator.itemgetter(1)
"""The count of a (name, count) item: `filter(_COUNT, d.items())` keeps the non-zero ones, in C."""

_ZEROS: dict[int, tuple[tuple[str, ...], dict[str, int]]] = {}


def _zeros(names: tuple[str, ...]) -> dict[str, int]:
    """A fresh {name: 0} for every name: a copy of one kept per names tuple (copying a dict of a
    thousand clusters is an order of magnitude cheaper than building it)."""
    found = _ZEROS.get(id(names))
    if found is None or found[0] is not names:
        if len(_ZEROS) >= 8:
            _ZEROS.clear()
        found = _ZEROS[id(names)] = (names, dict.fromkeys(names, 0))
    return found[1].copy()


def _active_marks(
    marks: Sequence[UnschedulableMark], *, now: datetime.datetime | None, seconds: int
) -> set[tuple[str, str]]:
    window = datetime.timedelta(seconds=seconds)
    return {(m.subset, m.cluster) for m in marks if now is None or now < m.since + window}


def _prepare(
    spec: spread.FederatedSpreadSpec,
    *,
    replicas: int,
    view: View,
    current: Counts,
    running: Counts,
    marked: set[tuple[str, str]],
) -> list[_Subset]:
    clusters = view.members
    marked_subsets = {subset for subset, _ in marked}
    work: list[_Subset] = []
    caps = apportion.subset_caps(spec.subsets, replicas)
    for index, (subset, cap) in enumerate(zip(spec.subsets, caps, strict=True)):
        members = view.selected[index]
        item = _Subset(subset, index, cap, members, [], {}, {})
        work.append(item)
        held_now = current.get(subset.name) or {}
        if subset.name not in marked_subsets:
            kept = [n for n in members if (m := clusters.get(n)) is not None and m.ready and not m.cordon]
            if len(kept) == len(members) and kept:  # the usual case: every member usable
                item.usable = kept
                if held_now:
                    item.held = {n: held_now.get(n, 0) for n in kept}
                    if min(item.held.values()) < 0:
                        item.held = {n: max(0, count) for n, count in item.held.items()}
                else:
                    item.held = dict.fromkeys(kept, 0)
                item.added = dict.fromkeys(kept, 0)
                continue
        if not members:
            item.reasons.append("no member cluster matches the subset")
        kept = []
        for name in members:
            found = clusters.get(name)
            if found is None:
                item.reasons.append(f"{name}: no such cluster in the snapshot")
                continue
            if not found.ready:
                item.reasons.append(f"{name}: not ready")
                continue
            if found.cordon == "NoExecute":
                item.reasons.append(f"{name}: cordoned (NoExecute): its replicas move, takes no new replicas")
                continue
            kept.append(name)
            held = held_now.get(name, 0)
            marked_here = (subset.name, name) in marked
            if marked_here:
                item.reasons.append(f"{name}: unschedulable, skipped until the mark expires")
                held = min(held, running.get(subset.name, {}).get(name, held))
            if found.cordon:
                item.cordoned.append(name)
            elif not marked_here:
                item.usable.append(name)
            item.held[name] = max(0, held)
        item.added = dict.fromkeys(kept, 0)
    return work


def _explain_cordons(work: list[_Subset]) -> None:
    """Say, after the keep pass, how many replicas each NoSchedule-cordoned member keeps."""
    for item in work:
        for name in item.cordoned:
            kept = item.held[name]
            keeps = f"keeps its {kept} running, " if kept else ""
            item.reasons.append(f"{name}: cordoned (NoSchedule): {keeps}takes no new replicas")


def _keep(work: list[_Subset], replicas: int) -> None:
    """Trim held replicas to caps, then to `replicas` from the last subset first."""
    for item in work:
        held_total = sum(item.held.values())
        if item.cap is not None and held_total > item.cap:
            cut = division.remove(
                held_total - item.cap, mode=item.spec.cluster_spread,
                clusters=list(item.held), held=item.held,
            )
            item.held = {n: item.held[n] - cut[n] for n in item.held}
    excess = sum(i.total for i in work) - replicas
    for item in reversed(work):
        if excess <= 0:
            break
        held_total = sum(item.held.values())
        cut = division.remove(
            min(excess, held_total), mode=item.spec.cluster_spread,
            clusters=list(item.held), held=item.held,
        )
        item.held = {n: item.held[n] - cut[n] for n in item.held}
        excess -= min(excess, held_total)


def _add(work: list[_Subset], left: int, *, ledger: _Ledger, simulate: bool) -> int:
    """Place `left` new replicas in subset order; return how many did not fit anywhere."""
    for item in work:
        free = ledger.rooms(item)
        fits = sum(free.values())
        item.capacity = sum(item.held.values()) + fits
        if not left or not item.usable:
            continue
        cap_room = item.cap_room()
        want = left if cap_room is None else min(left, cap_room)
        room: dict[str, int | None] = dict(free) if simulate else dict.fromkeys(item.usable, None)
        take = min(want, fits) if simulate else want
        if simulate and take < want:
            item.reasons.append(f"capacity: only {fits} more pods fit")
        if take <= 0:
            continue
        added = division.divide(
            take, mode=item.spec.cluster_spread, clusters=item.usable,
            held=item.held, room=room, weights=free,
        )
        for name, count in list(filter(_COUNT, added.items())):
            item.added[name] += count
            ledger.take(item, name, count)
            left -= count
    return left


def _wait(work: list[_Subset], left: int) -> int:
    """Adaptive: put what fits nowhere in the first subsets whose caps allow; return the rest."""
    for item in work:
        if not left:
            break
        if not item.usable:
            continue
        cap_room = item.cap_room()
        take = left if cap_room is None else min(left, cap_room)
        if take <= 0:
            continue
        added = division.divide(
            take, mode=item.spec.cluster_spread, clusters=item.usable,
            held=item.held, room=dict.fromkeys(item.usable, None), weights={},
        )
        for name, count in added.items():
            item.added[name] += count
        item.waiting += take
        item.reasons.append(f"{take} waiting: no capacity left in any subset")
        left -= take
    return left


def place(
    spec: spread.FederatedSpreadSpec,
    *,
    replicas: int,
    snapshot: cluster.CapacitySnapshot,
    shape: fit.PodShape | None = None,
    current: Counts | None = None,
    running: Counts | None = None,
    unschedulable: Sequence[UnschedulableMark] = (),
    now: datetime.datetime | None = None,
) -> Placement:
    """Replicas per (subset, cluster) for `replicas` in total.

    `shape` is what one pod needs (default: nothing but a pod slot); `current` the replicas placed
    now per subset per cluster, kept where still allowed; `running` how many of those run, used
    for pairs marked unschedulable, whose pending replicas are released; `unschedulable` marks
    expire `unschedulableSeconds` after `since` when `now` is given (without `now` all are active),
    and only the Adaptive strategy reads them.
    """
    if replicas < 0:
        raise ValueError(f"replicas must not be negative, got {replicas}")
    view = view_of(spec, snapshot=snapshot, shape=shape if shape is not None else fit.empty_shape())
    view = braked(view, heard_from_any=any(c.ready for c in snapshot.clusters))
    return place_view(
        spec, replicas=replicas, view=view, current=current, running=running,
        unschedulable=unschedulable, now=now,
    )


def place_view(
    spec: spread.FederatedSpreadSpec,
    *,
    replicas: int,
    view: View,
    current: Counts | None = None,
    running: Counts | None = None,
    unschedulable: Sequence[UnschedulableMark] = (),
    now: datetime.datetime | None = None,
) -> Placement:
    """`place` on a view of the snapshot (`view_of`, or the coordinator's own, built the same way)."""
    if replicas < 0:
        raise ValueError(f"replicas must not be negative, got {replicas}")
    strategy = spec.schedule_strategy
    settings = strategy.adaptive_settings()
    adaptive = strategy.type == "Adaptive"
    simulate = adaptive and not settings.disable_simulation_schedule
    # Marks belong to Adaptive: Fixed places by caps alone, whatever an agent reported.
    marked = (
        _active_marks(unschedulable, now=now, seconds=settings.unschedulable_seconds) if adaptive else set()
    )
    work = _prepare(
        spec, replicas=replicas, view=view, current=current or {}, running=running or {}, marked=marked,
    )
    _keep(work, replicas)
    _explain_cordons(work)
    ledger = _Ledger(view)
    left = _add(work, replicas - sum(i.total for i in work), ledger=ledger, simulate=simulate)
    exhausted = 0
    if simulate and left:
        before = left
        left = _wait(work, left)
        exhausted = before - left
    totals = _zeros(view.names)
    subsets: list[SubsetPlacement] = []
    for item in work:
        held, added = item.held, item.added
        if len(held) == len(item.members):  # every member kept: held lists them all, in order
            per_cluster = dict(held)
            for name, count in filter(_COUNT, added.items()):
                per_cluster[name] += count
        else:
            per_cluster = {name: held.get(name, 0) + added.get(name, 0) for name in item.members}
        for name, count in filter(_COUNT, per_cluster.items()):
            if name in totals:
                totals[name] += count
        if item.cap is not None and item.total >= item.cap:
            item.reasons.insert(0, f"cap {item.cap} reached")
        subsets.append(SubsetPlacement(
            name=item.spec.name, replicas=item.total, clusters=per_cluster, cap=item.cap,
            capacity=item.capacity if simulate else None,
            waiting=item.waiting, reasons=tuple(item.reasons),
        ))
    return Placement(
        replicas=replicas, unplaced=left, capacity_exhausted=exhausted,
        subsets=tuple(subsets), clusters=totals,
    )
