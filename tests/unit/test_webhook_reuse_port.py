"""`WebhookServer(reuse_port=True)`: several processes (here, servers) serving one port.

Why: the admission benchmark runs each webhook replica of its baseline as a process of its own
behind one URL, as a Service spreads connections over pods; SO_REUSEPORT lets every replica bind
the same port and the kernel spread the connections. The option must do that, and must stay off by
default: a second fedspread webhook on a taken port is an error to report, not a silent share.
"""

from __future__ import annotations

import http.client
import pathlib
import ssl

import pytest

# tests/unit has no __init__.py: pytest's default import mode puts this directory on sys.path.
import webhook_support as ws

from agents import bookkeeping, metrics
from agents.webhook import handler, server
from federation.certs import pki


def _server(cert: pathlib.Path, key: pathlib.Path, *, port: int, reuse_port: bool) -> server.WebhookServer:
    admission = handler.AdmissionHandler(bookkeeping.Bookkeeping(), metrics.AgentMetrics())
    return server.WebhookServer(admission, host="127.0.0.1", port=port, cert_file=cert, key_file=key,
                                reuse_port=reuse_port)


def _healthy(port: int, authority: pki.CertificateAuthority) -> int:
    context = ssl.create_default_context(cadata=authority.cert_pem.decode())
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status
    finally:
        connection.close()


def test_servers_with_reuse_port_share_one_port_and_a_plain_one_is_refused(tmp_path: pathlib.Path) -> None:
    authority = pki.CertificateAuthority.create("reuse-port-ca")
    cert, key = ws.serving_files(authority, tmp_path, "webhook")
    first = _server(cert, key, port=0, reuse_port=True).start()
    try:
        second = _server(cert, key, port=first.port, reuse_port=True).start()
        try:
            assert second.port == first.port
            assert _healthy(first.port, authority) == 200
            with pytest.raises(OSError):
                _server(cert, key, port=first.port, reuse_port=False).start()
        finally:
            second.stop()
        assert _healthy(first.port, authority) == 200, "the first still serves the port alone"
    finally:
        first.stop()
