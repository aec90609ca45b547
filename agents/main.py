"""The member agent, wired in one place: cache, controller loops, webhook, metrics and link.

Why one module: every part shares the same Bookkeeping (the quota table) and ReportOutbox (reports to the
coordinator); seeing them connected here is the quickest way to understand the agent. Start order
follows dependencies: the cache starts first (the loops read it), the webhook is serving before it
is registered (the apiserver may call it at once), the link starts last (assignments then find
everything ready). Stop runs in reverse, and the link stopping never clears the bookkeeping.

The long-running loops are one list of `agents.runnable.Runnable`s — workload, reconciler,
reporter, usage, link, in that order — started and stopped by `agents.runnable.Loops`: each registered
with the watchdog (`federation.watchdog`), each on its own thread, the webhook registered just
before the link starts; stopped in reverse. The watchdog sees a loop that stops turning: logged
once, shown in the metrics, and /readyz answers 503 while a critical loop (workload, reconciler)
is stalled. What the command line says arrives as one `AgentConfig` of per-part settings.
Startup steps that can fail on user input (kubeconfig, certificates) live in agents.bootstrap.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import shutil
import signal
import tempfile
import threading
from typing import Any

from kubernetes import client

from agents import bookkeeping, bootstrap, metrics, outbox, owners, ownership, runnable
from agents.cache import store as cache
from agents.controller import dependencies, reconciler, workload, workload_loop
from agents.inventory import reporter
from agents.link import client as link_client
from agents.link import settings as link_settings
from agents.usage import metrics_api
from agents.usage import reporter as usage_reporter
from agents.webhook import handler, registration, server
from agents.webhook import settings as webhook_settings
from federation import watchdog as watchdog_mod
from federation.api import names
from federation.certs import store
from federation.kube import errors as kube_errors
from federation.kube import events as kube_events
from federation.kube import webhook_clients
from federation.rpc import assignment

log = logging.getLogger(__name__)

AgentError = bootstrap.AgentError
COUNT_WAIT_SECONDS = 1.5
"""How long the webhook waits for a spread's pods to be counted after a start before it refuses a
pod for now (the apiserver gives it 2 s; the controller counts within a second of the cache's
first list)."""

# The per-part settings, reachable from here: `fedspread agent` builds them (and imports only this module).
LinkSettings = link_settings.LinkSettings
WebhookSettings = webhook_settings.WebhookSettings
MetricsSettings = metrics.MetricsSettings
InventorySettings = reporter.InventorySettings
UsageSettings = usage_reporter.UsageSettings


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """Everything `fedspread agent` takes from its command line: one settings object per part, and
    what belongs to the agent as a whole (its member cluster's kubeconfig, its federation)."""

    link: LinkSettings
    """`--cluster`, `--coordinator`, `--label`, `--link-*`/`--insecure` (as `credentials`, a function
    re-reading the files on every reconnect) and `--heartbeat-seconds`, which is the reconciler's
    and the reporter's heartbeat too."""
    kubeconfig: pathlib.Path | None = None
    """Kubeconfig of the member cluster; None: KUBECONFIG, else the in-cluster service account."""
    context: str | None = None
    """Context of `kubeconfig` (or of KUBECONFIG's file) to use; None: its current-context."""
    federation_id: str = names.DEFAULT_FEDERATION_ID
    """The federation this agent expects its coordinator to serve (`--federation-id`)."""
    webhook: WebhookSettings = dataclasses.field(default_factory=WebhookSettings)
    metrics: MetricsSettings = dataclasses.field(default_factory=MetricsSettings)
    inventory: InventorySettings = dataclasses.field(default_factory=InventorySettings)
    usage: UsageSettings = dataclasses.field(default_factory=UsageSettings)
    """`--usage-interval`: how often the spreads' pod usage is read from the metrics API."""

    @property
    def cluster(self) -> str:
        """This member cluster's name (`--cluster`)."""
        return self.link.cluster


class Agent:
    """One member cluster's agent; `start()` then `run()` (until a signal) or `stop()`."""

    def __init__(self, settings: AgentConfig) -> None:
        self.settings = settings
        self.stopping = threading.Event()
        self.bookkeeping = bookkeeping.Bookkeeping(count_wait=COUNT_WAIT_SECONDS)
        self.outbox = outbox.ReportOutbox()
        self.metrics = metrics.AgentMetrics(cluster=settings.cluster)
        self.watchdog = watchdog_mod.Watchdog("agent")
        self.metrics.watch_loops(self.watchdog)
        self._registered = False
        credentials = settings.link.credentials
        if callable(credentials):  # certificate files: fail now, in one line, not at every reconnect
            try:
                credentials()
            except store.CertFileError as error:
                raise AgentError(f"link certificate: {error}") from None
        hook = settings.webhook
        self._tmp = pathlib.Path(tempfile.mkdtemp(prefix="fedspread-agent-"))
        try:
            self.api = bootstrap.api_client(settings.kubeconfig, context=settings.context)
            self.serving = bootstrap.serving_certificate(
                self._tmp, cluster=settings.cluster, url_host=hook.url_host, service=hook.service,
                cert=hook.tls_cert, key=hook.tls_key, ca=hook.tls_ca)
            self.webhook = server.WebhookServer(
                handler.AdmissionHandler(self.bookkeeping, self.metrics, owner_check=self._owner_check),
                port=hook.port, cert_file=self.serving.cert_file, key_file=self.serving.key_file,
                ready=self._ready,
                client_auth=None if hook.client_ca is None else webhook_clients.ClientAuth(
                    hook.client_ca, frozenset(hook.allowed_cns)))
        except (OSError, ValueError) as error:  # unreadable or mismatched certificate files
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise AgentError(f"webhook serving certificate: {error}") from None
        except Exception:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        core, apps = client.CoreV1Api(self.api), client.AppsV1Api(self.api)
        batch = client.BatchV1Api(self.api)
        self.cache = cache.Cache(core, apps, batch_api=batch,
                                 autoscaling_api=client.AutoscalingV1Api(self.api))
        self.federation = ownership.FederationState(settings.federation_id)
        self.recorder = kube_events.EventRecorder(self.api, controller=kube_events.AGENT,
                                                  instance=settings.cluster)
        self.metrics.watch_events(self.recorder.outcomes)
        heartbeat = settings.link.heartbeat_seconds
        self.workload = workload.WorkloadSync(apps, self.bookkeeping, self.cache, core_api=core,
                                              batch_api=batch, recorder=self.recorder)
        self.copies = dependencies.DependencySync(core, self.bookkeeping)
        self.workload_loop = workload_loop.WorkloadLoop(self.workload, copies=self.copies)
        self.reconciler = reconciler.Reconciler(core, self.bookkeeping, self.outbox, self.cache,
                                                heartbeat_seconds=heartbeat,
                                                conflicts=self.workload.conflicts,
                                                dependency_conflicts=self.copies.conflicts,
                                                recorder=self.recorder)
        self.workload.costs_written = self.reconciler.costs_written
        self.reporter = reporter.InventoryReporter(self.cache, self.outbox, heartbeat_seconds=heartbeat,
                                                   max_pools=settings.inventory.max_node_pools)
        self.usage = usage_reporter.UsageReporter(
            settings.cluster, self.bookkeeping, self.cache, self.outbox,
            metrics_api.PodMetricsReader(self.api), settings=settings.usage)
        self.link = link_client.Link(
            settings.link, bookkeeping=self.bookkeeping, outbox=self.outbox, metrics=self.metrics,
            on_assignment=lambda _value: self.workload_loop.wake(), on_removal=self._removed,
            federation=self.federation, cache=self.cache)
        self.loops = runnable.Loops(self._runnables(), stop=self.stopping, watchdog=self.watchdog)
        """The long-running loops, started in this order and stopped in reverse."""

    def _runnables(self) -> tuple[runnable.Runnable, ...]:
        """The agent's loops, in start order. Critical (readiness): workload and reconciler, which
        keep the webhook's counts and quotas true; the reporters and the link only talk to the
        coordinator, whose absence the agent survives (fail static). The link is last: the
        assignments it brings find every other loop running."""
        return (self.workload_loop, self.reconciler, self.reporter, self.usage, self.link)

    def start(self) -> None:
        """Start every part; AgentError when a port is taken or the registration is refused."""
        chosen = self.settings
        if chosen.metrics.port:
            try:
                self.metrics.serve(chosen.metrics.port)
            except OSError as error:
                raise AgentError(f"metrics port {chosen.metrics.port}: {error.strerror}") from None
        try:
            self.webhook.start()
        except OSError as error:
            raise AgentError(f"webhook port {chosen.webhook.port}: {error.strerror}") from None
        self.cache.start()
        # The webhook serves already; it is registered just before the link brings assignments.
        self.loops.start(before={self.link.name: self._register} if chosen.webhook.register else None)
        if chosen.federation_id == names.DEFAULT_FEDERATION_ID:
            log.warning("--federation-id left at its default; give each federation its own identity "
                        "(the coordinator's --federation-id)", extra={"federation_id": chosen.federation_id})
        log.info("agent started", extra={"cluster": chosen.cluster, "coordinator": chosen.link.target,
                                         "webhook_port": self.webhook.port,
                                         "federation_id": chosen.federation_id})

    def _register(self) -> None:
        hook = self.settings.webhook
        if hook.service is not None:
            namespace, name = hook.service
            where = registration.service_client_config(namespace=namespace, name=name,
                                                       ca_pem=self.serving.ca_pem)
        else:
            url = f"https://{hook.url_host}:{self.webhook.port}{server.MUTATE_PATH}"
            where = registration.url_client_config(url, ca_pem=self.serving.ca_pem)
        selector = {"matchLabels": dict(hook.namespace_selector)} if hook.namespace_selector else None
        body = registration.configuration(where, name=hook.name, namespace_selector=selector)
        try:
            with kube_errors.translated():
                registration.apply_registration(self.api, body)
        except Exception as error:  # RBAC, a conflicting object, the apiserver away
            raise AgentError(f"cannot register webhook {hook.name}: {error}") from error
        self._registered = True

    def run(self) -> None:
        """Block until SIGTERM or SIGINT (or `stopping` is set elsewhere), then stop cleanly."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        self.stopping.wait()
        self.stop()

    def stop(self) -> None:
        """Stop in reverse order: the loops from the link back to the workload loop, the webhook
        (registration, then serving) right after the link, then the cache; safe to call twice and
        after a failed start."""
        self.loops.stop(after={self.link.name: self._stop_webhook})
        self.cache.stop()
        self.recorder.close()
        self.metrics.stop()
        shutil.rmtree(self._tmp, ignore_errors=True)
        log.info("agent stopped", extra={"cluster": self.settings.cluster})

    def _stop_webhook(self) -> None:
        if self._registered and self.settings.webhook.deregister_on_exit:
            try:
                registration.remove_registration(self.api, self.settings.webhook.name)
            except Exception as error:  # exiting anyway: say so, do not hide the rest of the stop
                log.warning("webhook deregistration failed", extra={"error": str(error)[:200]})
            self._registered = False
        self.webhook.stop()

    def _ready(self) -> bool:
        """/readyz: serving and counting from synced caches, and no controller loop stalled."""
        return self.cache.synced and not self.watchdog.critical_stalled()

    def _owner_check(self, value: assignment.Assignment, namespace: str, references: Any) -> str:
        """Whose pod a pod being created is (`owners.admission`), from the cache (the webhook's)."""
        return owners.admission(value, namespace=namespace, owner_references=references,
                                workload=self.cache.member_workload(value.kind, value.namespace,
                                                                    value.workload),
                                replicaset=self.cache.replicaset)

    def _removed(self, spread: str, orphan: bool) -> None:
        if orphan:
            log.info("spread orphaned: its Deployment stays", extra={"spread": spread})
        # The removal's federation is the one of the stream it arrived on (read on the link thread).
        self.workload_loop.removed(spread, orphan=orphan, federation=self.federation.current)
