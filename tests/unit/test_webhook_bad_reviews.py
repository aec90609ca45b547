"""Named kinds of bad AdmissionReview request, each against the real HTTPS webhook server.

Why beside the fuzzers of `test_webhook_fuzz.py`: random bodies rarely hit the cases an operator
will actually meet — a review of another kind or version, one without `request`, `uid` or
`object`, an object that is not an object, a body cut short, the wrong Content-Type, a body far
over the limit. Each is named here with the status the server must give: 400 with a reason (413
for a body over the limit), never a 500, a hang or a dropped server; after each the same
keep-alive connection (or a new one, when the server closed it on purpose) still gets a valid
review answered 200.
"""

from __future__ import annotations

import copy
import json
import socket
import ssl
from collections.abc import Callable, Iterator
from typing import Any

import hypothesis
import pytest

# tests/unit has no __init__.py: pytest's default import mode puts this directory on sys.path.
import webhook_support as ws
from hypothesis import strategies as st

from agents.webhook import review, server
from federation.certs import pki

SETTINGS = hypothesis.settings(max_examples=40, deadline=None,
                               suppress_health_check=[hypothesis.HealthCheck.too_slow])
FIVE_MEBIBYTES = 5 * 1024 * 1024


@pytest.fixture(scope="module")
def ca() -> pki.CertificateAuthority:
    """The CA the client trusts."""
    return pki.CertificateAuthority.create("webhook-bad-reviews-ca")


@pytest.fixture(scope="module")
def webhook(ca: pki.CertificateAuthority, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[server.WebhookServer]:
    """The server under test with the production body limit (3 MiB)."""
    running = ws.start(ca, tmp_path_factory.mktemp("bad-review-certs"), max_body=review.MAX_BODY)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def client(webhook: server.WebhookServer, ca: pki.CertificateAuthority) -> Iterator[ws.Client]:
    """A keep-alive client shared by the module's cases."""
    shared = ws.Client(webhook.port, ca.cert_pem)
    yield shared
    shared.close()


def edited(change: Callable[[dict[str, Any]], None]) -> bytes:
    """A valid review with `change` applied, as JSON bytes."""
    document = ws.valid_review("bad")
    change(document)
    return json.dumps(document).encode()


def _set(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        node = document
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


def _drop(path: tuple[str, ...]) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        node = document
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return change


BAD_REVIEWS = [
    pytest.param(edited(_set(("kind",), "AdmissionRequest")), "kind must be", id="wrong-kind"),
    pytest.param(edited(_set(("kind",), 7)), "kind must be string", id="kind-not-a-string"),
    pytest.param(edited(_set(("apiVersion",), "admission.k8s.io/v1beta1")), "apiVersion must be",
                 id="wrong-apiVersion-v1beta1"),
    pytest.param(edited(_drop(("apiVersion",))), "apiVersion is required", id="missing-apiVersion"),
    pytest.param(edited(_drop(("request",))), "request is required", id="missing-request"),
    pytest.param(edited(_set(("request",), [1, 2])), "request must be object", id="request-an-array"),
    pytest.param(edited(_drop(("request", "uid"))), "request.uid is required", id="missing-uid"),
    pytest.param(edited(_set(("request", "uid"), "")), "must not be empty", id="empty-uid"),
    pytest.param(edited(_set(("request", "uid"), {"id": 1})), "request.uid must be string",
                 id="uid-an-object"),
    pytest.param(edited(_drop(("request", "object"))), "request.object is required", id="missing-object"),
    pytest.param(edited(_set(("request", "object"), "a pod")), "request.object must be object",
                 id="object-a-string"),
    pytest.param(edited(_set(("request", "object"), [{"metadata": {}}])), "request.object must be object",
                 id="object-an-array"),
    pytest.param(edited(_set(("request", "object"), 42)), "request.object must be object",
                 id="object-a-number"),
    pytest.param(edited(_set(("request", "object", "metadata"), "x")), "metadata must be object",
                 id="object-metadata-a-string"),
    pytest.param(edited(_set(("request", "operation"), "PATCH")), "request.operation must be one of",
                 id="unknown-operation"),
    pytest.param(edited(_drop(("request", "kind"))), "request.kind is required", id="missing-request-kind"),
    pytest.param(edited(_set(("request", "dryRun"), "yes")), "request.dryRun must be boolean",
                 id="dryRun-a-string"),
    pytest.param(b"", "empty body", id="empty-body"),
    pytest.param(b"<AdmissionReview/>", "not JSON", id="xml"),
    pytest.param(b"\xff\xfe{}", "not UTF-8", id="not-utf8"),
    pytest.param(b"null", "must be a JSON object", id="json-null"),
    pytest.param(b'"AdmissionReview"', "must be a JSON object", id="json-string"),
    pytest.param(json.dumps(ws.valid_review()).encode()[:-1], "not JSON", id="truncated-by-one-byte"),
]


@pytest.mark.parametrize(("body", "fragment"), BAD_REVIEWS)
def test_bad_review_is_a_400_with_its_reason(client: ws.Client, body: bytes, fragment: str) -> None:
    status, answer = client.post(body)
    ws.assert_rejected(status, answer)
    assert fragment in answer["reason"], answer["reason"]
    ws.assert_still_serving(client)


def test_bad_review_cases_cover_the_named_kinds() -> None:
    assert len(BAD_REVIEWS) >= 20


@SETTINGS
@hypothesis.given(cut=st.integers(0, 10_000))
def test_any_truncation_of_a_valid_review_is_a_400(client: ws.Client, cut: int) -> None:
    whole = json.dumps(ws.valid_review()).encode()
    status, answer = client.post(whole[: cut % len(whole)])
    ws.assert_rejected(status, answer)


@pytest.mark.parametrize("content_type", [
    "text/plain", "application/x-www-form-urlencoded", "application/jsonx", "application/yaml", "",
])
def test_wrong_content_type_is_a_400(client: ws.Client, content_type: str) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    status, answer = client.post(json.dumps(ws.valid_review()).encode(), headers=headers)
    ws.assert_rejected(status, answer)
    assert "Content-Type must be application/json" in answer["reason"]
    ws.assert_still_serving(client)


@SETTINGS
@hypothesis.given(content_type=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), max_size=40))
def test_any_other_content_type_is_a_400(client: ws.Client, content_type: str) -> None:
    hypothesis.assume(content_type.partition(";")[0].strip().lower() != "application/json")
    status, answer = client.post(json.dumps(ws.valid_review()).encode(),
                                 headers={"Content-Type": content_type})
    ws.assert_rejected(status, answer)


