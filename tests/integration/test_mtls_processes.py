"""mTLS end to end with the real processes on the sandbox: `fedspread certs`, `coordinator`, `agent`, `get`.

What it proves, through the command line a user types (issue 8):

* `fedspread certs` issues the CA and the coordinator's, two agents' and a user's certificates;
* `fedspread coordinator --tls-*` serves the sandbox hub over mTLS; `fedspread agent --link-*` of
  member-1 connects with its own certificate, registers member-1 and reports its nodes (the SDK
  and `fedspread get clusters`, with the user's certificate, see it ready);
* an agent that claims member-2 with member-1's certificate is refused: the coordinator answers
  PERMISSION_DENIED naming both clusters, the agent logs the refusal as an ERROR and keeps running
  (fail static), and member-2 never appears in the hub;
* plaintext clients of the mTLS coordinator (`fedspread get --insecure`) fail with a hint.

The coordinator runs with `--no-ray` (placement is not what is tested); its MemberClusters are
deleted before and after.
"""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import conftest
import hubside
import pytest
from kubernetes import client
from waiting import wait_for

from federation import sdk
from federation.api import cluster
from federation.certs import transport
from federation.sandbox import hubsetup, state

FEDSPREAD = str(pathlib.Path(sys.executable).parent / "fedspread")
MEMBERS = ("member-1", "member-2")
WAIT = 90.0  # generous: the sandbox shares 2 cores with other work
USER = "integration-test"


def fedspread(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FEDSPREAD, *args], capture_output=True, text=True, timeout=120, check=False)


