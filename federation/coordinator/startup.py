"""What the coordinator process is made from: its settings, the hub client, the placement backend,
the gRPC credentials, and the first question to the hub.

Why apart from `process`: these are the steps that can fail on the user's input — a kubeconfig, a
Ray address, a certificate file, a hub without the CRDs — each turned into one `CoordinatorError`
line before anything starts; `process` wires the running parts over them.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import time
from collections.abc import Callable, Collection

import grpc
from kubernetes import client

from federation.api import common, names
from federation.api import spread as spread_api
from federation.certs import store, transport
from federation.coordinator import backends, facade, ray_deadline, ray_join, shards
from federation.coordinator.hub import access_review, admission
from federation.coordinator.model import stall
from federation.coordinator.services import front_proxy, metrics_api
from federation.kube import clients, deadlines, webhook_https
from federation.kube import errors as kube_errors

log = logging.getLogger(__name__)

PROBE_TIMEOUT = deadlines.PROBE
RAY_PROBE_SECONDS = 5.0
"""The one question to a Ray address before joining it (`ray_join.check`) gets this long."""


class CoordinatorError(Exception):
    """A startup problem the user can fix (kubeconfig, hub, port); the message says which."""


@dataclasses.dataclass(frozen=True)
class CoordinatorConfig:
    """Everything `fedspread coordinator` takes from its command line."""

    hub_kubeconfig: pathlib.Path | None
    """None: KUBECONFIG if set, else the pod's in-cluster service account (the coordinator runs in
    the hub)."""
    hub_context: str | None = None
    """Context of the hub kubeconfig to use; None: its current-context."""
    listen: str = "0.0.0.0:7443"
    use_ray: bool = True
    ray_address: str | None = None
    """Join this Ray cluster; None starts a local one (when `use_ray`)."""
    ray_join_seconds: float = 25.0
    """Joining `ray_address` (the probe, then `ray.init`) fails after this long."""
    spread_shards: int = 2
    cluster_shards: int = 1
    ray_round_min_spreads: int = shards.RAY_ROUND_MIN_SPREADS
    """Rounds of fewer spreads are placed in this process, not on the shards (the crossover)."""
    heartbeat_seconds: float = 10.0
    tick_seconds: float = 1.0
    status_seconds: float = 2.0
    member_status_seconds: float = 30.0
    """A MemberCluster status is rewritten this often at most, unless its readiness changed."""
    tls: transport.TLSFiles | None = None
    """Serve mTLS with these files; None: plaintext (`--insecure`, local use only)."""
    failover_clusters_per_minute: int | None = 10
    """At most this many lost clusters start failing over per minute, federation-wide; None: no limit."""
    federation_id: str = names.DEFAULT_FEDERATION_ID
    """This federation's identity (`--federation-id`), sent to agents in Welcome."""
    webhook: admission.WebhookSettings | None = None
    """Serve the hub's validating webhook so; None: not served (the Valid condition still reports)."""
    metrics_port: int = 0
    """Prometheus /metrics on this port of the `listen` host (`coordinator.metrics`); 0: off."""
    health_port: int = 0
    """gRPC health alone, plaintext, on this port of the `listen` host (`services.health`); 0: off."""
    external_metrics: metrics_api.ExternalMetricsSettings | None = None
    """Serve `external.metrics.k8s.io` for the hub's HPAs so (`services.metrics_api`); None: not served."""
    leader_stall_grace_seconds: float = stall.GRACE_SECONDS
    """Under leader election, a leader whose hub-events or timer loop has not turned for the
    watchdog's limit plus this long gives its Lease up (`model.stall`, `coordinator.leading`)."""


def hub_client(kubeconfig: pathlib.Path | None, *, context: str | None = None) -> client.ApiClient:
    """An ApiClient for the hub (`federation.kube.clients`: `kubeconfig`, else KUBECONFIG, else the
    pod's service account, as when deploy/coordinator runs it in the hub); CoordinatorError saying
    what failed."""
    try:
        return clients.api_client(kubeconfig, context=context)
    except clients.KubeUnavailable as error:
        if error.in_cluster:
            raise CoordinatorError(
                f"no --hub-kubeconfig given and no in-cluster service account to use instead "
                f"({error.reason}); outside a pod of the hub, give --hub-kubeconfig FILE") from error
        raise CoordinatorError(f"hub {error.source}: {error.reason}") from error


