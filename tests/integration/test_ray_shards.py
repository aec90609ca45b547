"""The Ray wrapper on a real local Ray: shard actors answer like LocalBackend, survive a kill, close cleanly.

No sandbox needed; the session's small local Ray (conftest `local_ray`).
"""

from __future__ import annotations

import datetime
import random
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import ray

from federation.api import cluster
from federation.api import spread as spread_api
from federation.coordinator import backends, shards
from federation.coordinator.model import capacity, loop, world
from federation.core import fit, pending_deduction, placement, placement_inputs
from tests.support import builders, contended_round, soak

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
ONE_CPU = fit.shape_from_pod_spec({"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]})


@pytest.fixture
def backend(local_ray: str) -> Iterator[shards.RayBackend]:
    made = shards.RayBackend(shards=2, cluster_shards=2)
    try:
        yield made
    finally:
        made.close()


def batch(count: int = 20) -> list[loop.PlaceRequest]:
    def member(name: str, nodes: int) -> dict[str, Any]:
        return {"name": name, "nodePools": [{"count": nodes, "allocatable": {"cpu": "4", "pods": 110}}]}

    snap = cluster.CapacitySnapshot.model_validate(
        {"clusters": [member("dc1", 2), member("aws", 3), member("gcp", 5)]}
    )
    out = []
    for i in range(count):
        spec = spread_api.FederatedSpreadSpec.model_validate({
            "targetRef": {"name": f"web-{i}"},
            "subsets": [{"name": "onprem", "clusters": ["dc1"], "maxReplicas": i % 4},
                        {"name": "cloud", "clusters": ["aws", "gcp"]}],
            "scheduleStrategy": {"type": "Adaptive" if i % 2 else "Fixed"},
        })
        marks = (placement.UnschedulableMark("cloud", "aws", NOW),) if i % 5 == 0 else ()
        out.append(loop.PlaceRequest(
            key=f"shop/web-{i}", spec=spec, replicas=2 + i, snapshot=snap,
            inputs=placement_inputs.PlacementInputs(
                shape=ONE_CPU if i % 3 else None, current={"onprem": {"dc1": 1}} if i % 2 else None,
                marks=marks, now=NOW),
        ))
    return out


def test_two_shards_give_the_same_placements_as_local(backend: shards.RayBackend) -> None:
    requests = batch()
    expected = backends.LocalBackend().place_batch(requests)
    owners = {backend.shard_for(r.key) for r in requests}
    assert owners == {0, 1}  # the batch really is split across both actors
    assert backend.place_batch(requests) == expected
    assert backend.simulate_many(requests) == expected
    assert backend.place_batch([]) == []


class Asker:
    """Asks the backend for the batch's placements and the capacities in a loop, from a thread,
    while a test kills actors: every answer must be the undisturbed one, and no call may fail."""

    def __init__(self, backend: shards.RayBackend, requests: list[loop.PlaceRequest],
                 queries: list[capacity.CapacityQuery]) -> None:
        self.backend, self.requests, self.queries = backend, requests, queries
        self.placements = backends.LocalBackend().place_batch(requests)
        self.free = list(ONE_CPU_QUERY.values())
        self.rounds = 0
        self.wrong: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="asker", daemon=True)

    def __enter__(self) -> Asker:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(120)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.backend.place_batch(self.requests) != self.placements:
                    self.wrong.append(f"round {self.rounds}: other placements")
                free = self.backend.free_capacity(self.queries)
                if free != self.free:
                    self.wrong.append(f"round {self.rounds}: capacities {free}")
            except Exception as error:  # a call that fails while an actor restarts is a failure too
                self.wrong.append(f"round {self.rounds}: {type(error).__name__}: {error}")
            self.rounds += 1

    def wait_rounds(self, more: int, *, timeout: float = 120) -> None:
        """Block until `more` further rounds completed (the restarted actors answered them)."""
        target, deadline = self.rounds + more, time.monotonic() + timeout
        while self.rounds < target and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.rounds >= target, f"only {self.rounds} rounds of {target} within {timeout} s"


def restarted(actor: Any, before: int, *, timeout: float = 60) -> int:
    """The actor's new pid once Ray restarted it (ray.kill is asynchronous)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now: int = ray.get(actor.pid.remote(), timeout=timeout)
        if now != before:
            return now
        time.sleep(0.1)
    raise AssertionError(f"the actor still runs as pid {before} after {timeout} s")


@pytest.mark.parametrize("seed", soak.seeds(3))
def test_shards_killed_mid_call_restart_and_answer_as_before(backend: shards.RayBackend, seed: int) -> None:
    """Spread and cluster shards killed at random moments while calls are in flight: every call
    still answers as LocalBackend does (Ray restarts the actor and retries; a ClusterShard that
    came back empty is reloaded from the ledger), and the restarted ClusterShard holds the
    inventories again."""
    rng = random.Random(seed)
    asker = Asker(backend, batch(), report_three(backend))
    victims = rng.sample([("spread", 0), ("spread", 1), ("cluster", 0), ("cluster", 1)], rng.randint(1, 3))
    with asker:
        asker.wait_rounds(1)
        for kind, index in victims:
            actor = (backend.actors if kind == "spread" else backend.cluster_actors)[index]
            before = ray.get(actor.pid.remote())
            time.sleep(rng.uniform(0.0, 0.3))  # a random moment in the asking loop
            ray.kill(actor, no_restart=False)
            restarted(actor, before)
        asker.wait_rounds(3)
    assert asker.wrong == [], f"seed {seed}, killed {victims}: {asker.wrong[:5]}"
    killed_inventories = [index for kind, index in victims if kind == "cluster"]
    for index in killed_inventories:  # rebuilt: the restarted shard holds its clusters again
        owned = sorted(name for name in ONE_CPU_QUERY if backend.cluster_shard_for(name) == index)
        assert ray.get(backend.cluster_actors[index].clusters.remote()) == owned, f"seed {seed}"
    assert backend.reloads >= len(killed_inventories), f"seed {seed}: {backend.reloads} reloads"


def test_close_leaves_no_actor(local_ray: str) -> None:
    made = shards.RayBackend(shards=2)
    actors = list(made.actors)
    assert ray.get([a.ping.remote() for a in actors], timeout=60) == ["ok", "ok"]
    inventories = list(made.cluster_actors)
    made.close()
    assert made.actors == [] and made.cluster_actors == []
    assert ray.is_initialized()  # Ray was started by the fixture, not by the backend
    for actor in actors:
        assert dies_soon(actor)
    for actor in inventories:
        assert dies_soon(actor, method="pid")


def dies_soon(actor: Any, seconds: float = 30, *, method: str = "ping") -> bool:
    """Whether calls to `actor` fail with RayActorError within `seconds` (ray.kill is asynchronous)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ray.get(getattr(actor, method).remote(), timeout=seconds)
        except ray.exceptions.RayActorError:
            return True
        time.sleep(0.2)
    return False


ONE_CPU_QUERY = {"dc1": 8, "azure": 12, "gcp": 20}  # 2, 3 and 5 nodes of 4 cpu, one-cpu pods


def report_three(backend: backends.PlacementBackend) -> list[capacity.CapacityQuery]:
    for name, nodes in {"dc1": 2, "azure": 3, "gcp": 5}.items():
        backend.report_inventory(name, [builders.node_pool(nodes)])
    return [capacity.CapacityQuery(cluster=name, shape=ONE_CPU) for name in ONE_CPU_QUERY]


def test_cluster_shards_answer_like_the_local_backend(backend: shards.RayBackend) -> None:
    queries = report_three(backend)
    assert {backend.cluster_shard_for(q.cluster) for q in queries} == {0, 1}  # both shards hold some
    expected = backends.LocalBackend()
    report_three(expected)
    pending = capacity.CapacityQuery(cluster="azure", shape=ONE_CPU, pending=(
        pending_deduction.PendingPods(cluster="azure", shape=ONE_CPU, count=6),))
    unknown = capacity.CapacityQuery(cluster="nowhere", shape=ONE_CPU)
    assert backend.free_capacity([*queries, pending, unknown]) == \
        expected.free_capacity([*queries, pending, unknown]) == [*ONE_CPU_QUERY.values(), 6, None]
    backend.forget_cluster("gcp")
    assert backend.free_capacity(queries) == [8, 12, None]


def round_world() -> world.World:
    """Twelve spreads competing for tiny's four one-cpu slots, with room to spare in big (a round of
    them is contended: against one snapshot each would take tiny's slots)."""
    return contended_round.contended_world({"tiny": 1, "big": 10}, now=NOW)


def test_a_round_on_the_shards_equals_the_round_in_process(backend: shards.RayBackend) -> None:
    worlds = [round_world(), round_world()]
    keys = [e.key for e in worlds[0].spreads()]
    on_ray = loop.recompute(worlds[0], keys, now=NOW, place_batch=backend.place_batch, parallel_from=2)
    in_process = loop.recompute(worlds[1], keys, now=NOW)
    assert on_ray.placements == in_process.placements
    assert on_ray.replaced == in_process.replaced > 0  # tiny is contended: placed again, both alike
    assert sum(p.clusters["tiny"] for p in on_ray.placements.values()) == 4  # never overcommitted


def test_a_round_checked_on_the_cluster_shards_equals_the_round_in_process(local_ray: str) -> None:
    """`place_round`: the SpreadShards cut their answers into rows for the ClusterShards, which
    check the round's node pools; the coordinator only unions what they find and places the
    contended spreads again on the folds they send back: the same round as in-process."""
    made = shards.RayBackend(shards=2, cluster_shards=3)
    try:
        assert {made.cluster_shard_for(name) for name in ("tiny", "big")} == {0, 1}  # two check a part
        worlds = [round_world(), round_world()]
        keys = [e.key for e in worlds[0].spreads()]
        on_ray = loop.recompute(worlds[0], keys, now=NOW, place_round=made.place_round, parallel_from=2)
        in_process = loop.recompute(worlds[1], keys, now=NOW)
        assert on_ray.fell_back == ""
        assert on_ray.placements == in_process.placements
        assert on_ray.replaced == in_process.replaced > 0
        assert sum(p.clusters["tiny"] for p in on_ray.placements.values()) == 4  # never overcommitted
    finally:
        made.close()


def test_a_round_whose_check_meets_a_dead_cluster_shard_is_checked_in_process(local_ray: str) -> None:
    """The first answers come back, the ClusterShard that should check a part is gone: the round is
    checked in the coordinator with the same answers (`fell_back` says so), never lost."""
    made = shards.RayBackend(shards=2, cluster_shards=3, place_seconds=60.0)
    try:
        ray.kill(made.cluster_actors[made.cluster_shard_for("tiny")], no_restart=True)
        worlds = [round_world(), round_world()]
        keys = [e.key for e in worlds[0].spreads()]
        fell = loop.recompute(worlds[0], keys, now=NOW, place_round=made.place_round, parallel_from=2)
        alone = loop.recompute(worlds[1], keys, now=NOW)
        assert "the round's check" in fell.fell_back, fell.fell_back
        assert fell.placements == alone.placements and fell.replaced == alone.replaced > 0
    finally:
        made.close()


def test_a_round_below_the_crossover_is_placed_in_process_with_the_shards_answer(
    backend: shards.RayBackend,
) -> None:
    """A round of fewer spreads than `parallel_from` (the backend's: `shards.RAY_ROUND_MIN_SPREADS`,
    the measured crossover) never asks the shards, and its answer is the one the shards give."""
    asked: list[int] = []

    def counted(requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        asked.append(len(requests))
        return backend.place_batch(requests)

    worlds = [round_world(), round_world()]
    keys = [e.key for e in worlds[0].spreads()]
    below = loop.recompute(worlds[0], keys, now=NOW, place_batch=counted, parallel_from=len(keys) + 1)
    assert asked == []
    at = loop.recompute(worlds[1], keys, now=NOW, place_batch=counted, parallel_from=len(keys))
    assert asked == [len(keys)]  # the same round at the crossover goes to the shards
    assert below.placements == at.placements and below.replaced == at.replaced > 0
    assert len(keys) < backend.parallel_from  # the measured crossover is far above 12
    by_default = loop.recompute(round_world(), keys, now=NOW, place_batch=counted,
                                parallel_from=backend.parallel_from)
    assert asked == [len(keys)]  # the coordinator's default kept this round off the shards
    assert by_default.placements == below.placements


def assert_round_placed_in_process(made: shards.RayBackend, *, why: str) -> None:
    """A round on `made` fell back, saying `why`, and placed what the coordinator's own pass does."""
    worlds = [round_world(), round_world()]
    keys = [entry.key for entry in worlds[0].spreads()]
    fell = loop.recompute(worlds[0], keys, now=NOW, place_batch=made.place_batch, parallel_from=2)
    alone = loop.recompute(worlds[1], keys, now=NOW)
    assert fell.fell_back and why in fell.fell_back, fell.fell_back
    assert fell.placements == alone.placements and fell.placements


def test_a_batch_past_its_deadline_is_placed_in_process(local_ray: str) -> None:
    """A shard that does not answer within `place_seconds` makes `place_batch` raise PlaceTimeout,
    and a round on it gives the placements the coordinator's own pass gives."""
    class Stalled:  # defined here: Ray ships it by value (a test module is not importable by workers)
        """A SpreadShard stand-in that never answers a placement batch (a hung node)."""

        def place_batch(self, requests: list[loop.PlaceRequest]) -> list[placement.Placement]:
            time.sleep(3600)
            return []

    made = shards.RayBackend(shards=1, place_seconds=2.0)
    stalled = ray.remote(num_cpus=0)(Stalled).remote()
    real, made.actors = made.actors, [stalled]
    try:
        with pytest.raises(backends.PlaceTimeout, match="within 2 s"):
            made.place_batch(batch(3))
        assert_round_placed_in_process(made, why="did not answer")
    finally:
        made.actors = [*real, stalled]
        made.close()


def test_a_round_sent_in_chunks_with_a_stalled_shard_is_placed_in_process(local_ray: str) -> None:
    """A round sent a request at a time (`round_chunk=1`) to two SpreadShards, one of which never
    answers: waiting for the answers misses the deadline, and the round is placed and
    checked in the coordinator with the same answers (`fell_back` says so), never lost; with both
    shards answering, the same chunked round is the in-process round."""
    class StalledRound:  # defined here: Ray ships it by value
        """A SpreadShard stand-in that never answers a round's chunk (a hung node)."""

        def place_round(self, shipped: bytes, parts: int, round_id: str) -> tuple[object, ...]:
            time.sleep(3600)
            return ()

    made = shards.RayBackend(shards=2, cluster_shards=2, place_seconds=60.0, round_chunk=1)
    stalled = ray.remote(num_cpus=0)(StalledRound).remote()
    try:
        worlds = [round_world(), round_world(), round_world()]
        keys = [e.key for e in worlds[0].spreads()]
        chunked = loop.recompute(worlds[0], keys, now=NOW, place_round=made.place_round, parallel_from=2)
        alone = loop.recompute(worlds[1], keys, now=NOW)
        assert chunked.fell_back == "" and chunked.placements == alone.placements
        assert {made.shard_for(key) for key in keys} == {0, 1}  # the stalled shard owns some spreads
        made.place_seconds = 2.0  # short only now: starting the actors for the first round may take longer
        real, made.actors = made.actors, [made.actors[0], stalled]
        try:
            fell = loop.recompute(worlds[2], keys, now=NOW, place_round=made.place_round, parallel_from=2)
        finally:
            made.actors = real
        assert "did not answer" in fell.fell_back, fell.fell_back
        assert fell.placements == alone.placements and fell.replaced == alone.replaced > 0
    finally:
        ray.kill(stalled, no_restart=True)
        made.close()


def test_a_batch_for_a_dead_shard_is_placed_in_process(local_ray: str) -> None:
    """A shard whose actor is gone (killed, not restarted) makes `place_batch` raise
    ShardUnavailable at once, and a round on it gives the placements of the coordinator's own pass,
    instead of failing the event that asked for it."""
    made = shards.RayBackend(shards=1, place_seconds=60.0)
    try:
        ray.kill(made.actors[0], no_restart=True)
        with pytest.raises(backends.ShardUnavailable, match="unavailable"):
            made.place_batch(batch(3))
        assert_round_placed_in_process(made, why="unavailable")
    finally:
        made.close()


def test_every_call_the_backend_waits_for_has_the_deadline(local_ray: str) -> None:
    """A what-if batch and a capacity answer wait at most `place_seconds` too (PlaceTimeout: the
    PlacementService answers UNAVAILABLE), and a dead ClusterShard is ShardUnavailable, not a hang."""
    class StalledShard:  # defined here: Ray ships it by value
        """A ClusterShard stand-in that never answers (a hung node)."""

        def free_capacity(self, queries: list[capacity.CapacityQuery]) -> tuple[str, list[int | None]]:
            time.sleep(3600)
            return "", []

    def stalled_task(requests: list[loop.PlaceRequest]) -> list[placement.Placement]:
        time.sleep(3600)
        return []

    made = shards.RayBackend(shards=1, cluster_shards=1, place_seconds=2.0)
    queries = report_three(made)
    stalled = ray.remote(num_cpus=0)(StalledShard).remote()
    real_actors, real_task = made.cluster_actors, made._task
    try:
        made._task = ray.remote(num_cpus=0)(stalled_task)
        with pytest.raises(backends.PlaceTimeout, match="within 2 s"):
            made.simulate_many(batch(2))
        made.cluster_actors = [stalled]
        with pytest.raises(backends.PlaceTimeout, match="within 2 s"):
            made.free_capacity(queries)
        made.cluster_actors = real_actors
        ray.kill(real_actors[0], no_restart=True)
        with pytest.raises(backends.ShardUnavailable):
            made.free_capacity(queries)
    finally:
        made._task = real_task
        made.cluster_actors = [*real_actors, stalled]
        made.close()


def test_a_spread_shard_restarted_between_rounds_is_sent_every_spec_again(local_ray: str) -> None:
    """The SpreadShards keep the specs of their last round (`shard_specs`): a second round sends no
    spec. A SpreadShard restarted after it holds none, so the third round's calls that name specs
    by token fail there and the round is placed in the coordinator (`fell_back`); the fourth sends
    every spec again and is placed on the shards. Every round answers as in-process."""
    made = shards.RayBackend(shards=2, cluster_shards=2, place_seconds=60.0)
    try:
        worlds = [round_world(), round_world()]
        keys = [e.key for e in worlds[0].spreads()]
        rounds = []
        for step in range(4):
            if step == 2:
                victim = made.actors[made.shard_for(keys[0])]
                before: int = ray.get(victim.pid.remote(), timeout=60)
                ray.kill(victim, no_restart=False)
                restarted(victim, before)
            on_ray = loop.recompute(worlds[0], keys, now=NOW, place_round=made.place_round, parallel_from=2)
            in_process = loop.recompute(worlds[1], keys, now=NOW)
            assert on_ray.placements == in_process.placements, f"round {step + 1}"
            rounds.append((on_ray.fell_back, sum(s.specs_shipped for s in made.specs_sent)))
        assert [fell for fell, _ in rounds] == ["", "", rounds[2][0], ""] and rounds[2][0], rounds
        shipped = [count for _, count in rounds]
        assert shipped[0] == shipped[1] == len(keys), "the second round sent tokens only"
        assert shipped[3] == shipped[2] + len(keys), "after the failed round, every spec went again"
    finally:
        made.close()
