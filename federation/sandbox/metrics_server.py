"""The node simulator's HTTPS server for `metrics.k8s.io`, reached only through the aggregator.

Why: an aggregated API server must take requests from the apiserver's aggregator alone, as
metrics-server does: the caller presents a client certificate of the front-proxy CA (TLS refuses
any other CA's at the handshake) whose common name is an allowed requestheader name, and names the
user in `X-Remote-User`; a caller without such a certificate or user gets 401. What it answers is
`pod_metrics.respond`, from the simulator's own view of its pods and nodes; this module is the
transport only. Connections are handled in threads, TLS handshakes there too (a slow client does
not hold the listener).
"""

from __future__ import annotations

import dataclasses
import datetime
import http.server
import json
import logging
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from federation.sandbox import aggregation, pod_metrics

log = logging.getLogger("federation.sandbox.metrics_server")
Json = dict[str, Any]
CONNECTION_IDLE_SECONDS = 60.0


@dataclasses.dataclass(frozen=True)
class Serving:
    """Where and how the metrics API is served."""

    port: int
    cert_file: str
    key_file: str
    client_ca_file: str
    """The front-proxy CA: only its client certificates are taken."""
    allowed_names: tuple[str, ...] = (aggregation.FRONT_PROXY_CLIENT_CN,)
    host: str = "127.0.0.1"


def caller_refusal(peer: Mapping[str, Any] | None, user: str | None, *,
                   allowed_names: Sequence[str]) -> str | None:
    """Why a caller is refused (None: it is the aggregator). `peer` is the verified client
    certificate as `SSLSocket.getpeercert()` gives it (None or empty: none was presented), `user`
    the requestheader user it names."""
    if not peer:
        return "no client certificate: this API is served through the apiserver's aggregator only"
    names = [value for rdn in peer.get("subject", ()) for key, value in rdn if key == "commonName"]
    if not any(name in allowed_names for name in names):
        return f"client certificate {names} is not an allowed requestheader name ({', '.join(allowed_names)})"
    if not user:
        return f"no {aggregation.USER_HEADER} header"
    return None


class MetricsServer:
    """Serves `metrics.k8s.io/v1beta1` for the pods and nodes that `pods` and `nodes` return."""

    def __init__(self, serving: Serving, *, pods: Callable[[], Sequence[Json]],
                 nodes: Callable[[], Mapping[str, Mapping[str, str]]]) -> None:
        self.serving = serving
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=serving.client_ca_file)
        context.load_cert_chain(serving.cert_file, serving.key_file)
        context.verify_mode = ssl.CERT_OPTIONAL
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = CONNECTION_IDLE_SECONDS

            def setup(self) -> None:
                super().setup()  # sets the idle timeout, which bounds the handshake too
                if isinstance(self.connection, ssl.SSLSocket):
                    self.connection.do_handshake()

            def do_GET(self) -> None:
                peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
                refusal = caller_refusal(peer, self.headers.get(aggregation.USER_HEADER),
                                         allowed_names=owner.serving.allowed_names)
                if refusal is not None:
                    self._send(401, pod_metrics.status(401, "Unauthorized", refusal))
                    return
                code, document = pod_metrics.respond(self.path, pods=pods(), nodes=nodes(),
                                                     now=datetime.datetime.now(datetime.UTC))
                self._send(code, document)

            def _refuse_method(self) -> None:
                self._send(405, pod_metrics.status(405, "MethodNotAllowed", f"{self.command} is not served"))

            do_POST = do_PUT = do_PATCH = do_DELETE = _refuse_method

            def _send(self, code: int, document: Json) -> None:
                body = json.dumps(document).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("%s " + format, self.address_string(), *args)

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self) -> tuple[Any, Any]:
                connection, address = self.socket.accept()
                wrapped = context.wrap_socket(connection, server_side=True, do_handshake_on_connect=False)
                return wrapped, address

            def handle_error(self, request: Any, client_address: Any) -> None:
                log.debug("metrics connection from %s failed", client_address, exc_info=True)

        self.server = Server((serving.host, serving.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="metrics-server")

    @property
    def port(self) -> int:
        """The port it listens on (the one asked for, or the one given for port 0)."""
        return int(self.server.server_address[1])

    def start(self) -> None:
        """Serve in a daemon thread."""
        self.thread.start()
        log.info("serving %s on https://%s:%d", pod_metrics.GROUP_VERSION, self.serving.host, self.port)

    def shutdown(self) -> None:
        """Stop serving and close the listener."""
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()
