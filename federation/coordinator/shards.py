"""The one Ray wrapper: placement requests answered by `SpreadShard` actors, or in-process.

Why it is shaped like this (DESIGN §5): a Ray actor is a whole worker process (~90 MB here), so
actors are *shards*, not one per object — a fixed number of `SpreadShard` actors, and each spread
key is routed to `routing.shard_of(key)`. Everything the placement needs travels in the request
(`PlaceRequest`: the pure inputs of `placement.place`, plain picklable data), so the placement logic
is tested without Ray through `LocalBackend`, and Ray is an execution detail behind
`PlacementBackend`. Nothing else in the project imports `ray`; this module imports it lazily, only
when a `RayBackend` is built.

The rebuild story: the coordinator's `World` (spreads, clusters, last placements) lives in the
coordinator process and is itself rebuilt from the hub and agent resync after a restart. A shard
actor holds no state at all — every request carries its spec, snapshot, current placement, running
counts and marks — so an actor that dies is restarted by Ray (`max_restarts=-1`), its in-flight
calls are retried (`max_task_retries`), and the restarted actor simply keeps serving: there is
nothing to rebuild and no answer changes.

Heavy what-if batches (`simulate_many`) run as plain Ray tasks, not on the shard actors, so a big
simulation never queues behind the live placement loop.

Not here yet: `ClusterShard` actors holding inventories (the loop deducts other spreads' pending
replicas in the coordinator process, `request_for`, before a request is sent).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from federation.api import cluster, spread
from federation.coordinator import loop, routing
from federation.coordinator import world as world_model
from federation.core import fit, overcommit, placement


@dataclasses.dataclass(frozen=True)
class PlaceRequest:
    """The pure inputs of one `placement.place` call, for spread `key` ("namespace/name")."""

    key: str
    spec: spread.FederatedSpreadSpec
    replicas: int
    snapshot: cluster.CapacitySnapshot
    shape: fit.PodShape | None = None
    current: Mapping[str, Mapping[str, int]] | None = None
    running: Mapping[str, Mapping[str, int]] | None = None
    marks: tuple[placement.UnschedulableMark, ...] = ()
    now: datetime.datetime | None = None


def place(request: PlaceRequest) -> placement.Placement:
    """`placement.place` on a request's inputs."""
    return placement.place(
        request.spec, replicas=request.replicas, snapshot=request.snapshot, shape=request.shape,
        current=request.current, running=request.running, unschedulable=request.marks,
        now=request.now,
    )


def request_for(
    world: world_model.World, entry: world_model.SpreadEntry, *, replicas: int, now: datetime.datetime
) -> PlaceRequest:
    """The request `loop.place_one` would answer: the world's inputs, others' pending deducted."""
    snapshot = overcommit.deduct_pending(
        world.snapshot_for(entry.key), loop.pending_of_others(world, entry.key)
    )
    return PlaceRequest(
        key=entry.key, spec=entry.spec, replicas=replicas, snapshot=snapshot,
        shape=loop.shape_of(entry), current=world.current_for(entry.key),
        running=world.running_for(entry.key), marks=tuple(world.marks_for(entry.key)), now=now,
    )


def group_by_shard(keys: Sequence[str], *, shards: int) -> list[list[int]]:
    """Indices into `keys` per owning shard (`routing.shard_of`), each list in request order."""
    groups: list[list[int]] = [[] for _ in range(shards)]
    for index, key in enumerate(keys):
        groups[routing.shard_of(key, shards=shards)].append(index)
    return groups


class PlacementBackend(Protocol):
    """Where placements are computed: in-process or on Ray shard actors."""

    def place_batch(self, requests: Sequence[PlaceRequest]) -> list[placement.Placement]:
        """One placement per request, in request order."""
        ...

    def simulate_many(self, requests: Sequence[PlaceRequest]) -> list[placement.Placement]:
        """What-if placements (nothing stored), in request order."""
        ...

    def close(self) -> None:
        """Release whatever the backend holds."""
        ...


