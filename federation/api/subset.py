"""One subset of a FederatedSpread: an ordered place for replicas, with its cap and floor.

Why a module of its own: a subset is the unit the whole placement reasons about (clusters by name
or selector, how they share, a node pool, a cap and a floor), and its field rules — a cap is an
integer or a percentage within 100%, a cluster list names each cluster once — are checked here,
field by field. Rules that span subsets (unique names, one kind of cap) are the spread's, in
`federation.api.spread`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import pydantic

from federation.api import common, topology

SUBSET_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_PERCENT = re.compile(r"^([0-9]{1,3})%$")

ClusterSpread = Literal["Fill", "Balance", "Capacity"]


def percent_of(max_replicas: int | str | None) -> int | None:
    """The percentage of a `"N%"` cap, or None for an integer or absent cap."""
    if isinstance(max_replicas, str):
        match = _PERCENT.match(max_replicas)
        if match:
            return int(match.group(1))
    return None


def _check_max_replicas(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("maxReplicas must be a non-negative integer or a percentage like '50%'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"maxReplicas must not be negative, got {value}")
        return value
    if isinstance(value, str):
        match = _PERCENT.match(value.strip())
        if not match:
            raise ValueError(
                f"maxReplicas {value!r} is neither an integer nor a percentage like '50%'"
            )
        pct = int(match.group(1))
        if pct > 100:
            raise ValueError(f"maxReplicas percentage must be between 0% and 100%, got {value}")
        return f"{pct}%"
    raise ValueError("maxReplicas must be a non-negative integer or a percentage like '50%'")


class Subset(common.SpecModel):
    """One ordered place for replicas: a cluster, a region (set of clusters) or a node pool in them."""

    name: str = pydantic.Field(
        min_length=1,
        max_length=63,
        pattern=SUBSET_NAME_PATTERN,
        description="Unique name of the subset (a DNS label); pods carry it as fedspread.io/subset.",
    )
    clusters: list[str] | None = pydantic.Field(
        default=None,
        description="Member clusters of this subset by name, in fill order. Exclusive with clusterSelector.",
    )
    cluster_selector: common.LabelSelector | None = pydantic.Field(
        default=None,
        description=(
            "Selects MemberClusters by label (e.g. a region); ordered by name. Exclusive with clusters."
        ),
    )
    cluster_spread: ClusterSpread = pydantic.Field(
        default="Capacity",
        description=(
            "How a multi-cluster subset divides its share: Fill (clusters in order), Balance "
            "(evenly) or Capacity (in proportion to free capacity)."
        ),
    )
    required_node_selector_term: common.NodeSelectorTerm | None = pydantic.Field(
        default=None,
        description="Node pool inside each cluster: ANDed into every required node-selector term of the pod.",
    )
    preferred_node_selector_terms: list[common.PreferredSchedulingTerm] = pydantic.Field(
        default_factory=list, description="Preferred node terms appended to the subset's pods."
    )
    tolerations: list[common.Toleration] = pydantic.Field(
        default_factory=list, description="Tolerations appended to the subset's pods."
    )
    patch: dict[str, Any] | None = pydantic.Field(
        default=None, description="Strategic-merge patch applied to the subset's pods."
    )
    max_replicas: int | str | None = pydantic.Field(
        default=None,
        description="Cap: an integer or a percentage of the total like '50%'; absent means unbounded.",
    )

    min_replicas: int | str | None = pydantic.Field(
        default=None,
        description=(
            "Floor: an integer or a percentage of the total like '20%', placed before any later "
            "subset's replicas beyond its own floor and kept through scale-down; never above the cap."
        ),
    )

    @pydantic.field_validator("max_replicas", mode="before")
    @classmethod
    def _valid_cap(cls, value: Any) -> Any:
        return _check_max_replicas(value)

    @pydantic.field_validator("min_replicas", mode="before")
    @classmethod
    def _valid_floor(cls, value: Any) -> Any:
        return topology.check_min_replicas(value)

    @pydantic.field_validator("required_node_selector_term")
    @classmethod
    def _non_empty_term(cls, value: common.NodeSelectorTerm | None) -> common.NodeSelectorTerm | None:
        if value is not None and not value.match_expressions and not value.match_fields:
            raise ValueError(
                "an empty term matches no node; give matchExpressions or matchFields, "
                "or omit requiredNodeSelectorTerm to use every node"
            )
        return value

    @pydantic.field_validator("clusters")
    @classmethod
    def _valid_clusters(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("clusters must name at least one cluster")
        seen: set[str] = set()
        for name in value:
            if not name:
                raise ValueError("cluster names must not be empty")
            if name in seen:
                raise ValueError(f"cluster {name!r} is listed twice")
            seen.add(name)
        return value

    @property
    def percent(self) -> int | None:
        """This subset's percentage cap, if it has one."""
        return percent_of(self.max_replicas)
