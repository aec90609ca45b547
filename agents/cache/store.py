"""A watch-fed cache of the member cluster's nodes, pods and fedspread workloads, kept compact.

Why a cache: the controller recounts every spread's pods each second, the inventory reporter folds
every node and bound pod into pools, and workload sync compares every Deployment it owns with its
assignment. Asking the apiserver each time would cost a list of 20,000 pods per second on a big
cluster; a list-then-watch per resource (client-go's reflector) costs one stream.

Why compact: a Pod object is a few kilobytes of JSON, a `V1Pod` model many times that. The cache
keeps, per object, only what its readers use, converted once when the event arrives (by
`agents.cache.views`):

* nodes — `inventory.NodeView` (labels, taints, allocatable, cordon, Ready);
* pods bound to a node and not finished — `inventory.PodUsage` (node, effective requests computed
  once per pod with `fit.shape_from_pod_spec`; identical request sets are shared);
* pods labelled `fedspread.io/spread` — `SpreadPod` (a `pod_ledger.PodRecord` and what deletion
  cost needs besides), indexed by spread (all phases, bound or not: Pending pods matter here);
* Deployments labelled `fedspread.io/spread` — `WorkloadView` (replicas, fedspread annotations,
  status counters);
* ReplicaSets labelled `fedspread.io/spread` (a Deployment's ReplicaSets carry its pod template's
  labels) — `ReplicaSetView` (uid and controlling Deployment), indexed by that Deployment: with
  each pod's controller uid, the link of the owner chain Pod → ReplicaSet → Deployment that
  decides whose pod it is (`agents.owners`), at the cost of a few objects per spread. A ReplicaSet
  no Deployment controls is a spread's member workload of its own (a spread of a hub
  ReplicaSet): its view carries a `WorkloadView` too, read by `member_workload`;
* StatefulSets labelled `fedspread.io/spread` — `WorkloadView`: a spread's member StatefulSet
  (its pods' controller itself);
* Jobs labelled `fedspread.io/spread` (when the agent has a batch client) — `WorkloadView` with
  `spec.parallelism` as its quantity and the Job's status (`views.job_view`): a spread's member
  Job (its pods' controller itself).

Each object is stored under the reflector's own key string (`emit_keyed`), shared with the
reflector's version map rather than copied: on the inventory benchmark's member (100,000 pods) a
second copy of every key was ~11 MB.

Responses are read as raw JSON (`_preload_content=False`): building client models for every pod on
every event is what makes the generated client slow, not the network.

Readers wait on `wait_for_change` (a change counter under a condition variable) instead of polling
blindly. The streams themselves live in `federation.kube.reflector`, which delivers lists and
watch events alike as ADDED/MODIFIED/DELETED changes.
"""

from __future__ import annotations

import dataclasses
import fractions
import functools
import itertools
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from agents.cache import heap, views
from federation.api import names
from federation.core import inventory
from federation.kube import reflector

LOG = logging.getLogger(__name__)

Json = dict[str, Any]
V = TypeVar("V")
Requests = Mapping[str, fractions.Fraction]

NODES, USAGE, SPREAD_PODS, DEPLOYMENTS = "nodes", "usage", "spread-pods", "deployments"
REPLICASETS, STATEFULSETS, JOBS = "replicasets", "statefulsets", "jobs"
AUTOSCALERS = "autoscalers"
"""The member's HorizontalPodAutoscalers (autoscaling/v1), by the workload they scale. Not part of
`synced`: an agent whose rights do not cover them (an older manifest) counts and admits as before;
it just cannot see, and so cannot leave alone, a member HPA (`agents.controller.workload`)."""
WORKLOAD_KINDS = (DEPLOYMENTS, REPLICASETS, STATEFULSETS, JOBS)
"""The cached resources member workloads are read from (`member_workload`, `workloads`)."""
BOUND_ACTIVE_PODS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
"""The pods that take node resources, as kube-scheduler counts them."""
PAGE_SIZE = 250
"""Objects per list page. Half client-go's 500: a page's JSON (a pod is 3-4 KB, a node 7 KB) is
parsed whole and lives until its objects are converted, with four resources listing at once, so
smaller pages keep the agent's peak and what the allocator retains afterwards smaller (on the
inventory benchmark's member 154-157 MB at the peak rather than 169-175, and about 8 MB less
resident once trimmed) at the cost of twice as many list requests (400 for 100,000 pods)."""
MAX_INTERNED = 10_000
"""Distinct request sets shared between pods (a workload's pods all request the same)."""


