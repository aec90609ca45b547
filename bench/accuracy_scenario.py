"""The accuracy benchmark's world: mixed node shapes, other workloads, subsets that patch their pods.

Why this scenario: Adaptive placement is only as good as its answer to "how many of
*this subset's* pods fit on *these* nodes now". What makes that answer hard in a real cluster is
all here, small:

* member `acc-mixed` has four node pools of different shapes — `general` (4 cpu, 16Gi), `large`
  (16 cpu, 64Gi), `arm` (4 cpu, 8Gi, `kubernetes.io/arch=arm64`) and `gpu` (8 cpu, 4 GPUs, tainted
  `nvidia.com/gpu:NoSchedule`) — and other workloads not under any spread hold part of them: a
  batch job anywhere the scheduler likes, an agent on the arm nodes, a database on the large ones,
  a trainer on the GPU node;
* member `acc-plain` (plain 4-cpu nodes, a log shipper) is where the rest overflows;
* the spread's template asks 500m/512Mi, but each subset's pods differ: `arm`'s patch adds a
  nodeSelector for arm64 and raises memory to 2Gi (memory binds), `large` selects its pool with a
  node term and its patch raises cpu to 2 (cpu binds, and a cap), `general` selects its pool and
  keeps the template, `cloud` is the other member.

Every shape is data here (`Shape`, `Subset`): the FederatedSpread, the other workloads' Deployments
and the measurement's "had room" judgement (`accuracy_pods`) are all made from the same numbers.
`Size.nodes` multiplies every node pool and every other workload; the steps stay below the total
room (about 35 replicas per multiple), so every replica has a place somewhere and the ideal is
100 % accuracy with no pod Pending long.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bench import accuracy_pods
from federation.api import common, names
from federation.demo import environment
from federation.sandbox import nodesim

MIXED, PLAIN = "acc-mixed", "acc-plain"
NAMESPACE, NAME = "shop", "web"
"""The spread (and its hub Deployment); its pods live in this namespace in every member."""
OTHERS = "others"
"""The members' namespace of the workloads that are not under any spread."""
CONTAINER = "main"
ARCH, POOL, GPU = "kubernetes.io/arch", "bench.fedspread.io/pool", "nvidia.com/gpu"
RESCHEDULE_SECONDS, UNSCHEDULABLE_SECONDS = 15, 60
"""The spread's Adaptive settings: a pod Pending-Unschedulable 15 s is rescheduled (the default is
30; the demo uses 10, which would delete stuck pods right at the 10 s the benchmark counts), and its
subset is avoided in that cluster for 60 s (default 300)."""


