"""Usage reports and member autoscalers, end to end on the shared sandbox.

A real coordinator (in this process: `Coordinator.usage` is read from its facade, as the external
metrics server reads it) and a real `fedspread agent` process (`--usage-interval 1`) for sandbox
member-1, one spread of a hub Deployment of 2 replicas there:

- usage: the member's metrics API (the node simulator's) decides the MemberCluster's
  `MetricsAvailable`: True, and the pods measured. Without one (its APIService removed, then put
  back) it is False with `MetricsAPINotFound`, and `Coordinator.usage` counts the spread's 2 Ready
  pods with no usage value (unmeasured, never idle), naming the member as left out.
- a member HPA (autoscaling/v1) on the spread's member Deployment: the spread shows
  `AutoscalerConflict` naming the cluster and the HPA; the member Deployment scaled to 3 (as the
  HPA would, through the scale subresource) stays at 3 — the agent does not write its share (2)
  back — and the HPA is still there. Deleted, the condition goes and the agent applies its share.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator
from typing import Any

import agentside
import conftest
import hubside
import pytest
import waiting
from kubernetes import client

from federation.api import cluster as cluster_api
from federation.core import usage
from federation.sandbox import aggregation, member_metrics
from tests.support import builders

MEMBER = "member-1"
TIMEOUT = 60.0
OBSERVE_SECONDS = 6.0


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[str, Any]]:
    """A coordinator on the hub, and the cluster name its agent uses."""
    (name,) = hubside.names("usage")
    with hubside.running_coordinator(sandbox, clusters, members=[name]) as process:
        yield name, process


def metrics_served(clusters: conftest.Clusters) -> bool:
    """Whether the member's apiserver serves metrics.k8s.io (its discovery lists the group)."""
    groups = client.ApisApi(clusters.api(MEMBER)).get_api_versions().groups or []
    return any(group.name == "metrics.k8s.io" for group in groups)


def member_condition(clusters: conftest.Clusters, name: str, kind: str) -> dict[str, Any]:
    """The MemberCluster's condition `kind` ({} when absent or the object is not there)."""
    try:
        obj = clusters.custom(hubside.HUB).get_cluster_custom_object(
            hubside.GROUP, hubside.VERSION, cluster_api.PLURAL, name)
    except client.ApiException as error:
        if error.status == 404:
            return {}
        raise
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((dict(c) for c in conditions if c.get("type") == kind), {})


def member_replicas(clusters: conftest.Clusters, namespace: str) -> int | None:
    try:
        found = clusters.apps(MEMBER).read_namespaced_deployment("web", namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    replicas: int | None = found.spec.replicas
    return replicas


def hpa(target: str) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web-hpa"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                     "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 50}}


