"""The FederatedSpread kind: Kruise's WorkloadSpread, lifted from zones to clusters.

Why it looks like this: a user who knows OpenKruise's WorkloadSpread should recognise every field.
Subsets are ordered; each names its clusters (explicitly or by a label selector over MemberClusters),
optionally a node pool inside them, and an optional cap. Cross-field rules (unique names, one kind of
cap, percentages within 100%, no adaptive settings under Fixed; floors and topology spread in
`topology`) are checked here so that every problem is reported with its own field path — see
`federation.api.problems` for how they reach the user.
"""

from __future__ import annotations

import datetime
import re
from typing import Any, Literal

import pydantic
import pydantic_core

from federation.api import common, ordinal_rules, topology
from federation.api import propagate as propagate_api
from federation.api import rebalance as rebalance_api

KIND = "FederatedSpread"
PLURAL = "federatedspreads"

SUBSET_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_PERCENT = re.compile(r"^([0-9]{1,3})%$")

MAX_SECONDS = 2**31 - 1
"""The longest duration a spread may set (int32 seconds, ~68 years, as Kubernetes' own fields):
a duration is a timedelta in the coordinator and the agent, which overflows near 8.6e13 s."""

ClusterSpread = Literal["Fill", "Balance", "Capacity"]
StrategyType = Literal["Fixed", "Adaptive"]
DeletionPolicy = Literal["Orphan", "Delete"]


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


TargetKind = Literal["Deployment", "ReplicaSet", "StatefulSet", "Job"]
"""The workload kinds a spread can target: each has its row in `federation.core.workload_kinds`
and its strategy in the agent (`agents.controller.kinds`)."""
TargetApiVersion = Literal["apps/v1", "batch/v1"]
TARGET_API_VERSIONS: dict[str, str] = {"Deployment": "apps/v1", "ReplicaSet": "apps/v1",
                                       "StatefulSet": "apps/v1", "Job": "batch/v1"}
"""The apiVersion each accepted kind is served as (the API cannot import the kind table,
`federation.core.workload_kinds`, which says the same; tests/unit/test_target_kinds.py checks)."""


class TargetRef(common.SpecModel):
    """The hub workload whose replicas are spread."""

    api_version: TargetApiVersion = pydantic.Field(
        default="apps/v1",
        description="API version of the target workload: apps/v1 (Deployment, ReplicaSet, StatefulSet) "
                    "or batch/v1 (Job).",
    )
    kind: TargetKind = pydantic.Field(
        default="Deployment",
        description="Kind of the target workload: Deployment, ReplicaSet, StatefulSet or Job.",
    )
    name: str = pydantic.Field(
        min_length=1, description="Name of the workload in the spread's namespace on the hub."
    )

    @pydantic.field_validator("kind")
    @classmethod
    def _served_as(cls, kind: str, info: pydantic.ValidationInfo) -> str:
        """The kind must be named with the apiVersion it is served as (`apps/v1 Job` or `batch/v1
        Deployment` names nothing the hub serves)."""
        api_version = info.data.get("api_version")
        served = TARGET_API_VERSIONS[kind]
        if api_version is not None and api_version != served:
            raise ValueError(f"{kind} is served as {served}, not {api_version}: "
                             f"set spec.targetRef.apiVersion to {served}")
        return kind

    @property
    def described(self) -> str:
        """`Kind 'name'`, as messages name the target."""
        return f"{self.kind} {self.name!r}"


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


class AdaptiveStrategy(common.SpecModel):
    """Tuning of the Adaptive strategy."""

    disable_simulation_schedule: bool = pydantic.Field(
        default=False,
        description="Do not limit subsets by simulated node capacity; rely on reschedule only.",
    )
    reschedule_critical_seconds: int = pydantic.Field(
        default=30,
        description="A pod Pending-Unschedulable this long marks its subset unschedulable in its cluster.",
        json_schema_extra={"exclusiveMinimum": 0, "maximum": MAX_SECONDS},
    )
    unschedulable_seconds: int = pydantic.Field(
        default=300,
        description="How long an unschedulable mark keeps new replicas away.",
        json_schema_extra={"exclusiveMinimum": 0, "maximum": MAX_SECONDS},
    )

    @pydantic.field_validator("reschedule_critical_seconds", "unschedulable_seconds")
    @classmethod
    def _positive(cls, value: int, info: pydantic.ValidationInfo) -> int:
        if value <= 0:
            raise ValueError(f"must be greater than 0 seconds, got {value}")
        if value > MAX_SECONDS:
            raise ValueError(f"must be at most {MAX_SECONDS} seconds, got {value}")
        return value


def is_adaptive(strategy_type: str) -> bool:
    """Whether a strategy type (the API's string, as the wire carries it too) is Adaptive."""
    return strategy_type == "Adaptive"


