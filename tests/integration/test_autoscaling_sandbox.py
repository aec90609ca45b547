"""The hub's stock HorizontalPodAutoscaler sizes a spread from the load in every member cluster.

Why on the demo's federation: it is the issue's own scene — hub, dc1 (small, on-premises), aws-eu
and gcp-eu; the coordinator, an agent per member, every part its own process — and the whole path
runs for real: the node simulator's metrics API in each member (a pod's usage is its
`sandbox.fedspread.io/usage` annotation), each agent reading it and reporting usage over gRPC,
the coordinator serving `external.metrics.k8s.io` through the hub apiserver's aggregation layer
(front-proxy certificate checked), the hub's kube-controller-manager running only the HPA controller
(sync period and downscale stabilization shortened by its flags), the HPA scaling the hub
Deployment's `spec.replicas`, the spread dividing the new count. The spread and its HPA are
examples/autoscaling/web.yaml, applied as the example says.

Load is set by annotating pods in the members; nothing sleeps past a period: each step waits for
the state it expects, with a deadline of a few HPA periods.

The other kinds with a scale subresource are sized the same way: the ReplicaSet and StatefulSet
examples (examples/replicaset.yaml, examples/statefulset.yaml) with the example's HPA pointed at
them, side by side in namespaces of their own (one wait for the HPA's periods, not two); the HPA
reads and writes their scale, the spread divides it, and a StatefulSet's eu members give back
their one replica each when the load is gone.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pathlib
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import waiting
import yaml
from demo_scene import (
    Apis,
    Seen,
    clean_up,
    connect,
    delete_quietly,
    hub_call,
    idle,
    observe,
    reached,
    start_clean_up,
)
from kubernetes import dynamic

from federation.api import common, names
from federation.api import spread as spread_api
from federation.core import usage
from federation.demo import environment
from federation.sandbox import build

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "autoscaling" / "web.yaml"
READ = {"Deployment": "read_namespaced_deployment", "ReplicaSet": "read_namespaced_replica_set",
        "StatefulSet": "read_namespaced_stateful_set"}
"""The hub's AppsV1Api call that reads a scale target of each kind."""
USAGE_ANNOTATION = "sandbox.fedspread.io/usage"
SCALE_TIMEOUT = 120.0
"""A few HPA periods of the sandbox (5 s) plus the pods' start, and the downscale stabilization."""


@pytest.fixture(scope="module")
def apis(federation: environment.Federation) -> Iterator[Apis]:
    with connect(federation) as connected:
        yield connected


def _documents(path: pathlib.Path = EXAMPLE) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(path.read_text()) if d}


def _load(apis: Apis, namespace: str, cpu: str, *, spread: str = "web") -> list[str]:
    """Annotate every live pod of the spread in every member to use `cpu`; the pods annotated."""
    done = []
    body = {"metadata": {"annotations": {USAGE_ANNOTATION: json.dumps({"cpu": cpu, "memory": "64Mi"})}}}
    for member in apis.members:
        for pod in apis.core(member).list_namespaced_pod(
                namespace, label_selector=f"{names.SPREAD_LABEL}={spread}").items:
            if pod.metadata.deletion_timestamp is None:
                apis.core(member).patch_namespaced_pod(pod.metadata.name, namespace, body)
                done.append(f"{member}/{pod.metadata.name}")
    return done


def _hub_replicas(apis: Apis, namespace: str, *, kind: str = "Deployment", name: str = "web") -> int:
    replicas: int = getattr(apis.apps("hub"), READ[kind])(name, namespace).spec.replicas
    return replicas


def _reach(apis: Apis, namespace: str, *, replicas: int, want: dict[str, dict[str, int]], what: str,
           kind: str = "Deployment", name: str = "web") -> Seen:
    """Wait until the HPA set the hub's replicas and the federation runs `want`."""
    key = f"{namespace}/{name}"
    waiting.wait_for(lambda: _hub_replicas(apis, namespace, kind=kind, name=name) == replicas,
                     timeout=SCALE_TIMEOUT, interval=0.5, message=lambda: (
                         f"{what}: the HPA did not set {replicas} replicas (hub has "
                         f"{_hub_replicas(apis, namespace, kind=kind, name=name)}; HPA status "
                         f"{_hpa(apis, namespace, name=name)})"))
    last: list[Seen] = []

    def probe() -> Seen | None:
        last[:] = [observe(apis, key, f"{names.SPREAD_LABEL}={name}")]
        return last[0] if reached(last[0], want, apis.federation.stopped) else None

    return waiting.wait_for(probe, timeout=SCALE_TIMEOUT, interval=0.5, message=lambda: (
        f"{what}: wanted {want}; last seen {last[0].describe() if last else 'nothing'}"))


