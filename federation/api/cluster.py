"""The MemberCluster kind and the capacity snapshot agents report.

Why both live here: a MemberCluster is the hub's record of a member (topology labels, cluster-level
taints such as a cordon, health); the capacity snapshot is the detailed view of its nodes that the
placement core consumes. `fedspread simulate --clusters CLUSTERS.yaml` reads the snapshot in exactly
the shape agents report it, so a snapshot captured from a live system can be replayed offline.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal

import pydantic

from federation.api import common, quantity

KIND = "MemberCluster"
PLURAL = "memberclusters"


def _as_quantity(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    text = str(value).strip()
    quantity.parse_quantity(text)  # raises ValueError with the reason
    return text


Quantity = Annotated[str, pydantic.BeforeValidator(_as_quantity)]
ResourceList = dict[str, Quantity]

Cordon = Literal["", "NoSchedule", "NoExecute"]
"""How hard a cluster's taints cordon it: not at all, no new replicas, or its replicas move too."""


def tolerates_cluster_taint(
    toleration: common.Toleration, taint: common.Taint, *, now: datetime.datetime | None = None
) -> bool:
    """Whether a spread's cluster toleration tolerates a cluster taint at `now`: Kubernetes matching
    (`common.tolerates`); a toleration with `tolerationSeconds` tolerates a NoExecute taint only
    until `tolerationSeconds` after the taint's `timeAdded` (as the taint manager evicts pods). With
    no `now` or no `timeAdded` the time cannot be judged and the toleration holds."""
    if not common.tolerates(toleration, taint):
        return False
    seconds = toleration.toleration_seconds
    if taint.effect != "NoExecute" or seconds is None or now is None or taint.time_added is None:
        return True
    return now < taint.time_added + datetime.timedelta(seconds=max(0, seconds))


def cordon_of(
    taints: Iterable[common.Taint], *, tolerations: Sequence[common.Toleration] = (),
    now: datetime.datetime | None = None,
) -> Cordon:
    """The strongest cordon among the cluster taints no toleration tolerates at `now` (`tolerations`:
    one spread's clusterTolerations): NoExecute over NoSchedule; PreferNoSchedule is none."""
    effects = {
        t.effect for t in taints if not any(tolerates_cluster_taint(tol, t, now=now) for tol in tolerations)
    }
    if "NoExecute" in effects:
        return "NoExecute"
    return "NoSchedule" if "NoSchedule" in effects else ""


def toleration_ends(
    taints: Iterable[common.Taint], *, tolerations: Sequence[common.Toleration]
) -> list[datetime.datetime]:
    """When the timed tolerations among `tolerations` stop tolerating these NoExecute taints."""
    return [
        taint.time_added + datetime.timedelta(seconds=max(0, toleration.toleration_seconds))
        for taint in taints if taint.effect == "NoExecute" and taint.time_added is not None
        for toleration in tolerations
        if toleration.toleration_seconds is not None and common.tolerates(toleration, taint)
    ]


def stamped(
    taints: Sequence[common.Taint], *, before: Sequence[common.Taint], now: datetime.datetime
) -> tuple[common.Taint, ...]:
    """`taints` with every missing `timeAdded` filled in: the time of the same taint in `before`
    (what the coordinator saw earlier), else `now` (first seen)."""
    seen = {t.identity: t.time_added for t in before if t.time_added is not None}
    return tuple(
        t if t.time_added is not None else t.model_copy(update={"time_added": seen.get(t.identity, now)})
        for t in taints
    )


class MemberClusterSpec(common.SpecModel):
    """What an operator sets on a member cluster."""

    taints: list[common.Taint] = pydantic.Field(
        default_factory=list,
        description=(
            "Cluster-level taints. NoSchedule cordons the cluster: no new replicas, those running stay. "
            "NoExecute also moves its replicas away. PreferNoSchedule changes nothing. A spread's "
            "clusterTolerations lift them for that spread."
        ),
    )
    decommission: bool = pydantic.Field(
        default=False,
        description=(
            "Remove this member from the federation: no spread selects it any more, so each spread "
            "moves its replicas to the clusters that remain (replacements first, as when a cluster "
            "leaves a spread's selection). Delete the MemberCluster once its Decommissioned "
            "condition is True. Deleting a MemberCluster without this only deletes the hub object: "
            "while its agent is connected the coordinator recreates it, and nothing moves."
        ),
    )


