"""Asking a Ray address one question, with a deadline, before `ray.init` joins it.

Why: `ray.init(address=...)` does not fail fast. Measured with Ray 2.60 on this machine: on a
GCS address where nothing listens it was still retrying when stopped after 5 minutes (its source:
20 attempts of ~41 s of C++ connect and cluster-id timeouts, ~14 minutes in all); through Ray
Client (`ray://`) it gives up after 30 s with
"ray client connection timeout"; and a cluster with token authentication that we hold no token
for looks the same (20 s of retries, then "Failed to connect to Ray cluster", the reason only in
Ray's log). So before joining, the coordinator makes one gRPC call to the address — the GCS's
`GetClusterId`, or Ray Client's `ClusterInfo` — with a deadline, carrying the token `ray.init`
would carry, and turns the answer into one line: nothing listens, it does not answer, it wants a
token, it refused ours, it is not Ray. Any other answer (even an error about the empty request) means a Ray
server is there, and `ray.init` goes ahead (itself bounded: `shards.RayBackend(join_timeout=)`).

This module imports no Ray (only `shards` may, by contract): the call is raw gRPC with empty
bytes as the request, which is what an empty protobuf message serializes to. Which token Ray
sends is mirrored from Ray 2.60's own rules: only with `RAY_AUTH_MODE=token` (an explicit address
never turns token auth on by itself), from `RAY_AUTH_TOKEN`, else the file `RAY_AUTH_TOKEN_PATH`
names, else `~/.ray/auth_token`, as the `authorization: Bearer` metadata. With `RAY_USE_TLS=1`
the probe speaks TLS with Ray's `RAY_TLS_*` files, as Ray would.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Mapping

import grpc

GCS_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"
CLIENT_METHOD = "/ray.rpc.RayletDriver/ClusterInfo"
CLIENT_SCHEME = "ray://"
DEFAULT_TOKEN_FILE = pathlib.Path("~/.ray/auth_token")
TOKEN_PLACES = ("RAY_AUTH_TOKEN, a file named by RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token")
NO_RAY_HINT = "without --ray-address the coordinator places in its own process (the default)"


class RayJoinError(Exception):
    """Joining the Ray cluster cannot work; the message is the one line to show."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where `ray.init` would connect: a GCS (`host:port`) or a Ray Client server (`ray://`)."""

    address: str
    """As the user gave it."""
    endpoint: str
    """host:port to dial."""
    client: bool
    """Ray Client (`ray://`) rather than the GCS."""

    @property
    def port_hint(self) -> str:
        """What the port should be, for the error line."""
        if self.client:
            return "the head's Ray Client port (ray start --ray-client-server-port, 10001 by default)"
        return "the head's GCS port (ray start --port, 6379 by default)"


def target(address: str) -> Target | None:
    """The endpoint of `address`, or None for what cannot be probed (`auto`, another scheme)."""
    client = address.startswith(CLIENT_SCHEME)
    rest = address[len(CLIENT_SCHEME):] if client else address
    if "://" in rest or rest in ("auto", "local"):
        return None
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise RayJoinError(f"--ray-address {address!r} is not HOST:PORT or ray://HOST:PORT")
    return Target(address=address, endpoint=rest, client=client)


@dataclasses.dataclass(frozen=True)
class Token:
    """The token `ray.init` would send, and where it came from (never the token in messages)."""

    value: str
    source: str


def token(env: Mapping[str, str]) -> Token | None:
    """Ray's token for this process (None unless RAY_AUTH_MODE=token); RayJoinError when token
    mode is on and no token can be found, as `ray.init` would fail too."""
    if env.get("RAY_AUTH_MODE", "").lower() != "token":
        return None
    if env.get("RAY_AUTH_TOKEN", "").strip():
        return Token(env["RAY_AUTH_TOKEN"].strip(), "RAY_AUTH_TOKEN")
    named = env.get("RAY_AUTH_TOKEN_PATH")
    path = pathlib.Path(named) if named else DEFAULT_TOKEN_FILE.expanduser()
    source = f"RAY_AUTH_TOKEN_PATH={named}" if named else str(DEFAULT_TOKEN_FILE)
    try:
        value = path.read_text().strip()
    except OSError as error:
        raise RayJoinError(f"RAY_AUTH_MODE=token but no Ray token: {source} cannot be read "
                           f"({error.strerror}); put the cluster's token in {TOKEN_PLACES}") from error
    if not value:
        raise RayJoinError(f"RAY_AUTH_MODE=token but {source} is empty; put the cluster's token "
                           f"in {TOKEN_PLACES}")
    return Token(value, source)


