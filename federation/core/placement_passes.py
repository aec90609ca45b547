"""The three passes of a placement — keep, add, wait — over each subset's working state.

Why a module of its own: `placement.place_view` is the order of the passes and the shape of the
answer; the passes are the arithmetic, and each reads best next to the state it changes. They run
over the subsets in spec order, on a `SubsetWork` per subset that `prepare` fills from the view:

1. `keep` trims what is already placed on usable clusters to each subset's cap and, when replicas
   shrink, from the last subset first (stability: capacity alone moves nothing). A NoSchedule-
   cordoned member keeps what it holds under the same trimming but takes nothing new
   (`explain_cordons` says so); a member not ready or cordoned NoExecute keeps nothing.
2. `add` places the missing replicas in order, each subset taking min(cap room, what is left), and
   in Adaptive also no more than its simulated capacity, so the rest overflows to the next subset.
3. `wait` (Adaptive) puts what fits nowhere, Pending, in the highest-priority subset whose cap
   still has room.

Capacity is a `NodesLeft`: what is left of each (cluster, node pool) for the spread's pods, whose
requests may differ per subset (a subset's patch); subsets that share a pool draw from the same
nodes, so two subsets never promise the same room twice.
"""

from __future__ import annotations

import dataclasses
import operator
import typing
from collections.abc import Mapping

from federation.api import spread
from federation.core import apportion, division, placement_view
from federation.core.reasons import CAPACITY_KINDS, RULED_KINDS, Reason, ReasonKind, Room

Counts = Mapping[str, Mapping[str, int]]
"""Replicas (or running pods) per subset per cluster."""

COUNT = operator.itemgetter(1)
"""The count of a (name, count) item: `filter(COUNT, d.items())` keeps the non-zero ones, in C."""


@dataclasses.dataclass
class SubsetWork:
    """Working state of one subset during a placement."""

    spec: spread.Subset
    index: int
    cap: int | None
    members: tuple[str, ...]
    usable: list[str]
    held: dict[str, int]
    added: dict[str, int]
    cordoned: list[str] = dataclasses.field(default_factory=list)
    """Members cordoned with NoSchedule: in `held` (what they hold stays, within caps), not `usable`."""
    waiting: int = 0
    waiting_at: dict[str, int] = dataclasses.field(default_factory=dict)
    """Of `waiting`, how many per cluster."""
    capacity: int | None = None
    reasons: list[Reason] = dataclasses.field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.held.values()) + sum(self.added.values())

    def cap_room(self) -> int | None:
        return None if self.cap is None else max(0, self.cap - self.total)


class Take(typing.NamedTuple):
    """Room for `pods` pods of subset number `subset` taken in cluster `cluster`."""

    cluster: str
    subset: int
    pods: int


