"""The coordinator process, wired in one place: hub watcher, placement, agent streams, statuses, gRPC.

Why one module: every part shares one `world.World` behind one `facade.Coordinator` facade
(its lock is the only lock on the World); seeing them connected here is the quickest way to
understand the coordinator. The threads, and why each exists:

- **hub events** — the `HubWatcher`'s watch threads (one per hub kind) only enqueue; ONE worker applies the
  events in order (`hub.apply_to_world` under the facade's lock, then `Coordinator.publish`), so a
  slow recompute never stalls a watch stream and events are never reordered. After the first
  SYNCED of every hub kind it calls `mark_hub_synced()`: only then may agents be resynced (an
  empty World must not tell agents to remove live workloads).
- **timer** (1 s) — `Coordinator.tick()`: failover off silent clusters (brake and rate limit
  permitting), and the spreads whose unschedulable marks expired placed again.
- **status** (~2 s) — FederatedSpread, MemberCluster and hub Deployment statuses from the World via
  `core.status`, written by `StatusWriter` (which skips unchanged ones), outside the lock.
- **gRPC** — AgentService and PlacementService on one `grpc.aio` server (`--listen`,
  `services.aio_server`): one event-loop thread serves every agent stream and SDK call as
  coroutines, and a fixed pool of `GRPC_WORKERS` threads runs what blocks (the facade's lock), plus
  `PLACEMENT_WORKERS` for PlacementService (what-ifs may be slow) and two that register the
  MemberClusters of new agents on the hub (and recreate one deleted while its agent is connected:
  the hub object is not the cluster, `apply` and `hub.member_clusters`). So the threads do not
  grow with the federation. Over mTLS (`tls`: client certificates signed by the CA required;
  agents may only speak for the cluster theirs names, `identity`; SDK users read what the hub's
  RBAC lets them, `services.authorization` over `hub.access_review`) or, for local use only,
  plaintext (`tls=None`, `--insecure`: no identity, no authorisation); keepalive PINGs both ways
  (`federation.rpc.keepalive`). Beside them, gRPC health and reflection; health alone on
  `--health-port` (`services.health`), Prometheus /metrics on `--metrics-port`.
- **webhook** (with `--webhook-cert/--webhook-key`) — the hub's validating webhook for
  FederatedSpreads and MemberClusters over HTTPS (`hub.admission`): the Valid condition's checks,
  at the door, plus the rules across spreads from this World. With `--external-metrics-port`,
  `external.metrics.k8s.io` for the hub's HPAs (`services.metrics_api`, wired in `startup`).
- **watchdog** — every loop above (and each hub watch) beats each turn; a loop that stops turning
  is logged, shown as `loop_stalled{loop}`, and — for the critical ones, hub events and timer —
  makes readiness NOT_SERVING until it turns again (`federation.watchdog`, `_watch_loops`); under
  leader election a leader whose critical loop stays stalled gives its Lease up
  (`model.stall`, `coordinator.leading`).

Stopping comes in two steps: `halt` stops acting, within deadlines, without waiting for the loops
(a stalled loop cannot be joined, but once halted it reaches nobody: no agent stream, no status
write, no Event); `stop` halts, then ends the threads and Ray.

Placement and capacity simulations run behind `Coordinator.publish`, in this process by default
(`backends.LocalBackend`: faster than the Ray shards at every size measured on one machine,
bench/README.md), or on the Ray shards (`shards.RayBackend`) of `--ray-address` or `--local-ray`.
A join is bounded (`--ray-join-seconds`) and asks the address one question first
(`ray_join.check`): `ray.init` alone retries a dead address for minutes and hides a missing token.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import functools
import logging
import queue
import signal
import threading
from collections.abc import Callable

from kubernetes import client

from federation import clock
from federation import watchdog as watchdog_mod
from federation.api import names
from federation.coordinator import backends, facade, metrics
from federation.coordinator.hub import (
    access_review,
    member_clusters,
    secret_reads,
    status_writer,
    statuses,
    warm_events,
)
from federation.coordinator.hub import watcher as hub
from federation.coordinator.model import loop
from federation.coordinator.model import world as world_model
from federation.coordinator.services import agent_service, aio_server, health, placement_service, source
from federation.coordinator.services.metrics_api import ExternalMetricsServer
from federation.coordinator.startup import CoordinatorConfig as CoordinatorConfig
from federation.coordinator.startup import CoordinatorError as CoordinatorError
from federation.coordinator.startup import external_metrics_server, webhook_server
from federation.coordinator.startup import hub_client as hub_client
from federation.coordinator.startup import placement_backend as placement_backend
from federation.coordinator.startup import probe_hub as probe_hub
from federation.coordinator.startup import server_credentials as server_credentials
from federation.coordinator.wire import inbound
from federation.kube import deadlines, webhook_https
from federation.kube import events as kube_events

log = logging.getLogger(__name__)

HUB_KINDS = frozenset({"spread", "cluster", *hub.WORKLOAD_STREAMS, *hub.DEPENDENCY_KINDS})
GRPC_WORKERS = 8
"""Threads for the agent streams' calls into the facade, however many agents connect (an agent stream
is a coroutine on the gRPC event loop, `services.aio_server`)."""
PLACEMENT_WORKERS = 4
"""Threads for PlacementService's calls (a what-if may take a while), apart from the agents'."""
GRACE_SECONDS = 1.0
"""On stop, open calls get this long before they are cancelled."""
EVENTS_WAIT = 5.0
"""The hub-events loop turns at least this often without events (its watchdog period)."""


class CoordinatorProcess:
    """The coordinator; `start()` then `run()` (until a signal) or `stop()`."""

    def __init__(
        self, settings: CoordinatorConfig, *, api: client.ApiClient | None = None,
        backend: backends.PlacementBackend | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock.utcnow
        self._credentials = server_credentials(settings.tls)
        self.api = api if api is not None else hub_client(settings.hub_kubeconfig,
                                                          context=settings.hub_context)
        self.world = world_model.World(self.clock, grace_from=self.clock(),
                                       failover_per_minute=settings.failover_clusters_per_minute)
        self._owns_backend = backend is None
        self.backend = backend if backend is not None else placement_backend(settings)
        self.coordinator = facade.Coordinator(self.world, clock=self.clock, hub_synced=False,
                                              backend=self.backend, federation_id=settings.federation_id)
        self.stopping = threading.Event()
        self.hub_synced = threading.Event()
        self.port = self.metrics_port = self.health_port = 0
        self._events: queue.Queue[hub.HubEvent | None] = queue.Queue()
        self._synced_kinds: set[str] = set()
        self._agent_versions: dict[str, str] = {}
        self.recorder = kube_events.EventRecorder(self.api, controller=kube_events.COORDINATOR,
                                                instance=kube_events.instance_name())
        self.statuses = statuses.StatusPass(
            self.coordinator, status_writer.StatusWriter(self.api), agent_versions=self._agent_versions,
            member_status_seconds=settings.member_status_seconds, events=self.recorder)
        self.source = source.WorldSource(self.coordinator, conditions=self.statuses.conditions,
                                         agent_versions=self._agent_versions)
        self.member_clusters = member_clusters.MemberClusters(
            self.api, coordinator=self.coordinator, members=self.statuses.members,
            agent_versions=self._agent_versions, recorder=self.recorder)
        self.agents = agent_service.AgentServicer(
            self.coordinator, clock=self.clock, heartbeat_seconds=settings.heartbeat_seconds,
            on_cluster_hello=self.member_clusters.on_hello, require_identity=settings.tls is not None)
        self.watchdog = watchdog_mod.Watchdog("coordinator", on_change=self._loop_changed)
        self.secrets = secret_reads.SecretKeeper(secret_reads.SecretReader(self.api), self.world,
                                                 self.coordinator.lock)
        self.watcher = hub.HubWatcher(self.api, self._events.put,
                                      on_turn=lambda kind: self.watchdog.beat(f"hub-watch-{kind}"))
        self.authorizer = None if settings.tls is None else access_review.SubjectAccessReviewer(self.api)
        """Over mTLS, the hub's RBAC decides who reads what (`services.authorization`); plaintext: all."""
        self.metrics = metrics.CoordinatorMetrics(self.coordinator, writer=self.statuses.writer,
                                                  watchdog=self.watchdog, events=self.recorder.outcomes)
        self.coordinator.on_round = self.metrics.observe_round
        self.health = health.HealthReporter()
        self._server: aio_server.AioServer | None = None
        self.webhook: webhook_https.WebhookServer | None = None
        self.external_metrics: ExternalMetricsServer | None = None
        self._placement_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._threads: list[threading.Thread] = []
        self._warm: warm_events.WarmEvents | None = None
        """A standby's hub events since `warm` (None: not warmed, or handed over)."""

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Check the hub, listen, start watching and the loops; CoordinatorError on user problems."""
        probe_hub(self.api)
        with self.coordinator.lock:  # a standby was made long before it leads: agents get their
            self.world.restart_grace(self.clock())  # grace to reconnect from now (`model.failover`)
        server = aio_server.AioServer(options=inbound.SERVER_OPTIONS, workers=GRPC_WORKERS)
        self._placement_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=PLACEMENT_WORKERS, thread_name_prefix="grpc-placement")
        agent_service.add_to_server(server.server, self.agents)
        placement_service.add_to_server(server.server, self.source, executor=self._placement_pool,
                                        authorizer=self.authorizer)
        self.health.add_to(server, reflect=health.SERVICES)
        if self._credentials is None:
            port = server.add_insecure_port(self.settings.listen)
        else:
            port = server.add_secure_port(self.settings.listen, self._credentials)
        if not port:
            server.stop()  # its loop thread and pool
            raise CoordinatorError(f"cannot listen on {self.settings.listen}: the port is in use "
                                   "or the address is not this machine's")
        server.start()
        self._server, self.port = server, port
        if (hook := self.settings.webhook) is not None:  # the hub's validating webhook
            self.webhook = webhook_server(self.coordinator, hook, hub_synced=self.hub_synced.is_set,
                                          served=self.watcher.served_versions)
        if self.settings.external_metrics is not None:
            self.external_metrics = external_metrics_server(
                self.coordinator, self.api, self.settings.external_metrics,
                on_answer=self.metrics.count_external_metrics)
        self.observe()
        self._watch_loops()
        if self._warm is not None:  # a standby that watched the hub: its events, then the live ones
            warmed = self._warm.drain()
            log.info("starting from the hub as watched while standing by", extra={"events": len(warmed)})
            self.watcher.redirect(self._events.put, first=warmed)
            self._warm = None
        else:
            self.watcher.start()
        self._spawn("hub-events", self._apply_events)
        self._spawn("timer", self._timer)
        self._spawn("status", self._status_loop)
        if self._credentials is None:
            log.warning("serving plaintext gRPC (--insecure): anyone who reaches the port can speak for "
                        "any cluster; for local use only", extra={"listen": self.settings.listen})
        if self.coordinator.federation_id == names.DEFAULT_FEDERATION_ID:
            log.warning("--federation-id left at its default; give each federation its own identity, so "
                        "that agents never take one federation's Deployments for another's",
                        extra={"federation_id": self.coordinator.federation_id})
        log.info("coordinator started", extra={"listen": self.settings.listen, "port": port,
                                               "transport": "plaintext" if self._credentials is None
                                               else "mTLS",
                                               "placement": type(self.backend).__name__,
                                               "hub": self.api.configuration.host,
                                               "coordinator_id": self.coordinator.coordinator_id,
                                               "federation_id": self.coordinator.federation_id})

    def run(self) -> None:
        """Block until SIGTERM or SIGINT (or `stopping` is set elsewhere), then stop cleanly."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        self.stopping.wait()
        self.stop()

    def halt(self) -> bool:
        """Stop acting, within deadlines, without waiting for the loops: health NOT_SERVING, no
        status write starts after this (the one under way is waited for), no agent stream, SDK call
        or webhook request is served, no MemberCluster registered, no Event written. What a leader
        does before it releases the Lease. True when all of it ended in time; safe to call twice."""
        self.stopping.set()
        self.statuses.writer.close()  # no status write starts from now on
        self.health.stop()
        clean = self._server.halt(grace=GRACE_SECONDS) if self._server is not None else True
        for https in (self.webhook, self.external_metrics):
            if https is not None:
                https.stop()
        self.webhook = self.external_metrics = None
        self.agents.close()  # waits for a MemberCluster registration under way
        clean = self.statuses.writer.wait_idle() and clean  # the status write under way has ended
        return self.recorder.close() and clean

    def stop(self) -> None:
        """Halt, then stop watching and the loops, and free the threads and Ray; safe to call twice
        and after a failed start. /metrics is served until the end."""
        started = self._server is not None
        self.halt()
        self._events.put(None)
        self.watchdog.stop()
        if self._server is not None:
            self._server.stop(grace=GRACE_SECONDS)
            self._server = None
        if self._placement_pool is not None:
            self._placement_pool.shutdown(wait=False, cancel_futures=True)
            self._placement_pool = None
        self.watcher.stop()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads.clear()
        if self._owns_backend:
            self._owns_backend = False
            self.backend.close()
        self.metrics.stop()
        if started:
            log.info("coordinator stopped")

    def warm(self) -> None:
        """Watch the hub while standing by (`coordinator.leading`), keeping only the newest event
        per object (`hub.warm_events`): nothing is applied, placed or written until `start`, which
        then begins from them instead of listing the hub. Once."""
        if self.watcher.started:
            return
        self._warm = warm_events.WarmEvents()
        self.watcher.redirect(self._warm.put)
        self.watcher.start()

    def observe(self) -> None:
        """Serve /metrics and the health-only port, if asked, on the `--listen` host; once (a standby
        serves them before `start`, NOT_SERVING, `coordinator.leading`)."""
        host = self.settings.listen.rpartition(":")[0]
        try:
            if self.settings.metrics_port and not self.metrics_port:
                self.metrics_port = self.metrics.serve(self.settings.metrics_port, addr=host.strip("[]"))
            if self.settings.health_port and not self.health_port:
                self.health_port = self.health.listen(f"{host}:{self.settings.health_port}")
        except OSError as error:
            raise CoordinatorError(f"cannot listen: {error.strerror}") from None

    def _watch_loops(self) -> None:
        """Register every long-running loop with the watchdog and start it. Critical (readiness):
        hub events and timer, which agents depend on; status and the hub watches only wait for
        the hub, and a coordinator unready because the hub is slow would help nobody."""
        settings = self.settings
        self.watchdog.register("hub-events", period=EVENTS_WAIT)
        self.watchdog.register("timer", period=settings.tick_seconds)
        self.statuses.on_write = self.watchdog.register("status", period=settings.status_seconds,
                                                        critical=False)
        for kind in sorted(HUB_KINDS):
            self.watchdog.register(f"hub-watch-{kind}", critical=False,
                                   period=self.watcher.watch_seconds + deadlines.WATCH_SLACK)
        self.watchdog.start()

    def _loop_changed(self, _change: watchdog_mod.Change) -> None:
        self.health.stalled(self.watchdog.critical_stalled())

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=f"coordinator-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    # --- hub events ----------------------------------------------------------------------------

    def _apply_events(self) -> None:
        while True:
            self.watchdog.beat("hub-events")
            try:
                event = self._events.get(timeout=EVENTS_WAIT)
            except queue.Empty:
                event = hub.HubEvent("spread", "SYNCED", key="(idle)")  # only Secrets are read again
            if event is None or self.stopping.is_set():
                return
            try:
                if event.key != "(idle)":
                    self.apply(event)
                self.secrets.read_wanted(self.coordinator.publish)  # Secrets spreads came to need
            except Exception:  # one bad event must not stop the coordinator
                log.exception("hub event failed", extra={"kind": event.kind, "type": event.type,
                                                         "key": event.key})

    def apply(self, event: hub.HubEvent) -> None:
        """Apply one hub event to the World and publish what it changed. A MemberCluster deleted
        while its agent is connected, and not decommissioned, is recreated (`_restore`)."""
        gone_member = event.kind == "cluster" and bool(event.key) and event.type == "DELETED"
        if event.kind == "cluster" and event.key:
            if gone_member:
                self.statuses.members.discard(event.key)
            else:
                self.statuses.members.add(event.key)
        elif event.kind == "spread" and event.key and event.type != "DELETED":
            self.statuses.spread_seen(event.key, generation=event.generation, found=event.problems)
        self.statuses.hub_changed(event.kind, event.key, deleted=event.type == "DELETED")
        deleting = event.kind == "spread" and event.type == "DELETED"
        read = self.secrets.read_for(event)  # Secrets it makes a spread need, read before it applies
        with self.coordinator.lock:
            gone = self.world.spread(event.key) if deleting else None  # in force until now
            self.secrets.hold(read)
            self.coordinator.publish(hub.apply_to_world(self.world, event))
            self.secrets.settle(read)
            if deleting:  # under the lock: a status pass sees it placed or its workload released
                self.statuses.spread_deleted(event.key, target=gone.spec.target_ref if gone else None)
            kept = gone_member and event.key in self.world.cluster_names()
            restore = kept and not self.world.decommissioned(event.key) \
                and event.key in self.coordinator.connected()
        if gone_member and not kept:
            self.backend.forget_cluster(event.key)
        if restore:
            log.warning("MemberCluster deleted while its agent is connected: the cluster stays in the "
                        "federation and nothing moves; recreating it (set spec.decommission to remove "
                        "a member)", extra={"cluster": event.key})
            self.agents.submit(functools.partial(self.member_clusters.restore, event.key), cluster=event.key)
        if event.type == "SYNCED":
            self._synced_kinds.add(event.kind)
            if self._synced_kinds >= HUB_KINDS and not self.hub_synced.is_set():
                self.coordinator.mark_hub_synced()
                self.hub_synced.set()
                log.info("hub listed; agents resynced", extra={"spreads": len(self.world.spreads())})
                self.health.serving()  # after the line: whoever sees SERVING finds it in the log

    def _timer(self) -> None:
        last = self.clock()
        while not self.stopping.wait(self.settings.tick_seconds):
            self.watchdog.beat("timer")
            now = self.clock()
            try:
                self.tick(since=last, now=now)
            except Exception:
                log.exception("coordinator tick failed")
            last = now

    def tick(self, *, since: datetime.datetime, now: datetime.datetime) -> None:
        """Failover, then recompute spreads whose unschedulable marks or timed cluster tolerations
        ended in (since, now]."""
        with self.coordinator.lock:
            self.coordinator.tick()
            expired = loop.due(self.world, since=since, now=now)
            if expired:
                self.coordinator.publish(expired)

    # --- statuses ------------------------------------------------------------------------------

    def _status_loop(self) -> None:
        while not self.stopping.wait(self.settings.status_seconds):
            self.watchdog.beat("status")
            try:
                self.write_statuses()
            except Exception:
                log.exception("status pass failed")

    def write_statuses(self) -> None:
        """One status pass (`statuses.StatusPass.run`)."""
        self.statuses.run(self.clock())
