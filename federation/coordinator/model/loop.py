"""The placement loop: which spreads to place after an event, in what order, on what capacity.

Why it is separate from the world and the shell: the loop's decisions are the coordinator's
substance — recompute only the spreads an event touches, a round of several against one snapshot
(the room at the round's start less every *other* spread's placed-but-not-running replicas,
overcommit protection, karmada#1385; node pools the answers promised twice placed again in key
order, `placement_round`), and move replicas off clusters whose agents went
silent for `failover.clusterLostSeconds`. Keeping it pure lets unit tests drive it with event
sequences and an injected clock; the Ray shards and gRPC servicers only call it.

Stability comes from `placement.place` itself: the last placement is passed back as `current`, so
a scale only moves the delta. A cluster that returns after failover counts the pods it runs again
(`World.current_for`), so the surplus goes by the spread's scale-down order. Every placement the
coordinator stores then passes the handover rule (`federation.core.handover`): Ready pods the
spread cannot spare yet are kept until their replacements are Ready, and a returned cluster's pods
are kept until it reports them again.

Cost: a request is built from what the World keeps up to date per cluster (other spreads'
pending pods already charged, `World.view_for`): it costs the clusters the spread can use, not
every cluster times every spread.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from federation.api import cluster, spread
from federation.coordinator.model import brakes, expiries, pending_charges, round_snapshot
from federation.coordinator.model import world as world_model
from federation.core import (
    apportion,
    failback_round,
    handover,
    placement,
    placement_inputs,
    placement_round,
    placement_view,
)


@dataclasses.dataclass(frozen=True)
class Round:
    """What one recompute did: new placements, spreads waiting for their target, spreads removed."""

    placements: dict[str, placement.Placement]
    waiting_for_target: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    replaced: int = 0
    """Spreads of a round of several placed again, one after another, because they charged a node
    pool the round's snapshot answers promised twice (`placement_round.Settled.replaced`)."""
    fell_back: str = ""
    """Why the round was answered or checked here, not by the shards (`BatchUnavailable`); "" if not."""


@dataclasses.dataclass(frozen=True)
class Lost:
    """Clusters newly reported lost, and the spreads whose usable clusters changed."""

    clusters: tuple[str, ...]
    keys: frozenset[str]


@dataclasses.dataclass(frozen=True)
class PlaceRequest:
    """One placement to make, for spread `key` ("namespace/name"): the spread, its replicas, its
    capacity and what else it reads (`inputs`).

    Plain picklable data, so the same request is answered in-process or by a Ray shard actor.
    Capacity comes either as a `view` (what the coordinator sends: only the clusters the spread
    can use, other spreads' pending pods already charged, slots for `inputs.shape`'s pods) or as a
    whole `snapshot` (what-ifs), which `placement.place` turns into the same view.
    """

    key: str
    spec: spread.FederatedSpreadSpec
    replicas: int
    view: placement.View | None = None
    snapshot: cluster.CapacitySnapshot | None = None
    inputs: placement_inputs.PlacementInputs = dataclasses.field(
        default_factory=placement_inputs.PlacementInputs)


PlaceBatch = Callable[[Sequence[PlaceRequest]], list[placement.Placement]]


class RoundAnswers(typing.NamedTuple):
    """A round's first answers in request order, and its check where it runs beside them (the Ray
    shards of clusters; None: `placement_round.settle` checks it here). Answers checked beside
    may come without the room they took (`Placement.takes`): if that check fails, the round is
    answered here again before it is checked here."""

    placements: list[placement.Placement]
    checker: placement_round.Checker | None


PlaceRound = Callable[[Iterable[PlaceRequest], placement_round.Pools], RoundAnswers]
"""A round's requests (built as they are taken) against its snapshot: `RoundAnswers`."""


class BatchUnavailable(Exception):
    """A parallel backend could not answer a batch (e.g. its deadline passed): `recompute` answers
    the same requests in this process instead, so the round's result is the same."""


