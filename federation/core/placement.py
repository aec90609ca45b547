"""The placement rules of DESIGN §3: replicas per (subset, cluster), pure and deterministic.

Why it is shaped like this: the coordinator, `fedspread simulate`, the SDK's what-if and the
benchmarks all need the same answer from the same inputs, so the whole decision is one function of
(spec, replicas, capacity snapshot, current placement, unschedulable marks, clock). It works in
three passes over the subsets in spec order:

1. **Keep** what is already placed on usable clusters (stability: capacity alone moves nothing),
   trimmed to each subset's cap and, when replicas shrink, trimmed from the last subset first.
2. **Add** the missing replicas in order, each subset taking min(cap room, what is left) — and in
   Adaptive also no more than its simulated capacity, so the rest overflows to the next subset.
3. **Wait**: in Adaptive, what fits nowhere waits (Pending) in the highest-priority subset whose
   cap still has room, counted as capacity-exhausted; what no cap allows is unplaced.

Capacity is a ledger of pod slots per (cluster, node pool) for the template's requests; subsets
that share a pool draw from the same slots, so two subsets never promise the same node twice.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence

from federation.api import cluster, spread
from federation.core import apportion, division, fit, matching

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
        """The JSON shape of DESIGN §7 (`fedspread simulate -o json`)."""
        return {
            "replicas": self.replicas,
            "unplaced": self.unplaced,
            "clusters": dict(self.clusters),
            "subsets": [
                {"name": s.name, "replicas": s.replicas, "clusters": dict(s.clusters)}
                for s in self.subsets
            ],
        }


def selected_clusters(subset: spread.Subset, snapshot: cluster.CapacitySnapshot) -> list[str]:
    """The clusters a subset names, in fill order: as listed, else matching ones by name."""
    if subset.clusters is not None:
        return list(subset.clusters)
    selector = subset.cluster_selector
    if selector is None:
        return []
    return sorted(c.name for c in snapshot.clusters if matching.label_selector_matches(selector, c.labels))


@dataclasses.dataclass
class _Subset:
    """Working state of one subset during a placement."""

    spec: spread.Subset
    cap: int | None
    members: list[str]
    usable: list[str]
    shape: fit.PodShape
    held: dict[str, int]
    added: dict[str, int]
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

    def __init__(self, snapshot: cluster.CapacitySnapshot, shape: fit.PodShape) -> None:
        self._pools = {c.name: c.node_pools for c in snapshot.clusters}
        self._slots = {
            c.name: [pool.count * fit.pods_per_node(pool, shape) for pool in c.node_pools]
            for c in snapshot.clusters
        }
        self._admits: dict[tuple[str, str], list[int]] = {}

    def _admitted(self, subset: _Subset, name: str) -> list[int]:
        key = (subset.spec.name, name)
        if key not in self._admits:
            pools = self._pools.get(name, [])
            self._admits[key] = [i for i, p in enumerate(pools) if fit.pool_admits(p, subset.shape)]
        return self._admits[key]

    def room(self, subset: _Subset, name: str) -> int:
        """How many more pods of the subset fit in the cluster now."""
        slots = self._slots.get(name, [])
        return sum(slots[i] for i in self._admitted(subset, name))

    def take(self, subset: _Subset, name: str, count: int) -> None:
        """Consume slots for `count` new pods, first admitting pool first."""
        slots = self._slots.get(name, [])
        for i in self._admitted(subset, name):
            used = min(slots[i], count)
            slots[i] -= used
            count -= used
            if not count:
                return


def _active_marks(
    marks: Sequence[UnschedulableMark], *, now: datetime.datetime | None, seconds: int
) -> set[tuple[str, str]]:
    window = datetime.timedelta(seconds=seconds)
    return {(m.subset, m.cluster) for m in marks if now is None or now < m.since + window}


def _prepare(
    spec: spread.FederatedSpreadSpec,
    *,
    replicas: int,
    snapshot: cluster.CapacitySnapshot,
    shape: fit.PodShape,
    current: Counts,
    running: Counts,
    marked: set[tuple[str, str]],
) -> list[_Subset]:
    clusters = snapshot.by_name()
    work: list[_Subset] = []
    for subset, cap in zip(spec.subsets, apportion.subset_caps(spec.subsets, replicas), strict=True):
        members = selected_clusters(subset, snapshot)
        item = _Subset(subset, cap, members, [], fit.with_subset(shape, subset), {}, {})
        if not members:
            item.reasons.append("no member cluster matches the subset")
        kept: list[str] = []
        for name in members:
            found = clusters.get(name)
            if found is None:
                item.reasons.append(f"{name}: no such cluster in the snapshot")
                continue
            if not found.ready:
                item.reasons.append(f"{name}: not ready")
                continue
            if found.cordoned:
                item.reasons.append(f"{name}: cordoned")
                continue
            kept.append(name)
            held = current.get(subset.name, {}).get(name, 0)
            if (subset.name, name) in marked:
                item.reasons.append(f"{name}: unschedulable, skipped until the mark expires")
                held = min(held, running.get(subset.name, {}).get(name, held))
            else:
                item.usable.append(name)
            item.held[name] = max(0, held)
        item.added = dict.fromkeys(kept, 0)
        work.append(item)
    return work


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
        free = {name: ledger.room(item, name) for name in item.usable}
        item.capacity = sum(item.held.values()) + sum(free.values())
        if not left or not item.usable:
            continue
        cap_room = item.cap_room()
        want = left if cap_room is None else min(left, cap_room)
        room: dict[str, int | None] = dict(free) if simulate else dict.fromkeys(item.usable, None)
        take = min(want, sum(free.values())) if simulate else want
        if simulate and take < want:
            item.reasons.append(f"capacity: only {sum(free.values())} more pods fit")
        if take <= 0:
            continue
        added = division.divide(
            take, mode=item.spec.cluster_spread, clusters=item.usable,
            held=item.held, room=room, weights=free,
        )
        for name, count in added.items():
            item.added[name] += count
            ledger.take(item, name, count)
        left -= sum(added.values())
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
    expire `unschedulableSeconds` after `since` when `now` is given (without `now` all are active).
    """
    if replicas < 0:
        raise ValueError(f"replicas must not be negative, got {replicas}")
    strategy = spec.schedule_strategy
    settings = strategy.adaptive_settings()
    adaptive = strategy.type == "Adaptive"
    simulate = adaptive and not settings.disable_simulation_schedule
    pod_shape = shape if shape is not None else fit.empty_shape()
    marked = _active_marks(unschedulable, now=now, seconds=settings.unschedulable_seconds)
    work = _prepare(
        spec, replicas=replicas, snapshot=snapshot, shape=pod_shape,
        current=current or {}, running=running or {}, marked=marked,
    )
    _keep(work, replicas)
    ledger = _Ledger(snapshot, pod_shape)
    left = _add(work, replicas - sum(i.total for i in work), ledger=ledger, simulate=simulate)
    exhausted = 0
    if simulate and left:
        before = left
        left = _wait(work, left)
        exhausted = before - left
    totals = {c.name: 0 for c in snapshot.clusters}
    subsets: list[SubsetPlacement] = []
    for item in work:
        per_cluster = {
            name: item.held.get(name, 0) + item.added.get(name, 0) for name in item.members
        }
        for name, count in per_cluster.items():
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
