"""The member agent, wired in one place: cache, controller loops, webhook, metrics and link.

Why one module: every part shares the same Bookkeeping (the quota table) and Outbox (reports to the
coordinator); seeing them connected here is the quickest way to understand the agent. Start order
follows dependencies: the cache starts first (the loops read it), the webhook is serving before it
is registered (the apiserver may call it at once), the link starts last (assignments then find
everything ready). Stop runs in reverse, and the link stopping never clears the bookkeeping.
A watchdog (`federation.watchdog`) sees a loop that stops turning: logged once, shown in the
metrics, and /readyz answers 503 while a controller loop (workload, reconciler) is stalled.
Startup steps that can fail on user input (kubeconfig, certificates) live in agents.bootstrap.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import queue
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client

from agents import bookkeeping, bootstrap, metrics, outbox, owners, ownership
from agents.cache import store as cache
from agents.controller import reconciler, workload
from agents.inventory import reporter
from agents.link import client as link_client
from agents.webhook import handler, registration, server
from federation import watchdog as watchdog_mod
from federation.api import names
from federation.certs import store, transport
from federation.kube import errors as kube_errors
from federation.kube import events as kube_events
from federation.kube import webhook_clients
from federation.rpc import assignment

log = logging.getLogger("fedspread.agent")

AgentError = bootstrap.AgentError
COUNT_WAIT_SECONDS = 1.5
"""How long the webhook waits for a spread's pods to be counted after a start before it refuses a
pod for now (the apiserver gives it 2 s; the controller counts within a second of the cache's
first list)."""
WORKLOAD_WAIT = 1.0
"""The workload loop turns at least this often (its watchdog period)."""


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """Everything `fedspread agent` takes from its command line."""

    cluster: str
    kubeconfig: pathlib.Path | None
    coordinator: str
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    webhook_port: int = 9443
    webhook_url_host: str = "127.0.0.1"
    webhook_name: str = registration.NAME
    webhook_namespace_selector: Mapping[str, str] | None = None
    webhook_service: tuple[str, str] | None = None  # (namespace, name): in-cluster, behind a Service
    register_webhook: bool = True
    deregister_on_exit: bool = False
    metrics_port: int = 9090
    tls_cert: pathlib.Path | None = None
    tls_key: pathlib.Path | None = None
    tls_ca: pathlib.Path | None = None
    link_tls: transport.TLSFiles | None = None
    """mTLS to the coordinator with these files (re-read on every reconnect); None: plaintext."""
    heartbeat_seconds: float = 10.0
    max_node_pools: int = 100
    """The most node pools the inventory reports (`--max-node-pools`; `federation.core.pool_bounds`)."""
    context: str | None = None
    """Context of `kubeconfig` (or of KUBECONFIG's file) to use; None: its current-context."""
    federation_id: str = names.DEFAULT_FEDERATION_ID
    """The federation this agent expects its coordinator to serve (`--federation-id`)."""
    webhook_client_ca: pathlib.Path | None = None
    """Only callers with a client certificate this CA signed may post reviews; None: anyone."""
    webhook_allowed_cns: tuple[str, ...] = ()
    """With `webhook_client_ca`: only these common names (empty: any the CA signed)."""


class Agent:
    """One member cluster's agent; `start()` then `run()` (until a signal) or `stop()`."""

    def __init__(self, settings: AgentConfig) -> None:
        self.settings = settings
        self.stopping = threading.Event()
        self.bookkeeping = bookkeeping.Bookkeeping(count_wait=COUNT_WAIT_SECONDS)
        self.outbox = outbox.Outbox()
        self.metrics = metrics.AgentMetrics(cluster=settings.cluster)
        self.watchdog = watchdog_mod.Watchdog("agent")
        self.metrics.watch_loops(self.watchdog)
        self._tmp = pathlib.Path(tempfile.mkdtemp(prefix="fedspread-agent-"))
        self._threads: list[threading.Thread] = []
        self._wake = threading.Event()
        self._removals: queue.Queue[tuple[str, bool, str]] = queue.Queue()
        self._registered = False
        link_tls = settings.link_tls
        if link_tls is not None:
            try:
                link_tls.read()  # fail now, in one line, rather than at every reconnect
            except store.CertFileError as error:
                raise AgentError(f"link certificate: {error}") from None
        try:
            self.api = bootstrap.api_client(settings.kubeconfig, context=settings.context)
            self.serving = bootstrap.serving_certificate(
                self._tmp, cluster=settings.cluster, url_host=settings.webhook_url_host,
                service=settings.webhook_service, cert=settings.tls_cert, key=settings.tls_key,
                ca=settings.tls_ca)
            self.webhook = server.WebhookServer(
                handler.AdmissionHandler(self.bookkeeping, self.metrics, owner_check=self._owner_check),
                port=settings.webhook_port,
                cert_file=self.serving.cert_file, key_file=self.serving.key_file,
                ready=self._ready,
                client_auth=None if settings.webhook_client_ca is None else webhook_clients.ClientAuth(
                    settings.webhook_client_ca, frozenset(settings.webhook_allowed_cns)))
        except (OSError, ValueError) as error:  # unreadable or mismatched certificate files
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise AgentError(f"webhook serving certificate: {error}") from None
        except Exception:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        core, apps = client.CoreV1Api(self.api), client.AppsV1Api(self.api)
        self.cache = cache.Cache(core, apps)
        self.federation = ownership.FederationState(settings.federation_id)
        self.recorder = kube_events.EventRecorder(self.api, controller=kube_events.AGENT,
                                                  instance=settings.cluster)
        self.metrics.watch_events(self.recorder.outcomes)
        self.workload = workload.WorkloadSync(apps, self.bookkeeping, self.cache, core_api=core,
                                              recorder=self.recorder)
        self.reconciler = reconciler.Reconciler(core, self.bookkeeping, self.outbox, self.cache,
                                                heartbeat_seconds=settings.heartbeat_seconds,
                                                conflicts=self.workload.conflicts, recorder=self.recorder)
        self.reporter = reporter.InventoryReporter(self.cache, self.outbox,
                                                   heartbeat_seconds=settings.heartbeat_seconds,
                                                   max_pools=settings.max_node_pools)
        self.link = link_client.Link(
            settings.coordinator, cluster=settings.cluster, labels=settings.labels,
            bookkeeping=self.bookkeeping, outbox=self.outbox, metrics=self.metrics,
            credentials=None if link_tls is None else (lambda: transport.channel_credentials(link_tls)),
            heartbeat_seconds=settings.heartbeat_seconds,
            on_assignment=lambda _value: self._wake.set(), on_removal=self._removed,
            federation=self.federation, cache=self.cache, beat=lambda: self.watchdog.beat("link"))

    def start(self) -> None:
        """Start every part; AgentError when a port is taken or the registration is refused."""
        chosen = self.settings
        if chosen.metrics_port:
            try:
                self.metrics.serve(chosen.metrics_port)
            except OSError as error:
                raise AgentError(f"metrics port {chosen.metrics_port}: {error.strerror}") from None
        try:
            self.webhook.start()
        except OSError as error:
            raise AgentError(f"webhook port {chosen.webhook_port}: {error.strerror}") from None
        self.cache.start()
        self._watch_loops()
        self._spawn("workload", self._workload_loop)
        self._spawn("reconciler", lambda: self.reconciler.run(self.stopping))
        self._spawn("reporter", lambda: self.reporter.run(self.stopping,
                                                          beat=lambda: self.watchdog.beat("reporter")))
        if chosen.register_webhook:
            self._register()
        self.link.start()
        if chosen.federation_id == names.DEFAULT_FEDERATION_ID:
            log.warning("--federation-id left at its default; give each federation its own identity "
                        "(the coordinator's --federation-id)", extra={"federation_id": chosen.federation_id})
        log.info("agent started", extra={"cluster": chosen.cluster, "coordinator": chosen.coordinator,
                                         "webhook_port": self.webhook.port,
                                         "federation_id": chosen.federation_id})

    def _register(self) -> None:
        chosen = self.settings
        if chosen.webhook_service is not None:
            namespace, name = chosen.webhook_service
            where = registration.service_client_config(namespace=namespace, name=name,
                                                       ca_pem=self.serving.ca_pem)
        else:
            url = f"https://{chosen.webhook_url_host}:{self.webhook.port}{server.MUTATE_PATH}"
            where = registration.url_client_config(url, ca_pem=self.serving.ca_pem)
        selector = ({"matchLabels": dict(chosen.webhook_namespace_selector)}
                    if chosen.webhook_namespace_selector else None)
        body = registration.configuration(where, name=chosen.webhook_name, namespace_selector=selector)
        try:
            with kube_errors.translated():
                registration.apply_registration(self.api, body)
        except Exception as error:  # RBAC, a conflicting object, the apiserver away
            raise AgentError(f"cannot register webhook {chosen.webhook_name}: {error}") from error
        self._registered = True

    def run(self) -> None:
        """Block until SIGTERM or SIGINT (or `stopping` is set elsewhere), then stop cleanly."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        self.stopping.wait()
        self.stop()

    def stop(self) -> None:
        """Stop in reverse order; safe to call twice and after a failed start."""
        self.stopping.set()
        self._wake.set()
        self.watchdog.stop()
        self.link.stop()
        if self._registered and self.settings.deregister_on_exit:
            try:
                registration.remove_registration(self.api, self.settings.webhook_name)
            except Exception as error:  # exiting anyway: say so, do not hide the rest of the stop
                log.warning("webhook deregistration failed", extra={"error": str(error)[:200]})
            self._registered = False
        self.webhook.stop()
        for thread in self._threads:
            thread.join(timeout=5)
        self.cache.stop()
        self.recorder.close()
        self.metrics.stop()
        shutil.rmtree(self._tmp, ignore_errors=True)
        log.info("agent stopped", extra={"cluster": self.settings.cluster})

    def _ready(self) -> bool:
        """/readyz: serving and counting from synced caches, and no controller loop stalled."""
        return self.cache.synced and not self.watchdog.critical_stalled()

    def _watch_loops(self) -> None:
        """Register the long-running loops with the watchdog and start it. Critical (readiness):
        workload and reconciler, which keep the webhook's counts and quotas true; the reporter and
        the link only talk to the coordinator, whose absence the agent survives (fail static)."""
        self.watchdog.register("workload", period=WORKLOAD_WAIT)
        self.reconciler.beat = self.watchdog.register("reconciler", period=reconciler.ROUND_SECONDS)
        self.watchdog.register("reporter", period=self.settings.heartbeat_seconds, critical=False)
        self.watchdog.register("link", period=self.link.turn_seconds, critical=False)
        self.watchdog.start()

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=f"agent-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _owner_check(self, value: assignment.Assignment, namespace: str, references: Any) -> str:
        """Whose pod a pod being created is (`owners.admission`), from the cache (the webhook's)."""
        return owners.admission(value, namespace=namespace, owner_references=references,
                                deployment=self.cache.deployment(value.namespace, value.workload),
                                replicaset=self.cache.replicaset)

    def _removed(self, spread: str, orphan: bool) -> None:
        if orphan:
            log.info("spread orphaned: its Deployment stays", extra={"spread": spread})
        # The removal's federation is the one of the stream it arrived on (read on the link thread).
        self._removals.put((spread, orphan, self.federation.current))
        self._wake.set()

    def _workload_loop(self) -> None:
        while not self.stopping.is_set():
            self.watchdog.beat("workload")
            self._wake.wait(WORKLOAD_WAIT)
            self._wake.clear()
            removal: tuple[str, bool, str] | None = None
            try:
                while not self._removals.empty():
                    removal = self._removals.get_nowait()
                    spread, orphan, federation = removal
                    # An orphaned workload keeps running, unmanaged; otherwise it is deleted.
                    (self.workload.release if orphan else self.workload.remove)(spread, federation=federation)
                    removal = None
                self.workload.sync_once()
            except Exception as error:  # the next round retries; the webhook enforces meanwhile
                if removal is not None:
                    self._removals.put(removal)
                log.warning("workload sync failed",
                            extra={"spread": removal[0] if removal else None, "error": str(error)[:300]})