@dataclasses.dataclass(frozen=True, slots=True)
class CachedUsage(inventory.PodUsage):
    """A bound pod's usage as the cache keeps it: with the pod's uid, compacted (`views.compact_uid`),
    so a pod replaced under the same name has its requests computed anew. One slotted object per
    bound pod, not a (uid, usage) pair: 100,000 pods on a big member."""

    uid: int | str = ""
    containers: Requests = dataclasses.field(default_factory=dict)
    """The pod's containers' requests summed (`pod_usage.container_requests`), what a utilization
    divides by (the HPA's own rule: init containers and overhead left out)."""


class _Store(Generic[V]):
    """Compact values by object key, optionally indexed; guarded by the cache's lock.

    Each index group carries a version, unique across the store's life, that changes whenever a
    member of the group does: readers can skip work for groups that did not change.
    """

    def __init__(self, convert: Callable[[Json, V | None], V | None],
                 index: Callable[[V], str] | None = None) -> None:
        self.convert = convert
        self.index = index
        self.items: dict[str, V] = {}
        self.by_index: dict[str, dict[str, V]] = {}
        self.group_versions: dict[str, int] = {}
        self._counter = itertools.count(1)

    def put(self, key: str, value: V | None) -> None:
        """Store `value` under `key` (None: remove it). A replaced entry keeps its key string (the
        reflector's own, shared with its version map) rather than taking the caller's copy."""
        old = self.items.get(key)
        if value is None:
            self.items.pop(key, None)
        else:
            self.items[key] = value
        if self.index is None:
            return
        before = None if old is None else self.index(old)
        after = None if value is None else self.index(value)
        if before is not None and before != after:
            group = self.by_index.get(before, {})
            group.pop(key, None)
            if group:
                self.group_versions[before] = next(self._counter)
            else:
                self.by_index.pop(before, None)
                self.group_versions.pop(before, None)
        if value is not None and after is not None:
            self.by_index.setdefault(after, {})[key] = value
            self.group_versions[after] = next(self._counter)


