"""The seed's admission design, as the admission benchmark's baseline (seed 001 §3.1, seed 000).

Why a faithful copy and not a straw man: the benchmark claims that deciding from a local quota
table beats keeping the quota in an API object, so the baseline must be the design as Kruise's
WorkloadSpread ships it, in our language and on our server stack. Only the decision differs from
fedspread's webhook: the same `WebhookServer`, the same `AdmissionHandler` (parse, name generation,
`mutate_pod`, JSONPatch, encode, and the same latency measurement), with a `Bookkeeping` whose
`admit` keeps the quota in the spread object's status instead of in memory:

* The spread is a small custom resource in the member (`WorkloadSpread`, `bench.fedspread.io`), its
  status per subset `missingReplicas` (-1: no cap), `creatingPods` and `deletingPods`.
* Pod CREATE: under a per-spread mutex, take the newer of this replica's cached copy and the
  informer's copy; choose the first subset with `missingReplicas` > 0 or -1; decrement it, record
  the pod in `creatingPods`, and PUT the status with the object's resourceVersion (optimistic
  lock). Success: cache the stored object, inject the subset. 409: GET the object from the
  apiserver and retry, as client-go's `RetryOnConflict(DefaultBackoff)` does — 4 attempts, 10 ms
  then x5 backoff with 10 % jitter, the mutex released while waiting. Retries exhausted: the pod is
  denied (Kruise answers `admission.Errored`; its pod webhook is `failurePolicy: Fail`).
* Replicas: kruise-manager runs 2 by default and every replica serves the webhook behind a Service,
  each with its own mutex and cache — the reason the seed keeps the optimistic lock. The sandbox
  has no Service routing, so one process holds `--replicas` independent replica states and gives
  each apiserver connection (a server thread) to one of them, round-robin, as kube-proxy spreads
  connections over pods.
* The controller half (seed 001 §3.2, Kruise's `syncWorkloadSpread`): on every change of the
  spread's pods it first patches each pod's deletion cost where it differs (100 x (subsets -
  index) within the subset's cap, -100 beyond it, seed 001 §2), then recounts the pods per subset,
  drops `creatingPods` entries of pods it has seen (or older than 30 s), recomputes
  `missingReplicas`, and writes the status from its informer copy under the leader replica's
  mutex, caching what it stored there (`writeWorkloadSpreadStatus`); a 409 requeues it with 5 ms
  doubling backoff. fedspread's agent patches deletion costs too, so both put the same extra
  writes on the apiserver during a burst. Rescheduling is left out (no pod waits here).

Not modelled: Kruise's Deployment-revision handling (the benchmark's pods come from one client,
not a rolling update). `python -m bench.baseline_webhook` serves it until SIGTERM and writes the
handler samples and 409 counts (`webhook_samples`).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import functools
import itertools
import logging
import pathlib
import random
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubernetes import client

from agents import assignment, bookkeeping, metrics
from agents.webhook import handler, review, server
from bench import rawkube, webhook_samples
from federation import logs
from federation.kube import reflector

LOG = logging.getLogger(__name__)

GROUP, VERSION, KIND, PLURAL = "bench.fedspread.io", "v1alpha1", "WorkloadSpread", "workloadspreads"
REPLICAS = 2
"""kruise-manager's default replica count; each replica serves the webhook."""
BACKOFF_SECONDS, BACKOFF_FACTOR, BACKOFF_JITTER, BACKOFF_STEPS = 0.01, 5.0, 0.1, 4
"""client-go's retry.DefaultBackoff, which Kruise's webhook retries conflicts with."""
CREATING_TIMEOUT = datetime.timedelta(seconds=30)
DELETING_TIMEOUT = datetime.timedelta(seconds=15)
"""Kruise's CreatPodTimeout and DeletePodTimeout."""
CONTROLLER_BACKOFF, CONTROLLER_BACKOFF_MAX = 0.005, 1.0
"""controller-runtime's per-item exponential rate limiter (5 ms, doubling)."""
CONFLICTS = "conflicts"
CONTROLLER_CONFLICTS = "controller_conflicts"
DENIED = "denied"
COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
COST_STEP, COST_NEGATIVE = 100, -100
REPATCH_AFTER = 10.0
"""Seconds in which a cost just patched is not patched again while the informer catches up."""

