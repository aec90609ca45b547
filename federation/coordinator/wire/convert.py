"""Pure conversions from the coordinator's model to PlacementService messages.

Why a module of its own: the servicer should only validate requests and map errors, and the world
model should not know the wire format. Everything here is a function of plain data (core
placements, API models, datetimes) to protobuf messages, so it is tested without a server and any
source of placements (the in-memory one, the live world model) renders identically.

`PlacementRecord` and `ClusterRecord` are what a placement source hands the servicer: a core
`Placement` plus what only the live coordinator knows (ready counts, conditions, generation,
unschedulable marks), and a member cluster's registration plus its agent's latest inventory.
"""

from __future__ import annotations

import dataclasses
import datetime
import fractions
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.protobuf import timestamp_pb2

from federation.api import cluster, common, quantity, spread
from federation.core import failback_round, job_status, ordinals, placement, status
from federation.core import usage as usage_rules
from federation.core.reasons import Reason, ReasonKind
from federation.rpc import agent_pb2, common_pb2, placement_pb2

UNKNOWN = -1  # capacity / free capacity on the wire when unknown or unbounded


@dataclasses.dataclass(frozen=True)
class PlacementRecord:
    """One spread's live placement and what the coordinator knows around it."""

    key: str
    placement: placement.Placement
    spec: spread.FederatedSpreadSpec | None = None
    ready: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)
    conditions: Sequence[common.Condition] = ()
    generation: int = 0
    computed_at: datetime.datetime | None = None
    unschedulable_until: Mapping[tuple[str, str], datetime.datetime] = dataclasses.field(
        default_factory=dict
    )
    template: Mapping[str, Any] | None = None
    """The Deployment whose pod requests sized the placement (None: pods request nothing)."""
    free_capacity: Mapping[tuple[str, str], int | None] = dataclasses.field(default_factory=dict)
    """More pods of the template that fit per (subset, cluster); filled for Explain only."""
    rebalance: failback_round.Plan | None = None
    """The failback `spec.rebalance` would make (`fedspread rebalance`); for Explain only, when
    something would move."""
    revisions: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)
    """While the workload rolls out: per subset, its pods per template revision (else empty)."""
    usage: usage_rules.FederationUsage | None = None
    """The spread's usage from its agents' last reports (one live spread's; None in a list)."""

    def ready_by_cluster(self) -> dict[str, int]:
        """Ready replicas per cluster summed over subsets; every placed cluster appears."""
        totals = dict.fromkeys(self.placement.clusters, 0)
        for per_cluster in self.ready.values():
            for name, count in per_cluster.items():
                totals[name] = totals.get(name, 0) + count
        return totals


@dataclasses.dataclass(frozen=True)
class ClusterRecord:
    """A member cluster: MemberCluster registration plus its agent's latest report."""

    name: str
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    ready: bool = True
    taints: Sequence[common.Taint] = ()
    last_heartbeat: datetime.datetime | None = None
    agent_version: str = ""
    node_pools: Sequence[cluster.NodePool] = ()
    conditions: Sequence[common.Condition] = ()

    @property
    def cordoned(self) -> bool:
        """A NoSchedule or NoExecute cluster taint keeps new replicas away."""
        return cluster.cordon_of(self.taints) != ""

    def to_capacity(self) -> cluster.ClusterCapacity:
        """The placement core's view of this cluster."""
        return cluster.ClusterCapacity(
            name=self.name, labels=dict(self.labels), ready=self.ready,
            taints=list(self.taints), node_pools=list(self.node_pools),
        )


def timestamp(at: datetime.datetime | None) -> timestamp_pb2.Timestamp | None:
    """A protobuf Timestamp (naive datetimes are taken as UTC); None stays unset."""
    if at is None:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=datetime.UTC)
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(at)
    return stamp


def _known(value: int | None) -> int:
    return UNKNOWN if value is None else value


def cap_as_written(max_replicas: int | str | None) -> str:
    """The cap as the spec writes it: "" (unbounded), "30" or "50%"."""
    return "" if max_replicas is None else str(max_replicas)


def _caps(record: PlacementRecord) -> list[str]:
    if record.spec is not None and len(record.spec.subsets) == len(record.placement.subsets):
        return [cap_as_written(s.max_replicas) for s in record.spec.subsets]
    return [cap_as_written(s.cap) for s in record.placement.subsets]


