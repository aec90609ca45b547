"""The Events recorder's counts are metrics of the coordinator and the agent (`federation.event_metrics`).

The recorder is driven over real HTTP through the real Kubernetes client, against a stand-in
apiserver on a loopback socket that accepts Event creates and patches, or refuses them (403) when
told: one Event created and then repeated (its series updated), another created, one refused
(failed), one past the token buckets (limited), one recorded after close (dropped). The numbers are
then read from the real registries: a `CoordinatorMetrics`, an `AgentMetrics`, and those of a
`CoordinatorProcess` and an `Agent` as they are wired (constructed, never started). Writing Events to
a real apiserver: tests/integration/test_events_sandbox.py.
"""

from __future__ import annotations

import contextlib
import datetime
import http.server
import json
import pathlib
import threading
from collections.abc import Iterator

import yaml
from kubernetes import client

from agents import main as agents_main
from agents import metrics as agent_metrics
from federation.coordinator import backends, facade, metrics, process
from federation.coordinator.model import world
from federation.kube import events
from tests.support.clock import ManualClock

POD = events.ObjectRef("v1", "Pod", "web-1", namespace="shop", uid="u-1")
WAIT = 30.0


class StandInApiserver(http.server.ThreadingHTTPServer):
    """Answers Event creates (201) and patches (200), or 403 while `refusing`; GET /version (the
    agent's first question)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.refusing = False
        self.requests: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(http.server.BaseHTTPRequestHandler):
    server: StandInApiserver

    def do_GET(self) -> None:
        self._send(200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0", "gitCommit": "0" * 40,
                         "gitTreeState": "clean", "buildDate": "2024-01-01T00:00:00Z", "goVersion": "go1.22",
                         "compiler": "gc", "platform": "linux/amd64"})

    def do_POST(self) -> None:
        self._answer(201)

    def do_PATCH(self) -> None:
        self._answer(200)

    def _answer(self, code: int) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.requests.append(f"{self.command} {self.path}")
        if self.server.refusing:
            code = 403
            body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                    "code": 403}
        else:
            body = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": {"name": "e"}}
        self._send(code, body)

    def _send(self, code: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@contextlib.contextmanager
def apiserver() -> Iterator[StandInApiserver]:
    server = StandInApiserver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def api_at(url: str) -> client.ApiClient:
    settings = client.Configuration()
    settings.host = url
    return client.ApiClient(settings)


def drive(recorder: events.EventRecorder, server: StandInApiserver) -> None:
    """Created 2, updated 1, failed 1, limited 1, dropped 1 (a budget of 4 writes overall)."""
    recorder.record(POD, reason="Rescheduled", note="unschedulable", action="Delete")
    recorder.record(POD, reason="Rescheduled", note="unschedulable", action="Delete")  # its series
    recorder.record(POD, reason="Created", note="3 replicas", action="Create")
    assert recorder.flush(WAIT)
    server.refusing = True
    recorder.record(POD, reason="Updated", note="3 -> 4 replicas", action="Update")
    assert recorder.flush(WAIT)
    server.refusing = False
    recorder.record(POD, reason="Deleted", note="gone", action="Delete")  # no token left
    assert recorder.flush(WAIT)
    assert recorder.close()
    assert not recorder.record(POD, reason="Deleted", note="late", action="Delete")


EXPECTED = {"created": 2, "updated": 1, "failed": 1, "limited": 1, "dropped": 1}
BUDGET = events.Limits(overall_burst=4, overall_rate=1e-9, attempts=1, timeout=10)


def test_the_recorders_outcomes_are_counted_in_both_registries() -> None:
    with apiserver() as server:
        recorder = events.EventRecorder(api_at(server.url), controller=events.COORDINATOR,
                                        instance="c-0", limits=BUDGET)
        clock = ManualClock(datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC))
        coordinator = metrics.CoordinatorMetrics(
            facade.Coordinator(world.World(clock), clock=clock, hub_synced=False, coordinator_id="t"),
            events=recorder.outcomes)
        agent = agent_metrics.AgentMetrics(cluster="dc1")
        agent.watch_events(recorder.outcomes)
        before = {o: coordinator.value("events_total", {"outcome": o}) for o in events.OUTCOMES}
        assert before == dict.fromkeys(events.OUTCOMES, 0), "every outcome is reported, 0 until met"
        drive(recorder, server)
    assert recorder.outcomes() == EXPECTED
    assert {o: coordinator.value("events_total", {"outcome": o}) for o in events.OUTCOMES} == EXPECTED
    assert {o: agent.registry.get_sample_value("fedspread_agent_events_total", {"outcome": o})
            for o in events.OUTCOMES} == EXPECTED
    text = coordinator.exposition().decode()
    assert "# TYPE fedspread_coordinator_events_total counter" in text
    assert 'fedspread_coordinator_events_total{outcome="updated"} 1.0' in text
    assert [r.split(" ")[0] for r in server.requests] == ["POST", "PATCH", "POST", "POST"]


def test_the_coordinator_process_exports_its_recorders_counts() -> None:
    with apiserver() as server:
        coordinator = process.CoordinatorProcess(process.CoordinatorConfig(hub_kubeconfig=None),
                                                 api=api_at(server.url), backend=backends.LocalBackend())
        try:
            assert coordinator.recorder.record(POD, reason="Placed", note="4 replicas", action="Place")
            assert coordinator.recorder.flush(WAIT)
            assert coordinator.metrics.value("events_total", {"outcome": "created"}) == 1
            assert coordinator.metrics.value("events_total", {"outcome": "failed"}) == 0
        finally:
            coordinator.stop()
    assert coordinator.metrics.value("events_total", {"outcome": "created"}) == 1


def test_the_agent_exports_its_recorders_counts(tmp_path: pathlib.Path) -> None:
    with apiserver() as server:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "m",
            "clusters": [{"name": "m", "cluster": {"server": server.url}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "m", "context": {"cluster": "m", "user": "u"}}]}))
        agent = agents_main.Agent(agents_main.AgentConfig(
            agents_main.LinkSettings("127.0.0.1:1", "dc1"), kubeconfig=kubeconfig,
            webhook=agents_main.WebhookSettings(port=0, register=False),
            metrics=agents_main.MetricsSettings(port=0)))
        try:
            assert agent.recorder.record(POD, reason="Created", note="2 replicas", action="Create")
            assert agent.recorder.flush(WAIT)
            registry = agent.metrics.registry
            found = {o: registry.get_sample_value("fedspread_agent_events_total", {"outcome": o})
                     for o in events.OUTCOMES}
            assert found == {**dict.fromkeys(events.OUTCOMES, 0), "created": 1}
        finally:
            agent.stop()
