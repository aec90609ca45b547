"""mTLS between agents, the coordinator and the SDK, over real gRPC on loopback (issue 8).

Why this way: identity is only as good as the handshake that proves it. So the coordinator's real
AgentService and PlacementService serve on a real TLS port with certificates `federation.certs`
issues (as `fedspread certs` writes them), and the clients are the real agent `Link`, the real
SDK and raw gRPC stubs (to read status codes exactly). Covered: an agent speaking for its own
cluster is welcomed; for another cluster, or with an SDK user's certificate, it is refused with
PERMISSION_DENIED naming both; a later message naming another cluster ends the stream; no client
certificate, or one from another CA, is refused at the handshake (UNAVAILABLE on the client); the
SDK works over TLS and fails with a hint without it; `--insecure` plaintext still works; a
refused agent heals when its certificate files are replaced, without a restart. No Kubernetes,
no Ray; waits poll with deadlines.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import logging
import pathlib
import queue
from collections.abc import Callable, Iterator

import grpc
import pytest
from click import testing

from agents import bookkeeping as bookkeeping_mod
from agents import outbox as outbox_mod
from agents.link import client as link_mod
from federation import cli, sdk
from federation.certs import bundles, store, transport
from federation.coordinator import facade
from federation.coordinator.model import world
from federation.coordinator.services import agent_service, aio_server, placement_service
from federation.coordinator.wire import convert
from federation.rpc import agent_pb2, agent_pb2_grpc
from tests.support import in_memory_source, polling, sdk_clients

DEADLINE = 10.0
T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """One CA with the coordinator, agents dc1 and aws, user alice; a rogue CA with its own dc1."""
    root = tmp_path_factory.mktemp("pki")
    bundles.make_ca(root / "ca")
    bundles.make_coordinator(root / "ca", root / "coordinator")
    bundles.make_agent(root / "ca", root / "dc1", cluster="dc1")
    bundles.make_agent(root / "ca", root / "aws", cluster="aws")
    bundles.make_client(root / "ca", root / "alice", name="alice")
    bundles.make_ca(root / "rogue-ca")
    bundles.make_agent(root / "rogue-ca", root / "rogue-dc1", cluster="dc1")
    bundles.make_coordinator(root / "rogue-ca", root / "rogue-coordinator")
    return root


def files(pki: pathlib.Path, name: str) -> transport.TLSFiles:
    return transport.TLSFiles.in_directory(pki / name)


def credentials(pki: pathlib.Path, name: str, *, trust: str | None = None) -> grpc.ChannelCredentials:
    """`name`'s client certificate, trusting the CA in `trust`'s bundle (default: its own)."""
    mine = files(pki, name)
    if trust is not None:
        mine = dataclasses.replace(mine, ca=files(pki, trust).ca)
    return transport.channel_credentials(mine)


class Coordinator:
    """AgentService + PlacementService on 127.0.0.1, over mTLS (or plaintext with `tls=None`)."""

    def __init__(self, tls: transport.TLSFiles | None, *, require_identity: bool = True) -> None:
        clock: Callable[[], datetime.datetime] = lambda: T0  # noqa: E731
        self.facade = facade.Coordinator(world.World(clock), clock=clock, coordinator_id="mtls")
        self.server = aio_server.AioServer(workers=4)
        agent_service.add_to_server(self.server.server, agent_service.AgentServicer(
            self.facade, clock=clock, heartbeat_seconds=1, require_identity=require_identity))
        placement_service.add_to_server(self.server.server, in_memory_source.InMemorySource(
            clusters=[convert.ClusterRecord(name="dc1")]))
        if tls is None:
            port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            port = self.server.add_secure_port("127.0.0.1:0", transport.server_credentials(tls))
        assert port, "cannot bind"
        self.target = f"127.0.0.1:{port}"
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=None)


@pytest.fixture
def coordinator(pki: pathlib.Path) -> Iterator[Coordinator]:
    running = Coordinator(files(pki, "coordinator"))
    yield running
    running.stop()


@pytest.fixture
def plaintext() -> Iterator[Coordinator]:
    running = Coordinator(None, require_identity=False)
    yield running
    running.stop()


def make_link(target: str, cluster: str, credentials: link_mod.Credentials | None) -> link_mod.Link:
    return link_mod.Link(link_mod.LinkSettings(target, cluster, credentials=credentials,
                                               heartbeat_seconds=0.5, backoff_initial_seconds=0.05,
                                               backoff_cap_seconds=0.2,
                                               misconfigured_backoff_seconds=0.1),
                         bookkeeping=bookkeeping_mod.Bookkeeping(), outbox=outbox_mod.ReportOutbox())


def hello(cluster: str) -> agent_pb2.AgentMessage:
    return agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster_name=cluster, agent_version="test"))


class RawStream:
    """AgentService.Connect driven by hand: send messages, read replies, see the final status."""

    def __init__(self, target: str, channel_credentials: grpc.ChannelCredentials | None) -> None:
        self._requests: queue.Queue[agent_pb2.AgentMessage | None] = queue.Queue()
        self.channel = (grpc.insecure_channel(target) if channel_credentials is None
                        else grpc.secure_channel(target, channel_credentials))
        self.call = agent_pb2_grpc.AgentServiceStub(self.channel).Connect(self._messages(), timeout=DEADLINE)

    def _messages(self) -> Iterator[agent_pb2.AgentMessage]:
        while (item := self._requests.get()) is not None:
            yield item

    def send(self, message: agent_pb2.AgentMessage) -> None:
        self._requests.put(message)

    def next_kind(self) -> str | None:
        return next(self.call).WhichOneof("body")

    def status(self) -> grpc.RpcError:
        """Read until the stream ends with an error; that error."""
        try:
            for _ in self.call:
                pass
        except grpc.RpcError as error:
            return error
        raise AssertionError("the stream ended without an error status")

    def close(self) -> None:
        self._requests.put(None)
        self.call.cancel()
        self.channel.close()


@pytest.fixture
def raw() -> Iterator[Callable[..., RawStream]]:
    opened: list[RawStream] = []

    def open_stream(target: str, channel_credentials: grpc.ChannelCredentials | None) -> RawStream:
        opened.append(RawStream(target, channel_credentials))
        return opened[-1]

    yield open_stream
    for stream in opened:
        stream.close()


wait = functools.partial(polling.wait, timeout=DEADLINE)
"""`polling.wait` with this file's deadline."""


