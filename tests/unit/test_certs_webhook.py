"""`fedspread certs webhook`: the agent webhook's certificate, trusted through the caBundle it writes.

Why end to end: what matters is that a member's apiserver, holding only the caBundle, completes a
TLS handshake with the agent for the Service's DNS name — so the test makes a real TLS handshake
with the written files (the standard library's TLS on both sides, hostname checked) and renders
the example overlay with the written patch through the build's kustomize, then reads the caBundle
back out of the MutatingWebhookConfiguration that `kubectl apply -k` would send.
"""

from __future__ import annotations

import base64
import pathlib
import shutil
import socket
import ssl
import threading

import pytest
from click.testing import CliRunner
from cryptography import x509

from federation.api import names
from federation.cli import root
from tests.support.manifests import DEPLOY, render

SERVICE_NAME = f"{names.AGENT_WEBHOOK_SERVICE}.{names.AGENT_NAMESPACE}.svc"


def issue(tmp_path: pathlib.Path, *extra: str) -> tuple[pathlib.Path, pathlib.Path]:
    out, patch = tmp_path / "webhook", tmp_path / "overlay" / "webhook-ca.yaml"
    result = CliRunner().invoke(root.main, ["certs", "webhook", "--out", str(out), "--patch", str(patch),
                                            *extra])
    assert result.exit_code == 0, result.output
    return out, patch


def handshake(out: pathlib.Path, *, server_name: str) -> None:
    """One TLS handshake with a server holding out/tls.crt, from a client trusting only out/ca.crt."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(out / "tls.crt", out / "tls.key")
    client_context = ssl.create_default_context(cafile=str(out / "ca.crt"))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            connection, _ = listener.accept()
            try:
                with server_context.wrap_socket(connection, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass  # the client refused us: its side raises

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                    client_context.wrap_socket(raw, server_hostname=server_name):
                pass
        finally:
            thread.join(10)


def test_the_certificate_names_the_service_and_the_ca_trusts_it(tmp_path: pathlib.Path) -> None:
    out, _ = issue(tmp_path)
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "tls.crt", "tls.key"], "a Secret's files only"
    assert (out / "tls.key").stat().st_mode & 0o777 == 0o600
    cert = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [SERVICE_NAME, f"{SERVICE_NAME}.cluster.local"]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]
    handshake(out, server_name=SERVICE_NAME)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(out, server_name="fedspread-agent.other.svc")


def test_the_patch_fills_every_webhook_of_the_example_overlay(tmp_path: pathlib.Path) -> None:
    out, patch = issue(tmp_path)
    agent = tmp_path / "agent"
    shutil.copytree(DEPLOY / "agent", agent)
    shutil.copy(patch, agent / "overlays" / "example" / "webhook-ca.yaml")
    (configuration,) = [d for d in render(agent / "overlays" / "example")
                        if d["kind"] == "MutatingWebhookConfiguration"]
    assert [hook["name"] for hook in configuration["webhooks"]] == list(names.AGENT_WEBHOOKS)
    bundles = {hook["clientConfig"]["caBundle"] for hook in configuration["webhooks"]}
    assert bundles == {base64.b64encode((out / "ca.crt").read_bytes()).decode()}


def test_an_existing_ca_signs_it_and_nothing_is_overwritten_unasked(tmp_path: pathlib.Path) -> None:
    runner = CliRunner()
    made = runner.invoke(root.main, ["certs", "ca", "--out", str(tmp_path / "ca")])
    assert made.exit_code == 0, made.output
    out, patch = issue(tmp_path, "--ca", str(tmp_path / "ca"))
    assert (out / "ca.crt").read_bytes() == (tmp_path / "ca" / "ca.crt").read_bytes()
    handshake(out, server_name=SERVICE_NAME)
    again = runner.invoke(root.main, ["certs", "webhook", "--out", str(tmp_path / "other"),
                                       "--patch", str(patch)])
    assert again.exit_code == 2 and "--force" in again.output and "Traceback" not in again.output
