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
from collections.abc import Iterable

from federation.coordinator import world as world_model
from federation.core import fit, overcommit, placement


@dataclasses.dataclass(frozen=True)
class Round:
    """What one recompute did: new placements, spreads waiting for their target, spreads removed."""

    placements: dict[str, placement.Placement]
    waiting_for_target: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


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


def place_one(
    world: world_model.World, entry: world_model.SpreadEntry, *, replicas: int, now: datetime.datetime
) -> placement.Placement:
    """Spread `entry`'s placement for `replicas` on the world as it is (nothing stored)."""
    snapshot = overcommit.deduct_pending(world.snapshot_for(entry.key), pending_of_others(world, entry.key))
    return placement.place(
        entry.spec, replicas=replicas, snapshot=snapshot, shape=shape_of(entry),
        current=world.current_for(entry.key), running=world.running_for(entry.key),
        unschedulable=world.marks_for(entry.key), now=now,
    )


def recompute(world: world_model.World, keys: Iterable[str], *, now: datetime.datetime) -> Round:
    """Place the spreads `keys` in key order and store the results in the world.

    A key whose spread is gone has its placement dropped (`removed`); a spread whose hub
    Deployment has not been seen yet is not placed (`waiting_for_target`).
    """
    placed: dict[str, placement.Placement] = {}
    waiting: list[str] = []
    removed: list[str] = []
    for key in sorted(set(keys)):
        entry = world.spread(key)
        if entry is None:
            if world.placements.pop(key, None) is not None:
                removed.append(key)
            world.placed_ready.pop(key, None)
            continue
        if entry.replicas is None:
            waiting.append(key)
            continue
        result = place_one(world, entry, replicas=entry.replicas, now=now)
        world.placements[key] = result
        world.placed_ready[key] = world.ready_selected(key)
        placed[key] = result
    return Round(placements=placed, waiting_for_target=tuple(waiting), removed=tuple(removed))


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