def _credentials(env: Mapping[str, str]) -> grpc.ChannelCredentials | None:
    """TLS credentials from Ray's own variables when RAY_USE_TLS is on; None for plaintext."""
    if env.get("RAY_USE_TLS", "0").lower() not in ("1", "true"):
        return None

    def read(name: str) -> bytes | None:
        path = env.get(name)
        if not path:
            return None
        try:
            return pathlib.Path(path).read_bytes()
        except OSError as error:
            raise RayJoinError(f"RAY_USE_TLS is on but {name}={path} cannot be read "
                               f"({error.strerror})") from error

    return grpc.ssl_channel_credentials(root_certificates=read("RAY_TLS_CA_CERT"),
                                        private_key=read("RAY_TLS_SERVER_KEY"),
                                        certificate_chain=read("RAY_TLS_SERVER_CERT"))


def check(address: str, *, timeout: float, env: Mapping[str, str] | None = None) -> None:
    """Ask `address` once, within `timeout` seconds; RayJoinError with the one line to show when
    joining cannot work. Returns when a Ray server answered (anything but the failures below)."""
    found = target(address)
    if found is None:
        return
    environ = os.environ if env is None else env
    sent = token(environ)
    credentials = _credentials(environ)
    channel = (grpc.insecure_channel(found.endpoint) if credentials is None
               else grpc.secure_channel(found.endpoint, credentials))
    try:
        ask = channel.unary_unary(CLIENT_METHOD if found.client else GCS_METHOD,
                                  request_serializer=_identity, response_deserializer=_identity)
        ask(b"", timeout=timeout,
            metadata=(("authorization", f"Bearer {sent.value}"),) if sent else None)
    except grpc.RpcError as error:
        _raise_for(error, found, sent=sent, timeout=timeout)
    finally:
        channel.close()


def _identity(data: bytes) -> bytes:
    return data


def _raise_for(error: grpc.RpcError, found: Target, *, sent: Token | None, timeout: float) -> None:
    """The line for a failed probe; returns (nothing raised) when the failure means Ray answered."""
    code = error.code() if isinstance(error, grpc.Call) else None
    where = f"Ray at {found.address}"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        if sent is None:
            raise RayJoinError(
                f"{where} requires token authentication and this coordinator has no token: set "
                f"RAY_AUTH_MODE=token and the cluster's token in {TOKEN_PLACES} (deploy/README.md, "
                f"'Ray token authentication'), or {NO_RAY_HINT}") from error
        raise RayJoinError(
            f"{where} refused the token from {sent.source}: it is not this cluster's token "
            f"(deploy/README.md, 'Ray token authentication')") from error
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        raise RayJoinError(
            f"{where} did not answer within {timeout:g} s: check that the Ray head runs, that the "
            f"port is {found.port_hint}, and that no firewall drops it; {NO_RAY_HINT}") from error
    if code == grpc.StatusCode.UNAVAILABLE:
        details = (error.details() if isinstance(error, grpc.Call) else "") or "unavailable"
        reason = details.rsplit(": ", 1)[-1] if "last error" in details else details
        raise RayJoinError(
            f"no Ray at {found.address} ({reason[:120]}): check that the Ray head runs and that "
            f"the port is {found.port_hint}; {NO_RAY_HINT}") from error
    if code == grpc.StatusCode.UNIMPLEMENTED:  # a gRPC server or an HTTP proxy, but not this Ray's
        kind = "Ray Client server" if found.client else "Ray GCS"
        raise RayJoinError(
            f"something answers at {found.address}, but not a {kind}: check that the port is "
            f"{found.port_hint}; {NO_RAY_HINT}") from error
    # Anything else (NOT_FOUND, INVALID_ARGUMENT, ... about our empty request) came from Ray.
