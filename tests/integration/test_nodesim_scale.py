"""The node simulator keeps up with many pods and simulates special nodes, on the real sandbox.

What is tested, on the session sandbox (hub + member-1 + member-2, 3 simulated nodes each):

* a Deployment of 150 pods in member-1 becomes 150 Running and Ready pods, and scaled to 0 all of
  them are really gone (the simulator completes every deletion);
* a node group with a taint and an extended resource (played by a NodeSimulator in this test,
  against member-2) registers nodes carrying both, with a Lease; a pod requesting the resource
  and tolerating the taint lands there and runs, one without the toleration stays unschedulable.

Why: the agent's and coordinator's tests scale workloads across members and place pods on
labelled, tainted pools; if the simulator fell behind or dropped taints and resources, those
tests would fail (or pass) for the wrong reasons. Deadlines are generous — the sandbox shares two
cores with builds and other tests — and only bound the wait; no timing is asserted.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Clusters
from kubernetes import client
from waiting import wait_for

from federation.sandbox import nodesim

SCALE = 150  # member-1: 3 nodes x 110 pods
DEADLINE = 240.0
GPU = "nvidia.com/gpu"


def _pods(core: client.CoreV1Api, namespace: str, selector: str) -> list[dict[str, Any]]:
    """The pods as raw JSON (decoding 150 pods into models every poll costs the sandbox's CPU)."""
    answer = core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
    items: list[dict[str, Any]] = json.loads(answer.data)["items"]
    return items


def _running_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])


def _summary(pods: list[dict[str, Any]]) -> str:
    phases: dict[str, int] = {}
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase", "?")
        phases[phase] = phases.get(phase, 0) + 1
    return (f"{len(pods)} pods, {sum(map(_running_ready, pods))} Running+Ready, "
            f"{sum(1 for p in pods if p['spec'].get('nodeName'))} bound, "
            f"{sum(1 for p in pods if p['metadata'].get('deletionTimestamp'))} terminating; phases {phases}")


def test_150_pods_become_running_and_ready_and_are_all_removed(clusters: Clusters, namespace: str) -> None:
    apps, core = clusters.apps("member-1"), clusters.core("member-1")
    labels = {"app": "scale"}
    apps.create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "scale"},
        "spec": {"replicas": SCALE, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"initContainers": [{"name": "setup", "image": "registry.example/setup:1"}],
                     "containers": [{"name": "app", "image": "registry.example/app:1",
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}},
                                    {"name": "sidecar", "image": "registry.example/proxy:1"}]}}}})
    seen: list[dict[str, Any]] = []

    def all_ready() -> bool:
        seen[:] = _pods(core, namespace, "app=scale")
        return len(seen) == SCALE and all(map(_running_ready, seen))

    wait_for(all_ready, timeout=DEADLINE, interval=1.0,
             message=lambda: f"{SCALE} Running+Ready pods in member-1; saw {_summary(seen)}")
    pod = seen[0]
    assert pod["status"]["podIP"] and pod["status"]["hostIP"] and pod["status"]["qosClass"] == "Burstable"
    assert [c["name"] for c in pod["status"]["containerStatuses"]] == ["app", "sidecar"]
    assert all(c["started"] and c["ready"] for c in pod["status"]["containerStatuses"])
    assert pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert len({p["status"]["podIP"] for p in seen}) == SCALE  # no address handed out twice

    apps.patch_namespaced_deployment_scale("scale", namespace, {"spec": {"replicas": 0}})

    def all_gone() -> bool:
        seen[:] = _pods(core, namespace, "app=scale")
        return not seen

    wait_for(all_gone, timeout=DEADLINE, interval=1.0,
             message=lambda: f"all pods of the Deployment removed from member-1; saw {_summary(seen)}")


