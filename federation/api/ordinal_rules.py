"""Which percentages a StatefulSet spread cannot honour, refused with a field path.

Why: inside one member cluster a StatefulSet's pods are placed by ordinal ranges, the subsets in
spec order taking consecutive ordinals (`federation.core.ordinals`), and the StatefulSet
controller always removes the highest ordinal first. A scale of N to M replicas therefore keeps
exactly the ordinals [0, M): the ranges as they were, cut at M. A placement honours that only when
the subsets' quotas in the cluster are "the old ones, cut at M" — true of integer caps filled in
subset order, never of

- a **percentage cap on a subset followed by another subset that may share a cluster with it**:
  its quota, hence the end of its range, moves with every scale. A scale-down removes the later
  subset's ordinals first and leaves this one above its percentage; a scale-up moves the later
  subset's range start over its running pods (misplaced, never deleted: they keep identity and
  volumes). Deployments reach the percentage through deletion cost, which this controller ignores;
- a **floor (minReplicas, percentage or integer) on a subset preceded by another that may share a
  cluster with it**: its ordinals are the highest, the first a scale-down removes, so it cannot be
  "kept through scale-down". The issue names percentages; an integer floor fails the same way, so
  it is refused with it rather than silently broken.

Two subsets may share a cluster when both list clusters by name and the lists meet, or when either
selects clusters by labels (labels change; the door cannot promise the sets stay apart). Subsets in
clusters of their own are honoured: each cluster's StatefulSet then holds one subset's pods, and
a scale changes only how many.

The API sits below `federation.core`, so this reads the spec only (`federation.api.spread` calls it
from its cross-field rules: the Valid condition, the hub webhook and `simulate` all see it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

STATEFULSET = "StatefulSet"


class _Subset(Protocol):
    """The fields of a spread subset the rule reads."""

    @property
    def name(self) -> str: ...

    @property
    def clusters(self) -> list[str] | None: ...

    @property
    def cluster_selector(self) -> object: ...

    @property
    def max_replicas(self) -> int | str | None: ...

    @property
    def min_replicas(self) -> int | str | None: ...


def _is_percentage(value: int | str | None) -> bool:
    return isinstance(value, str) and value.endswith("%")


def may_share_a_cluster(first: _Subset, second: _Subset) -> bool:
    """Whether the two subsets can ever place pods in one cluster (a label selector: assume yes)."""
    if first.cluster_selector is not None or second.cluster_selector is not None:
        return True
    return bool(set(first.clusters or ()) & set(second.clusters or ()))


def _why_shared(first: _Subset, second: _Subset) -> str:
    if first.cluster_selector is not None or second.cluster_selector is not None:
        return "a clusterSelector may select the same cluster"
    shared = sorted(set(first.clusters or ()) & set(second.clusters or ()))
    return f"both list {', '.join(shared)}"


def problems(kind: str, subsets: Sequence[_Subset]) -> list[tuple[str, str]]:
    """(path relative to the spec, message) for each percentage cap or floor a StatefulSet target
    cannot honour; [] for every other kind."""
    if kind != STATEFULSET:
        return []
    found: list[tuple[str, str]] = []
    for index, subset in enumerate(subsets):
        if _is_percentage(subset.max_replicas):
            later = next(((j, s) for j, s in enumerate(subsets)
                          if j > index and may_share_a_cluster(subset, s)), None)
            if later is not None:
                j, other = later
                found.append((
                    f"subsets[{index}].maxReplicas",
                    f"a StatefulSet cannot honour a percentage cap here: subsets[{j}] ({other.name!r}) comes "
                    f"later and may share a cluster ({_why_shared(subset, other)}), and inside a cluster "
                    f"the subsets hold consecutive ordinal ranges, removed highest first, so every scale "
                    f"would move this range's end under running pods; use an integer cap, or give the "
                    f"subsets clusters of their own"))
        if subset.min_replicas is not None:
            earlier = next(((j, s) for j, s in enumerate(subsets)
                            if j < index and may_share_a_cluster(s, subset)), None)
            if earlier is not None:
                j, other = earlier
                found.append((
                    f"subsets[{index}].minReplicas",
                    f"a StatefulSet cannot keep a floor here through scale-down: subsets[{j}] "
                    f"({other.name!r}) comes earlier and may share a cluster ({_why_shared(other, subset)}), "
                    f"so this subset holds the highest ordinals there, the first the StatefulSet removes; "
                    f"put the floor on the first subset, or give the subsets clusters of their own"))
    return found
