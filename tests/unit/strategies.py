"""Hypothesis strategies for fedspread's API objects: capacity snapshots, spreads and pod shapes.

Why a module of its own: property tests of placement, the simulate CLI and the coordinator all need
the same random-but-valid inputs. Everything is built through the pydantic models (camelCase dicts
and `model_validate`), so a generated object is one a user could have written and the validators
accepted; nothing here bypasses validation.

The world is deliberately small so that collisions are common: clusters `c0`..`c4` in regions
`r0`/`r1`, node pools labelled `type: a|b`, one node taint key and one cluster cordon taint key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from federation.api import cluster, names, spread
from federation.core import fit
from tests.support import builders

CLUSTER_NAMES = ("c0", "c1", "c2", "c3", "c4")
REGIONS = ("r0", "r1")
POOL_TYPES = ("a", "b")
POOL_TYPE_LABEL = "type"
NODE_TAINT_KEY = "dedicated"
UNKNOWN_CLUSTER = "gone"
"""A cluster name spreads may list that no snapshot from `snapshots()` contains."""
CPU_REQUESTS = ("0", "500m", "1", "3")
CLUSTER_SPREADS: tuple[spread.ClusterSpread, ...] = ("Fill", "Balance", "Capacity")
CAP_KINDS = ("none", "integer", "percent")
STRATEGY_TYPES: tuple[spread.StrategyType, ...] = ("Fixed", "Adaptive")

_CPU_STEP_MILLI = 250
# Strategies built once: constructing them inside composites on every draw is most of the cost.
_CPU_STEPS = st.integers(0, 16 * 1000 // _CPU_STEP_MILLI)
_PODS = st.integers(0, 30)
_PER_MILLE = st.integers(0, 1000)
_NODES = st.integers(0, 5)
_POOLS = st.integers(0, 3)
_ONE_IN_FOUR = st.integers(0, 3).map(lambda n: n == 0)
_ONE_IN_FIVE = st.integers(0, 4).map(lambda n: n == 0)
_ONE_IN_SIX = st.integers(0, 5).map(lambda n: n == 0)
_ONE_IN_THREE = st.integers(0, 2).map(lambda n: n == 0)
_POOL_TYPE = st.sampled_from(POOL_TYPES)
_REGION = st.sampled_from(REGIONS)
_CAP = st.none() | st.integers(0, 20)
_COIN = st.booleans()


def _pool_resources(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, str]]:
    cpu_steps = draw(_CPU_STEPS)
    pods = draw(_PODS)
    used_steps = cpu_steps * draw(_PER_MILLE) // 1000
    used_pods = pods * draw(_PER_MILLE) // 1000
    return (
        {"cpu": f"{cpu_steps * _CPU_STEP_MILLI}m", "pods": str(pods)},
        {"cpu": f"{used_steps * _CPU_STEP_MILLI}m", "pods": str(used_pods)},
    )


def _node_pool(draw: st.DrawFn, index: int) -> dict[str, Any]:
    allocatable, requested = _pool_resources(draw)
    pool: dict[str, Any] = {
        "name": f"pool{index}",
        "count": draw(_NODES),
        "labels": {POOL_TYPE_LABEL: draw(_POOL_TYPE)},
        "allocatable": allocatable,
        "requested": requested,
    }
    if draw(_ONE_IN_FOUR):
        pool["taints"] = [{"key": NODE_TAINT_KEY, "value": "x", "effect": "NoSchedule"}]
    return pool


def _cluster(draw: st.DrawFn, name: str, usable: bool | None) -> dict[str, Any]:
    ready = not draw(_ONE_IN_FIVE) if usable is None else usable
    cordoned = draw(_ONE_IN_FIVE) if usable is None else False
    if usable is False and draw(_COIN):
        ready, cordoned = True, True
    taints: list[dict[str, str]] = []
    if cordoned:
        taints.append(dict(builders.CORDON_TAINT))
    if draw(_ONE_IN_SIX):
        # A soft cluster taint that must not count as a cordon.
        taints.append({"key": "maintenance-soon", "effect": "PreferNoSchedule"})
    count = draw(_POOLS)
    return {
        "name": name,
        "labels": {names.REGION_LABEL: draw(_REGION)},
        "ready": ready,
        "taints": taints,
        "nodePools": [_node_pool(draw, i) for i in range(count)],
    }


@st.composite
def pool_resources(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, str]]:
    """(allocatable, requested) of one node: cpu 0-16 in quarter cores, pods 0-30, requested ≤ it."""
    return _pool_resources(draw)


@st.composite
def node_pools(draw: st.DrawFn, index: int = 0) -> dict[str, Any]:
    """One node pool as a camelCase dict: 0-5 nodes of type a/b, sometimes NoSchedule-tainted."""
    return _node_pool(draw, index)


@st.composite
def cluster_dicts(draw: st.DrawFn, name: str, *, usable: bool | None = None) -> dict[str, Any]:
    """One cluster as a camelCase dict. `usable=True` forces ready and uncordoned, False forces not."""
    return _cluster(draw, name, usable)


@st.composite
def snapshots(
    draw: st.DrawFn,
    *,
    min_clusters: int = 1,
    max_clusters: int = len(CLUSTER_NAMES),
    usable: bool | None = None,
) -> cluster.CapacitySnapshot:
    """A CapacitySnapshot of clusters c0..c(n-1); mostly ready, sometimes cordoned.

    `usable=True` makes every cluster ready and uncordoned (node taints still vary).
    """
    n = draw(st.integers(min_clusters, max_clusters))
    clusters = [_cluster(draw, name, usable) for name in CLUSTER_NAMES[:n]]
    return cluster.CapacitySnapshot.model_validate({"clusters": clusters})


@st.composite
def capacity_changes(draw: st.DrawFn, snapshot: cluster.CapacitySnapshot) -> cluster.CapacitySnapshot:
    """The same snapshot with new per-node allocatable/requested everywhere; nothing else changes.

    Readiness, cluster and node taints, labels and node counts stay as they were.
    """
    data = snapshot.model_dump(by_alias=True, mode="json")
    for entry in data["clusters"]:
        for pool in entry["nodePools"]:
            pool["allocatable"], pool["requested"] = _pool_resources(draw)
    return cluster.CapacitySnapshot.model_validate(data)


def usable_clusters(snapshot: cluster.CapacitySnapshot) -> set[str]:
    """Names of snapshot clusters that may take replicas: ready and without a binding cluster taint."""
    return {
        c.name for c in snapshot.clusters
        if c.ready and not any(t.effect in ("NoSchedule", "NoExecute") for t in c.taints)
    }


# --- spreads --------------------------------------------------------------------------------------


_SUBSET_NAMES = tuple(f"s{i}" for i in range(8))
_CAP_PERCENT = [st.none() | st.integers(0, budget) for budget in range(101)]


def _cluster_choice(draw: st.DrawFn, cluster_names: Sequence[str], unknown: bool) -> dict[str, Any]:
    """Either `clusters` (a non-empty, shuffled pick, maybe with an unknown name) or a region selector."""
    pool = [*cluster_names, UNKNOWN_CLUSTER] if unknown or not cluster_names else list(cluster_names)
    if not cluster_names or draw(_COIN):
        order = draw(st.permutations(pool))
        return {"clusters": order[: draw(st.integers(1, len(order)))]}
    return {"clusterSelector": {"matchLabels": {names.REGION_LABEL: draw(_REGION)}}}


def _caps(draw: st.DrawFn, count: int, kinds: Sequence[str]) -> list[int | str | None]:
    """One kind of cap for all bounded subsets: integers 0-20, or percentages summing to ≤ 100."""
    kind = draw(st.sampled_from(tuple(kinds)))
    if kind == "none":
        return [None] * count
    if kind == "integer":
        return [draw(_CAP) for _ in range(count)]
    caps: list[int | str | None] = []
    budget = 100
    for _ in range(count):
        pct = draw(_CAP_PERCENT[budget])
        if pct is not None:
            budget -= pct
            caps.append(f"{pct}%")
        else:
            caps.append(None)
    return caps


def _subset(
    draw: st.DrawFn,
    name: str,
    cluster_names: Sequence[str],
    *,
    cap: int | str | None,
    cluster_spreads: Sequence[spread.ClusterSpread],
    node_terms: bool,
    tolerations: bool,
    unknown: bool,
    patches: bool = False,
) -> dict[str, Any]:
    subset: dict[str, Any] = {"name": name, **_cluster_choice(draw, cluster_names, unknown)}
    subset["clusterSpread"] = draw(st.sampled_from(tuple(cluster_spreads)))
    if node_terms and draw(_ONE_IN_THREE):
        subset["requiredNodeSelectorTerm"] = {
            "matchExpressions": [{"key": POOL_TYPE_LABEL, "operator": "In", "values": [draw(_POOL_TYPE)]}]
        }
    if tolerations and draw(_ONE_IN_THREE):
        subset["tolerations"] = [{"key": NODE_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    if patches and draw(_ONE_IN_THREE):
        subset["patch"] = draw(subset_patches())
    if cap is not None:
        subset["maxReplicas"] = cap
    return subset


def _strategy(
    draw: st.DrawFn, types: Sequence[spread.StrategyType], simulation: bool | None
) -> dict[str, Any]:
    kind = draw(st.sampled_from(tuple(types)))
    strategy: dict[str, Any] = {"type": kind}
    if kind == "Adaptive":
        disable = draw(_ONE_IN_FOUR) if simulation is None else not simulation
        if disable or draw(_COIN):
            strategy["adaptive"] = {"disableSimulationSchedule": disable}
    return strategy


PATCHED_CONTAINER = "app"
"""The container name subset patches address (the templates of the view tests use it)."""


@st.composite
def subset_patches(draw: st.DrawFn) -> dict[str, Any]:
    """A subset's strategic-merge patch: raised requests or limits of the `app` container, maybe a
    nodeSelector on the pool type or tolerations replaced by none."""
    resources: dict[str, Any] = {}
    if draw(_COIN):
        resources["requests"] = {"cpu": draw(st.sampled_from(("100m", "500m", "1", "2", "5")))}
    if draw(_COIN):
        resources["limits"] = {"cpu": draw(st.sampled_from(("1", "3"))), "memory": "1Gi"}
    spec: dict[str, Any] = {"containers": [{"name": PATCHED_CONTAINER, "resources": resources}]}
    if draw(_ONE_IN_FOUR):
        spec["nodeSelector"] = {POOL_TYPE_LABEL: draw(_POOL_TYPE)}
    if draw(_ONE_IN_FOUR):
        spec["tolerations"] = []
    return {"spec": spec}


@st.composite
def subset_dicts(
    draw: st.DrawFn,
    name: str,
    cluster_names: Sequence[str],
    *,
    cap: int | str | None = None,
    cluster_spreads: Sequence[spread.ClusterSpread] = CLUSTER_SPREADS,
    node_terms: bool = True,
    tolerations: bool = True,
    unknown: bool = True,
) -> dict[str, Any]:
    """One subset as a camelCase dict: explicit clusters or a region selector, maybe a node term
    on `type` and a toleration of the node taint. `unknown=False` lists only `cluster_names`."""
    return _subset(
        draw, name, cluster_names, cap=cap, cluster_spreads=cluster_spreads,
        node_terms=node_terms, tolerations=tolerations, unknown=unknown,
    )


@st.composite
def schedule_strategies(
    draw: st.DrawFn,
    *,
    types: Sequence[spread.StrategyType] = STRATEGY_TYPES,
    simulation: bool | None = None,
) -> dict[str, Any]:
    """`scheduleStrategy` as a camelCase dict; `simulation` forces Adaptive's simulation on or off."""
    return _strategy(draw, types, simulation)


