"""Pending pods deducted from a capacity snapshot: the reference arithmetic of overcommit protection.

Why: an agent's inventory counts only pods bound to nodes. Between the coordinator deciding and
the pods being scheduled, another spread looking at the same snapshot would see the same free room
and both would be promised it (karmada#1385). Before placing a spread, the coordinator deducts
every *other* spread's placed-but-not-running replicas from the snapshot. This module is that
deduction on a whole snapshot, as what-ifs and capacity answers read it; the coordinator keeps the
same answer per cluster, updated spread by spread, in `overcommit.Ledger`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from federation.api import cluster
from federation.core import fit


@dataclasses.dataclass(frozen=True)
class PendingPods:
    """`count` pods of `shape` placed in `cluster` that no node has counted yet."""

    cluster: str
    shape: fit.PodShape
    count: int


def deduct_pending(
    snapshot: cluster.CapacitySnapshot, pending: Sequence[PendingPods]
) -> cluster.CapacitySnapshot:
    """A copy of the snapshot with pending pods charged to the pools that admit them.

    Pools are charged in order, each up to its free pod slots; pods that fit no pool are charged
    to nothing (they are waiting, and already counted as such by their own spread).
    """
    pools = {c.name: list(c.node_pools) for c in snapshot.clusters}
    for item in pending:
        left = item.count
        members = pools.get(item.cluster)
        if members is None or left <= 0:
            continue
        for index, pool in enumerate(members):
            if not left:
                break
            if not fit.pool_admits(pool, item.shape):
                continue
            charge = min(left, fit.pool_capacity(pool, item.shape))
            if charge:
                members[index] = fit.deduct(pool, item.shape, pods=charge)
                left -= charge
    clusters = [c.model_copy(update={"node_pools": pools[c.name]}) for c in snapshot.clusters]
    return snapshot.model_copy(update={"clusters": clusters})
