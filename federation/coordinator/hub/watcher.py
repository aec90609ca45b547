"""Watching the hub: FederatedSpreads, MemberClusters, the workloads spreads target and the objects
pods need, as typed events.

Why: the coordinator's World must follow the hub without missing a change and without a restart
losing anything. Each resource is followed by a `federation.kube.reflector.Reflector`, the one the
agent's cache uses too: listed, then watched from the list's resourceVersion; only `410 Gone`
forces a relist, which reports the objects that vanished meanwhile as DELETED; other errors
(apiserver restart, network) are retried forever with capped, jittered backoff.

Events are emitted under one lock, so a consumer sees them in one order across the streams;
`on_event` should be quick (enqueue). A spread that fails our validation (the CRD schema cannot
express every rule) does not stop the watcher: its event carries the problems, so the coordinator
can report `Valid=False`. Spread events also carry the spread's target workload as last seen,
so `apply_to_world` works whichever of the two the hub reports first.

ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims are followed in every namespace
(the objects a spread's pods need are copied from the hub, `model/hub_objects.py`), and so are
Services, PodDisruptionBudgets, NetworkPolicies, Roles and RoleBindings (`spec.propagate`); a
PodDisruptionBudget at the version the hub's discovery says it serves (`BUDGET_VERSIONS`).
Their events carry the object itself, out of every repr: a Secret is never logged.

One stream per workload kind a spread may target (`WORKLOAD_STREAMS`: Deployments, ReplicaSets,
StatefulSets, Jobs),
each named after its kind in lower case; a workload matches a spread by namespace, kind and name.
The hub runs no workload controller, so its workloads are templates and counts:
no pod runs on the hub (docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal

from kubernetes import client

from federation.api import cluster as cluster_api
from federation.api import common, problems
from federation.api import spread as spread_api
from federation.coordinator.model import lifecycle
from federation.coordinator.model import world as world_model
from federation.coordinator.wire import assignments
from federation.core import workload_kinds
from federation.kube import deadlines, reflector

LOG = logging.getLogger(__name__)

Json = dict[str, Any]
Kind = Literal["spread", "cluster", "deployment", "replicaset", "statefulset", "job", "configmap", "secret",
               "serviceaccount", "persistentvolumeclaim", "service", "poddisruptionbudget", "networkpolicy",
               "role", "rolebinding"]
WORKLOAD_STREAMS: dict[Kind, str] = {"deployment": "Deployment", "replicaset": "ReplicaSet",
                                     "statefulset": "StatefulSet", "job": "Job"}
"""The hub streams of workloads, with the `targetRef.kind` each carries."""
DEPENDENCY_KINDS: dict[Kind, str] = {
    "configmap": "ConfigMap", "secret": "Secret", "serviceaccount": "ServiceAccount",
    "persistentvolumeclaim": "PersistentVolumeClaim",
    "service": "Service", "poddisruptionbudget": "PodDisruptionBudget", "networkpolicy": "NetworkPolicy",
    "role": "Role", "rolebinding": "RoleBinding",
}
"""The hub kinds copied to members (`model.hub_objects`), by event kind: those a pod template may
reference, and those `spec.propagate` may list."""
_API_VERSIONS: dict[Kind, str] = {"networkpolicy": "networking.k8s.io/v1",
                                  "role": "rbac.authorization.k8s.io/v1",
                                  "rolebinding": "rbac.authorization.k8s.io/v1"}
"""The apiVersion of a copied kind's objects where not `v1` (PodDisruptionBudget: the one the hub
serves, `HubWatcher.budget_version`); a listed item carries none, a watch event's does."""
BUDGET_VERSIONS = ("policy/v1", "policy/v1beta1")
"""The PodDisruptionBudget versions followed, preferred first (Kubernetes 1.20 serves v1beta1 only,
1.25 and later v1 only)."""
EventType = reflector.EventType


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    """What the coordinator needs of a MemberCluster."""

    name: str
    labels: dict[str, str]
    taints: tuple[common.Taint, ...]
    decommission: bool = False