@st.composite
def spreads(
    draw: st.DrawFn,
    cluster_names: Sequence[str],
    *,
    min_subsets: int = 1,
    max_subsets: int = 4,
    cap_kinds: Sequence[str] = CAP_KINDS,
    strategy_types: Sequence[spread.StrategyType] = STRATEGY_TYPES,
    simulation: bool | None = None,
    cluster_spreads: Sequence[spread.ClusterSpread] = CLUSTER_SPREADS,
    unknown: bool = True,
    patches: bool = False,
) -> spread.FederatedSpreadSpec:
    """A valid FederatedSpreadSpec over `cluster_names` (plus sometimes an unknown cluster).

    `cap_kinds` limits the kinds of caps drawn ("none", "integer", "percent"); `strategy_types` and
    `simulation` constrain the strategy (`simulation=True`: Adaptive always simulates, False: never);
    `unknown=False` lists only clusters from `cluster_names`; `patches` gives some subsets a patch.
    """
    count = draw(st.integers(min_subsets, max_subsets))
    names = draw(st.permutations(_SUBSET_NAMES))[:count]
    caps = _caps(draw, count, cap_kinds)
    subsets = [
        _subset(
            draw, name, cluster_names, cap=cap, cluster_spreads=cluster_spreads,
            node_terms=True, tolerations=True, unknown=unknown, patches=patches,
        )
        for name, cap in zip(names, caps, strict=True)
    ]
    return spread.FederatedSpreadSpec.model_validate({
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "subsets": subsets,
        "scheduleStrategy": _strategy(draw, strategy_types, simulation),
    })


# --- pod shapes -----------------------------------------------------------------------------------


@st.composite
def shapes(draw: st.DrawFn, cpu: Sequence[str] = CPU_REQUESTS) -> fit.PodShape:
    """A PodShape from a one-container pod spec requesting one of `cpu` cpu, or no requests at all."""
    container: dict[str, Any] = {"name": "app", "image": "web:1"}
    request = draw(st.none() | st.sampled_from(tuple(cpu)))
    if request is not None:
        container["resources"] = {"requests": {"cpu": request}}
    return fit.shape_from_pod_spec({"containers": [container]})


replica_counts = st.integers(0, 60)
"""Total replicas R."""