@dataclasses.dataclass(frozen=True)
class Shape:
    """One pod as the scheduler sees it: requests, the node labels it needs, the taint it tolerates."""

    cpu: str
    memory: str
    selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    gpus: int = 0

    def requests(self) -> dict[str, str]:
        """The container's resource requests."""
        return {"cpu": self.cpu, "memory": self.memory, **({GPU: str(self.gpus)} if self.gpus else {})}

    def need(self) -> accuracy_pods.Need:
        """What the room judgement needs of a node for one such pod (a GPU pod tolerates GPU nodes)."""
        return accuracy_pods.Need(resources=accuracy_pods.milli_units(self.requests()),
                                  selector=dict(self.selector),
                                  tolerated=frozenset({GPU}) if self.gpus else frozenset())

    def pod_spec(self) -> dict[str, Any]:
        """A pod spec of one container with these requests, node selector and toleration."""
        resources: dict[str, Any] = {"requests": self.requests()}
        if self.gpus:  # an extended resource is not overcommitted: its limit must equal the request
            resources["limits"] = {GPU: str(self.gpus)}
        spec: dict[str, Any] = {"containers": [{"name": CONTAINER, "image": "registry.local/bench",
                                                "resources": resources}]}
        if self.selector:
            spec["nodeSelector"] = dict(self.selector)
        if self.gpus:
            spec["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
        return spec


TEMPLATE = Shape(cpu="500m", memory="512Mi")
"""The spread's hub template."""


@dataclasses.dataclass(frozen=True)
class Subset:
    """One subset of the spread: its cluster, the pod it creates, which labels its node term selects
    (the pod's other selector labels come by its patch), its cap."""

    name: str
    cluster: str
    pod: Shape
    term: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cap: int | None = None

    def spec(self) -> dict[str, Any]:
        """The subset as the FederatedSpread lists it: a node term and a strategic-merge patch that
        turn the template into `pod`."""
        subset: dict[str, Any] = {"name": self.name, "clusters": [self.cluster]}
        if self.term:
            subset["requiredNodeSelectorTerm"] = {"matchExpressions": [
                {"key": key, "operator": "In", "values": [value]} for key, value in self.term.items()]}
        patch: dict[str, Any] = {}
        if by_patch := {k: v for k, v in self.pod.selector.items() if k not in self.term}:
            patch["nodeSelector"] = by_patch
        if self.pod.requests() != TEMPLATE.requests():
            patch["containers"] = [{"name": CONTAINER, "resources": {"requests": self.pod.requests()}}]
        if patch:
            subset["patch"] = {"spec": patch}
        if self.cap is not None:
            subset["maxReplicas"] = self.cap
        return subset

    def room(self) -> accuracy_pods.SubsetRoom:
        """The subset as the "had room" judgement sees it."""
        return accuracy_pods.SubsetRoom(name=self.name, cluster=self.cluster, need=self.pod.need(),
                                        cap=self.cap)


@dataclasses.dataclass(frozen=True)
class Workload:
    """A plain Deployment in a member cluster, under no spread: it holds room the spread cannot use."""

    name: str
    cluster: str
    replicas: int
    pod: Shape

    def deployment(self) -> dict[str, Any]:
        """Its Deployment in namespace OTHERS."""
        labels = {"app": self.name}
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": self.name, "namespace": OTHERS, "labels": labels},
                "spec": {"replicas": self.replicas, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": self.pod.pod_spec()}}}


@dataclasses.dataclass(frozen=True)
class Size:
    """How big: every node pool and other workload times `nodes`; the hub replicas, step by step."""

    nodes: int
    steps: tuple[int, ...]


QUICK = Size(nodes=1, steps=(4, 12, 24, 30))
FULL = Size(nodes=5, steps=(10, 40, 80, 120, 160))


@dataclasses.dataclass(frozen=True)
class Scenario:
    """The members, the workloads that are not ours, and the spread's subsets, at one size."""

    size: Size
    members: tuple[environment.MemberPlan, ...]
    workloads: tuple[Workload, ...]
    subsets: tuple[Subset, ...]

    def spread(self) -> dict[str, Any]:
        """The FederatedSpread (Adaptive) over `subsets`, in order."""
        adaptive = {"rescheduleCriticalSeconds": RESCHEDULE_SECONDS,
                    "unschedulableSeconds": UNSCHEDULABLE_SECONDS}
        return {"apiVersion": f"{common.API_GROUP}/{common.API_VERSION}", "kind": "FederatedSpread",
                "metadata": {"name": NAME, "namespace": NAMESPACE},
                "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME},
                         "subsets": [s.spec() for s in self.subsets],
                         "scheduleStrategy": {"type": "Adaptive", "adaptive": adaptive}}}

    def deployment(self, replicas: int) -> dict[str, Any]:
        """The hub Deployment: the template, `replicas` of it."""
        labels = {"app": NAME}
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
                "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": TEMPLATE.pod_spec()}}}

    def requested_cpu(self, cluster: str) -> int:
        """Milli-cpus the other workloads request in `cluster` (what its inventory shows before ours)."""
        return sum(w.replicas * accuracy_pods.milli_units(w.pod.requests())["cpu"]
                   for w in self.workloads if w.cluster == cluster)

    def describe(self) -> dict[str, Any]:
        """The scenario in the results document: node pools, other workloads, subsets, steps."""
        return {
            "members": {m.name: [{"pool": g.labels.get(POOL), "nodes": g.count, "allocatable": g.allocatable,
                                  "labels": {k: v for k, v in g.labels.items() if k != POOL},
                                  "taints": [t["key"] for t in g.taints]} for g in m.groups]
                        for m in self.members},
            "other_workloads": [{"name": w.name, "cluster": w.cluster, "replicas": w.replicas,
                                 "requests": w.pod.requests(), "selector": dict(w.pod.selector)}
                                for w in self.workloads],
            "subsets": [s.spec() for s in self.subsets],
            "template_requests": TEMPLATE.requests(),
            "steps": list(self.size.steps),
            "adaptive": {"rescheduleCriticalSeconds": RESCHEDULE_SECONDS,
                         "unschedulableSeconds": UNSCHEDULABLE_SECONDS},
        }


