"""Autoscaling benchmark: from a load change in the members to the hub HPA's new size and its pods Ready.

What a user of a hub HorizontalPodAutoscaler waits for, end to end, on the sandbox:

* the demo's federation of its own (`federation.demo.environment`: real control planes, the hub's
  kube-controller-manager running the HPA controller, the node simulator's metrics API in every
  member, the coordinator serving `external.metrics.k8s.io` through the hub's aggregation layer, a
  real agent per member reporting usage every `USAGE_INTERVAL` seconds);
* one spread over two members of one region with a hub HPA (`fedspread-cpu-utilization`,
  `averageValue: 50`, min `MIN_REPLICAS`), every pod Ready and idle first;
* then, per run, every pod's usage set to 100% of its requests (the pod annotation the sandbox's
  metrics API reads), and polled every 0.1 s: when the hub Deployment's `spec.replicas` changes
  (`scaled_s`: the agents' next usage report, the HPA's next sync, its scale) and when the members
  run that many Ready pods (`ready_s`: placement, delivery, the members' controllers and scheduler,
  the pods' start). Between runs the load is removed and the HPA brought back to its minimum (not
  timed: the downscale stabilization window is a setting).

Both figures are dominated by two periods, stated in the result: the agents' usage interval and the
HPA controller's sync period (`--horizontal-pod-autoscaler-sync-period`; the sandbox's is shorter
than Kubernetes' default 15 s). A percentile is over all runs (with few runs, p99 is the maximum).
"""

from __future__ import annotations

import json
import pathlib
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from kubernetes import client, dynamic

from agents.usage import reporter as usage_reporter
from bench import admission_stats
from federation.api import common, names
from federation.demo import environment, story
from federation.kube import clients
from federation.sandbox import hub_controllers, nodesim

Report = Callable[[str], None]
Json = dict[str, Any]

MEMBERS = ("hpa-a", "hpa-b")
NAMESPACE, NAME = "shop", "web"
MIN_REPLICAS, MAX_REPLICAS = 2, 16
TARGET = 50
"""The HPA's `averageValue` of `fedspread-cpu-utilization`: 50% of requests per replica."""
QUICK_RUNS, FULL_RUNS = 2, 8
POLL_SECONDS = 0.1
TIMEOUT = 300.0
REQUEST_TIMEOUT = 10.0
USAGE_ANNOTATION = "sandbox.fedspread.io/usage"
REQUEST_CPU = "200m"


def members() -> list[environment.MemberPlan]:
    """Two members of region eu, room for every replica (200m each, 4-cpu nodes)."""
    return [environment.MemberPlan.of_groups(name, "eu", [nodesim.NodeGroup(
        prefix=f"{name}-node", count=2, allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
        labels={"topology.kubernetes.io/region": "eu"})]) for name in MEMBERS]


def spread() -> Json:
    return {"apiVersion": f"{common.API_GROUP}/{common.API_VERSION}", "kind": "FederatedSpread",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME},
                     "subsets": [{"name": "eu", "clusterSpread": "Balance",
                                  "clusterSelector": {"matchLabels": {names.REGION_LABEL: "eu"}}}]}}


