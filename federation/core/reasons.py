"""Why a subset got the number it got, as values: a `Reason` has a kind, the cluster it is about
(if any) and its figures; its text is rendered only where people read it.

Why values and not strings: the placement's reasons are read by programs too — the spread's
conditions pick the topologySpread refusals, the floors waiting for room and the reasons that
name unusable clusters; `explain` files each cluster's reasons under that cluster and flags the
unschedulable ones. Parsed back from text by prefix (`startswith("cap ")`, `"waiting:" in r`), a
reworded message or a cluster named "capacity" would silently change what they decide. Consumers
match on `kind` and `cluster`; `text` is for the wire, the JSON documents, the table and the
status messages, and is exactly the wording people have always read.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable


class ReasonKind(enum.Enum):
    """What a reason says; the comment gives its text (`{cluster}: ` first where it has a cluster)."""

    CAP_REACHED = "cap-reached"
    """"cap {count} reached"."""
    CAPACITY_SHORT = "capacity-short"
    """"capacity: only {count} more pods fit ({room}, ...)": this placement's new pods met the end
    of the room."""
    CAPACITY_FULL = "capacity-full"
    """"capacity: {cluster} fits {pods} ({limit}), ...": the subset holds all its clusters fit and
    the rest of the spread is placed after it — capacity, not the cap, bound its number."""
    WAITING = "waiting"
    """"{count} waiting: no capacity left in any subset"."""
    NO_MEMBERS = "no-members"
    """"no member cluster matches the subset"."""
    NOT_IN_SNAPSHOT = "not-in-snapshot"
    """"{cluster}: no such cluster in the snapshot"."""
    NOT_READY = "not-ready"
    """"{cluster}: not ready"."""
    CORDONED_NO_EXECUTE = "cordoned-no-execute"
    """"{cluster}: cordoned (NoExecute): its replicas move, takes no new replicas"."""
    CORDONED_NO_SCHEDULE = "cordoned-no-schedule"
    """"{cluster}: cordoned (NoSchedule): [keeps its {count} running, ]takes no new replicas"."""
    UNSCHEDULABLE = "unschedulable"
    """"{cluster}: unschedulable, skipped until the mark expires"."""
    FLOOR = "floor"
    """"floor {floor}": the subset's minReplicas kept or placed first."""
    FLOOR_WAITING = "floor-waiting"
    """"floor {floor}: {count} waiting for room"."""
    TOPOLOGY_SPREAD = "topology-spread"
    """"{detail}", the constraint as `TopologySpreadConstraint.describe` names it
    ("topologySpread <key> maxSkew N"): it refused the subset a replica."""
    PACED = "paced"
    """"at most {count} replicas placed one at a time per placement"."""
    NO_ROOM = "no-room"
    """"no subset has room": what `skew_placement` leaves unplaced when no rule refused it."""
    KEPT_UNVERIFIED = "kept-unverified"
    """"{cluster}: keeps its {count} pods until its agent reports them again (unverified since it
    was lost, reconnected or restarted)"."""
    KEPT_UNTIL_READY = "kept-until-ready"
    """"{cluster}: keeps {count} Ready pods until their replacements are Ready"."""
    ROOM_LEFT = "room-left"
    """"room for {count} more: the replicas placed after it stay where they run (spec.rebalance
    policy WhenRoom moves them back)": below its cap and turn with room left, and no rule said why —
    the placement's stability holds it there (Adaptive keeps what runs; failback is opt-in)."""
    LEAVING = "leaving"
    """"{cluster}: no longer takes this spread's pods here; keeps {count} of them until their
    replacements are Ready", or "...; its last ones go" when it keeps none."""


@dataclasses.dataclass(frozen=True, slots=True)
class Room:
    """How many of the subset's pods fit in `cluster`, and what bounds them there (`Member.limit`)."""

    cluster: str
    pods: int
    limit: str


