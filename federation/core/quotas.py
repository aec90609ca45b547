"""Per-cluster quotas derived from a placement, and the webhook's local subset choice.

Why: the coordinator decides numbers per (subset, cluster); each member's agent only needs its own
column — for every subset in spec order, how many of the spread's pods it may run there. With that
table the admission webhook decides locally, with no network call: the first subset, in spec order,
that still has quota in this cluster and (Adaptive only) is not marked unschedulable here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

from federation.core import placement


@dataclasses.dataclass(frozen=True)
class SubsetQuota:
    """How many pods of one subset a cluster may run, and the subset's position in the spec."""

    subset: str
    index: int
    quota: int


@dataclasses.dataclass(frozen=True)
class ClusterQuota:
    """One cluster's share of a spread: the Deployment replicas and the per-subset table."""

    cluster: str
    replicas: int
    subsets: tuple[SubsetQuota, ...]

    def quota_of(self, subset: str) -> int:
        """The quota of `subset` here (0 when it has none)."""
        return next((q.quota for q in self.subsets if q.subset == subset), 0)


def cluster_quotas(result: placement.Placement) -> dict[str, ClusterQuota]:
    """Each snapshot cluster's quota table, every subset listed in spec order (zeros included)."""
    tables: dict[str, ClusterQuota] = {}
    for name in result.clusters:
        rows = tuple(
            SubsetQuota(subset=s.name, index=i, quota=s.clusters.get(name, 0))
            for i, s in enumerate(result.subsets)
        )
        tables[name] = ClusterQuota(
            cluster=name, replicas=sum(r.quota for r in rows), subsets=rows
        )
    return tables


def choose_subset(
    table: Sequence[SubsetQuota],
    *,
    assigned: Mapping[str, int],
    adaptive: bool,
    unschedulable: Collection[str] = (),
) -> str | None:
    """The subset for a new pod: first in spec order with quota left and, under the Adaptive
    strategy (`adaptive`), not unschedulable; Fixed ignores marks, as placement does.

    `assigned` counts the pods that already hold each subset's quota here (running, pending and
    being created, not those being deleted). None when every subset is full: the pod gets no
    subset, and the deletion cost makes it the first to go.
    """
    skipped = unschedulable if adaptive else ()
    for row in sorted(table, key=lambda r: r.index):
        if row.subset in skipped:
            continue
        if assigned.get(row.subset, 0) < row.quota:
            return row.subset
    return None