@pytest.fixture
def gpu_node(clusters: Clusters, namespace: str) -> Iterator[str]:
    """One extra member-2 node `dedicated=gpu:NoSchedule` with 2 GPUs, simulated in this process."""
    group = nodesim.NodeGroup(prefix=f"gpu-{namespace}", count=1, labels={"accelerator": "test-gpu"},
                              taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
                              allocatable={GPU: "2"})
    simulator = nodesim.NodeSimulator(clusters.api("member-2"), [group], workers=4)
    thread = threading.Thread(target=simulator.run, name="gpu-nodesim", daemon=True)
    thread.start()
    core, name = clusters.core("member-2"), f"{group.prefix}-0"
    try:
        yield name
        # Our simulator finishes the deletions of its node's pods: remove them while it runs.
        core.delete_collection_namespaced_pod(namespace)
        wait_for(lambda: not core.list_namespaced_pod(namespace).items, timeout=DEADLINE,
                 message=f"the test's pods in member-2 namespace {namespace} to be gone")
    finally:
        simulator.shutdown()
        thread.join(timeout=10)
        try:
            core.delete_node(name)
        except client.exceptions.ApiException as error:
            if error.status != 404:
                raise
    assert not thread.is_alive(), "the in-test node simulator did not stop"


def _gpu_pod(name: str, *, tolerate: bool) -> dict[str, Any]:
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "containers": [{"name": "train", "image": "registry.example/train:1",
                        "resources": {"limits": {GPU: "1"}}}],
        "tolerations": tolerations if tolerate else []}}


def _pod(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any]:
    answer = core.read_namespaced_pod(name, namespace, _preload_content=False)
    decoded: dict[str, Any] = json.loads(answer.data)
    return decoded


def test_tainted_node_group_with_an_extended_resource(
    clusters: Clusters, namespace: str, gpu_node: str
) -> None:
    core = clusters.core("member-2")

    def registered() -> client.V1Node | None:
        try:
            node = core.read_node(gpu_node)
        except client.exceptions.ApiException as error:
            if error.status == 404:
                return None
            raise
        ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        tainted = any(t.key == nodesim.NOT_READY_TAINT for t in node.spec.taints or [])
        return node if ready and not tainted else None

    node = wait_for(registered, timeout=DEADLINE, message=f"node {gpu_node} registered and Ready in member-2")
    assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [("dedicated", "gpu", "NoSchedule")]
    assert node.metadata.labels["accelerator"] == "test-gpu"
    assert node.metadata.labels["kubernetes.io/hostname"] == gpu_node
    assert node.status.allocatable[GPU] == "2" and node.status.capacity[GPU] == "2"
    assert node.status.allocatable["pods"] == "110"  # the defaults stay beside the extra resource
    leases = client.CoordinationV1Api(clusters.api("member-2"))
    lease = leases.read_namespaced_lease(gpu_node, "kube-node-lease")
    assert lease.spec.holder_identity == gpu_node and lease.spec.renew_time is not None
    assert [o.uid for o in lease.metadata.owner_references] == [node.metadata.uid]

    core.create_namespaced_pod(namespace, _gpu_pod("trainer", tolerate=True))
    core.create_namespaced_pod(namespace, _gpu_pod("intolerant", tolerate=False))

    def running() -> dict[str, Any] | None:
        pod = _pod(core, namespace, "trainer")
        return pod if _running_ready(pod) else None

    trainer = wait_for(running, timeout=DEADLINE, message="the GPU pod tolerating the taint to run")
    assert trainer["spec"]["nodeName"] == gpu_node

    def unschedulable() -> dict[str, Any] | None:
        pod = _pod(core, namespace, "intolerant")
        conditions = {c["type"]: c for c in pod["status"].get("conditions", [])}
        scheduled = conditions.get("PodScheduled", {})
        unschedulable = (scheduled.get("status"), scheduled.get("reason")) == ("False", "Unschedulable")
        return pod if unschedulable else None

    intolerant = wait_for(unschedulable, timeout=DEADLINE,
                          message="the GPU pod without the toleration to be reported Unschedulable")
    assert not intolerant["spec"].get("nodeName")
