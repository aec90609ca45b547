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
import pathlib
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest

# tests/unit has no __init__.py: pytest's default import mode puts this directory on sys.path.
import webhook_support as ws
from cryptography import x509
from hypothesis import strategies as st

from agents.webhook import review, server
from federation.certs import pki

SETTINGS = hypothesis.settings(max_examples=60, deadline=None,
                               suppress_health_check=[hypothesis.HealthCheck.too_slow])


@pytest.fixture(scope="module")
def ca() -> pki.CertificateAuthority:
    """The CA the client trusts."""
    return pki.CertificateAuthority.create("webhook-fuzz-ca")


@pytest.fixture(scope="module")
def webhook(ca: pki.CertificateAuthority, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[server.WebhookServer]:
    """The server under test, with a small body limit so that oversized bodies are cheap."""
    running = ws.start(ca, tmp_path_factory.mktemp("fuzz-certs"), max_body=ws.SMALL_LIMIT)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def client(webhook: server.WebhookServer, ca: pki.CertificateAuthority) -> Iterator[ws.Client]:
    """A keep-alive client shared by the module's examples."""
    shared = ws.Client(webhook.port, ca.cert_pem)
    yield shared
    shared.close()


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
def test_random_bytes_get_400(client: ws.Client, data: bytes) -> None:
    ws.assert_rejected(*client.post(data))


@SETTINGS
@hypothesis.given(value=json_values)
def test_random_json_gets_400(client: ws.Client, value: Any) -> None:
    ws.assert_rejected(*client.post(json.dumps(value).encode()))


@SETTINGS
@hypothesis.given(path=st.sampled_from(REVIEW_PATHS), value=st.just(_DROP) | json_values)
def test_reviews_with_broken_fields_get_400_or_an_answer(client: ws.Client, path: tuple[str, ...],
                                                         value: Any) -> None:
    status, answer = client.post(json.dumps(replaced(ws.valid_review(), path, value)).encode())
    if status != 200:
        ws.assert_rejected(status, answer)
    else:
        assert answer["response"]["allowed"] is True


@SETTINGS
@hypothesis.given(path=st.sampled_from(POD_PATHS), value=st.just(_DROP) | json_values, dry_run=st.booleans())
def test_mangled_pods_of_a_spread_get_400_or_an_answer(client: ws.Client, path: tuple[str, ...], value: Any,
                                                      dry_run: bool) -> None:
    document = ws.valid_review()
    document["request"]["dryRun"] = dry_run
    document["request"]["object"] = replaced(document["request"]["object"], path, value)
    status, answer = client.post(json.dumps(document).encode())
    if status != 200:
        ws.assert_rejected(status, answer)
    else:
        assert answer["response"]["allowed"] is True


@hypothesis.settings(max_examples=10, deadline=None)
@hypothesis.given(size=st.integers(ws.SMALL_LIMIT + 1, 4 * ws.SMALL_LIMIT))
def test_oversized_bodies_get_413(client: ws.Client, size: int) -> None:
    ws.assert_rejected(*client.post(b"{" + b" " * (size - 2) + b"}"), allowed=(413,))


def test_every_kind_of_bad_input_leaves_the_server_serving(client: ws.Client) -> None:
    ws.assert_rejected(*client.post(b""))
    ws.assert_rejected(*client.post(json.dumps([1] * 10).encode()))
    ws.assert_rejected(*client.post(b"[" * 100_000 + b"]" * 100_000), allowed=(400, 413))
    ws.assert_rejected(*client.post(b"[" * 20_000 + b"]" * 20_000))
    ws.assert_rejected(*client.post(b'{"apiVersion": NaN}'))
    ws.assert_rejected(*client.post(b"1" * 5000))
    ws.assert_still_serving(client)


def test_default_limit_is_three_mebibytes(ca: pki.CertificateAuthority, tmp_path: pathlib.Path) -> None:
    running = ws.start(ca, tmp_path, max_body=review.MAX_BODY)
    local = ws.Client(running.port, ca.cert_pem)
    try:
        ws.assert_rejected(*local.post(b" " * (3 * 1024 * 1024 + 1)), allowed=(413,))
        ws.assert_still_serving(local)
    finally:
        local.close()
        running.stop()


# --- the server around the handler -------------------------------------------------------------------------


def test_health_paths_and_unknown_paths(client: ws.Client) -> None:
    assert client.get("/healthz") == (200, b"ok\n") == client.get("/livez") == client.get("/readyz")
    status, raw = client.get("/metrics")
    assert status == 404 and json.loads(raw)["reason"]
    ws.assert_rejected(*client.post(json.dumps(ws.valid_review()).encode(), path="/validate"), allowed=(404,))
    ws.assert_still_serving(client)


def test_a_bug_in_the_handler_is_a_500_and_the_server_keeps_serving(client: ws.Client) -> None:
    status, answer = client.post(json.dumps(ws.valid_review("boom")).encode())
    assert status == 500 and "internal error" in answer["reason"] and "Traceback" not in answer["reason"]
    ws.assert_still_serving(client)


def test_missing_content_length_is_a_400(webhook: server.WebhookServer, ca: pki.CertificateAuthority,
                                         client: ws.Client) -> None:
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    with socket.create_connection(("127.0.0.1", webhook.port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        head = tls.recv(65536)
    assert head.startswith(b"HTTP/1.1 400"), head
    ws.assert_still_serving(client)


def test_plain_text_on_the_tls_port_does_not_hurt(webhook: server.WebhookServer, client: ws.Client) -> None:
    for garbage in (b"GET / HTTP/1.1\r\n\r\n", b"\x16\x03\x01\x00\x05hello", b""):
        # The server may hang up at any point: all that matters is that it keeps serving others.
        with socket.create_connection(("127.0.0.1", webhook.port), timeout=30) as raw, \
                contextlib.suppress(OSError):
                raw.sendall(garbage)
                raw.shutdown(socket.SHUT_WR)
                raw.recv(1024)
    ws.assert_still_serving(client)


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
    running = ws.start(ca, tmp_path, max_body=ws.SMALL_LIMIT)
    try:
        assert _served_common_name(running.port, ca.cert_pem) == "webhook"
        ws.serving_files(ca, tmp_path, "webhook-rotated")
        assert _served_common_name(running.port, ca.cert_pem) == "webhook-rotated"
        (tmp_path / "tls.key").write_bytes(b"not a key")  # a half-done rotation keeps the old pair
        assert _served_common_name(running.port, ca.cert_pem) == "webhook-rotated"
        local = ws.Client(running.port, ca.cert_pem)
        ws.assert_still_serving(local)
        local.close()
    finally:
        running.stop()


def test_stop_closes_kept_alive_connections(ca: pki.CertificateAuthority, tmp_path: pathlib.Path) -> None:
    running = ws.start(ca, tmp_path, max_body=ws.SMALL_LIMIT)
    local = ws.Client(running.port, ca.cert_pem)
    ws.assert_still_serving(local)
    running.stop()
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        local.post(json.dumps(ws.valid_review()).encode())
    local.close()


def test_readyz_waits_for_the_caches(ca: pki.CertificateAuthority, tmp_path: pathlib.Path) -> None:
    synced = threading.Event()
    running = ws.start(ca, tmp_path, max_body=review.MAX_BODY, ready=synced.is_set)
    local = ws.Client(running.port, ca.cert_pem)
    try:
        status, raw = local.get("/readyz")
        assert status == 503 and b"not synced" in raw
        assert local.get("/livez") == (200, b"ok\n")  # alive meanwhile: no restart for a slow list
        synced.set()
        assert local.get("/readyz") == (200, b"ok\n")
    finally:
        local.close()
        running.stop()
