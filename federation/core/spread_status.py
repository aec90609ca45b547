"""The FederatedSpread's status: its conditions and per-subset counts, from a placement.

Why a module of its own: the status is how a person learns what the coordinator decided and why,
so each condition's message names the cause and the fix (a cap reached, clusters not ready or
cordoned, no free capacity, silent clusters, a Deployment fedspread does not own), and is tested
word for word. It is arithmetic over a `placement.Placement`, the pod counts agents report
(`status.ClusterPods`) and the unschedulable marks; the condition rule it shares with the other
kinds (`lastTransitionTime` moves only when a status flips) lives in `status`.

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

from federation.api import common, spread
from federation.core import brake, placement, reasons, status
from federation.core.reasons import ReasonKind


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _capped(subset: placement.SubsetPlacement) -> bool:
    return subset.cap is not None and subset.replicas >= subset.cap


def _blockers(subset: placement.SubsetPlacement) -> list[str]:
    """The subset's reasons about its clusters (not ready, cordoned, ...), not about caps/capacity."""
    return [r.text for r in subset.reasons if r.kind not in _NOT_BLOCKERS]


_NOT_BLOCKERS = frozenset({ReasonKind.CAP_REACHED, ReasonKind.WAITING, *reasons.CAPACITY_KINDS,
                           *reasons.RULED_KINDS})
"""Reasons about caps, capacity and the rules of `placement_topology`, not about clusters."""


def _waiting_floors(result: placement.Placement) -> list[tuple[str, int, int]]:
    """(subset, floor, replicas waiting) for every floor that waits for room in its own subset."""
    return [(subset.name, reason.floor, reason.count) for subset in result.subsets
            for reason in subset.reasons if reason.kind is ReasonKind.FLOOR_WAITING]


def _texts_of(result: placement.Placement, kind: ReasonKind) -> list[str]:
    """The distinct texts of the reasons of `kind` over every subset, sorted."""
    return sorted({r.text for s in result.subsets for r in s.reasons if r.kind is kind})


def _ruled_condition(result: placement.Placement, **common_args: Any) -> common.Condition | None:
    """Placed=False naming the topologySpread constraints (or the budget) that left replicas
    unplaced, when those are what did: the clusters are usable, advice about them would mislead."""
    refusing = _texts_of(result, ReasonKind.TOPOLOGY_SPREAD)
    paced = _texts_of(result, ReasonKind.PACED)
    if not refusing and not paced:
        return None
    if refusing:
        reason, why = "TopologySpread", (
            f"{' and '.join(refusing)} admit no further replica; add clusters in other domains, raise "
            "maxSkew, lower minDomains or use whenUnsatisfiable: ScheduleAnyway")
    else:
        reason, why = "PlacingInSteps", f"{paced[0]}; the next placements place the rest"
    message = f"{_plural(result.unplaced, 'replica')} of {result.replicas} could not be placed: {why}"
    return status.condition("Placed", "False", reason=reason, message=message, **common_args)


def _placed_condition(result: placement.Placement, **common_args: Any) -> common.Condition:
    if not result.unplaced:
        return status.condition(
            "Placed", "True", reason="AllPlaced",
            message=f"all {_plural(result.replicas, 'replica')} are placed", **common_args,
        )
    ruled = _ruled_condition(result, **common_args)
    if ruled is not None:
        return ruled
    capped = [f"subset {s.name} is capped at {s.cap}" for s in result.subsets if _capped(s)]
    unusable = [
        f"subset {s.name} has no usable cluster ({'; '.join(_blockers(s)) or 'none selected'})"
        for s in result.subsets if not _capped(s)
    ]
    advice = []
    if capped:
        advice.append("raise maxReplicas or add a subset without a cap")
    if unusable:
        advice.append("bring its clusters back (Ready, not cordoned) or change the subset's clusters")
    reason = "NoUsableCluster" if unusable else "BeyondCaps"
    message = (
        f"{_plural(result.unplaced, 'replica')} of {result.replicas} could not be placed: "
        f"{', '.join(capped + unusable)}; {' or '.join(advice)}"
    )
    return status.condition("Placed", "False", reason=reason, message=message, **common_args)