def condition_to_pb(condition: common.Condition) -> common_pb2.Condition:
    """An API condition as a wire condition."""
    return common_pb2.Condition(
        type=condition.type, status=condition.status, reason=condition.reason,
        message=condition.message, last_transition_time=timestamp(condition.last_transition_time),
    )


def taint_to_pb(taint: common.Taint) -> common_pb2.Taint:
    """An API taint as a wire taint."""
    return common_pb2.Taint(key=taint.key, value=taint.value or "", effect=taint.effect,
                            time_added=timestamp(taint.time_added))


def placement_to_pb(record: PlacementRecord) -> placement_pb2.Placement:
    """The wire Placement: the placement JSON shape plus ready counts, caps, conditions, generation."""
    result = record.placement
    subsets = []
    for sub, cap in zip(result.subsets, _caps(record), strict=True):
        ready = record.ready.get(sub.name, {})
        subsets.append(placement_pb2.SubsetPlacement(
            name=sub.name, replicas=sub.replicas, cap=cap, waiting=sub.waiting, reasons=sub.reason_texts,
            revisions=dict(record.revisions.get(sub.name, {})), clusters=[
                placement_pb2.ClusterReplicas(cluster=name, replicas=count,
                                              ready_replicas=ready.get(name, 0))
                for name, count in sub.clusters.items()
            ],
        ))
    return placement_pb2.Placement(
        spread=record.key, replicas=result.replicas, unplaced=result.unplaced,
        capacity_exhausted=result.capacity_exhausted, clusters=dict(result.clusters),
        ready=record.ready_by_cluster() if record.ready else {}, subsets=subsets,
        conditions=[condition_to_pb(c) for c in record.conditions],
        observed_generation=record.generation, computed_at=timestamp(record.computed_at),
        rebalance=rebalance_plan_to_pb(record.rebalance) if record.rebalance is not None else None,
        usage=usage_to_pb(record.usage) if record.usage is not None else None,
    )


def usage_to_pb(found: usage_rules.FederationUsage) -> placement_pb2.FederationUsage:
    """The wire FederationUsage: each metric with a value as a quantity, and who is left out."""
    return placement_pb2.FederationUsage(
        metrics={name: value.quantity for name, value in sorted(found.values.items())},
        ready_pods=found.ready_pods, unmeasured_pods=found.unmeasured_pods,
        without_metrics=list(found.without_metrics), stale=list(found.stale))


def rebalance_plan_to_pb(plan: failback_round.Plan, *, started: bool = False) -> placement_pb2.RebalancePlan:
    """The wire RebalancePlan: each step's moves, pair by pair."""
    return placement_pb2.RebalancePlan(
        spread=plan.key, policy=plan.policy, started=started, steps=[
            placement_pb2.RebalanceStep(moves=[placement_pb2.RebalanceMove(
                from_subset=m.from_subset, from_cluster=m.from_cluster, to_subset=m.to_subset,
                to_cluster=m.to_cluster, replicas=m.replicas) for m in step]) for step in plan.steps])


def _cluster_reasons(reasons: Sequence[Reason], name: str) -> list[str]:
    """The reasons about cluster `name`, without its name (they are filed under it)."""
    return [r.said for r in reasons if r.cluster == name]


def _spread_reasons(result: placement.Placement) -> list[str]:
    found = []
    if result.unplaced:
        found.append(f"{result.unplaced} replicas beyond every cap or without a usable subset: "
                     "placed nowhere")
    if result.capacity_exhausted:
        found.append(f"{result.capacity_exhausted} replicas fit nowhere and wait Pending "
                     "(capacity exhausted)")
    return found


def _ordinal_reasons(record: PlacementRecord) -> dict[tuple[str, str], list[str]]:
    """For a spread of a StatefulSet: per (subset, cluster), the ordinals its pods take there
    (`ordinals.ordinal_ranges` over the cluster's quotas in subset order, as its webhook admits
    them), e.g. "ordinals 2-4 (db-2 to db-4)"; {} for other kinds."""
    if record.spec is None or record.spec.target_ref.kind != "StatefulSet":
        return {}
    workload = record.spec.target_ref.name
    found: dict[tuple[str, str], list[str]] = {}
    by_subset = {sub.name: sub.clusters for sub in record.placement.subsets}
    for name in sorted({name for clusters in by_subset.values() for name in clusters}):
        quotas = [(sub, clusters.get(name, 0)) for sub, clusters in by_subset.items()]
        for held in ordinals.ordinal_ranges(quotas):
            if name not in by_subset[held.subset]:
                continue
            if held.size == 0:
                text = "no ordinals"
            elif held.size == 1:
                text = f"ordinal {held.start} ({ordinals.pod_name(workload, held.start)})"
            else:
                text = (f"ordinals {held.start}-{held.stop - 1} ({ordinals.pod_name(workload, held.start)} "
                        f"to {ordinals.pod_name(workload, held.stop - 1)})")
            found[(held.subset, name)] = [text]
    return found