@dataclasses.dataclass(frozen=True)
class WorkloadInfo:
    """A hub workload a spread may target: its kind, its `spec.replicas` and the trimmed object (no
    status, stable metadata)."""

    kind: str
    """`targetRef.kind`: Deployment, ReplicaSet, StatefulSet or Job."""
    namespace: str
    name: str
    replicas: int | None
    """The spread quantity: `spec.replicas`, a Job's `spec.parallelism`."""
    template: dict[str, Any]

    @property
    def key(self) -> str:
        """`namespace/name`."""
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True)
class HubEvent:
    """One change seen on the hub; SYNCED (empty key) marks the end of a kind's first list."""

    kind: Kind
    type: EventType
    key: str = ""
    spread: spread_api.FederatedSpread | None = None
    problems: tuple[problems.Problem, ...] = ()
    generation: int | None = None
    cluster: ClusterInfo | None = None
    workload: WorkloadInfo | None = None
    """For a workload stream's events: the workload."""
    target: WorkloadInfo | None = None
    """For spread events: the workload its targetRef names, as last seen (None if not seen)."""
    deletion_policy: str = ""
    """For an invalid spread (`spread` None): its `spec.deletionPolicy` as written ("" if none)."""
    obj: Json | None = dataclasses.field(default=None, repr=False)
    """For a dependency kind (`DEPENDENCY_KINDS`): the object as the hub returned it (None when
    deleted). It may be a Secret: never shown in a repr or a log line."""

    @property
    def valid(self) -> bool:
        """False for an object that failed validation (see `problems`)."""
        return not self.problems


def parse_spread(obj: Json) -> tuple[spread_api.FederatedSpread | None, tuple[problems.Problem, ...]]:
    """The validated spread, or None and every problem with it."""
    try:
        return problems.validate(spread_api.FederatedSpread, obj, what=reflector.key(obj)), ()
    except problems.InvalidInput as error:
        return None, tuple(error.problems)


def parse_cluster(obj: Json) -> tuple[ClusterInfo | None, tuple[problems.Problem, ...]]:
    """Name, labels and taints of a MemberCluster, or None and its problems."""
    try:
        member = problems.validate(cluster_api.MemberCluster, obj, what=reflector.key(obj))
    except problems.InvalidInput as error:
        return None, tuple(error.problems)
    return ClusterInfo(member.metadata.name, dict(member.metadata.labels), tuple(member.spec.taints),
                       decommission=member.spec.decommission), ()


_QUANTITY = {policy.kind: policy.quantity_field for policy in workload_kinds.POLICIES}


def parse_workload(kind: str, obj: Json) -> WorkloadInfo:
    """A hub workload's spread quantity (`replicas`; a Job's `parallelism`) and its trimmed object
    (`kind`: its `targetRef.kind`)."""
    meta = obj.get("metadata") or {}
    replicas = (obj.get("spec") or {}).get(_QUANTITY.get(kind, "replicas"))
    return WorkloadInfo(
        kind=kind, namespace=str(meta.get("namespace")), name=str(meta.get("name")),
        replicas=replicas if isinstance(replicas, int) else None,
        template=assignments.trimmed_template(obj),
    )