def answer(request: PlaceRequest) -> placement.Placement:
    """The placement a request asks for (`placement.place_view`, or `placement.place` on its
    snapshot); with `inputs.rebalance`, the failback step it leads to; with `inputs.ready`, the
    handover rule's kept pods."""
    inputs = request.inputs
    if request.view is not None:
        result = placement.place_view(request.spec, replicas=request.replicas, view=request.view,
                                      **inputs.place_args())
        if inputs.rebalance is not None:
            result = failback_round.rebalanced(
                request.spec, replicas=request.replicas, result=result, view=request.view,
                ready=inputs.ready or {}, now=inputs.now or datetime.datetime.now(datetime.UTC),
                context=inputs.rebalance, running=inputs.running, marks=inputs.marks,
                waiting=inputs.waiting, remainder_phase=inputs.remainder_phase)
    elif request.snapshot is not None:
        result = placement.place(request.spec, replicas=request.replicas, snapshot=request.snapshot,
                                 shape=inputs.shape, **inputs.place_args())
    else:
        raise ValueError(f"request {request.key!r} has neither a view nor a snapshot")
    if inputs.ready is None:
        return result
    return handover.keep_ready(result, replicas=request.replicas, ready=inputs.ready,
                               unverified=inputs.unverified)


def answer_all(requests: Sequence[PlaceRequest]) -> list[placement.Placement]:
    """Every request answered in this process, in order."""
    return [answer(r) for r in requests]


def request_for(
    world: world_model.World, entry: world_model.SpreadEntry, *, replicas: int, now: datetime.datetime,
    kept: frozenset[str] | None = None, in_round: bool = False,
) -> PlaceRequest:
    """Spread `entry`'s inputs on the world as it is, every other spread's pending pods deducted.

    Reads only (queries are pure): `kept` are the lost clusters that keep their replicas, as the
    round committed them (`brake_for`); None (Explain, what-ifs) decides them without committing.
    `in_round`: placed in a round of several against one snapshot, where a `Capacity` subset gives
    the replicas left after its floors by the spread's own phase (`apportion.phase_of`): placed one
    after another, each spread sees the others' pods and the odd replicas spread by themselves;
    against one snapshot, with the largest remainders, every spread would send its odd replica to
    the same roomiest cluster (herding) and most would be placed again.
    """
    key = entry.key
    view = world.view_for(key)
    if kept is None:
        kept = brake_decision(world, entry, now=now).kept
    if kept:
        view = placement.holding(view, kept)
    departing = world.departing(key)
    usable = world.ready_selected(key) | departing
    current = world.rebalancing.without_surge(key, world.current_for(key))
    plan = world.plan_for(key)
    inputs = placement_inputs.PlacementInputs(
        shape=plan.shape, profiles=plan.profiles, current=current, running=world.pods.running_for(key),
        marks=tuple(world.marks_for(key)), now=now, ready=world.pods.ready_for(key, usable=usable),
        unverified=world.pods.unverified_for(key, usable=usable, departing=departing),
        waiting=world.waiting_for(key),
        rebalance=world.rebalancing.context(key, entry.spec),
        remainder_phase=apportion.phase_of(key) if in_round else None)
    return PlaceRequest(key=key, spec=entry.spec, replicas=replicas, view=view, inputs=inputs)


@dataclasses.dataclass(frozen=True)
class BrakeDecision:
    """Spread `brake.key`'s failover brake and the rate limit's answer for its lost clusters,
    decided on the world as it is and not yet committed."""

    brake: brakes.BrakeDecision
    admission: brakes.Admission

    @property
    def kept(self) -> frozenset[str]:
        """The lost clusters that keep their replicas (and take no new ones): the brake holds, or
        their failover waits for the rate limit."""
        return self.brake.kept | self.admission.waiting


def brake_decision(
    world: world_model.World, entry: world_model.SpreadEntry, *, now: datetime.datetime
) -> BrakeDecision:
    """What spread `entry`'s failover brake and the federation's failover rate limit would decide
    now; changes nothing (`commit_brake` keeps it)."""
    selectable = world.selected(entry.key, known=True)
    lost = selectable - world.ready_selected(entry.key)
    falling_silent = world.silent_among(selectable - lost, after=entry.lost_after / 2)
    decided = world.brakes.decide(
        entry.key, selectable=selectable, lost=lost, heard_from_any=world.heard_from_any(entry.lost_after),
        now=now, grace=entry.lost_after, falling_silent=falling_silent,
    )
    return BrakeDecision(brake=decided, admission=world.failover_limit.decide(lost - decided.kept, now=now))


def commit_brake(world: world_model.World, decision: BrakeDecision) -> frozenset[str]:
    """Keep `decision` in the world's brakes and rate limit; the lost clusters that keep their replicas."""
    world.brakes.commit(decision.brake)
    world.failover_limit.commit(decision.admission)
    world.brakes.hold(decision.brake.key, waiting=bool(decision.admission.waiting))
    return decision.kept


