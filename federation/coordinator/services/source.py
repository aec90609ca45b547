"""A `PlacementSource` over the live coordinator: the World behind the `Coordinator` facade's lock.

Why it reads instead of being told: placements change from three places (hub events, agent
reports, the failover tick), all through `Coordinator.publish`, which knows nothing of the
PlacementService. Rather than hooking every caller, the source compares the World's placements
with what it last saw whenever someone asks for the version (watchers poll it), and bumps its
counter on a difference. A watcher therefore sees the latest
placement within one poll interval, and nothing has to remember to notify it.

Everything is read under `coordinator.lock`, the same lock every writer of the World holds, and
converted to immutable records before the lock is released.

What-ifs (`simulate`) run on the facade's backend (a Ray task with the Ray shards), and live
free capacity is asked of the ClusterShards, which hold the inventories.
"""

from __future__ import annotations

import dataclasses
import datetime
import threading
from collections.abc import Callable, Mapping
from typing import Any

from federation.api import cluster, common, problems
from federation.api import spread as spread_api
from federation.coordinator import facade
from federation.coordinator.model import capacity, loop, rebalance_plan
from federation.coordinator.wire import convert
from federation.core import (
    failback_round,
    fit,
    pending_deduction,
    placement,
    placement_inputs,
    spread_status,
)

Conditions = Callable[[str], list[common.Condition]]


