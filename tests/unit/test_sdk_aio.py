"""AsyncPlacementClient used as asyncio code uses it: `async with`, `await`, `async for`, many
calls at once on one channel — over a real gRPC server serving the real PlacementService.

Why besides the shared SDK tests (which run every assertion against both clients through
`tests.support.sdk_clients`): those drive the asyncio client one coroutine at a time; here the
event loop is the caller's, a watch is left early and must be cancelled, and concurrent calls
must each get their own answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest

from federation import sdk
from federation.api import cluster
from federation.coordinator.services import aio_server, placement_requests, placement_service
from federation.coordinator.wire import convert
from federation.core import placement
from tests.support import in_memory_source

SPREAD_YAML = """
metadata: {name: web, namespace: shop}
spec:
  targetRef: {name: web}
  subsets: [{name: onprem, clusters: [dc1], maxReplicas: 2}, {name: rest, clusters: [aws]}]
"""


def _record(replicas: int, *, generation: int = 1) -> convert.PlacementRecord:
    spec = placement_requests.parse_spread(SPREAD_YAML)
    snapshot = cluster.CapacitySnapshot(clusters=[cluster.ClusterCapacity(name="dc1"),
                                                  cluster.ClusterCapacity(name="aws")])
    return convert.PlacementRecord(key="shop/web", spec=spec, generation=generation,
                                   placement=placement.place(spec, replicas=replicas, snapshot=snapshot))


@pytest.fixture()
def source() -> in_memory_source.InMemorySource:
    store = in_memory_source.InMemorySource(clusters=[convert.ClusterRecord(name="dc1"),
                                                      convert.ClusterRecord(name="aws")])
    store.put("shop/web", _record(5))
    return store


@pytest.fixture()
def target(source: in_memory_source.InMemorySource) -> Iterator[str]:
    server = aio_server.AioServer(workers=4)
    placement_service.add_to_server(server.server, source)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


def test_async_with_await_and_concurrent_calls(target: str) -> None:
    async def scenario() -> None:
        async with sdk.AsyncPlacementClient(target, timeout=5.0) as client:
            web, listed, members, why = await asyncio.gather(
                client.placement("shop/web"), client.placements(), client.clusters(),
                client.explain("shop/web"))
            assert (web.replicas, web.clusters) == (5, {"aws": 3, "dc1": 2})
            assert listed == [web]
            assert [m.name for m in members] == ["aws", "dc1"]
            assert why.placement == web
            what_if = await client.simulate(SPREAD_YAML, replicas=9)
            assert what_if.clusters == {"aws": 7, "dc1": 2}
            answers = await asyncio.gather(*(client.placement(f"shop/gone-{i}") for i in range(5)),
                                           return_exceptions=True)
            assert [str(a) for a in answers] == [f"no spread shop/gone-{i}" for i in range(5)]
            assert all(isinstance(a, sdk.SpreadNotFound) for a in answers)

    asyncio.run(scenario())


def test_async_for_watch_follows_changes_and_ends_on_deletion(
        target: str, source: in_memory_source.InMemorySource) -> None:
    async def scenario() -> list[tuple[int, int]]:
        seen: list[tuple[int, int]] = []
        async with sdk.AsyncPlacementClient(target, timeout=5.0) as client:
            async for update in client.watch("shop/web", timeout=30):
                seen.append((update.replicas, update.generation))
                if len(seen) == 1:
                    source.put("shop/web", _record(7, generation=2))
                else:
                    source.remove("shop/web")
        return seen

    assert asyncio.run(scenario()) == [(5, 1), (7, 2)]


def test_a_watch_left_early_is_cancelled_and_the_client_goes_on(target: str) -> None:
    async def scenario() -> None:
        async with sdk.AsyncPlacementClient(target, timeout=5.0) as client:
            for _ in range(3):
                async with contextlib.aclosing(client.watch("shop/web")) as stream:
                    async for update in stream:
                        assert update.replicas == 5
                        break
            assert (await client.placement("shop/web")).replicas == 5
            assert [p.replicas async for p in client.watch("shop/web", timeout=0.5)] == [5]

    asyncio.run(scenario())


def test_errors_are_the_sdk_s_and_a_closed_client_refuses(target: str) -> None:
    async def scenario() -> None:
        client = sdk.AsyncPlacementClient(target, timeout=5.0)
        with pytest.raises(sdk.InvalidRequest) as bad:
            await client.placement("no-slash")
        assert bad.value.code == "INVALID_ARGUMENT"
        with pytest.raises(sdk.InvalidRequest, match="is empty"):
            await anext(client.watch(""))
        with pytest.raises(sdk.InvalidRequest) as invalid:
            await client.simulate(SPREAD_YAML.replace("maxReplicas: 2", "bogus: 1"), replicas=1)
        assert "spec.subsets[0].bogus" in [p.path for p in invalid.value.problems]
        await client.close()
        with pytest.raises(sdk.FedspreadError):
            await client.placement("shop/web")

    asyncio.run(scenario())


def test_an_unreachable_coordinator_is_coordinator_unavailable() -> None:
    async def scenario() -> None:
        async with sdk.AsyncPlacementClient("127.0.0.1:1", timeout=2.0) as client:
            with pytest.raises(sdk.CoordinatorUnavailable, match=r"coordinator at 127\.0\.0\.1:1"):
                await client.clusters()

    asyncio.run(scenario())
