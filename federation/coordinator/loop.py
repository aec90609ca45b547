"""The placement loop: which spreads to place after an event, in what order, on what capacity.

Why it is separate from the world and the shell: DESIGN §3 and §5 make the loop's decisions the
coordinator's substance — recompute only the spreads an event touches, in a deterministic order
(by key), each on a snapshot from which every *other* spread's placed-but-not-running replicas are
deducted (overcommit protection, karmada#1385), and move replicas off clusters whose agents went
silent for `failover.clusterLostSeconds`. Keeping it pure lets unit tests drive it with event
sequences and an injected clock; the Ray shards and gRPC servicers only call it.

Stability comes from `placement.place` itself: the last placement is passed back as `current`, so
a scale only moves the delta, and a cluster that returns after failover gets nothing back until
new replicas are needed.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence

from federation.api import cluster, spread
from federation.coordinator import world as world_model
from federation.core import fit, overcommit, placement


@dataclasses.dataclass(frozen=True)
class Round:
    """What one recompute did: new placements, spreads waiting for their target, spreads removed."""

    placements: dict[str, placement.Placement]
    waiting_for_target: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    replaced: int = 0
    """Answers of the parallel batch placed again because an earlier spread changed their inputs."""


@dataclasses.dataclass(frozen=True)
class Lost:
    """Clusters newly reported lost, and the spreads whose usable clusters changed."""

    clusters: tuple[str, ...]
    keys: frozenset[str]


def shape_of(entry: world_model.SpreadEntry) -> fit.PodShape:
    """What one pod of the spread's hub Deployment requests (empty before the template is known)."""
    return fit.shape_from_deployment(entry.template) if entry.template else fit.empty_shape()


def pending_of_others(world: world_model.World, key: str) -> list[overcommit.PendingPods]:
    """Other spreads' placed-but-not-running pods, per (subset, cluster), with each subset's shape."""
    pending: list[overcommit.PendingPods] = []
    for other in world.spreads():
        last = world.placements.get(other.key)
        if other.key == key or last is None:
            continue
        shape = shape_of(other)
        running = world.running_for(other.key)
        specs = {s.name: s for s in other.spec.subsets}
        for result in last.subsets:
            subset_spec = specs.get(result.name)
            if subset_spec is None:
                continue
            subset_shape = fit.with_subset(shape, subset_spec)
            for name, placed in sorted(result.clusters.items()):
                count = placed - running.get(result.name, {}).get(name, 0)
                if count > 0:
                    pending.append(overcommit.PendingPods(cluster=name, shape=subset_shape, count=count))
    return pending


@dataclasses.dataclass(frozen=True)
class PlaceRequest:
    """The pure inputs of one `placement.place` call, for spread `key` ("namespace/name").

    Plain picklable data, so the same request is answered in-process or by a Ray shard actor.
    """

    key: str
    spec: spread.FederatedSpreadSpec
    replicas: int
    snapshot: cluster.CapacitySnapshot
    shape: fit.PodShape | None = None
    current: Mapping[str, Mapping[str, int]] | None = None
    running: Mapping[str, Mapping[str, int]] | None = None
    marks: tuple[placement.UnschedulableMark, ...] = ()
    now: datetime.datetime | None = None


PlaceBatch = Callable[[Sequence[PlaceRequest]], list[placement.Placement]]


def answer(request: PlaceRequest) -> placement.Placement:
    """`placement.place` on a request's inputs."""
    return placement.place(
        request.spec, replicas=request.replicas, snapshot=request.snapshot, shape=request.shape,
        current=request.current, running=request.running, unschedulable=request.marks,
        now=request.now,
    )


def answer_all(requests: Sequence[PlaceRequest]) -> list[placement.Placement]:
    """Every request answered in this process, in order (the default `PlaceBatch`)."""
    return [answer(r) for r in requests]


def request_for(
    world: world_model.World, entry: world_model.SpreadEntry, *, replicas: int, now: datetime.datetime
) -> PlaceRequest:
    """Spread `entry`'s inputs on the world as it is, every other spread's pending pods deducted."""
    snapshot = overcommit.deduct_pending(world.snapshot_for(entry.key), pending_of_others(world, entry.key))
    return PlaceRequest(
        key=entry.key, spec=entry.spec, replicas=replicas, snapshot=snapshot, shape=shape_of(entry),
        current=world.current_for(entry.key), running=world.running_for(entry.key),
        marks=tuple(world.marks_for(entry.key)), now=now,
    )


def place_one(
    world: world_model.World, entry: world_model.SpreadEntry, *, replicas: int, now: datetime.datetime
) -> placement.Placement:
    """Spread `entry`'s placement for `replicas` on the world as it is (nothing stored)."""
    return answer(request_for(world, entry, replicas=replicas, now=now))


def recompute(
    world: world_model.World, keys: Iterable[str], *, now: datetime.datetime,
    place_batch: PlaceBatch = answer_all,
) -> Round:
    """Place the spreads `keys` in key order and store the results in the world.

    The answer is the one a sequential pass in key order gives (each spread sees the new
    placements of the spreads before it), computed optimistically in parallel: every request is
    built on the world before the round and sent to `place_batch` at once (the Ray shards); then,
    in key order, a spread whose inputs changed because an earlier spread of the round moved its
    pending pods is placed again here, on the updated inputs. Independent spreads — the usual
    case — are never placed twice.

    A key whose spread is gone has its placement dropped (`removed`); a spread whose hub
    Deployment has not been seen yet is not placed (`waiting_for_target`).
    """
    waiting: list[str] = []
    removed: list[str] = []
    entries: list[world_model.SpreadEntry] = []
    for key in sorted(set(keys)):
        entry = world.spread(key)
        if entry is None:
            if world.placements.pop(key, None) is not None:
                removed.append(key)
            world.placed_ready.pop(key, None)
        elif entry.replicas is None:
            waiting.append(key)
        else:
            entries.append(entry)
    sent = [request_for(world, e, replicas=e.replicas or 0, now=now) for e in entries]
    answers = place_batch(sent) if sent else []
    placed: dict[str, placement.Placement] = {}
    replaced, moved = 0, False  # moved: an earlier spread of this round changed its counts
    for entry, request, result in zip(entries, sent, answers, strict=True):
        if moved:
            fresh = request_for(world, entry, replicas=request.replicas, now=now)
            if fresh != request:
                result, replaced = answer(fresh), replaced + 1
        moved = moved or result.counts() != world.current_for(entry.key)
        world.placements[entry.key] = result
        world.seeded.pop(entry.key, None)
        world.placed_ready[entry.key] = world.ready_selected(entry.key)
        placed[entry.key] = result
    return Round(placements=placed, waiting_for_target=tuple(waiting), removed=tuple(removed),
                 replaced=replaced)


def failover(world: world_model.World) -> Lost:
    """The failover tick (clock: the world's): clusters newly lost, and the spreads to recompute.

    `clusters` uses the smallest clusterLostSeconds among spreads (for the MemberCluster Ready
    condition, reported once per loss). `keys` are the placed spreads whose set of ready selected
    clusters differs from the one they were placed with — each judged by its own
    clusterLostSeconds, so a spread with a longer limit moves later, not never.
    """
    lost = world.tracker.newly_lost(after=datetime.timedelta(seconds=world.min_lost_seconds()))
    keys = frozenset(
        key for key, seen in world.placed_ready.items()
        if world.spread(key) is not None and world.ready_selected(key) != seen
    )
    return Lost(clusters=tuple(lost), keys=keys)