def explanation_to_pb(
    record: PlacementRecord, *, clusters: Sequence[ClusterRecord] = ()
) -> placement_pb2.Explanation:
    """Why each subset got what it got, from the core's reasons, caps and capacities.

    `clusters` supplies readiness and cordons (net of the spread's clusterTolerations); a cluster it
    does not list counts as not ready.
    """
    known = {c.name: c for c in clusters}
    tolerations = record.spec.cluster_tolerations if record.spec is not None else []
    ranges = _ordinal_reasons(record)
    subsets = []
    for sub, cap in zip(record.placement.subsets, _caps(record), strict=True):
        general = [r.text for r in sub.reasons if r.cluster is None or r.cluster not in sub.clusters]
        if sub.cap is not None:
            general.insert(0, f"cap {cap} = {sub.cap} of {record.placement.replicas}"
                           if cap.endswith("%") else f"cap {sub.cap}")
        explained = []
        for name, count in sub.clusters.items():
            member = known.get(name)
            until = record.unschedulable_until.get((sub.name, name))
            marked = any(r.kind is ReasonKind.UNSCHEDULABLE and r.cluster == name for r in sub.reasons)
            reasons = _cluster_reasons(sub.reasons, name) + ranges.get((sub.name, name), [])
            explained.append(placement_pb2.ClusterExplanation(
                cluster=name, ready=member is not None and member.ready,
                cordoned=member is not None
                and cluster.cordon_of(member.taints, tolerations=tolerations, now=record.computed_at) != "",
                unschedulable=until is not None or marked,
                unschedulable_until=timestamp(until),
                free_capacity=_known(record.free_capacity.get((sub.name, name))),
                replicas=count, reasons=reasons,
            ))
        subsets.append(placement_pb2.SubsetExplanation(
            name=sub.name, cap=cap, capacity=UNKNOWN if sub.capacity is None else sub.capacity,
            replicas=sub.replicas, reasons=general, clusters=explained,
        ))
    return placement_pb2.Explanation(
        spread=record.key, placement=placement_to_pb(record), subsets=subsets,
        reasons=_spread_reasons(record.placement),
    )


def _sum_resources(pools: Sequence[cluster.NodePool], field: str) -> dict[str, str]:
    totals: dict[str, fractions.Fraction] = {}
    for pool in pools:
        for resource, amount in getattr(pool, field).items():
            totals[resource] = totals.get(resource, fractions.Fraction(0)) + (
                quantity.parse_quantity(amount) * pool.count
            )
    return {r: quantity.format_quantity(a, resource=r) for r, a in sorted(totals.items())}


def node_pool_to_pb(pool: cluster.NodePool) -> common_pb2.NodePool:
    """An API node pool as a wire node pool."""
    return common_pb2.NodePool(
        name=pool.name, count=pool.count, labels=dict(pool.labels),
        taints=[taint_to_pb(t) for t in pool.taints],
        allocatable=dict(pool.allocatable), requested=dict(pool.requested),
    )


def cluster_info_to_pb(
    record: ClusterRecord, *, include_node_pools: bool = False
) -> placement_pb2.ClusterInfo:
    """A member cluster as ClusterInfo: readiness, cordon, heartbeat and capacity totals."""
    return placement_pb2.ClusterInfo(
        name=record.name, labels=dict(record.labels), ready=record.ready, cordoned=record.cordoned,
        taints=[taint_to_pb(t) for t in record.taints],
        last_heartbeat=timestamp(record.last_heartbeat), agent_version=record.agent_version,
        node_count=sum(p.count for p in record.node_pools),
        allocatable=_sum_resources(record.node_pools, "allocatable"),
        requested=_sum_resources(record.node_pools, "requested"),
        conditions=[condition_to_pb(c) for c in record.conditions],
        node_pools=[node_pool_to_pb(p) for p in record.node_pools] if include_node_pools else [],
    )