def placement_backend(settings: CoordinatorConfig) -> backends.PlacementBackend:
    """Ray shards (local Ray, or the cluster at `ray_address`), or in-process with `use_ray=False`;
    CoordinatorError with one line when Ray cannot be started or joined (within
    `ray_join_seconds` for an address)."""
    if not settings.use_ray:
        return backends.LocalBackend()
    where = settings.ray_address or "a local Ray"
    log.info("starting placement shards", extra={"ray": where, "spread_shards": settings.spread_shards,
                                                 "cluster_shards": settings.cluster_shards})
    join_timeout = None
    if settings.ray_address:
        started = time.monotonic()
        try:
            ray_join.check(settings.ray_address,
                           timeout=min(RAY_PROBE_SECONDS, settings.ray_join_seconds))
        except ray_join.RayJoinError as error:
            raise CoordinatorError(str(error)) from error
        join_timeout = max(1.0, settings.ray_join_seconds - (time.monotonic() - started))
    try:
        return shards.RayBackend(
            shards=settings.spread_shards, cluster_shards=settings.cluster_shards,
            address=settings.ray_address, init_options={"log_to_driver": False},
            join_timeout=join_timeout, parallel_from=settings.ray_round_min_spreads)
    except ray_deadline.RayJoinTimeout as error:
        raise CoordinatorError(
            f"Ray at {where} answered, but joining it did not finish within "
            f"{settings.ray_join_seconds:g} s: a GCS address (HOST:6379) can be joined only from a "
            "machine that runs a Ray node, elsewhere use Ray Client (ray://HEAD:10001); "
            "--ray-join-seconds allows longer; without --ray-address it places in this process") from error
    except Exception as error:  # Ray raises ConnectionError, RuntimeError, ValueError... all "cannot start"
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        if "authentication" in first.lower():
            first += " (deploy/README.md, 'Ray token authentication')"
        raise CoordinatorError(f"cannot start Ray placement shards on {where}: {first[:240]}") from error


def server_credentials(tls: transport.TLSFiles | None) -> grpc.ServerCredentials | None:
    """mTLS credentials from the files (None for plaintext); CoordinatorError naming a bad file."""
    if tls is None:
        return None
    try:
        return transport.server_credentials(tls)
    except store.CertFileError as error:
        raise CoordinatorError(f"TLS: {error}") from None


def probe_hub(api: client.ApiClient) -> None:
    """One cheap list, so an unreachable hub or missing CRDs fail at startup with a clear line."""
    host = api.configuration.host
    try:
        with kube_errors.translated():
            client.CustomObjectsApi(api).list_cluster_custom_object(
                common.API_GROUP, common.API_VERSION, spread_api.PLURAL, limit=1,
                _request_timeout=PROBE_TIMEOUT)
    except kube_errors.NotFound as error:
        raise CoordinatorError(f"hub {host} has no FederatedSpread CRD; install crds/ "
                               "(`fedspread crds` then `kubectl apply -f crds/`)") from error
    except (kube_errors.Unreachable, kube_errors.Timeout) as error:
        raise CoordinatorError(f"hub {host} unreachable: {error.reason}") from error
    except kube_errors.KubeError as error:
        raise CoordinatorError(f"hub {host} refused: {error.status} {error.reason}") from error


def webhook_server(coordinator: facade.Coordinator, settings: admission.WebhookSettings, *,
                   hub_synced: Callable[[], bool],
                   served: Callable[[], Collection[str] | None]) -> webhook_https.WebhookServer:
    """The hub's validating webhook, started (`hub.admission`); CoordinatorError naming what failed."""
    try:
        door = admission.SpecAdmission(coordinator, hub_synced=hub_synced, served=served)
        return admission.server(door, settings).start()
    except OSError as error:  # ssl.SSLError too: a certificate that does not load
        files = str(settings.cert_file)
        if settings.client_auth is not None:
            files += f" (client CA {settings.client_auth.ca_file})"
        raise CoordinatorError(f"cannot serve the webhook on port {settings.port} with "
                               f"{files}: {error}") from error


def external_metrics_server(
    coordinator: facade.Coordinator, api: client.ApiClient, settings: metrics_api.ExternalMetricsSettings,
    *, on_answer: Callable[[int], None] = lambda _code: None,
) -> metrics_api.ExternalMetricsServer:
    """The hub HPAs' `external.metrics.k8s.io` server, started: answers from `coordinator.usage`,
    trusts the hub's front proxy (`kube-system/extension-apiserver-authentication`: a hub without
    one gets 401s, never a coordinator that does not start) and asks the hub's RBAC
    (SubjectAccessReviews). CoordinatorError when the certificate or port cannot be used."""
    trust = front_proxy.FrontProxyTrust(front_proxy.configmap_reader(api))  # unread: 401s, read again
    authorizer = access_review.SubjectAccessReviewer(api, ttl=metrics_api.SAR_TTL_SECONDS, capacity=1024)
    handler = metrics_api.Handler(coordinator, trust=trust, authorizer=authorizer, on_answer=on_answer)
    try:
        return metrics_api.ExternalMetricsServer(handler, settings).start()
    except OSError as error:  # ssl.SSLError too: a certificate that does not load; the port in use
        trust.close()
        raise CoordinatorError(f"cannot serve the external metrics API on port {settings.port} with "
                               f"{settings.cert_file}: {error}") from error
