"""Which Kubernetes Events a FederatedSpread's status change is worth: transitions, not states.

Why a pure module: the coordinator writes a spread's status only when it changed, and compares the
status it read from the hub with the one it writes; the Events are the readable story of that
difference (`kubectl describe federatedspread`). Deciding them is arithmetic on two statuses, so
it lives here, tested word for word; the status pass hands the result to the Event recorder.

An Event is emitted on a transition only — a condition that turns True (or changes its reason), a
placement that differs — never because a status was written again, so a steady spread is silent
and a restarted coordinator (which reads the old status from the hub) does not repeat itself.

| reason            | type    | when                                                                |
|-------------------|---------|---------------------------------------------------------------------|
| Placed            | Normal  | the clusters' replica counts changed                                |
| Overflowed        | Normal  | Adaptive: a subset after the first holds more replicas than before  |
| NotPlaced         | Warning | Placed turned False (caps reached, no usable cluster)               |
| CapacityExhausted | Warning | CapacityExhausted turned True                                       |
| FailedOver        | Warning | a lost cluster's replicas went elsewhere                            |
| FailoverSuspended | Warning | the failover brake engaged; FailoverResumed (Normal) when it lifts   |
| Invalid           | Warning | Valid turned False for an invalid spec, or its problems changed     |
| Conflict          | Warning | another spread holds the Deployment, or a member Deployment is not ours |
| Refused           | Warning | Valid turned False for another target rule (targetRef changed)      |
| RebalanceStarted  | Normal  | a failback step started (`status.rebalancing.step` is a new one)    |
| Rebalanced        | Normal  | a step ended, its new pods Ready (`lastMove` changed, Finished)     |
| RebalanceStopped  | Warning | a step ended, its new pods not Ready in time (`lastOutcome` Stopped) |
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final, Literal

from federation.api import common, spread
from federation.core import brake, spread_status

EventType = Literal["Normal", "Warning"]
NORMAL: Final = "Normal"
WARNING: Final = "Warning"
FAILOVER_SUSPENDED = brake.CONDITION


@dataclasses.dataclass(frozen=True)
class SpreadEvent:
    """One Event to record about a spread."""

    reason: str
    type: EventType
    note: str
    action: str


def _condition(conditions: Sequence[common.Condition], kind: str) -> common.Condition | None:
    return next((c for c in conditions if c.type == kind), None)


def _turned(old: Sequence[common.Condition], new: Sequence[common.Condition], kind: str,
            status: str) -> common.Condition | None:
    """The new `kind` condition if it now has `status` and did not before (or had another reason)."""
    after, before = _condition(new, kind), _condition(old, kind)
    if after is None or after.status != status:
        return None
    if before is not None and before.status == status and before.reason == after.reason:
        return None
    return after


def _clusters(status: spread.FederatedSpreadStatus | None) -> dict[str, int]:
    if status is None:
        return {}
    return {p.cluster: p.replicas for p in status.placement if p.replicas}


def _listing(counts: Mapping[str, int]) -> str:
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{name} {count}" for name, count in ordered) or "no cluster"


def _placement_events(old: spread.FederatedSpreadStatus | None, new: spread.FederatedSpreadStatus,
                      *, lost: frozenset[str], adaptive: bool) -> list[SpreadEvent]:
    before, after = _clusters(old), _clusters(new)
    if before == after:
        return []
    found = []
    moved = {name: count - after.get(name, 0) for name, count in before.items()
             if name in lost and after.get(name, 0) < count}
    if moved:
        gone = ", ".join(f"{name} ({count})" for name, count in sorted(moved.items()))
        found.append(SpreadEvent(
            "FailedOver", WARNING, action="Failover",
            note=f"cluster lost, its replicas moved: {gone}; now {_listing(after)}"))
    placed = sum(after.values())
    unplaced = f"; {new.unplaced_replicas} not placed" if new.unplaced_replicas else ""
    found.append(SpreadEvent("Placed", NORMAL, action="Place",
                             note=f"placed {placed} replica{'s' if placed != 1 else ''}: "
                                  f"{_listing(after)}{unplaced}"))
    if adaptive:
        earlier = {s.name: s.replicas for s in old.subset_statuses} if old is not None else {}
        for index, subset in enumerate(new.subset_statuses):
            was = earlier.get(subset.name, 0)
            if index > 0 and subset.replicas > was:
                full = ", ".join(f"{s.name} {s.replicas}" for s in new.subset_statuses[:index])
                found.append(SpreadEvent(
                    "Overflowed", NORMAL, action="Place",
                    note=f"subset {subset.name} now holds {subset.replicas} (was {was}): the subsets "
                         f"before it are full ({full})"))
    return found


def _valid_events(old: Sequence[common.Condition], new: Sequence[common.Condition], *,
                  conflicts: frozenset[str]) -> list[SpreadEvent]:
    after, before = _condition(new, "Valid"), _condition(old, "Valid")
    if after is None or after.status != "False":
        return []
    if before is not None and (before.status, before.reason, before.message) == \
            (after.status, after.reason, after.message):
        return []
    if after.reason == spread_status.INVALID_SPEC:
        return [SpreadEvent("Invalid", WARNING, action="Validate", note=after.message or after.reason)]
    reason = "Conflict" if after.reason in conflicts else "Refused"
    return [SpreadEvent(reason, WARNING, action="Validate", note=after.message or after.reason)]


def _rebalance_events(old: spread.FederatedSpreadStatus | None,
                      new: spread.FederatedSpreadStatus) -> list[SpreadEvent]:
    """A failback step that started, and one that ended since `old`, read from `status.rebalancing`
    (what the coordinator keeps), not from the condition: a step that finishes and the next that
    starts at once may share one status write, and the condition shows only the last. A step that
    starts and ends between two writes is seen only by its end; its start is told with it."""
    before = old.rebalancing if old is not None else None
    after = new.rebalancing
    if after is None:
        return []
    found = []
    ended = after.last_move is not None and (before is None or before.last_move != after.last_move)
    if ended and (before is None or before.step is None):
        # The step started and ended between two status writes: its start is told all the same.
        found.append(SpreadEvent("RebalanceStarted", NORMAL, action="Rebalance",
                                 note="failback step started (it ended before the status was next written)"))
    if ended:
        if after.last_outcome == "Stopped":
            found.append(SpreadEvent("RebalanceStopped", WARNING, action="Rebalance",
                                     note="a failback step's new pods were not Ready in time: it was "
                                          "stopped, its new pods removed"))
        else:
            found.append(SpreadEvent("Rebalanced", NORMAL, action="Rebalance",
                                     note="a failback step's new pods are Ready: the replicas they "
                                          "replace were removed"))
    step = after.step
    if step is not None and (before is None or before.step is None or before.step.started != step.started):
        moves = ", ".join(f"{m.replicas} from {m.from_subset}/{m.from_cluster} to "
                          f"{m.to_subset}/{m.to_cluster}" for m in step.moves)
        found.append(SpreadEvent("RebalanceStarted", NORMAL, action="Rebalance",
                                 note=f"failback step started: {moves or 'nothing to move'}"))
    return found


def spread_events(old: spread.FederatedSpreadStatus | None, new: spread.FederatedSpreadStatus, *,
                  lost: frozenset[str] = frozenset(), adaptive: bool = False,
                  conflicts: frozenset[str] = frozenset()) -> list[SpreadEvent]:
    """The Events the change from `old` (as read from the hub; None: no status yet) to `new` is
    worth. `lost` are the clusters not heard within the spread's lost time; `adaptive` whether
    its strategy is Adaptive (only then is a later subset an overflow); `conflicts` the Valid=False
    reasons that mean another spread holds the Deployment (the rest of the refusals are `Refused`)."""
    before = list(old.conditions) if old is not None else []
    after = list(new.conditions)
    found = _valid_events(before, after, conflicts=conflicts)
    found += _placement_events(old, new, lost=lost, adaptive=adaptive)
    warnings = (("Placed", "False", "NotPlaced", "Place"),
                ("CapacityExhausted", "True", "CapacityExhausted", "Place"),
                (FAILOVER_SUSPENDED, "True", FAILOVER_SUSPENDED, "Failover"),
                ("Conflict", "True", "Conflict", "Apply"))
    for kind, status, reason, action in warnings:
        turned = _turned(before, after, kind, status)
        if turned is not None:
            found.append(SpreadEvent(reason, WARNING, action=action, note=turned.message or turned.reason))
    resumed = _turned(before, after, FAILOVER_SUSPENDED, "False")
    if resumed is not None and _condition(before, FAILOVER_SUSPENDED) is not None:
        found.append(SpreadEvent("FailoverResumed", NORMAL, action="Failover",
                                 note=resumed.message or resumed.reason))
    return found + _rebalance_events(old, new)
