"""The status of a FederatedSpread: what the coordinator decided and observed, per subset and cluster.

Why a module of its own: the status is written by the coordinator and read back after a restart
(it seeds the placement), so it is lenient where the spec is strict — any target kind reads, an
older map form of a subset's clusters still reads — and that is a job apart from validating what
a user asks for (`federation.api.spread`).
"""

from __future__ import annotations

import datetime
from typing import Any

import pydantic

from federation.api import common
from federation.api import rebalance as rebalance_api
from federation.api.target import TargetRef


class SubsetUnscheduledStatus(common.StatusModel):
    """Whether a subset is temporarily skipped because its pods could not schedule."""

    unschedulable: bool = pydantic.Field(default=False, description="True while the subset is skipped.")
    unscheduled_time: datetime.datetime | None = pydantic.Field(
        default=None, description="When the subset was last marked unschedulable."
    )
    failed_count: int = pydantic.Field(default=0, description="How many times it was marked.")


class SubsetClusterStatus(common.StatusModel):
    """One cluster's share of a subset (a list entry named by `cluster`, as the API conventions
    want: a map keyed by cluster name would render `aws-eu` as `Aws - Eu` in `kubectl describe`)."""

    cluster: str = pydantic.Field(description="Member cluster name.")
    replicas: int = pydantic.Field(
        default=0, description="Replicas of this subset in the cluster (kept pods included)."
    )
    kept: int = pydantic.Field(
        default=0,
        description=("Of replicas, the Ready pods kept above the rule's share until their "
                     "replacements are Ready."),
    )


class SubsetRevisionStatus(common.StatusModel):
    """A subset's pods of one template revision, summed over the member clusters (a list entry
    named by `revision`, as `SubsetClusterStatus` is by cluster)."""

    revision: str = pydantic.Field(
        description=("The member workload's template revision: its pods' pod-template-hash (a "
                     "Deployment's) or controller-revision-hash (a StatefulSet's).")
    )
    replicas: int = pydantic.Field(
        default=0, description="Pods of this revision in the subset (running, pending or being created)."
    )


class SubsetStatus(common.StatusModel):
    """Per-subset bookkeeping, as in WorkloadSpread, with the per-cluster split."""

    name: str = pydantic.Field(description="Subset name.")
    replicas: int = pydantic.Field(default=0, description="Replicas placed in this subset.")
    missing_replicas: int = pydantic.Field(
        default=-1, description="Pods still to create to reach the cap; -1 when unbounded."
    )
    clusters: list[SubsetClusterStatus] = pydantic.Field(
        default_factory=list, description="Replicas of this subset per cluster, in placement order."
    )
    creating_pods: dict[str, datetime.datetime] = pydantic.Field(
        default_factory=dict, description="Pods assigned by a webhook, not yet seen by a controller."
    )
    deleting_pods: dict[str, datetime.datetime] = pydantic.Field(
        default_factory=dict, description="Pods being deleted or evicted, not yet gone."
    )
    subset_unscheduled_status: SubsetUnscheduledStatus | None = pydantic.Field(
        default=None, description="Set when the subset could not schedule its pods."
    )
    revisions: list[SubsetRevisionStatus] | None = pydantic.Field(
        default=None,
        description=("While a rollout runs (pods of more than one template revision anywhere): this "
                     "subset's pods per revision, by revision name; absent otherwise."),
    )

    @pydantic.field_validator("clusters", mode="before")
    @classmethod
    def _clusters_from_a_map(cls, value: Any) -> Any:
        """A status written before the list form (`{cluster: replicas}`) still reads: a restarted
        coordinator seeds its placement from it."""
        if isinstance(value, dict):
            return [{"cluster": name, "replicas": count} for name, count in value.items()]
        return value

    def placed(self) -> dict[str, int]:
        """Replicas per cluster, kept pods included (what the agents were told to run)."""
        return {entry.cluster: entry.replicas for entry in self.clusters}

    def ruled(self) -> dict[str, int]:
        """Replicas per cluster less the kept pods: the placement rule's own answer."""
        return {entry.cluster: entry.replicas - entry.kept for entry in self.clusters}