def brake_for(
    world: world_model.World, entry: world_model.SpreadEntry, *, now: datetime.datetime
) -> frozenset[str]:
    """Decide and commit spread `entry`'s failover brake and the federation's failover rate limit
    (the placement round only, once per spread placed): the lost clusters that keep their
    replicas (and take no new ones), because the brake holds or their failover waits for it."""
    return commit_brake(world, brake_decision(world, entry, now=now))


def place_one(
    world: world_model.World, entry: world_model.SpreadEntry, *, replicas: int, now: datetime.datetime
) -> placement.Placement:
    """Spread `entry`'s placement for `replicas` on the world as it is (nothing stored, nothing
    committed: Explain asks this)."""
    return answer(request_for(world, entry, replicas=replicas, now=now))


def _store(world: world_model.World, key: str, *, result: placement.Placement,
           held: frozenset[str], now: datetime.datetime, charge: bool = True) -> None:
    """Keep `result` as spread `key`'s placement (placed with the lost clusters `held` keeping
    their replicas); without `charge`, its pending pods wait for `World.settle_charges`."""
    world.store(key, result, charge=charge)
    world.settled_placement(key, held=held)
    entry = world.spread(key)
    if entry is not None:
        world.rebalancing.commit(key, result.rebalancing, now=now, spec=entry.spec)


def recompute(
    world: world_model.World, keys: Iterable[str], *, now: datetime.datetime,
    place_batch: PlaceBatch | None = None, place_round: PlaceRound | None = None,
    parallel_from: int = 2,
) -> Round:
    """Place the spreads `keys` and store the results in the world.

    A round of one spread is placed here, on the world as it is (every other spread's pending pods
    deducted): one spread gains nothing from a shard but a round trip. A round of several is placed
    against one snapshot (`placement_round`): its own pending pods lifted out of the ledgers, every
    request built on what remains and answered at once — by `place_round` (the Ray shards, which
    check the round too) or `place_batch` when given and the round has at least `parallel_from`
    spreads (the backend's measured crossover, `shards.RAY_ROUND_MIN_SPREADS`), else here, the same
    answers — then `placement_round.settle` finds the pools the answers promised twice and places
    the spreads that charged them again, in key order, here (`replaced`). When the shards raise
    `BatchUnavailable` (a deadline missed, an actor dead), the same requests are answered, or the
    same answers checked, here (`fell_back`): same round.

    The failover brake and rate limit are decided and committed here, once per spread placed, in
    key order (`brake_for`), before any request is built; a spread placed again keeps that
    decision. Building a request commits nothing (queries are pure: Explain builds them too).

    A key whose spread is gone has its placement dropped (`removed`); a spread whose hub
    Deployment has not been seen yet is not placed (`waiting_for_target`).
    """
    waiting: list[str] = []
    removed: list[str] = []
    entries: list[world_model.SpreadEntry] = []
    for key in sorted(set(keys)):
        entry = world.spread(key)
        if entry is None:
            if world.drop(key):
                removed.append(key)
        elif entry.replicas is None:
            waiting.append(key)
        else:
            entries.append(entry)
    if len(entries) < 2:
        placed: dict[str, placement.Placement] = {}
        for entry in entries:
            kept = brake_for(world, entry, now=now)
            result = answer(request_for(world, entry, replicas=entry.replicas or 0, now=now, kept=kept))
            _store(world, entry.key, result=result, held=kept, now=now)
            placed[entry.key] = result
        return Round(placements=placed, waiting_for_target=tuple(waiting), removed=tuple(removed))
    held = {e.key: brake_for(world, e, now=now) for e in entries}  # in key order, each committed once
    try:
        parallel = len(entries) >= parallel_from
        settled, fell_back = _against_one_snapshot(
            world, entries, held=held, now=now, place_batch=place_batch if parallel else None,
            place_round=place_round if parallel else None)
        for entry in entries:  # their pending pods charged at once, after the last (`Ledger.set_many`)
            _store(world, entry.key, result=settled.placed[entry.key].result, held=held[entry.key],
                   now=now, charge=False)
        world.settle_charges()
    except BaseException:  # the spreads not stored yet keep their last placements, charged again
        world.restore_charges()
        raise
    return Round(placements={e.key: settled.placed[e.key].result for e in entries},
                 waiting_for_target=tuple(waiting), removed=tuple(removed),
                 replaced=len(settled.replaced), fell_back=fell_back)


