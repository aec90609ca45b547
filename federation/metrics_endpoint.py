"""One process's Prometheus registry, served as /metrics over plain HTTP.

Why shared: the coordinator and the agent each keep their metrics in a registry of their own and
expose it the same way — at most one server at a time, a port taken named in the error, a clean
stop — so the coordinator's `CoordinatorMetrics` and the agent's `AgentMetrics` both build on
`Endpoint` instead of each carrying a copy of the server's handling.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

import prometheus_client

LOG = logging.getLogger(__name__)


class Stoppable(Protocol):
    """The metrics HTTP server `prometheus_client.start_http_server` returns, to shut down."""

    server_port: int

    def shutdown(self) -> None:
        """Stop serving."""

    def server_close(self) -> None:
        """Close the listening socket."""


class Endpoint:
    """`registry` served on one port at a time (`serve`, `stop`), and rendered on demand."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._server: Stoppable | None = None

    def serve(self, port: int, *, addr: str = "0.0.0.0") -> int:
        """Expose /metrics on `port` (plain HTTP, as Prometheus scrapes in-cluster); the bound port.
        OSError naming the port when it cannot listen; RuntimeError when already serving."""
        with self._lock:
            if self._server is not None:
                raise RuntimeError("metrics are already served")
            try:
                server, _thread = prometheus_client.start_http_server(port, addr=addr, registry=self.registry)
            except OSError as error:
                raise OSError(error.errno, f"metrics port {addr}:{port}: {error.strerror}") from None
            self._server = server
            bound = int(server.server_port)
        LOG.info("metrics served on %s:%d", addr, bound)
        return bound

    def stop(self) -> None:
        """Stop serving /metrics (no-op when not serving)."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def exposition(self) -> bytes:
        """The current metrics in the Prometheus text format."""
        return prometheus_client.generate_latest(self.registry)
