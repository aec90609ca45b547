"""Inventory benchmark (issue 7): the agent's memory, pool build and capacity fit on a big member.

Why these three numbers: Karmada's agent holds 266 MiB for a 5,000-node, 20,000-pod member and its
estimator answers "how many more replicas fit" in 11.7-14.2 ms per call. fedspread's agent keeps a
compact watch-fed cache instead of client models, folds nodes into pools, and the coordinator fits
a template on pools; this measures whether that design keeps its promise (goals: <= 200 MB,
<= 5 ms), on the real code paths and without a cluster:

* **Objects.** Realistic Node and Pod JSON (instance types, zones, spot capacity, a GPU kind with
  its taint, cordoned and NotReady nodes; DaemonSet pods on every node, Deployments' pods with
  sidecars, limits-only containers and best-effort pods in several namespaces, some fedspread
  spreads' pods; Pending, unschedulable and Succeeded pods) are synthesized page by page and served
  by a fake *lister* shaped like the generated client's (`list_node(limit=, _continue=, ...)`,
  raw JSON bytes, selectors honoured, a watch that blocks until cut). So `agents.controller.cache`
  runs unchanged: its four `federation.kube.reflector` threads list, emit, and the cache converts
  and stores — the path every watch event takes. No kube-apiserver is involved.
* **Memory** is RSS growth (`/proc/self/status` VmRSS) of a fresh interpreter from just before the
  cache starts to after it has synced and the pools are built, `gc.collect()`ed: what the process
  really holds, allocator fragmentation included, which is what Karmada's number is. The
  interpreter and the agent's imports (Kubernetes client, gRPC) are reported apart
  (`rss_total_mb`). `live_mb` is what the cache's data really occupies (every object reachable
  from its stores, interned requests, the reflectors' version maps, and the pools; it agrees with
  tracemalloc, which `--tracemalloc` runs but which is ten times slower); the gap to `rss_mb` is
  pymalloc arenas kept alive by a few long-lived views among each list page's parsed JSON.
  JSON pages are generated lazily, as a server sends them, so only the synthesis plan (a few
  small tuples per object) exists before the baseline.
* **Pools**: `inventory.pools` over the cache's nodes and usage, as `InventoryReporter.pools` calls
  it on a change (first call cold, then p50 of repeats).
* **Fit**: how many more pods of one template fit on those pools, p50 over repeated questions, as
  the coordinator answers it (pools parsed into integer nano-units once per inventory report, by
  `fit.pool_of`; per question `fit.admitting` and `fit.slots`), and as `fit.cluster_capacity` (the
  exact-Fraction reference, used by Explain) for comparison; both must give the same answer.

`rss_mb` and `fit_ms` are reported against the goals, never asserted: a benchmark records.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import gc
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
import types
from collections.abc import Callable, Sequence
from typing import Any

Json = dict[str, Any]

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOALS = {"rss_mb": 200.0, "fit_ms": 5.0}
KARMADA = {"agent_rss_mib": 266, "estimator_ms_per_op": [11.7, 14.2]}
SEED = 7
SPREAD_LABEL = "fedspread.io/spread"
SUBSET_ANNOTATION = "fedspread.io/subset"
"""Copies of `agents.assignment`'s names: the parent process imports nothing of the agent."""


@dataclasses.dataclass(frozen=True)
class Size:
    """How big a member cluster to synthesize."""

    nodes: int
    pods: int


FULL = Size(nodes=5_000, pods=20_000)
QUICK = Size(nodes=1_000, pods=4_000)


def run(*, quick: bool, report: Callable[[str], None]) -> dict[str, Any]:
    """The runner's entry point (bench/run.py): the full or quick size, in fresh interpreters."""
    return measure(QUICK if quick else FULL, report=report)


