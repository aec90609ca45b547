"""What a placement backend answers, and the one that answers in the coordinator's own process.

Why a module of its own: the facade and the PlacementService ask a `PlacementBackend` for
placements and capacity answers without caring where they are computed; `LocalBackend` computes
them here (unit tests, and `fedspread coordinator` by default), `shards.RayBackend` on Ray actors. Keeping
the contract and the in-process answer apart from the Ray wrapper lets everything but `shards`
stay free of Ray, and names the two errors every backend may raise for a batch it cannot answer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Protocol

from federation.api import cluster
from federation.coordinator.model import capacity, loop
from federation.coordinator.wire import shard_messages
from federation.core import placement, round_check


class PlaceTimeout(loop.BatchUnavailable):
    """The SpreadShards did not answer a placement batch within the backend's `place_seconds`."""


class ShardUnavailable(loop.BatchUnavailable):
    """A SpreadShard could not take a placement batch: its actor died, is restarting, or its node
    is gone (Ray says so at once, where a hung one only misses the deadline)."""


class PlacementBackend(Protocol):
    """Where placements and capacity simulations are computed: in-process or on Ray actors."""

    parallel: bool
    """Whether `place_batch` runs requests in parallel: only then are the first answers of a round
    of several spreads asked of it (in-process, `loop.recompute` answers them itself, the same)."""
    parallel_from: int
    """The fewest spreads of a round whose first answers are asked of a parallel `place_batch`."""

    def place_batch(self, requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        """One placement per request, in request order."""
        ...

    def place_round(self, requests: Iterable[loop.PlaceRequest], pools: round_check.Pools, *,
                    encodings: shard_messages.Encodings | None = None) -> loop.RoundAnswers:
        """A round's first answers against its snapshot `pools`, in request order, and the round's
        check where the backend runs it (None: the coordinator checks it). `requests` may be built
        as they are taken (a generator): a backend may start answering before the last is built.
        A backend that builds the agents' messages beside its answers hands them to `encodings`;
        one that does not leaves it empty (the coordinator builds them)."""
        ...

    def simulate_many(self, requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        """What-if placements (nothing stored), in request order."""
        ...

    def report_inventory(self, name: str, pools: Sequence[cluster.NodePool]) -> None:
        """Cluster `name`'s agent reported these node pools (latest wins)."""
        ...

    def forget_cluster(self, name: str) -> None:
        """Cluster `name` is gone; drop its inventory."""
        ...

    def free_capacity(self, queries: Sequence[capacity.CapacityQuery]) -> list[int | None]:
        """One answer per query, in query order."""
        ...

    def close(self) -> None:
        """Release whatever the backend holds."""
        ...


class LocalBackend:
    """Everything in this process: unit tests, and `fedspread coordinator` unless given Ray."""

    parallel, parallel_from = False, 2

    def __init__(self) -> None:
        self._pools: dict[str, list[cluster.NodePool]] = {}
        self._lock = threading.Lock()

    def place_batch(self, requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        return loop.answer_all(requests)

    def place_round(self, requests: Iterable[loop.PlaceRequest], pools: round_check.Pools, *,
                    encodings: shard_messages.Encodings | None = None) -> loop.RoundAnswers:
        return loop.RoundAnswers(self.place_batch(list(requests)), None)

    def simulate_many(self, requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        return loop.answer_all(requests)

    def report_inventory(self, name: str, pools: Sequence[cluster.NodePool]) -> None:
        with self._lock:
            self._pools[name] = list(pools)

    def forget_cluster(self, name: str) -> None:
        with self._lock:
            self._pools.pop(name, None)

    def free_capacity(self, queries: Sequence[capacity.CapacityQuery]) -> list[int | None]:
        with self._lock:
            return [capacity.free_capacity(self._pools.get(q.cluster), q) for q in queries]

    def close(self) -> None:
        return None
