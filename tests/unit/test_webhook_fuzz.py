"""The real HTTPS webhook server under hostile input: every bad body gets 400 (or 413), never 500.

Hypothesis posts random bytes, random JSON, AdmissionReviews with fields removed or replaced by
values of the wrong type, pods of a known spread with mangled fields, and bodies over the limit —
over TLS, with http.client, on one keep-alive connection that must never be dropped. After each
run a valid review still gets 200. The server is also checked for health probes, unknown paths,
handler bugs (500, and it keeps serving), non-TLS garbage, certificate rotation and stop().
"""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import os
import pathlib
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest
from cryptography import x509
from hypothesis import strategies as st

from agents import assignment, bookkeeping, metrics
from agents.webhook import handler, review, server
from federation.certs import pki

SMALL_LIMIT = 64 * 1024
NAMESPACE = "fuzz"
SETTINGS = hypothesis.settings(max_examples=60, deadline=None,
                               suppress_health_check=[hypothesis.HealthCheck.too_slow])


def valid_review(uid: str = "ok-1", *, name: str = "p") -> dict[str, Any]:
    """A well-formed pod CREATE review for a pod of the spread `fuzz/web`."""
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "operation": "CREATE", "namespace": NAMESPACE, "name": name,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "dryRun": True,
            "object": {"metadata": {"name": name, "labels": {assignment.SPREAD_LABEL: "web"}},
                       "spec": {"containers": [{"name": "app", "image": "nginx"}]}},
        },
    }


class Client:
    """One keep-alive HTTPS connection to the server (http.client reopens it after a close)."""

    def __init__(self, port: int, ca_pem: bytes) -> None:
        context = ssl.create_default_context(cadata=ca_pem.decode())
        self.connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)

    def post(self, body: bytes, *, path: str = "/mutate?timeout=2s") -> tuple[int, Any]:
        """Status and decoded JSON body of a POST."""
        self.connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = self.connection.getresponse()
        return response.status, json.loads(response.read())

    def get(self, path: str) -> tuple[int, bytes]:
        """Status and raw body of a GET."""
        self.connection.request("GET", path)
        response = self.connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()


class Faulty(handler.AdmissionHandler):
    """A handler with a bug for one uid (to check that a crash in it is answered 500)."""

    def handle(self, request: review.Review) -> dict[str, Any]:
        """Fail for uid `boom`, else answer normally."""
        if request.uid == "boom":
            raise RuntimeError("injected bug")
        return super().handle(request)


@pytest.fixture(scope="module")
def ca() -> pki.CertificateAuthority:
    """The CA the client trusts."""
    return pki.CertificateAuthority.create("webhook-fuzz-ca")


def serving_files(ca: pki.CertificateAuthority, directory: pathlib.Path, cn: str) -> tuple[pathlib.Path, ...]:
    """Write a serving pair for 127.0.0.1 (atomically replacing any older one)."""
    pair = ca.issue_server(cn)
    staged = pair.write(directory / "staging", "tls")
    final = (directory / "tls.crt", directory / "tls.key")
    for source, target in zip(staged, final, strict=True):
        os.replace(source, target)
    return final


def start(ca: pki.CertificateAuthority, directory: pathlib.Path, *, max_body: int) -> server.WebhookServer:
    """A started server whose bookkeeping knows spread fuzz/web (two subsets, one with a patch)."""
    cert, key = serving_files(ca, directory, "webhook")
    book = bookkeeping.Bookkeeping()
    rules = (
        assignment.SubsetRule(name="a", index=0, quota=1000, patch={"metadata": {"labels": {"x": "y"}}},
                              required_term={"matchExpressions": [{"key": "z", "operator": "In",
                                                                   "values": ["a"]}]},
                              tolerations=({"key": "k", "operator": "Exists"},)),
        assignment.SubsetRule(name="b", index=1, quota=1000),
    )
    book.set_assignment(assignment.Assignment(
        spread=f"{NAMESPACE}/web", generation=1, namespace=NAMESPACE, workload="web", replicas=2000,
        template={}, template_revision="", subsets=rules, subset_count=2))
    admission = Faulty(book, metrics.AgentMetrics())
    return server.WebhookServer(admission, host="127.0.0.1", port=0, cert_file=cert, key_file=key,
                                max_body=max_body).start()