def deployment() -> Json:
    labels = {"app": NAME}
    container = {"name": "main", "image": "web:1",
                 "resources": {"requests": {"cpu": REQUEST_CPU, "memory": "64Mi"}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
            "spec": {"replicas": MIN_REPLICAS, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def autoscaler() -> Json:
    return {"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME},
                     "minReplicas": MIN_REPLICAS, "maxReplicas": MAX_REPLICAS,
                     "metrics": [{"type": "External", "external": {
                         "metric": {"name": "fedspread-cpu-utilization",
                                    "selector": {"matchLabels": {names.SPREAD_LABEL: NAME}}},
                         "target": {"type": "AverageValue", "averageValue": str(TARGET)}}}]}}


def _pods(api: client.ApiClient) -> list[client.V1Pod]:
    found = client.CoreV1Api(api).list_namespaced_pod(
        NAMESPACE, label_selector=f"{names.SPREAD_LABEL}={NAME}", _request_timeout=REQUEST_TIMEOUT)
    return [p for p in found.items if p.metadata.deletion_timestamp is None]


def _ready(pod: client.V1Pod) -> bool:
    state = pod.status
    return bool(state is not None and state.phase == "Running"
                and any(c.type == "Ready" and c.status == "True" for c in state.conditions or ()))


def _load(apis: dict[str, client.ApiClient], cpu: str) -> int:
    """Every live pod of the spread uses `cpu`; the pods annotated."""
    body = {"metadata": {"annotations": {USAGE_ANNOTATION: json.dumps({"cpu": cpu})}}}
    count = 0
    for api in apis.values():
        for pod in _pods(api):
            client.CoreV1Api(api).patch_namespaced_pod(pod.metadata.name, NAMESPACE, body,
                                                      _request_timeout=REQUEST_TIMEOUT)
            count += 1
    return count


def _wait(what: str, check: Callable[[], bool], *, federation: environment.Federation) -> float:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        failed = federation.failed()
        if failed:
            raise environment.DemoError("a process of the federation stopped:\n" + "\n".join(failed))
        time.sleep(POLL_SECONDS)
    raise TimeoutError(f"{what}: not within {TIMEOUT:.0f} s")


def percentiles(samples: Sequence[float]) -> Json:
    """p99 over every sample (nearest rank, `admission_stats.percentile`) and p50 as the median (the
    mean of the two middle samples for an even count, as every committed run reported it), with the
    count."""
    if not samples:
        return {"n": 0}
    return {"n": len(samples), "p50": round(statistics.median(samples), 2),
            "p99": round(admission_stats.percentile(samples, 99), 2),
            "min": round(min(samples), 2), "max": round(max(samples), 2)}


def measure(runs: int, *, report: Report, directory: pathlib.Path | None = None) -> Json:
    """`runs` load steps on a federation of its own, stopped before this returns."""
    scaled: list[float] = []
    ready: list[float] = []
    with tempfile.TemporaryDirectory(prefix="fedspread-bench-autoscaling-") as temporary:
        where = directory or pathlib.Path(temporary)
        with environment.Federation(where, members=members(), report=report, ray=False) as federation:
            hub = clients.api_client(pathlib.Path(federation.kubeconfig("hub")))
            apis = {name: clients.api_client(pathlib.Path(federation.kubeconfig(name))) for name in MEMBERS}
            apps = client.AppsV1Api(hub)
            story.create_workload(hub, NAMESPACE, spread=spread(), deployment=deployment())
            dynamic.DynamicClient(hub).resources.get(
                api_version="autoscaling/v2beta2", kind="HorizontalPodAutoscaler").create(
                body=autoscaler(), namespace=NAMESPACE)

            def hub_replicas() -> int:
                found: int = apps.read_namespaced_deployment(NAME, NAMESPACE,
                                                             _request_timeout=REQUEST_TIMEOUT).spec.replicas
                return found

            def ready_pods() -> int:
                return sum(_ready(p) for api in apis.values() for p in _pods(api))

            for run in range(runs):
                _wait("idle at the minimum", lambda: hub_replicas() == MIN_REPLICAS
                      and ready_pods() == MIN_REPLICAS, federation=federation)
                before = hub_replicas()
                started = time.monotonic()
                loaded = _load(apis, REQUEST_CPU)  # 100% of requests: the HPA doubles
                changed = _wait("the HPA scales the hub", lambda before=before: hub_replicas() != before,
                                federation=federation)
                wanted = hub_replicas()
                done = _wait("every new replica Ready", lambda wanted=wanted: ready_pods() >= wanted,
                             federation=federation)
                scaled.append(changed - started)
                ready.append(done - started)
                report(f"run {run + 1}/{runs}: {loaded} pods at 100% -> {wanted} replicas after "
                       f"{changed - started:.1f} s, Ready after {done - started:.1f} s")
                _load(apis, "0")
    return {"runs": runs, "min_replicas": MIN_REPLICAS, "target_average_value": TARGET,
            "hpa_sync_period_s": hub_controllers.HPA_SYNC_PERIOD_SECONDS,
            "hpa_downscale_stabilization_s": hub_controllers.HPA_DOWNSCALE_STABILIZATION_SECONDS,
            "usage_interval_s": usage_reporter.DEFAULT_INTERVAL_SECONDS,
            "scaled_s": percentiles(scaled), "ready_s": percentiles(ready),
            "method": "every pod's usage annotation set to 100% of its requests; scaled_s until the hub "
                      "Deployment's spec.replicas changes, ready_s until the members run that many Ready "
                      "pods (polled every 0.1 s); the load removed and the minimum awaited between runs"}


def run(*, quick: bool, report: Callable[[str], None]) -> dict[str, Any]:
    """The runner's entry point (bench/run.py)."""
    return measure(QUICK_RUNS if quick else FULL_RUNS, report=report)
