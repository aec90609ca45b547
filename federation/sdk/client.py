"""`PlacementClient`: the synchronous Python SDK for the coordinator's PlacementService.

Why a wrapper over the generated stub: callers want typed results (`federation.sdk.types`) and
errors named for what went wrong — `SpreadNotFound`, `InvalidRequest` with every problem's field
path, `CoordinatorUnavailable` naming the address — instead of `grpc.RpcError` and status codes.
Every call has a deadline (the client's `timeout`), so a dead coordinator fails fast rather than
hanging a script.

The coordinator serves mTLS: `PlacementClient.with_tls` reads a client certificate from
`fedspread certs client NAME`; the user NAME reads what the hub's RBAC lets it read
(`PermissionDenied` otherwise; an agent's certificate reads nothing). The plain
constructor speaks plaintext unless given `credentials`, for a coordinator run with `--insecure`.
A TLS mismatch surfaces as an unreachable coordinator, so that error carries a hint.

    with PlacementClient.with_tls("127.0.0.1:7443", ca="pki/alice/ca.crt",
                                  cert="pki/alice/tls.crt", key="pki/alice/tls.key") as client:
        print(client.placement("shop/web").to_json())
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from federation.rpc import placement_pb2, placement_pb2_grpc
from federation.sdk import calls, types

T = TypeVar("T")
SpreadInput = calls.SpreadInput


class PlacementClient(calls.ClientState):
    """A connection to the coordinator's PlacementService; use as a context manager or `close()`."""

    def __init__(
        self, target: str, *, credentials: grpc.ChannelCredentials | None = None,
        timeout: float = calls.DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(target, credentials=credentials, timeout=timeout)
        if credentials is None:
            self._channel = grpc.insecure_channel(target)
        else:
            self._channel = grpc.secure_channel(target, credentials)
        self._stub = placement_pb2_grpc.PlacementServiceStub(self._channel)

    def __enter__(self) -> PlacementClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel; further calls fail."""
        self._closed = True
        self._channel.close()

    def _call(self, method: Callable[..., T], request: Any, *, spread_key: str = "") -> T:
        self._check_open()
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise calls.error_from_rpc(error, self._endpoint(), spread_key=spread_key) from error

    # --- queries --------------------------------------------------------------------------------

    def placement(self, key: str) -> types.SpreadPlacement:
        """The live placement of spread `namespace/name`; SpreadNotFound if the coordinator has none."""
        message = self._call(self._stub.GetPlacement,
                             calls.request(placement_pb2.GetPlacementRequest, spread=key), spread_key=key)
        return types.placement_from_pb(message)

    def placements(self, namespace: str | None = None) -> list[types.SpreadPlacement]:
        """Every live placement (of one namespace when given), ordered by spread key."""
        found: list[types.SpreadPlacement] = []
        token = ""
        while True:
            page = self._call(self._stub.ListPlacements, calls.request(
                placement_pb2.ListPlacementsRequest, namespace=namespace or "", page_token=token))
            found.extend(types.placement_from_pb(p) for p in page.placements)
            token = page.next_page_token
            if not token:
                return found

    def watch(self, key: str, *, timeout: float | None = None) -> Iterator[types.SpreadPlacement]:
        """The current placement of `key`, then each new one, until the spread is deleted, `timeout`
        seconds pass (then the iteration just ends) or the caller stops iterating."""
        request = calls.watch_request(key)
        self._check_open()
        call = self._stub.WatchPlacement(request, timeout=timeout)
        try:
            for event in call:
                if event.type == placement_pb2.PlacementEvent.TYPE_DELETED:
                    return
                yield types.placement_from_pb(event.placement)
        except grpc.RpcError as error:
            if calls.watch_ended(error):
                return
            raise calls.error_from_rpc(error, self._endpoint(), spread_key=key) from error
        finally:
            call.cancel()

    def clusters(self, *, include_node_pools: bool = False) -> list[types.ClusterInfo]:
        """Member clusters as the coordinator sees them, ordered by name."""
        answer = self._call(self._stub.ListClusters,
                            placement_pb2.ListClustersRequest(include_node_pools=include_node_pools))
        return [types.cluster_from_pb(c) for c in answer.clusters]

    def simulate(
        self, spread_input: SpreadInput, *, replicas: int | None = None,
        template: calls.TemplateInput = None, clusters: calls.ClustersInput = None,
    ) -> types.SpreadPlacement:
        """What-if: where `spread_input` (YAML/JSON text, a mapping or a model) would place
        `replicas` on the live capacity, or on `clusters` (a CLUSTERS.yaml-shaped snapshot).
        Nothing is applied. InvalidRequest lists every problem of an invalid spread."""
        request = calls.simulate_request(spread_input, replicas=replicas, template=template,
                                         clusters=clusters)
        return types.placement_from_pb(self._call(self._stub.Simulate, request))

    def explain(self, key: str) -> types.Explanation:
        """Why spread `namespace/name` is placed as it is: caps, capacities, reasons per subset."""
        message = self._call(self._stub.Explain, calls.request(placement_pb2.ExplainRequest, spread=key),
                             spread_key=key)
        return types.explanation_from_pb(message)

    def rebalance(self, key: str, *, dry_run: bool = False,
                  max_surge: int | None = None) -> types.RebalancePlan:
        """Move spread `namespace/name`'s replicas back to its higher-priority subsets once, surge
        first (`fedspread rebalance`), whatever its spec.rebalance.policy; the plan it follows.
        `dry_run`: only the plan. `max_surge`: extra pods per step (default: spec.rebalance's).
        Needs `patch` on the spread (a dry run: `get`)."""
        request = calls.request(placement_pb2.RebalanceRequest, spread=key, dry_run=dry_run)
        if max_surge is not None:
            request.max_surge = max_surge
        return types.rebalance_from_pb(self._call(self._stub.Rebalance, request, spread_key=key))