def _pool(member: str, pool: str, count: int, *, cpu: str, memory: str,
          labels: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None,
          taints: tuple[dict[str, str], ...] = ()) -> nodesim.NodeGroup:
    """`count` nodes of one shape, labelled with their pool."""
    return nodesim.NodeGroup(prefix=f"{member}-{pool}", count=count, labels={POOL: pool, **(labels or {})},
                             taints=list(taints),
                             allocatable={"cpu": cpu, "memory": memory, "pods": "110", **(extra or {})})


def scenario(size: Size) -> Scenario:
    """The scenario at `size` (see the module's docstring)."""
    n = size.nodes
    gpu_taint = {"key": GPU, "value": "present", "effect": "NoSchedule"}
    mixed = environment.MemberPlan.of_groups(MIXED, "onprem", [
        _pool(MIXED, "general", 2 * n, cpu="4", memory="16Gi"),
        _pool(MIXED, "large", n, cpu="16", memory="64Gi"),
        _pool(MIXED, "arm", 2 * n, cpu="4", memory="8Gi", labels={ARCH: "arm64"}),
        _pool(MIXED, "gpu", n, cpu="8", memory="32Gi", extra={GPU: "4"}, taints=(gpu_taint,)),
    ])
    plain = environment.MemberPlan.of_groups(PLAIN, "cloud", [
        _pool(PLAIN, "cloud", 2 * n, cpu="4", memory="16Gi")])
    workloads = (
        Workload("batch", MIXED, 3 * n, Shape(cpu="1", memory="2Gi")),
        Workload("arm-agent", MIXED, 2 * n, Shape(cpu="250m", memory="1Gi", selector={ARCH: "arm64"})),
        Workload("db", MIXED, n, Shape(cpu="6", memory="16Gi", selector={POOL: "large"})),
        Workload("trainer", MIXED, n, Shape(cpu="4", memory="16Gi", selector={POOL: "gpu"}, gpus=2)),
        Workload("logs", PLAIN, 2 * n, Shape(cpu="500m", memory="512Mi")),
    )
    subsets = (
        Subset("arm", MIXED, Shape(cpu=TEMPLATE.cpu, memory="2Gi", selector={ARCH: "arm64"})),
        Subset("large", MIXED, Shape(cpu="2", memory=TEMPLATE.memory, selector={POOL: "large"}),
               term={POOL: "large"}, cap=8 * n),
        Subset("general", MIXED, dataclasses.replace(TEMPLATE, selector={POOL: "general"}),
               term={POOL: "general"}),
        Subset("cloud", PLAIN, TEMPLATE),
    )
    return Scenario(size=size, members=(mixed, plain), workloads=workloads, subsets=subsets)


def spread_selector() -> str:
    """The label selector of the spread's pods in a member."""
    return f"{names.SPREAD_LABEL}={NAME}"
