"""gRPC health and reflection for the coordinator: what a probe, a load balancer or grpcurl asks.

Why: a process that listens is not yet a coordinator that can be used. Until the hub has been
listed (`facade.Coordinator.mark_hub_synced`) it places nothing and resyncs no agent, so it says
NOT_SERVING — for the whole server (service "") and for each of its services — and SERVING
after; NOT_SERVING again while a critical loop is stalled (`stalled`: the watchdog,
`federation.watchdog`, sees the hub-events or timer loop stop turning; a coordinator that no
longer places is not one to send agents to). `LIVENESS` is SERVING from the start until the
process stops: a liveness probe must not restart a coordinator that is still listing a large or
slow hub.

Where it is served, and why twice:
* on the main server (`--listen`, mTLS), with reflection of the served services, for anyone who
  holds a client certificate (`grpcurl`, a mesh's checker);
* on a plaintext port of its own (`--health-port`) serving nothing but `grpc.health.v1.Health`,
  for the kubelet: its gRPC probes connect without TLS and present no certificate, so they cannot
  reach the mTLS port. Health states are all that port reveals.

Each server has its own `grpc.aio` health servicer (a servicer's conditions belong to the event
loop of the server that runs it); `HealthReporter` sets them together.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Sequence

from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from federation.coordinator.services import aio_server
from federation.rpc import agent_pb2, placement_pb2

log = logging.getLogger(__name__)

LIVENESS = "liveness"
"""The health service name the liveness probe asks: SERVING while the process runs."""
SERVICES = (
    agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name,
    placement_pb2.DESCRIPTOR.services_by_name["PlacementService"].full_name,
)
"""The coordinator's own gRPC services; each reported NOT_SERVING until the hub is listed."""
READINESS = ("", *SERVICES)
"""Health names that follow the hub: "" (the server as a whole, what a probe without a service
asks) and every served service."""
HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
HEALTH_OPTIONS = (("grpc.so_reuseport", 0),)
"""gRPC binds with SO_REUSEPORT by default: a second coordinator on the same health port would
silently share it (and answer the first one's probes); without, it fails to start, naming the port."""
HEALTH_WORKERS = 1
"""The health server's pool: its handlers never block, the loop does everything."""


class HealthReporter:
    """The coordinator's health on every server it is added to; `serving()` once the hub is listed."""

    def __init__(self) -> None:
        self._servers: list[tuple[aio_server.AioServer, health.aio.HealthServicer]] = []
        self._ready = False
        self._stalled = False
        self._own: aio_server.AioServer | None = None
        self._lock = threading.Lock()
        """`serving` (the hub-events thread) and `stop` (the main thread) may meet."""

    def add_to(self, server: aio_server.AioServer, *, reflect: Sequence[str] = ()) -> None:
        """Serve health on `server` (before it starts), in the current state; with `reflect`, also
        reflection listing those services, health and reflection itself."""
        servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server.server)
        if reflect:
            reflection.enable_server_reflection((*reflect, HEALTH_SERVICE, reflection.SERVICE_NAME),
                                                server.server)
        with self._lock:
            self._servers.append((server, servicer))
            self._apply(server, servicer)

    def listen(self, address: str) -> int:
        """A plaintext server on `address` serving only health (the kubelet's gRPC probes); the port
        bound. OSError when it cannot bind (nothing is left running then)."""
        server = aio_server.AioServer(options=HEALTH_OPTIONS, workers=HEALTH_WORKERS, name="health")
        self.add_to(server)
        port = server.add_insecure_port(address)
        if not port:
            server.stop()
            with self._lock:
                self._servers.pop()
            raise OSError(errno.EADDRINUSE, f"health port {address}: in use, or not this machine's address")
        server.start()
        with self._lock:
            self._own = server
        return port

    def serving(self) -> None:
        """The hub has been listed: SERVING for every name."""
        with self._lock:
            self._ready = True
            for server, servicer in self._servers:
                self._apply(server, servicer)
        log.info("health: SERVING", extra={"services": list(READINESS)})

    def stalled(self, stalled: bool) -> None:
        """A critical loop is stalled (True: NOT_SERVING for readiness) or none is (False)."""
        with self._lock:
            if stalled == self._stalled:
                return
            self._stalled = stalled
            for server, servicer in self._servers:
                self._apply(server, servicer)
        if self._ready:
            log.info("health: %s", "NOT_SERVING (a loop is stalled)" if stalled else "SERVING",
                     extra={"services": list(READINESS)})

    def stop(self) -> None:
        """NOT_SERVING everywhere (the coordinator is stopping), and stop the health-only server;
        safe to call twice."""
        with self._lock:
            for server, servicer in self._servers:
                try:
                    server.call(servicer.enter_graceful_shutdown())
                except Exception:  # a server that already stopped: nothing left to tell
                    log.debug("health not updated on a stopped server")
            self._servers.clear()
            own, self._own = self._own, None
        if own is not None:
            own.stop(grace=None)

    def _apply(self, server: aio_server.AioServer, servicer: health.aio.HealthServicer) -> None:
        status = SERVING if self._ready and not self._stalled else NOT_SERVING
        for name in READINESS:
            server.call(servicer.set(name, status))
        server.call(servicer.set(LIVENESS, SERVING))