# --- agent reports, wire to domain ----------------------------------------------------------------


def workload_from_pb(found: agent_pb2.WorkloadStatus) -> status.WorkloadStatus:
    """A member workload's reported status (a member Job's with its `job` part)."""
    return status.WorkloadStatus(replicas=found.replicas, ready=found.ready_replicas,
                                 available=found.available_replicas, updated=found.updated_replicas,
                                 job=job_from_pb(found.job) if found.HasField("job") else None,
                                 template_revision=found.observed_template_revision
                                 if found.HasField("observed_template_revision") else None)


def _when(message: Any, field: str) -> datetime.datetime | None:
    if not message.HasField(field):
        return None
    stamp: datetime.datetime = getattr(message, field).ToDatetime(tzinfo=datetime.UTC)
    return stamp


def job_from_pb(found: agent_pb2.JobStatus) -> job_status.MemberJob:
    """A member Job's reported status and completions."""
    return job_status.MemberJob(
        active=found.active, succeeded=found.succeeded, failed=found.failed,
        start_time=_when(found, "start_time"), completion_time=_when(found, "completion_time"),
        complete=found.complete, failed_condition=found.failed_condition,
        completions=found.completions if found.has_completions else None,
        failed_time=_when(found, "failed_time"), failed_reason=found.failed_reason)


def pods_from_pb(counts: agent_pb2.PodCounts,
                 revisions: Iterable[agent_pb2.RevisionPodCount] = ()) -> status.ClusterPods:
    """One subset's reported pod counts in one cluster (and its pods per template revision)."""
    per_revision: dict[str, int] = {}
    for item in revisions:
        if item.revision and item.pods > 0:
            per_revision[item.revision] = per_revision.get(item.revision, 0) + item.pods
    return status.ClusterPods(
        running=counts.running, ready=counts.ready, pending=counts.pending,
        unschedulable=counts.unschedulable, creating=counts.creating, deleting=counts.deleting,
        revisions=tuple(sorted(per_revision.items())),
    )


@dataclasses.dataclass(frozen=True)
class PodCounts:
    """One PodCountsReport as the World takes it (`counts_from_pb`)."""

    counts: dict[str, dict[str, status.ClusterPods]]
    """Per spread, per subset (`status.UNASSIGNED`: pods of no subset the assignment has)."""
    workloads: dict[str, status.WorkloadStatus]
    conflicts: dict[str, str]
    dependency_conflicts: dict[str, tuple[str, ...]]
    """Per spread, the objects it needs (`Kind/name`) that the member has without our mark."""
    misplaced: dict[str, str]
    """Per spread, the agent's report of StatefulSet pods whose ordinal maps to another subset."""
    autoscalers: dict[str, tuple[str, ...]]
    """Per spread, the member HPAs ("namespace/name") scaling its member workload."""
    assigned: list[str] | None
    """The spreads the report is evidence for (agent.proto); None from an agent that does not say."""


def counts_from_pb(report: agent_pb2.PodCountsReport) -> PodCounts:
    """A PodCountsReport's counts, member Deployment statuses, conflicts and evidence. Pods of no
    subset (or of a subset the spread no longer has) are the spread's too, under UNASSIGNED; a
    restarted agent's first report is evidence of nothing."""
    counts = {item.spread: {s.subset: pods_from_pb(s.counts, s.revisions) for s in item.subsets}
              for item in report.spreads}
    for item in report.spreads:
        if item.HasField("unassigned") and (pods := pods_from_pb(item.unassigned)).active:
            counts[item.spread][status.UNASSIGNED] = pods
    assigned = list(report.assigned) if report.lists_assigned else None
    return PodCounts(
        counts=counts,
        workloads={item.spread: workload_from_pb(item.workload) for item in report.spreads
                   if item.HasField("workload")},
        conflicts={item.spread: item.conflict for item in report.spreads if item.conflict},
        dependency_conflicts={item.spread: tuple(sorted(item.dependency_conflicts))
                              for item in report.spreads if item.dependency_conflicts},
        misplaced={item.spread: item.misplaced for item in report.spreads if item.misplaced},
        autoscalers={item.spread: tuple(sorted(item.autoscalers)) for item in report.spreads
                     if item.autoscalers},
        assigned=[] if report.first_after_start else assigned)