@pytest.fixture(scope="module")
def webhook(ca: pki.CertificateAuthority, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[server.WebhookServer]:
    """The server under test, with a small body limit so that oversized bodies are cheap."""
    running = start(ca, tmp_path_factory.mktemp("fuzz-certs"), max_body=SMALL_LIMIT)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def client(webhook: server.WebhookServer, ca: pki.CertificateAuthority) -> Iterator[Client]:
    """A keep-alive client shared by the module's examples."""
    shared = Client(webhook.port, ca.cert_pem)
    yield shared
    shared.close()


def assert_rejected(status: int, answer: Any, *, allowed: tuple[int, ...] = (400,)) -> None:
    """The server answered a bad body with one of `allowed` and a reason."""
    assert status in allowed, (status, answer)
    assert isinstance(answer, dict) and answer["code"] == status
    assert isinstance(answer["reason"], str) and answer["reason"], answer


def assert_still_serving(client: Client) -> None:
    """A valid review is answered 200 with an allowed response for its uid."""
    status, answer = client.post(json.dumps(valid_review("after")).encode())
    assert status == 200, answer
    assert answer["response"]["uid"] == "after" and answer["response"]["allowed"] is True


# --- strategies ------------------------------------------------------------------------------------------

scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
           | st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=20)
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
REVIEW_PATHS = [
    ("apiVersion",), ("kind",), ("request",), ("request", "uid"), ("request", "operation"),
    ("request", "kind"), ("request", "kind", "kind"), ("request", "kind", "version"), ("request", "resource"),
    ("request", "resource", "resource"), ("request", "namespace"), ("request", "name"),
    ("request", "object"), ("request", "oldObject"), ("request", "dryRun"), ("request", "userInfo"),
    ("request", "userInfo", "groups"), ("request", "subResource"),
]
POD_PATHS = [
    ("metadata",), ("metadata", "name"), ("metadata", "labels"), ("metadata", "annotations"),
    ("metadata", "generateName"), ("spec",), ("spec", "tolerations"), ("spec", "affinity"),
    ("spec", "affinity", "nodeAffinity"),
    ("spec", "affinity", "nodeAffinity", _REQUIRED),
    ("spec", "affinity", "nodeAffinity", _REQUIRED, "nodeSelectorTerms"),
    ("spec", "affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution"),
    ("spec", "containers"),
]
_DROP = object()


