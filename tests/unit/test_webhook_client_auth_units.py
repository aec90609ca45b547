"""The webhook's client authentication against the real HTTPS server on loopback.

With `client_auth` (`federation.kube.webhook_clients`), a review POSTed without a client
certificate gets 401, with a certificate of the client CA but another common name 403, each with a
reason and without counting a decision; the allowed name gets 200. A certificate of another CA
fails the TLS handshake. Health probes, which present no certificate, stay open. After every refusal
the server keeps serving. Without `client_auth` nobody is asked for a certificate (the default),
and the server says so in one warning as it starts. The coordinator's validating webhook takes the
same check through its `WebhookSettings`, and both commands the same flags.
"""

from __future__ import annotations

import datetime
import http.client
import json
import logging
import pathlib
import ssl
from collections.abc import Iterator

import pytest

# tests/unit has no __init__.py: pytest's default import mode puts this directory on sys.path.
import webhook_support as ws
from click import testing

from agents.webhook import server
from federation import cli
from federation.api import common
from federation.certs import pki
from federation.coordinator import facade
from federation.coordinator.hub import admission
from federation.coordinator.model import world
from federation.kube import webhook_clients
from tests.support.clock import ManualClock

APISERVER = "kube-apiserver"
T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
Authorities = tuple[pki.CertificateAuthority, pki.CertificateAuthority]


@pytest.fixture(scope="module")
def authorities() -> Authorities:
    """The serving CA (the client trusts it) and the client CA (the server trusts it)."""
    return pki.CertificateAuthority.create("serving-ca"), pki.CertificateAuthority.create("client-ca")


@pytest.fixture
def webhook(authorities: Authorities, tmp_path: pathlib.Path) -> Iterator[server.WebhookServer]:
    serving, clients = authorities
    clients.pair().write(tmp_path, "client-ca")
    auth = webhook_clients.ClientAuth(tmp_path / "client-ca.crt", frozenset({APISERVER}))
    running = ws.start(serving, tmp_path, max_body=ws.SMALL_LIMIT, client_auth=auth)
    yield running
    running.stop()


def connect(webhook: server.WebhookServer, serving: pki.CertificateAuthority,
            pair: tuple[pathlib.Path, pathlib.Path] | None) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cadata=serving.cert_pem.decode())
    if pair is not None:
        context.load_cert_chain(*pair)
    return http.client.HTTPSConnection("127.0.0.1", webhook.port, context=context, timeout=30)


def post(connection: http.client.HTTPSConnection, uid: str) -> tuple[int, dict[str, object]]:
    connection.request("POST", "/mutate?timeout=2s", body=json.dumps(ws.valid_review(uid)).encode(),
                       headers=ws.JSON_HEADERS)
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def decisions(webhook: server.WebhookServer) -> float:
    return sum(webhook.admission.metrics.decision_count(spread="fuzz/web", subset=s, outcome=o)
               for s in ("a", "b") for o in ("assigned",))


def test_only_the_allowed_client_certificate_may_post(
        webhook: server.WebhookServer, authorities: Authorities, tmp_path: pathlib.Path) -> None:
    serving, clients = authorities
    anonymous = connect(webhook, serving, None)
    for attempt in range(3):
        status, answer = post(anonymous, f"anon-{attempt}")
        assert status == 401 and "client certificate" in str(answer["reason"]), answer
    assert anonymous.request("GET", "/healthz") is None and anonymous.getresponse().status == 200

    other = connect(webhook, serving, clients.issue_client("someone").write(tmp_path, "someone"))
    status, answer = post(other, "other-cn")
    assert status == 403 and "'someone'" in str(answer["reason"]), answer
    assert decisions(webhook) == 0, "no refused review was counted"

    rogue = connect(webhook, serving, pki.CertificateAuthority.create("rogue").issue_client(APISERVER)
                    .write(tmp_path, "rogue"))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        post(rogue, "rogue-ca")

    apiserver = connect(webhook, serving, clients.issue_client(APISERVER).write(tmp_path, "apiserver"))
    status, answer = post(apiserver, "real")
    assert status == 200 and answer["response"]["allowed"] is True, answer  # type: ignore[index]
    assert decisions(webhook) == 1


def test_without_client_auth_no_certificate_is_asked_for(authorities: Authorities,
                                                         tmp_path: pathlib.Path) -> None:
    serving, _ = authorities
    running = ws.start(serving, tmp_path, max_body=ws.SMALL_LIMIT)
    try:
        status, _ = post(connect(running, serving, None), "open")
        assert status == 200
    finally:
        running.stop()


def test_common_name_reads_getpeercert_shapes() -> None:
    subject = ((("organizationName", "x"),), (("commonName", "a"),))
    assert webhook_clients.common_name({"subject": subject}) == "a"
    assert webhook_clients.common_name({}) == ""


