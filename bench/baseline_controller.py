"""The controller half of Kruise's WorkloadSpread design, run as a process of its own (`baseline_webhook`).

Why it is part of the baseline: in Kruise's design the webhook only decrements quotas; Kruise's
`syncWorkloadSpread` gives them back and keeps pods' deletion costs, writing the same spread
object the webhook writes, so its writes compete with the webhook's during a burst. On every
change of the spread's pods `StatusController` first patches each pod's deletion cost where it
differs (100 x (subsets - index) within the subset's cap, -100 beyond it), then
recounts the pods per subset, drops `creatingPods` entries of pods it has seen (or older than
30 s), recomputes `missingReplicas`, and writes the status from its informer copy under its
mutex, caching what it stored there (`writeWorkloadSpreadStatus`); a 409 requeues it with 5 ms
doubling backoff. These per-pod cost PATCHes are the baseline's own: fedspread's agent admits a
pod into a subset with its in-quota deletion cost already set, and patches none for it. Rescheduling
is left out (no pod waits here).
"""

from __future__ import annotations

import collections
import datetime
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bench import baseline_admission, baseline_resource, rawkube, webhook_samples
from federation.api import names

LOG = logging.getLogger(__name__)

CREATING_TIMEOUT = datetime.timedelta(seconds=30)
DELETING_TIMEOUT = datetime.timedelta(seconds=15)
"""Kruise's CreatPodTimeout and DeletePodTimeout."""
CONTROLLER_BACKOFF, CONTROLLER_BACKOFF_MAX = 0.005, 1.0
"""controller-runtime's per-item exponential rate limiter (5 ms, doubling)."""
CONTROLLER_CONFLICTS = "controller_conflicts"
COST_STEP, COST_NEGATIVE = 100, -100
REPATCH_AFTER = 10.0
"""Seconds in which a cost just patched is not patched again while the informer catches up."""

Json = dict[str, Any]


def desired_statuses(obj: Mapping[str, Any], pods: Iterable[baseline_resource.PodState],
                     now: datetime.datetime) -> list[Json]:
    """Each subset's status recounted from the pods seen (Kruise's calculateWorkloadSpreadSubsetStatus)."""
    old = {str(s["name"]): s for s in baseline_resource.subset_statuses(obj)}
    by_subset: dict[str | None, list[baseline_resource.PodState]] = collections.defaultdict(list)
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
            if since is not None and now - baseline_resource.parse_stamp(since) <= DELETING_TIMEOUT:
                deleting[pod.name] = since
                if missing < maximum:
                    missing += 1
        kept = {}
        for pod_name, since in creating.items():
            if now - baseline_resource.parse_stamp(since) <= CREATING_TIMEOUT:
                kept[pod_name] = since
                if missing > 0:
                    missing -= 1
        result.append({"name": name, "missingReplicas": missing, "replicas": active,
                       "creatingPods": kept, "deletingPods": deleting})
    return result


def desired_costs(obj: Mapping[str, Any], pods: Iterable[baseline_resource.PodState]) -> dict[str, str]:
    """Each active pod's deletion cost: 100 x (subsets - index) for the oldest `maxReplicas` pods of
    a subset, -100 for the rest and for pods of no subset (Kruise's syncSubsetPodDeletionCost)."""
    subsets = obj["spec"]["subsets"]
    by_subset: dict[str | None, list[baseline_resource.PodState]] = collections.defaultdict(list)
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

    def __init__(self, api: rawkube.RawApi, informer: baseline_resource.Informer,
                 leader: baseline_admission.WebhookReplica,
                 recorder: webhook_samples.Recorder) -> None:
        self._api = api
        self._informer = informer
        self._leader = leader
        self._recorder = recorder
        self._patched: dict[str, tuple[str, float]] = {}
        self.writes = 0
        self.cost_patches = 0

    def _sync_costs(
        self, namespace: str, pods: Sequence[baseline_resource.PodState], costs: Mapping[str, str]
    ) -> None:
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
                annotations = {names.DELETION_COST_ANNOTATION: cost}
                self._api.merge_patch(f"/api/v1/namespaces/{namespace}/pods/{pod.name}",
                                      {"metadata": {"annotations": annotations}})
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
        if statuses == baseline_resource.subset_statuses(obj):
            return False
        body = {**obj, "status": {**(obj.get("status") or {}), "subsetStatuses": statuses}}
        with self._leader.lock(key):
            stored: Json = self._api.put(baseline_resource.object_path(namespace, name, status=True), body)
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
