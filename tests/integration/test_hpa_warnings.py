"""The hub's webhook warns about HorizontalPodAutoscalers that cannot work, through the real apiserver.

The coordinator's webhook server (`hub.admission`, in this process) is registered on the shared
sandbox hub with the coordinator's own registration (`registration.configuration`, narrowed to
this module's namespace and labelled objects, `hubdoor.registered`). Then, with the real kubectl
and the 1.20 hub's `autoscaling/v2beta2`: an HPA with a `Value` target on
`fedspread-cpu-utilization` is stored and kubectl prints the webhook's warning; one with an
`AverageValue` target is stored with no warning; one naming a Job is warned about the missing scale
subresource. Nothing is ever refused.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import subprocess
from collections.abc import Iterator
from typing import Any

import hubdoor
import hubside
import pytest
from conftest import Clusters
from kubernetes import client
from waiting import wait_for

from federation.coordinator import facade
from federation.coordinator.hub import admission
from federation.coordinator.model import world
from federation.core import usage as usage_rules
from federation.kube import webhook_https
from federation.sandbox import build, state
from tests.support.clock import ManualClock

WAIT = 90.0
WARNING = "only AverageValue works on a hub without pods"


def hpa(name: str, namespace: str, *, target: dict[str, Any],
        scale_target: tuple[str, str] = ("apps/v1", "Deployment")) -> dict[str, Any]:
    """An autoscaling/v2beta2 HPA (what the 1.20 hub serves) on one of our external metrics."""
    return {"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": namespace, "labels": {hubdoor.LABEL: namespace}},
            "spec": {"scaleTargetRef": {"apiVersion": scale_target[0], "kind": scale_target[1],
                                        "name": "web"},
                     "minReplicas": 2, "maxReplicas": 12,
                     "metrics": [{"type": "External", "external": {
                         "metric": {"name": usage_rules.CPU_UTILIZATION, "selector": {
                             "matchLabels": {usage_rules.SPREAD_SELECTOR_LABEL: "web"}}},
                         "target": target}}]}}


class Hub:
    def __init__(self, kubeconfig: str, namespace: str) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace

    def apply(self, body: dict[str, Any], *, dry_run: bool = False) -> subprocess.CompletedProcess[str]:
        """`kubectl apply -f -` on the hub (server-side dry run with `dry_run`)."""
        command = [str(build.kubectl()), "--kubeconfig", self.kubeconfig, "apply", "-f", "-"]
        if dry_run:
            command.append("--dry-run=server")
        return subprocess.run(command, input=json.dumps(body), capture_output=True, text=True, timeout=60)

    def warned_probe(self) -> bool:
        """Whether the apiserver calls the webhook yet (a dry run of a Value HPA is warned)."""
        result = self.apply(hpa("probe", self.namespace, target={"type": "Value", "value": "50"}),
                            dry_run=True)
        assert result.returncode == 0, result.stderr
        return WARNING in result.stderr


@pytest.fixture(scope="module")
def hub(sandbox: state.SandboxState, clusters: Clusters, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[Hub]:
    ca, cert, key = hubdoor.serving_pair(tmp_path_factory.mktemp("hpa-webhook"))
    clock = ManualClock(datetime.datetime.now(datetime.UTC))
    door = admission.SpecAdmission(facade.Coordinator(world.World(clock), clock=clock, coordinator_id="t"),
                                   hub_synced=lambda: False)
    settings = admission.WebhookSettings(cert_file=pathlib.Path(cert), key_file=pathlib.Path(key),
                                         host="127.0.0.1", port=hubside.free_port())
    server: webhook_https.WebhookServer = admission.server(door, settings).start()
    try:
        with hubdoor.watched_namespace(clusters) as namespace, \
                hubdoor.registered(clusters, url=server.url(), ca=ca, namespace=namespace):
            running = Hub(sandbox.hub.kubeconfig, namespace)
            wait_for(running.warned_probe, timeout=WAIT, interval=0.5,
                     message="the hub apiserver never called the registered webhook for HPAs")
            yield running
    finally:
        server.stop()


def stored(clusters: Clusters, namespace: str, name: str) -> bool:
    try:
        client.AutoscalingV1Api(clusters.api(hubside.HUB)).read_namespaced_horizontal_pod_autoscaler(
            name, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def test_a_value_target_on_our_metric_is_stored_with_a_warning(hub: Hub, clusters: Clusters) -> None:
    result = hub.apply(hpa("by-value", hub.namespace, target={"type": "Value", "value": "50"}))
    assert result.returncode == 0, result.stderr
    assert "Warning:" in result.stderr and WARNING in result.stderr
    assert "averageValue" in result.stderr
    assert stored(clusters, hub.namespace, "by-value")


def test_an_average_value_target_is_stored_without_a_warning(hub: Hub, clusters: Clusters) -> None:
    average = {"type": "AverageValue", "averageValue": "50"}
    result = hub.apply(hpa("by-average", hub.namespace, target=average))
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr
    assert stored(clusters, hub.namespace, "by-average")


def test_a_job_as_scale_target_is_warned(hub: Hub, clusters: Clusters) -> None:
    result = hub.apply(hpa("on-a-job", hub.namespace, target={"type": "AverageValue", "averageValue": "50"},
                           scale_target=("batch/v1", "Job")))
    assert result.returncode == 0, result.stderr
    assert "a Job has no scale subresource" in result.stderr
    assert stored(clusters, hub.namespace, "on-a-job")
