"""Adaptive reschedule: which subsets are stuck, which pods to delete, and for how long to block.

Why a pure module: the agent's controller decides from its cache when a subset in this cluster has
pods that cannot be scheduled ("adaptive reschedule"). The rule is arithmetic on pod
states and timestamps — a pod Pending with `PodScheduled=False/Unschedulable` for longer than the
spread's `rescheduleCriticalSeconds`, timed from that condition's `lastTransitionTime` — and the
consequences (block the subset here until `now + unschedulableSeconds`, delete those pods so their
ReplicaSet recreates them into the next subset) are worth testing with a table and a fake clock,
without a cluster. The I/O (marking, reporting, deleting) stays in the agent.

Pods of no subset are never selected: deleting them would only recreate them into the same
situation, and there is no subset to block. Nor are pods that no controller owns (`owned`): the
label alone once selected them, and a bare pod deleted is never recreated. (The agent goes
further and hands this rule only pods whose owner chain leads to the spread's own member
Deployment: `agents.owners`.)

Pure: no Kubernetes client, no I/O; use aware UTC datetimes.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection, Iterable
from typing import Protocol

PENDING = "Pending"


class PodState(Protocol):
    """What the rule reads of one pod (the agent's PodRecord has these attributes)."""

    @property
    def name(self) -> str:
        """Pod name."""

    @property
    def subset(self) -> str | None:
        """The subset the webhook gave the pod, if any."""

    @property
    def phase(self) -> str:
        """status.phase."""

    @property
    def deleting(self) -> bool:
        """metadata.deletionTimestamp is set."""

    @property
    def unschedulable_since(self) -> datetime.datetime | None:
        """lastTransitionTime of PodScheduled=False/Unschedulable, if the pod has that condition."""

    @property
    def owned(self) -> bool:
        """A controller owns the pod (a controller ownerReference): deleted, it is recreated."""


@dataclasses.dataclass(frozen=True)
class Stuck:
    """A subset whose pods waited too long for a node: delete `pods`, report since `since`."""

    subset: str
    pods: tuple[str, ...]
    since: datetime.datetime
    """The earliest unschedulable_since among `pods` (when the subset started failing)."""


def is_stuck(pod: PodState, *, now: datetime.datetime, critical: datetime.timedelta) -> bool:
    """Pending, not being deleted, of a subset, owned by a controller (which recreates it), and
    unschedulable for longer than `critical`."""
    return (
        pod.subset is not None
        and pod.owned
        and not pod.deleting
        and pod.phase == PENDING
        and pod.unschedulable_since is not None
        and now - pod.unschedulable_since > critical
    )


def stuck_subsets(
    pods: Iterable[PodState],
    *,
    now: datetime.datetime,
    critical_seconds: float,
    order: Collection[str] = (),
) -> list[Stuck]:
    """The subsets with stuck pods, each with its pods (sorted by name).

    Sorted by position in `order` (the spec's subset order), subsets not in `order` last by name.
    `critical_seconds` below zero is treated as zero.
    """
    critical = datetime.timedelta(seconds=max(0.0, critical_seconds))
    found: dict[str, list[PodState]] = {}
    for pod in pods:
        if is_stuck(pod, now=now, critical=critical):
            assert pod.subset is not None  # for the type checker: is_stuck checked it
            found.setdefault(pod.subset, []).append(pod)
    position = {name: i for i, name in enumerate(order)}
    result = []
    for subset, group in found.items():
        since = min(p.unschedulable_since for p in group if p.unschedulable_since is not None)
        result.append(Stuck(subset=subset, pods=tuple(sorted(p.name for p in group)), since=since))
    result.sort(key=lambda s: (position.get(s.subset, len(position)), s.subset))
    return result


def blocked_until(now: datetime.datetime, *, unschedulable_seconds: float) -> datetime.datetime:
    """When a subset marked unschedulable at `now` becomes usable again (never before `now`)."""
    return now + datetime.timedelta(seconds=max(0.0, unschedulable_seconds))


def to_report(stuck: Iterable[Stuck], *, blocked: Collection[str]) -> list[Stuck]:
    """The stuck subsets not blocked yet: each is marked and reported once per block period.

    Pods of a subset that is already blocked (a local mark, or the coordinator's
    unschedulable_until) are still deleted by the caller, but the subset is not reported again.
    """
    return [s for s in stuck if s.subset not in blocked]
