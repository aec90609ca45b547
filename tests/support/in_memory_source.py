"""A PlacementSource backed by plain dictionaries, for tests of the SDK, the CLI and the servicer.

The coordinator serves placements from its world model (`services.source.WorldSource`); tests that
only care about the wire and the client put records here and serve them through the real
`PlacementServicer`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

from federation.api import cluster, problems, spread
from federation.coordinator.model import capacity
from federation.coordinator.wire import convert
from federation.core import failback_round, fit, placement


class InMemorySource:
    """A thread-safe PlacementSource holding placements and clusters in dictionaries.

    Tests serve it through the real PlacementServicer to drive the SDK and `fedspread get` without
    a world model.
    """

    def __init__(self, *, clusters: list[convert.ClusterRecord] | None = None) -> None:
        self._cond = threading.Condition()
        self._records: dict[str, convert.PlacementRecord] = {}
        self._clusters = {c.name: c for c in clusters or []}
        self._version = 0

    def put(self, key: str, record: convert.PlacementRecord) -> None:
        """Store (or replace) a spread's placement and wake watchers."""
        with self._cond:
            self._records[key] = record if record.key == key else dataclasses.replace(record, key=key)
            self._version += 1
            self._cond.notify_all()

    def remove(self, key: str) -> None:
        """Forget a spread (watchers see it deleted)."""
        with self._cond:
            if self._records.pop(key, None) is not None:
                self._version += 1
                self._cond.notify_all()

    def put_cluster(self, record: convert.ClusterRecord) -> None:
        """Store (or replace) a member cluster."""
        with self._cond:
            self._clusters[record.name] = record

    def get(self, key: str) -> convert.PlacementRecord | None:
        with self._cond:
            return self._records.get(key)

    def explained(self, key: str) -> convert.PlacementRecord | None:
        return self.get(key)

    def rebalance(self, key: str, *, dry_run: bool, max_surge: int | None) -> failback_round.Plan | None:
        """A placed spread's failback: nothing to move here (no live view to plan on)."""
        with self._cond:
            return failback_round.Plan(key=key, policy="Never", steps=()) if key in self._records else None

    def placements(self, namespace: str | None) -> list[convert.PlacementRecord]:
        with self._cond:
            return [r for k, r in self._records.items()
                    if not namespace or k.split("/", 1)[0] == namespace]

    def clusters(self) -> list[convert.ClusterRecord]:
        with self._cond:
            return list(self._clusters.values())

    def simulate(
        self, spec: spread.FederatedSpreadSpec, *, replicas: int | None,
        template: Mapping[str, Any] | None, snapshot: cluster.CapacitySnapshot | None,
    ) -> placement.Placement:
        if replicas is None:
            raise problems.InvalidInput("simulation", [problems.Problem(
                "replicas", "give replicas, or a template workload with spec.replicas "
                            "(a Job's spec.parallelism)")])
        if snapshot is None:
            snapshot = cluster.CapacitySnapshot(clusters=[c.to_capacity() for c in self.clusters()])
        return placement.place(spec, replicas=replicas, snapshot=snapshot,
                               shape=fit.shape_from_deployment(template))

    def free_capacity(
        self, record: convert.PlacementRecord, *, snapshot: cluster.CapacitySnapshot | None
    ) -> dict[tuple[str, str], int | None]:
        if record.spec is None:
            return {}
        if snapshot is None:
            snapshot = cluster.CapacitySnapshot(clusters=[c.to_capacity() for c in self.clusters()])
        queries = capacity.queries_for(record.spec, record.placement,
                                       shape=fit.shape_from_deployment(record.template))
        return dict(zip(queries, capacity.answer_on(snapshot, list(queries.values())), strict=True))

    @property
    def version(self) -> int:
        with self._cond:
            return self._version
