"""The webhook's client authentication against the real HTTPS server on loopback.

With `client_auth` (`federation.kube.webhook_clients`), a review POSTed without a client
certificate gets 401, with a certificate of the client CA but another common name 403, each with a
reason and without counting a decision; the allowed name gets 200. A certificate of another CA
fails the TLS handshake. Health probes, which present no certificate, stay open. After every refusal
the server keeps serving. Without `client_auth` nobody is asked for a certificate (the default).
"""

from __future__ import annotations

import http.client
import json
import pathlib
import ssl
from collections.abc import Iterator

import pytest

# tests/unit has no __init__.py: pytest's default import mode puts this directory on sys.path.
import webhook_support as ws

from agents.webhook import server
from federation.certs import pki
from federation.kube import webhook_clients

APISERVER = "kube-apiserver"
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
