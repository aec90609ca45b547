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

A spread with `topologySpread` or floors (`subsets[].minReplicas`) replaces the scale-down trim of
pass 1 and pass 2 with `placement_topology` (one replica at a time under the constraints, floors
first and kept); what a DoNotSchedule constraint refuses is unplaced, not waiting.

Capacity is fitted per subset with the pod the subset creates (the template with the subset's
injection and `patch` applied, `pod_shape.with_subset`), and consumed from one ledger per (cluster,
node pool) in whole nodes per kind of pod; subsets that share a pool draw from the same nodes, so
two subsets never promise the same room twice.

The decision reads its snapshot through a `View`: the selected clusters only, each with its
readiness and free pod slots per pool for each kind of this spread's pods. `place` builds the
view from a snapshot; the coordinator builds the same view from what it keeps per cluster (parsed pools,
other spreads' pending pods already charged) and calls `place_view`, so a spread costs the
clusters it can use, not every cluster of the federation.

This module is the entry point and the answer (`place`, `place_view`, `Placement`); the view and
its building live in `placement_view`, the passes in `placement_passes`. `View`, `view_of` and
`holding` are re-exported here because the placement loop hands views to `place_view` under
these names.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from collections.abc import Mapping, Sequence

from federation.api import cluster, placement_json, spread
from federation.core import failback, fit, placement_topology, placement_view
from federation.core import placement_passes as passes
from federation.core.placement_view import View as View
from federation.core.placement_view import holding as holding
from federation.core.placement_view import view_of as view_of
from federation.core.reasons import Reason, ReasonKind


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
    reasons: tuple[Reason, ...]
    """Why it got what it got, as values (`core.reasons`); `reason_texts` as people read them."""
    kept: int = 0
    """Ready pods kept above the rule's share until their replacements are Ready (`handover`);
    included in `replicas` and `clusters`."""
    waiting_clusters: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Of `waiting`, how many per cluster: the next placement places them again while they do not
    run (Adaptive: waiting is state, not a one-round verdict)."""
    kept_clusters: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Of `kept`, how many per cluster (`handover`)."""

    @property
    def reason_texts(self) -> tuple[str, ...]:
        """`reasons` as people read them (the JSON documents, the table, the wire)."""
        return tuple(reason.text for reason in self.reasons)


class _Shown(typing.NamedTuple):
    """A subset as the placement document reads it: the reasons as text."""

    name: str
    replicas: int
    clusters: Mapping[str, int]
    reasons: Sequence[str]


@dataclasses.dataclass(frozen=True)
class Placement:
    """The answer: every subset in spec order, every snapshot cluster's total."""

    replicas: int
    unplaced: int
    capacity_exhausted: int
    subsets: tuple[SubsetPlacement, ...]
    clusters: dict[str, int]
    takes: tuple[passes.Take, ...] = dataclasses.field(default=(), compare=False, repr=False)
    """The room the placement took, in order, when capacity bounded it (Adaptive with simulation):
    `placement_round` replays them on a snapshot with other spreads charged to learn whether the
    answer would be the same there. Not part of the answer: equal placements may differ here."""
    rebalancing: failback.Decision | None = dataclasses.field(default=None, compare=False, repr=False)
    """The failback decision the coordinator applied to this placement (`failback_round`), for it
    to keep the step in flight and show the Rebalancing condition; None where none was asked."""

    @property
    def placed(self) -> int:
        """Replicas assigned to some (subset, cluster)."""
        return sum(s.replicas for s in self.subsets)

    def same_counts(self, other: Placement) -> bool:
        """Both place the same replicas per subset per cluster (`counts` equal, cheaper)."""
        pairs = zip(self.subsets, other.subsets, strict=False)
        return len(self.subsets) == len(other.subsets) and all(
            a.name == b.name and a.clusters == b.clusters for a, b in pairs)

    def counts(self) -> dict[str, dict[str, int]]:
        """Replicas per subset per cluster, zeros included (kept pods too: what agents enforce)."""
        return {s.name: dict(s.clusters) for s in self.subsets}

    def rule_counts(self) -> dict[str, dict[str, int]]:
        """`counts` less the pods the handover kept: the rule's own answer, the next round's
        `current`. Kept pods are an overlay recomputed from the facts each round; were they
        `current`, stability would hold on to them and the next round would answer differently
        with the same inputs (a kept cluster's pods would stay, its replacement's go)."""
        return {s.name: {name: count - s.kept_clusters.get(name, 0) for name, count in s.clusters.items()}
                if s.kept_clusters else dict(s.clusters) for s in self.subsets}

    def to_json(self, *, rebalance: Mapping[str, object] | None = None) -> dict[str, object]:
        """The placement document of `fedspread simulate -o json` (no `"ready"`: nothing runs), with
        the failback `rebalance` entry when one is possible (`failback.simulated`)."""
        return placement_json.document(
            replicas=self.replicas, unplaced=self.unplaced, clusters=self.clusters,
            subsets=[_Shown(s.name, s.replicas, s.clusters, s.reason_texts) for s in self.subsets],
            rebalance=rebalance)


def settled(result: Placement) -> bool:
    """Every replica placed, none waiting for capacity: a capacity change alone cannot change its
    counts (only new replicas follow capacity: placement is stable), only its subsets' `capacity`."""
    return not result.unplaced and not result.capacity_exhausted and not any(
        s.waiting for s in result.subsets)


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


def place(
    spec: spread.FederatedSpreadSpec,
    *,
    replicas: int,
    snapshot: cluster.CapacitySnapshot,
    shape: fit.PodShape | None = None,
    current: passes.Counts | None = None,
    running: passes.Counts | None = None,
    unschedulable: Sequence[UnschedulableMark] = (),
    now: datetime.datetime | None = None,
    waiting: passes.Counts | None = None,
    remainder_phase: int | None = None,
) -> Placement:
    """Replicas per (subset, cluster) for `replicas` in total.

    `shape` is what one pod needs (default: nothing but a pod slot); `current` the replicas placed
    now per subset per cluster, kept where still allowed; `running` how many of those run (given,
    held replicas not running yet take their room first, and marked pairs release their pending
    replicas); `waiting` the last placement's waiting replicas, placed again while they do not run
    (Adaptive); `remainder_phase` how a `Capacity` subset gives the replicas left after its
    proportional floors (`apportion.split_phased`; None: to the largest remainders — the
    coordinator gives each spread its own, drawn from its key, so the spreads of one round do not
    all send their odd replica to the roomiest cluster); `unschedulable` marks
    expire `unschedulableSeconds` after `since` when `now` is given (without `now` all are active),
    and only the Adaptive strategy reads them; timed cluster tolerations end at `now` too.
    """
    if replicas < 0:
        raise ValueError(f"replicas must not be negative, got {replicas}")
    view = view_of(spec, snapshot=snapshot, shape=shape if shape is not None else fit.empty_shape(), now=now)
    view = placement_view.braked(view, heard_from_any=any(c.ready for c in snapshot.clusters))
    return place_view(
        spec, replicas=replicas, view=view, current=current, running=running,
        unschedulable=unschedulable, now=now, waiting=waiting, remainder_phase=remainder_phase,
    )


def place_view(
    spec: spread.FederatedSpreadSpec,
    *,
    replicas: int,
    view: View,
    current: passes.Counts | None = None,
    running: passes.Counts | None = None,
    unschedulable: Sequence[UnschedulableMark] = (),
    now: datetime.datetime | None = None,
    waiting: passes.Counts | None = None,
    remainder_phase: int | None = None,
) -> Placement:
    """`place` on a view of the snapshot (`view_of`, or the coordinator's own, built the same way).

    Adaptive, with `running` given (the coordinator always gives it): the spread's own held
    replicas that do not run yet take their room before new ones are added, and `waiting` (the
    last placement's `waiting_clusters`) that still do not run are placed again."""
    if replicas < 0:
        raise ValueError(f"replicas must not be negative, got {replicas}")
    strategy = spec.schedule_strategy
    settings = strategy.adaptive_settings()
    adaptive = strategy.is_adaptive
    simulate = adaptive and not settings.disable_simulation_schedule
    # Marks belong to Adaptive: Fixed places by caps alone, whatever an agent reported.
    marked = (
        _active_marks(unschedulable, now=now, seconds=settings.unschedulable_seconds) if adaptive else set()
    )
    work = passes.prepare(
        spec, replicas=replicas, view=view, current=current or {}, running=running or {}, marked=marked,
    )
    still_waiting = 0
    if simulate and waiting:
        still_waiting = passes.release_waiting(work, waiting=waiting, running=running or {})
    ruled = placement_topology.applies(spec)
    # With floors or topologySpread only the caps trim here: the scale-down keeps them (below).
    passes.keep(work, max(replicas, sum(i.total for i in work)) if ruled else replicas)
    passes.explain_cordons(work)
    nodes_left = passes.NodesLeft(view, record=simulate)
    if simulate and running is not None:
        passes.take_in_flight(work, nodes_left=nodes_left, running=running)
    refused, floor_waiting = False, 0
    if ruled:
        left, refused, floor_waiting = placement_topology.place(
            spec, work, replicas=replicas, view=view, nodes_left=nodes_left, simulate=simulate)
    else:
        left = passes.add(work, replicas - sum(i.total for i in work), nodes_left=nodes_left,
                          simulate=simulate, phase=remainder_phase)
    exhausted = still_waiting + floor_waiting
    if simulate and left and not refused:
        before = left
        left = passes.wait(work, left)
        exhausted += before - left
    if simulate:
        passes.explain_capacity(work, replicas, nodes_left=nodes_left)
    totals = _zeros(view.names)
    subsets: list[SubsetPlacement] = []
    for item in work:
        held, added = item.held, item.added
        if len(held) == len(item.members):  # every member kept: held lists them all, in order
            per_cluster = dict(held)
            for name, count in filter(passes.COUNT, added.items()):
                per_cluster[name] += count
        else:
            per_cluster = {name: held.get(name, 0) + added.get(name, 0) for name in item.members}
        for name, count in filter(passes.COUNT, per_cluster.items()):
            if name in totals:
                totals[name] += count
        if item.cap is not None and item.total >= item.cap:
            item.reasons.insert(0, Reason(ReasonKind.CAP_REACHED, count=item.cap))
        subsets.append(SubsetPlacement(
            name=item.spec.name, replicas=item.total, clusters=per_cluster, cap=item.cap,
            capacity=item.capacity if simulate else None,
            waiting=item.waiting, reasons=tuple(item.reasons), waiting_clusters=dict(item.waiting_at),
        ))
    return Placement(
        replicas=replicas, unplaced=left, capacity_exhausted=exhausted,
        subsets=tuple(subsets), clusters=totals, takes=tuple(nodes_left.takes or ()),
    )