class CapacitySummary(common.StatusModel):
    """Totals over a member's nodes, for people reading `kubectl get membercluster -o yaml`."""

    nodes: int = pydantic.Field(default=0, description="Number of nodes.")
    allocatable: dict[str, str] = pydantic.Field(
        default_factory=dict, description="Sum of node allocatable resources."
    )
    requested: dict[str, str] = pydantic.Field(
        default_factory=dict, description="Sum of requests of pods bound to nodes."
    )


class MemberClusterStatus(common.StatusModel):
    """What the coordinator observed of a member through its agent."""

    conditions: list[common.Condition] = pydantic.Field(
        default_factory=list, description="Ready, and why not."
    )
    last_heartbeat_time: datetime.datetime | None = pydantic.Field(
        default=None, description="When the agent was last heard."
    )
    agent_version: str = pydantic.Field(default="", description="Version of the cluster's agent.")
    capacity: CapacitySummary = pydantic.Field(
        default_factory=CapacitySummary, description="Capacity summary."
    )


class MemberCluster(pydantic.BaseModel):
    """A MemberCluster object as stored in the hub (cluster-scoped)."""

    model_config = pydantic.ConfigDict(
        alias_generator=pydantic.alias_generators.to_camel, populate_by_name=True, extra="forbid"
    )

    api_version: Literal["fedspread.io/v1alpha1"] = pydantic.Field(
        default="fedspread.io/v1alpha1", description="fedspread.io/v1alpha1."
    )
    kind: Literal["MemberCluster"] = pydantic.Field(
        default="MemberCluster", description="MemberCluster."
    )
    metadata: common.ObjectMeta = pydantic.Field(description="Labels carry the topology.")
    spec: MemberClusterSpec = pydantic.Field(
        default_factory=MemberClusterSpec, description="Operator settings."
    )
    status: MemberClusterStatus | None = pydantic.Field(default=None, description="Observed state.")


class NodePool(common.SpecModel):
    """Nodes grouped together: `count` nodes with the same labels, taints and allocatable.

    `requested` is per node, and never less than what any node of the pool has requested: an
    agent keeping its pools within a budget merges nodes of different load and states the most
    (`federation.core.pool_bounds`), so the pool's room is what every one of its nodes has at least.
    """

    name: str = pydantic.Field(default="", description="Optional pool name, for explanations.")
    count: int = pydantic.Field(default=1, ge=0, description="Number of nodes in the pool.")
    labels: dict[str, str] = pydantic.Field(default_factory=dict, description="Node labels.")
    taints: list[common.Taint] = pydantic.Field(default_factory=list, description="Node taints.")
    allocatable: ResourceList = pydantic.Field(
        default_factory=dict, description="Allocatable resources per node (cpu, memory, pods, ...)."
    )
    requested: ResourceList = pydantic.Field(
        default_factory=dict,
        description="Resources already requested per node, including pods (at least what any node of the "
                    "pool has requested).",
    )


class ClusterCapacity(common.SpecModel):
    """One member cluster's state as its agent reports it."""

    name: str = pydantic.Field(min_length=1, description="Member cluster name.")
    labels: dict[str, str] = pydantic.Field(
        default_factory=dict, description="MemberCluster labels (topology)."
    )
    ready: bool = pydantic.Field(default=True, description="False when the agent is lost.")
    taints: list[common.Taint] = pydantic.Field(
        default_factory=list, description="Cluster-level taints from MemberCluster.spec."
    )
    node_pools: list[NodePool] = pydantic.Field(
        default_factory=list, description="The cluster's nodes, grouped into pools."
    )
    decommissioned: bool = pydantic.Field(
        default=False,
        description="The MemberCluster's spec.decommission: no subset selects it, named or matched.",
    )

    @property
    def cordoned(self) -> bool:
        """A NoSchedule or NoExecute cluster taint keeps new replicas away."""
        return self.cordon != ""

    @property
    def cordon(self) -> Cordon:
        """The cluster's cordon (`cordon_of` its taints)."""
        return cordon_of(self.taints)


class CapacitySnapshot(common.SpecModel):
    """Every member cluster's capacity at one moment: the placement core's view of the world."""

    clusters: list[ClusterCapacity] = pydantic.Field(
        default_factory=list, description="Member clusters."
    )

    @pydantic.field_validator("clusters")
    @classmethod
    def _unique_names(cls, value: list[ClusterCapacity]) -> list[ClusterCapacity]:
        seen: set[str] = set()
        for cluster in value:
            if cluster.name in seen:
                raise ValueError(f"cluster {cluster.name!r} appears twice")
            seen.add(cluster.name)
        return value

    def by_name(self) -> dict[str, ClusterCapacity]:
        """Clusters keyed by name."""
        return {c.name: c for c in self.clusters}
