"""Typed results and errors of the placement SDK, and their construction from wire messages.

Why plain dataclasses instead of handing out protobuf messages: callers should get Python values
(dicts, datetimes, None for "unknown") with stable names, and the JSON a script sees from
`SpreadPlacement.to_json()` must be exactly the placement JSON shape (`federation.api.placement_json`),
whatever the wire format becomes. Errors are exceptions named for what went wrong, so a caller can
`except SpreadNotFound` without knowing gRPC.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from google.protobuf import timestamp_pb2

from federation.api import placement_json
from federation.api.problems import Problem as Problem  # re-exported as federation.sdk.Problem
from federation.rpc import common_pb2, placement_pb2

# --- errors -------------------------------------------------------------------------------------


class FedspreadError(Exception):
    """Base of every SDK error; `code` is the gRPC status name ("NOT_FOUND", ...) when from one."""

    def __init__(self, message: str, *, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class SpreadNotFound(FedspreadError):
    """The coordinator knows no spread by that key."""


# `Problem`, one thing wrong with a request (field path, message), is the API's own
# (`federation.api.problems`): the SDK reports a problem as `simulate`, `Valid=False` and the hub's
# webhook do.


class InvalidRequest(FedspreadError):
    """The request was malformed (a bad key, an invalid spread); `problems` lists every problem."""

    def __init__(self, message: str, *, code: str = "", problems: list[Problem] | None = None) -> None:
        super().__init__(message, code=code)
        self.problems = problems or []


class CoordinatorUnavailable(FedspreadError):
    """The coordinator could not be reached or did not answer in time."""


class PermissionDenied(FedspreadError):
    """The coordinator refused the caller: an agent's certificate, or a user the hub's RBAC does not
    allow to read this (the message names the permission; deploy/README.md, 'Who may read
    placements')."""


class CertificateError(FedspreadError):
    """A certificate file given for mTLS is missing, malformed, expired or not its key's."""


# --- results ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Condition:
    """A status condition (Kubernetes convention)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: datetime.datetime | None = None


@dataclasses.dataclass(frozen=True)
class SubsetPlacement:
    """One subset's share: replicas per cluster (every cluster it selects), its cap as written."""

    name: str
    replicas: int
    clusters: dict[str, int]
    cap: str = ""
    waiting: int = 0
    ready: dict[str, int] = dataclasses.field(default_factory=dict)
    reasons: list[str] = dataclasses.field(default_factory=list)
    """The rules that decided the share ("cap 30 reached", "floor 2", "topologySpread <key> maxSkew 1")."""
    revisions: dict[str, int] = dataclasses.field(default_factory=dict)
    """While the workload rolls out: the subset's pods per template revision, over its clusters
    (empty otherwise, and in simulations)."""


@dataclasses.dataclass(frozen=True)
class RebalanceMove:
    """Replicas a failback step moves from one (subset, cluster) to a higher-priority one."""

    from_subset: str
    from_cluster: str
    to_subset: str
    to_cluster: str
    replicas: int


@dataclasses.dataclass(frozen=True)
class RebalancePlan:
    """A spread's whole failback (`fedspread rebalance`): each step starts its moves' new pods
    above the total, then removes as many from the lower-priority pairs once those are Ready."""

    spread: str
    policy: str
    steps: list[list[RebalanceMove]]
    started: bool = False
    """The coordinator started it (false for a dry run, or when nothing moves)."""

    def entry(self) -> dict[str, Any]:
        """The placement JSON's `rebalance` entry: `{"policy", "moves": [{"from", "to", "replicas"}]}`,
        the moves summed per pair of clusters in the order they first move."""
        summed: dict[tuple[str, str], int] = {}
        for step in self.steps:
            for move in step:
                pair = (move.from_cluster, move.to_cluster)
                summed[pair] = summed.get(pair, 0) + move.replicas
        return {"policy": self.policy, "moves": [{"from": source, "to": to, "replicas": count}
                                                 for (source, to), count in summed.items()]}


@dataclasses.dataclass(frozen=True)
class SpreadUsage:
    """A live spread's usage from its agents' last reports, as the hub's HPAs read it
    (external.metrics.k8s.io): each metric with a value, and which members are left out."""

    metrics: dict[str, str]
    """Per metric ("fedspread-cpu-utilization", ...), its value as a Kubernetes quantity."""
    ready_pods: int
    unmeasured_pods: int
    """Of the Ready pods, those counted at the measured average (no sample, no metrics API, stale)."""
    without_metrics: list[str] = dataclasses.field(default_factory=list)
    stale: list[str] = dataclasses.field(default_factory=list)

    def entry(self) -> dict[str, Any]:
        """The placement JSON's `usage` entry."""
        return {"metrics": dict(self.metrics), "readyPods": self.ready_pods,
                "unmeasuredPods": self.unmeasured_pods, "withoutMetrics": list(self.without_metrics),
                "stale": list(self.stale)}


@dataclasses.dataclass(frozen=True)
class SpreadPlacement:
    """A spread's placement (live, or simulated when `spread` is empty)."""

    spread: str
    replicas: int
    unplaced: int
    capacity_exhausted: int
    clusters: dict[str, int]
    ready: dict[str, int]
    subsets: list[SubsetPlacement]
    conditions: list[Condition] = dataclasses.field(default_factory=list)
    generation: int = 0
    computed_at: datetime.datetime | None = None
    rebalance: RebalancePlan | None = None
    """Explain of a live spread: the failback its spec.rebalance would make, when something would move."""
    usage: SpreadUsage | None = None
    """One live spread's usage (GetPlacement, Explain); None for a simulation and in a list."""

    @property
    def placed(self) -> int:
        """Replicas assigned to some (subset, cluster)."""
        return sum(s.replicas for s in self.subsets)

    def to_json(self, *, include_ready: bool = True) -> dict[str, Any]:
        """The placement document; with `"ready"` (as `fedspread get placement -o json`) unless told not."""
        return placement_json.document(
            replicas=self.replicas, unplaced=self.unplaced, clusters=self.clusters, subsets=self.subsets,
            ready=self.ready if include_ready else None,
            rebalance=self.rebalance.entry() if self.rebalance is not None else None,
            revisions={s.name: s.revisions for s in self.subsets if s.revisions},
            usage=self.usage.entry() if self.usage is not None else None)


@dataclasses.dataclass(frozen=True)
class Taint:
    """A cluster or node taint."""

    key: str
    value: str
    effect: str
    time_added: datetime.datetime | None = None
    """When the taint was added (timed NoExecute tolerations count from here); None when unknown."""


@dataclasses.dataclass(frozen=True)
class NodePool:
    """Identical nodes of a cluster (per-node resources)."""

    name: str
    count: int
    labels: dict[str, str]
    taints: list[Taint]
    allocatable: dict[str, str]
    requested: dict[str, str]


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    """A member cluster as the coordinator sees it."""

    name: str
    labels: dict[str, str]
    ready: bool
    cordoned: bool
    taints: list[Taint]
    last_heartbeat: datetime.datetime | None
    agent_version: str
    node_count: int
    allocatable: dict[str, str]
    requested: dict[str, str]
    conditions: list[Condition] = dataclasses.field(default_factory=list)
    node_pools: list[NodePool] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping (camelCase, as the CLUSTERS.yaml and MemberCluster shapes)."""
        return {
            "name": self.name, "labels": dict(self.labels), "ready": self.ready,
            "cordoned": self.cordoned, "taints": [dataclasses.asdict(t) for t in self.taints],
            "lastHeartbeat": self.last_heartbeat.isoformat() if self.last_heartbeat else None,
            "agentVersion": self.agent_version, "nodes": self.node_count,
            "allocatable": dict(self.allocatable), "requested": dict(self.requested),
        }


@dataclasses.dataclass(frozen=True)
class ClusterExplanation:
    """Why a subset got what it got in one cluster."""

    cluster: str
    ready: bool
    cordoned: bool
    unschedulable: bool
    unschedulable_until: datetime.datetime | None
    free_capacity: int | None
    replicas: int
    reasons: list[str]


@dataclasses.dataclass(frozen=True)
class SubsetExplanation:
    """Why a subset got what it got: its cap, capacity (None: unknown/unbounded) and reasons."""

    name: str
    cap: str
    capacity: int | None
    replicas: int
    reasons: list[str]
    clusters: list[ClusterExplanation]


@dataclasses.dataclass(frozen=True)
class Explanation:
    """A placement with the reasons behind each subset's share."""

    spread: str
    placement: SpreadPlacement
    subsets: list[SubsetExplanation]
    reasons: list[str]


# --- from the wire ------------------------------------------------------------------------------


def _time(message: Any, field: str) -> datetime.datetime | None:
    if not message.HasField(field):
        return None
    stamp: timestamp_pb2.Timestamp = getattr(message, field)
    moment: datetime.datetime = stamp.ToDatetime(tzinfo=datetime.UTC)
    return moment


def _known(value: int) -> int | None:
    return None if value < 0 else value


def condition_from_pb(message: common_pb2.Condition) -> Condition:
    """A wire condition as a Condition."""
    return Condition(type=message.type, status=message.status, reason=message.reason,
                     message=message.message,
                     last_transition_time=_time(message, "last_transition_time"))


def taint_from_pb(message: common_pb2.Taint) -> Taint:
    """A wire taint as a Taint."""
    return Taint(key=message.key, value=message.value, effect=message.effect,
                 time_added=_time(message, "time_added"))


def placement_from_pb(message: placement_pb2.Placement) -> SpreadPlacement:
    """A wire Placement as a SpreadPlacement (subset clusters keep the subset's order)."""
    return SpreadPlacement(
        spread=message.spread, replicas=message.replicas, unplaced=message.unplaced,
        capacity_exhausted=message.capacity_exhausted,
        clusters=dict(sorted(message.clusters.items())), ready=dict(sorted(message.ready.items())),
        subsets=[
            SubsetPlacement(
                name=s.name, replicas=s.replicas, cap=s.cap, waiting=s.waiting,
                clusters={c.cluster: c.replicas for c in s.clusters},
                ready={c.cluster: c.ready_replicas for c in s.clusters}, reasons=list(s.reasons),
                revisions=dict(sorted(s.revisions.items())),
            )
            for s in message.subsets
        ],
        conditions=[condition_from_pb(c) for c in message.conditions],
        generation=message.observed_generation, computed_at=_time(message, "computed_at"),
        rebalance=rebalance_from_pb(message.rebalance) if message.HasField("rebalance") else None,
        usage=usage_from_pb(message.usage) if message.HasField("usage") else None,
    )


def usage_from_pb(message: placement_pb2.FederationUsage) -> SpreadUsage:
    """A wire FederationUsage as a SpreadUsage (metrics by name)."""
    return SpreadUsage(metrics=dict(sorted(message.metrics.items())), ready_pods=message.ready_pods,
                       unmeasured_pods=message.unmeasured_pods, without_metrics=list(message.without_metrics),
                       stale=list(message.stale))


def rebalance_from_pb(message: placement_pb2.RebalancePlan) -> RebalancePlan:
    """A wire RebalancePlan as a RebalancePlan."""
    return RebalancePlan(spread=message.spread, policy=message.policy, started=message.started, steps=[
        [RebalanceMove(from_subset=m.from_subset, from_cluster=m.from_cluster, to_subset=m.to_subset,
                       to_cluster=m.to_cluster, replicas=m.replicas) for m in step.moves]
        for step in message.steps])


def cluster_from_pb(message: placement_pb2.ClusterInfo) -> ClusterInfo:
    """A wire ClusterInfo as a ClusterInfo."""
    return ClusterInfo(
        name=message.name, labels=dict(message.labels), ready=message.ready,
        cordoned=message.cordoned, taints=[taint_from_pb(t) for t in message.taints],
        last_heartbeat=_time(message, "last_heartbeat"), agent_version=message.agent_version,
        node_count=message.node_count, allocatable=dict(message.allocatable),
        requested=dict(message.requested),
        conditions=[condition_from_pb(c) for c in message.conditions],
        node_pools=[
            NodePool(name=p.name, count=p.count, labels=dict(p.labels),
                     taints=[taint_from_pb(t) for t in p.taints],
                     allocatable=dict(p.allocatable), requested=dict(p.requested))
            for p in message.node_pools
        ],
    )


def explanation_from_pb(message: placement_pb2.Explanation) -> Explanation:
    """A wire Explanation as an Explanation (-1 capacities become None)."""
    return Explanation(
        spread=message.spread, placement=placement_from_pb(message.placement),
        reasons=list(message.reasons),
        subsets=[
            SubsetExplanation(
                name=s.name, cap=s.cap, capacity=_known(s.capacity), replicas=s.replicas,
                reasons=list(s.reasons),
                clusters=[
                    ClusterExplanation(
                        cluster=c.cluster, ready=c.ready, cordoned=c.cordoned,
                        unschedulable=c.unschedulable,
                        unschedulable_until=_time(c, "unschedulable_until"),
                        free_capacity=_known(c.free_capacity), replicas=c.replicas,
                        reasons=list(c.reasons),
                    )
                    for c in s.clusters
                ],
            )
            for s in message.subsets
        ],
    )
