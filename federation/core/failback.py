"""Failback: the next surge-first step that moves replicas back to preferred subsets.

Why a rule of its own: the placement is stable by design — what overflowed to a later subset stays
there when the preferred one has room again (`placement`, pass 1). With `spec.rebalance.policy:
WhenRoom` the spread compares what it holds with the placement it would get *from scratch* (the
same inputs with `current={}`) and moves replicas back, but never the way a full reschedule does
(all at once, Ready pods gone before their replacements run). A move is a Deployment's rolling
update across subsets with `maxUnavailable: 0`:

1. **Start**: up to `maxSurge` replicas are added *above* the spread's total to the pairs
   (subset, cluster) the from-scratch placement fills more than now, highest priority first, and
   as many are chosen for removal from the pairs it fills less, in the scale-down order (last
   subset first, within a subset its last cluster first). A replica only moves up: its new pair
   must come before its old one (an earlier subset, or an earlier cluster of a `Fill` subset,
   whose cluster order is its priority; the clusters of a `Balance` or `Capacity` subset are
   equals, so a different split inside such a subset alone is no reason to move).
2. **Finish**, once the added pods are Ready and removing the chosen ones cannot take Ready below
   `replicas` even if every removed pod was Ready: the removals are applied.
3. **Stop**, when the added pods are not Ready `rescheduleCriticalSeconds` after the start (their
   room was not real): the added replicas are dropped again, nothing is removed.

No step starts sooner than `cooldownSeconds` after the last finished or stopped one, while fewer
than `replicas` pods are Ready (replicas waiting for room count as not Ready), or where a cap would
be exceeded with the added pods counted. Each `Decision` says which of these holds, so the spread's
`Rebalancing` condition can show it. `whole_plan` chains the steps assuming each finishes, for
`fedspread rebalance --dry-run`; `document` sums them into the simulate JSON's `rebalance` entry.

What a step moves, and in which order, is `failback_pairing`'s. Pure: counts in, counts out; the
caller keeps the step in flight and the last move's time.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from federation.api import spread
from federation.core import apportion, failback_pairing
from federation.core.failback_pairing import Counts as Counts
from federation.core.failback_pairing import Move as Move

CONDITION = "Rebalancing"
"""The spread status condition that says what a failback does or waits for (its reason: a `Reason`)."""

Action = Literal["start", "finish", "stop", "none"]
Reason = Literal["Started", "Finished", "NotReadyInTime", "PolicyNever", "NothingToMove", "Cooldown",
                 "NotReady", "CapReached", "WaitingForReady"]


@dataclasses.dataclass(frozen=True)
class Shift:
    """Replicas added to, or removed from, one (subset, cluster) pair."""

    subset: str
    cluster: str
    replicas: int


@dataclasses.dataclass(frozen=True)
class Step:
    """One surge-first move: `adds` run above the total until Ready, then `removes` go."""

    moves: tuple[Move, ...]
    started: datetime.datetime
    ready_before: tuple[Shift, ...]
    """Ready pods of each added-to pair at the start: the added ones are Ready once a pair has
    its `ready_before` plus its added replicas."""

    @property
    def adds(self) -> tuple[Shift, ...]:
        """Replicas added per pair (summed over moves), in priority order."""
        return _summed((m.to_subset, m.to_cluster, m.replicas) for m in self.moves)

    @property
    def removes(self) -> tuple[Shift, ...]:
        """Replicas removed per pair once the added ones are Ready, in scale-down order."""
        return _summed((m.from_subset, m.from_cluster, m.replicas) for m in self.moves)

    @property
    def surge(self) -> int:
        """How many replicas the step runs above the total."""
        return sum(m.replicas for m in self.moves)


@dataclasses.dataclass(frozen=True)
class Decision:
    """What to do now: the placement to run, and why (the `Rebalancing` condition's content)."""

    action: Action
    reason: Reason
    message: str
    placement: dict[str, dict[str, int]]
    step: Step | None = None
    """The step started, still in flight (action none), finished or stopped."""
    retry_at: datetime.datetime | None = None
    """When the answer may change by time alone (the cooldown's or the Ready deadline's end)."""

    @property
    def completed(self) -> bool:
        """A step ended (finished or stopped): the caller records `now` as the last move."""
        return self.action in ("finish", "stop")


def next_step(
    spec: spread.FederatedSpreadSpec,
    *,
    replicas: int,
    current: Counts,
    from_scratch: Counts,
    ready: Counts,
    now: datetime.datetime,
    last_move: datetime.datetime | None = None,
    in_flight: Step | None = None,
    caps: Mapping[str, int | None] | None = None,
    max_surge: int | None = None,
    on_demand: bool = False,
) -> Decision:
    """The next failback decision for a spread.

    `current` is what runs now (with an in-flight step's added replicas), `from_scratch` the
    placement of the same inputs without a current placement, `ready` the Ready pods per pair;
    `caps` each subset's cap for `replicas` (default: from the spec), `max_surge` the surge in
    pods (default: `spec.rebalance` resolved against `replicas`). `on_demand` (`fedspread
    rebalance`) ignores the policy and the cooldown, never the other guards."""
    settings = spec.rebalance
    surge = max_surge if max_surge is not None else settings.surge(replicas)
    if surge < 1:
        raise ValueError(f"max_surge must be at least 1, got {surge}")
    caps = caps if caps is not None else dict(
        zip((s.name for s in spec.subsets), apportion.subset_caps(spec.subsets, replicas), strict=True))
    placed = _copy(current)
    if in_flight is not None:
        return _judge(spec, in_flight, replicas=replicas, placed=placed, ready=ready, now=now)
    if settings.policy == "Never" and not on_demand:
        return Decision("none", "PolicyNever", "spec.rebalance.policy is Never", placed)
    moves, capped = failback_pairing.upward_moves(spec, current=placed, target=from_scratch, caps=caps,
                                                  surge=surge)
    if not moves:
        if capped:
            return Decision("none", "CapReached", f"subset {capped} is at its cap", placed)
        return Decision("none", "NothingToMove", "the placement matches the one from scratch", placed)
    if last_move is not None and not on_demand:
        until = last_move + datetime.timedelta(seconds=settings.cooldown_seconds)
        if now < until:
            return Decision("none", "Cooldown", f"no move before {until.isoformat()} (cooldownSeconds "
                            f"{settings.cooldown_seconds})", placed, retry_at=until)
    ready_total = _total(ready)
    if ready_total < replicas:
        return Decision("none", "NotReady", f"{ready_total} of {replicas} replicas Ready: "
                        "no move starts before all are", placed)
    step = Step(moves=tuple(moves), started=now, ready_before=tuple(
        Shift(a.subset, a.cluster, ready.get(a.subset, {}).get(a.cluster, 0))
        for a in _summed((m.to_subset, m.to_cluster, m.replicas) for m in moves)))
    for add in step.adds:
        _bump(placed, add.subset, add.cluster, add.replicas)
    return Decision("start", "Started", f"starting {step.surge} above the total: {_listing(step.adds)}; "
                    f"then removing {_listing(step.removes)}", placed, step=step,
                    retry_at=now + _critical(spec))


def whole_plan(
    spec: spread.FederatedSpreadSpec,
    *,
    replicas: int,
    current: Counts,
    from_scratch: Counts,
    caps: Mapping[str, int | None] | None = None,
    max_surge: int | None = None,
) -> list[tuple[Move, ...]]:
    """Every step of a whole failback, assuming each one's pods become Ready (no cooldown between
    them): what `fedspread rebalance --dry-run` prints. Empty when nothing moves."""
    surge = max_surge if max_surge is not None else spec.rebalance.surge(replicas)
    if caps is None:
        caps = dict(zip((s.name for s in spec.subsets), apportion.subset_caps(spec.subsets, replicas),
                        strict=True))
    placed = _copy(current)
    steps: list[tuple[Move, ...]] = []
    while True:
        moves, _ = failback_pairing.upward_moves(spec, current=placed, target=from_scratch, caps=caps,
                                                 surge=surge)
        if not moves:
            return steps
        steps.append(tuple(moves))
        for move in moves:
            _bump(placed, move.to_subset, move.to_cluster, move.replicas)
            _bump(placed, move.from_subset, move.from_cluster, -move.replicas)



def after(current: Counts, steps: Sequence[Sequence[Move]]) -> dict[str, dict[str, int]]:
    """The counts `steps` lead to from `current` (every step finished)."""
    placed = _copy(current)
    for step in steps:
        for move in step:
            _bump(placed, move.to_subset, move.to_cluster, move.replicas)
            _bump(placed, move.from_subset, move.from_cluster, -move.replicas)
    return placed


def simulated(spec: spread.FederatedSpreadSpec, *, replicas: int, current: Counts, from_scratch: Counts,
              ) -> tuple[dict[str, object] | None, dict[str, dict[str, int]]]:
    """What `simulate --current` shows of a failback: the `rebalance` entry (None when nothing would
    move) and the counts to show — the current placement under `Never` (nothing moves by itself),
    the one the moves lead to under `WhenRoom`."""
    steps = whole_plan(spec, replicas=replicas, current=current, from_scratch=from_scratch)
    entry = document(spec.rebalance.policy, steps)
    moving = entry is not None and spec.rebalance.policy == "WhenRoom"
    shown = after(current, steps) if moving else _copy(current)
    return entry, shown


def document(policy: str, steps: Sequence[Sequence[Move]]) -> dict[str, object] | None:
    """The `rebalance` entry of the simulate/explain JSON: `{"policy": ..., "moves": [{"from":
    CLUSTER, "to": CLUSTER, "replicas": N}, ...]}`, the steps' moves summed per (from, to) in
    the order they first move; None when nothing moves (the entry is then left out)."""
    summed: dict[tuple[str, str], int] = {}
    for step in steps:
        for move in step:
            key = (move.from_cluster, move.to_cluster)
            summed[key] = summed.get(key, 0) + move.replicas
    if not summed:
        return None
    return {"policy": policy, "moves": [{"from": source, "to": to, "replicas": count}
                                        for (source, to), count in summed.items()]}

def _judge(spec: spread.FederatedSpreadSpec, step: Step, *, replicas: int, placed: dict[str, dict[str, int]],
           ready: Counts, now: datetime.datetime) -> Decision:
    """An in-flight step: finish it, stop it, or wait."""
    late = [f"{b.subset}/{b.cluster}" for b, add in zip(step.ready_before, step.adds, strict=True)
            if ready.get(b.subset, {}).get(b.cluster, 0) < b.replicas + add.replicas]
    deadline = step.started + _critical(spec)
    if late and now >= deadline:
        for add in step.adds:
            held = failback_pairing.count_at(placed, (add.subset, add.cluster))
            _bump(placed, add.subset, add.cluster, -min(add.replicas, held))
        seconds = int(_critical(spec).total_seconds())
        return Decision("stop", "NotReadyInTime", f"the new pods in {', '.join(late)} were not Ready within "
                        f"rescheduleCriticalSeconds ({seconds}s): their room was not real", placed, step=step)
    if late:
        return Decision("none", "WaitingForReady", f"waiting for the new pods in {', '.join(late)} to be "
                        "Ready", placed, step=step, retry_at=deadline)
    removed = sum(min(r.replicas, failback_pairing.count_at(placed, (r.subset, r.cluster)))
                  for r in step.removes)
    ready_total = _total(ready)
    if ready_total - removed < replicas:
        return Decision("none", "NotReady", f"{ready_total} Ready: removing {removed} could take Ready "
                        f"below {replicas}", placed, step=step)
    for gone in step.removes:
        held = failback_pairing.count_at(placed, (gone.subset, gone.cluster))
        _bump(placed, gone.subset, gone.cluster, -min(gone.replicas, held))
    return Decision("finish", "Finished", f"the new pods are Ready: removing {_listing(step.removes)}",
                    placed, step=step)


def _copy(counts: Counts) -> dict[str, dict[str, int]]:
    return {subset: dict(clusters) for subset, clusters in counts.items()}


def _bump(counts: dict[str, dict[str, int]], subset: str, cluster: str, by: int) -> None:
    row = counts.setdefault(subset, {})
    row[cluster] = row.get(cluster, 0) + by


def _total(counts: Counts) -> int:
    return sum(sum(row.values()) for row in counts.values())


def _summed(items: Iterable[tuple[str, str, int]]) -> tuple[Shift, ...]:
    """Replicas per pair, pairs in first-seen order."""
    sums: dict[tuple[str, str], int] = {}
    for subset, cluster, count in items:
        sums[(subset, cluster)] = sums.get((subset, cluster), 0) + count
    return tuple(Shift(subset, cluster, count) for (subset, cluster), count in sums.items())


def _listing(shifts: Sequence[Shift]) -> str:
    return ", ".join(f"{s.replicas} in {s.subset}/{s.cluster}" for s in shifts)


def _critical(spec: spread.FederatedSpreadSpec) -> datetime.timedelta:
    """How long the added pods have to become Ready: the spread's rescheduleCriticalSeconds
    (its default under Fixed too: a surge pod that cannot run is no more real there)."""
    return datetime.timedelta(seconds=spec.schedule_strategy.adaptive_settings().reschedule_critical_seconds)
