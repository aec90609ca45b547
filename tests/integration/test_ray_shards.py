"""The Ray wrapper on a real local Ray: shard actors answer like LocalBackend, survive a kill, close cleanly.

No sandbox needed; the session's small local Ray (conftest `local_ray`).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from federation.api import cluster
from federation.api import spread as spread_api
from federation.coordinator import capacity, loop, shards, world
from federation.core import fit, overcommit, placement

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
            key=f"shop/web-{i}", spec=spec, replicas=2 + i, snapshot=snap, shape=ONE_CPU if i % 3 else None,
            current={"onprem": {"dc1": 1}} if i % 2 else None, marks=marks, now=NOW,
        ))
    return out


def test_two_shards_give_the_same_placements_as_local(backend: shards.RayBackend) -> None:
    requests = batch()
    expected = shards.LocalBackend().place_batch(requests)
    owners = {backend.shard_for(r.key) for r in requests}
    assert owners == {0, 1}  # the batch really is split across both actors
    assert backend.place_batch(requests) == expected
    assert backend.simulate_many(requests) == expected
    assert backend.place_batch([]) == []


def test_a_killed_shard_restarts_and_keeps_answering(backend: shards.RayBackend) -> None:
    requests = batch()
    expected = shards.LocalBackend().place_batch(requests)
    assert backend.place_batch(requests) == expected
    before = ray.get(backend.actors[0].pid.remote())
    ray.kill(backend.actors[0], no_restart=False)
    assert backend.place_batch(requests) == expected
    assert ray.get(backend.actors[0].pid.remote()) != before  # a new process, not the old one
    assert ray.get([a.ping.remote() for a in backend.actors], timeout=60) == ["ok", "ok"]


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


def report_three(backend: shards.PlacementBackend) -> list[capacity.CapacityQuery]:
    for name, nodes in {"dc1": 2, "azure": 3, "gcp": 5}.items():
        backend.report_inventory(name, [cluster.NodePool(name="std", count=nodes,
                                                         allocatable={"cpu": "4", "pods": "110"})])
    return [capacity.CapacityQuery(cluster=name, shape=ONE_CPU) for name in ONE_CPU_QUERY]


def test_cluster_shards_answer_like_the_local_backend(backend: shards.RayBackend) -> None:
    queries = report_three(backend)
    assert {backend.cluster_shard_for(q.cluster) for q in queries} == {0, 1}  # both shards hold some
    expected = shards.LocalBackend()
    report_three(expected)
    pending = capacity.CapacityQuery(cluster="azure", shape=ONE_CPU, pending=(
        overcommit.PendingPods(cluster="azure", shape=ONE_CPU, count=6),))
    unknown = capacity.CapacityQuery(cluster="nowhere", shape=ONE_CPU)
    assert backend.free_capacity([*queries, pending, unknown]) == \
        expected.free_capacity([*queries, pending, unknown]) == [*ONE_CPU_QUERY.values(), 6, None]
    backend.forget_cluster("gcp")
    assert backend.free_capacity(queries) == [8, 12, None]


def test_a_killed_cluster_shard_is_reloaded_from_the_ledger(backend: shards.RayBackend) -> None:
    queries = report_three(backend)
    assert backend.free_capacity(queries) == list(ONE_CPU_QUERY.values())
    victim = backend.cluster_actors[0]
    before = ray.get(victim.pid.remote())
    ray.kill(victim, no_restart=False)  # asynchronous: wait for the new process before asking
    deadline = time.monotonic() + 60
    while ray.get(victim.pid.remote(), timeout=60) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray.get(victim.clusters.remote()) == []  # restarted empty
    assert backend.free_capacity(queries) == list(ONE_CPU_QUERY.values())  # reloaded, then answered
    assert backend.reloads == 1


def test_a_round_on_the_shards_equals_the_round_in_process(backend: shards.RayBackend) -> None:
    worlds = []
    for _ in range(2):
        model = world.World(lambda: NOW)
        for name, nodes in {"tiny": 1, "big": 10}.items():
            model.upsert_cluster(name, labels={})
            model.inventory(name, [cluster.NodePool(name="std", count=nodes,
                                                    allocatable={"cpu": "4", "pods": "110"})])
            model.heartbeat(name)
        for i in range(12):  # twelve spreads competing for tiny's four one-cpu slots
            item = spread_api.FederatedSpread.model_validate({
                "metadata": {"name": f"s{i:02d}", "namespace": "shop"},
                "spec": {"targetRef": {"name": f"s{i:02d}"}, "scheduleStrategy": {"type": "Adaptive"},
                         "subsets": [{"name": "small", "clusters": ["tiny"]},
                                     {"name": "rest", "clusters": ["big"]}]}})
            model.upsert_spread(item)
            model.set_target(item.key, replicas=1 + i % 3, template={"spec": {"template": {"spec": {
                "containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}}}})
        worlds.append(model)
    keys = [e.key for e in worlds[0].spreads()]
    on_ray = loop.recompute(worlds[0], keys, now=NOW, place_batch=backend.place_batch)
    in_process = loop.recompute(worlds[1], keys, now=NOW)
    assert on_ray.placements == in_process.placements
    assert sum(p.clusters["tiny"] for p in on_ray.placements.values()) == 4  # never overcommitted
