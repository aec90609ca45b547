"""The real `fedspread coordinator` process is observable: /metrics, gRPC health and reflection.

Why a process test: the flags (`--metrics-port`, `--health-port`), the wiring in
`coordinator.process` and the servers only meet in the real command. It runs over mTLS on the
sandbox hub (`--no-ray`), with a stand-in agent holding its own certificate, and checks:

* the plaintext health port answers a health client without any certificate — the kubelet's
  gRPC probe — NOT_SERVING until the hub is listed and SERVING after (a Watch that starts after
  the listing sees SERVING at once), `liveness` SERVING; while the mTLS port refuses that client;
* over mTLS, the main port answers health and lists its services by reflection;
* after a spread is placed on the agent, /metrics shows the coordinator's own numbers: the hub
  synced, one agent connected, rounds and their latency, the spread known and placed, status
  writes done, no cluster lost;
* a second coordinator given the first one's metrics or health port exits 1 with one line
  naming the port (the health server binds without SO_REUSEPORT, so it cannot share the port).
"""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import conftest
import grpc
import hubside
import pytest
import waiting
from prometheus_client import parser

from federation.certs import bundles, transport
from federation.coordinator.services import health
from federation.sandbox import state
from tests.support import builders, grpc_probes, standin_agent

FEDSPREAD = str(pathlib.Path(sys.executable).with_name("fedspread"))
WAIT = 90.0  # generous: the sandbox shares 2 cores with other work

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class Coordinator:
    """`fedspread coordinator` over mTLS with metrics and a health port, its output in a log."""

    def __init__(self, kubeconfig: str, pki: pathlib.Path, log: pathlib.Path) -> None:
        self.pki, self.log = pki, log
        self.target = f"127.0.0.1:{hubside.free_port()}"
        self.metrics_port, self.health_port = hubside.free_port(), hubside.free_port()
        files = transport.TLSFiles.in_directory(pki / "coordinator")
        command = [FEDSPREAD, "coordinator", "--hub-kubeconfig", kubeconfig, "--listen", self.target,
                   "--no-ray", "--heartbeat-seconds", "1", "--federation-id", "obs-test",
                   "--tls-cert", str(files.cert), "--tls-key", str(files.key), "--tls-ca", str(files.ca),
                   "--metrics-port", str(self.metrics_port), "--health-port", str(self.health_port)]
        with log.open("w") as out:
            self.popen = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def running(self) -> None:
        assert self.popen.poll() is None, f"the coordinator exited:\n{self.output()}"

    def secure_channel(self, user: str) -> grpc.Channel:
        return grpc.secure_channel(self.target, transport.channel_credentials(
            transport.TLSFiles.in_directory(self.pki / user)))

    def samples(self) -> Samples:
        """One scrape of /metrics: every sample by name and labels."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in parser.text_string_to_metric_families(text) for s in family.samples}

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        return self.popen.returncode


@pytest.fixture
def member(clusters: conftest.Clusters) -> Iterator[str]:
    """A MemberCluster name of this test's own (cluster-scoped on the shared hub), removed after."""
    (name,) = hubside.names("obs")
    yield name
    hubside.delete_member_clusters(clusters.custom(hubside.HUB), [name])


@pytest.fixture
def coordinator(sandbox: state.SandboxState, member: str,
                tmp_path: pathlib.Path) -> Iterator[Coordinator]:
    pki = tmp_path / "pki"
    bundles.make_ca(pki / "ca")
    bundles.make_coordinator(pki / "ca", pki / "coordinator")
    bundles.make_client(pki / "ca", pki / "user", name="observer")
    bundles.make_agent(pki / "ca", pki / member, cluster=member)
    process = Coordinator(sandbox.hub.kubeconfig, pki, tmp_path / "coordinator.log")
    try:
        yield process
    finally:
        code = process.stop()
        assert code == 0 and "Traceback" not in process.output(), process.output()


def value(samples: Samples, name: str, **labels: str) -> float:
    key = (f"fedspread_coordinator_{name}", tuple(sorted(labels.items())))
    assert key in samples, f"no sample {key}; have {sorted(n for n, _ in samples)}"
    return samples[key]