def _hpas(apis: Apis) -> Any:
    return dynamic.DynamicClient(apis.api["hub"]).resources.get(
        api_version="autoscaling/v2beta2", kind="HorizontalPodAutoscaler")


def _hpa(apis: Apis, namespace: str, *, name: str = "web") -> Any:
    return _hpas(apis).get(name=name, namespace=namespace).to_dict().get("status")


def _kubectl_hpa(apis: Apis, namespace: str) -> str:
    kubectl = build.ensure(lambda line: None).binary("kubectl")
    return subprocess.run(
        [str(kubectl), "--kubeconfig", apis.federation.kubeconfig("hub"), "get", "hpa", "web",
         "-n", namespace, "--no-headers"], capture_output=True, text=True, timeout=30, check=True).stdout


def test_a_hub_hpa_scales_the_spread_by_the_federations_load(apis: Apis) -> None:
    documents = _documents()
    namespace = f"autoscale-{uuid.uuid4().hex[:6]}"
    waiting.wait_for(lambda: idle(apis), timeout=60.0, message="the federation is not idle")
    apis.core("hub").create_namespace({"metadata": {"name": namespace}})
    try:
        apis.apps("hub").create_namespaced_deployment(namespace, documents["Deployment"])
        apis.custom().create_namespaced_custom_object(
            common.API_GROUP, common.API_VERSION, namespace, spread_api.PLURAL,
            documents["FederatedSpread"])
        _hpas(apis).create(body=documents["HorizontalPodAutoscaler"], namespace=namespace)
        eu0 = {"aws-eu": 0, "gcp-eu": 0}
        _reach(apis, namespace, replicas=2, want={"onprem": {"dc1": 2}, "eu": eu0}, what="idle")

        # Both pods at 100% of their requests: sum 200, target 50 per replica -> 4, all in dc1.
        assert len(_load(apis, namespace, "500m")) == 2
        _reach(apis, namespace, replicas=4, want={"onprem": {"dc1": 4}, "eu": eu0}, what="load on 2 pods")
        shown = _kubectl_hpa(apis, namespace)
        assert "<unknown>" not in shown and "/50 (avg)" in shown, shown
        # What the HPA reads, the SDK (`fedspread get placement`) shows too.
        seen_usage = waiting.wait_for(
            lambda: (found := apis.placements.placement(f"{namespace}/web").usage) is not None
            and usage.CPU_UTILIZATION in found.metrics and found, timeout=SCALE_TIMEOUT,
            message=lambda: f"GetPlacement never showed CPU utilization: "
                            f"{apis.placements.placement(f'{namespace}/web').usage}")
        assert seen_usage.ready_pods >= 2 and not seen_usage.without_metrics, seen_usage

        # All four at 100%: sum 400 -> 8; dc1 is capped at 4, the rest overflows to eu.
        assert len(_load(apis, namespace, "500m")) == 4
        seen = _reach(apis, namespace, replicas=8, what="load on 4 pods",
                      want={"onprem": {"dc1": 4}, "eu": {"aws-eu": 2, "gcp-eu": 2}})
        assert sum(len(p) for p in seen.pods.values()) == 8

        # Load gone: after the downscale stabilization the HPA goes to its minimum; eu gives back first.
        _load(apis, namespace, "0")
        _reach(apis, namespace, replicas=2, want={"onprem": {"dc1": 2}, "eu": eu0}, what="load gone")
    finally:
        _hpas(apis).delete(name="web", namespace=namespace)
        clean_up(apis, namespace, documents["Deployment"], "web")


def test_the_external_metrics_api_answers_through_the_hub(apis: Apis) -> None:
    """`kubectl get --raw` on the hub reaches the coordinator through the aggregation layer: the
    metric list for a spread that does not exist is empty, an unknown metric is a 404 naming ours."""
    kubectl = build.ensure(lambda line: None).binary("kubectl")
    base = "/apis/external.metrics.k8s.io/v1beta1/namespaces/nowhere"

    def raw(path: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(kubectl), "--kubeconfig", apis.federation.kubeconfig("hub"), "get",
                               "--raw", path], capture_output=True, text=True, timeout=30)

    listed = raw(f"{base}/{usage.CPU_UTILIZATION}?labelSelector={names.SPREAD_LABEL}%3Dmissing")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["items"] == []
    unknown = raw(f"{base}/no-such-metric?labelSelector={names.SPREAD_LABEL}%3Dweb")
    assert unknown.returncode != 0 and "NotFound" in unknown.stderr + unknown.stdout, unknown
    discovery = json.loads(raw("/apis/external.metrics.k8s.io/v1beta1").stdout)
    assert {r["name"] for r in discovery["resources"]} >= set(usage.SERVED_METRICS)


