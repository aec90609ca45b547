"""An admission webhook's HTTPS server: POST of AdmissionReviews for the apiserver, GET /healthz for probes.

Shared by fedspread's two webhooks: the agent's pod webhook (`agents.webhook.server`, POST
/mutate) and the coordinator's validating webhook for its CRDs
(`federation.coordinator.hub.admission`, POST /validate). Each passes its `Responder` (bytes of a
review in, bytes of the answer out, `ReviewError` for a malformed one) and its review path; this
module only moves bytes, over TLS, safely. The coordinator's `external.metrics.k8s.io` server
(`coordinator.services.metrics_api`) reuses it too, for GETs: its `Role.get` answers every GET
other than the probes, with the caller's verified client certificate and headers in hand. What a
webhook hands the server (`Responder`, `Role`, `GetRequest`) is `webhook_roles`'s.

Why the standard library's threading HTTP server: the apiserver keeps a handful of keep-alive
connections to a webhook and sends one small JSON document per request; the decision itself takes
microseconds under a lock. A thread per connection is plenty, and adds no dependency.

What it guards against, since anything that reaches the port may post to it: bodies over the limit
get 413 before they are read (then the rest is drained, so the client still reads the answer);
bodies that are not `application/json`, and malformed reviews, get 400 with the reason; an
unexpected error in the handler is logged and answered 500 — the server keeps serving in every
case. TLS handshakes happen in the connection's thread, never in the accept loop, so a client that
stalls its handshake cannot stop the others.

Each new connection is served with the TLS context of `webhook_tls`, which re-reads the
certificate, key (and client CA) files when they change on disk, so cert-manager or a CSR rotation
needs no restart. With `client_auth` (`webhook_clients`) only the apiserver's client certificate
may POST reviews (401/403 otherwise); without it anyone may, and `start` says so in one warning.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import logging
import os
import pathlib
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from federation.kube import admission_review as review
from federation.kube import webhook_clients, webhook_tls
from federation.kube.webhook_roles import GetRequest, Responder, Role

LOG = logging.getLogger(__name__)

JSON_MEDIA_TYPE = "application/json"
"""What the apiserver sends; any other Content-Type is refused (as controller-runtime does)."""
HEALTH_PATHS = frozenset({"/healthz", "/livez"})
READY_PATH = "/readyz"
"""200 once the owner says it can answer (`WebhookServer(ready=...)`; the agent: its caches are
synced) — the server answering is the other half — else 503 with the reason."""
IDLE_TIMEOUT = 120.0  # longer than Go's 90 s IdleConnTimeout: the apiserver closes idle connections first
REQUEST_TIMEOUT = 10.0  # once a request has started, each read must make progress within this
DRAIN_LIMIT = 64 * 1024 * 1024
MAX_CONNECTIONS = 256


class _Throttle:
    """At most one log line per `interval` seconds for a noisy event, with a count of the rest."""

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._next = 0.0
        self._suppressed = 0

    def admit(self) -> int | None:
        """How many were suppressed before this one, or None when this one is suppressed too."""
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                self._suppressed += 1
                return None
            self._next = now + self.interval
            suppressed, self._suppressed = self._suppressed, 0
            return suppressed


class _HTTPServer(http.server.ThreadingHTTPServer):
    """A threading HTTP server that wraps each accepted socket in TLS with the current context."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], *, certificates: webhook_tls.Certificates,
                 responder: Responder, role: Role, max_body: int,
                 ready: Callable[[], bool], reuse_port: bool = False) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.allow_reuse_port = reuse_port  # read by server_bind, which the constructor calls
        self.ready = ready
        self.certificates = certificates
        self.responder = responder
        self.role = role
        self.max_body = max_body
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        self.rejections = _Throttle()
        super().__init__(address, _RequestHandler)

    def get_request(self) -> tuple[socket.socket, Any]:
        """Accept a connection and wrap it for TLS; the handshake runs later, in its thread."""
        raw, address = self.socket.accept()
        with self.connections_lock:
            crowded = len(self.connections) >= MAX_CONNECTIONS
        if crowded:
            raw.close()
            raise OSError("too many open connections")
        try:
            # Headers and body go out in separate writes: without NODELAY, Nagle's algorithm and
            # the client's delayed ACK would add ~40 ms to every answer.
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            wrapped = self.certificates.current().wrap_socket(
                raw, server_side=True, do_handshake_on_connect=False)
        except OSError:
            raw.close()
            raise
        with self.connections_lock:
            self.connections.add(wrapped)
        return wrapped, address

    def shutdown_request(self, request: Any) -> None:
        """Close a finished connection and forget it."""
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Cut every open connection (keep-alive ones included), so that stop() really stops."""
        with self.connections_lock:
            open_now = list(self.connections)
        for connection in open_now:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection failed (TLS handshake, reset, timeout): log quietly, keep serving."""
        LOG.debug("connection from %s failed", client_address, exc_info=True)
        self.role.on_connection_error()