class WorldSource:
    """The PlacementService's view of the coordinator's World (thread-safe)."""

    def __init__(self, coordinator: facade.Coordinator, *,
                 conditions: Conditions | None = None,
                 agent_versions: Mapping[str, str] | None = None) -> None:
        self._coordinator = coordinator
        self._conditions = conditions
        self._agent_versions = agent_versions if agent_versions is not None else {}
        self._seen_lock = threading.Lock()
        self._seen: dict[str, placement.Placement] = {}
        self._version = 0

    # --- reads -----------------------------------------------------------------------------

    def get(self, key: str) -> convert.PlacementRecord | None:
        with self._coordinator.lock:
            return self._record(key)

    def explained(self, key: str) -> convert.PlacementRecord | None:
        """`get`, each subset's capacity as placing the spread now gives it, and its reasons too
        where that placement gives the subset the numbers it holds: a settled spread is not
        placed again when only free capacity changes, so its stored capacity and reasons may be
        old (a subset held below its cap by the placement's stability, then by capacity once the
        member's inventory caught up with its pods, named neither)."""
        with self._coordinator.lock:
            world = self._coordinator.world
            record, entry = self._record(key), world.spread(key)
            if record is None or entry is None or entry.replicas is None:
                return record
            fresh = loop.place_one(world, entry, replicas=entry.replicas, now=self._coordinator.clock())
            found = rebalance_plan.plan(world, key, now=self._coordinator.clock())
        now_placed = {s.name: s for s in fresh.subsets}
        subsets = tuple(_as_placed_now(s, now_placed.get(s.name)) for s in record.placement.subsets)
        return dataclasses.replace(record, placement=dataclasses.replace(record.placement, subsets=subsets),
                                   rebalance=found if found is not None and found.steps else None)

    def rebalance(self, key: str, *, dry_run: bool, max_surge: int | None) -> failback_round.Plan | None:
        """Spread `key`'s whole failback, started unless `dry_run` (`facade.Coordinator.rebalance`)."""
        return self._coordinator.rebalance(key, dry_run=dry_run, max_surge=max_surge)

    def placements(self, namespace: str | None) -> list[convert.PlacementRecord]:
        with self._coordinator.lock:
            keys = [k for k in sorted(self._coordinator.world.placements)
                    if not namespace or k.partition("/")[0] == namespace]
            return [r for r in (self._record(k, with_usage=False) for k in keys) if r is not None]

    def clusters(self) -> list[convert.ClusterRecord]:
        with self._coordinator.lock:
            world = self._coordinator.world
            after = datetime.timedelta(seconds=world.min_lost_seconds())
            records = []
            for capacity in world.snapshot_for("").clusters:
                name = capacity.name
                records.append(convert.ClusterRecord(
                    name=name, labels=dict(capacity.labels), ready=world.ready(name, after=after),
                    taints=tuple(capacity.taints), last_heartbeat=world.tracker.last(name),
                    agent_version=self._agent_versions.get(name, ""),
                    node_pools=tuple(capacity.node_pools),
                ))
            return records

    def simulate(
        self, spec: spread_api.FederatedSpreadSpec, *, replicas: int | None,
        template: Mapping[str, Any] | None, snapshot: cluster.CapacitySnapshot | None,
    ) -> placement.Placement:
        """What-if on the live capacity (every placed spread's pending pods deducted), nothing stored."""
        if replicas is None:
            raise problems.InvalidInput("simulation", [problems.Problem(
                "replicas", "give replicas, or a template workload with spec.replicas "
                            "(a Job's spec.parallelism)")])
        with self._coordinator.lock:
            world = self._coordinator.world
            now = self._coordinator.clock()
            if snapshot is None:
                snapshot = pending_deduction.deduct_pending(
                    world.snapshot_for(""), world.pending_pods(besides=None))
        request = loop.PlaceRequest(key="", spec=spec, replicas=replicas, snapshot=snapshot,
                                    inputs=placement_inputs.PlacementInputs(
                                        shape=fit.shape_from_deployment(template), now=now))
        return self._coordinator.backend.simulate_many([request])[0]

    def free_capacity(
        self, record: convert.PlacementRecord, *, snapshot: cluster.CapacitySnapshot | None
    ) -> dict[tuple[str, str], int | None]:
        """Per (subset, cluster): on the given snapshot, or asked of the ClusterShards (live)."""
        if record.spec is None:
            return {}
        shape = fit.shape_from_deployment(record.template)
        if snapshot is not None:
            queries = capacity.queries_for(record.spec, record.placement, shape=shape)
            return dict(zip(queries, capacity.answer_on(snapshot, list(queries.values())), strict=True))
        with self._coordinator.lock:
            pending = self._coordinator.world.pending_pods(besides=None)  # every spread's, its own too
        queries = capacity.queries_for(record.spec, record.placement, shape=shape, pending=pending)
        answers = self._coordinator.backend.free_capacity(list(queries.values()))
        return dict(zip(queries, answers, strict=True))

    # --- change detection ------------------------------------------------------------------

    @property
    def version(self) -> int:
        with self._coordinator.lock:
            current = dict(self._coordinator.world.placements)
        with self._seen_lock:
            if current != self._seen:
                self._seen = current
                self._version += 1
            return self._version

    # --- internals -------------------------------------------------------------------------

    def _record(self, key: str, *, with_usage: bool = True) -> convert.PlacementRecord | None:
        """Spread `key`'s live placement record (None: not placed); `with_usage`: with its usage
        figures (one spread's answer; a list of every spread leaves them out: each costs a pass over
        the clusters' usage reports)."""
        world = self._coordinator.world
        entry, result = world.spread(key), world.placements.get(key)
        if entry is None or result is None:
            return None
        ready: dict[str, dict[str, int]] = {
            subset: {name: pods.ready for name, pods in per_cluster.items()}
            for subset, per_cluster in world.pods.pods_for(key).items()
        }
        window = datetime.timedelta(
            seconds=entry.spec.schedule_strategy.adaptive_settings().unschedulable_seconds)
        until = {(m.subset, m.cluster): m.since + window for m in world.marks_for(key)}
        revisions = spread_status.revisions_per_subset(world.pods.by_spread.get(key, {})) or {}
        namespace, _, name = key.partition("/")
        found = self._coordinator.usage(namespace, name) if with_usage else None
        return convert.PlacementRecord(
            key=key, placement=result, spec=entry.spec, ready=ready,
            conditions=tuple(self._conditions(key)) if self._conditions else (),
            generation=entry.generation, unschedulable_until=until, template=entry.template,
            revisions=revisions, usage=found,
        )


def _as_placed_now(stored: placement.SubsetPlacement,
                   now: placement.SubsetPlacement | None) -> placement.SubsetPlacement:
    """A stored subset with the capacity placing it now gives, and that placement's reasons when
    it gives the subset the same replicas in the same clusters (the reasons then explain the very
    numbers shown); otherwise the stored reasons, which explain the stored numbers."""
    if now is None:
        return stored
    if (now.replicas, now.clusters) == (stored.replicas, stored.clusters):
        return dataclasses.replace(stored, capacity=now.capacity, reasons=now.reasons)
    return dataclasses.replace(stored, capacity=now.capacity)

