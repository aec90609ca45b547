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

import json
import os
import pathlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import grpc

from federation.api import cluster, spread
from federation.certs import store, transport
from federation.rpc import access, placement_pb2, placement_pb2_grpc
from federation.sdk import types

PROBLEMS_TRAILER = "fedspread-problems"  # set by the coordinator with INVALID_ARGUMENT

T = TypeVar("T")
M = TypeVar("M")
SpreadInput = str | Mapping[str, Any] | spread.FederatedSpread | spread.FederatedSpreadSpec


def _problems(error: grpc.RpcError) -> list[types.Problem]:
    for key, value in error.trailing_metadata() or ():
        if key == PROBLEMS_TRAILER:
            try:
                return [types.Problem(str(p["path"]), str(p["message"])) for p in json.loads(value)]
            except (ValueError, KeyError, TypeError):
                return []
    return []


def _trailer(error: grpc.RpcError, key: str) -> str | None:
    for found, value in error.trailing_metadata() or ():
        if found == key:
            return str(value)
    return None


def _as_json(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, spread.FederatedSpread | spread.FederatedSpreadSpec | cluster.CapacitySnapshot):
        return value.model_dump_json(by_alias=True, exclude_none=True)
    return json.dumps(value)


def _request(message: Callable[..., M], **fields: Any) -> M:
    """A request message; InvalidRequest when a field cannot be encoded (say, a lone surrogate in
    a name), instead of protobuf's UnicodeEncodeError escaping to the caller."""
    try:
        return message(**fields)
    except (ValueError, TypeError) as error:
        raise types.InvalidRequest(f"cannot encode the request: {error}") from None


