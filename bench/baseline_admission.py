"""Kruise's admission decision, as the baseline webhook makes it.

Why replicas with their own mutex and cache: kruise-manager runs 2 replicas by default and every
replica serves the webhook behind a Service, each with its own per-spread mutex and its own cache
of each spread's latest copy — the reason Kruise keeps the optimistic lock. `WebhookReplica`
is one replica's state; `SeedBook` gives each apiserver connection (a server thread) to one of
them, round-robin, as kube-proxy spreads connections over pods.

Pod CREATE: under the spread's mutex, take the newer of the replica's cached copy and the
informer's copy; choose the first subset with `missingReplicas` > 0 or -1; decrement it, record
the pod in `creatingPods`, and PUT the status with the object's resourceVersion (optimistic
lock). Success: cache the stored object, inject the subset. 409: GET the object from the
apiserver and retry, as client-go's `RetryOnConflict(DefaultBackoff)` does — 4 attempts, 10 ms
then x5 backoff with 10 % jitter, the mutex released while waiting. Retries exhausted: the pod is
denied (`SeedHandler`; Kruise answers `admission.Errored`, its pod webhook is `failurePolicy: Fail`).
"""

from __future__ import annotations

import datetime
import itertools
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from agents import bookkeeping, metrics
from agents.webhook import handler, review
from bench import baseline_resource, rawkube, webhook_samples
from federation.api import names
from federation.rpc import assignment

BACKOFF_SECONDS, BACKOFF_FACTOR, BACKOFF_JITTER, BACKOFF_STEPS = 0.01, 5.0, 0.1, 4
"""client-go's retry.DefaultBackoff, which Kruise's webhook retries conflicts with."""
CONFLICTS = "conflicts"
DENIED = "denied"

Json = dict[str, Any]


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
    statuses = [dict(s) for s in baseline_resource.subset_statuses(obj)]
    chosen = statuses[index]
    chosen["creatingPods"] = {**(chosen.get("creatingPods") or {}), pod: baseline_resource.stamp(now)}
    if int(chosen.get("missingReplicas", 0)) > 0:
        chosen["missingReplicas"] = int(chosen["missingReplicas"]) - 1
    return {**obj, "status": {**(obj.get("status") or {}), "subsetStatuses": statuses}}


class WebhookReplica:
    """One webhook replica's state: a mutex per spread and its cache of each spread's latest copy."""

    def __init__(
        self, api: rawkube.RawApi, informer: baseline_resource.Informer, recorder: webhook_samples.Recorder
    ) -> None:
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
                fetched: Json = self._api.get(baseline_resource.object_path(namespace, name))
            except rawkube.RawError as error:
                if error.status == 404:
                    return None
                raise
            return fetched
        cached, informed = self._cache.get(key), self._informer.spread(key)
        version = baseline_resource.resource_version
        if cached is None or (informed is not None and version(cached) < version(informed)):
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
                statuses = baseline_resource.subset_statuses(current)
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
                    path = baseline_resource.object_path(namespace, name, status=True)
                    stored: Json = self._api.put(path, body)
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
    """The handler's bookkeeping with Kruise's decision: the quota lives in the spread's status."""

    def __init__(self, informer: baseline_resource.Informer, replicas: Sequence[WebhookReplica]) -> None:
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
        name = (labels or {}).get(names.SPREAD_LABEL)
        return self._table(assignment.spread_key(namespace, name)) if name else None

    def admit(self, spread: str, pod_name: str, *, revision: str, dry_run: bool = False
              ) -> assignment.SubsetRule | None:
        """Kruise's decision for a new pod, through this connection's replica."""
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
