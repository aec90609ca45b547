"""The agent's node inventory: a member cluster's nodes and bound pods, folded into node pools.

Why pools: the coordinator simulates capacity per node, and a cluster of thousands of
nodes is usually a few kinds of machine in a few states. Nodes that look the same to the scheduler
(labels, taints, allocatable) and carry the same load (requests of the pods bound to them, pod
count) are one `NodePool` with a count, so reports stay small and the simulation's cost follows the
number of distinct nodes, not the number of nodes. Labels that name the node itself
(`kubernetes.io/hostname`, or any label whose value is the node's name) are dropped, or no two nodes
would ever be alike; a spread selecting single nodes by hostname is not something fedspread models.

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
from federation.core import fit

_ZERO = fractions.Fraction(0)

_Key = tuple[
    tuple[tuple[str, str], ...],
    tuple[tuple[str, str, str], ...],
    tuple[tuple[str, fractions.Fraction], ...],
    tuple[tuple[str, fractions.Fraction], ...],
]


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


@dataclasses.dataclass(frozen=True)
class PodUsage:
    """What one pod bound to a node takes from it: its effective requests."""

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


def _node_key(node: NodeView, requested: Mapping[str, fractions.Fraction]) -> _Key:
    """The canonical (sorted, hashable) description under which identical nodes coincide."""
    try:
        allocatable = tuple(sorted((k, _parsed(v)) for k, v in node.allocatable.items()))
    except (ValueError, TypeError, AttributeError) as err:
        raise ValueError(f"node {node.name!r}: allocatable: {err}") from None
    return (
        tuple(sorted((k, v) for k, v in node.labels.items() if k != names.HOSTNAME_LABEL and v != node.name)),
        tuple(sorted(_taint_triple(t) for t in node.taints)),
        allocatable,
        tuple(sorted(requested.items())),
    )


def _formatted(amounts: Mapping[str, fractions.Fraction]) -> dict[str, str]:
    return {name: quantity.format_quantity(amount, resource=name) for name, amount in sorted(amounts.items())}


def pools(nodes: Sequence[NodeView], usage: Sequence[PodUsage]) -> list[cluster.NodePool]:
    """Ready, uncordoned nodes grouped into pools of identical nodes, sorted by pool name.

    A pool is named after its first node (by name), with "+N" for N more. `requested` is per node
    and always has `pods`; pods bound to unknown or excluded nodes are ignored.
    """
    per_node = _usage_by_node(usage)
    idle = {fit.PODS: _ZERO}
    groups: dict[_Key, list[NodeView]] = {}
    for node in nodes:
        if not node.ready or node.unschedulable:
            continue
        groups.setdefault(_node_key(node, per_node.get(node.name, idle)), []).append(node)
    result = []
    for key, members in groups.items():
        members.sort(key=lambda n: n.name)
        first = members[0]
        labels, taints, _, requested = key
        name = first.name if len(members) == 1 else f"{first.name}+{len(members) - 1}"
        # model_construct: every quantity was parsed above; re-validating them all triples the cost.
        pool = cluster.NodePool.model_construct(
            name=name,
            count=len(members),
            labels=dict(labels),
            taints=[common.Taint.model_validate({"key": k, "value": v, "effect": e}) for k, v, e in taints],
            allocatable={k: str(v).strip() for k, v in first.allocatable.items()},
            requested=_formatted(dict(requested)),
        )
        result.append(pool)
    result.sort(key=lambda pool: pool.name)
    return result


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
