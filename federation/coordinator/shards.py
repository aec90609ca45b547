"""The one Ray wrapper: placements on `SpreadShard` actors, inventories on `ClusterShard` actors.

Why it is shaped like this: a Ray actor is a whole worker process (~90 MB here), so
actors are *shards*, not one per object — a fixed number of each kind, with spread keys and
cluster names routed by `routing.shard_of`. Everything a placement needs travels in the request
(`loop.PlaceRequest`: plain picklable data), so the placement logic is tested without Ray through
`backends.LocalBackend`, and Ray is an execution detail behind `backends.PlacementBackend`. Nothing
else in the project imports `ray`; this module imports it lazily, only when a `RayBackend` is built.

- **SpreadShard** holds only what its last rounds used (`shard_specs`: a request carries its spec
  and pod shape, a message's inputs their template, only when the shard may lack them): an actor
  that dies is restarted by Ray (`max_restarts=-1`), its in-flight calls are retried
  (`max_task_retries`), and the new process answers as before or says what it lacks (the round is
  then placed in-process, and everything sent again next time).
- **A round on the shards** (`RayBackend.place_round`): the requests go `ROUND_CHUNK` at a time as
  the coordinator builds them; each SpreadShard answers its spreads and cuts the answers into rows
  per ClusterShard, which checks the node pools of its clusters (`round_parts`); the rows go from
  actor to actor, not through the coordinator.
- **ClusterShard** holds the node inventories of its clusters (as agents last reported them) and
  answers capacity simulations: how many more pods of a shape fit in a cluster once the pods
  placed there but not yet running are counted. It *has* state, so each actor carries an
  incarnation id; when an answer comes from an incarnation the backend has not loaded, the actor
  was restarted empty, and the backend reloads it from its ledger of the latest reports (the
  coordinator's own copy, itself rebuilt from agent resync after a coordinator restart) and asks
  again. Reports are fire-and-forget calls; Ray runs one caller's calls to an actor in order.
- **Deadlines.** A placement batch waits for the SpreadShards at most `place_seconds`
  (`PLACE_SECONDS` by default): a shard that hangs (a node gone, Ray's scheduler stuck) would
  otherwise hold the coordinator's lock for ever. Past it `place_batch` raises `PlaceTimeout`
  (a `loop.BatchUnavailable`), and `loop.recompute` answers the same requests in the coordinator's
  process; the late answers are dropped. Every other call the backend waits for — a what-if batch
  (`simulate_many`), a capacity answer, a shard's reload — has the same deadline and the same two
  errors (`_wait`), which the PlacementService answers as UNAVAILABLE: a stuck Ray never holds a
  caller, nor the lock a reload takes, for ever.
- Heavy what-if batches (`simulate_many`) run as plain Ray tasks, not on the shard actors, so a
  big simulation never queues behind the live placement loop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from federation import collector
from federation.api import cluster
from federation.coordinator import backends, ray_deadline, round_parts, shard_specs
from federation.coordinator.model import capacity, loop, routing
from federation.coordinator.wire import assignments, shard_messages
from federation.core import placement, round_check

PLACE_SECONDS = 300.0
"""How long a placement batch waits for the SpreadShards before the round is placed in-process.
Generous: a full round of 10,000 spreads on two shards takes tens of seconds on 2 busy cores
(bench/README.md), and a round cut short is placed again here, which costs as much again."""

RAY_ROUND_MIN_SPREADS = 4096
"""A round of fewer spreads is placed in the coordinator's process, with the same answer, without a
Ray round trip (`loop.recompute`'s `parallel_from`). Measured (`bench.placement_crossover`,
bench/results/reference-placement-crossover.json, 2 cores): the 2 shards were slower at every size,
2 to 2,048 spreads on 200 clusters (1.10-2.2x), so only bigger rounds (a full round) go to Ray.
Measure again where Ray has cores of its own (docs/decisions.md, "the crossover")."""

ROUND_CHUNK = 1000
"""How many requests of a round are sent to the SpreadShards at a time, as the coordinator builds
them (`round_parts.send_in_chunks`): small enough that the shards start placing early, large enough
that a call's fixed cost (one pickle, one task per shard) stays small beside its placements."""


