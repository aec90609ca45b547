"""The sandbox runs real applications: deletion-cost scale-down, Jobs that end, claims that bind.

What is tested, on the session sandbox's member-1 (its real controller-manager and scheduler, the
node simulator as kubelets):

* the ReplicaSet controller (our patched 1.20, `federation/sandbox/patches/`) deletes pods on
  scale-down by `controller.kubernetes.io/pod-deletion-cost`, lowest first, after its older rules (a
  not-ready pod goes before any ready one, whatever its cost) — for a ReplicaSet scaled directly and
  for a Deployment, whose controller scales its ReplicaSet;
* a batch/v1 Job with completions 3 completes (condition Complete); one whose pods exit 1 fails
  (condition Failed, BackoffLimitExceeded) under `Never` with backoffLimit 0, and under `OnFailure`
  once its container's restarts reach the backoffLimit — the node simulator ends their containers
  after `sandbox.fedspread.io/run-seconds` with `sandbox.fedspread.io/exit-code`;
* a claim without a class gets the member's default StorageClass and is bound to a volume the node
  simulator's provisioner made, which is deleted when the claim is; a StatefulSet with
  `volumeClaimTemplates` runs Ready pods on bound claims.

Why: fedspread's scale-down order, its Job and StatefulSet support rest on these behaviours of the
real controllers; a sandbox that faked them would prove nothing (a model of the 1.22 ranking is no
proof that a controller follows it).
"""

from __future__ import annotations

import functools
from typing import Any

from conftest import Clusters
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from waiting import wait_for

from federation.sandbox import kubelet_status, provisioner

MEMBER = "member-1"
WAIT = 90.0  # generous: the sandbox shares 2 cores with builds and other tests
COST = "controller.kubernetes.io/pod-deletion-cost"
GATE = "sandbox.fedspread.io/test-warm"
MERGE, STRATEGIC = "application/merge-patch+json", "application/strategic-merge-patch+json"


def template(app: str, *, annotations: dict[str, str] | None = None, gate: bool = False,
             policy: str = "Always") -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": policy, "containers": [
        {"name": "app", "image": "registry.example/app:1.0",
         "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
    if gate:
        spec["readinessGates"] = [{"conditionType": GATE}]
    return {"metadata": {"labels": {"app": app}, "annotations": annotations or {}}, "spec": spec}


def live_pods(clusters: Clusters, namespace: str, app: str) -> list[client.V1Pod]:
    """The app's pods not being deleted."""
    pods = clusters.core(MEMBER).list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return sorted((p for p in pods if p.metadata.deletion_timestamp is None), key=lambda p: p.metadata.name)


def ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def wait_pods(clusters: Clusters, namespace: str, app: str, count: int, *,
              ready_count: int) -> list[client.V1Pod]:
    """The app's `count` live pods, once exactly `ready_count` of them are Ready."""
    def settled() -> list[client.V1Pod] | None:
        pods = live_pods(clusters, namespace, app)
        return pods if len(pods) == count and sum(map(ready, pods)) == ready_count else None

    def seen() -> str:
        found = [(p.metadata.name, p.status.phase, ready(p)) for p in live_pods(clusters, namespace, app)]
        return f"{app}: {count} pods, {ready_count} Ready; saw {found}"

    return wait_for(settled, timeout=WAIT, message=seen)


def set_costs(clusters: Clusters, namespace: str, costs: dict[str, str]) -> None:
    for name, cost in costs.items():
        clusters.core(MEMBER).patch_namespaced_pod(
            name, namespace, {"metadata": {"annotations": {COST: cost}}}, _content_type=MERGE)


def test_scaling_a_replicaset_down_deletes_not_ready_then_the_cheapest_ready_pods(
        clusters: Clusters, namespace: str) -> None:
    apps = clusters.apps(MEMBER)
    apps.create_namespaced_replica_set(namespace, {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "ranked"},
        "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "ranked"}},
                 "template": template("ranked", gate=True)}})
    pods = wait_pods(clusters, namespace, "ranked", 6, ready_count=0)  # the gate holds them all
    cold, *warm = [p.metadata.name for p in pods]
    # The not-ready pod is the dearest: the cost comes after readiness, so it still goes first.
    costs = dict(zip(warm, ["30", "-5", "20", "10", "40"], strict=True)) | {cold: "1000"}
    set_costs(clusters, namespace, costs)
    for name in warm:
        clusters.core(MEMBER).patch_namespaced_pod_status(name, namespace, {"status": {"conditions": [
            {"type": GATE, "status": "True"}]}}, _content_type=STRATEGIC)  # merged by type
    wait_pods(clusters, namespace, "ranked", 6, ready_count=5)

    apps.patch_namespaced_replica_set("ranked", namespace, {"spec": {"replicas": 3}}, _content_type=MERGE)
    survivors = {p.metadata.name for p in wait_pods(clusters, namespace, "ranked", 3, ready_count=3)}
    assert survivors == {name for name in warm if int(costs[name]) >= 20}, costs


