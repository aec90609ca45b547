"""The sandbox's aggregation layer, the members' resource metrics API and the hub's HPA controller,
on the session sandbox's real control planes.

What is tested:

* in a member, `kubectl top pods` (the sandbox's kubectl, through the member's aggregator) shows the
  usage a pod's `sandbox.fedspread.io/usage` annotation declares, and zero before it has one;
* the node simulator's metrics port refuses a direct caller: one without a client certificate
  (401) and one with an administrator's certificate of the cluster CA (refused at the handshake);
* every apiserver publishes the front-proxy CA in `kube-system/extension-apiserver-authentication`,
  and each member's `v1beta1.metrics.k8s.io` APIService is Available;
* the hub's controller-manager runs the HPA controller with the sandbox periods: an HPA on the hub
  is acted on (its conditions written) within a few sync periods.

Why: autoscaling tests set load by annotating pods and expect the hub's HPA to act on it; if any
link (aggregator, certificates, metrics server, controller) is missing, they fail far from here.
"""

from __future__ import annotations

import pathlib
import ssl
import subprocess
import urllib.error
import urllib.request
from typing import Any

import pytest
from conftest import Clusters
from waiting import wait_for

from federation.certs import pki
from federation.sandbox import aggregation, build, hub_controllers, member_metrics, pod_metrics, state

WAIT = 60.0  # generous: the sandbox shares 2 cores with builds and other tests
MEMBER = "member-1"


def _kubectl(sandbox: state.SandboxState, cluster: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(build.kubectl()), "--kubeconfig", sandbox.cluster(cluster).kubeconfig, *args],
                          capture_output=True, text=True, timeout=60, check=False)


def _running(clusters: Clusters, namespace: str, name: str) -> bool:
    pod = clusters.core(MEMBER).read_namespaced_pod(name, namespace)
    return bool(pod.status and pod.status.phase == "Running")


def _top_line(sandbox: state.SandboxState, namespace: str, name: str) -> list[str] | None:
    """The columns of `kubectl top pods` for pod `name`, or None while it is not listed."""
    shown = _kubectl(sandbox, MEMBER, "top", "pods", "-n", namespace, "--no-headers")
    for line in shown.stdout.splitlines():
        columns = line.split()
        if columns and columns[0] == name:
            return columns
    return None