SCALED_KINDS = (("replicaset.yaml", "ReplicaSet"), ("statefulset.yaml", "StatefulSet"))
"""The examples of the other kinds with a scale subresource, sized side by side in one test."""


@dataclasses.dataclass(frozen=True)
class _Scaled:
    """One example's workload, spread and HPA in a namespace of its own."""

    kind: str
    namespace: str
    workload: dict[str, Any]
    spread: dict[str, Any]
    hpa: dict[str, Any]

    @property
    def name(self) -> str:
        name: str = self.workload["metadata"]["name"]
        return name


def _scaled(example: str, kind: str) -> _Scaled:
    """The example's workload at 2 replicas and the autoscaling example's HPA pointed at it (2 to 4)."""
    documents = _documents(EXAMPLES / example)
    workload = copy.deepcopy(documents[kind])
    workload["spec"]["replicas"] = 2
    name = workload["metadata"]["name"]
    hpa = copy.deepcopy(_documents()["HorizontalPodAutoscaler"])
    hpa["metadata"]["name"] = name
    hpa["spec"].update(scaleTargetRef={"apiVersion": "apps/v1", "kind": kind, "name": name},
                       minReplicas=2, maxReplicas=4)
    hpa["spec"]["metrics"][0]["external"]["metric"]["selector"] = {"matchLabels": {names.SPREAD_LABEL: name}}
    return _Scaled(kind, f"autoscale-{kind.lower()}-{uuid.uuid4().hex[:6]}", workload,
                   documents["FederatedSpread"], hpa)


def test_a_hub_hpa_scales_a_replicaset_and_a_statefulset_spread(apis: Apis) -> None:
    """The ReplicaSet and StatefulSet examples side by side, each in its own namespace with the
    autoscaling example's HPA pointed at it (2 to 4 replicas): each pod at 100 % of its requests
    makes 4, which fill the ring (dc1, at most 2, Fixed) and give eu one each; load gone, eu gives
    back first. Side by side, the HPA periods and stabilization are waited out once for both."""
    scaled = [_scaled(example, kind) for example, kind in SCALED_KINDS]
    waiting.wait_for(lambda: idle(apis), timeout=60.0, message="the federation is not idle")
    created: list[_Scaled] = []
    try:
        for item in scaled:
            apis.core("hub").create_namespace({"metadata": {"name": item.namespace}})
            created.append(item)
            hub_call(apis, item.kind, 0)(item.namespace, item.workload)
            apis.custom().create_namespaced_custom_object(
                common.API_GROUP, common.API_VERSION, item.namespace, spread_api.PLURAL, item.spread)
            _hpas(apis).create(body=item.hpa, namespace=item.namespace)
        given_back = {"ring": {"dc1": 2}, "eu": {"aws-eu": 0, "gcp-eu": 0}}
        for item in scaled:
            _reach(apis, item.namespace, replicas=2, want=given_back, what=f"{item.kind} idle",
                   kind=item.kind, name=item.name)

        # Both pods at 100 % of their requests (250m each): sum 200, target 50 per replica -> 4 (its most).
        for item in scaled:
            assert len(_load(apis, item.namespace, "250m", spread=item.name)) == 2, item.kind
        loaded = {"ring": {"dc1": 2}, "eu": {"aws-eu": 1, "gcp-eu": 1}}
        for item in scaled:
            seen = _reach(apis, item.namespace, replicas=4, want=loaded, what=f"{item.kind} under load",
                          kind=item.kind, name=item.name)
            assert sum(len(p) for p in seen.pods.values()) == 4, item.kind

        # Load gone: after the downscale stabilization the HPA goes back to 2; eu gives back first.
        for item in scaled:
            _load(apis, item.namespace, "0", spread=item.name)
        for item in scaled:
            _reach(apis, item.namespace, replicas=2, want=given_back, what=f"{item.kind} load gone",
                   kind=item.kind, name=item.name)
    finally:  # both deleted before either clean-up waits for the clusters to be idle
        for item in created:
            delete_quietly(lambda item=item: _hpas(apis).delete(name=item.name, namespace=item.namespace))
            start_clean_up(apis, item.namespace, item.workload, item.name)
        for item in created:
            clean_up(apis, item.namespace, item.workload, item.name)
