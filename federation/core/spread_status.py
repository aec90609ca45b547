"""The FederatedSpread's status: its conditions and per-subset counts, from a placement.

Why a module of its own: the status is how a person learns what the coordinator decided and why,
so each condition's message names the cause and the fix (a cap reached, clusters not ready or
cordoned, no free capacity, silent clusters, a Deployment fedspread does not own), and is tested
word for word. It is arithmetic over a `placement.Placement`, the pod counts agents report
(`status.ClusterPods`) and the unschedulable marks; each condition and its message is
`spread_conditions`'s, and the condition rule it shares with the other kinds
(`lastTransitionTime` moves only when a status flips) lives in `status`.

`creatingPods` / `deletingPods` stay empty here: each agent keeps those maps for its own webhook
(a pod name and a timestamp per admission, expiring in seconds); the hub gets their counts through
`missingReplicas` instead of a copy that would be stale on arrival.

A spec that is not in force (invalid, or refused by a target rule) keeps the status of the last
valid one with `Valid=False` (`invalid_spread_status`, `refused_spread_status`).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from federation.api import spread
from federation.core import brake, placement, spread_conditions, status


def _unscheduled(
    name: str,
    marks: Sequence[placement.UnschedulableMark],
    *,
    window: datetime.timedelta,
    previous: spread.SubsetUnscheduledStatus | None,
    now: datetime.datetime,
) -> spread.SubsetUnscheduledStatus | None:
    """The subset's marks folded into previous: a mark is new when later than the last one seen."""
    mine = [m for m in marks if m.subset == name]
    if not mine and previous is None:
        return None
    last = previous.unscheduled_time if previous is not None else None
    count = previous.failed_count if previous is not None else 0
    count += sum(1 for m in mine if last is None or status.whole_seconds(m.since) > last)
    times = [status.whole_seconds(m.since) for m in mine] + ([last] if last is not None else [])
    return spread.SubsetUnscheduledStatus(
        unschedulable=any(now < m.since + window for m in mine),
        unscheduled_time=max(times) if times else None,
        failed_count=count,
    )


def spread_status(
    *,
    placement: placement.Placement,
    spec: spread.FederatedSpreadSpec,
    generation: int | None,
    reports: Mapping[str, Mapping[str, status.ClusterPods]],
    marks: Sequence[placement.UnschedulableMark],
    previous: spread.FederatedSpreadStatus | None,
    now: datetime.datetime,
    failover: brake.BrakeState | None = None,
    selectable: int = 0,
    conflicts: Mapping[str, str] | None = None,
    dependency_conflicts: Mapping[str, Sequence[str]] | None = None,
    missing_dependencies: Sequence[str] | None = None,
    dependencies: Sequence[spread.DependencyStatus] | None = None,
    misplaced: Mapping[str, str] | None = None,
    autoscalers: Mapping[str, Sequence[str]] | None = None,
) -> spread.FederatedSpreadStatus:
    """The FederatedSpread status for a placement, the agents' pod counts and the marks.

    `reports` is cluster -> subset -> pods (`UNASSIGNED` for pods of no subset); `previous` carries
    condition transition times and each subset's failedCount. `failover` is the spread's brake
    (of `selectable` clusters), shown as the FailoverSuspended condition; `conflicts` is cluster ->
    why its agent leaves a same-name Deployment it does not own alone; `dependency_conflicts` is
    cluster -> the objects the pods need (`Kind/name`) that it leaves alone for the same reason (both
    shown in the Conflict condition). `missing_dependencies` (`Kind/name`) are the objects the
    template references that the hub lacks (the DependencyMissing condition; None: the spread does
    not propagate its dependencies, and the condition is left out). `dependencies` is where each
    referenced object is (`status.dependencies`, for `kubectl describe`; None or empty: left out).
    `misplaced` is cluster -> its agent's report of StatefulSet pods whose ordinal maps to another
    subset now (the PodsMisplaced condition, present only while one is reported); `autoscalers`
    cluster -> the member HPAs scaling its member workload (AutoscalerConflict, likewise).
    """
    result = placement
    ready_of = {name: sum(p.ready for p in subsets.values()) for name, subsets in reports.items()}
    empty = status.ClusterPods()
    reported = {name for name, subsets in reports.items() if any(p != empty for p in subsets.values())}
    shown = sorted({n for n, count in result.clusters.items() if count} | reported)
    cluster_statuses = [
        spread.ClusterPlacementStatus(
            cluster=name, replicas=result.clusters.get(name, 0), ready_replicas=ready_of.get(name, 0)
        )
        for name in shown
    ]
    by_name = {s.name: s for s in result.subsets}
    before = {s.name: s for s in previous.subset_statuses} if previous is not None else {}
    window = datetime.timedelta(seconds=spec.schedule_strategy.adaptive_settings().unschedulable_seconds)
    per_revision = revisions_per_subset(reports)
    subset_statuses = []
    for subset in spec.subsets:
        placed = by_name.get(subset.name)
        cap = placed.cap if placed is not None else None
        active = sum(subsets[subset.name].active for subsets in reports.values() if subset.name in subsets)
        old = before.get(subset.name)
        subset_statuses.append(spread.SubsetStatus(
            name=subset.name,
            replicas=placed.replicas if placed is not None else 0,
            missing_replicas=-1 if cap is None else max(0, cap - active),
            clusters=[spread.SubsetClusterStatus(cluster=name, replicas=count,
                                                 kept=placed.kept_clusters.get(name, 0))
                      for name, count in placed.clusters.items()] if placed is not None else [],
            subset_unscheduled_status=_unscheduled(
                subset.name, marks, window=window,
                previous=old.subset_unscheduled_status if old is not None else None, now=now,
            ),
            revisions=None if per_revision is None else [
                spread.SubsetRevisionStatus(revision=name, replicas=count)
                for name, count in sorted(per_revision.get(subset.name, {}).items())],
        ))
    common_args: dict[str, Any] = {
        "previous": previous.conditions if previous is not None else [], "now": now,
        "generation": generation,
    }
    conditions = [
        status.condition("Valid", "True", reason="SpecValid", message="the spec passed validation",
                         **common_args),
        spread_conditions.placed_condition(result, **common_args),
        spread_conditions.capacity_condition(result, spec, **common_args),
        spread_conditions.ready_condition(result, reports, **common_args),
        spread_conditions.conflict_condition(conflicts or {}, dependency_conflicts or {}, **common_args),
    ]
    if missing_dependencies is not None:
        conditions.append(spread_conditions.dependency_condition(missing_dependencies, **common_args))
    for extra in (spread_conditions.misplaced_condition(misplaced or {}, **common_args),
                  spread_conditions.autoscaler_condition(autoscalers or {}, **common_args)):
        if extra is not None:
            conditions.append(extra)
    suspended = spread_conditions.failover_condition(failover, selectable=selectable, **common_args)
    if suspended is not None:
        conditions.append(suspended)
    target = spec.target_ref
    return spread.FederatedSpreadStatus(
        observed_generation=generation,
        target_ref=spread.TargetStatus(api_version=target.api_version, kind=target.kind, name=target.name),
        replicas=result.replicas,
        ready_replicas=sum(ready_of.values()),
        unplaced_replicas=result.unplaced,
        placement=cluster_statuses,
        subset_statuses=subset_statuses,
        conditions=conditions,
        dependencies=list(dependencies) if dependencies else None,
    )