class HubWatcher:
    """List-then-watch threads on the hub (one per kind), delivering HubEvents to `on_event`; `on_turn(kind)`
    at every turn of a stream (the coordinator's watchdog heartbeat, `federation.watchdog`)."""

    def __init__(self, api_client: client.ApiClient, on_event: Callable[[HubEvent], None], *,
                 watch_seconds: int = deadlines.WATCH_SECONDS,
                 on_turn: Callable[[str], None] | None = None) -> None:
        custom = client.CustomObjectsApi(api_client)
        apps = client.AppsV1Api(api_client)
        core = client.CoreV1Api(api_client)
        self._on_event = on_event
        self._api_client = api_client
        self._custom = custom
        self._served: frozenset[str] | None = None
        """The hub's group versions (discovery), once asked."""
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._workloads: dict[tuple[str, str], WorkloadInfo] = {}
        """(targetRef kind, `namespace/name`) -> the workload as last seen."""
        self.errors = 0
        """How many times `on_event` raised (logged and survived)."""
        listers: dict[Kind, Callable[..., Any]] = {
            "spread": functools.partial(custom.list_cluster_custom_object, common.API_GROUP,
                                        common.API_VERSION, spread_api.PLURAL),
            "cluster": functools.partial(custom.list_cluster_custom_object, common.API_GROUP,
                                         common.API_VERSION, cluster_api.PLURAL),
            "deployment": apps.list_deployment_for_all_namespaces,
            "replicaset": apps.list_replica_set_for_all_namespaces,
            "statefulset": apps.list_stateful_set_for_all_namespaces,
            "job": client.BatchV1Api(api_client).list_job_for_all_namespaces,
            "configmap": core.list_config_map_for_all_namespaces,
            "secret": core.list_secret_for_all_namespaces,
            "serviceaccount": core.list_service_account_for_all_namespaces,
            "persistentvolumeclaim": core.list_persistent_volume_claim_for_all_namespaces,
            "service": core.list_service_for_all_namespaces,
            "poddisruptionbudget": self._list_budgets,
            "networkpolicy": client.NetworkingV1Api(api_client).list_network_policy_for_all_namespaces,
            "role": client.RbacAuthorizationV1Api(api_client).list_role_for_all_namespaces,
            "rolebinding": client.RbacAuthorizationV1Api(api_client).list_role_binding_for_all_namespaces,
        }
        self.watch_seconds = watch_seconds
        turned = on_turn if on_turn is not None else (lambda _kind: None)
        self._streams = [reflector.Reflector(kind, lister, emit=functools.partial(self._emit, kind),
                                             stop=self._stop, watch_seconds=watch_seconds,
                                             beat=functools.partial(turned, kind))
                         for kind, lister in listers.items()]
        self._threads: list[threading.Thread] = []

    def served_versions(self) -> frozenset[str] | None:
        """The group versions the hub serves (`v1`, `policy/v1beta1`, ...), as its discovery said
        when first asked; None until then or while it cannot be asked."""
        if self._served is None:
            try:
                groups = client.ApisApi(self._api_client).get_api_versions(
                    _request_timeout=deadlines.CALL).groups or []
            except Exception as error:  # the PodDisruptionBudget stream retries; the webhook waits
                LOG.warning("hub discovery failed", extra={"error": type(error).__name__})
                return None
            self._served = frozenset({"v1"} | {v.group_version for g in groups for v in g.versions or []})
        return self._served

    def budget_version(self) -> str | None:
        """The PodDisruptionBudget version followed on the hub: the first of BUDGET_VERSIONS it serves."""
        served = self.served_versions()
        return next((v for v in BUDGET_VERSIONS if v in served), None) if served is not None else None

    def _list_budgets(self, **kwargs: Any) -> Any:
        """List or watch PodDisruptionBudgets at the version the hub serves (the typed client knows
        only policy/v1; the apiserver's path is the same shape as a custom resource's)."""
        version = self.budget_version()
        if version is None:
            raise RuntimeError("the hub's PodDisruptionBudget version is not known yet")
        group, _, number = version.partition("/")
        return self._custom.list_cluster_custom_object(group, number, "poddisruptionbudgets", **kwargs)

    def start(self) -> None:
        """Start the watch threads (daemons)."""
        for stream in self._streams:
            thread = threading.Thread(target=stream.run, name=f"hub-watch-{stream.kind}", daemon=True)
            thread.start()
            self._threads.append(thread)

    @property
    def started(self) -> bool:
        """`start` was called."""
        return bool(self._threads)

    def redirect(self, on_event: Callable[[HubEvent], None], *, first: Iterable[HubEvent] = ()) -> None:
        """From now on deliver to `on_event`, after the events `first` (a warm standby's, handed to
        the coordinator when it leads); no event of the streams comes between."""
        with self._lock:
            for event in first:
                on_event(event)
            self._on_event = on_event

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching: cut the streams and join the threads."""
        self._stop.set()
        for stream in self._streams:
            stream.close()
        for thread in self._threads:
            thread.join(timeout)

    def wait_synced(self, timeout: float) -> bool:
        """Whether every kind finished its first list within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        return all(s.synced.wait(max(0.0, deadline - time.monotonic())) for s in self._streams)

    @property
    def alive(self) -> bool:
        """Every watch thread is running."""
        return bool(self._threads) and all(t.is_alive() for t in self._threads)

    def _emit(self, kind: Kind, type_: EventType, obj: Json) -> None:
        with self._lock:
            event = self._convert(kind, type_, obj)
            try:
                self._on_event(event)
            except Exception:
                self.errors += 1
                LOG.exception("hub event handler failed",
                              extra={"kind": kind, "type": type_, "key": event.key})

    def _convert(self, kind: Kind, type_: EventType, obj: Json) -> HubEvent:
        if type_ == "SYNCED":
            return HubEvent(kind, type_)
        key = reflector.key(obj)
        if kind in DEPENDENCY_KINDS:
            if type_ == "DELETED":
                return HubEvent(kind, type_, key)
            if "apiVersion" not in obj:  # a listed item
                version = self.budget_version() if kind == "poddisruptionbudget" else _API_VERSIONS.get(kind)
                obj = {**obj, "apiVersion": version or "v1"}
            return HubEvent(kind, type_, key, obj=obj)
        if kind in WORKLOAD_STREAMS:
            info = parse_workload(WORKLOAD_STREAMS[kind], obj)
            if type_ == "DELETED":
                self._workloads.pop((info.kind, key), None)
            else:
                self._workloads[(info.kind, key)] = info
            return HubEvent(kind, type_, key, workload=info)
        if type_ == "DELETED":
            return HubEvent(kind, type_, key)
        if kind == "cluster":
            member, found = parse_cluster(obj)
            return HubEvent(kind, type_, key, cluster=member, problems=found)
        item, found = parse_spread(obj)
        generation = (obj.get("metadata") or {}).get("generation")
        ref = lifecycle.in_force(item).spec.target_ref if item is not None else None
        namespace = key.partition("/")[0]
        target = self._workloads.get((ref.kind, f"{namespace}/{ref.name}")) if ref is not None else None
        written = (obj.get("spec") or {}).get("deletionPolicy") if isinstance(obj.get("spec"), dict) else None
        return HubEvent(kind, type_, key, spread=item, problems=found,
                        generation=generation if isinstance(generation, int) else None, target=target,
                        deletion_policy=written if item is None and isinstance(written, str) else "")


