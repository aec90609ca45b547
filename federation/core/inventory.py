"""The agent's node inventory: a member cluster's nodes and bound pods, folded into node pools.

Why pools: the coordinator simulates capacity per node, and a cluster of thousands of
nodes is usually a few kinds of machine in a few states. Nodes that look the same to the scheduler
(labels, taints, allocatable: a node *class*) are one `NodePool` with a count, so reports stay
small and the simulation's cost follows the number of pools, not the number of nodes. Labels that
name the node itself (`kubernetes.io/hostname`, or any label whose value is the node's name) are
dropped, or no two nodes would ever be alike; a spread selecting single nodes by hostname is not
something fedspread models. Within a class, nodes with the same load (requests of the pods bound to
them, pod count) are one pool while the member's pools fit a budget (100 by default); beyond it,
`pool_bounds` merges nodes of different load into pools that state the most any of their nodes
requested, so a pool never promises room one of its nodes lacks.

Nodes that take no new pods (not Ready, or cordoned with spec.unschedulable) are left out of the
pools; the capacity summary (for people reading MemberCluster status) still counts every node.

Pure and fast: one pass over pods, one over nodes, dictionaries keyed by a canonical hashable key.
The caller (the agent's reporter) turns Kubernetes objects into `NodeView`/`PodUsage`, computing
pod requests with `fit.shape_from_pod_spec(spec).requests`.
"""

from __future__ import annotations

import dataclasses
import fractions
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from federation.api import cluster, common, names, quantity
from federation.core import fit, pool_bounds

_ZERO = fractions.Fraction(0)

_Class = tuple[
    tuple[tuple[str, str], ...],
    tuple[tuple[str, str, str], ...],
    tuple[tuple[str, fractions.Fraction], ...],
]
"""What tells nodes apart for placement, load aside: labels (node identity dropped), taints, allocatable."""


@dataclasses.dataclass(frozen=True)
class NodeView:
    """What the inventory needs of one Node."""

    name: str
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    """Node taints as dicts with key, value and effect (other fields such as timeAdded ignored)."""
    allocatable: Mapping[str, str] = dataclasses.field(default_factory=dict)
    unschedulable: bool = False
    """spec.unschedulable: the node is cordoned."""
    ready: bool = True
    """The node's Ready condition is True."""


@dataclasses.dataclass(frozen=True, slots=True)
class PodUsage:
    """What one pod bound to a node takes from it: its effective requests.

    Slotted: the agent holds one per bound pod (100,000 on a big member), and a per-instance
    `__dict__` would be ~10 MB of it."""

    node_name: str
    requests: Mapping[str, fractions.Fraction] = dataclasses.field(default_factory=dict)


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> fractions.Fraction:
    """Nodes repeat the same few quantity texts; parse each once."""
    return quantity.parse_quantity(text)


def _usage_by_node(usage: Sequence[PodUsage]) -> dict[str, dict[str, fractions.Fraction]]:
    """Per node name: summed requests (zero totals dropped) plus `pods`, the pod count.

    Sums integer numerators per denominator and builds each Fraction once per node: Fraction
    addition (a gcd per add) is most of the cost for tens of thousands of pods.
    """
    counts: dict[str, int] = {}
    buckets: dict[str, dict[str, dict[int, int]]] = {}
    for pod in usage:
        node = pod.node_name
        if not node:
            continue
        counts[node] = counts.get(node, 0) + 1
        sums = buckets.get(node)
        if sums is None:
            sums = buckets[node] = {}
        for name, amount in pod.requests.items():
            if name == fit.PODS or not amount:
                continue
            by_denominator = sums.get(name)
            if by_denominator is None:
                by_denominator = sums[name] = {}
            denominator = amount.denominator
            by_denominator[denominator] = by_denominator.get(denominator, 0) + amount.numerator
    totals: dict[str, dict[str, fractions.Fraction]] = {}
    for node, sums in buckets.items():
        node_totals = totals[node] = {fit.PODS: fractions.Fraction(counts[node])}
        for name, by_denominator in sums.items():
            parts = [fractions.Fraction(n, d) for d, n in by_denominator.items()]
            total = parts[0] if len(parts) == 1 else sum(parts, _ZERO)
            if total:
                node_totals[name] = total
    return totals


def _taint_triple(taint: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(taint.get("key") or ""), str(taint.get("value") or ""), str(taint.get("effect") or ""))


def _node_class(node: NodeView) -> _Class:
    """The canonical (sorted, hashable) description under which nodes of one class coincide."""
    try:
        allocatable = tuple(sorted((k, _parsed(v)) for k, v in node.allocatable.items()))
    except (ValueError, TypeError, AttributeError) as err:
        raise ValueError(f"node {node.name!r}: allocatable: {err}") from None
    return (
        tuple(sorted((k, v) for k, v in node.labels.items() if k != names.HOSTNAME_LABEL and v != node.name)),
        tuple(sorted(_taint_triple(t) for t in node.taints)),
        allocatable,
    )


def _formatted(amounts: Mapping[str, fractions.Fraction]) -> dict[str, str]:
    return {name: quantity.format_quantity(amount, resource=name) for name, amount in sorted(amounts.items())}