def test_kubectl_top_pods_shows_the_usage_a_pod_is_annotated_with(
        sandbox: state.SandboxState, clusters: Clusters, namespace: str) -> None:
    clusters.core(MEMBER).create_namespaced_pod(namespace, {
        "metadata": {"name": "busy", "labels": {"app": "busy"}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                 "resources": {"requests": {"cpu": "200m", "memory": "32Mi"}}}]}})
    wait_for(lambda: _running(clusters, namespace, "busy"), timeout=WAIT, message="pod busy never ran")
    idle = wait_for(lambda: _top_line(sandbox, namespace, "busy"), timeout=WAIT,
                    message=lambda: f"kubectl top never listed pod busy: "
                                    f"{_kubectl(sandbox, MEMBER, 'top', 'pods', '-n', namespace).stderr}")
    assert idle[1:] == ["0m", "0Mi"], f"a pod without the usage annotation uses nothing, got {idle}"

    clusters.core(MEMBER).patch_namespaced_pod("busy", namespace, {"metadata": {"annotations": {
        pod_metrics.USAGE_ANNOTATION: '{"cpu": "450m", "memory": "64Mi"}'}}})
    busy = wait_for(lambda: (line := _top_line(sandbox, namespace, "busy")) and line[1:] == ["450m", "64Mi"]
                    and line, timeout=WAIT,
                    message=lambda: f"kubectl top shows {_top_line(sandbox, namespace, 'busy')} for busy")
    assert busy[0] == "busy"
    selected = _kubectl(sandbox, MEMBER, "get", "--raw",
                        f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods?labelSelector=app%3Dbusy")
    assert '"window": "15s"' in selected.stdout and '"name": "busy"' in selected.stdout, selected


def _get_metrics(port: int, *, ca_file: str, client: tuple[pathlib.Path, pathlib.Path] | None) -> int:
    context = ssl.create_default_context(cafile=ca_file)
    if client is not None:
        context.load_cert_chain(*client)
    request = urllib.request.Request(f"https://127.0.0.1:{port}/apis/metrics.k8s.io/v1beta1/pods",
                                     headers={aggregation.USER_HEADER: "system:admin"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_the_metrics_port_refuses_callers_other_than_the_aggregator(
        sandbox: state.SandboxState, tmp_path: pathlib.Path) -> None:
    port = sandbox.cluster(MEMBER).metrics_port
    assert port, "the member records its metrics port"
    assert _get_metrics(port, ca_file=sandbox.ca_file, client=None) == 401
    pki_dir = pathlib.Path(sandbox.ca_file).parent
    cluster_ca = pki.CertificateAuthority.load(pki_dir / "ca.crt", pki_dir / "ca.key")
    admin = cluster_ca.issue_client("fedspread-admin", organization="system:masters").write(tmp_path, "admin")
    with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):  # not the front-proxy CA's
        _get_metrics(port, ca_file=sandbox.ca_file, client=admin)


def test_every_apiserver_publishes_the_front_proxy_ca_and_members_serve_metrics(
        sandbox: state.SandboxState, clusters: Clusters) -> None:
    front_proxy_ca = pathlib.Path(sandbox.front_proxy_ca_file).read_text()
    for cluster in clusters.names:
        published = clusters.core(cluster).read_namespaced_config_map(
            "extension-apiserver-authentication", "kube-system").data
        assert published["requestheader-client-ca-file"].strip() == front_proxy_ca.strip(), cluster
        assert published["requestheader-allowed-names"] == f'["{aggregation.FRONT_PROXY_CLIENT_CN}"]'
        assert published["requestheader-username-headers"] == f'["{aggregation.USER_HEADER}"]'
    for member in sandbox.members:
        api_service: dict[str, Any] = clusters.api(member.name).sanitize_for_serialization(
            clusters.custom(member.name).get_cluster_custom_object(
                "apiregistration.k8s.io", "v1", "apiservices", member_metrics.API_SERVICE))
        assert (aggregation.available_condition(api_service) or {}).get("status") == "True", api_service


def test_the_hub_controller_manager_runs_the_hpa_controller(
        sandbox: state.SandboxState, clusters: Clusters, namespace: str) -> None:
    manager = next(c for c in sandbox.components if c.name == f"{sandbox.hub.name}-controller-manager")
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in manager.argv if "=" in arg)
    assert "horizontalpodautoscaling" in flags["controllers"].split(",")
    assert "deployment" not in flags["controllers"].split(",") and "*" not in flags["controllers"]
    assert flags["horizontal-pod-autoscaler-sync-period"] == f"{hub_controllers.HPA_SYNC_PERIOD_SECONDS}s"
    assert flags["horizontal-pod-autoscaler-downscale-stabilization"] == (
        f"{hub_controllers.HPA_DOWNSCALE_STABILIZATION_SECONDS}s")
    hpa = {"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "absent"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "absent"},
                    "minReplicas": 1, "maxReplicas": 3, "metrics": [{"type": "External", "external": {
                        "metric": {"name": "fedspread-cpu-utilization"},
                        "target": {"type": "AverageValue", "averageValue": "50"}}}]}}
    custom, hpas = clusters.custom("hub"), ("autoscaling", "v2beta2", namespace, "horizontalpodautoscalers")
    custom.create_namespaced_custom_object(*hpas, hpa)

    def conditions() -> list[dict[str, Any]] | None:
        found = custom.get_namespaced_custom_object(*hpas, "absent")
        return list((found.get("status") or {}).get("conditions") or []) or None

    written = wait_for(conditions, timeout=WAIT, message="the hub's HPA controller never acted on an HPA")
    able = next(c for c in written if c["type"] == "AbleToScale")
    assert (able["status"], able["reason"]) == ("False", "FailedGetScale"), written