def apply_to_world(world: world_model.World, event: HubEvent) -> set[str]:
    """Apply one hub event to the World; the spread keys it affects.

    An invalid spread keeps its last valid version in the World (nothing is torn down because of
    a typo); the coordinator reports the problems in the spread's status instead.
    """
    if event.type == "SYNCED":
        return set()
    if event.kind == "spread":
        return _apply_spread(world, event)
    if event.kind in DEPENDENCY_KINDS:
        return world.hub_object(DEPENDENCY_KINDS[event.kind], event.key, event.obj)
    if event.kind == "cluster":
        if event.type == "DELETED":  # the hub object, not the cluster (`World.delete_cluster`)
            return world.delete_cluster(event.key)
        if event.cluster is None:
            return set()
        return world.upsert_cluster(event.cluster.name, labels=event.cluster.labels,
                                    taints=event.cluster.taints, decommission=event.cluster.decommission)
    info = event.workload
    if info is None:
        return set()
    targeted: set[str] = set()
    for entry in world.spreads_targeting(info.namespace, info.kind, info.name):
        if event.type == "DELETED":
            targeted |= world.set_target(entry.key, replicas=None, template=None)
        else:
            targeted |= world.set_target(entry.key, replicas=info.replicas, template=info.template)
    return targeted


def _apply_spread(world: world_model.World, event: HubEvent) -> set[str]:
    """A spread event, through the target rules of `world.lifecycle`: a live spread's edit that
    changes its targetRef is refused (the last valid spec stays in force), a spread whose target
    another spread holds is refused and not placed, and deleting a holder admits the next one. The
    deletionPolicy of a version not in force (refused or invalid) is noted: deleting the spread
    then deletes its workloads only if that version said Delete too (`Lifecycle.not_in_force`)."""
    claims = world.lifecycle
    affected: set[str] = set()
    if event.type == "DELETED":
        gone = world.spread(event.key)
        affected |= world.delete_spread(event.key)
        successor = claims.release(event.key)
        if successor is not None:
            affected |= world.upsert_spread(successor)
            if gone is not None and (gone.replicas is not None or gone.template is not None):
                affected |= world.set_target(successor.key, replicas=gone.replicas, template=gone.template)
        return affected
    item = event.spread
    if item is None:
        if world.spread(event.key) is not None:
            claims.not_in_force(event.key, deletion_policy=event.deletion_policy)
        return set()
    live = world.spread(event.key)
    if live is not None and live.spec.target_ref != item.spec.target_ref:
        claims.refuse_target_change(item, current=live.spec.target_ref.described)
        return set()
    wanted, item = item, lifecycle.in_force(item) if live is None else item
    verdict = claims.claim(item, placed=world.placements)
    if not verdict.admitted:
        return set()
    if item is not wanted:  # a restart: the target its status records stays in force
        claims.refuse_target_change(wanted, current=item.spec.target_ref.described)
    for displaced in verdict.displaced:
        affected |= world.delete_spread(displaced, deleted=False)  # refused, not deleted
    affected |= world.upsert_spread(item)
    if event.target is not None:
        affected |= world.set_target(event.key, replicas=event.target.replicas,
                                     template=event.target.template)
    return affected