@dataclasses.dataclass(frozen=True)
class Pooling:
    """A member's pools and how they were bounded (`pools` gives only the pools)."""

    pools: list[cluster.NodePool]
    """Sorted by pool name."""
    members: dict[str, tuple[str, ...]]
    """Per pool name: its nodes' names, sorted."""
    classes: int
    """Node classes (labels, taints, allocatable): the fewest pools bounding can reach."""
    exact: int
    """Pools that exact grouping (same load to the last unit) would have made."""
    distortion: float
    """The most a node's stated requested exceeds its real one, as a share of its allocatable
    (`pool_bounds.Bounded.distortion`; 0.0 when the pools are exact)."""
    kept: dict[str, float]
    """Per resource: the free room the pools state over the room the nodes have (empty: exact)."""
    over_budget: bool
    """More classes than the budget: one pool per class, and more pools than the budget."""


def pooling(nodes: Sequence[NodeView], usage: Sequence[PodUsage], *,
            budget: int = pool_bounds.DEFAULT_BUDGET) -> Pooling:
    """Ready, uncordoned nodes grouped into at most `budget` pools (more only if their classes are).

    A pool is named after its first node (by name), with "+N" for N more. `requested` is per node
    and always has `pods`: for every node of the pool, at least what it has requested (exactly that
    when the member's exact grouping fits the budget); see `pool_bounds`. Pods bound to unknown or
    excluded nodes are ignored.
    """
    per_node = _usage_by_node(usage)
    idle = {fit.PODS: _ZERO}
    by_class: dict[_Class, list[tuple[str, Mapping[str, fractions.Fraction]]]] = {}
    for node in nodes:
        if not node.ready or node.unschedulable:
            continue
        by_class.setdefault(_node_class(node), []).append((node.name, per_node.get(node.name, idle)))
    keys = sorted(by_class)  # the same pools whatever the order of the nodes
    bounded = pool_bounds.bound(
        [pool_bounds.NodeClass(_fit_allocatable(key[2]), by_class[key]) for key in keys], budget=budget)
    texts = {node.name: node.allocatable for node in nodes}
    result = []
    members = {}
    for (labels, taints, _), groups in zip(keys, bounded.groups, strict=True):
        taint_models = [common.Taint.model_validate({"key": k, "value": v, "effect": e})
                        for k, v, e in taints]
        for group in groups:
            first = group.names[0]
            name = first if len(group.names) == 1 else f"{first}+{len(group.names) - 1}"
            # model_construct: every quantity was parsed above; re-validating them all triples the cost.
            result.append(cluster.NodePool.model_construct(
                name=name,
                count=len(group.names),
                labels=dict(labels),
                taints=[t.model_copy() for t in taint_models],
                allocatable={k: str(v).strip() for k, v in texts[first].items()},
                requested=_at_least(group.requested),
            ))
            members[name] = group.names
    result.sort(key=lambda pool: pool.name)
    return Pooling(pools=result, members=members, classes=len(keys), exact=bounded.exact,
                   distortion=bounded.distortion, kept=bounded.kept, over_budget=bounded.over_budget)


def pools(nodes: Sequence[NodeView], usage: Sequence[PodUsage], *,
          budget: int = pool_bounds.DEFAULT_BUDGET) -> list[cluster.NodePool]:
    """`pooling(...).pools`: the member's node pools, sorted by name."""
    return pooling(nodes, usage, budget=budget).pools


def _fit_allocatable(allocatable: Sequence[tuple[str, fractions.Fraction]]) -> dict[str, fractions.Fraction]:
    """A class's allocatable as the fit reads it: `pods` defaults to the kubelet's limit."""
    found = dict(allocatable)
    found.setdefault(fit.PODS, fractions.Fraction(fit.DEFAULT_MAX_PODS))
    return found


def _at_least(amounts: Mapping[str, fractions.Fraction]) -> dict[str, str]:
    """Quantity texts never below the amounts (a text holds whole nano-units; finer rounds up)."""
    return {name: quantity.format_at_least(amount, resource=name) for name, amount in sorted(amounts.items())}


def capacity_summary(
    nodes: Sequence[NodeView], usage: Sequence[PodUsage]
) -> tuple[int, dict[str, str], dict[str, str]]:
    """Node count, summed allocatable and summed requested (with `pods`) over every node.

    For MemberCluster.status.capacity. Unlike `pools`, cordoned and unready nodes count; pods bound
    to nodes not in `nodes` do not.
    """
    allocatable: dict[str, fractions.Fraction] = {}
    for node in nodes:
        for name, text in node.allocatable.items():
            try:
                amount = _parsed(text)
            except (ValueError, TypeError, AttributeError) as err:
                raise ValueError(f"node {node.name!r}: allocatable.{name}: {err}") from None
            allocatable[name] = allocatable.get(name, _ZERO) + amount
    per_node = _usage_by_node(usage)
    requested: dict[str, fractions.Fraction] = {fit.PODS: _ZERO}
    for node_name in {node.name for node in nodes}:
        for name, amount in per_node.get(node_name, {}).items():
            requested[name] = requested.get(name, _ZERO) + amount
    return len(nodes), _formatted(allocatable), _formatted(requested)