class ClusterPlacementStatus(common.StatusModel):
    """Replicas assigned to one cluster and how many of them are ready."""

    cluster: str = pydantic.Field(description="Member cluster name.")
    replicas: int = pydantic.Field(default=0, description="Replicas assigned to the cluster.")
    ready_replicas: int = pydantic.Field(default=0, description="Of those, ready.")


class TargetStatus(common.StatusModel):
    """The hub workload a placed spread carries (lenient, as every status: any kind reads)."""

    api_version: str = pydantic.Field(default="apps/v1", description="API version of the workload.")
    kind: str = pydantic.Field(default="Deployment", description="Kind of the workload.")
    name: str = pydantic.Field(description="Name of the workload in the spread's namespace.")

    def names(self, ref: TargetRef) -> bool:
        """Whether `ref` names this same workload."""
        return (self.api_version, self.kind, self.name) == (ref.api_version, ref.kind, ref.name)


class DependencyStatus(common.StatusModel):
    """One object the pod template references or `spec.propagate` lists, and where fedspread copies
    it (`spec.propagateDependencies`)."""

    kind: str = pydantic.Field(description=(
        "ConfigMap, Secret, ServiceAccount or PersistentVolumeClaim the template references, or a "
        "kind spec.propagate lists (Service, PodDisruptionBudget, NetworkPolicy, Role, RoleBinding)."))
    name: str = pydantic.Field(description="Its name, in the spread's namespace.")
    found: bool = pydantic.Field(
        default=False,
        description="It exists on the hub; false: nothing is copied, copies already made are kept.")
    optional: bool = pydantic.Field(
        default=False, description="Every use of it says optional: its absence is not DependencyMissing.")
    clusters: list[str] = pydantic.Field(
        default_factory=list,
        description="Member clusters it is copied to: those running replicas of the spread, less conflicts.")
    conflicts: list[str] = pydantic.Field(
        default_factory=list,
        description=("Member clusters holding a same-name object fedspread did not create: left "
                     "alone, and the pods there use it."),
    )


class FederatedSpreadStatus(common.StatusModel):
    """What the coordinator decided and observed."""

    observed_generation: int | None = pydantic.Field(
        default=None, description="The spec generation this status reflects."
    )
    target_ref: TargetStatus | None = pydantic.Field(
        default=None,
        description=("The workload this spread places, as its targetRef named it when placed. "
                     "targetRef is fixed on a live spread: an edit of it is refused and this stays "
                     "in force, also for a restarted coordinator."),
    )
    replicas: int = pydantic.Field(default=0, description="Total replicas requested by the target.")
    ready_replicas: int = pydantic.Field(default=0, description="Ready replicas across clusters.")
    unplaced_replicas: int = pydantic.Field(
        default=0, description="Replicas beyond every cap or with no usable subset."
    )
    placement: list[ClusterPlacementStatus] = pydantic.Field(
        default_factory=list, description="Replicas per cluster."
    )
    subset_statuses: list[SubsetStatus] = pydantic.Field(
        default_factory=list, description="Per-subset status in spec order."
    )
    conditions: list[common.Condition] = pydantic.Field(
        default_factory=list, description="Valid, Placed, CapacityExhausted, ..."
    )
    dependencies: list[DependencyStatus] | None = pydantic.Field(
        default=None,
        description=("The objects the pod template references and spec.propagate lists, and where "
                     "they are copied; absent when there are none or propagateDependencies is false."),
    )
    rebalancing: rebalance_api.RebalancingStatus | None = pydantic.Field(
        default=None,
        description=("The failback step in flight and the last move's time (spec.rebalance); absent "
                     "when the spread never failed back."),
    )
