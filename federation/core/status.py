"""Status basics: agents' pod reports, the condition rule, MemberCluster and hub workload status.

Why a pure module: the status is how a person learns what the coordinator decided and why.
Keeping it free of clients lets the status writer stay a thin shell that writes only when
`status_changed` says so, and lets the messages be tested word for word. This module holds what
every kind of status shares — the pod counts agents report (`ClusterPods`, `WorkloadStatus`) and
Kubernetes' condition convention (`condition`: `lastTransitionTime` moves only when a condition's
status flips) — and the two small statuses built on them; the FederatedSpread's own conditions and
counts, arithmetic over a placement, are in `spread_status`.

Times are written with whole seconds, as Kubernetes does, so a status read back compares equal;
pass timezone-aware datetimes (UTC), as the hub returns them.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import pydantic

from federation.api import common
from federation.core import job_status

UNASSIGNED = ""
"""Report key for pods of the workload in no subset: counted as ready, in no subset's status."""

ConditionStatus = Literal["True", "False", "Unknown"]


@dataclasses.dataclass(frozen=True)
class ClusterPods:
    """One subset's pods of one spread in one cluster, as the cluster's agent counted them.

    The states are disjoint: a pod is counted in one of running, pending, creating or deleting
    (`ready` and `unschedulable` are parts of running and pending).
    """

    running: int = 0
    ready: int = 0
    pending: int = 0
    unschedulable: int = 0
    creating: int = 0
    deleting: int = 0
    revisions: tuple[tuple[str, int], ...] = ()
    """The pods holding the subset's quota per template revision of the member workload (its
    pod-template-hash or controller-revision-hash): (revision, pods) sorted by revision; empty from
    an agent that does not count them. Shown in the spread's status while a rollout runs."""

    @property
    def active(self) -> int:
        """Pods that exist or are about to and are not going: running + pending + creating.

        A pod being deleted is counted in `deleting` only, never also in running, pending or
        creating, so nothing is subtracted here: a subset's missing replicas (its cap minus this)
        count that pod once, as the slot its replacement takes.
        """
        return self.running + self.pending + self.creating


@dataclasses.dataclass(frozen=True)
class WorkloadStatus:
    """The member workload's `status` as its agent reported it."""

    replicas: int = 0
    ready: int = 0
    available: int = 0
    updated: int = 0
    job: job_status.MemberJob | None = None
    """For a member Job: its status and completions (the counts above are then 0)."""
    template_revision: str | None = None
    """The template revision its controller has observed ("" while it has not; None: not reported,
    an older agent): the hub's `observedGeneration` waits for every member (`rolled_out`)."""


@dataclasses.dataclass(frozen=True)
class ClusterReport:
    """Everything one cluster's agent reported for one spread: pods per subset, its Deployment."""

    pods: Mapping[str, ClusterPods] = dataclasses.field(default_factory=dict)
    workload: WorkloadStatus | None = None


def pods_by_cluster(reports: Mapping[str, ClusterReport]) -> dict[str, Mapping[str, ClusterPods]]:
    """Cluster -> subset -> pods, the shape `spread_status` reads."""
    return {name: report.pods for name, report in reports.items()}


def workloads_by_cluster(reports: Mapping[str, ClusterReport]) -> dict[str, WorkloadStatus]:
    """Cluster -> member Deployment status, for clusters that reported one."""
    return {name: r.workload for name, r in reports.items() if r.workload is not None}


def whole_seconds(at: datetime.datetime) -> datetime.datetime:
    """`at` without its microseconds, as Kubernetes writes times."""
    return at.replace(microsecond=0)


def condition(
    kind: str,
    status: ConditionStatus,
    *,
    reason: str,
    message: str,
    previous: Sequence[common.Condition],
    now: datetime.datetime,
    generation: int | None = None,
) -> common.Condition:
    """A condition whose lastTransitionTime moves only when its status changes."""
    since = whole_seconds(now)
    for old in previous:
        if old.type == kind and old.status == status and old.last_transition_time is not None:
            since = old.last_transition_time
    return common.Condition(
        type=kind, status=status, reason=reason, message=message,
        last_transition_time=since, observed_generation=generation,
    )