class SpreadShard:
    """The placement actor body: it holds only the specs of its last rounds (`shard_specs`), so a
    restarted actor answers as before, or says which specs it lacks."""

    def __init__(self) -> None:
        collector.tune()  # it unpickles every round's requests: see `federation.collector`
        self._specs = shard_specs.HeldSpecs()

    def place_batch(self, requests: list[loop.PlaceRequest]) -> list[placement.Placement]:
        return loop.answer_all(requests)

    def place_round(self, shipped: bytes, parts: int, round_id: str) -> tuple[Any, ...]:
        """A round's first answers (without the room they took: `round_parts.returned`), then the
        rows of each of the `parts` ClusterShards' clusters (`round_parts.cut`): one return value
        each, so each goes to its shard on its own. `shipped`: the `shard_specs.Shipped` requests,
        packed (`round_parts.pack`)."""
        requests = self._specs.requests(round_id, round_parts.unpack(shipped))
        answers = loop.answer_all(requests)
        return (round_parts.returned(answers), *round_parts.cut(requests, answers, parts=parts))

    def encode(self, inputs: bytes, answers: list[placement.Placement],
               round_id: str) -> list[shard_messages.Packed | None]:
        """The agents' messages of a `place_round` call's spreads, from its answers (Ray passes the
        answers' ref as the values) and their packed `shard_specs.ShippedInputs` (None: a Job):
        asked after every chunk of the round is sent, so building them never delays an answer."""
        items = self._specs.message_inputs(round_id, round_parts.unpack(inputs))
        return [None if item is None else shard_messages.pack(assignments.encode(item, answer))
                for item, answer in zip(items, answers, strict=True)]

    def ping(self) -> str:
        return "ok"

    def pid(self) -> int:
        """The actor's process id: a restarted actor has a new one."""
        return os.getpid()


class ClusterShard:
    """The inventory actor body: node pools of the clusters routed here, and capacity answers."""

    def __init__(self) -> None:
        collector.tune()  # it unpickles every round's rows: see `federation.collector`
        self.incarnation = uuid.uuid4().hex
        self._pools: dict[str, list[cluster.NodePool]] = {}
        self._round = round_parts.HeldCheck()

    def report(self, name: str, pools: list[cluster.NodePool]) -> None:
        self._pools[name] = pools

    def forget(self, name: str) -> None:
        self._pools.pop(name, None)

    def load(self, inventories: dict[str, list[cluster.NodePool]]) -> str:
        """Replace everything (a reload after a restart); returns this incarnation."""
        self._pools = dict(inventories)
        return self.incarnation

    def free_capacity(self, queries: list[capacity.CapacityQuery]) -> tuple[str, list[int | None]]:
        """The answers, with the incarnation that gave them."""
        return self.incarnation, [capacity.free_capacity(self._pools.get(q.cluster), q) for q in queries]

    def clusters(self) -> list[str]:
        return sorted(self._pools)

    def check_first(self, round_id: str, pools: round_check.Pools,
                    *parts: round_parts.Rows) -> round_check.Found:
        """The first check of round `round_id` on this shard's clusters (`round_parts.HeldCheck`)."""
        return self._round.first(round_id, pools, parts)

    def check_again(self, round_id: str, taken_out: list[str]) -> round_check.Found:
        return self._round.again(round_id, taken_out)

    def check_folded(self, round_id: str) -> dict[str, tuple[round_check.Node, ...]]:
        return self._round.folded(round_id)

    def pid(self) -> int:
        return os.getpid()


def _simulate_task(requests: list[loop.PlaceRequest]) -> list[placement.Placement]:
    return loop.answer_all(requests)


_remote_cache: dict[str, Any] = {}