class NodesLeft:
    """What is left of each (cluster, node pool) as replicas are placed, for pods of every kind.

    Subsets whose patched pods request different resources share a pool's nodes, so it
    counts nodes, not pod slots of one shape: a pool's nodes are alike (each has at least the room
    the pool states, `core/pool_bounds.py`), and each node this placement fills is given to one
    kind of pods (`Member.kinds`), first fit, whole nodes. A kind
    first fills the nodes it holds, then takes whole free nodes. With one kind in a pool (subsets
    whose pods request the same: the usual case) the count is exact. With several, a node given to
    one kind takes no pod of another even where it has room, so it can promise fewer pods
    than fit, never more: per kind and pool at most one partly filled node's room, plus what that
    kind's requests leave unused on each node it fills (docs/decisions.md).
    """

    def __init__(self, view: placement_view.View, *, record: bool = False) -> None:
        self._view = view
        self._left: dict[str, tuple[list[int], list[list[int]]]] = {}
        """Per cluster an earlier take touched: per pool its free nodes, and per kind per pool the
        pods of that kind still fitting on the nodes it holds."""
        self.takes: list[Take] | None = [] if record else None
        """Every take in order, when recorded, as the pods it found room for (in-flight pods may
        find less): the room the placement relied on (`placement_round` takes it again on a
        snapshot with other spreads charged, to learn whether the answer would be the same)."""

    def rooms(self, subset: SubsetWork) -> dict[str, int]:
        """How many more pods of the subset fit in each of its usable clusters now."""
        before = self._view.rooms[subset.index]
        usable = subset.usable
        # Every member usable (the usual case): the view lists them all already.
        found = dict(before) if len(usable) == len(before) else {name: before[name] for name in usable}
        for name, (free, held) in self._left.items():  # clusters an earlier subset took from
            if name in found:
                member = self._view.members[name]
                kind = member.kinds[subset.index]
                slots, nodes, opened = member.slots[kind], member.nodes, held[kind]
                found[name] = sum(opened[i] + free[i] * (slots[i] // nodes[i])
                                  for i in member.admits[subset.index])
        return found

    def room(self, index: int, name: str) -> int:
        """How many more pods of subset number `index` fit in cluster `name` now (`rooms` of one)."""
        member = self._view.members[name]
        state = self._left.get(name)
        if state is None:
            return member.room(index)
        free, held = state
        kind = member.kinds[index]
        slots, nodes, opened = member.slots[kind], member.nodes, held[kind]
        return sum(opened[i] + free[i] * (slots[i] // nodes[i]) for i in member.admits[index])

    def limit(self, subset: SubsetWork, name: str) -> str:
        """What bounds the subset's pods in cluster `name` (`Member.limit`)."""
        return self._view.members[name].limit(subset.index)

    def take(self, subset: SubsetWork, name: str, count: int) -> None:
        """Take room for `count` new pods, first admitting pool first: the kind's own nodes, then
        whole free nodes."""
        self.take_for(subset.index, name, count)

    def take_for(self, index: int, name: str, count: int) -> None:
        """`take` for subset number `index`; recorded (`takes`) as the pods it found room for."""
        member = self._view.members[name]
        state = self._left.get(name)
        if state is None:
            state = self._left[name] = (list(member.nodes), [[0] * len(member.nodes) for _ in member.slots])
        free, held = state
        kind = member.kinds[index]
        slots, opened = member.slots[kind], held[kind]
        left = count
        for i in member.admits[index]:
            used = min(opened[i], left)
            opened[i] -= used
            left -= used
            per_node = slots[i] // member.nodes[i]
            if left and per_node and free[i]:
                whole = min(free[i], -(-left // per_node))
                free[i] -= whole
                used = min(whole * per_node, left)
                opened[i] += whole * per_node - used
                left -= used
            if not left:
                break
        if self.takes is not None and count > left:
            self.takes.append(Take(name, index, count - left))


def prepare(
    spec: spread.FederatedSpreadSpec,
    *,
    replicas: int,
    view: placement_view.View,
    current: Counts,
    running: Counts,
    marked: set[tuple[str, str]],
) -> list[SubsetWork]:
    """Each subset's working state before the passes: its cap, the members it can use and what they
    hold, and a reason for each member it cannot use (missing, not ready, cordoned, marked)."""
    clusters = view.members
    marked_subsets = {subset for subset, _ in marked}
    work: list[SubsetWork] = []
    caps = apportion.subset_caps(spec.subsets, replicas)
    for index, (subset, cap) in enumerate(zip(spec.subsets, caps, strict=True)):
        members = view.selected[index]
        item = SubsetWork(subset, index, cap, members, [], {}, {})
        work.append(item)
        held_now = current.get(subset.name) or {}
        if subset.name not in marked_subsets:
            kept = [n for n in members if (m := clusters.get(n)) is not None and m.ready and not m.cordon]
            if len(kept) == len(members) and kept:  # the usual case: every member usable
                item.usable = kept
                if held_now:
                    item.held = {n: held_now.get(n, 0) for n in kept}
                    if min(item.held.values()) < 0:
                        item.held = {n: max(0, count) for n, count in item.held.items()}
                else:
                    item.held = dict.fromkeys(kept, 0)
                item.added = dict.fromkeys(kept, 0)
                continue
        if not members:
            item.reasons.append(Reason(ReasonKind.NO_MEMBERS))
        kept = []
        for name in members:
            found = clusters.get(name)
            if found is None:
                item.reasons.append(Reason(ReasonKind.NOT_IN_SNAPSHOT, name))
                continue
            if not found.ready:
                item.reasons.append(Reason(ReasonKind.NOT_READY, name))
                continue
            if found.cordon == "NoExecute":
                item.reasons.append(Reason(ReasonKind.CORDONED_NO_EXECUTE, name))
                continue
            kept.append(name)
            held = held_now.get(name, 0)
            marked_here = (subset.name, name) in marked
            if marked_here:
                item.reasons.append(Reason(ReasonKind.UNSCHEDULABLE, name))
                held = min(held, running.get(subset.name, {}).get(name, held))
            if found.cordon:
                item.cordoned.append(name)
            elif not marked_here:
                item.usable.append(name)
            item.held[name] = max(0, held)
        item.added = dict.fromkeys(kept, 0)
    return work


def release_waiting(work: list[SubsetWork], *, waiting: Counts, running: Counts) -> int:
    """Adaptive: the replicas the last placement left waiting (they fit nowhere) and that still do
    not run go back to be placed again — where capacity has freed, in subset order, or to wait
    again. Without this they would count as held after one round, and the spread as settled while
    its pods stay Pending. Where the cluster holds but takes nothing new (cordoned, or kept by the
    failover brake) they stay where they wait, still waiting; how many do (capacity-exhausted)."""
    still = 0
    for item in work:
        waited = waiting.get(item.spec.name)
        if not waited:
            continue
        ran = running.get(item.spec.name) or {}
        for name, count in waited.items():
            held = item.held.get(name, 0)
            back = min(count, max(0, held - ran.get(name, 0)))
            if back <= 0:
                continue
            if name in item.usable:
                item.held[name] = held - back
            else:
                item.waiting += back
                item.waiting_at[name] = item.waiting_at.get(name, 0) + back
                still += back
    return still


def take_in_flight(work: list[SubsetWork], *, nodes_left: NodesLeft, running: Counts) -> None:
    """The spread's own held replicas that do not run yet take their room first: new replicas see
    what is left (scaled 4 -> 6 before the first pods bind, a cluster with room for 4 gets 4).
    Conservative: a pod bound but not Running yet is counted by its node and here too."""
    for item in work:
        ran = running.get(item.spec.name) or {}
        for name in item.usable:
            in_flight = item.held.get(name, 0) - ran.get(name, 0)
            if in_flight > 0:
                nodes_left.take(item, name, in_flight)


def explain_cordons(work: list[SubsetWork]) -> None:
    """Say, after the keep pass, how many replicas each NoSchedule-cordoned member keeps."""
    for item in work:
        for name in item.cordoned:
            item.reasons.append(Reason(ReasonKind.CORDONED_NO_SCHEDULE, name, count=item.held[name]))


def keep(work: list[SubsetWork], replicas: int) -> None:
    """Trim held replicas to caps, then to `replicas` from the last subset first."""
    for item in work:
        held_total = sum(item.held.values())
        if item.cap is not None and held_total > item.cap:
            cut = division.remove(
                held_total - item.cap, mode=item.spec.cluster_spread,
                clusters=list(item.held), held=item.held,
            )
            item.held = {n: item.held[n] - cut[n] for n in item.held}
    excess = sum(i.total for i in work) - replicas
    for item in reversed(work):
        if excess <= 0:
            break
        held_total = sum(item.held.values())
        cut = division.remove(
            min(excess, held_total), mode=item.spec.cluster_spread,
            clusters=list(item.held), held=item.held,
        )
        item.held = {n: item.held[n] - cut[n] for n in item.held}
        excess -= min(excess, held_total)


def add(work: list[SubsetWork], left: int, *, nodes_left: NodesLeft, simulate: bool,
        phase: int | None = None) -> int:
    """Place `left` new replicas in subset order; return how many did not fit anywhere (`phase`:
    a `Capacity` subset's remainder phase, `division.divide`)."""
    for item in work:
        free = nodes_left.rooms(item)
        fits = sum(free.values())
        item.capacity = sum(item.held.values()) + fits
        if not left or not item.usable:
            continue
        cap_room = item.cap_room()
        want = left if cap_room is None else min(left, cap_room)
        room: dict[str, int | None] = dict(free) if simulate else dict.fromkeys(item.usable, None)
        take = min(want, fits) if simulate else want
        if simulate and take < want:
            rooms = tuple(Room(name, free[name], nodes_left.limit(item, name)) for name in free)
            item.reasons.append(Reason(ReasonKind.CAPACITY_SHORT, count=fits, rooms=rooms))
        if take <= 0:
            continue
        added = division.divide(
            take, mode=item.spec.cluster_spread, clusters=item.usable,
            held=item.held, room=room, weights=free, phase=phase,
        )
        for name, count in list(filter(COUNT, added.items())):
            item.added[name] += count
            nodes_left.take(item, name, count)
            left -= count
    return left


def wait(work: list[SubsetWork], left: int) -> int:
    """Adaptive: put what fits nowhere in the first subsets whose caps allow; return the rest."""
    for item in work:
        if not left:
            break
        if not item.usable:
            continue
        cap_room = item.cap_room()
        take = left if cap_room is None else min(left, cap_room)
        if take <= 0:
            continue
        added = division.divide(
            take, mode=item.spec.cluster_spread, clusters=item.usable,
            held=item.held, room=dict.fromkeys(item.usable, None), weights={},
        )
        for name, count in filter(COUNT, added.items()):
            item.added[name] += count
            item.waiting_at[name] = item.waiting_at.get(name, 0) + count
        item.waiting += take
        item.reasons.append(Reason(ReasonKind.WAITING, count=take))
        left -= take
    return left


def explain_capacity(work: list[SubsetWork], replicas: int, *, nodes_left: NodesLeft) -> None:
    """Adaptive, after the passes: a subset that holds less than its cap and its turn allow (the
    replicas its earlier subsets left), whose usable clusters have no room left, was bound by
    capacity — say what its clusters fit, unless this placement's own shortfall already said so.
    Read from the end state, so a placement that only keeps what it holds (a full cluster, the
    rest placed after it) names the capacity as the one that placed it did. With room left and no
    rule that said why, what holds it below is the placement's stability: say that, with the room."""
    before = 0
    for item in work:
        total = item.total
        turn = replicas - before if item.cap is None else min(replicas - before, item.cap)
        before += total
        if total >= turn or not item.usable or any(r.kind in CAPACITY_KINDS for r in item.reasons):
            continue
        left = sum(nodes_left.room(item.index, name) for name in item.usable)
        if left:  # room is left: what holds it below is a rule, or else the placement's stability
            if not any(r.kind in RULED_KINDS or r.kind is ReasonKind.WAITING for r in item.reasons):
                item.reasons.append(Reason(ReasonKind.ROOM_LEFT, count=min(left, turn - total)))
            continue
        fits = tuple(
            Room(name, item.held.get(name, 0) + item.added.get(name, 0) - item.waiting_at.get(name, 0),
                 nodes_left.limit(item, name))
            for name in item.usable)
        item.reasons.append(Reason(ReasonKind.CAPACITY_FULL, rooms=fits))