def member_cluster_conditions(
    *,
    ready: bool,
    last_heartbeat: datetime.datetime | None,
    lost_after: datetime.timedelta,
    previous: Sequence[common.Condition],
    now: datetime.datetime,
) -> list[common.Condition]:
    """The MemberCluster's conditions: `Ready` recomputed, other types from `previous` kept."""
    limit = int(lost_after.total_seconds())
    if ready:
        ago = "" if last_heartbeat is None else f" {int((now - last_heartbeat).total_seconds())} s ago"
        verdict = condition(
            "Ready", "True", reason="AgentHeartbeat",
            message=f"the agent was heard{ago} (limit {limit} s)", previous=previous, now=now,
        )
    elif last_heartbeat is None:
        verdict = condition(
            "Ready", "False", reason="AgentNeverConnected",
            message="no agent has connected for this cluster yet; it takes no replicas until "
            "`fedspread agent --cluster <name>` runs in it and reaches the coordinator",
            previous=previous, now=now,
        )
    else:
        silent = int((now - last_heartbeat).total_seconds())
        verdict = condition(
            "Ready", "False", reason="AgentLost",
            message=f"no heartbeat for {silent} s (limit {limit} s); its replicas are being moved",
            previous=previous, now=now,
        )
    return [verdict] + [c for c in previous if c.type != "Ready"]


def decommission_condition(
    *, holding: Sequence[str], previous: Sequence[common.Condition], now: datetime.datetime,
) -> common.Condition:
    """A decommissioned MemberCluster's `Decommissioned` condition: False while spreads still hold
    replicas or pods there (named, the first few), True once none does (it may then be deleted)."""
    if not holding:
        return condition(
            "Decommissioned", "True", reason="NothingHeld",
            message="no spread holds replicas or pods here any more; the MemberCluster may be deleted",
            previous=previous, now=now)
    shown = ", ".join(sorted(holding)[:5]) + (f" and {len(holding) - 5} more" if len(holding) > 5 else "")
    return condition(
        "Decommissioned", "False", reason="SpreadsMoving",
        message=f"decommissioning: no spread selects this cluster; {len(holding)} still hold replicas "
                f"or pods here, moving as their replacements become Ready: {shown}",
        previous=previous, now=now)


METRICS_AVAILABLE = "MetricsAvailable"
"""The MemberCluster condition saying whether its agent reads the member's metrics API."""


def metrics_condition(*, reason: str, message: str, previous: Sequence[common.Condition],
                      now: datetime.datetime) -> common.Condition:
    """A MemberCluster's `MetricsAvailable` condition from its agent's last usage report: True
    (reason `MetricsAPIAvailable`) when `reason` is empty, else False with the agent's reason
    (`federation.core.pod_usage.UNAVAILABLE_REASONS`) and what that means for the hub's figures."""
    if not reason:
        return condition(METRICS_AVAILABLE, "True", reason="MetricsAPIAvailable",
                         message="the agent reads this member's metrics.k8s.io API", previous=previous,
                         now=now)
    return condition(
        METRICS_AVAILABLE, "False", reason=reason,
        message=f"{message or reason}; this member's Ready pods are counted at the other members' "
                "average in the hub's usage metrics, never as idle", previous=previous, now=now)


def deployment_status(reports: Mapping[str, WorkloadStatus], *, replicas: int) -> dict[str, int]:
    """The hub Deployment's `status` fields summed over the member Deployments.

    `replicas` is the hub's `spec.replicas`: `unavailableReplicas` counts against it, as the
    Deployment controller does. All keys are always present so a merge patch resets stale values.
    """
    available = sum(r.available for r in reports.values())
    return {
        "replicas": sum(r.replicas for r in reports.values()),
        "readyReplicas": sum(r.ready for r in reports.values()),
        "availableReplicas": available,
        "updatedReplicas": sum(r.updated for r in reports.values()),
        "unavailableReplicas": max(0, replicas - available),
    }