class PlacementClient:
    """A connection to the coordinator's PlacementService; use as a context manager or `close()`."""

    def __init__(
        self, target: str, *, credentials: grpc.ChannelCredentials | None = None, timeout: float = 10.0
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.secure = credentials is not None
        if credentials is None:
            self._channel = grpc.insecure_channel(target)
        else:
            self._channel = grpc.secure_channel(target, credentials)
        self._stub = placement_pb2_grpc.PlacementServiceStub(self._channel)

    @classmethod
    def with_tls(
        cls, target: str, *, ca: str | os.PathLike[str], cert: str | os.PathLike[str],
        key: str | os.PathLike[str], timeout: float = 10.0,
    ) -> PlacementClient:
        """A client speaking mTLS: `cert`/`key` identify it, `ca` must have signed the coordinator's
        certificate (the three files of `fedspread certs client`); CertificateError if one is bad."""
        files = transport.TLSFiles(cert=pathlib.Path(cert), key=pathlib.Path(key), ca=pathlib.Path(ca))
        try:
            credentials = transport.channel_credentials(files)
        except store.CertFileError as error:
            raise types.CertificateError(str(error)) from None
        return cls(target, credentials=credentials, timeout=timeout)

    def __enter__(self) -> PlacementClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel; further calls fail."""
        self._channel.close()

    # --- errors ---------------------------------------------------------------------------------

    def _error(self, error: grpc.RpcError, *, spread_key: str = "") -> types.FedspreadError:
        code = error.code()
        details = error.details() or code.name
        name = code.name
        if code == grpc.StatusCode.NOT_FOUND:
            return types.SpreadNotFound(f"no spread {spread_key}" if spread_key else details, code=name)
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            return types.InvalidRequest(details, code=name, problems=_problems(error))
        if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
            return types.PermissionDenied(f"coordinator at {self.target} refused: {details}", code=name)
        access_unknown = _trailer(error, access.TRAILER) == access.UNAVAILABLE_VALUE
        if code == grpc.StatusCode.UNAVAILABLE and access_unknown:
            return types.CoordinatorUnavailable(
                f"coordinator at {self.target} could not check this client's access: {details}", code=name)
        if code == grpc.StatusCode.UNAVAILABLE:
            advice = transport.hint(details, secure=self.secure)
            return types.CoordinatorUnavailable(
                f"coordinator at {self.target} is unreachable: {details}"
                + (f" (hint: {advice})" if advice else ""), code=name)
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return types.CoordinatorUnavailable(
                f"coordinator at {self.target} did not answer within {self.timeout:g}s", code=name)
        return types.FedspreadError(f"coordinator at {self.target} answered {name}: {details}", code=name)

    def _call(self, method: Callable[..., T], request: Any, *, spread_key: str = "") -> T:
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as error:
            raise self._error(error, spread_key=spread_key) from error

    # --- queries --------------------------------------------------------------------------------

    def placement(self, key: str) -> types.SpreadPlacement:
        """The live placement of spread `namespace/name`; SpreadNotFound if the coordinator has none."""
        message = self._call(self._stub.GetPlacement, _request(placement_pb2.GetPlacementRequest, spread=key),
                             spread_key=key)
        return types.placement_from_pb(message)

    def placements(self, namespace: str | None = None) -> list[types.SpreadPlacement]:
        """Every live placement (of one namespace when given), ordered by spread key."""
        found: list[types.SpreadPlacement] = []
        token = ""
        while True:
            page = self._call(self._stub.ListPlacements, _request(
                placement_pb2.ListPlacementsRequest, namespace=namespace or "", page_token=token))
            found.extend(types.placement_from_pb(p) for p in page.placements)
            token = page.next_page_token
            if not token:
                return found

    def watch(self, key: str, *, timeout: float | None = None) -> Iterator[types.SpreadPlacement]:
        """The current placement of `key`, then each new one, until the spread is deleted, `timeout`
        seconds pass (then the iteration just ends) or the caller stops iterating."""
        if not key:  # the service reads an empty key as "every spread": not what was asked for here
            raise types.InvalidRequest('spread key "" is empty; expected "namespace/name"',
                                       code="INVALID_ARGUMENT")
        call = self._stub.WatchPlacement(_request(placement_pb2.WatchPlacementRequest, spread=key),
                                         timeout=timeout)
        try:
            for event in call:
                if event.type == placement_pb2.PlacementEvent.TYPE_DELETED:
                    return
                yield types.placement_from_pb(event.placement)
        except grpc.RpcError as error:
            if error.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
                return
            raise self._error(error, spread_key=key) from error
        finally:
            call.cancel()

    def clusters(self, *, include_node_pools: bool = False) -> list[types.ClusterInfo]:
        """Member clusters as the coordinator sees them, ordered by name."""
        answer = self._call(self._stub.ListClusters,
                            placement_pb2.ListClustersRequest(include_node_pools=include_node_pools))
        return [types.cluster_from_pb(c) for c in answer.clusters]

    @staticmethod
    def _simulation(
        spread_input: SpreadInput, *, replicas: int | None, template: Mapping[str, Any] | str | None,
        clusters: cluster.CapacitySnapshot | Mapping[str, Any] | None,
    ) -> placement_pb2.SimulateRequest:
        fields: dict[str, Any] = {"spread_yaml": _as_json(spread_input)}
        if replicas is not None:
            fields["replicas"] = replicas
        if template is not None:
            fields["template_json"] = _as_json(template)
        if clusters is not None:
            fields["clusters_json"] = _as_json(clusters)
        return _request(placement_pb2.SimulateRequest, **fields)

    def simulate(
        self, spread_input: SpreadInput, *, replicas: int | None = None,
        template: Mapping[str, Any] | str | None = None,
        clusters: cluster.CapacitySnapshot | Mapping[str, Any] | None = None,
    ) -> types.SpreadPlacement:
        """What-if: where `spread_input` (YAML/JSON text, a mapping or a model) would place
        `replicas` on the live capacity, or on `clusters` (a CLUSTERS.yaml-shaped snapshot).
        Nothing is applied. InvalidRequest lists every problem of an invalid spread."""
        request = self._simulation(spread_input, replicas=replicas, template=template, clusters=clusters)
        return types.placement_from_pb(self._call(self._stub.Simulate, request))

    def explain(self, key: str) -> types.Explanation:
        """Why spread `namespace/name` is placed as it is: caps, capacities, reasons per subset."""
        message = self._call(self._stub.Explain, _request(placement_pb2.ExplainRequest, spread=key),
                             spread_key=key)
        return types.explanation_from_pb(message)
