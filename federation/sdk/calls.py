"""What the synchronous and the asyncio SDK clients share: requests, credentials and error mapping.

Why a module of its own: `PlacementClient` (grpc) and `AsyncPlacementClient` (grpc.aio) differ
only in how a call is awaited. What a request looks like, how a TLS bundle becomes credentials and,
above all, which `FedspreadError` a failed call becomes (the trailers the coordinator sets, the
hints for TLS trouble) must be one piece of code, or the two clients would drift and a script would
see different errors depending on which it uses. Both `grpc.RpcError` and `grpc.aio.AioRpcError`
answer `code()`, `details()` and `trailing_metadata()` synchronously once the call has failed, so
`error_from_rpc` serves both.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, Self, TypeVar

import grpc

from federation.api import cluster, spread
from federation.certs import store, transport
from federation.rpc import access, placement_pb2
from federation.sdk import types

PROBLEMS_TRAILER = "fedspread-problems"  # set by the coordinator with INVALID_ARGUMENT
DEFAULT_TIMEOUT = 10.0

M = TypeVar("M")
SpreadInput = str | Mapping[str, Any] | spread.FederatedSpread | spread.FederatedSpreadSpec
TemplateInput = Mapping[str, Any] | str | None
ClustersInput = cluster.CapacitySnapshot | Mapping[str, Any] | None


class FailedCall(Protocol):
    """What a failed call answers, in grpc and grpc.aio alike."""

    def code(self) -> grpc.StatusCode: ...

    def details(self) -> str | None: ...

    def trailing_metadata(self) -> Iterable[tuple[str, str | bytes]] | None: ...


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """Where a client connects and how: what the error messages name."""

    target: str
    secure: bool
    timeout: float


def tls_credentials(
    *, ca: str | os.PathLike[str], cert: str | os.PathLike[str], key: str | os.PathLike[str],
) -> grpc.ChannelCredentials:
    """mTLS credentials from the three files of `fedspread certs client`; CertificateError if one
    is missing, malformed, expired or not its key's."""
    files = transport.TLSFiles(cert=pathlib.Path(cert), key=pathlib.Path(key), ca=pathlib.Path(ca))
    try:
        return transport.channel_credentials(files)
    except store.CertFileError as error:
        raise types.CertificateError(str(error)) from None


class ClientState:
    """What both clients hold besides their channel: the address, the deadline of every unary call,
    whether it speaks TLS, and whether it was closed (then every call fails with `closed`)."""

    def __init__(self, target: str, *, credentials: grpc.ChannelCredentials | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.target = target
        self.timeout = timeout
        self.secure = credentials is not None
        self._closed = False

    @classmethod
    def with_tls(
        cls, target: str, *, ca: str | os.PathLike[str], cert: str | os.PathLike[str],
        key: str | os.PathLike[str], timeout: float = DEFAULT_TIMEOUT,
    ) -> Self:
        """A client speaking mTLS: `cert`/`key` identify it, `ca` must have signed the coordinator's
        certificate (the three files of `fedspread certs client`); CertificateError if one is bad."""
        return cls(target, credentials=tls_credentials(ca=ca, cert=cert, key=key), timeout=timeout)

    def _endpoint(self) -> Endpoint:
        return Endpoint(self.target, secure=self.secure, timeout=self.timeout)

    def _check_open(self) -> None:
        """A call on a closed client: the error a script would want, not gRPC's."""
        if self._closed:
            raise closed(self._endpoint())


# --- requests -------------------------------------------------------------------------------------


def request(message: Callable[..., M], **fields: Any) -> M:
    """A request message; InvalidRequest when a field cannot be encoded (say, a lone surrogate in
    a name), instead of protobuf's UnicodeEncodeError escaping to the caller."""
    try:
        return message(**fields)
    except (ValueError, TypeError) as error:
        raise types.InvalidRequest(f"cannot encode the request: {error}") from None


def as_json(value: Any) -> str:
    """Text as given; a model as its JSON (camelCase, no nulls); anything else through json."""
    if isinstance(value, str):
        return value
    if isinstance(value, spread.FederatedSpread | spread.FederatedSpreadSpec | cluster.CapacitySnapshot):
        return value.model_dump_json(by_alias=True, exclude_none=True)
    return json.dumps(value)


def watch_request(key: str) -> placement_pb2.WatchPlacementRequest:
    """The request watching one spread; InvalidRequest for an empty key, which the service would
    read as "every spread": not what was asked for."""
    if not key:
        raise types.InvalidRequest('spread key "" is empty; expected "namespace/name"',
                                   code="INVALID_ARGUMENT")
    return request(placement_pb2.WatchPlacementRequest, spread=key)


def simulate_request(
    spread_input: SpreadInput, *, replicas: int | None, template: TemplateInput, clusters: ClustersInput,
) -> placement_pb2.SimulateRequest:
    """The what-if request: the spread as text, and only the optional fields given."""
    fields: dict[str, Any] = {"spread_yaml": as_json(spread_input)}
    if replicas is not None:
        fields["replicas"] = replicas
    if template is not None:
        fields["template_json"] = as_json(template)
    if clusters is not None:
        fields["clusters_json"] = as_json(clusters)
    return request(placement_pb2.SimulateRequest, **fields)


# --- errors ---------------------------------------------------------------------------------------


def _trailer(error: FailedCall, key: str) -> str | None:
    for found, value in error.trailing_metadata() or ():
        if found == key:
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


def problems(error: FailedCall) -> list[types.Problem]:
    """The field-by-field problems the coordinator sent with INVALID_ARGUMENT (none if unreadable)."""
    value = _trailer(error, PROBLEMS_TRAILER)
    if value is None:
        return []
    try:
        return [types.Problem(str(p["path"]), str(p["message"])) for p in json.loads(value)]
    except (ValueError, KeyError, TypeError):
        return []


def watch_ended(error: FailedCall) -> bool:
    """Whether a watch stream's failure is just its end: its own deadline, or cancelled."""
    return error.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)


def closed(endpoint: Endpoint) -> types.FedspreadError:
    """The error of a call on a closed client (gRPC's own is a ValueError or a private UsageError)."""
    return types.FedspreadError(f"the client of the coordinator at {endpoint.target} is closed")


def error_from_rpc(error: FailedCall, endpoint: Endpoint, *, spread_key: str = "") -> types.FedspreadError:
    """The SDK error a failed call becomes, named for what went wrong at `endpoint`."""
    code = error.code()
    details = error.details() or code.name
    name = code.name
    target = endpoint.target
    if code == grpc.StatusCode.NOT_FOUND:
        return types.SpreadNotFound(f"no spread {spread_key}" if spread_key else details, code=name)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return types.InvalidRequest(details, code=name, problems=problems(error))
    if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
        return types.PermissionDenied(f"coordinator at {target} refused: {details}", code=name)
    access_unknown = _trailer(error, access.TRAILER) == access.UNAVAILABLE_VALUE
    if code == grpc.StatusCode.UNAVAILABLE and access_unknown:
        return types.CoordinatorUnavailable(
            f"coordinator at {target} could not check this client's access: {details}", code=name)
    if code == grpc.StatusCode.UNAVAILABLE:
        advice = transport.hint(details, secure=endpoint.secure)
        return types.CoordinatorUnavailable(
            f"coordinator at {target} is unreachable: {details}"
            + (f" (hint: {advice})" if advice else ""), code=name)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return types.CoordinatorUnavailable(
            f"coordinator at {target} did not answer within {endpoint.timeout:g}s", code=name)
    return types.FedspreadError(f"coordinator at {target} answered {name}: {details}", code=name)
