"""The Ray wrapper on a real local Ray: shard actors answer like LocalBackend, survive a kill, close cleanly.

No sandbox needed; one small local Ray for the module, always shut down.
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
from federation.coordinator import shards
from federation.core import fit, placement

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
ONE_CPU = fit.shape_from_pod_spec({"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]})


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def backend(local_ray: None) -> Iterator[shards.RayBackend]:
    made = shards.RayBackend(shards=2)
    try:
        yield made
    finally:
        made.close()


def batch(count: int = 20) -> list[shards.PlaceRequest]:
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
        out.append(shards.PlaceRequest(
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


def test_close_leaves_no_actor(local_ray: None) -> None:
    made = shards.RayBackend(shards=2)
    actors = list(made.actors)
    assert ray.get([a.ping.remote() for a in actors], timeout=60) == ["ok", "ok"]
    made.close()
    assert made.actors == []
    assert ray.is_initialized()  # Ray was started by the fixture, not by the backend
    for actor in actors:
        assert dies_soon(actor)


def dies_soon(actor: Any, seconds: float = 30) -> bool:
    """Whether calls to `actor` fail with RayActorError within `seconds` (ray.kill is asynchronous)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ping.remote(), timeout=seconds)
        except ray.exceptions.RayActorError:
            return True
        time.sleep(0.2)
    return False
