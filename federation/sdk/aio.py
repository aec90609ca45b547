"""`AsyncPlacementClient`: the asyncio Python SDK for the coordinator's PlacementService.

Why a second client: a service built on asyncio (an operator, a web backend) must not block its
event loop on a placement query, and wrapping the synchronous client in threads loses the natural
way to watch (`async for`). This client speaks `grpc.aio` and mirrors `PlacementClient` method for
method — same arguments, same typed results, same errors (the request building and error mapping
are `federation.sdk.calls`, shared by both), and the same deadline (`timeout`) on every unary call.

Construct it inside a running event loop (grpc.aio binds a channel to the loop that made it):

    async with AsyncPlacementClient.with_tls("127.0.0.1:7443", ca="pki/alice/ca.crt",
                                             cert="pki/alice/tls.crt", key="pki/alice/tls.key") as client:
        print((await client.placement("shop/web")).clusters)
        async for update in client.watch("shop/web", timeout=30):
            print(update.clusters)

A watch left before its end is cancelled when its iterator is closed (`contextlib.aclosing`) or,
at the latest, when the client is closed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
import grpc.aio

from federation.rpc import placement_pb2, placement_pb2_grpc
from federation.sdk import calls, types

T = TypeVar("T")


class AsyncPlacementClient(calls.ClientState):
    """An asyncio connection to the coordinator's PlacementService; `async with` it or `await close()`."""

    def __init__(
        self, target: str, *, credentials: grpc.ChannelCredentials | None = None,
        timeout: float = calls.DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(target, credentials=credentials, timeout=timeout)
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(target)
        else:
            self._channel = grpc.aio.secure_channel(target, credentials)
        self._stub = placement_pb2_grpc.PlacementServiceStub(self._channel)

    async def __aenter__(self) -> AsyncPlacementClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel, cancelling calls under way; further calls fail."""
        self._closed = True
        await self._channel.close()

    async def _call(self, method: Callable[..., Awaitable[T]], request: Any, *, spread_key: str = "") -> T:
        self._check_open()
        try:
            return await method(request, timeout=self.timeout)
        except grpc.RpcError as error:  # grpc.aio.AioRpcError is one
            raise calls.error_from_rpc(error, self._endpoint(), spread_key=spread_key) from error

    # --- queries --------------------------------------------------------------------------------

    async def placement(self, key: str) -> types.SpreadPlacement:
        """The live placement of spread `namespace/name`; SpreadNotFound if the coordinator has none."""
        message = await self._call(self._stub.GetPlacement,
                                   calls.request(placement_pb2.GetPlacementRequest, spread=key),
                                   spread_key=key)
        return types.placement_from_pb(message)

    async def placements(self, namespace: str | None = None) -> list[types.SpreadPlacement]:
        """Every live placement (of one namespace when given), ordered by spread key."""
        found: list[types.SpreadPlacement] = []
        token = ""
        while True:
            page = await self._call(self._stub.ListPlacements, calls.request(
                placement_pb2.ListPlacementsRequest, namespace=namespace or "", page_token=token))
            found.extend(types.placement_from_pb(p) for p in page.placements)
            token = page.next_page_token
            if not token:
                return found

    async def watch(self, key: str, *, timeout: float | None = None) -> AsyncIterator[types.SpreadPlacement]:
        """The current placement of `key`, then each new one, until the spread is deleted, `timeout`
        seconds pass (then the iteration just ends) or the caller stops iterating."""
        request = calls.watch_request(key)
        self._check_open()
        call = self._stub.WatchPlacement(request, timeout=timeout)
        try:
            async for event in call:
                if event.type == placement_pb2.PlacementEvent.TYPE_DELETED:
                    return
                yield types.placement_from_pb(event.placement)
        except grpc.RpcError as error:
            if calls.watch_ended(error):
                return
            raise calls.error_from_rpc(error, self._endpoint(), spread_key=key) from error
        finally:
            call.cancel()

    async def clusters(self, *, include_node_pools: bool = False) -> list[types.ClusterInfo]:
        """Member clusters as the coordinator sees them, ordered by name."""
        answer = await self._call(self._stub.ListClusters,
                                  placement_pb2.ListClustersRequest(include_node_pools=include_node_pools))
        return [types.cluster_from_pb(c) for c in answer.clusters]

    async def simulate(
        self, spread_input: calls.SpreadInput, *, replicas: int | None = None,
        template: calls.TemplateInput = None, clusters: calls.ClustersInput = None,
    ) -> types.SpreadPlacement:
        """What-if: where `spread_input` (YAML/JSON text, a mapping or a model) would place
        `replicas` on the live capacity, or on `clusters` (a CLUSTERS.yaml-shaped snapshot).
        Nothing is applied. InvalidRequest lists every problem of an invalid spread."""
        request = calls.simulate_request(spread_input, replicas=replicas, template=template,
                                         clusters=clusters)
        return types.placement_from_pb(await self._call(self._stub.Simulate, request))

    async def explain(self, key: str) -> types.Explanation:
        """Why spread `namespace/name` is placed as it is: caps, capacities, reasons per subset."""
        request = calls.request(placement_pb2.ExplainRequest, spread=key)
        message = await self._call(self._stub.Explain, request, spread_key=key)
        return types.explanation_from_pb(message)

    async def rebalance(self, key: str, *, dry_run: bool = False,
                        max_surge: int | None = None) -> types.RebalancePlan:
        """`PlacementClient.rebalance`."""
        request = calls.request(placement_pb2.RebalanceRequest, spread=key, dry_run=dry_run)
        if max_surge is not None:
            request.max_surge = max_surge
        return types.rebalance_from_pb(await self._call(self._stub.Rebalance, request, spread_key=key))
