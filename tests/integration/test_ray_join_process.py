"""`fedspread coordinator --ray-address` as a real process: a Ray it cannot join is one line, fast.

Why: `ray.init` on a dead GCS address retried for ~14 minutes, and a cluster with token
authentication looked like a dead one. Here the real command meets a closed port, a server that
answers the probe but never lets Ray join, and the session's real Ray (which runs with token
authentication, Ray 2.60's default for a local cluster) without its token: each must exit 1
within 30 s with one `error:` line and no traceback. The hub is never reached (the Ray join comes
first), so the kubeconfig points nowhere and no sandbox is needed.
"""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from federation.coordinator import ray_join

DEADLINE = 30.0
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]
users: [{name: nobody, user: {token: none}}]
contexts: [{name: hub, context: {cluster: hub, user: nobody}}]
current-context: hub
"""


def coordinator(tmp_path: pathlib.Path, *flags: str, env: dict[str, str] | None = None,
                ) -> tuple[int, str, float]:
    """Run `fedspread coordinator` with `flags`; its exit code, stderr and seconds taken."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    command = [str(pathlib.Path(sys.executable).with_name("fedspread")), "coordinator", "--insecure",
               "--listen", "127.0.0.1:0", "--metrics-port", "0", "--health-port", "0",
               "--hub-kubeconfig", str(kubeconfig), *flags]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                          env=env if env is not None else dict(os.environ))
    return done.returncode, done.stderr, time.monotonic() - started


def the_error(stderr: str) -> str:
    """The one `error:` line; no traceback anywhere."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


def test_a_closed_port_fails_at_once_naming_what_to_check(tmp_path: pathlib.Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, stderr, seconds = coordinator(tmp_path, "--ray-address", f"127.0.0.1:{port}")
    line = the_error(stderr)
    assert code == 1 and seconds < DEADLINE, (code, seconds)
    assert line.startswith(f"error: no Ray at 127.0.0.1:{port} (Connection refused)")
    assert "GCS port" in line and "without --ray-address" in line


class Stalling(grpc.GenericRpcHandler):
    """Answers the probe (`GetClusterId`) like a GCS, then never answers what `ray.init` asks."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        probe = str(details.method) == ray_join.GCS_METHOD

        def answer(_request: bytes, _context: grpc.ServicerContext) -> bytes:
            if not probe:
                self.release.wait(60)
            return b""

        return grpc.unary_unary_rpc_method_handler(
            answer, request_deserializer=lambda b: b, response_serializer=lambda b: b)


@pytest.fixture
def stalling_port() -> Iterator[int]:
    handler = Stalling()
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=32))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("[::]:0")  # Ray dials the node's IP, not 127.0.0.1
    server.start()
    try:
        yield port
    finally:
        handler.release.set()
        server.stop(grace=None)


def test_a_join_that_never_finishes_is_bounded(tmp_path: pathlib.Path, stalling_port: int) -> None:
    code, stderr, seconds = coordinator(tmp_path, "--ray-address", f"127.0.0.1:{stalling_port}",
                                        "--ray-join-seconds", "8")
    line = the_error(stderr)
    assert code == 1 and seconds < DEADLINE, (code, seconds)
    assert "answered, but joining it did not finish within 8 s" in line
    assert "ray://HEAD:10001" in line


def test_the_session_ray_without_its_token_is_named_token_auth(tmp_path: pathlib.Path,
                                                               local_ray: str) -> None:
    # The session's Ray (conftest's local_ray) runs with token authentication, as Ray's own
    # `ray.init()` sets it up; if that ever changes, this test must fail, not pass unexamined.
    assert os.environ.get("RAY_AUTH_MODE", "").lower() == "token", "the session's Ray has no token auth"
    without = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    code, stderr, seconds = coordinator(tmp_path, "--ray-address", local_ray, env=without)
    line = the_error(stderr)
    assert code == 1 and seconds < DEADLINE, (code, seconds)
    assert "requires token authentication and this coordinator has no token" in line
    wrong = {**without, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "not-the-token"}
    code, stderr, seconds = coordinator(tmp_path, "--ray-address", local_ray, env=wrong)
    assert code == 1 and seconds < DEADLINE, (code, seconds)
    assert "refused the token from RAY_AUTH_TOKEN" in the_error(stderr)