def _capacity_condition(
    result: placement.Placement, spec: spread.FederatedSpreadSpec, **common_args: Any
) -> common.Condition:
    strategy = spec.schedule_strategy
    if not strategy.is_adaptive or strategy.adaptive_settings().disable_simulation_schedule:
        return status.condition(
            "CapacityExhausted", "False", reason="NotSimulated",
            message="capacity is not simulated (Fixed strategy or disableSimulationSchedule); "
            "pods that cannot schedule stay Pending where they were placed", **common_args,
        )
    if not result.capacity_exhausted:
        return status.condition(
            "CapacityExhausted", "False", reason="CapacityAvailable",
            message="every placed replica fits the clusters' free capacity", **common_args,
        )
    where = ", ".join(f"{s.waiting} in {s.name}" for s in result.subsets if s.waiting)
    floors = _waiting_floors(result)
    causes = [f"floor {floor} of subset {name} waits for room ({_plural(short, 'replica')})"
              for name, floor, short in floors]
    advice = ["add nodes to its clusters or lower its minReplicas"] if floors else []
    if result.capacity_exhausted > sum(short for _, _, short in floors):
        for s in result.subsets:
            if s.cap is not None and s.replicas - s.waiting >= s.cap:
                causes.append(f"subset {s.name} is capped at {s.cap}")
            else:
                blocked = "; ".join(_blockers(s))
                causes.append(f"{s.name} has no free capacity" + (f" ({blocked})" if blocked else ""))
        advice.append("add nodes or raise maxReplicas")
    message = (
        f"{_plural(result.capacity_exhausted, 'replica')} wait Pending for capacity ({where}): "
        f"{' and '.join(causes)}; {' and '.join(advice)}"
    )
    return status.condition("CapacityExhausted", "True", reason="NoCapacity", message=message, **common_args)


def _ready_condition(
    result: placement.Placement, reports: Mapping[str, Mapping[str, status.ClusterPods]],
    **common_args: Any,
) -> common.Condition:
    every = [pods for subsets in reports.values() for pods in subsets.values()]
    ready = sum(p.ready for p in every)
    if ready == result.replicas:
        return status.condition(
            "Ready", "True", reason="AllReady", message=f"{ready} of {result.replicas} replicas are ready",
            **common_args,
        )
    if ready > result.replicas:
        return status.condition(
            "Ready", "False", reason="ScalingDown",
            message=f"{ready} replicas are ready for {result.replicas} wanted; the surplus is being removed",
            **common_args,
        )
    pending = sum(p.pending for p in every)
    unschedulable = sum(p.unschedulable for p in every)
    lagging = []
    for name in sorted(set(result.clusters) | set(reports)):
        want = result.clusters.get(name, 0)
        have = sum(p.ready for p in reports.get(name, {}).values())
        if have < want:
            lagging.append(f"{name} {have}/{want}")
    message = f"{ready} of {result.replicas} replicas are ready"
    if lagging:
        message += f" ({', '.join(lagging)})"
    if pending:
        message += f"; {pending} pending, {unschedulable} of them unschedulable"
        if unschedulable:
            message += " (they move to the next subset after rescheduleCriticalSeconds)"
    return status.condition("Ready", "False", reason="ReplicasNotReady", message=message, **common_args)


def _failover_condition(
    state: brake.BrakeState | None, *, selectable: int, previous: Sequence[common.Condition],
    **common_args: Any,
) -> common.Condition | None:
    """FailoverSuspended: True while the brake holds; False once it lifted (absent if it never held)."""
    if state is not None and state.suspended:
        return status.condition(brake.CONDITION, "True", reason="ClustersSilent",
                                message=brake.describe(state, selectable=selectable), previous=previous,
                                **common_args)
    if state is None and not any(c.type == brake.CONDITION for c in previous):
        return None
    message = (brake.describe(state, selectable=selectable) if state is not None
               else "failover works normally: enough of this spread's clusters are heard")
    return status.condition(brake.CONDITION, "False", reason="ClustersReturned", message=message,
                            previous=previous, **common_args)


MAX_CONFLICT_CHARS = 200
"""Each cluster's conflict message is cut to this many characters in the condition."""


