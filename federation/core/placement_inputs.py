"""What one placement reads besides its spread, its replicas and its capacity: one value.

Why one object: a spread's placement is asked from several places — a round (in this process or
on a Ray shard), Explain, a what-if, the failback's plan — and each used to pass its own subset of
these facts, under names that differed (`marks` here, `unschedulable` in the core). They drifted:
the coordinator's request forwarded the last placement's waiting replicas on one of its two
branches only. Carried whole, frozen and picklable, the inputs reach every rule the same way, and
a new input is added in one place.

`place_args` gives the keyword arguments `placement.place` and `placement.place_view` share, so
no caller spells them out again.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import TypedDict

from federation.core import failback_round, fit, placement
from federation.core.placement_passes import Counts


class PlaceArgs(TypedDict):
    """The keyword arguments `placement.place` and `placement.place_view` share."""

    current: Counts | None
    running: Counts | None
    unschedulable: tuple[placement.UnschedulableMark, ...]
    now: datetime.datetime | None
    waiting: Counts | None
    remainder_phase: int | None


@dataclasses.dataclass(frozen=True)
class PlacementInputs:
    """The facts one placement of a spread reads (all optional: a what-if gives few of them)."""

    current: Counts | None = None
    """The replicas placed now per subset per cluster (kept where still allowed)."""
    running: Counts | None = None
    """How many of those run, as the agents reported."""
    marks: tuple[placement.UnschedulableMark, ...] = ()
    """Unschedulable marks of (subset, cluster) pairs (Adaptive reads them)."""
    now: datetime.datetime | None = None
    """The time marks expire against (None: every mark is active)."""
    waiting: Counts | None = None
    """The last placement's waiting replicas per subset per cluster (Adaptive places them again)."""
    shape: fit.PodShape | None = None
    """What one pod needs (None: a pod slot only); a view already holds it, a snapshot does not."""
    profiles: tuple[fit.Profile, ...] | None = dataclasses.field(default=None, compare=False)
    """Per subset in spec order, the profile of the pods it admits (`shape` with the subset's
    injection), as the coordinator's plan made them: what a round's check charges a placement by.
    None: computed from `shape` where needed. Not compared: it follows from the spec and `shape`."""
    ready: Counts | None = None
    """Verified Ready pods per subset per cluster: given, the handover rule keeps the Ready pods the
    spread cannot spare yet (`handover.keep_ready`); None (what-ifs): the rule's answer as is."""
    unverified: Counts | None = None
    """Pods of clusters that returned and have not reported since, kept whole by the handover."""
    remainder_phase: int | None = None
    """How a `Capacity` subset gives the replicas left after its proportional floors
    (`apportion.split_phased`); the coordinator draws it from the spread's key
    (`apportion.phase_of`); None: to the largest remainders."""
    rebalance: failback_round.Context | None = None
    """The failback to judge: given, the answer runs the step it leads to and carries the decision
    (`Placement.rebalancing`); None: no failback (what-ifs, `Never`)."""

    def place_args(self) -> PlaceArgs:
        """The keyword arguments `placement.place` and `placement.place_view` take from these."""
        return PlaceArgs(current=self.current, running=self.running, unschedulable=self.marks, now=self.now,
                         waiting=self.waiting, remainder_phase=self.remainder_phase)