def measure(
    size: Size, *, report: Callable[[str], None], fit_runs: int = 500, pool_runs: int = 7,
    traced: bool = False,
) -> dict[str, Any]:
    """Measure `size` in a fresh interpreter (and once more under tracemalloc if `traced`: slow)."""
    report(f"{size.nodes} nodes, {size.pods} pods; RSS in a fresh interpreter")
    result = _child(size, report=report, extra=["--fit-runs", str(fit_runs), "--pool-runs", str(pool_runs)])
    if traced:
        report("again under tracemalloc (Python heap only, a cross-check)")
        result["traced_mb"] = _child(size, report=report, extra=["--tracemalloc"])["traced_mb"]
    result["goals"] = dict(GOALS)
    result["karmada"] = dict(KARMADA)
    result["within_goals"] = {k: result[k] <= goal for k, goal in GOALS.items()}
    report(f"rss {result['rss_mb']} MB (goal <= {GOALS['rss_mb']:g}), {result['pools']} pools built in "
           f"{result['pool_build_ms']} ms, fit {result['fit_ms']} ms p50 (goal <= {GOALS['fit_ms']:g}; "
           f"Fraction reference {result['fit_reference_ms']} ms)")
    return result


def _child(size: Size, *, report: Callable[[str], None], extra: Sequence[str]) -> dict[str, Any]:
    """Run `python -m bench.inventory` for `size`; pass its progress to `report`, return its result."""
    command = [sys.executable, "-m", "bench.inventory", "--nodes", str(size.nodes), "--pods", str(size.pods),
               *extra]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    result: dict[str, Any] | None = None
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            message = json.loads(line)
            if "report" in message:
                report(message["report"])
            else:
                result = message["result"]
    if child.returncode != 0 or result is None:
        raise RuntimeError(f"inventory measurement failed (exit {child.returncode})")
    return result


# --- synthesis ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NodeKind:
    """A machine type as a cloud provider's node group reports it."""

    instance_type: str
    cpu: str
    memory: str
    allocatable_cpu: str
    allocatable_memory: str
    pods: str
    arch: str = "amd64"
    gpus: int = 0
    weight: int = 1


NODE_KINDS = (
    NodeKind("m6i.2xlarge", "8", "32408832Ki", "7910m", "31391952Ki", "58", weight=35),
    NodeKind("m6i.4xlarge", "16", "64963468Ki", "15890m", "63946588Ki", "234", weight=30),
    NodeKind("c7g.4xlarge", "16", "32408832Ki", "15890m", "31391952Ki", "234", arch="arm64", weight=15),
    NodeKind("r6i.4xlarge", "16", "130006060Ki", "15890m", "128989180Ki", "234", weight=15),
    NodeKind("g5.2xlarge", "8", "32408832Ki", "7910m", "31391952Ki", "58", gpus=1, weight=5),
)
ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
SPOT_TAINT = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                       "timeAdded": "2025-01-01T10:00:00Z"}
IMAGES = tuple(f"123456789012.dkr.ecr.eu-west-1.amazonaws.com/team-{i}/service-{i}:v1.{i}.{i * 7 % 13}"
               for i in range(24))


@dataclasses.dataclass(frozen=True)
class Workload:
    """A Deployment (or DaemonSet) whose pods share one spec."""

    namespace: str
    name: str
    containers: tuple[Json, ...]
    init_containers: tuple[Json, ...] = ()
    gpu: bool = False
    spread: str = ""
    """The fedspread spread managing it, if any (its pods carry the spread label)."""
    daemon: bool = False


def _container(name: str, image: str, *, requests: Json | None = None, limits: Json | None = None,
               restart_policy: str | None = None) -> Json:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    body: Json = {
        "name": name, "image": image, "imagePullPolicy": "IfNotPresent", "resources": resources,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": "POD_NAME",
                 "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                {"name": "LOG_LEVEL", "value": "info"}],
        "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                          "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }
    if restart_policy:
        body["restartPolicy"] = restart_policy
    return body


