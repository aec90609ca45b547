"""A synthesized big member cluster for the inventory benchmark: its Nodes, Pods and Deployments.

Why synthesized, and why so varied: the benchmark measures the agent's real cache and pool code on
a 5,000-node, 100,000-pod member without a cluster, so the objects must look like a real cloud
member's as the apiserver lists them — instance types, zones, spot capacity, a GPU kind with its
taint, cordoned and NotReady nodes; DaemonSet pods on every node, Deployments' pods with sidecars,
limits-only containers and best-effort pods in several namespaces, some fedspread spreads' pods;
Pending, unschedulable and Succeeded pods; managed fields and image lists included. The load must
be a real one too, since the pools depend on it: pods are bound only where they fit, to the less
loaded of two sampled nodes (as the scheduler scores), and some nodes joined late (autoscaled), so
loads differ from node to node as they do in a live cluster and no node is overcommitted. Only the
synthesis plan (`plan`: a few small numbers per object) is held; `bench.synthetic_objects` builds
one object from it on demand, so a fake server can generate its pages lazily.
"""

from __future__ import annotations

import array
import dataclasses
import fractions
import math
import random
from collections.abc import Iterator, Sequence
from typing import Any

from federation.api import quantity
from federation.core import pod_shape

Json = dict[str, Any]

SEED = 7