class LocalBackend:
    """`placement.place` in this process: unit tests, and the coordinator when Ray is off."""

    def place_batch(self, requests: Sequence[PlaceRequest]) -> list[placement.Placement]:
        return [place(r) for r in requests]

    def simulate_many(self, requests: Sequence[PlaceRequest]) -> list[placement.Placement]:
        return self.place_batch(requests)

    def close(self) -> None:
        return None


class SpreadShard:
    """The actor body: stateless, so a restarted actor answers exactly as before."""

    def place_batch(self, requests: list[PlaceRequest]) -> list[placement.Placement]:
        return [place(r) for r in requests]

    def ping(self) -> str:
        return "ok"

    def pid(self) -> int:
        """The actor's process id: a restarted actor has a new one."""
        return os.getpid()


def _place_many(requests: list[PlaceRequest]) -> list[placement.Placement]:
    return [place(r) for r in requests]


_remote_cache: dict[str, Any] = {}


def _remotes() -> tuple[Any, Any]:
    """The Ray actor class and task, built once, on first use (importing this module needs no Ray)."""
    if not _remote_cache:
        import ray

        _remote_cache["actor"] = ray.remote(max_restarts=-1, max_task_retries=2, num_cpus=0)(SpreadShard)
        _remote_cache["task"] = ray.remote(num_cpus=0)(_place_many)
    return _remote_cache["actor"], _remote_cache["task"]


class RayBackend:
    """`shards` SpreadShard actors; each request goes to the shard owning its key.

    Joins the Ray cluster at `address` when given (e.g. KubeRay), otherwise starts a local one —
    unless Ray is already initialised in this process, which is then used as is. `close()` kills
    the actors, and shuts Ray down only if this backend started it.
    """

    def __init__(
        self, *, shards: int, address: str | None = None, init_options: Mapping[str, Any] | None = None
    ) -> None:
        if shards < 1:
            raise ValueError(f"shards must be at least 1, got {shards}")
        import ray

        self._ray = ray
        self.shards = shards
        self._owns_ray = False
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False}
            options.update(init_options or {})
            ray.init(address=address, **options)
            self._owns_ray = True
        actor_class, self._task = _remotes()
        self.actors: list[Any] = [actor_class.remote() for _ in range(shards)]

    def shard_for(self, key: str) -> int:
        """The shard owning spread `key`."""
        return routing.shard_of(key, shards=self.shards)

    def place_batch(self, requests: Sequence[PlaceRequest]) -> list[placement.Placement]:
        """One remote call per shard with its part of the batch, in parallel; results in request order."""
        items = list(requests)
        groups = group_by_shard([r.key for r in items], shards=self.shards)
        calls = [
            (indices, self.actors[shard].place_batch.remote([items[i] for i in indices]))
            for shard, indices in enumerate(groups) if indices
        ]
        answers = self._ray.get([ref for _, ref in calls])
        results: list[placement.Placement | None] = [None] * len(items)
        for (indices, _), answer in zip(calls, answers, strict=True):
            for index, result in zip(indices, answer, strict=True):
                results[index] = result
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:
            raise RuntimeError(f"shards answered no placement for requests {missing}")
        return [r for r in results if r is not None]

    def simulate_many(self, requests: Sequence[PlaceRequest]) -> list[placement.Placement]:
        """What-if placements as Ray tasks, one per chunk of requests (two chunks per shard count)."""
        items = list(requests)
        if not items:
            return []
        chunks = max(1, min(len(items), 2 * self.shards))
        size = -(-len(items) // chunks)
        refs = [self._task.remote(items[i:i + size]) for i in range(0, len(items), size)]
        return [result for answer in self._ray.get(refs) for result in answer]

    def close(self) -> None:
        """Kill the shard actors (no restart); shut Ray down if this backend started it."""
        for actor in self.actors:
            self._ray.kill(actor, no_restart=True)
        self.actors = []
        if self._owns_ray:
            self._ray.shutdown()
            self._owns_ray = False