def _workloads(count: int) -> list[Workload]:
    """DaemonSets, then `count` Deployments of assorted shapes in several namespaces."""
    sidecar = _container("istio-proxy", "istio/proxyv2:1.22.1", requests={"cpu": "100m", "memory": "128Mi"},
                         limits={"cpu": "2", "memory": "1Gi"})
    native_sidecar = _container("log-shipper", "fluent/fluent-bit:3.0",
                                requests={"cpu": "20m", "memory": "32Mi"}, restart_policy="Always")
    init = _container("migrate", "migrate/migrate:4", requests={"cpu": "500m", "memory": "256Mi"})
    shapes: list[tuple[tuple[Json, ...], tuple[Json, ...], bool]] = [
        ((_container("app", IMAGES[0], requests={"cpu": "250m", "memory": "256Mi"}), sidecar), (), False),
        ((_container("app", IMAGES[1], requests={"cpu": "500m", "memory": "512Mi"}),), (), False),
        ((_container("app", IMAGES[2], requests={"cpu": "1", "memory": "2Gi"}),), (init,), False),
        ((_container("app", IMAGES[3], limits={"cpu": "200m", "memory": "1Gi"}),), (), False),
        ((_container("app", IMAGES[4], requests={"cpu": "2", "memory": "4Gi"}),), (native_sidecar,), False),
        ((_container("app", IMAGES[5], requests={"cpu": "50m", "memory": "64Mi"}),), (), False),
        ((_container("app", IMAGES[6]),), (), False),  # best effort
        ((_container("trainer", IMAGES[7], requests={"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
                     limits={"nvidia.com/gpu": "1"}),), (), True),
    ]
    namespaces = ("shop", "payments", "search", "ads", "checkout", "media", "ml", "batch")
    found = [
        Workload("kube-system", "kube-proxy",
                 (_container("kube-proxy", "registry.k8s.io/kube-proxy:v1.30.2", requests={"cpu": "100m"}),),
                 daemon=True),
        Workload("monitoring", "node-exporter",
                 (_container("node-exporter", "prom/node-exporter:v1.8.1",
                             requests={"cpu": "100m", "memory": "180Mi"},
                             limits={"cpu": "200m", "memory": "250Mi"}),), daemon=True),
    ]
    for i in range(count):
        containers, inits, gpu = shapes[i % len(shapes)]
        namespace = "ml" if gpu else namespaces[i % len(namespaces)]
        name = f"svc-{i:03d}"
        spread = name if i % 4 == 1 else ""
        found.append(Workload(namespace, name, containers, inits, gpu=gpu, spread=spread))
    return found


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything needed to build each object on demand: a few small tuples per object."""

    nodes: tuple[tuple[int, int, bool, bool, bool], ...]
    """Per node: (kind index, zone index, spot, ready, cordoned)."""
    workloads: tuple[Workload, ...]
    pods: tuple[tuple[int, int, int, str], ...]
    """Per pod: (workload index, ordinal in its workload, node index or -1, phase)."""

    def node_name(self, index: int) -> str:
        """The node's name, as EKS names them."""
        return f"ip-10-{index // 65536 % 256}-{index // 256 % 256}-{index % 256}.eu-west-1.compute.internal"


def plan(size: Size, *, seed: int = SEED) -> Plan:
    """A member cluster of `size`: node kinds and states, workloads, and where each pod is bound."""
    rng = random.Random(seed)
    kinds = rng.choices(range(len(NODE_KINDS)), weights=[k.weight for k in NODE_KINDS], k=size.nodes)
    nodes = tuple(
        (kind, i % len(ZONES), rng.random() < 0.2, rng.random() >= 0.005, rng.random() < 0.005)
        for i, kind in enumerate(kinds)
    )
    per_node = min(2, size.pods // max(1, size.nodes) // 2)  # DaemonSet pods on every node
    app_pods = size.pods - per_node * size.nodes
    workloads = tuple(_workloads(max(8, app_pods // 50)))
    pods: list[tuple[int, int, int, str]] = [
        (d, n, n, "Running") for d in range(per_node) for n in range(size.nodes)
    ]
    gpu_nodes = [i for i, n in enumerate(nodes) if NODE_KINDS[n[0]].gpus and n[3] and not n[4]]
    cpu_nodes = [i for i, n in enumerate(nodes) if not NODE_KINDS[n[0]].gpus and n[3] and not n[4]]
    apps = [i for i, w in enumerate(workloads) if not w.daemon]
    weights = [1 + (i * 37) % 11 for i in range(len(apps))]  # some big Deployments, some small
    ordinals: dict[int, int] = {}
    for workload in rng.choices(apps, weights=weights, k=app_pods):
        ordinal = ordinals[workload] = ordinals.get(workload, 0) + 1
        candidates = gpu_nodes if workloads[workload].gpu else cpu_nodes
        roll = rng.random()
        if roll < 0.01 or not candidates:
            pods.append((workload, ordinal, -1, "Pending"))  # unschedulable
        elif roll < 0.02:
            pods.append((workload, ordinal, rng.choice(candidates), "Pending"))  # bound, starting
        elif roll < 0.03 and workloads[workload].namespace == "batch":
            pods.append((workload, ordinal, rng.choice(candidates), "Succeeded"))
        else:
            pods.append((workload, ordinal, rng.choice(candidates), "Running"))
    return Plan(nodes=nodes, workloads=workloads, pods=tuple(pods))


def node_json(item: Plan, index: int) -> Json:
    """Node `index` as the apiserver lists it (managed fields and image list included)."""
    kind_index, zone, spot, ready, cordoned = item.nodes[index]
    kind = NODE_KINDS[kind_index]
    name = item.node_name(index)
    group = f"ng-{kind.instance_type.replace('.', '-')}-{'spot' if spot else 'od'}"
    labels = {
        "beta.kubernetes.io/arch": kind.arch, "beta.kubernetes.io/instance-type": kind.instance_type,
        "beta.kubernetes.io/os": "linux", "eks.amazonaws.com/capacityType": "SPOT" if spot else "ON_DEMAND",
        "eks.amazonaws.com/nodegroup": group, "failure-domain.beta.kubernetes.io/region": "eu-west-1",
        "failure-domain.beta.kubernetes.io/zone": ZONES[zone], "kubernetes.io/arch": kind.arch,
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": kind.instance_type, "topology.kubernetes.io/region": "eu-west-1",
        "topology.kubernetes.io/zone": ZONES[zone],
    }
    taints = [t for t, on in ((GPU_TAINT, kind.gpus), (SPOT_TAINT, spot), (UNSCHEDULABLE_TAINT, cordoned))
              if on]
    capacity = {"cpu": kind.cpu, "memory": kind.memory, "pods": kind.pods, "ephemeral-storage": "104845292Ki",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    allocatable = {**capacity, "cpu": kind.allocatable_cpu, "memory": kind.allocatable_memory,
                   "ephemeral-storage": "95551679124"}
    if kind.gpus:
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(kind.gpus)
    stamp = "2025-01-01T10:00:00Z"
    address = f"10.0.{index // 256 % 256}.{index % 256}"
    conditions = [
        {"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": f"kubelet has {r.lower()}",
         "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
        for t, r in (("MemoryPressure", "SufficientMemory"), ("DiskPressure", "NoDiskPressure"),
                     ("PIDPressure", "SufficientPID"))
    ]
    conditions.append({"type": "Ready", "status": "True" if ready else "Unknown",
                       "reason": "KubeletReady" if ready else "NodeStatusUnknown",
                       "message": "kubelet is posting ready status" if ready else "Kubelet stopped posting",
                       "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})
    spec: Json = {"providerID": f"aws:///{ZONES[zone]}/i-{index:017x}", "podCIDR": f"10.{index % 250}.0.0/24"}
    if taints:
        spec["taints"] = taints
    if cordoned:
        spec["unschedulable"] = True
    return {
        "metadata": {
            "name": name, "uid": f"{index:08x}-0000-4000-8000-{index:012x}",
            "resourceVersion": str(10_000 + index), "creationTimestamp": stamp, "labels": labels,
            "annotations": {"alpha.kubernetes.io/provided-node-ip": address,
                            "node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": stamp,
                               "fieldsType": "FieldsV1", "subresource": "status",
                               "fieldsV1": {"f:status": {"f:conditions": {}, "f:images": {}}}}],
        },
        "spec": spec,
        "status": {
            "capacity": capacity, "allocatable": allocatable, "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": address},
                          {"type": "Hostname", "address": name}, {"type": "InternalDNS", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": f"{index:032x}", "systemUUID": f"ec2{index:029x}",
                         "bootID": f"{index:032x}", "kernelVersion": "6.1.94-99.176.amzn2023.x86_64",
                         "osImage": "Amazon Linux 2023", "containerRuntimeVersion": "containerd://1.7.11",
                         "kubeletVersion": "v1.30.2-eks", "kubeProxyVersion": "v1.30.2-eks",
                         "operatingSystem": "linux", "architecture": kind.arch},
            "images": [{"names": [f"{image}@sha256:{i:064x}", image], "sizeBytes": 50_000_000 + i * 1_000_003}
                       for i, image in enumerate(IMAGES[(index % 8):(index % 8) + 16])],
        },
    }


def pod_json(item: Plan, index: int) -> Json:
    """Pod `index` as the apiserver lists it."""
    workload_index, ordinal, node, phase = item.pods[index]
    workload = item.workloads[workload_index]
    stamp = "2025-01-01T11:00:00Z"
    template_hash = f"{workload_index * 7919 % 10**10:010d}"[:10]
    name = (f"{workload.name}-{ordinal:05x}" if workload.daemon
            else f"{workload.name}-{template_hash[:9]}-{ordinal:05x}")
    labels = {"app.kubernetes.io/name": workload.name, "app.kubernetes.io/part-of": workload.namespace}
    annotations = {"kubectl.kubernetes.io/default-container": workload.containers[0]["name"]}
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet" if workload.daemon else "ReplicaSet",
             "name": workload.name if workload.daemon else f"{workload.name}-{template_hash[:9]}",
             "uid": f"{workload_index:08x}-1111-4000-8000-{workload_index:012x}", "controller": True,
             "blockOwnerDeletion": True}
    if not workload.daemon:
        labels["pod-template-hash"] = template_hash[:9]
    if workload.spread:
        labels[SPREAD_LABEL] = workload.spread
        annotations[SUBSET_ANNOTATION] = ("onprem", "cloud")[ordinal % 2]
        annotations["controller.kubernetes.io/pod-deletion-cost"] = str(100 - ordinal % 100)
    spec: Json = {
        "containers": list(workload.containers), "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default", "schedulerName": "default-scheduler", "priority": 0,
        "terminationGracePeriodSeconds": 30, "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "securityContext": {}, "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}],
        "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
    }
    if workload.init_containers:
        spec["initContainers"] = list(workload.init_containers)
    if workload.gpu:
        spec["tolerations"].append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
        spec["nodeSelector"] = {"node.kubernetes.io/instance-type": "g5.2xlarge"}
    status: Json = {"phase": phase, "qosClass": "Burstable"}
    if node >= 0:
        spec["nodeName"] = item.node_name(node)
        running = phase == "Running"
        status.update({
            "hostIP": f"10.0.{node // 256 % 256}.{node % 256}",
            "podIP": f"10.1.{index // 256 % 256}.{index % 256}", "startTime": stamp,
            "conditions": [{"type": t, "status": "True" if running or t == "PodScheduled" else "False",
                            "lastProbeTime": None, "lastTransitionTime": stamp}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [
                {"name": c["name"], "image": c["image"], "imageID": f"{c['image']}@sha256:{index:064x}",
                 "containerID": f"containerd://{index:064x}", "ready": running, "restartCount": index % 3,
                 "started": running, "state": {"running": {"startedAt": stamp}} if running else
                 {"waiting": {"reason": "ContainerCreating"}}}
                for c in workload.containers],
        })
    else:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": "0/5000 nodes are available: insufficient cpu.",
                                 "lastProbeTime": None, "lastTransitionTime": stamp}]
    return {
        "metadata": {
            "name": name, "generateName": name[:-5], "namespace": workload.namespace,
            "uid": f"{index:08x}-2222-4000-8000-{index:012x}", "resourceVersion": str(100_000 + index),
            "creationTimestamp": stamp, "labels": labels, "annotations": annotations,
            "ownerReferences": [owner],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                               "apiVersion": "v1", "time": stamp, "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {}, "f:ownerReferences": {}}}},
                              {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": stamp,
                               "fieldsType": "FieldsV1", "subresource": "status",
                               "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}}}}],
        },
        "spec": spec,
        "status": status,
    }


def deployment_json(item: Plan, index: int) -> Json:
    """Workload `index` (a spread's member Deployment) as the apiserver lists it."""
    workload = item.workloads[index]
    replicas = 20 + index % 30
    return {
        "metadata": {"name": workload.name, "namespace": workload.namespace,
                     "uid": f"{index:08x}-3333-4000-8000-{index:012x}",
                     "resourceVersion": str(500_000 + index), "generation": 3,
                     "labels": {SPREAD_LABEL: workload.spread},
                     "annotations": {"fedspread.io/generation": "3", "fedspread.io/template-hash": "abc123",
                                     "deployment.kubernetes.io/revision": "2"}},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": list(workload.containers)}}},
        "status": {"observedGeneration": 3, "replicas": replicas, "readyReplicas": replicas,
                   "updatedReplicas": replicas, "availableReplicas": replicas},
    }


# --- the fake apiserver, at the level of the generated client ------------------------------------


class _Page:
    """A list response read with `_preload_content=False`: the raw body."""

    def __init__(self, data: bytes) -> None:
        self.data = data


class _QuietWatch:
    """A watch on which nothing happens until `shutdown()` (the cache stopping) cuts it."""

    def __init__(self) -> None:
        self._cut = threading.Event()

    def stream(self, amt: Any = None, decode_content: bool = False) -> Any:
        self._cut.wait()
        raise ConnectionError("watch cut")
        yield b""  # a generator, as urllib3's stream is

    def shutdown(self) -> None:
        self._cut.set()

    def release_conn(self) -> None:
        """Nothing to release."""


class FakeApi:
    """`CoreV1Api`/`AppsV1Api` listers over a `Plan`, honouring the selectors the agent's cache uses.

    Objects are built and serialized page by page when asked, as a server streams them; the CPU
    time spent doing so is counted in `serve_seconds`, so it can be told apart from the cache's.
    """

    def __init__(self, item: Plan) -> None:
        self.plan = item
        self.serve_seconds = 0.0
        self._lock = threading.Lock()
        self._nodes = range(len(item.nodes))
        self._all_pods = range(len(item.pods))
        self._bound_active = [i for i, p in enumerate(item.pods)
                              if p[2] >= 0 and p[3] not in ("Succeeded", "Failed")]
        self._spread_pods = [i for i, p in enumerate(item.pods) if item.workloads[p[0]].spread]
        self._spread_workloads = [i for i, w in enumerate(item.workloads) if w.spread]

    @property
    def bound_active(self) -> int:
        """How many pods the cache should count as node usage."""
        return len(self._bound_active)

    def list_node(self, **query: Any) -> Any:
        return self._serve(query, self._nodes, node_json)

    def list_pod_for_all_namespaces(self, **query: Any) -> Any:
        indices: Sequence[int] = self._all_pods
        if query.get("field_selector"):
            indices = self._bound_active  # the cache's only field selector: bound, unfinished pods
        elif query.get("label_selector") == SPREAD_LABEL:
            indices = self._spread_pods
        return self._serve(query, indices, pod_json)

    def list_deployment_for_all_namespaces(self, **query: Any) -> Any:
        return self._serve(query, self._spread_workloads, deployment_json)

    def _serve(self, query: Json, indices: Sequence[int], build: Callable[[Plan, int], Json]) -> Any:
        if query.get("watch"):
            return _QuietWatch()
        started = time.thread_time()
        start, limit = int(query.get("_continue") or 0), int(query.get("limit") or len(indices))
        end = min(start + limit, len(indices))
        meta: Json = {"resourceVersion": "999999"}
        if end < len(indices):
            meta["continue"] = str(end)
        body = {"kind": "List", "apiVersion": "v1", "metadata": meta,
                "items": [build(self.plan, i) for i in indices[start:end]]}
        page = _Page(json.dumps(body).encode())
        with self._lock:
            self.serve_seconds += time.thread_time() - started
        return page


# --- the measurement (in the fresh interpreter) ---------------------------------------------------


def _status_mb(field: str) -> float:
    """A /proc/self/status memory field (VmRSS, VmHWM) in MiB."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _deep_mb(*roots: object) -> float:
    """Bytes of every object reachable from `roots` (each counted once; types and modules skipped)."""
    seen: set[int] = set()
    stack = list(roots)
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total / 2**20


def _trimmed_mb() -> float:
    """VmRSS after glibc's `malloc_trim(0)` hands freed heap back (what the allocator merely kept)."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return _status_mb("VmRSS")


def _timed(call: Callable[[], object], *, runs: int) -> list[float]:
    """Seconds each of `runs` calls took."""
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return times


def _ms(seconds: Sequence[float]) -> float:
    return round(statistics.median(seconds) * 1000, 3)


TEMPLATE: Json = {"spec": {"template": {"spec": {
    "nodeSelector": {"kubernetes.io/arch": "amd64"},
    "tolerations": [{"key": "spot", "operator": "Exists"}],
    "containers": [{"name": "web", "image": "nginx",
                    "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}},
                   {"name": "istio-proxy", "image": "istio/proxyv2",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
}}}}
"""The template fitted on the pools: a web pod with a sidecar, amd64 only, tolerating spot."""


def child_measure(
    size: Size, *, emit: Callable[[str], None], fit_runs: int, pool_runs: int, traced: bool = False,
) -> dict[str, Any]:
    """Feed the agent's cache, then measure memory, pool build and fit (call in a fresh interpreter)."""
    import agents.main  # noqa: F401  the agent's whole import graph belongs to its baseline
    from agents import outbox
    from agents.controller import cache
    from agents.inventory import reporter
    from federation.api import cluster
    from federation.core import fit, inventory

    item = plan(size)
    api = FakeApi(item)
    gc.collect()
    baseline = _status_mb("VmRSS")
    if traced:
        tracemalloc.start()
    feed = cache.Cache(api, api)
    started = time.perf_counter()
    feed.start()
    try:
        if not feed.wait_synced(timeout=900):
            raise RuntimeError("the cache did not sync within 900 s")
        wall = time.perf_counter() - started
        nodes, usage = feed.nodes(), feed.usage()
        if (len(nodes), len(usage)) != (size.nodes, api.bound_active):
            raise RuntimeError(f"cache holds {len(nodes)} nodes, {len(usage)} usages; expected "
                               f"{size.nodes}, {api.bound_active}")
        emit(f"cache synced: {len(nodes)} nodes, {len(usage)} bound pods, "
             f"{sum(len(feed.spread_pods(s)) for s in feed.spreads())} spread pods, "
             f"{len(feed.deployments())} Deployments in {wall:.1f} s")
        first = time.perf_counter()
        pools = reporter.InventoryReporter(feed, outbox.Outbox()).pools()
        pool_first = time.perf_counter() - first
        del nodes, usage
        gc.collect()
        if traced:
            current, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            return {"traced_mb": round(current / 2**20, 1)}
        rss = _status_mb("VmRSS")
        peak = _status_mb("VmHWM")
        trimmed = _trimmed_mb()
        live = _deep_mb(feed._stores, feed._interned, [r._known for r in feed._reflectors], pools)
        emit(f"{len(pools)} pools; RSS {baseline:.0f} -> {rss:.0f} MiB (peak {peak:.0f}, "
             f"{trimmed:.0f} after malloc_trim)")
        builds = []
        for _ in range(pool_runs):
            began = time.perf_counter()
            inventory.pools(feed.nodes(), feed.usage())
            builds.append(time.perf_counter() - began)
        shape = fit.shape_from_deployment(TEMPLATE)
        began = time.perf_counter()
        numbers = [fit.pool_of(pool) for pool in pools]  # once per inventory report, as the world does
        prepare = time.perf_counter() - began

        def question() -> int:
            """The coordinator's answer: admission, then free pods per pool, in integer nano-units."""
            requests = fit.requests_of(shape)
            return sum(fit.slots(numbers[i], numbers[i].requested, requests)
                       for i in fit.admitting(numbers, shape))

        member = cluster.ClusterCapacity(name="member", node_pools=pools)
        fits = fit.cluster_capacity(member, shape)  # warm: parsed quantities are cached, as in a coordinator
        if question() != fits:
            raise RuntimeError(f"the two fits disagree: {question()} != {fits}")
        times = _timed(question, runs=fit_runs)
        reference = _timed(lambda: fit.cluster_capacity(member, shape), runs=max(1, fit_runs // 5))
    finally:
        feed.stop()
    return {
        "nodes": size.nodes, "pods": size.pods, "rss_mb": round(rss - baseline, 1), "fit_ms": _ms(times),
        "pools": len(pools), "pool_build_ms": _ms(builds), "pool_first_ms": round(pool_first * 1000, 1),
        "pool_prepare_ms": round(prepare * 1000, 1), "fit_pods": fits, "fit_runs": fit_runs,
        "fit_p90_ms": round(sorted(times)[int(0.9 * (len(times) - 1))] * 1000, 3),
        "fit_reference_ms": _ms(reference),
        "rss_total_mb": round(rss, 1), "rss_baseline_mb": round(baseline, 1), "rss_peak_mb": round(peak, 1),
        "rss_trimmed_mb": round(trimmed - baseline, 1), "live_mb": round(live, 1),
        "bound_pods": api.bound_active, "sync_s": round(wall, 2),
        "cache_cpu_s": round(max(0.0, wall - api.serve_seconds), 2),
        "method": ("rss_mb: VmRSS growth of a fresh interpreter across cache sync + pool build, after gc "
                   "(baseline after imports incl. agents.main); live_mb: sizeof of every object reachable "
                   "from the cache's stores and the pools; rss_trimmed_mb: the growth after malloc_trim(0); "
                   "pool_build_ms: p50 of inventory.pools(cache.nodes(), cache.usage()); "
                   "fit_ms: p50 of one template's free pods over the pools as the coordinator answers it "
                   "(fit.requests_of + fit.admitting + fit.slots on pools parsed once by fit.pool_of, whose "
                   "time is pool_prepare_ms); fit_reference_ms: p50 of fit.cluster_capacity (Fractions), "
                   "same answer; cache_cpu_s: sync wall time minus the fake server's synthesis CPU "
                   "(approximate)"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """The fresh interpreter's side: measure, print progress and the result as JSON lines."""
    parser = argparse.ArgumentParser(prog="python -m bench.inventory", description=__doc__)
    parser.add_argument("--nodes", type=int, default=QUICK.nodes)
    parser.add_argument("--pods", type=int, default=QUICK.pods)
    parser.add_argument("--fit-runs", type=int, default=500)
    parser.add_argument("--pool-runs", type=int, default=7)
    parser.add_argument("--tracemalloc", action="store_true", help="measure the Python heap instead")
    options = parser.parse_args(argv)

    def emit(line: str) -> None:
        print(json.dumps({"report": line}), flush=True)

    result = child_measure(Size(options.nodes, options.pods), emit=emit, fit_runs=options.fit_runs,
                           pool_runs=options.pool_runs, traced=options.tracemalloc)
    print(json.dumps({"result": result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
