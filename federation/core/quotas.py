"""Per-cluster quotas derived from a placement, and the webhook's local subset choice.

Why: the coordinator decides numbers per (subset, cluster); each member's agent only needs its own
column — for every subset in spec order, how many of the spread's pods it may run there. With that
table the admission webhook decides locally, with no network call: the first subset, in spec order,
that still has quota in this cluster and (Adaptive only) is not marked unschedulable here.

Pods that never met the webhook (they ran before this cluster was assigned the spread, or were
created while the webhook was down: it fails open) carry no subset. `match_by_node` gives them one
as OpenKruise's WorkloadSpread does for existing pods: the subset whose required node-selector
term the pod's node satisfies, so that what already runs counts against the quota it fills.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

from federation.api import common
from federation.core import matching, placement


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
    previous: str | None = None,
) -> str | None:
    """The subset for a new pod: first in spec order with quota left and, under the Adaptive
    strategy (`adaptive`), not unschedulable; Fixed ignores marks, as placement does.

    `assigned` counts the pods that already hold each subset's quota here (running, pending and
    being created, not those being deleted), not the pod being chosen for. `previous` is the
    subset an earlier admission of the same pod chose (a retried call): it is kept while it has
    room and is not skipped, so an answer once given does not change. None when every subset is
    full: the pod gets no subset, and the deletion cost makes it the first to go.
    """
    skipped = unschedulable if adaptive else ()
    rows = sorted(table, key=lambda r: r.index)
    if previous is not None:
        rows = [r for r in rows if r.subset == previous] + [r for r in rows if r.subset != previous]
    for row in rows:
        if row.subset in skipped:
            continue
        if assigned.get(row.subset, 0) < row.quota:
            return row.subset
    return None


def match_by_node(
    pods: Sequence[tuple[str, str]],
    table: Sequence[SubsetQuota],
    *,
    terms: Mapping[str, common.NodeSelectorTerm | None],
    nodes: Mapping[str, Mapping[str, str]],
    assigned: Mapping[str, int],
) -> dict[str, str]:
    """A subset for each pod of no subset, by the node it runs on: pod name -> subset.

    `pods` are (pod name, node name) in the order to match (oldest first); `terms` each subset's
    required node-selector term (None: any node); `nodes` node name -> labels; `assigned` the
    pods already holding each subset's quota. A pod goes to the first subset in spec order whose
    term its node satisfies and that still has room (counting the pods matched before it); a pod
    whose node is unknown, or matches no subset with room, is left out. Unschedulable marks are
    not consulted: they keep new pods away, and this pod already runs.
    """
    taken = dict(assigned)
    rows = sorted(table, key=lambda r: r.index)
    found: dict[str, str] = {}
    for pod, node in pods:
        labels = nodes.get(node)
        if labels is None:
            continue
        for row in rows:
            term = terms.get(row.subset)
            if term is not None and not matching.term_matches(term, labels, node_name=node):
                continue
            if taken.get(row.subset, 0) < row.quota:
                taken[row.subset] = taken.get(row.subset, 0) + 1
                found[pod] = row.subset
                break
    return found