def test_health_reflection_and_metrics_of_the_real_process(
        coordinator: Coordinator, clusters: conftest.Clusters, namespace: str, member: str) -> None:
    probe = grpc.insecure_channel(f"127.0.0.1:{coordinator.health_port}")  # as the kubelet: no TLS
    try:
        def answers() -> bool:
            coordinator.running()
            return grpc_probes.status(probe, health.LIVENESS) == "SERVING"

        waiting.wait_for(answers, timeout=WAIT,
                         message=lambda: f"the health port never answered:\n{coordinator.output()}")
        seen: list[str] = []
        for status in grpc_probes.watch(probe):
            seen.append(status)
            if status == "SERVING":
                break
        assert seen in (["NOT_SERVING", "SERVING"], ["SERVING"]), seen
        assert "hub listed" in coordinator.output(), "SERVING only once the hub has been listed"
        assert {name: grpc_probes.status(probe, name) for name in health.READINESS} == dict.fromkeys(
            health.READINESS, "SERVING")
    finally:
        probe.close()

    plaintext = grpc.insecure_channel(coordinator.target)
    try:
        assert grpc_probes.status(plaintext) == "UNAVAILABLE", "the main port is mTLS only"
    finally:
        plaintext.close()
    with coordinator.secure_channel("user") as secure:
        assert grpc_probes.status(secure) == "SERVING"
        assert grpc_probes.services(secure) >= {*health.SERVICES, health.HEALTH_SERVICE}

    link = transport.channel_credentials(transport.TLSFiles.in_directory(coordinator.pki / member))
    agent = standin_agent.StandInAgent(coordinator.target, name=member, credentials=link).start()
    try:
        waiting.wait_for(agent.link.synced.is_set, timeout=WAIT, message=f"{member} never resynced")
        hub = hubside.Hub(clusters, namespace)
        key = hub.create(builders.deployment("web", 4, cpu="100m"), hubside.spread_body(
            "web", target="web", subsets=[{"name": "one", "clusters": [member]}]))
        waiting.wait_for(lambda: agent.replicas(key) == 4, timeout=WAIT,
                         message=lambda: f"the agent never got 4 replicas; has {agent.replicas(key)}")

        def written() -> Samples | None:
            coordinator.running()
            found = coordinator.samples()
            return found if value(found, "status_writes_total", kind="spread") >= 1 else None

        samples = waiting.wait_for(written, timeout=WAIT, message="no spread status write in the metrics")
        assert value(samples, "hub_synced") == 1
        assert value(samples, "agents_connected") == 1
        rounds = value(samples, "placement_rounds_total")
        assert rounds >= 1
        assert value(samples, "placement_round_seconds_count") == rounds
        assert value(samples, "placement_round_seconds_sum") > 0
        assert value(samples, "spread_placements_total") >= 1
        assert value(samples, "spreads_known") >= 1 and value(samples, "spreads_placed") >= 1
        assert value(samples, "clusters_lost_total") == 0
        assert value(samples, "failovers_suspended_total") == 0
        reported = {dict(labels)["kind"] for name, labels in samples
                    if name == "fedspread_coordinator_status_write_failures_total"}
        assert reported == {"spread", "cluster", "deployment", "replicaset", "statefulset", "job"}
    finally:
        agent.stop()


def test_a_taken_port_ends_a_second_coordinator_with_one_line(
        coordinator: Coordinator, sandbox: state.SandboxState) -> None:
    probe = grpc.insecure_channel(f"127.0.0.1:{coordinator.health_port}")
    try:
        waiting.wait_for(lambda: grpc_probes.status(probe, health.LIVENESS) == "SERVING", timeout=WAIT,
                         message=lambda: f"the first coordinator never served:\n{coordinator.output()}")
    finally:
        probe.close()
    for flags, what in ((["--metrics-port", str(coordinator.metrics_port), "--health-port", "0"], "metrics"),
                        (["--metrics-port", "0", "--health-port", str(coordinator.health_port)], "health")):
        second = subprocess.run(
            [FEDSPREAD, "coordinator", "--insecure", "--no-ray", "--hub-kubeconfig", sandbox.hub.kubeconfig,
             "--listen", f"127.0.0.1:{hubside.free_port()}", *flags],
            capture_output=True, text=True, timeout=120, check=False)
        assert second.returncode == 1 and "Traceback" not in second.stderr, second.stderr
        errors = [line for line in second.stderr.splitlines() if line.startswith("error: ")]
        port = coordinator.metrics_port if what == "metrics" else coordinator.health_port
        assert len(errors) == 1, second.stderr
        assert errors[0].startswith(f"error: cannot listen: {what} port 127.0.0.1:{port}"), errors
    # The gRPC port too: gRPC binds with SO_REUSEPORT by default, and a second coordinator would
    # then share the port silently, the kernel splitting the agents' connections between the two.
    second = subprocess.run(
        [FEDSPREAD, "coordinator", "--insecure", "--no-ray", "--hub-kubeconfig", sandbox.hub.kubeconfig,
         "--listen", coordinator.target, "--metrics-port", "0", "--health-port", "0"],
        capture_output=True, text=True, timeout=120, check=False)
    assert second.returncode == 1 and "Traceback" not in second.stderr, second.stderr
    errors = [line for line in second.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: cannot listen on {coordinator.target}: the port is in use or the address "
                      "is not this machine's"], second.stderr