def test_scaling_a_deployment_down_deletes_its_cheapest_pods_first(
        clusters: Clusters, namespace: str) -> None:
    apps = clusters.apps(MEMBER)
    apps.create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "costed"},
        "spec": {"replicas": 7, "selector": {"matchLabels": {"app": "costed"}},
                 "template": template("costed")}})
    names = [p.metadata.name for p in wait_pods(clusters, namespace, "costed", 7, ready_count=7)]
    costs = dict(zip(names, ["7", "-100", "3", "12", "0", "-1", "2147483647"], strict=True))
    set_costs(clusters, namespace, costs)

    apps.patch_namespaced_deployment_scale("costed", namespace, {"spec": {"replicas": 3}},
                                           _content_type=MERGE)
    survivors = {p.metadata.name for p in wait_pods(clusters, namespace, "costed", 3, ready_count=3)}
    assert survivors == {name for name in names if int(costs[name]) >= 7}, costs


def job(name: str, *, completions: int, backoff_limit: int, exit_code: int,
        policy: str = "Never") -> dict[str, Any]:
    annotations = {kubelet_status.RUN_SECONDS: "1", kubelet_status.EXIT_CODE: str(exit_code)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"completions": completions, "parallelism": completions, "backoffLimit": backoff_limit,
                     "template": template(name, annotations=annotations, policy=policy)}}


def finished(clusters: Clusters, namespace: str, name: str) -> tuple[str, str | None] | None:
    """(the Job's Complete or Failed condition type, its reason) once one is True."""
    status = client.BatchV1Api(clusters.api(MEMBER)).read_namespaced_job_status(name, namespace).status
    done = [c for c in status.conditions or [] if c.type in ("Complete", "Failed") and c.status == "True"]
    return (done[0].type, done[0].reason) if done else None


def test_jobs_complete_or_fail_as_their_pods_exit(clusters: Clusters, namespace: str) -> None:
    batch = client.BatchV1Api(clusters.api(MEMBER))
    batch.create_namespaced_job(namespace, job("three", completions=3, backoff_limit=6, exit_code=0))
    batch.create_namespaced_job(namespace, job("fails", completions=1, backoff_limit=0, exit_code=1))
    batch.create_namespaced_job(namespace, job("crashes", completions=1, backoff_limit=2, exit_code=1,
                                               policy="OnFailure"))
    outcomes = {name: wait_for(functools.partial(finished, clusters, namespace, name), timeout=WAIT,
                               message=f"job {name} neither completed nor failed")
                for name in ("three", "fails", "crashes")}
    assert outcomes == {"three": ("Complete", None), "fails": ("Failed", "BackoffLimitExceeded"),
                        "crashes": ("Failed", "BackoffLimitExceeded")}

    assert batch.read_namespaced_job_status("three", namespace).status.succeeded == 3
    pods = clusters.core(MEMBER).list_namespaced_pod(namespace, label_selector="app=three").items
    assert [p.status.phase for p in pods] == ["Succeeded"] * 3
    for pod in pods:
        (container,) = pod.status.container_statuses
        assert container.state.terminated.exit_code == 0 and container.state.terminated.reason == "Completed"
    (failed,) = clusters.core(MEMBER).list_namespaced_pod(namespace, label_selector="app=fails").items
    assert failed.status.phase == "Failed"
    assert failed.status.container_statuses[0].state.terminated.exit_code == 1


def claim_phase(clusters: Clusters, namespace: str, name: str) -> client.V1PersistentVolumeClaim | None:
    found = clusters.core(MEMBER).read_namespaced_persistent_volume_claim(name, namespace)
    return found if found.status.phase == "Bound" else None


def test_a_claim_without_a_class_binds_to_a_provisioned_volume_deleted_with_it(
        clusters: Clusters, namespace: str) -> None:
    core = clusters.core(MEMBER)
    core.create_namespaced_persistent_volume_claim(namespace, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "scratch"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    bound = wait_for(lambda: claim_phase(clusters, namespace, "scratch"), timeout=WAIT,
                     message="claim scratch not Bound")
    assert bound.spec.storage_class_name == provisioner.STORAGE_CLASS
    volume = core.read_persistent_volume(bound.spec.volume_name)
    assert volume.metadata.annotations[provisioner.PROVISIONED_BY] == provisioner.PROVISIONER
    assert volume.spec.claim_ref.uid == bound.metadata.uid and volume.spec.capacity == {"storage": "1Gi"}

    core.delete_namespaced_persistent_volume_claim("scratch", namespace)

    def volume_gone() -> bool:
        try:
            core.read_persistent_volume(volume.metadata.name)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(volume_gone, timeout=WAIT, message=f"released volume {volume.metadata.name} not deleted")


def test_a_statefulset_with_volume_claim_templates_runs_on_bound_claims(
        clusters: Clusters, namespace: str) -> None:
    clusters.apps(MEMBER).create_namespaced_stateful_set(namespace, {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                 "template": template("web"),
                 "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                     "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}}]}})
    pods = wait_pods(clusters, namespace, "web", 2, ready_count=2)
    assert [p.metadata.name for p in pods] == ["web-0", "web-1"]
    for ordinal in (0, 1):
        bound = claim_phase(clusters, namespace, f"data-web-{ordinal}")
        assert bound is not None and bound.spec.storage_class_name == provisioner.STORAGE_CLASS
