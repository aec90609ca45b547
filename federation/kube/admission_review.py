"""AdmissionReview (admission.k8s.io/v1) bodies in and out of fedspread's admission webhooks.

Shared by both: the agent's pod webhook (`agents.webhook`) and the coordinator's validating
webhook for FederatedSpreads and MemberClusters (`federation.coordinator.hub.admission`), both
served by `federation.kube.webhook_https`.

Why a parser of our own: a webhook is an HTTPS endpoint that anything able to reach the port can
post to, and the apiserver only ever sends one shape. Everything a handler reads is checked here,
once, and turned into a small typed value, so that the decision code never meets a wrong type and
every malformed body becomes a `ReviewError` with a reason the server returns as HTTP 400 — never
a traceback, never a dead server. The size limit is checked before any parsing so that a huge body
costs nothing but the read.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
MAX_BODY = 3 * 1024 * 1024
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
_MAX_REASON_VALUE = 60

Json = dict[str, Any]


class ReviewError(ValueError):
    """A request body that is not a well-formed AdmissionReview; `reason` says why."""

    def __init__(self, reason: str, *, oversized: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.oversized = oversized


@dataclasses.dataclass(frozen=True)
class GroupVersionKind:
    """The kind of the object under review (e.g. ("", "v1", "Pod"))."""

    group: str
    version: str
    kind: str


@dataclasses.dataclass(frozen=True)
class GroupVersionResource:
    """The resource addressed by the request (e.g. ("", "v1", "pods"))."""

    group: str
    version: str
    resource: str


@dataclasses.dataclass(frozen=True)
class UserInfo:
    """Who made the request, as the apiserver authenticated them."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Review:
    """The parts of an AdmissionReview request fedspread's webhooks use."""

    uid: str
    operation: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    sub_resource: str
    namespace: str
    name: str
    object: Json | None
    old_object: Json | None
    dry_run: bool
    user: UserInfo

    def is_resource(self, resource: str, *, sub_resource: str = "", group: str = "") -> bool:
        """True when the request addresses `group`/`resource`[/`sub_resource`]."""
        return (self.resource.group == group and self.resource.resource == resource
                and self.sub_resource == sub_resource)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_REASON_VALUE else text[:_MAX_REASON_VALUE] + "..."


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(value), type(value).__name__)


def field(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str, *,
          required: bool = False, default: Any = None) -> Any:
    """`data[key]` checked to be of `kind` (null counts as absent); ReviewError otherwise."""
    value = data.get(key)
    if value is None:
        if required:
            raise ReviewError(f"{where}.{key} is required")
        return default
    # bool is a subclass of int: never accept it where a number or string is expected.
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
        wanted = " or ".join(_type_name(k()) for k in _as_tuple(kind))
        raise ReviewError(f"{where}.{key} must be {wanted}, not {_type_name(value)} {_show(value)}")
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def string_map(data: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    """`data[key]` as a map of strings to strings (labels, annotations); {} when absent."""
    value: dict[str, Any] = field(data, key, dict, where, default={})
    for k, v in value.items():
        if not isinstance(v, str):
            raise ReviewError(f"{where}.{key}[{_show(k)}] must be string, not {_type_name(v)}")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _decode(body: bytes, max_body: int) -> Any:
    if len(body) > max_body:
        raise ReviewError(f"body of {len(body)} bytes exceeds the limit of {max_body} bytes", oversized=True)
    if not body:
        raise ReviewError("empty body: expected an AdmissionReview")
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise ReviewError("body is not UTF-8 text") from None
    except RecursionError:
        raise ReviewError("body is nested too deeply") from None
    except ValueError as error:  # JSONDecodeError, NaN/Infinity, overlong integers
        raise ReviewError(f"body is not JSON: {error}") from None


def _gvk(request: Mapping[str, Any]) -> GroupVersionKind:
    kind: dict[str, Any] = field(request, "kind", dict, "request", required=True)
    return GroupVersionKind(
        group=field(kind, "group", str, "request.kind", default=""),
        version=field(kind, "version", str, "request.kind", required=True),
        kind=field(kind, "kind", str, "request.kind", required=True),
    )


def _gvr(request: Mapping[str, Any]) -> GroupVersionResource:
    resource: dict[str, Any] = field(request, "resource", dict, "request", required=True)
    return GroupVersionResource(
        group=field(resource, "group", str, "request.resource", default=""),
        version=field(resource, "version", str, "request.resource", required=True),
        resource=field(resource, "resource", str, "request.resource", required=True),
    )


def _user(request: Mapping[str, Any]) -> UserInfo:
    info: dict[str, Any] = field(request, "userInfo", dict, "request", default={})
    groups: list[Any] = field(info, "groups", list, "request.userInfo", default=[])
    if not all(isinstance(g, str) for g in groups):
        raise ReviewError("request.userInfo.groups must be an array of strings")
    return UserInfo(
        username=field(info, "username", str, "request.userInfo", default=""),
        uid=field(info, "uid", str, "request.userInfo", default=""),
        groups=tuple(groups),
    )


def parse(body: bytes, *, max_body: int = MAX_BODY) -> Review:
    """Parse and check an AdmissionReview request body; ReviewError with a reason otherwise."""
    data = _decode(body, max_body)
    if not isinstance(data, dict):
        raise ReviewError(f"body must be a JSON object, not {_type_name(data)}")
    api_version = field(data, "apiVersion", str, "AdmissionReview", required=True)
    if api_version != API_VERSION:
        raise ReviewError(f"apiVersion must be {API_VERSION!r}, not {_show(api_version)}")
    kind = field(data, "kind", str, "AdmissionReview", required=True)
    if kind != KIND:
        raise ReviewError(f"kind must be {KIND!r}, not {_show(kind)}")
    request: dict[str, Any] = field(data, "request", dict, "AdmissionReview", required=True)
    uid: str = field(request, "uid", str, "request", required=True)
    if not uid:
        raise ReviewError("request.uid must not be empty")
    operation: str = field(request, "operation", str, "request", required=True)
    if operation not in OPERATIONS:
        raise ReviewError(f"request.operation must be one of {sorted(OPERATIONS)}, not {_show(operation)}")
    return Review(
        uid=uid, operation=operation, kind=_gvk(request), resource=_gvr(request),
        sub_resource=field(request, "subResource", str, "request", default=""),
        namespace=field(request, "namespace", str, "request", default=""),
        name=field(request, "name", str, "request", default=""),
        object=field(request, "object", dict, "request"),
        old_object=field(request, "oldObject", dict, "request"),
        dry_run=field(request, "dryRun", bool, "request", default=False),
        user=_user(request),
    )


def allow(uid: str, *, patch: Sequence[Mapping[str, Any]] | None = None,
          warnings: Sequence[str] = ()) -> Json:
    """An AdmissionReview response allowing the request, with an optional JSONPatch."""
    response: Json = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(patch)).encode()).decode("ascii")
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def refuse(uid: str, message: str, *, code: int = 503) -> Json:
    """An AdmissionReview response refusing the request; the apiserver passes `code` and `message`
    to the client (503, the default: refused for now, and a ReplicaSet controller retries with
    backoff; 422: the object itself is invalid)."""
    return {"apiVersion": API_VERSION, "kind": KIND,
            "response": {"uid": uid, "allowed": False, "status": {"code": code, "message": message}}}


def encode(review: Mapping[str, Any]) -> bytes:
    """A response AdmissionReview as compact JSON bytes."""
    return json.dumps(review, separators=(",", ":")).encode()
