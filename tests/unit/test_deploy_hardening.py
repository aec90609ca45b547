"""deploy/ meets the restricted Pod Security level, and its NetworkPolicies fence what they claim to.

Why rendered and checked rule by rule: a platform team applies these manifests into namespaces
that enforce `restricted`, where one missing field (a seccomp profile, a capability not dropped)
makes every pod fail admission; and a NetworkPolicy whose selector matches no pod protects
nothing while looking like it does — kustomize's `labels` with includeSelectors, for one, adds
its label to every selector, so the pods must carry it too. Rendered with the build's kustomize
(`manifests.render`).
The rules are the restricted profile of the Pod Security Standards that these pods can touch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.support.manifests import DEPLOY, Doc, pod_templates, render

RESTRICTED = "restricted"
KUBERAY_LABELS = ("ray.io/cluster", "ray.io/node-type")
"""Labels KubeRay puts on the pods of a RayCluster (cluster name; head or worker)."""


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Doc]]:
    return {"coordinator": render(DEPLOY / "coordinator"),
            "agent": render(DEPLOY / "agent" / "overlays" / "example")}


def restricted_problems(template: Doc) -> list[str]:
    """What keeps a pod template from the restricted Pod Security level (empty: nothing)."""
    spec, problems = template["spec"], []
    pod = spec.get("securityContext", {})
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(flag):
            problems.append(flag)
    if any("hostPath" in volume for volume in spec.get("volumes", [])):
        problems.append("a hostPath volume")
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        own = container.get("securityContext", {})
        name = container["name"]
        if not own.get("runAsNonRoot", pod.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot")
        if own.get("runAsUser", pod.get("runAsUser")) == 0:
            problems.append(f"{name}: runs as uid 0")
        profile = own.get("seccompProfile", pod.get("seccompProfile", {}))
        if profile.get("type") not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccompProfile RuntimeDefault")
        if own.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation false")
        if own.get("privileged"):
            problems.append(f"{name}: privileged")
        capabilities = own.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            problems.append(f"{name}: capabilities drop ALL")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: capabilities added")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            problems.append(f"{name}: a hostPort")
    return problems


def test_every_pod_meets_the_restricted_level(rendered: dict[str, list[Doc]]) -> None:
    templates = dict(pod_templates(rendered["coordinator"] + rendered["agent"]))
    assert set(templates) == {"Deployment/fedspread-coordinator", "RayCluster/fedspread-ray/head",
                              "RayCluster/fedspread-ray/shards", "Deployment/fedspread-agent"}
    assert {name: restricted_problems(t) for name, t in templates.items()} == {name: [] for name in templates}


def test_the_check_finds_what_restricted_refuses() -> None:
    """`restricted_problems` is what the test above relies on: it must see each missing field."""
    good = {"spec": {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "c", "securityContext": {
                         "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}}
    assert restricted_problems(good) == []
    broken: Any = {"spec": {"hostNetwork": True, "containers": [{"name": "c", "ports": [{"hostPort": 80}]}]}}
    assert restricted_problems(broken) == [
        "hostNetwork", "c: runAsNonRoot", "c: seccompProfile RuntimeDefault",
        "c: allowPrivilegeEscalation false", "c: capabilities drop ALL", "c: a hostPort"]


def test_the_namespace_enforces_the_restricted_level(rendered: dict[str, list[Doc]]) -> None:
    for docs in rendered.values():
        (namespace,) = [d for d in docs if d["kind"] == "Namespace"]
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == RESTRICTED


def selects(selector: Doc, labels: dict[str, str]) -> bool:
    return bool(selector.get("matchLabels")) and selector["matchLabels"].items() <= labels.items()


def pod_labels(docs: Sequence[Doc], name: str) -> dict[str, str]:
    """The labels pod template `name` gives its pods (with KubeRay's for a RayCluster's groups)."""
    template = dict(pod_templates(docs))[name]
    labels = dict(template.get("metadata", {}).get("labels", {}))
    kind, _, rest = name.partition("/")
    if kind == "RayCluster":
        cluster, _, group = rest.partition("/")
        labels |= {"ray.io/cluster": cluster, "ray.io/node-type": "head" if group == "head" else "worker"}
    return labels


def policy(docs: Sequence[Doc], name: str) -> Doc:
    (found,) = [d for d in docs if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == name]
    assert found["spec"]["policyTypes"] == ["Ingress"]
    return found["spec"]


def test_only_the_coordinator_reaches_the_ray_heads_client_port(rendered: dict[str, list[Doc]]) -> None:
    docs = rendered["coordinator"]
    head = pod_labels(docs, "RayCluster/fedspread-ray/head")
    workers = pod_labels(docs, "RayCluster/fedspread-ray/shards")
    coordinator = pod_labels(docs, "Deployment/fedspread-coordinator")
    spec = policy(docs, "fedspread-ray-head")
    assert selects(spec["podSelector"], head) and not selects(spec["podSelector"], workers)
    client, own = spec["ingress"]
    assert [p["port"] for p in client["ports"]] == [10001], "Ray Client only"
    (source,) = client["from"]
    assert selects(source["podSelector"], coordinator) and not selects(source["podSelector"], head)
    (cluster,) = own["from"]
    assert "ports" not in own
    assert selects(cluster["podSelector"], workers) and selects(cluster["podSelector"], head)
    assert not selects(cluster["podSelector"], coordinator), "the coordinator gets the client port only"
    (ray,) = [d for d in docs if d["kind"] == "RayCluster"]
    (ray_head,) = ray["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    head_ports = {p["containerPort"] for p in ray_head["ports"]}
    assert 10001 in head_ports and 8265 in head_ports  # the dashboard: reachable from the Ray cluster only
    spec = policy(docs, "fedspread-ray-workers")
    assert selects(spec["podSelector"], workers) and not selects(spec["podSelector"], head)
    (own,) = spec["ingress"]
    (cluster,) = own["from"]
    assert selects(cluster["podSelector"], head) and not selects(cluster["podSelector"], coordinator)


def test_the_agent_takes_only_webhook_and_metrics_traffic(rendered: dict[str, list[Doc]]) -> None:
    docs = rendered["agent"]
    agent = pod_labels(docs, "Deployment/fedspread-agent")
    spec = policy(docs, "fedspread-agent")
    assert selects(spec["podSelector"], agent)
    template = dict(pod_templates(docs))["Deployment/fedspread-agent"]
    ports = {p["name"]: p["containerPort"] for p in template["spec"]["containers"][0]["ports"]}
    webhook, metrics = spec["ingress"]
    assert [p["port"] for p in webhook["ports"]] == [ports["webhook"]] and "from" not in webhook
    assert [p["port"] for p in metrics["ports"]] == [ports["metrics"]]
    assert metrics["from"] == [{"namespaceSelector": {}}], "metrics from the cluster's pods only"
    assert set(ports) == {"webhook", "metrics"}, "a new port needs its rule here"