class Cache:
    """Nodes, pods, fedspread Deployments, ReplicaSets, StatefulSets and Jobs of one member cluster,
    fed by seven watches (six without a batch client)."""

    def __init__(self, core_api: Any, apps_api: Any, *, batch_api: Any = None, autoscaling_api: Any = None,
                 watch_seconds: int = 300, page_size: int = PAGE_SIZE) -> None:
        """`batch_api` (BatchV1Api): Jobs are watched too; `autoscaling_api` (AutoscalingV1Api):
        HorizontalPodAutoscalers too; without them (a test's cache) none are."""
        self._cond = threading.Condition()
        self._changes = 0
        self._versions = {NODES: 0, USAGE: 0, SPREAD_PODS: 0, DEPLOYMENTS: 0, REPLICASETS: 0,
                          STATEFULSETS: 0, JOBS: 0, AUTOSCALERS: 0}
        self._interned: dict[tuple[tuple[str, fractions.Fraction], ...], Requests] = {}
        self._stores: dict[str, _Store[Any]] = {
            NODES: _Store[inventory.NodeView](lambda obj, _: views.node_view(obj)),
            USAGE: _Store[CachedUsage](self._usage),
            SPREAD_PODS: _Store[views.SpreadPod](lambda obj, _: views.spread_pod(obj),
                                                 index=lambda p: p.spread),
            DEPLOYMENTS: _Store[views.WorkloadView](lambda obj, _: views.workload_view(obj)),
            REPLICASETS: _Store[views.ReplicaSetView](lambda obj, _: views.replicaset_view(obj),
                                                      index=lambda r: r.owner),
            STATEFULSETS: _Store[views.WorkloadView](lambda obj, _: views.workload_view(obj)),
            JOBS: _Store[views.WorkloadView](lambda obj, _: views.job_view(obj)),
            AUTOSCALERS: _Store[views.AutoscalerView](lambda obj, _: views.autoscaler_view(obj),
                                                      index=lambda h: h.target),
        }
        self._stop = threading.Event()

        def watch(kind: str, lister: Callable[..., Any], *, label_selector: str | None = None,
                  field_selector: str | None = None) -> reflector.Reflector:
            return reflector.Reflector(kind, lister, emit_keyed=functools.partial(self._apply, kind),
                                       stop=self._stop, watch_seconds=watch_seconds, page_size=page_size,
                                       label_selector=label_selector, field_selector=field_selector)

        spread = names.SPREAD_LABEL
        self._reflectors = [
            watch(NODES, core_api.list_node),
            watch(USAGE, core_api.list_pod_for_all_namespaces, field_selector=BOUND_ACTIVE_PODS),
            watch(SPREAD_PODS, core_api.list_pod_for_all_namespaces, label_selector=spread),
            watch(DEPLOYMENTS, apps_api.list_deployment_for_all_namespaces, label_selector=spread),
            watch(REPLICASETS, apps_api.list_replica_set_for_all_namespaces, label_selector=spread),
            watch(STATEFULSETS, apps_api.list_stateful_set_for_all_namespaces, label_selector=spread),
        ]
        if batch_api is not None:
            self._reflectors.append(watch(JOBS, batch_api.list_job_for_all_namespaces, label_selector=spread))
        if autoscaling_api is not None:
            self._reflectors.append(watch(
                AUTOSCALERS, autoscaling_api.list_horizontal_pod_autoscaler_for_all_namespaces))
        self._threads: list[threading.Thread] = []

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start one list+watch thread per resource."""
        for item in self._reflectors:
            thread = threading.Thread(target=item.run, name=f"cache-{item.kind}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every watch (their connections are cut) and wait for the threads."""
        self._stop.set()
        for item in self._reflectors:
            item.close()
        for thread in self._threads:
            thread.join(timeout)
        with self._cond:
            self._cond.notify_all()

    def wait_synced(self, timeout: float, *, kinds: tuple[str, ...] = ()) -> bool:
        """True once every resource (or each of `kinds`) has been listed once; False after `timeout`
        seconds."""
        chosen = [r for r in self._reflectors if r.kind in kinds or (not kinds and r.kind != AUTOSCALERS)]
        with self._cond:
            return self._cond.wait_for(lambda: all(r.synced.is_set() for r in chosen), timeout)

    @property
    def synced(self) -> bool:
        """Every resource has been listed at least once."""
        return all(r.synced.is_set() for r in self._reflectors if r.kind != AUTOSCALERS)

    # --- change notification ----------------------------------------------------------------------

    def version(self, *kinds: str) -> int:
        """A number that grows whenever one of `kinds` (all kinds if none) changes."""
        with self._cond:
            return self._current(kinds)

    def wait_for_change(self, since: int, *, timeout: float, kinds: tuple[str, ...] = ()) -> int:
        """Wait until `version(*kinds)` differs from `since` (or `timeout`, or stop); return it."""
        with self._cond:
            def changed() -> bool:
                return self._current(kinds) != since or self._stop.is_set()

            self._cond.wait_for(changed, timeout)
            return self._current(kinds)

    def _current(self, kinds: tuple[str, ...]) -> int:
        return sum(self._versions[k] for k in kinds) if kinds else self._changes

    # --- readers ----------------------------------------------------------------------------------

    def spread_pods(self, spread: str) -> list[views.SpreadPod]:
        """The pods of spread key `spread`."""
        with self._cond:
            return list(self._stores[SPREAD_PODS].by_index.get(spread, {}).values())

    def spread_snapshot(self, spread: str) -> tuple[int, list[views.SpreadPod]]:
        """(version, pods) of `spread`; the version changes whenever one of its pods does."""
        with self._cond:
            store = self._stores[SPREAD_PODS]
            return store.group_versions.get(spread, 0), list(store.by_index.get(spread, {}).values())

    def spreads(self) -> list[str]:
        """Spread keys that have pods in this cluster."""
        with self._cond:
            return list(self._stores[SPREAD_PODS].by_index)

    def nodes(self) -> list[inventory.NodeView]:
        """Every node."""
        with self._cond:
            return list(self._stores[NODES].items.values())

    def usage(self) -> list[inventory.PodUsage]:
        """What every bound, unfinished pod takes from its node."""
        with self._cond:
            return list(self._stores[USAGE].items.values())

    def deployments(self) -> list[views.WorkloadView]:
        """Every Deployment labelled fedspread.io/spread."""
        with self._cond:
            return list(self._stores[DEPLOYMENTS].items.values())

    def deployment(self, namespace: str, name: str) -> views.WorkloadView | None:
        """One Deployment labelled fedspread.io/spread, if cached."""
        with self._cond:
            value: views.WorkloadView | None = self._stores[DEPLOYMENTS].items.get(f"{namespace}/{name}")
            return value

    def replicaset(self, namespace: str, name: str) -> views.ReplicaSetView | None:
        """One ReplicaSet labelled fedspread.io/spread, if cached."""
        with self._cond:
            value: views.ReplicaSetView | None = self._stores[REPLICASETS].items.get(f"{namespace}/{name}")
            return value

    def member_workload(self, kind: str, namespace: str, name: str) -> views.WorkloadView | None:
        """The cached member workload of `kind` (`targetRef.kind`: Deployment, ReplicaSet,
        StatefulSet or Job) of that name labelled fedspread.io/spread; None when not cached (or a
        ReplicaSet a Deployment controls, or a kind not cached)."""
        if kind == "Deployment":
            return self.deployment(namespace, name)
        if kind == "ReplicaSet":
            found = self.replicaset(namespace, name)
            return found.workload if found is not None else None
        if kind in ("StatefulSet", "Job"):
            with self._cond:
                value: views.WorkloadView | None = self._stores[
                    STATEFULSETS if kind == "StatefulSet" else JOBS].items.get(f"{namespace}/{name}")
                return value
        return None

    def workloads(self) -> list[views.WorkloadView]:
        """Every member workload labelled fedspread.io/spread: the Deployments, the ReplicaSets no
        Deployment controls, the StatefulSets, the Jobs."""
        with self._cond:
            standalone = [r.workload for r in self._stores[REPLICASETS].by_index.get("", {}).values()
                          if r.workload is not None]
            return [*self._stores[DEPLOYMENTS].items.values(), *standalone,
                    *self._stores[STATEFULSETS].items.values(), *self._stores[JOBS].items.values()]

    def autoscalers(self, kind: str, namespace: str, name: str) -> tuple[str, ...]:
        """The HorizontalPodAutoscalers ("namespace/name", sorted) whose scaleTargetRef is the
        workload `kind` `namespace/name`."""
        with self._cond:
            group = self._stores[AUTOSCALERS].by_index.get(views.autoscaler_target(kind, namespace, name), {})
            return tuple(sorted(group))

    def pod_requests(self, namespace: str, name: str) -> Requests | None:
        """Bound pod `namespace/name`'s containers' requests summed; None when not cached."""
        with self._cond:
            found: CachedUsage | None = self._stores[USAGE].items.get(f"{namespace}/{name}")
            return found.containers if found is not None else None

    def replicasets_of(self, deployment_uid: str) -> frozenset[int | str]:
        """The uids (`views.compact_uid`, as pods carry their controller's) of the cached
        ReplicaSets that Deployment `deployment_uid` controls."""
        if not deployment_uid:
            return frozenset()
        with self._cond:
            group = self._stores[REPLICASETS].by_index.get(deployment_uid, {})
            return frozenset(views.compact_uid(r.uid) for r in group.values())

    def revisions_of(self, deployment_uid: str) -> tuple[str, ...]:
        """The pod-template-hashes of the cached ReplicaSets that Deployment `deployment_uid`
        controls, newest first (by their `deployment.kubernetes.io/revision`)."""
        if not deployment_uid:
            return ()
        with self._cond:
            group = list(self._stores[REPLICASETS].by_index.get(deployment_uid, {}).values())
        ranked = sorted((r for r in group if r.template_hash), key=lambda r: (-r.revision, r.template_hash))
        return tuple(dict.fromkeys(r.template_hash for r in ranked))

    # --- writers (reflector threads) ---------------------------------------------------------------

    def _usage(self, pod: Json, previous: CachedUsage | None) -> CachedUsage | None:
        """The pod's usage; its requests are computed once, not on each of its status updates."""
        uid = views.compact_uid(str((pod.get("metadata") or {}).get("uid") or ""))
        node = sys.intern(str((pod.get("spec") or {}).get("nodeName") or ""))  # one copy per node
        if previous is not None and previous.uid == uid and previous.node_name == node:
            return previous
        return CachedUsage(node_name=node, requests=self._shared(views.pod_requests(pod)), uid=uid,
                           containers=self._shared(views.container_requests(pod)))

    def _shared(self, requests: Requests) -> Requests:
        """One dict per distinct request set (a workload's pods all request the same)."""
        key = tuple(sorted(requests.items()))
        shared = self._interned.get(key)
        if shared is None:
            shared = dict(requests)
            if len(self._interned) < MAX_INTERNED:
                self._interned[key] = shared
        return shared

    def _apply(self, kind: str, event: reflector.EventType, key: str, obj: Json) -> None:
        """One change from the `kind` reflector: convert it and store it if its view changed.

        `key` is the reflector's own string for the object (`reflector.key`), so the store and the
        reflector's version map share it."""
        if event == "SYNCED":
            with self._cond:
                self._cond.notify_all()  # wake wait_synced
            heap.release()  # the list's pages are garbage now: give their memory back
            return
        store = self._stores[kind]
        with self._cond:
            previous = store.items.get(key)
        value = None if event == "DELETED" else store.convert(obj, previous)
        if value == previous:  # a heartbeat or a status detail the views do not keep
            return
        with self._cond:
            store.put(key, value)
            self._bump(kind)

    def _bump(self, kind: str) -> None:
        self._versions[kind] += 1
        self._changes += 1
        self._cond.notify_all()