class _RequestHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sys_version = ""
    server: _HTTPServer

    def setup(self) -> None:
        """Complete the TLS handshake in this connection's thread (bounded by a timeout)."""
        self.server_version = f"fedspread-{self.server.role.owner}"
        super().setup()
        self.connection.settimeout(REQUEST_TIMEOUT)
        self.connection.do_handshake()

    def handle_one_request(self) -> None:
        """Wait up to IDLE_TIMEOUT for the next request on a kept-alive connection."""
        self.connection.settimeout(IDLE_TIMEOUT)
        super().handle_one_request()

    def parse_request(self) -> bool:
        """Parse the request line and headers; the rest of the request must flow promptly."""
        self.connection.settimeout(REQUEST_TIMEOUT)
        return super().parse_request()

    def log_message(self, format: str, *args: Any) -> None:
        """Route http.server's own messages to debug logging."""
        LOG.debug("%s " + format, self.address_string(), *args)

    # --- responses ------------------------------------------------------------------------------

    def _send(self, code: int, body: bytes, *, content_type: str = "application/json",
              close: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _fail(self, code: int, reason: str, *, close: bool = False) -> None:
        self.server.role.on_http_error(code)
        self._send(code, json.dumps({"code": code, "reason": reason}).encode(), close=close)

    def _note_rejection(self, reason: str) -> None:
        suppressed = self.server.rejections.admit()
        if suppressed is not None:
            LOG.warning("rejected a review from %s: %s (%d more rejected since the last report)",
                        self.address_string(), reason, suppressed)

    def _discard(self, length: int) -> None:
        """Read and drop up to `length` bytes of a body we will not use (lingering close)."""
        left = min(length, DRAIN_LIMIT)
        try:
            while left > 0:
                chunk = self.rfile.read(min(left, 65536))
                if not chunk:
                    return
                left -= len(chunk)
        except OSError:
            return

    def _length(self) -> int | None:
        """The Content-Length, or None after answering 400 for a missing or invalid one."""
        if self.headers.get("Transfer-Encoding"):
            self._fail(400, "chunked bodies are not accepted: send Content-Length", close=True)
            return None
        text = self.headers.get("Content-Length")
        if text is None or not text.strip().isdigit():
            self._fail(400, "a valid Content-Length header is required", close=True)
            return None
        return int(text)

    # --- methods --------------------------------------------------------------------------------

    def do_GET(self) -> None:
        """Health probes: alive while serving; ready when the owner says so too. Other paths: the
        role's `get` handler, if any, else 404."""
        path = urllib.parse.urlsplit(self.path).path
        if path in HEALTH_PATHS:
            self._send(200, b"ok\n", content_type="text/plain")
        elif path == READY_PATH:
            if self.server.ready():
                self._send(200, b"ok\n", content_type="text/plain")
            else:
                self._send(503, self.server.role.not_ready.encode(), content_type="text/plain")
        elif self.server.role.get is not None:
            self._answer_get(path)
        else:
            self._fail(404, f"no such path {urllib.parse.urlsplit(self.path).path!r}")

    def _answer_get(self, path: str) -> None:
        """The role's GET handler's answer (500 when it fails: logged, and the server keeps serving)."""
        handler = self.server.role.get
        assert handler is not None
        headers: dict[str, tuple[str, ...]] = {}
        for name, value in self.headers.items():
            headers[name.lower()] = (*headers.get(name.lower(), ()), value)
        try:
            certificate = self.connection.getpeercert() or None
        except (ValueError, AttributeError):
            certificate = None
        request = GetRequest(path=path, query=urllib.parse.urlsplit(self.path).query, headers=headers,
                             peer_certificate=certificate)
        try:
            code, body = handler(request)
        except Exception:  # a bug: say so in our log, answer briefly, keep serving
            LOG.exception("the GET handler failed")
            self._fail(500, f"internal error in the fedspread {self.server.role.owner} (see its log)")
            return
        if code != 200:
            self.server.role.on_http_error(code)
        self._send(code, body)

    def do_POST(self) -> None:
        """Admission reviews on the role's path (the apiserver appends ?timeout=...)."""
        length = self._length()
        if length is None:
            return
        refused = webhook_clients.refusal(self.connection, self.server.certificates.client_auth)
        if refused is not None:
            self._note_rejection(refused[1])
            self._fail(refused[0], refused[1], close=True)
            self._discard(length)
            return
        path = urllib.parse.urlsplit(self.path).path
        expected = self.server.role.review_path
        if path != expected:
            self._fail(404, f"no such path {path!r}: reviews go to {expected}", close=True)
            self._discard(length)
            return
        limit = self.server.max_body
        if length > limit:
            self._fail(413, f"body of {length} bytes exceeds the limit of {limit} bytes", close=True)
            self._discard(length)
            return
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True  # the client went away mid-body
            return
        media = (self.headers.get("Content-Type") or "").partition(";")[0].strip().lower()
        if media != JSON_MEDIA_TYPE:
            self._fail(400, f"Content-Type must be {JSON_MEDIA_TYPE}, not {media or 'absent'!r}"[:200])
            return
        try:
            answer = self.server.responder.respond(body, max_body=limit)
        except review.ReviewError as error:
            self._note_rejection(error.reason)
            self._fail(413 if error.oversized else 400, error.reason)
            return
        except Exception:  # a bug: say so in our log, answer briefly, keep serving
            LOG.exception("the admission handler failed")
            owner = self.server.role.owner
            self._fail(500, f"internal error in the fedspread webhook (see the {owner}'s log)")
            return
        self._send(200, answer)


class WebhookServer:
    """An admission webhook over HTTPS, served from a background thread."""

    def __init__(self, responder: Responder, *, role: Role, host: str = "0.0.0.0", port: int = 9443,
                 cert_file: str | os.PathLike[str], key_file: str | os.PathLike[str],
                 max_body: int = review.MAX_BODY, ready: Callable[[], bool] = lambda: True,
                 client_auth: webhook_clients.ClientAuth | None = None, reuse_port: bool = False) -> None:
        """`client_auth`: only callers with such a client certificate may POST reviews; None: anyone.
        `reuse_port`: bind with SO_REUSEPORT, so that several processes serving the same port share
        its connections (the kernel spreads them, as a Service spreads them over pods)."""
        self.reuse_port = reuse_port
        self.responder = responder
        self.role = role
        self.ready = ready
        """Whether /readyz says ready (the agent passes its caches' `synced`)."""
        self.host = host
        self._requested_port = port
        self.max_body = max_body
        self._certificates = webhook_tls.Certificates(pathlib.Path(cert_file), pathlib.Path(key_file),
                                                      client_auth=client_auth)
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port once started (the requested one before)."""
        return int(self._server.server_address[1]) if self._server else self._requested_port

    def url(self, host: str = "127.0.0.1") -> str:
        """The URL the apiserver calls (for a `url` clientConfig)."""
        return f"https://{host}:{self.port}{self.role.review_path}"

    def start(self) -> WebhookServer:
        """Bind and serve in a background thread; returns self."""
        if self._server is not None:
            raise RuntimeError("the webhook server is already running")
        self._server = _HTTPServer((self.host, self._requested_port), certificates=self._certificates,
                                   responder=self.responder, role=self.role, max_body=self.max_body,
                                   ready=self.ready, reuse_port=self.reuse_port)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=f"{self.role.owner}-webhook-server", daemon=True)
        self._thread.start()
        LOG.info("webhook serving on https://%s:%d%s", self.host, self.port, self.role.review_path)
        if self._certificates.client_auth is None:
            LOG.warning(webhook_clients.UNAUTHENTICATED, extra={"owner": self.role.owner, "port": self.port})
        return self

    def stop(self) -> None:
        """Stop accepting, cut open connections and wait for the accept loop to end."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections()
        if thread is not None:
            thread.join(timeout=10)
        self._server = self._thread = None
        LOG.info("webhook stopped")

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
