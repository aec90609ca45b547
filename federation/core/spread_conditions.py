"""The conditions of a FederatedSpread's status, each with a message that names the cause and the fix.

Why a module of its own: a condition is how a person learns why replicas are where they are (a cap
reached, clusters not ready or cordoned, no free capacity, silent clusters, a member object fedspread
does not own, StatefulSet pods left on the wrong ordinal, a member HPA, a dependency missing on the
hub), so each message is tested word for word and changes apart from the arithmetic that assembles
the status (`federation.core.spread_status`). Each function takes the transition arguments of
`status.condition` (`previous`, `now`, `generation`) as keywords.
"""

from __future__ import annotations

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


_NOT_BLOCKERS = frozenset({ReasonKind.CAP_REACHED, ReasonKind.WAITING, ReasonKind.ROOM_LEFT,
                           *reasons.CAPACITY_KINDS, *reasons.RULED_KINDS})
"""Reasons about caps, capacity, the placement's stability and the rules of `placement_topology`,
not about clusters."""


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


def placed_condition(result: placement.Placement, **common_args: Any) -> common.Condition:
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


def capacity_condition(
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


def ready_condition(
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


def failover_condition(
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


def conflict_condition(conflicts: Mapping[str, str], dependencies: Mapping[str, Sequence[str]],
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


def misplaced_condition(misplaced: Mapping[str, str], **common_args: Any) -> common.Condition | None:
    """`PodsMisplaced=True` while an agent reports StatefulSet pods whose ordinal now maps to another
    subset (a quota change moved the ranges; they are never deleted to move them); absent otherwise."""
    if not misplaced:
        return None
    where = "; ".join(f"{name}: {misplaced[name][:MAX_MISPLACED_CHARS]}" for name in sorted(misplaced))
    return status.condition(PODS_MISPLACED, "True", reason="OrdinalRangesMoved",
                            message=f"{_plural(len(misplaced), 'cluster')} ({where})", **common_args)


AUTOSCALER_CONFLICT = "AutoscalerConflict"
"""The condition naming member HPAs that scale a spread's member workload (left alone, not fought)."""


def autoscaler_condition(found: Mapping[str, Sequence[str]], **common_args: Any) -> common.Condition | None:
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


def dependency_condition(missing: Sequence[str], **common_args: Any) -> common.Condition:
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
