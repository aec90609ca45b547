"""Capacity simulations: how many more pods of a spread's template fit, per (subset, cluster).

Why a module of its own: the same question is answered by a `ClusterShard` actor on Ray, by the
in-process backend, and directly on a snapshot a user passes to a what-if — so the question
(`CapacityQuery`) and its answer (`free_capacity`) are plain data and one pure function, and
`queries_for` turns an explained placement into the questions to ask. `PlacementService.Explain`
shows the answers as each cluster's `freeCapacity`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from federation.api import cluster, spread
from federation.core import fit, pending_deduction, placement


@dataclasses.dataclass(frozen=True)
class CapacityQuery:
    """How many more pods of `shape` fit in `cluster`, after `pending` pods are counted there."""

    cluster: str
    shape: fit.PodShape
    pending: tuple[pending_deduction.PendingPods, ...] = ()


def free_capacity(pools: Sequence[cluster.NodePool] | None, query: CapacityQuery) -> int | None:
    """The answer to one query on a cluster's pools; None for a cluster whose inventory is unknown."""
    if pools is None:
        return None
    if not pools:
        return 0
    only = cluster.ClusterCapacity(name=query.cluster, node_pools=list(pools))
    here = cluster.CapacitySnapshot(clusters=[only])
    charged = pending_deduction.deduct_pending(here, [p for p in query.pending if p.cluster == query.cluster])
    return fit.cluster_capacity(charged.clusters[0], query.shape)


def queries_for(
    spec: spread.FederatedSpreadSpec, result: placement.Placement, *, shape: fit.PodShape,
    pending: Sequence[pending_deduction.PendingPods] = (),
) -> dict[tuple[str, str], CapacityQuery]:
    """One query per (subset, cluster) of the placement, for the subset's pod shape."""
    specs = {s.name: s for s in spec.subsets}
    found: dict[tuple[str, str], CapacityQuery] = {}
    for sub in result.subsets:
        subset_spec = specs.get(sub.name)
        if subset_spec is None:
            continue
        subset_shape = fit.with_subset(shape, subset_spec)
        for name in sub.clusters:
            mine = tuple(p for p in pending if p.cluster == name)
            found[(sub.name, name)] = CapacityQuery(cluster=name, shape=subset_shape, pending=mine)
    return found


def answer_on(snapshot: cluster.CapacitySnapshot, queries: Sequence[CapacityQuery]) -> list[int | None]:
    """Every query answered on a snapshot, in order."""
    pools = {c.name: c.node_pools for c in snapshot.clusters}
    return [free_capacity(pools.get(q.cluster), q) for q in queries]