def test_json_with_a_charset_parameter_is_accepted(client: ws.Client) -> None:
    status, answer = client.post(json.dumps(ws.valid_review("charset")).encode(),
                                 headers={"Content-Type": "Application/JSON; charset=utf-8"})
    assert status == 200 and answer["response"]["uid"] == "charset"


def test_a_five_mebibyte_body_is_a_413(client: ws.Client) -> None:
    document = ws.valid_review()
    document["request"]["object"]["metadata"]["annotations"] = {"big": "x" * FIVE_MEBIBYTES}
    status, answer = client.post(json.dumps(document).encode())
    ws.assert_rejected(status, answer, allowed=(413,))
    assert "exceeds the limit" in answer["reason"]
    ws.assert_still_serving(client)


def _raw_exchange(port: int, ca: pki.CertificateAuthority, data: bytes) -> bytes:
    """Send `data` on a fresh TLS connection and read one whole answer."""
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(data)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = tls.recv(65536)
            assert chunk, f"the server hung up without a complete answer: {answer!r}"
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")))
        while len(body) < length:
            chunk = tls.recv(65536)
            assert chunk, f"the server hung up mid-answer: {answer!r}"
            body += chunk
        return head + b"\r\n\r\n" + body


def test_a_huge_declared_length_is_a_413_before_any_body(webhook: server.WebhookServer,
                                                          ca: pki.CertificateAuthority,
                                                          client: ws.Client) -> None:
    head = _raw_exchange(webhook.port, ca, b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         b"application/json\r\nContent-Length: 1000000000000\r\n\r\n{")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert b"exceeds the limit" in head
    ws.assert_still_serving(client)


def test_a_client_gone_mid_body_does_not_hurt(webhook: server.WebhookServer, ca: pki.CertificateAuthority,
                                              client: ws.Client) -> None:
    body = json.dumps(ws.valid_review()).encode()
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    with socket.create_connection(("127.0.0.1", webhook.port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % (len(body) + 100) + body)
    ws.assert_still_serving(client)


def test_an_invalid_content_length_is_a_400(webhook: server.WebhookServer, ca: pki.CertificateAuthority,
                                            client: ws.Client) -> None:
    for length in (b"-5", b"ten", b"1e3"):
        head = _raw_exchange(webhook.port, ca, b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: "
                             + length + b"\r\n\r\n{}")
        assert head.startswith(b"HTTP/1.1 400"), (length, head)
    ws.assert_still_serving(client)


def test_a_valid_review_after_every_kind_of_bad_one(client: ws.Client) -> None:
    for param in BAD_REVIEWS:
        ws.assert_rejected(*client.post(copy.copy(param.values[0])))
    ws.assert_still_serving(client)
