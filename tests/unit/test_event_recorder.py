"""The Event recorder never blocks nor raises into its caller, whatever the apiserver does.

The apiserver here is a real socket that refuses, or accepts and never answers: the real
Kubernetes client meets a real network failure. (Writing Events to a real apiserver, series and
rate limits included: tests/integration/test_events_sandbox.py.)
"""

from __future__ import annotations

import contextlib
import http.server
import json
import logging
import socket
import threading
from collections.abc import Iterator

import pytest
from kubernetes import client

from federation.kube import events

POD = events.ObjectRef("v1", "Pod", "web-1", namespace="shop", uid="u-1")


def api_at(port: int) -> client.ApiClient:
    settings = client.Configuration()
    settings.host = f"http://127.0.0.1:{port}"
    return client.ApiClient(settings)


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_full_queue_drops_and_counts_instead_of_blocking() -> None:
    with silent_server() as port:
        recorder = events.EventRecorder(api_at(port), controller=events.AGENT, instance="dc1",
                                        limits=events.Limits(queue_size=1, timeout=30, attempts=1))
        # The worker holds at most one occurrence (stuck on the silent server) and the queue one more.
        accepted = [recorder.record(POD, reason="Rescheduled", note=f"n{i}", action="Delete")
                    for i in range(3)]
        assert accepted.count(False) >= 1 and accepted[0]
        assert recorder.counts["dropped"] == accepted.count(False)
        recorder.close(timeout=0.1)
    assert not recorder.record(POD, reason="Rescheduled", note="late", action="Delete"), "closed: dropped"


def test_an_unreachable_apiserver_is_counted_and_logged_once_never_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    recorder = events.EventRecorder(api_at(closed_port()), controller=events.COORDINATOR, instance="c-0",
                                    limits=events.Limits(attempts=2, max_wait=0.05, timeout=5))
    with caplog.at_level(logging.DEBUG, logger="federation.kube.events"):
        for note in ("a", "b"):
            assert recorder.record(POD, reason="Placed", note=note, action="Place")
        assert recorder.flush(30)
    recorder.close()
    assert (recorder.counts["failed"], recorder.counts["created"]) == (2, 0)
    warnings = [r for r in caplog.records
                if r.levelno == logging.WARNING and getattr(r, "instance", None) == "c-0"]
    assert len(warnings) == 1, "one warning a minute, the rest at debug"
    assert "event not written" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.name.startswith("urllib3")], "urllib3 would retry and warn"


@contextlib.contextmanager
def terminating_namespace_server() -> Iterator[int]:
    """A port answering every request as the apiserver answers a create in a namespace being
    deleted: 403 Forbidden, cause NamespaceTerminating."""
    body = json.dumps({
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
        "message": "events.events.k8s.io \"x\" is forbidden: unable to create new content in namespace "
                   "shop because it is being terminated",
        "details": {"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                "message": "namespace shop is being terminated"}]}}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_an_event_in_a_namespace_being_deleted_is_dropped_not_failed(
        caplog: pytest.LogCaptureFixture) -> None:
    quiet = caplog.at_level(logging.DEBUG, logger="federation.kube.events")
    with terminating_namespace_server() as port, quiet:
        recorder = events.EventRecorder(api_at(port), controller=events.AGENT, instance="dc1",
                                        limits=events.Limits(attempts=2, max_wait=0.05, timeout=5))
        assert recorder.record(POD, reason="Deleted", note="gone", action="Delete")
        assert recorder.flush(30)
        recorder.close()
    assert (recorder.counts["dropped"], recorder.counts["failed"]) == (1, 0)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "not a failure to report"


def test_instance_name_prefers_the_pod_name() -> None:
    assert events.instance_name({"POD_NAME": "fedspread-coordinator-7d9f"}) == "fedspread-coordinator-7d9f"
    assert events.instance_name({}) == socket.gethostname()
