"""Pure parts of the sandbox: node profiles, readiness counting, state files, certificates, build inputs.

Why: these run on every `sandbox up` and in every integration fixture; when one is wrong the
symptom is a sandbox that times out far away from the cause. No processes are started here
(the TLS check talks to itself over 127.0.0.1 in a thread).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import os
import pathlib
import socket
import ssl
import threading

import pytest
import tenacity
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from federation.certs import pki
from federation.sandbox import build, debian_fetch, kubelet_status, nodesim, state

ZONE = "topology.kubernetes.io/zone"


# --------------------------------------------------------------------------------------------
# node profiles
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("nodes", [1, 2, 3, 4, 5, 7, 10, 100])
def test_default_profile_splits_nodes_evenly_over_zones(nodes: int) -> None:
    groups = nodesim.default_profile("member-1", nodes)
    counts = [g.count for g in groups]
    assert sum(counts) == nodes
    assert all(count > 0 for count in counts)  # no empty groups
    assert max(counts) - min(counts) <= 1
    assert len(groups) == min(nodes, 3)
    zones = [g.labels[ZONE] for g in groups]
    assert len(set(zones)) == len(zones)
    assert all(g.prefix == zone and zone.startswith("member-1-")
               for g, zone in zip(groups, zones, strict=True))
    assert all(g.taints == [] and g.allocatable["pods"] == "110" for g in groups)


def test_profile_round_trips_through_json() -> None:
    groups = [
        *nodesim.default_profile("member-2", 5),
        nodesim.NodeGroup(prefix="gpu", count=2, labels={"accelerator": "a100"},
                          taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
                          allocatable={"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}),
    ]
    text = nodesim.dump_profile(groups)
    assert nodesim.load_profile(text) == groups
    assert json.loads(text)[-1]["allocatable"]["nvidia.com/gpu"] == "8"


def _node(name: str, *, ready: str | None, taints: list[dict[str, str]] | None = None) -> dict[str, object]:
    conditions = [] if ready is None else [
        {"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]
    return {"metadata": {"name": name}, "spec": {"taints": taints} if taints is not None else {},
            "status": {"conditions": conditions}}


def test_count_ready_nodes_counts_only_ready_untainted_nodes() -> None:
    not_ready_taint = {"key": nodesim.NOT_READY_TAINT, "effect": "NoSchedule"}
    items = [
        _node("ready", ready="True"),
        _node("ready-other-taint", ready="True", taints=[{"key": "dedicated", "effect": "NoSchedule"}]),
        _node("not-ready", ready="False"),
        _node("unknown", ready="Unknown"),
        _node("ready-but-tainted", ready="True", taints=[not_ready_taint]),
        _node("no-status", ready=None),
    ]
    body = json.dumps({"kind": "NodeList", "items": items}).encode()
    assert nodesim.count_ready_nodes(body) == 2
    assert nodesim.count_ready_nodes(b'{"kind": "NodeList", "items": []}') == 0
    assert nodesim.count_ready_nodes(b'{"kind": "NodeList"}') == 0


def test_pod_status_reports_running_ready_pod_like_a_kubelet() -> None:
    now = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    pod = {"metadata": {"uid": "u-1"}, "spec": {
        "initContainers": [{"name": "init", "image": "busybox"}],
        "containers": [{"name": "app", "image": "nginx"}, {"name": "side", "image": "envoy"}]},
        "status": {"phase": "Pending", "qosClass": "BestEffort"}}
    status, wake = kubelet_status.pod_status(pod, now=now, pod_ip="10.244.0.2", host_ip="127.1.0.1")
    assert wake is None
    assert status["phase"] == "Running" and status["podIP"] == "10.244.0.2"
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == dict.fromkeys(("Initialized", "PodScheduled", "ContainersReady", "Ready"), "True")
    assert [(c["name"], c["started"], c["ready"]) for c in status["containerStatuses"]] == [
        ("app", True, True), ("side", True, True)]
    (init,) = status["initContainerStatuses"]
    assert init["state"]["terminated"]["reason"] == "Completed"
    assert init["state"]["terminated"]["exitCode"] == 0


def test_pod_status_waits_for_probe_delays_and_readiness_gates() -> None:
    start = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    pod = {"metadata": {"uid": "u-2"}, "spec": {
        "containers": [{"name": "app", "readinessProbe": {"initialDelaySeconds": 10}},
                       {"name": "slow", "startupProbe": {"initialDelaySeconds": 4}}],
        "readinessGates": [{"conditionType": "example.com/ok"}]}, "status": {}}
    status, wake = kubelet_status.pod_status(pod, now=start, pod_ip="10.244.0.3", host_ip="127.1.0.1")
    assert wake == 4  # the next change: the slow container starts
    containers = [(c["started"], c["ready"]) for c in status["containerStatuses"]]
    assert containers == [(True, False), (False, False)]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "False"

    pod["status"] = status  # as the apiserver would now report it
    later = start + datetime.timedelta(seconds=11)
    status, wake = kubelet_status.pod_status(pod, now=later, pod_ip="10.244.0.3", host_ip="127.1.0.1")
    conditions = {c["type"]: c for c in status["conditions"]}
    assert wake is None and conditions["ContainersReady"]["status"] == "True"
    ready = conditions["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "ReadinessGatesNotReady")

    gate = {"type": "example.com/ok", "status": "True"}  # set by whoever owns the gate
    pod["status"] = {**status, "conditions": [*status["conditions"], gate]}
    status, _ = kubelet_status.pod_status(pod, now=later, pod_ip="10.244.0.3", host_ip="127.1.0.1")
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"


# --------------------------------------------------------------------------------------------
# sandbox state
# --------------------------------------------------------------------------------------------


def test_process_start_time_of_this_process_is_an_int() -> None:
    started = state.process_start_time(os.getpid())
    assert isinstance(started, int) and started > 0
    assert state.process_start_time(os.getpid()) == started  # stable: it identifies the process


def test_process_start_time_of_a_missing_process_is_none() -> None:
    pid_max = int(pathlib.Path("/proc/sys/kernel/pid_max").read_text())
    assert state.process_start_time(pid_max + 1) is None  # no process can have it


def test_sandbox_state_round_trips_through_its_file(tmp_path: pathlib.Path) -> None:
    logs = tmp_path / "logs"
    saved = state.SandboxState(
        directory=str(tmp_path), etcd_port=2379, token="t0ken", ca_file=str(tmp_path / "pki" / "ca.crt"),
        clusters=[state.ClusterRecord("hub", "hub", 6443, str(tmp_path / "hub" / "kubeconfig")),
                  state.ClusterRecord("member-1", "member", 6444, str(tmp_path / "member-1" / "kubeconfig"))],
        components=[state.Component("etcd", 101, 5000, str(logs / "etcd.log")),
                    state.Component("hub-apiserver", 102, 5001, str(logs / "hub-apiserver.log"))],
    )
    saved.save()
    loaded = state.SandboxState.load(tmp_path)
    assert loaded == saved
    assert loaded.hub.name == "hub" and [m.name for m in loaded.members] == ["member-1"]
    assert loaded.cluster("member-1").server == "https://127.0.0.1:6444"
    assert not list(tmp_path.glob("*.partial"))


def test_sandbox_state_load_without_a_sandbox_raises(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError):
        state.SandboxState.load(tmp_path)


# --------------------------------------------------------------------------------------------
# certificates
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> pki.CertificateAuthority:
    return pki.CertificateAuthority.create("unit-test-ca")


def test_server_certificate_is_signed_by_the_ca_and_names_loopback(ca: pki.CertificateAuthority) -> None:
    pair = ca.issue_server("apiserver")
    cert = x509.load_pem_x509_certificate(pair.cert_pem)
    root = x509.load_pem_x509_certificate(ca.cert_pem)
    cert.verify_directly_issued_by(root)  # raises if the signature or issuer is wrong
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, name: str) -> bytes:
    """Connect `client` to a one-shot TLS server on 127.0.0.1 as `name`; what the server sent."""
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve() -> None:
            connection, _ = listener.accept()
            with contextlib.suppress(OSError), server.wrap_socket(connection, server_side=True) as tls:
                tls.sendall(b"ok")

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            with socket.create_connection(listener.getsockname(), timeout=5) as raw, \
                    client.wrap_socket(raw, server_hostname=name) as tls:
                return tls.recv(2)
        finally:
            thread.join(timeout=5)


def test_server_certificate_passes_a_real_tls_handshake(ca: pki.CertificateAuthority,
                                                        tmp_path: pathlib.Path) -> None:
    cert_file, key_file = ca.issue_server("webhook").write(tmp_path, "server")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    trusting = ssl.create_default_context(cadata=ca.cert_pem.decode())
    for name in ("127.0.0.1", "localhost"):  # both SANs, checked by Python's own verifier
        assert _handshake(server, trusting, name) == b"ok"
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(server, trusting, "example.com")  # a name the certificate does not carry
    stranger = ssl.create_default_context(cadata=pki.CertificateAuthority.create("other").cert_pem.decode())
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(server, stranger, "127.0.0.1")  # a client trusting another CA


def test_client_certificate_carries_user_and_group(ca: pki.CertificateAuthority) -> None:
    cert = x509.load_pem_x509_certificate(ca.issue_client("alice", organization="system:masters").cert_pem)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage


# --------------------------------------------------------------------------------------------
# build inputs
# --------------------------------------------------------------------------------------------


def test_source_entries_turn_deb822_binary_entries_into_source_entries(tmp_path: pathlib.Path) -> None:
    sources = tmp_path / "debian.sources"
    sources.write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n"
        "Components: main\n")
    entries = debian_fetch.source_entries(sources)
    assert entries.count("Types: deb-src\n") == 2
    assert "Types: deb\n" not in entries
    assert "URIs: http://mirror.example/debian-security" in entries


def test_source_entries_turn_one_line_entries_into_source_entries(tmp_path: pathlib.Path) -> None:
    sources = tmp_path / "sources.list"
    sources.write_text("# a comment\ndeb http://x bookworm main\ndeb-src http://y bookworm main\n"
                       "deb http://x bookworm-updates main contrib\n")
    assert debian_fetch.source_entries(sources) == (
        "deb-src http://x bookworm main\ndeb-src http://x bookworm-updates main contrib\n")


def test_source_entries_of_a_missing_file_raise_fetch_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(debian_fetch.FetchError, match="no Debian sources file"):
        debian_fetch.source_entries(tmp_path / "absent.sources")


def test_ensure_names_the_variable_when_its_directory_lacks_binaries(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kube-apiserver").write_text("#!/bin/sh\n")  # one of three, and not executable
    monkeypatch.setenv(build.ENV_BIN, str(tmp_path))
    with pytest.raises(build.BuildError, match=build.ENV_BIN) as raised:
        build.ensure(lambda line: None)
    assert str(tmp_path) in str(raised.value)


def test_a_debian_tool_past_its_deadline_is_a_fetch_error() -> None:
    with pytest.raises(debian_fetch.FetchError, match=r"did not finish within 0\.2 s"):
        debian_fetch._run(["sleep", "5"], what="sleep", timeout=0.2)


def test_a_downloading_command_is_tried_three_times_then_fails(tmp_path: pathlib.Path) -> None:
    tries = tmp_path / "tries"
    fetch = debian_fetch._fetch.retry_with(wait=tenacity.wait_none())  # type: ignore[attr-defined]
    with pytest.raises(debian_fetch.FetchError, match="exit 1"):
        fetch(["sh", "-c", f"echo try >> {tries}; exit 1"], what="a flaky mirror")
    assert tries.read_text().splitlines() == ["try"] * debian_fetch.ATTEMPTS