Json = dict[str, Any]


# --- the custom resource ------------------------------------------------------------------------


def crd() -> Json:
    """The CustomResourceDefinition of the baseline's spread object (status as a subresource)."""
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": KIND.lower(), "kind": KIND, "listKind": f"{KIND}List"},
            "versions": [{"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                          "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                              "spec": open_object, "status": open_object}}}}],
        },
    }


def spread_object(namespace: str, name: str, subsets: Sequence[tuple[str, int, Json]]) -> Json:
    """A spread with subsets (name, maxReplicas, requiredNodeSelectorTerm), in spec order."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"subsets": [{"name": subset, "maxReplicas": cap, "requiredNodeSelectorTerm": term}
                             for subset, cap, term in subsets]},
    }


def object_path(namespace: str, name: str | None = None, *, status: bool = False) -> str:
    """The API path of the spreads of `namespace`, of one spread, or of its status."""
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    if name is not None:
        path += f"/{name}"
    return path + "/status" if status else path


def _stamp(moment: datetime.datetime) -> str:
    """metav1.Time's wire form (RFC 3339, seconds)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp)


def _version(obj: Mapping[str, Any]) -> int:
    return int((obj.get("metadata") or {}).get("resourceVersion") or 0)


def _statuses(obj: Mapping[str, Any]) -> list[Json]:
    return list((obj.get("status") or {}).get("subsetStatuses") or [])


# --- the informer (controller-runtime's cache) ---------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PodState:
    """What the controller reads of one pod of a spread."""

    name: str
    spread: str
    subset: str | None
    active: bool
    created: str = ""
    cost: str | None = None


class Informer:
    """The process's watch-fed copies of the spreads and of their pods (one namespace)."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.namespace = namespace
        self._cond = threading.Condition()
        self._spreads: dict[str, Json] = {}
        self._pods: dict[str, PodState] = {}
        self._changes = 0
        self._stop = threading.Event()
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        self._reflectors = [
            reflector.Reflector("spreads", functools.partial(
                custom.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL),
                emit=self._spread_event, stop=self._stop),
            reflector.Reflector("pods", functools.partial(core.list_namespaced_pod, namespace),
                                emit=self._pod_event, stop=self._stop,
                                label_selector=assignment.SPREAD_LABEL),
        ]
        self._threads: list[threading.Thread] = []

    def start(self, *, timeout: float = 60.0) -> None:
        """Start both watches and wait for their first lists."""
        for item in self._reflectors:
            thread = threading.Thread(target=item.run, name=f"informer-{item.kind}", daemon=True)
            thread.start()
            self._threads.append(thread)
        for item in self._reflectors:
            if not item.synced.wait(timeout):
                raise RuntimeError(f"the {item.kind} informer did not sync within {timeout:.0f} s")

    def stop(self) -> None:
        """Stop both watches."""
        self._stop.set()
        for item in self._reflectors:
            item.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _spread_event(self, kind: str, obj: Json) -> None:
        name = reflector.key(obj)
        with self._cond:
            if kind == "DELETED":
                self._spreads.pop(name, None)
            elif kind != "SYNCED":
                self._spreads[name] = obj
            self._changes += 1
            self._cond.notify_all()

    def _pod_event(self, kind: str, obj: Json) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        with self._cond:
            if kind == "DELETED":
                self._pods.pop(name, None)
            elif kind != "SYNCED":
                phase = (obj.get("status") or {}).get("phase")
                annotations = meta.get("annotations") or {}
                self._pods[name] = PodState(
                    name=name, spread=(meta.get("labels") or {}).get(assignment.SPREAD_LABEL, ""),
                    subset=annotations.get(assignment.SUBSET_ANNOTATION),
                    active=meta.get("deletionTimestamp") is None and phase not in ("Succeeded", "Failed"),
                    created=str(meta.get("creationTimestamp") or ""), cost=annotations.get(COST_ANNOTATION))
            self._changes += 1
            self._cond.notify_all()

    def spread(self, key: str) -> Json | None:
        """The informer's copy of spread `namespace/name` (never mutated: objects are replaced)."""
        with self._cond:
            return self._spreads.get(key)

    def spread_keys(self) -> list[str]:
        """Every known spread."""
        with self._cond:
            return list(self._spreads)

    def pods_of(self, spread: str) -> list[PodState]:
        """The known pods labelled with spread name `spread`."""
        with self._cond:
            return [p for p in self._pods.values() if p.spread == spread]

    def wait_for_change(self, seen: int, *, timeout: float) -> int:
        """Block until something changed after change number `seen` (or `timeout`); the current one."""
        with self._cond:
            self._cond.wait_for(lambda: self._changes != seen, timeout=timeout)
            return self._changes