def _conflict_condition(conflicts: Mapping[str, str], dependencies: Mapping[str, Sequence[str]],
                        **common_args: Any) -> common.Condition:
    """`Conflict=True` naming each cluster whose agent leaves a same-name Deployment it does not
    own, or a same-name object the spread's pods need (`dependencies`: cluster -> `Kind/name`)."""
    if dependencies and not conflicts:
        where = "; ".join(f"{name}: {', '.join(dependencies[name])}" for name in sorted(dependencies))
        message = (f"{_plural(len(dependencies), 'cluster')} already have objects the pods need, not "
                   f"created by fedspread, left alone and not updated from the hub ({where}); remove "
                   f"or rename the member's own objects to let fedspread copy the hub's")
        return status.condition("Conflict", "True", reason="MemberObjectNotOwned", message=message,
                                **common_args)
    if not conflicts:
        return status.condition("Conflict", "False", reason="NoConflict",
                                message="no member cluster has a Deployment of the target's name that "
                                "fedspread does not own", **common_args)
    where = "; ".join(f"{name}: {conflicts[name][:MAX_CONFLICT_CHARS]}" for name in sorted(conflicts))
    message = (f"{_plural(len(conflicts), 'cluster')} left alone ({where}); rename or remove the "
               f"member's own Deployment, or point targetRef at another name")
    if dependencies:
        message += "; objects the pods need, left alone: " + "; ".join(
            f"{name}: {', '.join(dependencies[name])}" for name in sorted(dependencies))
    return status.condition("Conflict", "True", reason="MemberDeploymentNotOwned", message=message,
                            **common_args)


PODS_MISPLACED = "PodsMisplaced"
"""The condition naming StatefulSet pods whose ordinal maps to another subset now (left in place)."""
MAX_MISPLACED_CHARS = 600
"""Each cluster's misplaced-pods report is cut to this many characters in the condition (the
agent's names at most 10 pods already)."""


def _misplaced_condition(misplaced: Mapping[str, str], **common_args: Any) -> common.Condition | None:
    """`PodsMisplaced=True` while an agent reports StatefulSet pods whose ordinal now maps to another
    subset (a quota change moved the ranges; they are never deleted to move them); absent otherwise."""
    if not misplaced:
        return None
    where = "; ".join(f"{name}: {misplaced[name][:MAX_MISPLACED_CHARS]}" for name in sorted(misplaced))
    return status.condition(PODS_MISPLACED, "True", reason="OrdinalRangesMoved",
                            message=f"{_plural(len(misplaced), 'cluster')} ({where})", **common_args)


AUTOSCALER_CONFLICT = "AutoscalerConflict"
"""The condition naming member HPAs that scale a spread's member workload (left alone, not fought)."""


def _autoscaler_condition(found: Mapping[str, Sequence[str]], **common_args: Any) -> common.Condition | None:
    """`AutoscalerConflict=True` while agents report member HorizontalPodAutoscalers scaling the
    spread's member workload (cluster and HPA named): each is left alone, and the agent keeps that
    workload's replicas as the member HPA sets them, not this cluster's share; absent otherwise."""
    if not found:
        return None
    where = "; ".join(f"{name}: {', '.join(found[name])}" for name in sorted(found))
    return status.condition(
        AUTOSCALER_CONFLICT, "True", reason="MemberAutoscaler",
        message=f"a HorizontalPodAutoscaler in {_plural(len(found), 'cluster')} scales the member workload "
                f"({where}); it is left alone and the agent keeps the replicas it sets there instead of the "
                "cluster's share (scale the spread with one HPA on the hub instead)", **common_args)


def _dependency_condition(missing: Sequence[str], **common_args: Any) -> common.Condition:
    """`DependencyMissing=True` naming the objects the template references that the hub lacks: the
    workload is placed all the same, and its pods wait in the members until the objects exist."""
    if not missing:
        return status.condition("DependencyMissing", "False", reason="DependenciesFound",
                                message="every object the pod template references exists on the hub "
                                "and is copied where the spread runs", **common_args)
    message = (f"the pod template references {', '.join(missing)}, not found in the spread's namespace "
               f"on the hub; the workload is placed, and its pods need the "
               f"{'object' if len(missing) == 1 else 'objects'} to start")
    return status.condition("DependencyMissing", "True", reason="NotFoundOnHub", message=message,
                            **common_args)


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
        _placed_condition(result, **common_args),
        _capacity_condition(result, spec, **common_args),
        _ready_condition(result, reports, **common_args),
        _conflict_condition(conflicts or {}, dependency_conflicts or {}, **common_args),
    ]
    if missing_dependencies is not None:
        conditions.append(_dependency_condition(missing_dependencies, **common_args))
    for extra in (_misplaced_condition(misplaced or {}, **common_args),
                  _autoscaler_condition(autoscalers or {}, **common_args)):
        if extra is not None:
            conditions.append(extra)
    suspended = _failover_condition(failover, selectable=selectable, **common_args)
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