def _remotes() -> tuple[Any, Any, Any]:
    """The Ray actor classes and task, built once, on first use (importing this module needs no Ray)."""
    if not _remote_cache:
        import ray

        restartable = ray.remote(max_restarts=-1, max_task_retries=2, num_cpus=0)
        _remote_cache["spread"] = restartable(SpreadShard)
        _remote_cache["cluster"] = restartable(ClusterShard)
        _remote_cache["task"] = ray.remote(num_cpus=0)(_simulate_task)
    return _remote_cache["spread"], _remote_cache["cluster"], _remote_cache["task"]


@dataclasses.dataclass(frozen=True)
class RayFootprint:
    """What a RayBackend runs on (for benchmarks and logs)."""

    nodes: int
    cpus: float
    actor_pids: tuple[int, ...]


class RayBackend:
    """`shards` SpreadShard and `cluster_shards` ClusterShard actors; thread-safe.

    Joins the Ray cluster at `address` when given (e.g. KubeRay), otherwise starts a local one —
    unless Ray is already initialised in this process, which is then used as is. A join gives up
    after `join_timeout` seconds (`ray_deadline.RayJoinTimeout`: `ray.init` has no deadline of its
    own, so it runs in a thread that is abandoned; the caller is expected to exit); a batch after
    `place_seconds` (PlaceTimeout, see the module docstring). Rounds of fewer than `parallel_from`
    spreads are not sent (`RAY_ROUND_MIN_SPREADS`); a round's requests go `round_chunk` at a time
    (`ROUND_CHUNK`). `close()` kills the actors,
    and shuts Ray down only if this backend started it.
    """

    parallel, parallel_from = True, RAY_ROUND_MIN_SPREADS

    def __init__(
        self, *, shards: int, cluster_shards: int = 1, address: str | None = None,
        init_options: Mapping[str, Any] | None = None, join_timeout: float | None = None,
        place_seconds: float = PLACE_SECONDS, parallel_from: int = RAY_ROUND_MIN_SPREADS,
        round_chunk: int = ROUND_CHUNK,
    ) -> None:
        if parallel_from < 2:
            raise ValueError(f"a round sent to the shards has at least 2 spreads, got {parallel_from}")
        self.parallel_from = parallel_from
        if round_chunk < 1:
            raise ValueError(f"a round's chunk holds at least one request, got {round_chunk}")
        self.round_chunk = round_chunk
        if shards < 1 or cluster_shards < 1:
            raise ValueError(f"shard counts must be at least 1, got {shards} and {cluster_shards}")
        if not place_seconds > 0:
            raise ValueError(f"place_seconds must be positive, got {place_seconds}")
        self.place_seconds = place_seconds
        import ray

        self._ray = ray
        self.shards, self.cluster_shards = shards, cluster_shards
        self._owns_ray = False
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False}
            options.update(init_options or {})
            if address is not None and join_timeout is not None:
                ray_deadline.init_within(ray, address=address, options=options, timeout=join_timeout)
            else:
                ray.init(address=address, **options)
            self._owns_ray = True
        spread_class, cluster_class, self._task = _remotes()
        self.actors: list[Any] = [spread_class.remote() for _ in range(shards)]
        self.cluster_actors: list[Any] = [cluster_class.remote() for _ in range(cluster_shards)]
        self._lock = threading.Lock()
        self._ledger: list[dict[str, list[cluster.NodePool]]] = [{} for _ in range(cluster_shards)]
        self._loaded: list[str | None] = [None] * cluster_shards
        self.reloads = 0
        tokens = shard_specs.tokens()  # one counter for every shard: a token names one spec object
        self.specs_sent = [shard_specs.SentSpecs(tokens) for _ in range(shards)]
        self._one_round = threading.Lock()

    def shard_for(self, key: str) -> int:
        """The SpreadShard owning spread `key`."""
        return routing.shard_of(key, shards=self.shards)

    def cluster_shard_for(self, name: str) -> int:
        """The ClusterShard owning cluster `name`."""
        return routing.shard_of(name, shards=self.cluster_shards)

    def place_batch(self, requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        """One remote call per shard with its part of the batch, in parallel; results in request
        order (PlaceTimeout: not all within `place_seconds`; ShardUnavailable: an actor is dead,
        restarting or unreachable — the caller places the batch in its own process either way)."""
        items = list(requests)
        if not items:
            return []
        groups = routing.group_by_shard([r.key for r in items], shards=self.shards)
        calls = [
            (indices, self.actors[shard].place_batch.remote([items[i] for i in indices]))
            for shard, indices in enumerate(groups) if indices
        ]
        found = self._wait([ref for _, ref in calls], what=f"{len(items)} placement requests")
        return round_parts.answers_in_order(
            len(items), [(indices, answers) for (indices, _), answers in zip(calls, found, strict=True)])

    def place_round(self, requests: Iterable[loop.PlaceRequest], pools: round_check.Pools, *,
                    encodings: shard_messages.Encodings | None = None) -> loop.RoundAnswers:
        """`place_batch` sent `round_chunk` requests at a time as they are built (the shards place
        while the coordinator builds the rest: `round_parts.send_in_chunks`), each SpreadShard also
        cutting its answers into rows for the ClusterShards, and the round's check on them
        (`round_parts.RemoteCheck`, asked for before the answers are read); the same errors. With
        `encodings`, each SpreadShard then builds its spreads' agent messages from its answers
        (`SpreadShard.encode`), asked once every chunk is sent, read when the round is delivered."""
        parts, round_id = self.cluster_shards, uuid.uuid4().hex
        chunks: list[tuple[int, list[str], Any]] = []

        def send(shard: int, chunk: list[loop.PlaceRequest]) -> Sequence[Any]:
            shipped = round_parts.pack([self.specs_sent[shard].ship(r) for r in chunk])  # specs held stay
            refs: Sequence[Any] = self.actors[shard].place_round.options(num_returns=parts + 1).remote(
                shipped, parts, round_id)
            chunks.append((shard, [r.key for r in chunk], refs[0]))
            return refs

        def wait(refs: list[Any], what: str) -> list[Any]:
            return list(self._wait(refs, what=what))

        with self._one_round:  # what each shard holds changes with every round: one at a time
            for specs in self.specs_sent:
                specs.start()
            try:
                sent = round_parts.send_in_chunks(requests, send=send, shards=self.shards,
                                                  chunk=self.round_chunk)
                check = round_parts.RemoteCheck(actors=self.cluster_actors, parts=sent.parts(parts),
                                                pools=pools, round_id=round_id, wait=wait)
                if encodings is not None:
                    for shard, keys, answered in chunks:
                        encode = self.actors[shard].encode.remote
                        shipped = [self.specs_sent[shard].ship_inputs(i) for i in encodings.inputs(keys)]
                        encodings.sent(keys, encode(round_parts.pack(shipped), answered, round_id))
                found = self._wait(sent.answers(), what=f"{sent.count} placements of a round")
                answers = sent.in_order(found)
            except BaseException:  # a call may not have reached its shard: every spec is sent again
                shard_specs.forget_all(self.specs_sent)
                raise
        if encodings is not None:
            encodings.answered(sent.in_order([keys for _, keys, _ in chunks]), answers,
                               wait=self._wait_encoded)
        return loop.RoundAnswers(answers, check)

    def _wait_encoded(self, refs: list[Any], what: str) -> list[Any]:
        """The wait for a round's agent messages: failed, each shard is sent all again (`shard_specs`)."""
        try:
            return list(self._wait(refs, what=what))
        except BaseException:
            shard_specs.forget_all(self.specs_sent)
            raise

    def simulate_many(self, requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        """What-if placements as Ray tasks, one per chunk of requests (two chunks per shard count)."""
        items = list(requests)
        if not items:
            return []
        chunks = max(1, min(len(items), 2 * self.shards))
        size = -(-len(items) // chunks)
        refs = [self._task.remote(items[i:i + size]) for i in range(0, len(items), size)]
        answers: list[list[placement.Placement]] = self._wait(refs, what=f"{len(items)} what-if placements")
        return [result for answer in answers for result in answer]

    def _wait(self, refs: Any, *, what: str) -> Any:
        """`ray.get(refs)` within `place_seconds`: PlaceTimeout past it (the calls cancelled, best
        effort), ShardUnavailable when an actor or task is dead, restarting or unreachable."""
        try:
            return self._ray.get(refs, timeout=self.place_seconds)
        except self._ray.exceptions.GetTimeoutError as error:
            for ref in refs if isinstance(refs, list) else [refs]:
                with contextlib.suppress(Exception):  # answered meanwhile, a dead actor: nothing to cancel
                    self._ray.cancel(ref)
            raise backends.PlaceTimeout(
                f"Ray did not answer {what} within {self.place_seconds:g} s") from error
        except self._ray.exceptions.RayError as error:
            raise backends.ShardUnavailable(
                f"Ray could not answer {what}: an actor or task is unavailable ({type(error).__name__}): "
                f"{str(error).splitlines()[0][:200] if str(error) else ''}") from error

    def report_inventory(self, name: str, pools: Sequence[cluster.NodePool]) -> None:
        """Record the report in the ledger and send it to the owning ClusterShard (no wait)."""
        shard = self.cluster_shard_for(name)
        with self._lock:
            self._ledger[shard][name] = list(pools)
            self.cluster_actors[shard].report.remote(name, list(pools))

    def forget_cluster(self, name: str) -> None:
        """Drop the cluster from the ledger and its ClusterShard (no wait)."""
        shard = self.cluster_shard_for(name)
        with self._lock:
            self._ledger[shard].pop(name, None)
            self.cluster_actors[shard].forget.remote(name)

    def free_capacity(self, queries: Sequence[capacity.CapacityQuery]) -> list[int | None]:
        """Ask each owning ClusterShard; a shard restarted since its last load is reloaded first."""
        items = list(queries)
        results: list[int | None] = [None] * len(items)
        groups = routing.group_by_shard([q.cluster for q in items], shards=self.cluster_shards)
        for shard, indices in enumerate(groups):
            if not indices:
                continue
            asked = [items[i] for i in indices]
            for _attempt in range(3):
                incarnation, answers = self._wait(self.cluster_actors[shard].free_capacity.remote(asked),
                                                  what=f"capacity of {len(asked)} (subset, cluster) pairs")
                if incarnation == self._loaded[shard]:
                    break
                self._reload(shard)
            else:
                raise RuntimeError(f"cluster shard {shard} keeps restarting; no capacity answer")
            for index, value in zip(indices, answers, strict=True):
                results[index] = value
        return results

    def _reload(self, shard: int) -> None:
        """Load the ledger into a ClusterShard that answered from an incarnation not loaded yet."""
        with self._lock:
            inventories = {name: list(pools) for name, pools in self._ledger[shard].items()}
            loaded = self._wait(self.cluster_actors[shard].load.remote(inventories),
                                what=f"a reload of cluster shard {shard}")
            if self._loaded[shard] is not None:
                self.reloads += 1  # a restart, not the first load
            self._loaded[shard] = loaded

    def footprint(self, *, timeout: float = 30.0) -> RayFootprint:
        """The Ray nodes and CPUs this backend's cluster has, and its actors' process ids."""
        ray: Any = self._ray  # `nodes` and `cluster_resources` are untyped in Ray
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        cpus = float(ray.cluster_resources().get("CPU", 0.0))
        pids = self._ray.get([a.pid.remote() for a in [*self.actors, *self.cluster_actors]],
                             timeout=timeout)
        return RayFootprint(nodes=len(nodes), cpus=cpus, actor_pids=tuple(int(p) for p in pids))

    def close(self) -> None:
        """Kill the shard actors (no restart); shut Ray down if this backend started it."""
        for actor in [*self.actors, *self.cluster_actors]:
            self._ray.kill(actor, no_restart=True)
        self.actors, self.cluster_actors = [], []
        if self._owns_ray:
            self._ray.shutdown()
            self._owns_ray = False
