"""The FederatedSpread kind: Kruise's WorkloadSpread, lifted from zones to clusters.

Why it looks like this: a user who knows OpenKruise's WorkloadSpread should recognise every field.
Subsets are ordered; each names its clusters (explicitly or by a label selector over MemberClusters),
optionally a node pool inside them, and an optional cap. Cross-field rules (unique names, one kind of
cap, percentages within 100%, no adaptive settings under Fixed; floors and topology spread in
`topology`) are checked here so that every problem is reported with its own field path — see
`federation.api.problems` for how they reach the user.

A subset's own fields are `federation.api.subset`'s, the target's `federation.api.target`'s and the
status `federation.api.spread_status`'s; this module holds the spec and the kind, and re-exports
their models, which callers name as `spread.Subset` or `spread.FederatedSpreadStatus`.
"""

from __future__ import annotations

from typing import Literal

import pydantic
import pydantic_core

from federation.api import common, ordinal_rules, topology
from federation.api import propagate as propagate_api
from federation.api import rebalance as rebalance_api

# The spec's parts and the status live in their own modules; the kind's models stay importable from
# here, where the SDK, the docs and the tests name them (`spread.Subset`, `spread.FederatedSpreadStatus`).
from federation.api.spread_status import ClusterPlacementStatus as ClusterPlacementStatus
from federation.api.spread_status import DependencyStatus as DependencyStatus
from federation.api.spread_status import FederatedSpreadStatus as FederatedSpreadStatus
from federation.api.spread_status import SubsetClusterStatus as SubsetClusterStatus
from federation.api.spread_status import SubsetRevisionStatus as SubsetRevisionStatus
from federation.api.spread_status import SubsetStatus as SubsetStatus
from federation.api.spread_status import SubsetUnscheduledStatus as SubsetUnscheduledStatus
from federation.api.spread_status import TargetStatus as TargetStatus
from federation.api.subset import SUBSET_NAME_PATTERN as SUBSET_NAME_PATTERN
from federation.api.subset import ClusterSpread as ClusterSpread
from federation.api.subset import Subset as Subset
from federation.api.subset import percent_of as percent_of
from federation.api.target import TARGET_API_VERSIONS as TARGET_API_VERSIONS
from federation.api.target import TargetApiVersion as TargetApiVersion
from federation.api.target import TargetKind as TargetKind
from federation.api.target import TargetRef as TargetRef

KIND = "FederatedSpread"
PLURAL = "federatedspreads"

MAX_SECONDS = 2**31 - 1
"""The longest duration a spread may set (int32 seconds, ~68 years, as Kubernetes' own fields):
a duration is a timedelta in the coordinator and the agent, which overflows near 8.6e13 s."""

StrategyType = Literal["Fixed", "Adaptive"]
DeletionPolicy = Literal["Orphan", "Delete"]


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