class ScheduleStrategy(common.SpecModel):
    """Fixed fills subsets by caps only; Adaptive also respects capacity and overflows."""

    type: StrategyType = pydantic.Field(
        default="Fixed",
        description="Fixed: caps only. Adaptive: caps and capacity, overflowing to the next subset.",
    )
    adaptive: AdaptiveStrategy | None = pydantic.Field(
        default=None, description="Settings of the Adaptive strategy; refused with type Fixed."
    )

    def adaptive_settings(self) -> AdaptiveStrategy:
        """The adaptive settings, defaulted when absent."""
        return self.adaptive if self.adaptive is not None else AdaptiveStrategy()

    @property
    def is_adaptive(self) -> bool:
        """True for the Adaptive strategy: capacity counts, overflow, unschedulable marks, reschedule."""
        return is_adaptive(self.type)


class Failover(common.SpecModel):
    """When a member cluster is considered lost."""

    cluster_lost_seconds: int = pydantic.Field(
        default=60, gt=0, le=MAX_SECONDS, description="An agent silent this long marks its cluster not ready."
    )


class ClusterToleration(common.Toleration):
    """A MemberCluster taint this spread tolerates (a core/v1 Toleration, matched against cluster taints)."""

    toleration_seconds: int | None = pydantic.Field(
        default=None,
        description=(
            "Only with effect NoExecute or empty: the spread's replicas stay on a cluster with a "
            "matching NoExecute taint for this many seconds after the taint's timeAdded, then move "
            "away (gracefully: replacements Ready first). Unset: they stay as long as the taint."
        ),
        json_schema_extra={"minimum": 0, "maximum": MAX_SECONDS},
    )

    @pydantic.model_validator(mode="after")
    def _operator_rules(self) -> ClusterToleration:
        # Overrides the pod toleration's rules to report each problem at its own field.
        problems: list[tuple[str, str]] = []
        if self.operator == "Exists" and self.value:
            problems.append(("operator", "operator Exists takes no value; use Equal or remove the value"))
        if not self.key and self.operator != "Exists":
            problems.append(("operator", "an empty key requires operator Exists (it tolerates every taint)"))
        seconds = self.toleration_seconds
        if seconds is not None:
            if self.effect not in ("", "NoExecute"):
                problems.append(("tolerationSeconds",
                                 f"applies only to effect NoExecute (or empty), not {self.effect}"))
            if seconds < 0:
                problems.append(("tolerationSeconds", f"must not be negative, got {seconds}"))
            elif seconds > MAX_SECONDS:
                problems.append(("tolerationSeconds", f"must be at most {MAX_SECONDS}, got {seconds}"))
        if problems:
            raise pydantic_core.PydanticCustomError(
                "spread_rules",
                "{summary}",
                {"summary": "; ".join(f"{p}: {m}" for p, m in problems), "problems": problems},
            )
        return self


class FederatedSpreadSpec(common.SpecModel):
    """What a user asks for: which workload, which ordered subsets, which strategy."""

    target_ref: TargetRef = pydantic.Field(
        description="The hub workload to spread (a Deployment, a ReplicaSet, a StatefulSet or a Job).")
    subsets: list[Subset] = pydantic.Field(
        min_length=1, description="Ordered subsets; earlier subsets fill first."
    )
    schedule_strategy: ScheduleStrategy = pydantic.Field(
        default_factory=ScheduleStrategy, description="Fixed or Adaptive."
    )
    failover: Failover = pydantic.Field(
        default_factory=Failover, description="Cluster loss detection."
    )
    cluster_tolerations: list[ClusterToleration] = pydantic.Field(
        default_factory=list,
        description=(
            "MemberCluster taints this spread tolerates (as Karmada's PropagationPolicy "
            "clusterTolerations): a tolerated NoSchedule taint lets new replicas go there; a tolerated "
            "NoExecute taint keeps the replicas there and lets new ones come. An empty key with "
            "operator Exists tolerates every taint; an empty effect matches every effect."
        ),
    )
    deletion_policy: DeletionPolicy = pydantic.Field(
        default="Orphan",
        description=(
            "What deleting this spread does to its member workloads: Orphan (the default) leaves "
            "them and their pods running, no longer managed by fedspread; Delete removes them."
        ),
    )
    propagate_dependencies: bool = pydantic.Field(
        default=True,
        description=(
            "Copy the objects the pod template references (ConfigMaps and Secrets of volumes, env "
            "and envFrom, imagePullSecrets, a ServiceAccount other than default, "
            "PersistentVolumeClaims) from the spread's namespace on the hub into every member "
            "cluster that runs replicas, before the workload, and keep them in sync with the hub. "
            "false: fedspread copies none and hands over the copies it made for this spread."
        ),
    )
    propagate: list[propagate_api.PropagateRef] = pydantic.Field(
        default_factory=list,
        description=(
            "Further objects of the spread's namespace on the hub, by apiVersion, kind and name, sent "
            "with the dependencies to every member cluster that runs replicas: a Service, a "
            "PodDisruptionBudget (an absolute minAvailable or maxUnavailable is divided in proportion "
            "to each cluster's replicas; a percentage is copied), a NetworkPolicy, a Role or RoleBinding."
        ),
    )

    topology_spread: list[topology.TopologySpreadConstraint] = pydantic.Field(
        default_factory=list,
        description=(
            "Skew limits across MemberCluster topology domains (KEP-895 lifted to clusters); every "
            "constraint must hold. Subset order still decides where first; skew decides how unequal."
        ),
    )

    rebalance: rebalance_api.Rebalance = pydantic.Field(
        default_factory=rebalance_api.Rebalance,
        description=(
            "Failback to higher-priority subsets once they have room again (policy WhenRoom), "
            "surge first and bounded by maxSurge and cooldownSeconds; Never (the default) keeps "
            "replicas where they were placed (`fedspread rebalance` makes one failback on demand). "
            "The Rebalancing condition says what a failback does or waits for."
        ),
    )

    @pydantic.model_validator(mode="after")
    def _cross_field_rules(self) -> FederatedSpreadSpec:
        problems = cross_field_problems(self)
        if problems:
            raise pydantic_core.PydanticCustomError(
                "spread_rules",
                "{summary}",
                {"summary": "; ".join(f"{p}: {m}" for p, m in problems), "problems": problems},
            )
        return self