def test_usage_reports_and_a_member_hpa_left_alone(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[str, Any],
        tmp_path: pathlib.Path) -> None:
    name, process = coordinator
    hub = hubside.Hub(clusters, namespace)
    agent = agentside.AgentProcess(clusters, cluster=name, member=MEMBER,
                                   coordinator=f"127.0.0.1:{process.port}", namespace=namespace,
                                   log=tmp_path / "agent.log", args=("--usage-interval", "1"))
    autoscaling = client.AutoscalingV1Api(clusters.api(MEMBER))

    def figures() -> usage.FederationUsage | None:
        found: usage.FederationUsage | None = process.coordinator.usage(namespace, "web")
        return found

    def wait(probe: Any, what: str) -> Any:
        return waiting.wait_for(probe, timeout=TIMEOUT, message=lambda: (
            f"{what}; usage {figures()}; spread status {hub.spread_status('web')}; "
            f"member replicas {member_replicas(clusters, namespace)}; agent log {agent.log}"))

    try:
        wait(lambda: agentside.webhook_live(agent, clusters, MEMBER, namespace),
             "the apiserver never called the agent's webhook")
        hub.create(builders.deployment("web", 2, cpu="10m"),
                   hubside.spread_body("web", target="web", lost_seconds=600,
                                       subsets=[{"name": "all", "clusters": [name]}]))

        # Usage: the 2 Ready pods counted and measured through the member's metrics API.
        wait(lambda: (found := figures()) is not None and found.ready_pods == 2,
             "Coordinator.usage never counted the spread's 2 Ready pods")
        assert metrics_served(clusters), "the sandbox's members serve metrics.k8s.io"
        said = wait(lambda: member_condition(clusters, name, "MetricsAvailable").get("status") == "True"
                    and member_condition(clusters, name, "MetricsAvailable"), "MetricsAvailable never True")
        assert said["reason"] == "MetricsAPIAvailable"
        wait(lambda: (found := figures()) is not None and usage.CPU_USAGE in found.values
             and found.unmeasured_pods == 0, "the Ready pods were never measured")

        # A member without a metrics API (its APIService removed; put back as it was): said so,
        # its pods counted as unmeasured, never as idle.
        registration = client.ApiregistrationV1Api(clusters.api(MEMBER))
        saved = registration.read_api_service(member_metrics.API_SERVICE)
        registration.delete_api_service(member_metrics.API_SERVICE)
        try:
            said = wait(lambda: member_condition(clusters, name, "MetricsAvailable").get("status") == "False"
                        and member_condition(clusters, name, "MetricsAvailable"),
                        "MetricsAvailable never False")
            assert said["reason"] == "MetricsAPINotFound", said
            assert "never as idle" in said["message"]
            found = wait(lambda: (f := figures()) is not None and f.without_metrics == (name,) and f,
                         "the member was never left out of the figures")
            assert found.unmeasured_pods == 2 and found.values[usage.READY_REPLICAS].quantity == "2"
            assert usage.CPU_UTILIZATION not in found.values and usage.CPU_USAGE not in found.values, \
                "pods of a member without a metrics API must not count as idle"
        finally:
            registration.create_api_service({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                                             "metadata": {"name": member_metrics.API_SERVICE},
                                             "spec": saved.spec})
            aggregation.wait_available(clusters.api(MEMBER), member_metrics.API_SERVICE)
        wait(lambda: member_condition(clusters, name, "MetricsAvailable").get("status") == "True",
             "MetricsAvailable never True again once the metrics API was back")

        # A member HPA on the member Deployment: shown, never fought, never deleted.
        wait(lambda: member_replicas(clusters, namespace) == 2, "the member Deployment never had its share")
        autoscaling.create_namespaced_horizontal_pod_autoscaler(namespace, hpa("web"))
        conflict = wait(lambda: hub.condition("web", "AutoscalerConflict") or None,
                        "the spread never showed AutoscalerConflict")
        assert conflict["status"] == "True" and conflict["reason"] == "MemberAutoscaler"
        assert f"{name}: {namespace}/web-hpa" in conflict["message"], conflict
        clusters.apps(MEMBER).patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 3}})
        deadline = time.monotonic() + OBSERVE_SECONDS
        while time.monotonic() < deadline:  # several reconcile rounds and usage intervals
            assert member_replicas(clusters, namespace) == 3, "the agent wrote its share over the HPA's count"
            time.sleep(0.5)
        kept = autoscaling.read_namespaced_horizontal_pod_autoscaler("web-hpa", namespace)
        assert kept.spec.max_replicas == 5, "the member HPA was changed"

        autoscaling.delete_namespaced_horizontal_pod_autoscaler("web-hpa", namespace)
        wait(lambda: not hub.condition("web", "AutoscalerConflict"), "AutoscalerConflict never went")
        wait(lambda: member_replicas(clusters, namespace) == 2, "the agent never applied its share again")
        assert agent.alive, f"the agent exited; log {agent.log}"
        assert "Traceback" not in agent.output(), f"the agent logged a traceback; log {agent.log}"
    finally:
        agent.stop()