# --- agents --------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_agent_with_its_own_certificate_is_welcomed(pki: pathlib.Path, coordinator: Coordinator,
                                                    host: str) -> None:
    link_files = files(pki, "dc1")
    target = coordinator.target.replace("127.0.0.1", host)
    link = make_link(target, "dc1", lambda: transport.channel_credentials(link_files))
    link.start()
    try:
        assert link.wait_connected(DEADLINE), "the agent of dc1 was not welcomed"
        assert coordinator.facade.connected() == ["dc1"]
    finally:
        link.stop()


def test_hello_for_another_cluster_is_permission_denied_naming_both(
        pki: pathlib.Path, coordinator: Coordinator, raw: Callable[..., RawStream]) -> None:
    stream = raw(coordinator.target, credentials(pki, "dc1"))
    stream.send(hello("aws"))
    error = stream.status()
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "'aws'" in (error.details() or "") and "'dc1'" in (error.details() or "")
    assert coordinator.facade.connected() == [], "nothing was registered for aws"


def test_refused_agent_logs_the_refusal_and_stays_disconnected(
        pki: pathlib.Path, coordinator: Coordinator, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agents.link")
    link = make_link(coordinator.target, "aws", credentials(pki, "dc1"))  # aws, with dc1's certificate
    link.start()
    try:
        wait(lambda: any(r.levelno == logging.ERROR for r in caplog.records), what="ERROR about the refusal")
    finally:
        link.stop()
    (refusal,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "coordinator refused the agent" in refusal.getMessage()
    assert getattr(refusal, "reason", "").startswith("PERMISSION_DENIED: Hello for cluster 'aws' refused")
    assert not link.connected and coordinator.facade.connected() == []


def test_sdk_user_certificate_cannot_open_an_agent_stream(
        pki: pathlib.Path, coordinator: Coordinator, raw: Callable[..., RawStream]) -> None:
    stream = raw(coordinator.target, credentials(pki, "alice"))
    stream.send(hello("alice"))
    error = stream.status()
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "names no cluster" in (error.details() or "")


def test_a_later_message_for_another_cluster_ends_the_stream(
        pki: pathlib.Path, coordinator: Coordinator, raw: Callable[..., RawStream]) -> None:
    stream = raw(coordinator.target, credentials(pki, "dc1"))
    stream.send(hello("dc1"))
    assert stream.next_kind() == "welcome"
    stream.send(hello("aws"))
    error = stream.status()
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "'dc1'" in (error.details() or "") and "'aws'" in (error.details() or "")


def test_no_client_certificate_is_refused_at_the_handshake(
        pki: pathlib.Path, coordinator: Coordinator, raw: Callable[..., RawStream]) -> None:
    anonymous = grpc.ssl_channel_credentials(root_certificates=(pki / "ca" / store.CA_CERT).read_bytes())
    stream = raw(coordinator.target, anonymous)
    stream.send(hello("dc1"))
    assert stream.status().code() == grpc.StatusCode.UNAVAILABLE
    assert coordinator.facade.connected() == []


def test_client_certificate_from_another_ca_is_refused(
        pki: pathlib.Path, coordinator: Coordinator, raw: Callable[..., RawStream]) -> None:
    stream = raw(coordinator.target, credentials(pki, "rogue-dc1", trust="dc1"))  # trusts the right CA
    stream.send(hello("dc1"))
    assert stream.status().code() == grpc.StatusCode.UNAVAILABLE
    assert coordinator.facade.connected() == []


def test_agent_refuses_a_coordinator_its_ca_did_not_sign(pki: pathlib.Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    impostor = Coordinator(files(pki, "rogue-coordinator"))
    caplog.set_level(logging.INFO, logger="agents.link")
    link = make_link(impostor.target, "dc1", credentials(pki, "dc1"))
    link.start()
    try:
        wait(lambda: any(r.levelno == logging.ERROR for r in caplog.records), what="ERROR on the handshake")
    finally:
        link.stop()
        impostor.stop()
    (refusal,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "CERTIFICATE_VERIFY_FAILED" in getattr(refusal, "reason", "")
    assert "not signed by the CA" in getattr(refusal, "hint", "")
    assert impostor.facade.connected() == []


def test_renewed_link_files_heal_a_refused_agent_without_restart(
        pki: pathlib.Path, coordinator: Coordinator, tmp_path: pathlib.Path) -> None:
    def install(name: str) -> None:  # as a Secret update would: new files in the same place
        store.write_files(tmp_path / "link", {n: (pki / name / n).read_bytes()
                                              for n in (store.CERT, store.KEY, store.CA_CERT)},
                          private={store.KEY}, force=True)

    install("aws")  # the wrong cluster's certificate: refused
    link_files = transport.TLSFiles.in_directory(tmp_path / "link")
    link = make_link(coordinator.target, "dc1", lambda: transport.channel_credentials(link_files))
    link.start()
    try:
        wait(lambda: link._outage.last_refusal.startswith("PERMISSION_DENIED"),
             what="refusal of aws's certificate")
        assert not link.connected
        install("dc1")
        assert link.wait_connected(DEADLINE), "the renewed certificate was not used on reconnect"
        assert coordinator.facade.connected() == ["dc1"]
    finally:
        link.stop()


# --- plaintext (--insecure) ------------------------------------------------------------------------


def test_insecure_mode_still_works_without_certificates(plaintext: Coordinator) -> None:
    link = make_link(plaintext.target, "dc1", None)
    link.start()
    try:
        assert link.wait_connected(DEADLINE)
        assert plaintext.facade.connected() == ["dc1"]
    finally:
        link.stop()


def test_insecure_mode_still_refuses_speaking_for_another_cluster(
        plaintext: Coordinator, raw: Callable[..., RawStream]) -> None:
    stream = raw(plaintext.target, None)
    stream.send(hello("dc1"))
    assert stream.next_kind() == "welcome"
    stream.send(hello("aws"))
    assert stream.status().code() == grpc.StatusCode.PERMISSION_DENIED


def test_identity_required_on_a_plaintext_port_is_unauthenticated(raw: Callable[..., RawStream]) -> None:
    misconfigured = Coordinator(None, require_identity=True)
    try:
        stream = raw(misconfigured.target, None)
        stream.send(hello("dc1"))
        assert stream.status().code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        misconfigured.stop()


# --- the SDK and `fedspread get` -----------------------------------------------------------------


@pytest.mark.parametrize("flavour", sdk_clients.FLAVOURS, ids=repr)
def test_sdk_over_mtls_with_a_user_certificate_but_never_an_agent_s(
        pki: pathlib.Path, coordinator: Coordinator, flavour: sdk_clients.Flavour) -> None:
    alice, dc1 = files(pki, "alice"), files(pki, "dc1")
    with flavour.with_tls(coordinator.target, ca=alice.ca, cert=alice.cert, key=alice.key,
                          timeout=DEADLINE) as client:
        assert [c.name for c in client.clusters()] == ["dc1"]
    with flavour.with_tls(coordinator.target, ca=dc1.ca, cert=dc1.cert, key=dc1.key,
                          timeout=DEADLINE) as client, \
            pytest.raises(sdk.PermissionDenied, match="agent's certificate may not read placements") as error:
        client.clusters()
    assert error.value.code == "PERMISSION_DENIED"


@pytest.mark.parametrize("flavour", sdk_clients.FLAVOURS, ids=repr)
def test_sdk_without_tls_against_mtls_fails_with_a_hint(coordinator: Coordinator,
                                                        flavour: sdk_clients.Flavour) -> None:
    with flavour.connect(coordinator.target, timeout=DEADLINE) as client, \
            pytest.raises(sdk.CoordinatorUnavailable) as error:
        client.clusters()
    assert "hint: the coordinator may require mTLS" in str(error.value)


@pytest.mark.parametrize("flavour", sdk_clients.FLAVOURS, ids=repr)
def test_sdk_refuses_bad_certificate_files_before_dialling(pki: pathlib.Path,
                                                           flavour: sdk_clients.Flavour) -> None:
    alice, aws = files(pki, "alice"), files(pki, "aws")
    with pytest.raises(sdk.CertificateError, match="does not belong to certificate"), \
            flavour.with_tls("127.0.0.1:1", ca=alice.ca, cert=alice.cert, key=aws.key):
        pass
    with pytest.raises(sdk.CertificateError, match="no such file"), \
            flavour.with_tls("127.0.0.1:1", ca=alice.ca, cert="/nonexistent.crt", key=alice.key):
        pass


def test_fedspread_get_over_mtls_and_its_usage_errors(pki: pathlib.Path, coordinator: Coordinator) -> None:
    alice, runner = files(pki, "alice"), testing.CliRunner()
    base = ["get", "clusters", "-o", "json", "--coordinator", coordinator.target]
    ok = runner.invoke(cli.main, [*base, "--ca", str(alice.ca), "--cert", str(alice.cert),
                                  "--key", str(alice.key)])
    assert ok.exit_code == 0, ok.output
    assert '"name": "dc1"' in ok.output
    via_env = runner.invoke(cli.main, base, env={
        "FEDSPREAD_CA": str(alice.ca), "FEDSPREAD_CERT": str(alice.cert), "FEDSPREAD_KEY": str(alice.key)})
    assert via_env.exit_code == 0, via_env.output
    neither = runner.invoke(cli.main, base)
    assert neither.exit_code == 2 and "--insecure" in neither.output
    both = runner.invoke(cli.main, [*base, "--insecure", "--ca", str(alice.ca)])
    assert both.exit_code == 2 and "contradicts" in both.output
    plaintext = runner.invoke(cli.main, [*base, "--insecure", "--timeout", "3"])
    assert plaintext.exit_code == 1 and "Traceback" not in plaintext.output
    assert "may require mTLS" in plaintext.output


# --- the transport flags of `fedspread coordinator` and `fedspread agent` ---------------------------


@pytest.mark.parametrize("command", [["coordinator", "--no-ray"],
                                     ["agent", "--cluster", "dc1", "--coordinator", "127.0.0.1:1"]])
def test_plaintext_needs_an_explicit_insecure(command: list[str]) -> None:
    result = testing.CliRunner().invoke(cli.main, command)
    assert result.exit_code == 2, result.output
    assert "--insecure" in result.output and "fedspread certs" in result.output


@pytest.mark.parametrize(("command", "prefix"), [
    (["coordinator", "--no-ray"], "tls"), (["agent", "--cluster", "dc1", "--coordinator", "x:1"], "link")])
def test_half_given_or_contradicting_transport_flags_are_usage_errors(
        pki: pathlib.Path, command: list[str], prefix: str) -> None:
    mine = files(pki, "dc1")
    runner = testing.CliRunner()
    half = runner.invoke(cli.main, [*command, f"--{prefix}-cert", str(mine.cert)])
    assert half.exit_code == 2 and f"without --{prefix}-key, --{prefix}-ca" in half.output
    both = runner.invoke(cli.main, [*command, "--insecure", f"--{prefix}-ca", str(mine.ca)])
    assert both.exit_code == 2 and "contradicts" in both.output


@pytest.mark.parametrize(("command", "prefix", "what"), [
    (["coordinator", "--no-ray"], "tls", "error: TLS: private key"),
    (["agent", "--cluster", "dc1", "--coordinator", "x:1"], "link", "error: link certificate: private key"),
])
def test_mismatched_certificate_files_fail_at_start_in_one_line(
        pki: pathlib.Path, command: list[str], prefix: str, what: str) -> None:
    mine, other = files(pki, "coordinator" if prefix == "tls" else "dc1"), files(pki, "aws")
    result = testing.CliRunner().invoke(cli.main, [
        *command, f"--{prefix}-cert", str(mine.cert), f"--{prefix}-key", str(other.key),
        f"--{prefix}-ca", str(mine.ca)])
    assert result.exit_code == 1, result.output
    assert result.output.startswith(what) and "does not belong to certificate" in result.output
    assert "Traceback" not in result.output
