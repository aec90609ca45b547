"""Failback inside a placement round: the from-scratch comparison and the step applied to a placement.

Why a module between the rule (`failback`) and the coordinator: `failback.next_step` compares the
placement a spread holds with the one it would get *from scratch* and says what to run; the
coordinator must build that second placement from its live view and turn the answer back into a
`placement.Placement` before the handover rule (`handover.keep_ready`) sees it. Both are pure, so
the Ray shards answer them exactly as the coordinator's own process does.

**From scratch, on a live view.** A live view's free room is what the nodes have left with the
spread's own pods on them (the agents report what is requested), so placing with `current={}`
there would not count the room the spread's own preferred pods already stand on, and would say
the preferred subset is *smaller* than it is. `lifted` gives the placement rule instead the current
placement less the pods of its lowest-priority occupied pairs (the last occupied subset; within a
`Fill` subset only its last occupied cluster, since a Fill subset's order is its priority): those
pods are placed again from the free room, in priority order, as they would be from scratch, while
every pod above them keeps the room it stands on. Each step lifts the bottom again, so the steps
end where a from-scratch placement would (`simulate --current` computes the literal one on a
snapshot, where the room is the nodes' whole room).

**The step on a placement.** The surge pods run *above* the total: the placement's subsets and
cluster totals carry them (what the agents are told), `Placement.replicas` stays the spread's own.
The coordinator keeps the step (`model.rebalancing`) and gives the rule its `current` without the
surge, so the stable rule answers the pre-step placement each round and the step is applied to it
again until it finishes (its removals leave the placement) or stops (its adds do).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping

from federation.api import spread
from federation.core import failback, placement

Counts = Mapping[str, Mapping[str, int]]


@dataclasses.dataclass(frozen=True)
class Context:
    """What the coordinator keeps of a spread's failback between rounds (picklable: a Ray shard
    answers with it)."""

    in_flight: failback.Step | None = None
    last_move: datetime.datetime | None = None
    on_demand: bool = False
    """`fedspread rebalance` asked for a whole failback: the policy and the cooldown are ignored."""
    max_surge: int | None = None
    """The surge in pods `fedspread rebalance --max-surge` asked for (None: `spec.rebalance`'s)."""


def lifted(spec: spread.FederatedSpreadSpec, current: Counts) -> dict[str, dict[str, int]] | None:
    """`current` less the pods of its lowest-priority occupied pairs (see the module docstring);
    None when every pod is in one rank (nothing can move up)."""
    occupied = [(index, subset) for index, subset in enumerate(spec.subsets)
                if any(count > 0 for count in (current.get(subset.name) or {}).values())]
    if not occupied:
        return None
    _, subset = occupied[-1]
    row = {name: count for name, count in (current.get(subset.name) or {}).items() if count > 0}
    if subset.cluster_spread == "Fill":
        last = list(row)[-1]
        if len(occupied) == 1 and len(row) == 1:
            return None
        drop = {last}
    else:
        if len(occupied) == 1:
            return None
        drop = set(row)
    result = {name: dict(counts) for name, counts in current.items()}
    result[subset.name] = {name: count for name, count in result[subset.name].items() if name not in drop}
    return result


def without_surge(current: Counts, step: failback.Step | None) -> dict[str, dict[str, int]]:
    """`current` (a stored placement's rule counts) less an in-flight step's surge pods."""
    result = {name: dict(counts) for name, counts in current.items()}
    if step is None:
        return result
    for add in step.adds:
        row = result.get(add.subset)
        if row is not None and add.cluster in row:
            row[add.cluster] = max(0, row[add.cluster] - add.replicas)
    return result


def decide(
    spec: spread.FederatedSpreadSpec, *, replicas: int, result: placement.Placement,
    fresh: placement.Placement | None, ready: Counts, now: datetime.datetime, context: Context,
) -> failback.Decision:
    """The failback decision on a round's placement `result` (the rule's answer from the stored
    placement, surge left out) and `fresh` (the from-scratch one; None: nothing can move up)."""
    held = result.counts()
    current = held
    if context.in_flight is not None:
        current = {name: dict(counts) for name, counts in held.items()}
        for add in context.in_flight.adds:
            row = current.setdefault(add.subset, {})
            row[add.cluster] = row.get(add.cluster, 0) + add.replicas
    return failback.next_step(
        spec, replicas=replicas, current=current, from_scratch=_fitting(fresh) if fresh is not None else held,
        ready=ready, now=now, last_move=context.last_move, in_flight=context.in_flight,
        max_surge=context.max_surge, on_demand=context.on_demand)


def applied(result: placement.Placement, decision: failback.Decision) -> placement.Placement:
    """`result` running what `decision` says (its counts per pair, surge pods included), with the
    decision attached (`Placement.rebalancing`) for the coordinator to keep."""
    counts = decision.placement
    if counts == result.counts():
        return dataclasses.replace(result, rebalancing=decision)
    subsets = []
    for subset in result.subsets:
        wanted = counts.get(subset.name, subset.clusters)
        clusters = {name: wanted.get(name, 0) for name in subset.clusters}
        clusters.update({name: count for name, count in wanted.items() if name not in clusters})
        subsets.append(dataclasses.replace(subset, clusters=clusters, replicas=sum(clusters.values())))
    totals = dict(result.clusters)
    for before, after in zip(result.subsets, subsets, strict=True):
        for name in set(before.clusters) | set(after.clusters):
            totals[name] = totals.get(name, 0) + after.clusters.get(name, 0) - before.clusters.get(name, 0)
    return dataclasses.replace(result, subsets=tuple(subsets), clusters=totals, rebalancing=decision)


def rebalanced(
    spec: spread.FederatedSpreadSpec, *, replicas: int, result: placement.Placement, view: placement.View,
    ready: Counts, now: datetime.datetime, context: Context, running: Counts | None = None,
    marks: tuple[placement.UnschedulableMark, ...] = (), waiting: Counts | None = None,
    remainder_phase: int | None = None,
) -> placement.Placement:
    """`result` (the rule's answer on `view`) with the failback step `context` leads to applied
    (the from-scratch placement divides with the same `remainder_phase` as `result`)."""
    fresh = None
    if context.in_flight is None:
        base = lifted(spec, result.counts())
        if base is not None:
            fresh = placement.place_view(spec, replicas=replicas, view=view, current=base, running=running,
                                         unschedulable=marks, now=now, waiting=waiting,
                                         remainder_phase=remainder_phase)
    decision = decide(spec, replicas=replicas, result=result, fresh=fresh, ready=ready, now=now,
                      context=context)
    return applied(result, decision)


@dataclasses.dataclass(frozen=True)
class Plan:
    """A spread's whole failback: its policy and every step, each surge first (empty: nothing moves)."""

    key: str
    policy: str
    steps: tuple[tuple[failback.Move, ...], ...]


MAX_PLAN_ROUNDS = 64
"""`whole` lifts the bottom again at most this often (each lift moves replicas strictly up, so a
plan ends long before; the bound only caps the work of a pathological spread)."""


def whole(
    spec: spread.FederatedSpreadSpec, *, replicas: int, view: placement.View, current: Counts,
    now: datetime.datetime, running: Counts | None = None,
    marks: tuple[placement.UnschedulableMark, ...] = (), waiting: Counts | None = None,
    max_surge: int | None = None, remainder_phase: int | None = None,
) -> list[tuple[failback.Move, ...]]:
    """Every step of a whole failback from `current` on a live view (`fedspread rebalance`), as
    if each step finished: the from-scratch placement of each lift (`lifted`) chained, the moved
    pods taking their new room (they are held there and do not run yet)."""
    counts = {name: dict(row) for name, row in current.items()}
    steps: list[tuple[failback.Move, ...]] = []
    for _ in range(MAX_PLAN_ROUNDS):
        base = lifted(spec, counts)
        if base is None:
            break
        fresh = placement.place_view(spec, replicas=replicas, view=view, current=base, running=running,
                                     unschedulable=marks, now=now, waiting=waiting,
                                     remainder_phase=remainder_phase)
        found = failback.whole_plan(spec, replicas=replicas, current=counts, from_scratch=_fitting(fresh),
                                    max_surge=max_surge)
        if not found:
            break
        steps.extend(found)
        counts = failback.after(counts, found)
    return steps


def _fitting(fresh: placement.Placement) -> dict[str, dict[str, int]]:
    """A from-scratch placement's counts less its waiting replicas: what fits nowhere from scratch
    either is no reason to move."""
    return {s.name: {name: count - s.waiting_clusters.get(name, 0) for name, count in s.clusters.items()}
            for s in fresh.subsets}