def replaced(document: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of `document` with the value at `path` replaced (or removed for _DROP)."""
    result = copy.deepcopy(document)
    node = result
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    if value is _DROP:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return result


# --- fuzzing ---------------------------------------------------------------------------------------------


@SETTINGS
@hypothesis.given(data=st.binary(max_size=2048))
def test_random_bytes_get_400(client: Client, data: bytes) -> None:
    assert_rejected(*client.post(data))


@SETTINGS
@hypothesis.given(value=json_values)
def test_random_json_gets_400(client: Client, value: Any) -> None:
    assert_rejected(*client.post(json.dumps(value).encode()))


@SETTINGS
@hypothesis.given(path=st.sampled_from(REVIEW_PATHS), value=st.just(_DROP) | json_values)
def test_reviews_with_broken_fields_get_400_or_an_answer(client: Client, path: tuple[str, ...],
                                                         value: Any) -> None:
    status, answer = client.post(json.dumps(replaced(valid_review(), path, value)).encode())
    if status != 200:
        assert_rejected(status, answer)
    else:
        assert answer["response"]["allowed"] is True


@SETTINGS
@hypothesis.given(path=st.sampled_from(POD_PATHS), value=st.just(_DROP) | json_values, dry_run=st.booleans())
def test_mangled_pods_of_a_spread_get_400_or_an_answer(client: Client, path: tuple[str, ...], value: Any,
                                                      dry_run: bool) -> None:
    document = valid_review()
    document["request"]["dryRun"] = dry_run
    document["request"]["object"] = replaced(document["request"]["object"], path, value)
    status, answer = client.post(json.dumps(document).encode())
    if status != 200:
        assert_rejected(status, answer)
    else:
        assert answer["response"]["allowed"] is True


@hypothesis.settings(max_examples=10, deadline=None)
@hypothesis.given(size=st.integers(SMALL_LIMIT + 1, 4 * SMALL_LIMIT))
def test_oversized_bodies_get_413(client: Client, size: int) -> None:
    assert_rejected(*client.post(b"{" + b" " * (size - 2) + b"}"), allowed=(413,))


def test_every_kind_of_bad_input_leaves_the_server_serving(client: Client) -> None:
    assert_rejected(*client.post(b""))
    assert_rejected(*client.post(json.dumps([1] * 10).encode()))
    assert_rejected(*client.post(b"[" * 100_000 + b"]" * 100_000), allowed=(400, 413))
    assert_rejected(*client.post(b"[" * 20_000 + b"]" * 20_000))
    assert_rejected(*client.post(b'{"apiVersion": NaN}'))
    assert_rejected(*client.post(b"1" * 5000))
    assert_still_serving(client)


def test_default_limit_is_three_mebibytes(ca: pki.CertificateAuthority, tmp_path: pathlib.Path) -> None:
    running = start(ca, tmp_path, max_body=review.MAX_BODY)
    local = Client(running.port, ca.cert_pem)
    try:
        assert_rejected(*local.post(b" " * (3 * 1024 * 1024 + 1)), allowed=(413,))
        assert_still_serving(local)
    finally:
        local.close()
        running.stop()


# --- the server around the handler -------------------------------------------------------------------------


def test_health_paths_and_unknown_paths(client: Client) -> None:
    assert client.get("/healthz") == (200, b"ok\n")
    status, raw = client.get("/metrics")
    assert status == 404 and json.loads(raw)["reason"]
    assert_rejected(*client.post(json.dumps(valid_review()).encode(), path="/validate"), allowed=(404,))
    assert_still_serving(client)


def test_a_bug_in_the_handler_is_a_500_and_the_server_keeps_serving(client: Client) -> None:
    status, answer = client.post(json.dumps(valid_review("boom")).encode())
    assert status == 500 and "internal error" in answer["reason"] and "Traceback" not in answer["reason"]
    assert_still_serving(client)


def test_missing_content_length_is_a_400(webhook: server.WebhookServer, ca: pki.CertificateAuthority,
                                         client: Client) -> None:
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    with socket.create_connection(("127.0.0.1", webhook.port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        head = tls.recv(65536)
    assert head.startswith(b"HTTP/1.1 400"), head
    assert_still_serving(client)


def test_plain_text_on_the_tls_port_does_not_hurt(webhook: server.WebhookServer, client: Client) -> None:
    for garbage in (b"GET / HTTP/1.1\r\n\r\n", b"\x16\x03\x01\x00\x05hello", b""):
        # The server may hang up at any point: all that matters is that it keeps serving others.
        with socket.create_connection(("127.0.0.1", webhook.port), timeout=30) as raw, \
                contextlib.suppress(OSError):
                raw.sendall(garbage)
                raw.shutdown(socket.SHUT_WR)
                raw.recv(1024)
    assert_still_serving(client)


def _served_common_name(port: int, ca_pem: bytes) -> str:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    names = x509.load_der_x509_certificate(der).subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    return str(names[0].value)


def test_certificate_is_reloaded_when_the_files_change(ca: pki.CertificateAuthority,
                                                       tmp_path: pathlib.Path) -> None:
    running = start(ca, tmp_path, max_body=SMALL_LIMIT)
    try:
        assert _served_common_name(running.port, ca.cert_pem) == "webhook"
        serving_files(ca, tmp_path, "webhook-rotated")
        assert _served_common_name(running.port, ca.cert_pem) == "webhook-rotated"
        (tmp_path / "tls.key").write_bytes(b"not a key")  # a half-done rotation keeps the old pair
        assert _served_common_name(running.port, ca.cert_pem) == "webhook-rotated"
        local = Client(running.port, ca.cert_pem)
        assert_still_serving(local)
        local.close()
    finally:
        running.stop()


def test_stop_closes_kept_alive_connections(ca: pki.CertificateAuthority, tmp_path: pathlib.Path) -> None:
    running = start(ca, tmp_path, max_body=SMALL_LIMIT)
    local = Client(running.port, ca.cert_pem)
    assert_still_serving(local)
    running.stop()
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        local.post(json.dumps(valid_review()).encode())
    local.close()
