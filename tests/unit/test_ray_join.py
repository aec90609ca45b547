"""The question asked of a Ray address before joining it: each way it fails is one line, fast.

Why: `ray.init` alone retries a dead GCS for ~14 minutes and reports a missing Ray token as a
connection failure. These tests stand fake gRPC servers (and a socket that never speaks) where
Ray would be, so every answer the probe can get is checked without Ray; the real Ray cluster and
the real `fedspread coordinator` process are in tests/integration/test_ray_join_process.py.
"""

from __future__ import annotations

import concurrent.futures
import pathlib
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from federation.coordinator import process, ray_join

Behaviour = Callable[[grpc.ServicerContext], bytes]


class FakeRay(grpc.GenericRpcHandler):
    """Answers every method with `behaviour`; remembers the methods asked and their metadata."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.calls: list[tuple[str, dict[str, str]]] = []

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = str(details.method)

        def answer(_request: bytes, context: grpc.ServicerContext) -> bytes:
            self.calls.append((method, {k: str(v) for k, v in context.invocation_metadata()}))
            return self.behaviour(context)

        return grpc.unary_unary_rpc_method_handler(
            answer, request_deserializer=lambda b: b, response_serializer=lambda b: b)


@pytest.fixture
def serve() -> Iterator[Callable[[Behaviour], tuple[FakeRay, int]]]:
    servers: list[grpc.Server] = []

    def start(behaviour: Behaviour) -> tuple[FakeRay, int]:
        handler = FakeRay(behaviour)
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return handler, port

    yield start
    for server in servers:
        server.stop(grace=None)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def abort(code: grpc.StatusCode) -> Behaviour:
    def behaviour(context: grpc.ServicerContext) -> bytes:
        context.abort(code, "from the fake")
        raise AssertionError("abort returns no answer")
    return behaviour


NO_TOKEN: dict[str, str] = {}
TOKEN_ENV = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "t0ken"}


def test_nothing_listening_is_one_line_naming_the_port_and_no_ray_at_once() -> None:
    port = closed_port()
    started = time.monotonic()
    with pytest.raises(ray_join.RayJoinError) as caught:
        ray_join.check(f"127.0.0.1:{port}", timeout=5, env=NO_TOKEN)
    assert time.monotonic() - started < 3
    message = str(caught.value)
    assert message.startswith(f"no Ray at 127.0.0.1:{port} (Connection refused)")
    assert "GCS port (ray start --port, 6379 by default)" in message and ray_join.NO_RAY_HINT in message
    with pytest.raises(ray_join.RayJoinError, match="Ray Client port"):
        ray_join.check(f"ray://127.0.0.1:{port}", timeout=5, env=NO_TOKEN)


def test_a_listener_that_never_answers_fails_at_the_deadline() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(ray_join.RayJoinError, match=r"did not answer within 1 s"):
            ray_join.check(f"127.0.0.1:{port}", timeout=1, env=NO_TOKEN)
        assert time.monotonic() - started < 5


def test_a_ray_that_answers_passes_and_is_asked_the_right_method(serve: Any) -> None:
    gcs, gcs_port = serve(lambda _context: b"")
    ray_join.check(f"127.0.0.1:{gcs_port}", timeout=5, env=NO_TOKEN)
    assert [method for method, _ in gcs.calls] == [ray_join.GCS_METHOD]
    client, client_port = serve(abort(grpc.StatusCode.NOT_FOUND))  # Ray Client on an empty request
    ray_join.check(f"ray://127.0.0.1:{client_port}", timeout=5, env=NO_TOKEN)
    assert [method for method, _ in client.calls] == [ray_join.CLIENT_METHOD]


def test_a_cluster_wanting_a_token_names_token_auth(serve: Any) -> None:
    fake, port = serve(abort(grpc.StatusCode.UNAUTHENTICATED))
    with pytest.raises(ray_join.RayJoinError) as missing:
        ray_join.check(f"127.0.0.1:{port}", timeout=5, env=NO_TOKEN)
    assert "requires token authentication and this coordinator has no token" in str(missing.value)
    assert "RAY_AUTH_MODE=token" in str(missing.value) and "deploy/README.md" in str(missing.value)
    assert "authorization" not in fake.calls[0][1]
    with pytest.raises(ray_join.RayJoinError) as refused:
        ray_join.check(f"127.0.0.1:{port}", timeout=5, env=TOKEN_ENV)
    assert "refused the token from RAY_AUTH_TOKEN" in str(refused.value)
    assert "t0ken" not in str(refused.value)
    assert fake.calls[1][1]["authorization"] == "Bearer t0ken"


def test_a_grpc_server_that_is_not_ray_is_told_apart(serve: Any) -> None:
    _fake, port = serve(abort(grpc.StatusCode.UNIMPLEMENTED))
    with pytest.raises(ray_join.RayJoinError, match=r"answers at .*, but not a Ray GCS"):
        ray_join.check(f"127.0.0.1:{port}", timeout=5, env=NO_TOKEN)


def test_the_token_is_found_where_ray_looks_for_it(tmp_path: pathlib.Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ray_join.token({"RAY_AUTH_TOKEN": "x"}) is None  # no token mode, no token sent
    assert ray_join.token(TOKEN_ENV) == ray_join.Token("t0ken", "RAY_AUTH_TOKEN")
    named = tmp_path / "named"
    named.write_text("from-file\n")
    assert ray_join.token({"RAY_AUTH_MODE": "TOKEN", "RAY_AUTH_TOKEN_PATH": str(named)}) == \
        ray_join.Token("from-file", f"RAY_AUTH_TOKEN_PATH={named}")
    with pytest.raises(ray_join.RayJoinError, match=r"~/.ray/auth_token cannot be read"):
        ray_join.token({"RAY_AUTH_MODE": "token"})
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("home")
    assert ray_join.token({"RAY_AUTH_MODE": "token"}) == ray_join.Token("home", "~/.ray/auth_token")
    named.write_text("  \n")
    with pytest.raises(ray_join.RayJoinError, match="is empty"):
        ray_join.token({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(named)})


@pytest.mark.parametrize(("address", "expected"), [
    ("10.0.0.1:6379", ray_join.Target("10.0.0.1:6379", "10.0.0.1:6379", client=False)),
    ("ray://head:10001", ray_join.Target("ray://head:10001", "head:10001", client=True)),
    ("auto", None), ("anyscale://cluster", None),
])
def test_addresses(address: str, expected: ray_join.Target | None) -> None:
    assert ray_join.target(address) == expected


@pytest.mark.parametrize("address", ["head", "ray://head", "head:port", "head:70000", ":6379"])
def test_malformed_addresses_are_refused(address: str) -> None:
    with pytest.raises(ray_join.RayJoinError, match="is not HOST:PORT or ray://HOST:PORT"):
        ray_join.target(address)


def test_the_coordinator_backend_fails_before_ray_init_on_a_dead_address() -> None:
    settings = process.CoordinatorConfig(hub_kubeconfig=None, ray_address=f"127.0.0.1:{closed_port()}")
    with pytest.raises(process.CoordinatorError, match=r"^no Ray at 127\.0\.0\.1:"):
        process.placement_backend(settings)  # the unit guard would raise had ray.init been called
