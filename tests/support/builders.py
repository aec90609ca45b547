"""Builders of the objects tests feed to fedspread: node pools, member clusters, capacity snapshots,
spreads and hub Deployments.

Why shared: the same few shapes (a pool of identical 4-cpu nodes, a member in a region, a spread
of subsets, a Deployment whose pods request some cpu) are built by unit tests, integration tests
and the stand-in agent. One builder per shape keeps them valid as the API models evolve, and keeps
each test down to what it varies. Arguments past the second are keyword-only.

Two forms of a cluster exist on purpose: `node_pool` is the model an agent reports (and the World
takes), `pool`/`member`/`snapshot` are the camelCase documents of a `CapacitySnapshot`, as
`fedspread simulate --clusters` reads them.
"""

from __future__ import annotations

from typing import Any

from federation.api import cluster, names
from federation.api import spread as spread_api

CORDON_TAINT_KEY = "fedspread.io/cordon"
"""The key of the tests' cordon taint: any NoSchedule cluster taint keeps new placements out."""
CORDON_TAINT = {"key": CORDON_TAINT_KEY, "effect": "NoSchedule"}


# --- capacity ---------------------------------------------------------------------------------


def node_pool(count: int, *, name: str = "std", cpu: str = "4", pods: str = "110") -> cluster.NodePool:
    """A pool of `count` identical nodes with `cpu` and `pods` allocatable, nothing requested."""
    return cluster.NodePool(name=name, count=count, allocatable={"cpu": cpu, "pods": pods})


def pool(
    count: int,
    *,
    pods: int = 110,
    cpu: str = "8",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    used_cpu: str = "0",
) -> dict[str, Any]:
    """A node pool as in a capacity snapshot: `count` nodes of `cpu` and 32Gi, `used_cpu` requested."""
    return {"count": count, "labels": labels or {}, "taints": taints or [],
            "allocatable": {"cpu": cpu, "memory": "32Gi", "pods": pods},
            "requested": {"cpu": used_cpu, "pods": 0}}


def member(
    name: str, *pools: dict[str, Any], region: str = "", ready: bool = True, cordoned: bool = False
) -> dict[str, Any]:
    """A member cluster as in a capacity snapshot, labelled with `region` when one is given."""
    return {"name": name, "labels": {names.REGION_LABEL: region} if region else {},
            "ready": ready, "taints": [CORDON_TAINT] if cordoned else [], "nodePools": list(pools)}


def snapshot(*members: dict[str, Any]) -> cluster.CapacitySnapshot:
    """A capacity snapshot of `members` (from `member`)."""
    return cluster.CapacitySnapshot.model_validate({"clusters": list(members)})


# --- spreads ----------------------------------------------------------------------------------


def spread_spec(
    *subsets: dict[str, Any], strategy: str = "Fixed", **adaptive: Any
) -> spread_api.FederatedSpreadSpec:
    """A spec for Deployment `web` over `subsets`; `adaptive` are the camelCase adaptive settings."""
    strategy_body: dict[str, Any] = {"type": strategy}
    if adaptive:
        strategy_body["adaptive"] = adaptive
    return spread_api.FederatedSpreadSpec.model_validate(
        {"targetRef": {"name": "web"}, "subsets": list(subsets), "scheduleStrategy": strategy_body})


def federated_spread(
    name: str = "web",
    subsets: list[dict[str, Any]] | None = None,
    *,
    namespace: str = "shop",
    generation: int | None = None,
    strategy: str | None = None,
    adaptive: dict[str, Any] | None = None,
    lost_seconds: int | None = None,
    uid: str | None = None,
    cluster_tolerations: list[dict[str, Any]] | None = None,
) -> spread_api.FederatedSpread:
    """A FederatedSpread `namespace/name` for the Deployment of the same name; only the settings
    given are written (the rest take the CRD's defaults; `uid` is metadata.uid)."""
    spec: dict[str, Any] = {"targetRef": {"name": name}, "subsets": list(subsets or [])}
    if strategy is not None or adaptive is not None:
        spec["scheduleStrategy"] = {"type": strategy or "Fixed"}
        if adaptive is not None:
            spec["scheduleStrategy"]["adaptive"] = adaptive
    if lost_seconds is not None:
        spec["failover"] = {"clusterLostSeconds": lost_seconds}
    if cluster_tolerations is not None:
        spec["clusterTolerations"] = cluster_tolerations
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "generation": generation}
    if uid is not None:
        metadata["uid"] = uid
    return spread_api.FederatedSpread.model_validate({"metadata": metadata, "spec": spec})


# --- workloads --------------------------------------------------------------------------------


def deployment(
    name: str = "web",
    replicas: int = 1,
    *,
    namespace: str | None = None,
    cpu: str | None = "1",
    image: str = "nginx",
    metadata: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Deployment of one container `app` requesting `cpu` (None: no requests), its pods labelled
    and selected by `app: name` as an apiserver requires; `metadata` adds fields to the
    Deployment's metadata (uid, labels, ...)."""
    container: dict[str, Any] = {"name": "app", "image": image}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu}}
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(metadata or {})
    spec: dict[str, Any] = {
        "replicas": replicas, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}},
    }
    body: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}
    if status is not None:
        body["status"] = status
    return body