def test_an_open_webhook_says_so_once_as_it_starts(authorities: Authorities, tmp_path: pathlib.Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    serving, clients = authorities
    with caplog.at_level(logging.INFO, logger="federation.kube"):
        ws.start(serving, tmp_path / "open", max_body=ws.SMALL_LIMIT).stop()
    warned = [r for r in caplog.records if r.getMessage() == webhook_clients.UNAUTHENTICATED]
    assert [(r.levelno, getattr(r, "owner", None)) for r in warned] == [(logging.WARNING, "agent")]

    caplog.clear()
    clients.pair().write(tmp_path, "client-ca")
    auth = webhook_clients.ClientAuth(tmp_path / "client-ca.crt")
    with caplog.at_level(logging.INFO, logger="federation.kube"):
        ws.start(serving, tmp_path / "closed", max_body=ws.SMALL_LIMIT, client_auth=auth).stop()
    assert any(r.getMessage().startswith("webhook serving on") for r in caplog.records)
    assert not any(r.getMessage() == webhook_clients.UNAUTHENTICATED for r in caplog.records)


# --- the coordinator's validating webhook: the same check, through its settings --------------------


@pytest.fixture
def coordinator_webhook(authorities: Authorities, tmp_path: pathlib.Path,
                        caplog: pytest.LogCaptureFixture) -> Iterator[int]:
    """The coordinator's webhook (over an empty World) requiring the client CA and CN APISERVER."""
    serving, clients = authorities
    cert, key = serving.issue_server("fedspread-coordinator", ips=("127.0.0.1",)).write(tmp_path, "webhook")
    clients.pair().write(tmp_path, "client-ca")
    clock = ManualClock(T0)
    door = admission.SpecAdmission(facade.Coordinator(world.World(clock), clock=clock, coordinator_id="t"),
                                   hub_synced=lambda: True)
    settings = admission.WebhookSettings(
        cert_file=cert, key_file=key, port=0, host="127.0.0.1",
        client_auth=webhook_clients.ClientAuth(tmp_path / "client-ca.crt", frozenset({APISERVER})))
    with caplog.at_level(logging.INFO, logger="federation.kube"):
        running = admission.server(door, settings).start()
    assert not any(r.getMessage() == webhook_clients.UNAUTHENTICATED for r in caplog.records)
    yield running.port
    running.stop()


def member_cluster_review(uid: str) -> bytes:
    """A CREATE review of a valid MemberCluster, as anyone could post it."""
    group = {"group": common.API_GROUP, "version": common.API_VERSION}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "operation": "CREATE", "name": "dc1", "kind": {**group, "kind": "MemberCluster"},
        "resource": {**group, "resource": "memberclusters"},
        "object": {"apiVersion": f"{common.API_GROUP}/{common.API_VERSION}", "kind": "MemberCluster",
                   "metadata": {"name": "dc1"}, "spec": {}}}}).encode()


def test_the_coordinator_webhook_answers_only_the_allowed_client_certificate(
        coordinator_webhook: int, authorities: Authorities, tmp_path: pathlib.Path) -> None:
    serving, clients = authorities

    def ask(pair: tuple[pathlib.Path, pathlib.Path] | None, uid: str) -> tuple[int, dict[str, object]]:
        context = ssl.create_default_context(cadata=serving.cert_pem.decode())
        if pair is not None:
            context.load_cert_chain(*pair)
        connection = http.client.HTTPSConnection("127.0.0.1", coordinator_webhook, context=context,
                                                 timeout=30)
        try:
            connection.request("POST", admission.VALIDATE_PATH, body=member_cluster_review(uid),
                               headers=ws.JSON_HEADERS)
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    status, answer = ask(None, "anonymous")
    assert status == 401 and "client certificate" in str(answer["reason"]), answer
    status, answer = ask(clients.issue_client("someone").write(tmp_path, "someone"), "other-cn")
    assert status == 403 and "'someone'" in str(answer["reason"]), answer
    status, answer = ask(clients.issue_client(APISERVER).write(tmp_path, "apiserver"), "hub")
    assert status == 200 and answer["response"] == {"uid": "hub", "allowed": True}, answer


# --- the flags, the same on both commands ------------------------------------------------------------


@pytest.mark.parametrize("command", [
    ["agent", "--cluster", "dc1", "--coordinator", "127.0.0.1:7443", "--insecure"],
    ["coordinator", "--no-ray", "--insecure"]])
def test_an_allowed_cn_without_a_client_ca_is_a_usage_error(command: list[str]) -> None:
    result = testing.CliRunner().invoke(cli.main, [*command, "--webhook-allowed-cn", "kube-apiserver"])
    assert result.exit_code == 2, result.output
    assert "--webhook-allowed-cn needs --webhook-client-ca" in result.output
    assert "Traceback" not in result.output


def test_a_coordinator_client_ca_without_a_served_webhook_is_a_usage_error(tmp_path: pathlib.Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    result = testing.CliRunner().invoke(cli.main, ["coordinator", "--no-ray", "--insecure",
                                                   "--webhook-client-ca", str(ca)])
    assert result.exit_code == 2, result.output
    assert "--webhook-client-ca needs --webhook-cert and --webhook-key" in result.output


@pytest.mark.parametrize("command", ["agent", "coordinator"])
def test_both_commands_explain_the_client_flags_alike(command: str) -> None:
    result = testing.CliRunner().invoke(cli.main, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    apiserver = "member" if command == "agent" else "hub"
    assert (f"Admit reviews only from callers with a client certificate this CA (PEM) signed: the "
            f"{apiserver} apiserver's") in text
    assert "With --webhook-client-ca: only client certificates with this common name" in text