def _article(kind: str) -> str:
    return f"an {kind}" if kind == "integer" else f"a {kind}"


def cross_field_problems(spec: FederatedSpreadSpec) -> list[tuple[str, str]]:
    """Rules spanning several fields, as (path relative to the spec, message) pairs."""
    problems: list[tuple[str, str]] = []
    first_index: dict[str, int] = {}
    first_cap_kind: tuple[int, str] | None = None
    percent_total = 0
    for index, subset in enumerate(spec.subsets):
        here = f"subsets[{index}]"
        if subset.name in first_index:
            first = first_index[subset.name]
            problems.append(
                (f"{here}.name", f"duplicate subset name {subset.name!r} (already used by subsets[{first}])")
            )
        else:
            first_index[subset.name] = index
        if (subset.clusters is None) == (subset.cluster_selector is None):
            both = "both" if subset.clusters is not None else "neither"
            problems.append(
                (here, f"set exactly one of clusters or clusterSelector ({both} is set)")
            )
        if subset.max_replicas is not None:
            kind = "percentage" if subset.percent is not None else "integer"
            if first_cap_kind is None:
                first_cap_kind = (index, kind)
            elif first_cap_kind[1] != kind:
                problems.append(
                    (f"{here}.maxReplicas",
                     f"mixes cap kinds: subsets[{first_cap_kind[0]}] has {_article(first_cap_kind[1])} "
                     f"cap, this one {_article(kind)}; use one kind for all bounded subsets")
                )
            if subset.percent is not None:
                percent_total += subset.percent
    if percent_total > 100:
        problems.append(
            ("subsets", f"percentage maxReplicas sum to {percent_total}%, at most 100% is allowed")
        )
    target = spec.target_ref
    problems.extend(ordinal_rules.problems(target.kind, spec.subsets))
    problems.extend(propagate_api.problems(
        spec.propagate, target=(target.api_version, target.kind, target.name),
        propagate_dependencies=spec.propagate_dependencies))
    problems.extend(topology.cross_field_problems(
        [(subset.min_replicas, subset.max_replicas) for subset in spec.subsets], spec.topology_spread))
    strategy = spec.schedule_strategy
    if not strategy.is_adaptive and strategy.adaptive is not None:
        problems.append(
            ("scheduleStrategy.adaptive",
             "adaptive settings apply only to type Adaptive; remove them or set type: Adaptive")
        )
    return problems


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


class FederatedSpread(pydantic.BaseModel):
    """A FederatedSpread object as stored in the hub."""

    model_config = pydantic.ConfigDict(
        alias_generator=pydantic.alias_generators.to_camel, populate_by_name=True, extra="forbid"
    )

    api_version: Literal["fedspread.io/v1alpha1"] = pydantic.Field(
        default="fedspread.io/v1alpha1", description="fedspread.io/v1alpha1."
    )
    kind: Literal["FederatedSpread"] = pydantic.Field(
        default="FederatedSpread", description="FederatedSpread."
    )
    metadata: common.ObjectMeta = pydantic.Field(description="Standard object metadata.")
    spec: FederatedSpreadSpec = pydantic.Field(description="The desired spread.")
    status: FederatedSpreadStatus | None = pydantic.Field(
        default=None, description="The observed placement."
    )

    @property
    def key(self) -> str:
        """`namespace/name`, the spread's identity everywhere in fedspread."""
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"
