"""The placement benchmark's federation: its shape, its clusters' node pools and its spreads.

Why a module of its own: the coordinator's process (bench/placement.py), the stand-in agents'
process (bench/placement_swarm.py) and the profiling script must build the very same federation
from a few numbers, so that what one process reports the other can check. Everything here is a
pure function of a `Shape` and an index, but `add_spread(s)`, which put a shape's spreads into a
coordinator's World the one way every benchmark of placement does.

A `Shape` is one point of the benchmark's sweep, one dimension at a time:

- `clusters` in the federation (each with a live agent stream), grouped into regions of
  `per_spread` clusters: a spread's region subset selects `per_spread` clusters;
- `spreads`, each Adaptive: a capped home cluster, then its region by free capacity;
- `pools` node pools per cluster (the fit walks every pool of every selected cluster);
- `templates` distinct pod shapes among the spreads (the ledger keeps whole nodes per shape);
- `pod_spec`: `"minimal"` (a container and its requests: what every reference so far used) or
  `"typical"` (what a real Deployment's pod carries besides: image, ports, a dozen environment
  variables, probes, volumes, a security context; about 2 kB of JSON, distinct per spread).
  Placement reads only the requests; the rest travels with each spread's pod shape and its
  trimmed template, so it is what a round ships to the shards.

One spread in `HUNGRY_EVERY` is *hungry*: it asks for more big pods than its home cluster and the
next one (its spill) can hold, so it is never settled and replicas wait: when its spill cluster
gains nodes, waiting replicas really move there — the benchmark's capacity growth moves replicas,
it is not a no-op by construction. Clusters are lost only after an hour: a long event holds the
coordinator's lock, and heartbeats queued behind it must not make clusters lost (failover is
bench/failover.py's).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from federation.api import names
from federation.api import spread as spread_api
from federation.rpc import common_pb2

if TYPE_CHECKING:  # the stand-in agents' process builds no World
    from federation.coordinator.model import world

LOST_AFTER_SECONDS = 3600
HUNGRY_EVERY = 50
"""One spread in this many is hungry (see the module's docstring)."""
HUNGRY_REPLICAS = 200
REPLICAS = 12
HOME_CAP = 4
BIG_POD = {"cpu": "8", "memory": "16Gi"}
POD_SPECS = ("minimal", "typical")


@dataclasses.dataclass(frozen=True)
class Shape:
    """One point of the sweep."""

    spreads: int
    clusters: int = 1000
    per_spread: int = 100
    pools: int = 2
    templates: int = 1
    pod_spec: str = "minimal"

    def __post_init__(self) -> None:
        if self.pod_spec not in POD_SPECS:
            raise ValueError(f"pod_spec is one of {', '.join(POD_SPECS)}, not {self.pod_spec!r}")

    @property
    def regions(self) -> int:
        return max(1, self.clusters // self.per_spread)

    def describe(self) -> dict[str, int | str]:
        found: dict[str, int | str] = {
            "spreads": self.spreads, "clusters": self.clusters,
            "clusters_per_spread": min(self.per_spread, self.clusters),
            "pools_per_cluster": self.pools, "templates": self.templates}
        if self.pod_spec != "minimal":  # records made before the field stay comparable
            found["pod_spec"] = self.pod_spec
        return found


def parse_shape(text: str) -> Shape:
    """A `Shape` from the JSON object a command line gives (`--shape`); a ValueError, which argparse
    reports as a bad argument, when it is not one."""
    fields = json.loads(text)
    if not isinstance(fields, dict):
        raise ValueError(f"a shape is a JSON object, not {text!r}")
    try:
        return Shape(**fields)
    except TypeError as error:
        raise ValueError(str(error)) from error


def cluster_name(index: int) -> str:
    return f"c{index:04d}"


def region_of(index: int, shape: Shape) -> str:
    """Cluster `index`'s region: clusters are dealt to regions in turn."""
    return f"r{index % shape.regions}"


def pools(index: int, shape: Shape, *, change: int = 0) -> list[common_pb2.NodePool]:
    """Cluster `index`'s node pools: `shape.pools - 1` general pools sharing about 20 nodes (at least
    one each) and one highmem pool.
    `change` adds (or, negative, removes) nodes of the first general pool: a capacity event."""
    found, general = [], max(1, shape.pools - 1)
    for number in range(general):
        nodes = max(1, (20 + (index + number) % 7) // general)  # about 20 nodes whatever the pools
        count = max(0, nodes + (change if number == 0 else 0))
        found.append(common_pb2.NodePool(
            name=f"general-{number}", count=count, labels={"pool": f"general-{number}"},
            allocatable={"cpu": "16", "memory": "64Gi", "pods": "110"},
            requested={"cpu": "4", "memory": "8Gi", "pods": "12"}))
    if shape.pools > 1:
        found.append(common_pb2.NodePool(name="highmem", count=4, labels={"pool": "highmem"},
                                         allocatable={"cpu": "32", "memory": "256Gi", "pods": "110"}))
    return found


def requests(index: int, shape: Shape) -> dict[str, str]:
    """The pod requests of spread `index`: one of `shape.templates` distinct shapes."""
    if hungry(index):
        return dict(BIG_POD)
    kind = index % shape.templates
    return {"cpu": f"{500 + kind}m", "memory": f"{512 + 4 * (kind % 64)}Mi"}


def template(index: int, shape: Shape) -> dict[str, Any]:
    """The hub Deployment's template of spread `index` (`Shape.pod_spec` says how much its pod carries)."""
    container: dict[str, Any] = {"name": "app", "resources": {"requests": requests(index, shape)}}
    pod: dict[str, Any] = {"containers": [container]}
    if shape.pod_spec == "typical":
        _typical(pod, container, name=spread_name(index))
    return {"spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": spread_name(index)}},
                                                 "spec": pod}}}