@dataclasses.dataclass(frozen=True, slots=True)
class Reason:
    """One reason of a subset's number: `kind`, the `cluster` it is about (None: the subset), and
    the figures its kind uses (`count`, `floor`, `rooms`, `detail`)."""

    kind: ReasonKind
    cluster: str | None = None
    count: int = 0
    floor: int = 0
    rooms: tuple[Room, ...] = ()
    detail: str = ""

    @property
    def said(self) -> str:
        """The text without the cluster it is about (what `explain` files under that cluster)."""
        kind = self.kind
        if kind is ReasonKind.CAP_REACHED:
            return f"cap {self.count} reached"
        if kind is ReasonKind.CAPACITY_SHORT:
            limits = ", ".join(f"{r.cluster}: {r.pods} fit ({r.limit})" for r in self.rooms)
            return f"capacity: only {self.count} more pods fit" + (f" ({limits})" if limits else "")
        if kind is ReasonKind.CAPACITY_FULL:
            return "capacity: " + ", ".join(f"{r.cluster} fits {r.pods} ({r.limit})" for r in self.rooms)
        if kind is ReasonKind.WAITING:
            return f"{self.count} waiting: no capacity left in any subset"
        if kind is ReasonKind.FLOOR:
            return f"floor {self.floor}"
        if kind is ReasonKind.FLOOR_WAITING:
            return f"floor {self.floor}: {self.count} waiting for room"
        if kind is ReasonKind.PACED:
            return f"at most {self.count} replicas placed one at a time per placement"
        if kind is ReasonKind.CORDONED_NO_SCHEDULE:
            keeps = f"keeps its {self.count} running, " if self.count else ""
            return f"cordoned (NoSchedule): {keeps}takes no new replicas"
        if kind is ReasonKind.KEPT_UNVERIFIED:
            return (f"keeps its {self.count} pods until its agent reports them again "
                    "(unverified since it was lost, reconnected or restarted)")
        if kind is ReasonKind.KEPT_UNTIL_READY:
            return f"keeps {self.count} Ready pods until their replacements are Ready"
        if kind is ReasonKind.LEAVING:
            if self.count:
                return (f"no longer takes this spread's pods here; keeps {self.count} of them until "
                        "their replacements are Ready")
            return "no longer takes this spread's pods here; its last ones go"
        if kind is ReasonKind.ROOM_LEFT:
            return (f"room for {self.count} more: the replicas placed after it stay where they run "
                    "(spec.rebalance policy WhenRoom moves them back)")
        if kind is ReasonKind.TOPOLOGY_SPREAD:
            return self.detail
        return _FIXED[kind]

    @property
    def text(self) -> str:
        """The reason as people read it: "{cluster}: " before `said` when it is about a cluster."""
        return self.said if self.cluster is None else f"{self.cluster}: {self.said}"


_FIXED = {
    ReasonKind.NO_MEMBERS: "no member cluster matches the subset",
    ReasonKind.NOT_IN_SNAPSHOT: "no such cluster in the snapshot",
    ReasonKind.NOT_READY: "not ready",
    ReasonKind.CORDONED_NO_EXECUTE: "cordoned (NoExecute): its replicas move, takes no new replicas",
    ReasonKind.UNSCHEDULABLE: "unschedulable, skipped until the mark expires",
    ReasonKind.NO_ROOM: "no subset has room",
}
"""The texts of the kinds without figures."""


CAPACITY_KINDS = frozenset({ReasonKind.CAPACITY_SHORT, ReasonKind.CAPACITY_FULL})
"""The kinds that name the capacity that bound a subset."""


RULED_KINDS = frozenset({ReasonKind.TOPOLOGY_SPREAD, ReasonKind.FLOOR, ReasonKind.FLOOR_WAITING,
                         ReasonKind.PACED})
"""The kinds of `placement_topology`: a constraint that refused, a floor, the per-placement budget."""


def texts(reasons: Iterable[Reason]) -> tuple[str, ...]:
    """The reasons as people read them, in order."""
    return tuple(reason.text for reason in reasons)