class Process:
    """A `fedspread` process with its output in a log file."""

    def __init__(self, args: list[str], log: pathlib.Path) -> None:
        self.args, self.log = args, log
        with log.open("w") as out:
            self.popen = subprocess.Popen([FEDSPREAD, *args], stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("pki")
    ca = str(root / "ca")
    for args in (["ca", "--out", ca],
                 ["coordinator", "--ca", ca, "--out", str(root / "coordinator"), "--host", "127.0.0.1"],
                 *(["agent", "--ca", ca, "--out", str(root / m), "--cluster", m] for m in MEMBERS),
                 ["client", "--ca", ca, "--out", str(root / "user"), "--name", USER]):
        result = fedspread("certs", *args)
        assert result.returncode == 0, f"fedspread certs {' '.join(args)}:\n{result.stderr}"
    return root


def tls_flags(prefix: str, directory: pathlib.Path) -> list[str]:
    files = transport.TLSFiles.in_directory(directory)
    return [f"--{prefix}-cert", str(files.cert), f"--{prefix}-key", str(files.key),
            f"--{prefix}-ca", str(files.ca)]


def user_flags(pki: pathlib.Path) -> list[str]:
    files = transport.TLSFiles.in_directory(pki / "user")
    return ["--ca", str(files.ca), "--cert", str(files.cert), "--key", str(files.key)]


def placement_client(target: str, pki: pathlib.Path) -> sdk.PlacementClient:
    files = transport.TLSFiles.in_directory(pki / "user")
    return sdk.PlacementClient.with_tls(target, ca=files.ca, cert=files.cert, key=files.key, timeout=5.0)


@pytest.fixture(scope="module")
def coordinator(sandbox: state.SandboxState, clusters: conftest.Clusters, pki: pathlib.Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`fedspread coordinator` over mTLS on the sandbox hub; its address, once it answers."""
    custom = clusters.custom(hubside.HUB)
    hubside.delete_member_clusters(custom, MEMBERS)
    hubsetup.grant_placement_reader(sandbox.hub.kubeconfig, USER)  # every namespace and the clusters
    target = f"127.0.0.1:{hubside.free_port()}"
    process = Process(["coordinator", "--hub-kubeconfig", sandbox.hub.kubeconfig, "--listen", target,
                       "--no-ray", "--heartbeat-seconds", "1", "--metrics-port", "0", "--health-port", "0",
                       *tls_flags("tls", pki / "coordinator")],
                      tmp_path_factory.mktemp("coordinator") / "coordinator.log")

    def serving() -> bool:
        assert process.popen.poll() is None, f"the coordinator exited:\n{process.output()}"
        try:
            with placement_client(target, pki) as placements:
                placements.clusters()
        except sdk.CoordinatorUnavailable:
            return False
        return True

    try:
        wait_for(serving, timeout=WAIT, message=lambda: f"the coordinator never served:\n{process.output()}")
        # (its start line is written just after the server answers: read it once it is there)
        wait_for(lambda: "coordinator started" in process.output(), timeout=WAIT,
                 message=lambda: f"the coordinator never said it started:\n{process.output()}")
        assert "transport=mTLS" in process.output()
        yield target
    finally:
        process.stop()
        hubside.delete_member_clusters(custom, MEMBERS)


def start_agent(cluster_name: str, certificate: pathlib.Path, *, kubeconfig: str, coordinator: str,
                log: pathlib.Path) -> Process:
    return Process(["agent", "--cluster", cluster_name, "--kubeconfig", kubeconfig,
                    "--coordinator", coordinator, "--webhook-port", "0", "--metrics-port", "0",
                    "--webhook-name", f"fedspread-mtls-{cluster_name}",
                    "--webhook-namespace-label", "fedspread-test/mtls=nowhere", "--deregister-on-exit",
                    "--heartbeat-seconds", "1", *tls_flags("link", certificate)], log)


def member_cluster(custom: client.CustomObjectsApi, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = custom.get_cluster_custom_object(
            hubside.GROUP, hubside.VERSION, cluster.PLURAL, name)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    return found


def test_agent_with_its_own_certificate_joins_and_reports(
        sandbox: state.SandboxState, clusters: conftest.Clusters, pki: pathlib.Path, coordinator: str,
        tmp_path: pathlib.Path) -> None:
    agent = start_agent("member-1", pki / "member-1", kubeconfig=sandbox.cluster("member-1").kubeconfig,
                        coordinator=coordinator, log=tmp_path / "agent.log")
    try:
        def ready_with_nodes() -> bool:
            assert agent.popen.poll() is None, f"the agent exited:\n{agent.output()}"
            with placement_client(coordinator, pki) as placements:
                return any(c.name == "member-1" and c.ready and c.node_count == conftest.NODES_PER_MEMBER
                           for c in placements.clusters())

        wait_for(ready_with_nodes, timeout=WAIT,
                 message=lambda: f"member-1 never ready with its nodes; agent log:\n{agent.output()}")
        # Registered on Hello by the coordinator's hook pool, not awaited by the stream: it may land
        # just after the agent shows ready (42 ms after it in a `make test` that read it too soon).
        wait_for(lambda: member_cluster(clusters.custom(hubside.HUB), "member-1"), timeout=WAIT,
                 message="member-1's MemberCluster was not registered on Hello")
        shown = fedspread("get", "clusters", "-o", "json", "--coordinator", coordinator, *user_flags(pki))
        assert shown.returncode == 0, shown.stderr
        assert '"name": "member-1"' in shown.stdout
        assert "connected to coordinator" in agent.output()
    finally:
        agent.stop()
    assert agent.popen.returncode == 0 and "Traceback" not in agent.output()


def test_agent_claiming_another_cluster_is_refused_and_keeps_running(
        sandbox: state.SandboxState, clusters: conftest.Clusters, pki: pathlib.Path, coordinator: str,
        tmp_path: pathlib.Path) -> None:
    impostor = start_agent("member-2", pki / "member-1", kubeconfig=sandbox.cluster("member-2").kubeconfig,
                           coordinator=coordinator, log=tmp_path / "agent.log")
    try:
        refusal = wait_for(
            lambda: next((line for line in impostor.output().splitlines()
                          if "coordinator refused the agent" in line), None),
            timeout=WAIT, message=lambda: f"the agent never logged a refusal:\n{impostor.output()}")
        assert " ERROR " in refusal and "PERMISSION_DENIED" in refusal
        assert "'member-2'" in refusal and "'member-1'" in refusal, refusal
        assert impostor.popen.poll() is None, "a refused agent keeps running (fail static)"
        assert "connected to coordinator" not in impostor.output()
        assert member_cluster(clusters.custom(hubside.HUB), "member-2") is None, "nothing registered"
        with placement_client(coordinator, pki) as placements:
            assert "member-2" not in [c.name for c in placements.clusters()]
    finally:
        impostor.stop()
    assert "Traceback" not in impostor.output()


def test_plaintext_client_of_an_mtls_coordinator_gets_a_hint(coordinator: str) -> None:
    result = fedspread("get", "clusters", "--coordinator", coordinator, "--insecure", "--timeout", "5")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "may require mTLS" in result.stderr
    no_flags = fedspread("get", "clusters", "--coordinator", coordinator)
    assert no_flags.returncode == 2 and "--insecure" in no_flags.stderr