def replicaset_status(reports: Mapping[str, WorkloadStatus], *, replicas: int) -> dict[str, int]:
    """The hub ReplicaSet's `status` fields summed over the member ReplicaSets. Every member pod
    carries the hub template's labels, so all are fully labelled. `replicas` (the hub's
    `spec.replicas`) is not used: a ReplicaSet's status has no count against it."""
    del replicas
    counted = sum(r.replicas for r in reports.values())
    return {
        "replicas": counted,
        "fullyLabeledReplicas": counted,
        "readyReplicas": sum(r.ready for r in reports.values()),
        "availableReplicas": sum(r.available for r in reports.values()),
    }


def statefulset_status(reports: Mapping[str, WorkloadStatus], *, replicas: int) -> dict[str, int]:
    """The hub StatefulSet's `status` fields summed over the member StatefulSets: `replicas`,
    `readyReplicas`, `updatedReplicas`. Not `currentReplicas` nor the revisions: the members'
    revisions are their own (each cluster's controller names them), and `kubectl rollout status`
    (1.20) waits on `readyReplicas` against the hub's `spec.replicas` and on equal revisions, which
    absent revisions are. `replicas` (the hub's `spec.replicas`) is not used."""
    del replicas
    return {
        "replicas": sum(r.replicas for r in reports.values()),
        "readyReplicas": sum(r.ready for r in reports.values()),
        "updatedReplicas": sum(r.updated for r in reports.values()),
    }


HUB_STATUS: Mapping[str, Callable[..., dict[str, int]]] = {
    "Deployment": deployment_status,
    "ReplicaSet": replicaset_status,
    "StatefulSet": statefulset_status,
}
"""Per `targetRef.kind`, the rule of the hub workload's status (called with the member reports and
`replicas=` the hub's `spec.replicas`): the kind's own status fields, so `kubectl get` and
`kubectl rollout status` read them as on a cluster that runs the workload."""


def observed_everywhere(reports: Mapping[str, WorkloadStatus], *, revision: str,
                        shares: Mapping[str, int]) -> bool:
    """Whether every cluster with a share (`shares`, replicas per cluster) reports a member workload
    whose controller observed the template `revision`: only then does the hub workload's
    `observedGeneration` move to its generation, so `kubectl rollout status` on the hub waits for
    every member's rollout instead of reading counts of the old template. `reports` are the member
    workloads the agents reported (not the pod counts that stand in for a missing one): a cluster
    with a share and no such report (its workload not made yet, its agent just restarted) is not
    there yet; an older agent's report (no revision) counts as observed, as before."""
    for name, count in shares.items():
        if not count:
            continue
        found = reports.get(name)
        if found is None or (found.template_revision is not None and found.template_revision != revision):
            return False
    return True


def workload_status(kind: str, reports: Mapping[str, WorkloadStatus], *, replicas: int) -> dict[str, int]:
    """The hub workload's `status` replica fields for its kind (KeyError for a kind not spread)."""
    return HUB_STATUS[kind](reports, replicas=replicas)


_ORDER_KEYS = ("type", "cluster")
"""List items keyed by one of these (conditions, placement) compare regardless of order."""


def _normal(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
        return whole_seconds(aware.astimezone(datetime.UTC))
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_normal(v) for v in value]
        for key in _ORDER_KEYS:
            if items and all(isinstance(i, dict) and key in i for i in items):
                return sorted(items, key=lambda i: str(i[key]))
        return items
    return value


def status_changed(old: pydantic.BaseModel | None, new: pydantic.BaseModel) -> bool:
    """Whether `new` differs from `old` in anything but order of conditions/placement and sub-second time."""
    if old is None:
        return True
    return bool(_normal(old.model_dump()) != _normal(new.model_dump()))