@dataclasses.dataclass(frozen=True)
class Size:
    """How big a member cluster to synthesize."""

    nodes: int
    pods: int


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
    shape: int = -1
    """Which of `_workloads`' Deployment shapes its pods have (-1: a DaemonSet)."""


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
    shapes: list[tuple[tuple[Json, ...], tuple[Json, ...], bool]] = [  # in SHAPE_WEIGHTS' order
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
        found.append(Workload(namespace, name, containers, inits, gpu=gpu, spread=spread,
                              shape=i % len(shapes)))
    return found


PHASES = ("Running", "Pending", "Succeeded")

SHAPE_WEIGHTS = (6, 4, 2, 4, 1, 6, 2)
"""How often each non-GPU Deployment shape of `_workloads` is picked, per pod: small pods are the
most common (the average app pod requests ~0.37 cpu, so 100,000 pods fill ~55% of 5,000 nodes'
cpu). GPU pods are planned apart: as many as nine in ten GPU nodes can take."""

NEW_NODES = 0.15
"""The share of nodes that joined while the pods were being created (autoscaled): each takes pods
only from a random moment on, so they carry less than the others."""


class PodTable:
    """Per pod: (workload index, ordinal in its workload, node index or -1, phase), in arrays.

    Why arrays: the benchmark reports its measuring process's whole RSS, and 100,000 pods as tuples
    would add ~15 MB of synthesis to what is the agent's; as arrays they take ~1.3 MB.
    """

    def __init__(self) -> None:
        self._workload = array.array("i")
        self._ordinal = array.array("i")
        self._node = array.array("i")
        self._phase = bytearray()

    def append(self, workload: int, ordinal: int, node: int, phase: str) -> None:
        self._workload.append(workload)
        self._ordinal.append(ordinal)
        self._node.append(node)
        self._phase.append(PHASES.index(phase))

    def __len__(self) -> int:
        return len(self._phase)

    def __getitem__(self, index: int) -> tuple[int, int, int, str]:
        return self._workload[index], self._ordinal[index], self._node[index], PHASES[self._phase[index]]

    def __iter__(self) -> Iterator[tuple[int, int, int, str]]:
        return (self[i] for i in range(len(self)))


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything needed to build each object on demand: a few small numbers per object."""

    nodes: tuple[tuple[int, int, bool, bool, bool], ...]
    """Per node: (kind index, zone index, spot, ready, cordoned)."""
    workloads: tuple[Workload, ...]
    pods: PodTable

    def node_name(self, index: int) -> str:
        """The node's name, as EKS names them."""
        return f"ip-10-{index // 65536 % 256}-{index // 256 % 256}-{index % 256}.eu-west-1.compute.internal"


class _Room:
    """What each node has left, in whole units (milli-cpu, bytes, pods, GPUs): the scheduler's view."""

    def __init__(self, nodes: Sequence[tuple[int, int, bool, bool, bool]]) -> None:
        kinds = [NODE_KINDS[n[0]] for n in nodes]
        self.free = [[_units(k.allocatable_cpu, 1000), _units(k.allocatable_memory, 1), int(k.pods), k.gpus]
                     for k in kinds]
        self.cpu = [_units(k.allocatable_cpu, 1000) for k in kinds]

    def fits(self, node: int, need: Sequence[int]) -> bool:
        return all(have >= want for have, want in zip(self.free[node], need, strict=True))

    def take(self, node: int, need: Sequence[int]) -> None:
        self.free[node] = [have - want for have, want in zip(self.free[node], need, strict=True)]

    def used(self, node: int) -> float:
        """The share of the node's cpu requested (the scheduler's LeastAllocated score, inverted)."""
        return 1 - self.free[node][0] / self.cpu[node]


def _units(text: str, scale: int) -> int:
    """A quantity in whole units of 1/scale, rounded up."""
    return math.ceil(quantity.parse_quantity(text) * scale)


def pod_needs(workload: Workload) -> tuple[int, int, int, int]:
    """What one pod of the workload requests, as `_Room` counts it (the pod itself included)."""
    spec = {"containers": list(workload.containers), "initContainers": list(workload.init_containers)}
    requests = pod_shape.shape_from_pod_spec(spec).requests
    zero = fractions.Fraction(0)
    return (math.ceil(requests.get("cpu", zero) * 1000), math.ceil(requests.get("memory", zero)), 1,
            math.ceil(requests.get("nvidia.com/gpu", zero)))


def _bind(rng: random.Random, room: _Room, candidates: Sequence[int], need: Sequence[int],
          joined: Sequence[float], progress: float) -> int:
    """A node with room for the pod, as the scheduler would pick it: of up to two sampled feasible
    nodes (of 8 tries) that had joined by `progress`, the less allocated; -1 if none was found."""
    found: list[int] = []
    for _ in range(8):
        node = rng.choice(candidates)
        if joined[node] <= progress and room.fits(node, need):
            found.append(node)
            if len(found) == 2:
                break
    if not found:
        return -1
    return min(found, key=room.used)


def plan(size: Size, *, seed: int = SEED) -> Plan:
    """A member cluster of `size`: node kinds and states, workloads, and where each pod is bound.

    Pods are bound where the scheduler would put them: only on nodes with room (requests, pods
    limit, GPUs), the less allocated of two sampled ones; a pod that finds no room stays Pending.
    """
    rng = random.Random(seed)
    kinds = rng.choices(range(len(NODE_KINDS)), weights=[k.weight for k in NODE_KINDS], k=size.nodes)
    nodes = tuple(
        (kind, i % len(ZONES), rng.random() < 0.2, rng.random() >= 0.005, rng.random() < 0.005)
        for i, kind in enumerate(kinds)
    )
    joined = [rng.random() if rng.random() < NEW_NODES else 0.0 for _ in nodes]
    per_node = min(2, size.pods // max(1, size.nodes) // 2)  # DaemonSet pods on every node
    app_pods = size.pods - per_node * size.nodes
    workloads = tuple(_workloads(max(8, app_pods // 50)))
    needs = [pod_needs(w) for w in workloads]
    room = _Room(nodes)
    pods = PodTable()
    for d in range(per_node):
        for n in range(size.nodes):
            pods.append(d, n, n, "Running")
            room.take(n, needs[d])
    gpu_nodes = [i for i, n in enumerate(nodes) if NODE_KINDS[n[0]].gpus and n[3] and not n[4]]
    cpu_nodes = [i for i, n in enumerate(nodes) if not NODE_KINDS[n[0]].gpus and n[3] and not n[4]]
    apps = [i for i, w in enumerate(workloads) if not w.daemon and not w.gpu]
    weights = [(1 + (i * 37) % 11) * SHAPE_WEIGHTS[workloads[i].shape] for i in apps]
    gpu_apps = [i for i, w in enumerate(workloads) if w.gpu]
    gpu_pods = min(app_pods, len(gpu_nodes) * 9 // 10) if gpu_apps else 0
    chosen = rng.choices(apps, weights=weights, k=app_pods - gpu_pods) + rng.choices(gpu_apps, k=gpu_pods)
    rng.shuffle(chosen)
    ordinals: dict[int, int] = {}
    for number, workload in enumerate(chosen):
        ordinal = ordinals[workload] = ordinals.get(workload, 0) + 1
        candidates = gpu_nodes if workloads[workload].gpu else cpu_nodes
        roll = rng.random()
        node = -1 if roll < 0.01 or not candidates else _bind(
            rng, room, candidates, needs[workload], joined, number / len(chosen))
        if node < 0:
            pods.append(workload, ordinal, -1, "Pending")  # unschedulable
        elif roll < 0.03 and workloads[workload].namespace == "batch":
            pods.append(workload, ordinal, node, "Succeeded")  # done: its requests are free again
        else:
            room.take(node, needs[workload])
            pods.append(workload, ordinal, node, "Pending" if roll < 0.02 else "Running")  # bound
    return Plan(nodes=nodes, workloads=workloads, pods=pods)