def _typical(pod: dict[str, Any], container: dict[str, Any], *, name: str) -> None:
    """What a real pod carries besides its requests, named after its spread so no two are equal."""
    probe = {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10, "failureThreshold": 3}
    container.update({
        "image": f"registry.example.com/team/{name}:1.4.2", "imagePullPolicy": "IfNotPresent",
        "args": ["--config=/etc/app/config.yaml", f"--service-name={name}", "--log-format=json"],
        "ports": [{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9090}],
        "env": [{"name": f"APP_SETTING_{i}", "value": f"{name}-value-{i}"} for i in range(12)]
        + [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "readinessProbe": probe, "livenessProbe": {**probe, "initialDelaySeconds": 15},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"},
                         {"name": "cache", "mountPath": "/cache"}],
        "securityContext": {"runAsNonRoot": True, "readOnlyRootFilesystem": True,
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    })
    container["resources"]["limits"] = {"memory": "1Gi"}
    pod.update({
        "serviceAccountName": name, "terminationGracePeriodSeconds": 30,
        "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}},
                    {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}}],
        "securityContext": {"fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}},
    })


def hungry(index: int) -> bool:
    return index % HUNGRY_EVERY == HUNGRY_EVERY // 2


def home_of(index: int, shape: Shape) -> int:
    """The index of spread `index`'s home cluster."""
    return index * 7 % shape.clusters


def replicas_of(index: int) -> int:
    return HUNGRY_REPLICAS if hungry(index) else REPLICAS


def spread_name(index: int) -> str:
    return f"s{index:06d}"


NAMESPACES = 50
"""Spreads are dealt to this many namespaces in turn (`ns0`...)."""


def spread_fields(index: int, shape: Shape) -> dict[str, Any]:
    """Spread `index`'s metadata (name, namespace) and spec: a capped home cluster, then its region
    by free capacity (Adaptive); a hungry one only its home cluster, uncapped."""
    home = {"name": "home", "clusters": [cluster_name(home_of(index, shape))]}
    subsets: list[dict[str, Any]]
    if hungry(index):
        spill = cluster_name(spill_of(index, shape))
        subsets = [home, {"name": "spill", "clusters": [spill]}]
    else:
        region = {names.REGION_LABEL: region_of(home_of(index, shape), shape)}
        subsets = [{**home, "maxReplicas": HOME_CAP},
                   {"name": "region", "clusterSelector": {"matchLabels": region}}]
    name = spread_name(index)
    return {"metadata": {"name": name, "namespace": f"ns{index % NAMESPACES}"},
            "spec": {"targetRef": {"name": name}, "scheduleStrategy": {"type": "Adaptive"},
                     "failover": {"clusterLostSeconds": LOST_AFTER_SECONDS}, "subsets": subsets}}


def spread(index: int, shape: Shape, *, generation: int = 1) -> spread_api.FederatedSpread:
    """Spread `index` (`spread_fields`) as the World takes it."""
    fields = spread_fields(index, shape)
    return spread_api.FederatedSpread.model_validate(
        {**fields, "metadata": {**fields["metadata"], "generation": generation}})


def hungry_spills(shape: Shape) -> list[int]:
    """The clusters hungry spreads spill to, in order of first such spread."""
    found: dict[int, None] = {}
    for index in range(HUNGRY_EVERY // 2, shape.spreads, HUNGRY_EVERY):
        found.setdefault(spill_of(index, shape), None)
    return list(found)


def homed_at(cluster: int, shape: Shape) -> list[int]:
    """The spreads (not hungry) whose home subset is cluster `cluster`."""
    return [i for i in range(shape.spreads) if not hungry(i) and home_of(i, shape) == cluster]


def spill_of(index: int, shape: Shape) -> int:
    """The cluster a hungry spread `index` spills to once its home is full."""
    return (home_of(index, shape) + 1) % shape.clusters


def add_spread(model: world.World, item: spread_api.FederatedSpread, *, index: int, shape: Shape) -> set[str]:
    """Spread `index` (`item`, built by `spread`) upserted into `model` with its target (replicas,
    template); the keys that affects, its own among them. The caller places them (and holds the
    coordinator's lock where it has one)."""
    affected = model.upsert_spread(item)
    affected |= model.set_target(item.key, replicas=replicas_of(index), template=template(index, shape))
    return affected | {item.key}


def add_spreads(model: world.World, shape: Shape) -> list[str]:
    """Every spread of `shape` added to `model` (`add_spread`) in index order; their keys."""
    items = [spread(index, shape) for index in range(shape.spreads)]
    for index, item in enumerate(items):
        add_spread(model, item, index=index, shape=shape)
    return [item.key for item in items]
