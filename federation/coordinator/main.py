"""The coordinator process, wired in one place: hub watcher, placement, agent streams, statuses, gRPC.

Why one module: every part shares one `world.World` behind one `agent_service.Coordinator` facade
(its lock is the only lock on the World); seeing them connected here is the quickest way to
understand the coordinator. The threads, and why each exists:

- **hub events** — the `HubWatcher`'s three watch threads only enqueue; ONE worker applies the
  events in order (`hub.apply_to_world` under the facade's lock, then `Coordinator.publish`), so a
  slow recompute never stalls a watch stream and events are never reordered. After the first
  SYNCED of all three kinds it calls `mark_hub_synced()`: only then may agents be resynced (an
  empty World must not tell agents to remove live workloads).
- **timer** (1 s) — `Coordinator.tick()` moves replicas off clusters whose agents went silent, and
  spreads whose unschedulable marks just expired are recomputed (the subset may take pods again).
- **status** (~2 s) — FederatedSpread, MemberCluster and hub Deployment statuses from the World via
  `core.status`, written by `StatusWriter` (which skips unchanged ones), outside the lock.
- **gRPC** — AgentService and PlacementService on one server (`--listen`).

Seam: `ray_address` is accepted and stored, but placement runs in-process through
`loop.recompute` (inside `Coordinator.publish`) until `shards.py`'s backend is wired in here.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import functools
import logging
import pathlib
import queue
import signal
import threading
from collections.abc import Callable

import grpc
import urllib3
from kubernetes import client, config

from federation.api import cluster as cluster_api
from federation.api import common
from federation.api import spread as spread_api
from federation.coordinator import agent_service, hub, placement_service, source, status_writer
from federation.coordinator import world as world_model
from federation.core import status as status_core
from federation.rpc import agent_pb2, agent_pb2_grpc

log = logging.getLogger("fedspread.coordinator")

HUB_KINDS = frozenset({"spread", "cluster", "deployment"})
PROBE_TIMEOUT = 10.0


class CoordinatorError(Exception):
    """A startup problem the user can fix (kubeconfig, hub, port); the message says which."""


@dataclasses.dataclass(frozen=True)
class CoordinatorConfig:
    """Everything `fedspread coordinator` takes from its command line."""

    hub_kubeconfig: pathlib.Path
    listen: str = "0.0.0.0:7443"
    ray_address: str | None = None  # SEAM: stored only; placement runs in-process for now
    heartbeat_seconds: float = 10.0
    tick_seconds: float = 1.0
    status_seconds: float = 2.0
    member_status_seconds: float = 30.0
    """A MemberCluster status is rewritten this often at most, unless its readiness changed."""


def utcnow() -> datetime.datetime:
    """Aware UTC now."""
    return datetime.datetime.now(datetime.UTC)


def hub_client(kubeconfig: pathlib.Path) -> client.ApiClient:
    """An ApiClient for the hub; CoordinatorError naming the file when it cannot be loaded."""
    if not kubeconfig.is_file():
        raise CoordinatorError(f"hub kubeconfig {kubeconfig}: no such file")
    try:
        return config.new_client_from_config(config_file=str(kubeconfig))
    except Exception as error:  # YAML, missing fields, unreadable certificates: all the user's file
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CoordinatorError(f"hub kubeconfig {kubeconfig}: {first[:200]}") from None


def probe_hub(api: client.ApiClient) -> None:
    """One cheap list, so an unreachable hub or missing CRDs fail at startup with a clear line."""
    host = api.configuration.host
    try:
        client.CustomObjectsApi(api).list_cluster_custom_object(
            common.API_GROUP, common.API_VERSION, spread_api.PLURAL, limit=1,
            _request_timeout=PROBE_TIMEOUT)
    except client.ApiException as error:
        if error.status == 404:
            raise CoordinatorError(f"hub {host} has no FederatedSpread CRD; install crds/ "
                                   "(`fedspread crds` then `kubectl apply -f crds/`)") from None
        raise CoordinatorError(f"hub {host} refused: {error.status} {error.reason}") from None
    except (urllib3.exceptions.HTTPError, OSError) as error:
        reason = str(getattr(error, "reason", None) or error)
        raise CoordinatorError(f"hub {host} unreachable: {reason.rpartition(': ')[2][:200]}") from None


class CoordinatorProcess:
    """The coordinator; `start()` then `run()` (until a signal) or `stop()`."""

    def __init__(self, settings: CoordinatorConfig, *, api: client.ApiClient | None = None) -> None:
        self.settings = settings
        self.clock = utcnow
        self.api = api if api is not None else hub_client(settings.hub_kubeconfig)
        self.world = world_model.World(self.clock)
        self.coordinator = agent_service.Coordinator(self.world, clock=self.clock, hub_synced=False)
        self.writer = status_writer.StatusWriter(self.api)
        self.stopping = threading.Event()
        self.hub_synced = threading.Event()
        self.port = 0
        self._custom = client.CustomObjectsApi(self.api)
        self._events: queue.Queue[hub.HubEvent | None] = queue.Queue()
        self._synced_kinds: set[str] = set()
        self._members: set[str] = set()  # MemberClusters seen on the hub
        self._agent_versions: dict[str, str] = {}
        self._spread_status: dict[str, spread_api.FederatedSpreadStatus] = {}
        self._member_status: dict[str, tuple[cluster_api.MemberClusterStatus, datetime.datetime]] = {}
        self._status_lock = threading.Lock()
        self.source = source.WorldSource(self.coordinator, conditions=self._conditions,
                                         agent_versions=self._agent_versions)
        self.agents = agent_service.AgentServicer(
            self.coordinator, clock=self.clock, heartbeat_seconds=settings.heartbeat_seconds,
            on_cluster_hello=self._on_hello)
        self.watcher = hub.HubWatcher(self.api, self._events.put)
        self._server: grpc.Server | None = None
        self._threads: list[threading.Thread] = []

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Check the hub, listen, start watching and the loops; CoordinatorError on user problems."""
        probe_hub(self.api)
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=64,
                                                                   thread_name_prefix="grpc"))
        agent_pb2_grpc.add_AgentServiceServicer_to_server(self.agents, server)
        placement_service.add_to_server(server, self.source)
        try:
            port = server.add_insecure_port(self.settings.listen)
        except RuntimeError:
            port = 0
        if not port:
            raise CoordinatorError(f"cannot listen on {self.settings.listen}: the port is in use "
                                   "or the address is not this machine's")
        server.start()
        self._server, self.port = server, port
        self.watcher.start()
        self._spawn("hub-events", self._apply_events)
        self._spawn("timer", self._timer)
        self._spawn("status", self._status_loop)
        if self.settings.ray_address:
            log.warning("--ray-address is not wired yet; placement runs in this process",
                        extra={"ray_address": self.settings.ray_address})
        log.info("coordinator started", extra={"listen": self.settings.listen, "port": port,
                                               "hub": self.api.configuration.host,
                                               "coordinator_id": self.coordinator.coordinator_id})

    def run(self) -> None:
        """Block until SIGTERM or SIGINT (or `stopping` is set elsewhere), then stop cleanly."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        self.stopping.wait()
        self.stop()

    def stop(self) -> None:
        """Stop serving, watching and the loops; safe to call twice and after a failed start."""
        started = self._server is not None
        self.stopping.set()
        self._events.put(None)
        if self._server is not None:
            self._server.stop(grace=1.0).wait(5)
            self._server = None
        self.watcher.stop()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads.clear()
        if started:
            log.info("coordinator stopped")

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=f"coordinator-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    # --- hub events ----------------------------------------------------------------------------

    def _apply_events(self) -> None:
        while True:
            event = self._events.get()
            if event is None or self.stopping.is_set():
                return
            try:
                self.apply(event)
            except Exception:  # one bad event must not stop the coordinator
                log.exception("hub event failed", extra={"kind": event.kind, "type": event.type,
                                                         "key": event.key})

    def apply(self, event: hub.HubEvent) -> None:
        """Apply one hub event to the World and publish what it changed."""
        if event.kind == "cluster" and event.key:
            if event.type == "DELETED":
                self._members.discard(event.key)
            else:
                self._members.add(event.key)
        with self.coordinator.lock:
            self.coordinator.publish(hub.apply_to_world(self.world, event))
        if event.type == "SYNCED":
            self._synced_kinds.add(event.kind)
            if self._synced_kinds >= HUB_KINDS and not self.hub_synced.is_set():
                self.coordinator.mark_hub_synced()
                self.hub_synced.set()
                log.info("hub listed; agents resynced", extra={"spreads": len(self.world.spreads())})

    def _on_hello(self, hello: agent_pb2.Hello) -> None:
        """Remember the agent's version; create its MemberCluster (topology labels) if missing."""
        name = hello.cluster_name
        self._agent_versions[name] = hello.agent_version
        if name in self._members:
            return
        body = {"apiVersion": f"{common.API_GROUP}/{common.API_VERSION}", "kind": "MemberCluster",
                "metadata": {"name": name, "labels": dict(hello.topology_labels)}, "spec": {}}
        try:
            self._custom.create_cluster_custom_object(common.API_GROUP, common.API_VERSION,
                                                      cluster_api.PLURAL, body)
            log.info("MemberCluster registered", extra={"cluster": name})
        except client.ApiException as error:
            if error.status != 409:  # 409: it exists already, the hub's copy wins
                raise

    # --- timer ---------------------------------------------------------------------------------

    def _timer(self) -> None:
        last = self.clock()
        while not self.stopping.wait(self.settings.tick_seconds):
            now = self.clock()
            try:
                self.tick(since=last, now=now)
            except Exception:
                log.exception("coordinator tick failed")
            last = now

    def tick(self, *, since: datetime.datetime, now: datetime.datetime) -> None:
        """Failover, then recompute spreads whose unschedulable marks expired in (since, now]."""
        with self.coordinator.lock:
            self.coordinator.tick()
            expired = set()
            for entry in self.world.spreads():
                window = datetime.timedelta(
                    seconds=entry.spec.schedule_strategy.adaptive_settings().unschedulable_seconds)
                if any(since < mark.since + window <= now for mark in self.world.marks_for(entry.key)):
                    expired.add(entry.key)
            if expired:
                self.coordinator.publish(expired)

    # --- statuses ------------------------------------------------------------------------------

    def _conditions(self, key: str) -> list[common.Condition]:
        with self._status_lock:
            written = self._spread_status.get(key)
        return list(written.conditions) if written is not None else []

    def _status_loop(self) -> None:
        while not self.stopping.wait(self.settings.status_seconds):
            try:
                self.write_statuses()
            except Exception:
                log.exception("status pass failed")

    def write_statuses(self) -> None:
        """One pass: compute every status under the lock, write them outside it."""
        now = self.clock()
        with self.coordinator.lock:
            spreads = [self._spread_job(key, now=now) for key in sorted(self.world.placements)]
            members = [self._member_job(name, now=now) for name in self.world.cluster_names()
                       if name in self._members]
        with self._status_lock:
            for gone in set(self._spread_status) - {job[0] for job in spreads}:
                del self._spread_status[gone]
        for key, new, target in spreads:
            if self._write(functools.partial(self.writer.write_spread, key, new), what="spread", key=key):
                with self._status_lock:
                    self._spread_status[key] = new
            if target is not None:
                namespace, name, fields = target
                self._write(functools.partial(self.writer.write_deployment_status, namespace, name, fields),
                            what="deployment", key=f"{namespace}/{name}")
        for job in members:
            if job is None:
                continue
            name, member = job
            if self._write(functools.partial(self.writer.write_member_cluster, name, member),
                           what="cluster", key=name):
                self._member_status[name] = (member, now)

    def _spread_job(self, key: str, *, now: datetime.datetime) -> tuple[
            str, spread_api.FederatedSpreadStatus, tuple[str, str, dict[str, int]] | None]:
        entry, result = self.world.spread(key), self.world.placements[key]
        assert entry is not None  # placements of deleted spreads are dropped by the same publish
        reports: dict[str, dict[str, status_core.ClusterPods]] = {}
        for subset, per_cluster in self.world.pods_for(key).items():
            for name, pods in per_cluster.items():
                reports.setdefault(name, {})[subset] = pods
        with self._status_lock:
            previous = self._spread_status.get(key)
        new = status_core.spread_status(
            placement=result, spec=entry.spec, generation=entry.spread.metadata.generation,
            reports=reports, marks=self.world.marks_for(key), previous=previous, now=now)
        target = None
        if entry.replicas is not None:
            # The facade keeps pod counts, not the member Deployments' status (SpreadPodCounts.
            # workload): derive each member's from its pods until it does.
            workloads = {
                name: status_core.WorkloadStatus(
                    replicas=sum(p.active for p in pods.values()),
                    ready=sum(p.ready for p in pods.values()),
                    available=sum(p.ready for p in pods.values()),
                    updated=sum(p.active for p in pods.values()))
                for name, pods in reports.items()
            }
            fields = status_core.deployment_status(workloads, replicas=entry.replicas)
            target = (key.partition("/")[0], entry.spec.target_ref.name, fields)
        return key, new, target

    def _member_job(self, name: str, *, now: datetime.datetime) -> tuple[
            str, cluster_api.MemberClusterStatus] | None:
        lost_after = datetime.timedelta(seconds=self.world.min_lost_seconds())
        ready = self.world.ready(name, after=lost_after)
        last = self.world.tracker.last(name)
        old, written_at = self._member_status.get(name, (None, None))
        previous = list(old.conditions) if old is not None else []
        was_ready = any(c.type == "Ready" and c.status == "True" for c in previous)
        if written_at is not None and was_ready == ready and \
                now - written_at < datetime.timedelta(seconds=self.settings.member_status_seconds):
            return None
        pools = self.world.snapshot_for("").clusters
        nodes = sum(p.count for c in pools if c.name == name for p in c.node_pools)
        conditions = status_core.member_cluster_conditions(
            ready=ready, last_heartbeat=last, lost_after=lost_after, previous=previous, now=now)
        return name, cluster_api.MemberClusterStatus(
            conditions=conditions, last_heartbeat_time=last,
            agent_version=self._agent_versions.get(name, ""),
            capacity=cluster_api.CapacitySummary(nodes=nodes))

    def _write(self, write: Callable[[], bool], *, what: str, key: str) -> bool:
        """Run one status write; False (logged, quietly for a vanished object) when it failed."""
        try:
            write()
            return True
        except client.ApiException as error:
            if error.status == 404:
                log.debug("status target gone", extra={"kind": what, "key": key})
            else:
                log.warning("status write failed", extra={"kind": what, "key": key,
                                                          "status": error.status, "reason": error.reason})
        except (urllib3.exceptions.HTTPError, OSError) as error:
            log.warning("status write failed", extra={"kind": what, "key": key, "error": str(error)[:200]})
        return False