def revisions_per_subset(reports: Mapping[str, Mapping[str, status.ClusterPods]]
                         ) -> dict[str, dict[str, int]] | None:
    """Subset -> revision -> pods, summed over the clusters' reports, while pods of more than one
    template revision run anywhere (a rollout); None otherwise (the status then shows none).

    A revision is named by each member's own controller; the members render the same template
    the same way, so a Deployment's pods of one hub template carry one pod-template-hash in every
    cluster and their counts add up.
    """
    found: dict[str, dict[str, int]] = {}
    for subsets in reports.values():
        for subset, pods in subsets.items():
            if subset == status.UNASSIGNED:
                continue
            for revision, count in pods.revisions:
                row = found.setdefault(subset, {})
                row[revision] = row.get(revision, 0) + count
    if len({revision for row in found.values() for revision in row}) <= 1:
        return None
    return found


MAX_PROBLEMS_SHOWN = 10
INVALID_SPEC = "InvalidSpec"
"""The Valid=False reason of a spec that failed validation."""


def invalid_spread_status(
    base: spread.FederatedSpreadStatus | None, *, generation: int | None, problems: Sequence[str],
    now: datetime.datetime,
) -> spread.FederatedSpreadStatus:
    """`base` (the status of the last valid spec, or an empty one) with `Valid=False` and the problems.

    The placement, counts and other conditions stay those of the last valid spec, which is what
    is still enforced; `observedGeneration` stays with it too. Only the Valid condition names the
    rejected `generation`, so `kubectl wait --for=condition=Valid` sees the rejection.
    """
    shown = list(problems[:MAX_PROBLEMS_SHOWN])
    if len(problems) > MAX_PROBLEMS_SHOWN:
        shown.append(f"and {len(problems) - MAX_PROBLEMS_SHOWN} more")
    kept = "the last valid spec stays in force" if base is not None else "nothing is placed"
    return refused_spread_status(base, generation=generation, reason=INVALID_SPEC, now=now,
                                 message=f"{'; '.join(shown)} ({kept} until the spec is fixed)")


def refused_spread_status(base: spread.FederatedSpreadStatus | None, *, generation: int | None, reason: str,
                          message: str, now: datetime.datetime) -> spread.FederatedSpreadStatus:
    """`base` (or an empty status) with `Valid=False` naming `generation`: a spec not in force."""
    current = base if base is not None else spread.FederatedSpreadStatus()
    valid = status.condition("Valid", "False", reason=reason, message=message, previous=current.conditions,
                             now=now, generation=generation)
    others = [c for c in current.conditions if c.type != "Valid"]
    return current.model_copy(update={"conditions": [valid, *others]})


SETTLING = "Settling"
"""The condition of a spread that waits, after a coordinator start, for the member clusters'
agents before its first placement (`coordinator.model.settling`)."""


def settling_spread_status(
    base: spread.FederatedSpreadStatus | None, *, generation: int | None, until: datetime.datetime,
    now: datetime.datetime,
) -> spread.FederatedSpreadStatus:
    """`base` (the status as the hub holds it, or an empty one) with `Settling=True`: the spread
    is not placed before `until`. A condition of its own, not `Placed`: a status that records a
    `Placed` condition is one a restarted coordinator places at once."""
    current = base if base is not None else spread.FederatedSpreadStatus()
    settling = status.condition(
        SETTLING, "True", reason="WaitingForAgents", previous=current.conditions, now=now,
        generation=generation,
        message=(f"the coordinator started and this spread's status records no placement: it is "
                 f"placed at {until.isoformat(timespec='seconds')}, once the member clusters' agents "
                 "could reconnect, so that the first one back is not given every replica; what "
                 "runs meanwhile is left as it is"))
    others = [c for c in current.conditions if c.type != SETTLING]
    return current.model_copy(update={"conditions": [*others, settling]})