# --- the webhook's decision ------------------------------------------------------------------------


class RetriesExhausted(Exception):
    """Every attempt to record the pod in the spread's status met a conflict."""


def suitable_subset(statuses: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the first subset status with missingReplicas > 0 or -1 (no cap)."""
    for index, status in enumerate(statuses):
        missing = int(status.get("missingReplicas", 0))
        if missing > 0 or missing == -1:
            return index
    return None


def recorded_subset(statuses: Sequence[Mapping[str, Any]], pod: str) -> str | None:
    """The subset whose creatingPods or deletingPods already holds `pod` (a repeated call)."""
    for status in statuses:
        if pod in (status.get("creatingPods") or {}) or pod in (status.get("deletingPods") or {}):
            return str(status["name"])
    return None


def with_creating(obj: Mapping[str, Any], index: int, pod: str, now: datetime.datetime) -> Json:
    """A copy of `obj` whose subset `index` counts `pod` as being created (only the path that
    changes is copied, so that a failed update leaves the cached object as it was)."""
    statuses = [dict(s) for s in _statuses(obj)]
    chosen = statuses[index]
    chosen["creatingPods"] = {**(chosen.get("creatingPods") or {}), pod: _stamp(now)}
    if int(chosen.get("missingReplicas", 0)) > 0:
        chosen["missingReplicas"] = int(chosen["missingReplicas"]) - 1
    return {**obj, "status": {**(obj.get("status") or {}), "subsetStatuses": statuses}}


class WebhookReplica:
    """One webhook replica's state: a mutex per spread and its cache of each spread's latest copy."""

    def __init__(self, api: rawkube.RawApi, informer: Informer, recorder: webhook_samples.Recorder) -> None:
        self._api = api
        self._informer = informer
        self._recorder = recorder
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._cache: dict[str, Json] = {}

    def lock(self, key: str) -> threading.Lock:
        """The mutex of spread `key` in this replica."""
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def remember(self, key: str, stored: Json) -> None:
        """Cache what an update stored (call with the spread's mutex held)."""
        self._cache[key] = stored

    def _latest(self, key: str, *, refresh: bool) -> Json | None:
        """After a conflict, the apiserver's copy; otherwise the newer of the cached and informer copies."""
        namespace, name = key.split("/", 1)
        if refresh:
            try:
                fetched: Json = self._api.get(object_path(namespace, name))
            except rawkube.RawError as error:
                if error.status == 404:
                    return None
                raise
            return fetched
        cached, informed = self._cache.get(key), self._informer.spread(key)
        if cached is None or (informed is not None and _version(cached) < _version(informed)):
            return informed
        return cached

    def acquire(self, key: str, pod: str, *, dry_run: bool) -> str | None:
        """The subset for a new pod of spread `key`, recorded in the spread's status; None when no
        subset has room. RetriesExhausted after four conflicts."""
        refresh, delay = False, BACKOFF_SECONDS
        for attempt in range(BACKOFF_STEPS):
            with self.lock(key):
                current = self._latest(key, refresh=refresh)
                if current is None:
                    return None
                statuses = _statuses(current)
                already = recorded_subset(statuses, pod)
                if already is not None:
                    return already
                index = suitable_subset(statuses)
                if index is None:
                    return None
                chosen = str(statuses[index]["name"])
                if dry_run:
                    return chosen
                namespace, name = key.split("/", 1)
                body = with_creating(current, index, pod, datetime.datetime.now(datetime.UTC))
                try:
                    stored: Json = self._api.put(object_path(namespace, name, status=True), body)
                except rawkube.RawError as error:
                    if error.status != 409:
                        raise
                    refresh = True
                    self._recorder.count(CONFLICTS)
                else:
                    self.remember(key, stored)
                    return chosen
            if attempt + 1 < BACKOFF_STEPS:
                time.sleep(delay * (1 + random.uniform(0, BACKOFF_JITTER)))
                delay *= BACKOFF_FACTOR
        raise RetriesExhausted(f"spread {key}: status update conflicted {BACKOFF_STEPS} times")


def assignment_of(obj: Mapping[str, Any]) -> assignment.Assignment:
    """The spread object's subsets as the handler's rule table (caps as quotas)."""
    meta = obj["metadata"]
    subsets = tuple(
        assignment.SubsetRule(name=s["name"], index=i, quota=int(s.get("maxReplicas") or 0),
                              required_term=s.get("requiredNodeSelectorTerm"))
        for i, s in enumerate(obj["spec"]["subsets"]))
    return assignment.Assignment(
        spread=f"{meta['namespace']}/{meta['name']}", generation=int(meta.get("generation") or 0),
        namespace=meta["namespace"], workload=meta["name"], replicas=sum(r.quota for r in subsets),
        template={}, template_revision="", subsets=subsets, subset_count=len(subsets))


class SeedBook(bookkeeping.Bookkeeping):
    """The handler's bookkeeping with the seed's decision: the quota lives in the spread's status."""

    def __init__(self, informer: Informer, replicas: Sequence[WebhookReplica]) -> None:
        super().__init__()
        self._informer = informer
        self._replicas = list(replicas)
        self._turn = itertools.count()
        self._local = threading.local()
        self._rules: dict[str, tuple[tuple[str, int], assignment.Assignment]] = {}
        self._rules_lock = threading.Lock()

    def replica(self) -> WebhookReplica:
        """The replica serving this connection (one server thread each), chosen round-robin."""
        chosen: WebhookReplica | None = getattr(self._local, "replica", None)
        if chosen is None:
            chosen = self._local.replica = self._replicas[next(self._turn) % len(self._replicas)]
        return chosen

    def _table(self, key: str) -> assignment.Assignment | None:
        obj = self._informer.spread(key)
        if obj is None:
            return None
        meta = obj["metadata"]
        identity = (str(meta.get("uid")), int(meta.get("generation") or 0))
        with self._rules_lock:
            known = self._rules.get(key)
            if known is None or known[0] != identity:
                known = self._rules[key] = (identity, assignment_of(obj))
            return known[1]

    def spread_of(self, namespace: str, labels: Mapping[str, str] | None) -> assignment.Assignment | None:
        """The spread a pod belongs to (by its fedspread.io/spread label), from the informer."""
        name = (labels or {}).get(assignment.SPREAD_LABEL)
        return self._table(assignment.spread_key(namespace, name)) if name else None

    def admit(self, spread: str, pod_name: str, *, revision: str, dry_run: bool = False
              ) -> assignment.SubsetRule | None:
        """The seed's decision for a new pod, through this connection's replica."""
        table = self._table(spread)
        if table is None:
            return None
        subset = self.replica().acquire(spread, pod_name, dry_run=dry_run)
        return table.rule(subset) if subset is not None else None


class SeedHandler(handler.AdmissionHandler):
    """The agent's handler over a SeedBook; a status update that fails denies the pod, as Kruise's
    webhook answers `admission.Errored` (the apiserver then refuses the create)."""

    def __init__(self, book: SeedBook, agent_metrics: metrics.AgentMetrics,
                 recorder: webhook_samples.Recorder) -> None:
        super().__init__(book, agent_metrics)
        self._recorder = recorder

    def handle(self, request: review.Review) -> dict[str, Any]:
        """The answer of the agent's handler, or a denial when the spread's status could not be updated."""
        try:
            return super().handle(request)
        except (RetriesExhausted, rawkube.RawError) as error:
            self._recorder.count(DENIED)
            answer = review.allow(request.uid)
            answer["response"].update(allowed=False, status={"code": 500, "message": str(error)[:300]})
            return answer


# --- the controller's half ----------------------------------------------------------------------


def desired_statuses(obj: Mapping[str, Any], pods: Iterable[PodState],
                     now: datetime.datetime) -> list[Json]:
    """Each subset's status recounted from the pods seen (Kruise's calculateWorkloadSpreadSubsetStatus)."""
    old = {str(s["name"]): s for s in _statuses(obj)}
    by_subset: dict[str | None, list[PodState]] = collections.defaultdict(list)
    for pod in pods:
        by_subset[pod.subset].append(pod)
    result = []
    for subset in obj["spec"]["subsets"]:
        name = str(subset["name"])
        cap = subset.get("maxReplicas")
        maximum = -1 if cap is None else int(cap)
        previous = old.get(name, {})
        creating = dict(previous.get("creatingPods") or {})
        was_deleting = previous.get("deletingPods") or {}
        missing, active, deleting = maximum, 0, {}
        for pod in by_subset.get(name, ()):
            creating.pop(pod.name, None)
            if not pod.active:
                continue
            active += 1
            if missing > 0:
                missing -= 1
            since = was_deleting.get(pod.name)
            if since is not None and now - _parse(since) <= DELETING_TIMEOUT:
                deleting[pod.name] = since
                if missing < maximum:
                    missing += 1
        kept = {}
        for pod_name, since in creating.items():
            if now - _parse(since) <= CREATING_TIMEOUT:
                kept[pod_name] = since
                if missing > 0:
                    missing -= 1
        result.append({"name": name, "missingReplicas": missing, "replicas": active,
                       "creatingPods": kept, "deletingPods": deleting})
    return result


def desired_costs(obj: Mapping[str, Any], pods: Iterable[PodState]) -> dict[str, str]:
    """Each active pod's deletion cost: 100 x (subsets - index) for the oldest `maxReplicas` pods of
    a subset, -100 for the rest and for pods of no subset (Kruise's syncSubsetPodDeletionCost)."""
    subsets = obj["spec"]["subsets"]
    by_subset: dict[str | None, list[PodState]] = collections.defaultdict(list)
    for pod in pods:
        if pod.active:
            by_subset[pod.subset].append(pod)
    costs = {pod.name: str(COST_NEGATIVE) for name, group in by_subset.items()
             if name not in {s["name"] for s in subsets} for pod in group}
    for index, subset in enumerate(subsets):
        group = sorted(by_subset.get(subset["name"], ()), key=lambda p: (p.created, p.name))
        cap = subset.get("maxReplicas")
        keep = len(group) if cap is None else int(cap)
        for rank, pod in enumerate(group):
            costs[pod.name] = str(COST_STEP * (len(subsets) - index) if rank < keep else COST_NEGATIVE)
    return costs


class StatusController:
    """Keeps each spread's pods' deletion costs and its status in step with the pods (leader)."""

    def __init__(self, api: rawkube.RawApi, informer: Informer, leader: WebhookReplica,
                 recorder: webhook_samples.Recorder) -> None:
        self._api = api
        self._informer = informer
        self._leader = leader
        self._recorder = recorder
        self._patched: dict[str, tuple[str, float]] = {}
        self.writes = 0
        self.cost_patches = 0

    def _sync_costs(self, namespace: str, pods: Sequence[PodState], costs: Mapping[str, str]) -> None:
        """Patch the deletion cost of every pod whose annotation differs, one pod at a time."""
        now = time.monotonic()
        for pod in pods:
            cost = costs.get(pod.name)
            if cost is None or pod.cost == cost:
                continue
            done = self._patched.get(pod.name)
            if done is not None and done[0] == cost and now - done[1] < REPATCH_AFTER:
                continue  # patched already; the informer has not caught up
            try:
                self._api.merge_patch(f"/api/v1/namespaces/{namespace}/pods/{pod.name}",
                                      {"metadata": {"annotations": {COST_ANNOTATION: cost}}})
            except rawkube.RawError as error:
                if error.status != 404:
                    raise
                continue
            self._patched[pod.name] = (cost, now)
            self.cost_patches += 1

    def reconcile(self, key: str) -> bool:
        """One reconcile of spread `key` from the informer's copies: deletion costs, then the status;
        True when the status was written. RawError (409 among them) when a write fails."""
        obj = self._informer.spread(key)
        if obj is None:
            return False
        namespace, name = key.split("/", 1)
        pods = self._informer.pods_of(name)
        self._sync_costs(namespace, pods, desired_costs(obj, pods))
        statuses = desired_statuses(obj, pods, datetime.datetime.now(datetime.UTC))
        if statuses == _statuses(obj):
            return False
        body = {**obj, "status": {**(obj.get("status") or {}), "subsetStatuses": statuses}}
        with self._leader.lock(key):
            stored: Json = self._api.put(object_path(namespace, name, status=True), body)
            self._leader.remember(key, stored)
        self.writes += 1
        return True

    def run(self, stop: threading.Event) -> None:
        """Reconcile on every informer change (coalesced), and at least every second (expiry)."""
        failures: dict[str, int] = collections.Counter()
        seen = -1
        while not stop.is_set():
            seen = self._informer.wait_for_change(seen, timeout=1.0)
            for key in self._informer.spread_keys():
                try:
                    self.reconcile(key)
                    failures.pop(key, None)
                except rawkube.RawError as error:
                    failures[key] += 1
                    if error.status == 409:
                        self._recorder.count(CONTROLLER_CONFLICTS)
                    else:
                        LOG.warning("status write of %s failed: %s", key, error)
                    stop.wait(min(CONTROLLER_BACKOFF * 2 ** (failures[key] - 1), CONTROLLER_BACKOFF_MAX))
                except Exception:  # keep reconciling: a broken round must not end the controller
                    LOG.exception("reconcile of %s failed", key)
                    stop.wait(1.0)


# --- the process -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Serve the baseline webhook for one namespace until SIGTERM; write its samples at exit."""
    parser = argparse.ArgumentParser(prog="python -m bench.baseline_webhook", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--cert", required=True, type=pathlib.Path)
    parser.add_argument("--key", required=True, type=pathlib.Path)
    parser.add_argument("--replicas", type=int, default=REPLICAS)
    parser.add_argument("--samples", required=True, type=pathlib.Path)
    parser.add_argument("--ready", required=True, type=pathlib.Path,
                        help="a file to write the port to once serving")
    options = parser.parse_args(argv)
    logs.configure("warning")
    api_client = rawkube.api_client(options.kubeconfig, pool_size=64)
    api = rawkube.RawApi(api_client)
    recorder = webhook_samples.Recorder()
    informer = Informer(api_client, options.namespace)
    informer.start()
    replicas = [WebhookReplica(api, informer, recorder) for _ in range(max(1, options.replicas))]
    admission = SeedHandler(SeedBook(informer, replicas), metrics.AgentMetrics(cluster="baseline"), recorder)
    recorder.attach(admission)
    webhook = server.WebhookServer(admission, host="127.0.0.1", port=0, cert_file=options.cert,
                                   key_file=options.key)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    controller = StatusController(api, informer, replicas[0], recorder)
    thread = threading.Thread(target=controller.run, args=(stop,), name="controller", daemon=True)
    thread.start()
    webhook.start()
    options.ready.write_text(str(webhook.port))
    stop.wait()
    webhook.stop()
    thread.join(timeout=10)
    informer.stop()
    recorder.count("controller_writes", controller.writes)
    recorder.count("controller_cost_patches", controller.cost_patches)
    recorder.write(options.samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