def _against_one_snapshot(
    world: world_model.World, entries: Sequence[world_model.SpreadEntry], *,
    held: Mapping[str, frozenset[str]], now: datetime.datetime, place_batch: PlaceBatch | None,
    place_round: PlaceRound | None,
) -> tuple[placement_round.Settled, str]:
    """The round of `entries` (several, in key order) settled against one snapshot, nothing stored
    yet; and why it was answered or checked here, not by the shards ("" if it was not). Its
    pending pods are out of the ledgers from here until each spread is stored."""
    pools = world.lift_charges([e.key for e in entries])
    sent: list[PlaceRequest] = []
    plans: dict[str, pending_charges.Plan] = {}

    def building() -> Iterator[PlaceRequest]:  # `place_round` sends the first while the rest are built
        for e in entries:
            plans[e.key] = world.plan_for(e.key)
            sent.append(request_for(world, e, replicas=e.replicas or 0, now=now, kept=held[e.key],
                                    in_round=True))
            yield sent[-1]

    fell_back, requested = "", building()
    checker: placement_round.Checker | None = None
    try:
        if place_round is not None:
            answers, checker = place_round(requested, pools)
        else:
            answers = (place_batch or answer_all)(list(requested))
    except BatchUnavailable as error:
        collections.deque(requested, maxlen=0)  # built all, whatever the shards had taken
        answers, fell_back = answer_all(sent), str(error) or type(error).__name__
    requests = {r.key: r for r in sent}

    def placed(found: Sequence[placement.Placement], *,
               deferred: bool = False) -> dict[str, placement_round.Placed]:
        return {r.key: round_snapshot.placed(a, running=r.inputs.running, plan=plans[r.key],
                                             deferred=deferred)
                for r, a in zip(sent, found, strict=True)}

    first = placed(answers, deferred=checker is not None)  # checked on the shards: kept ones' charges unread
    rooms = round_snapshot.Rooms(pools)

    def again(key: str, room: placement_view.Room) -> placement_round.Placed:
        request = requests[key]
        if request.view is None:
            raise ValueError(f"request {key!r} has no view")
        view = rooms.view_in(request.view, room, plan=plans[key])
        result = answer(dataclasses.replace(request, view=view))
        return round_snapshot.placed(result, running=request.inputs.running, plan=plans[key])

    if checker is not None:
        try:  # the shards' check fails before anything is placed again: checked here instead
            return placement_round.settle(pools, first, place=again, checker=checker), fell_back
        except BatchUnavailable as error:
            fell_back = f"the round's check: {str(error) or type(error).__name__}"
            first = placed(answer_all(sent))  # the shards' answers lack the room they took
    return placement_round.settle(pools, first, place=again), fell_back


def failover(world: world_model.World) -> Lost:
    """The failover tick (clock: the world's): clusters newly lost, and the spreads to recompute.

    `clusters` uses the smallest clusterLostSeconds among spreads (for the MemberCluster Ready
    condition, reported once per loss). `keys` are the placed spreads whose set of ready selected
    clusters differs from the one they were placed with — each judged by its own
    clusterLostSeconds, so a spread with a longer limit moves later, not never — the spreads whose
    clusters leaving their selection, kept for their Ready pods, went silent — and the spreads
    whose failover brake lifted one clusterLostSeconds ago (failover resumes for the clusters still
    silent) or that wait for the federation's failover rate limit when it has budget again.
    """
    lost = world.tracker.newly_lost(after=datetime.timedelta(seconds=world.min_lost_seconds()))
    keys = frozenset(
        key for key, seen in world.placed_ready.items()
        if world.spread(key) is not None and world.ready_selected(key) != seen
    ) | frozenset(world.departing_lost())
    now = world.clock()
    due = world.brakes.due(now) | (world.brakes.held() if world.failover_limit.has_budget(now) else set())
    keys |= frozenset(key for key in due if world.spread(key) is not None)
    return Lost(clusters=tuple(lost), keys=keys)


def due(world: world_model.World, *, since: datetime.datetime, now: datetime.datetime) -> set[str]:
    """The timer's spreads to place again for what ended in (since, now]: unschedulable marks
    and timed cluster tolerations (`expiries`); and deleted spreads
    whose held `Delete` removal is due (`lifecycle.Lifecycle.hold`: the publish sends it); spreads whose
    failback may go on (a cooldown ended, a step's Ready deadline passed: `rebalancing.Rebalancings.due`)."""
    return (expiries.marks_expired(world, since=since, now=now)
            | expiries.tolerations_expired(world, since=since, now=now)
            | world.lifecycle.held_due(now) | world.rebalancing.due(since=since, now=now))
