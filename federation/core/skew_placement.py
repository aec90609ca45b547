"""Ordered subsets with floors and topology spread: replicas added and removed one at a time.

Why one at a time: with `spec.topologySpread` the answer for replica n+1 depends on where the
first n went (the admission test reads the domains' counts), and floors change the order in which
subsets fill and empty. The rules are stated per replica, so they are built per replica:

- **up**: floors first, in subset order, as far as the total and the room allow (floors outrank
  topology: a floor replica goes to the subset's cluster that the constraints prefer, but is not
  refused by them); then each further replica goes to the highest-priority subset whose cap is not
  reached and that has a cluster with room admitted by every DoNotSchedule constraint; inside it,
  the cluster with the smallest ScheduleAnyway skew, then the one `clusterSpread` picks (Fill: the
  earliest; Balance: the one holding least; Capacity: the one with most room left). A replica no
  place admits is unplaced, with the constraint that refused it named.
- **down**: from the subsets above their floor (only when none is, the others), last subset
  first, the first removal that keeps every DoNotSchedule constraint; inside a subset the cluster
  in the most populated domain gives first. When no removal keeps the constraints, the most
  populated domain of the first such subset gives.
- **stability**: replicas in `current` stay where they are; only the difference moves.

This is the pure rule the placement passes call for spreads that set these fields; spreads that
set neither never come here and keep the closed-form division. The cost is linear in the replicas
moved times the clusters, so one placement moves at most `WORK_LIMIT` / clusters replicas one at a
time; the next placement goes on from there (docs/decisions.md).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence

from federation.core import floors as floor_rules
from federation.core import topology_spread as ts
from federation.core.reasons import Reason, ReasonKind

WORK_LIMIT = 20_000
"""Replicas moved one at a time times the clusters of the spread, per placement: about a second of
work at most (a spread scaled to two billion replicas must not hold the coordinator)."""
MIN_STEPS = 100


@dataclasses.dataclass(frozen=True)
class SubsetRule:
    """One subset as these rules read it: its clusters in order, how it divides, its cap and floor."""

    name: str
    clusters: tuple[str, ...]
    mode: str = "Fill"
    cap: int | None = None
    floor: int = 0
    usable: tuple[str, ...] | None = None
    """Of `clusters`, those that may take new replicas in this subset (None: all the usable ones)."""


class Room(typing.Protocol):
    """How many more pods of subset number `index` fit in a cluster (None: unlimited), and taking one."""

    def left(self, index: int, cluster: str) -> int | None: ...

    def take(self, index: int, cluster: str) -> None: ...


class SharedRoom:
    """Room per cluster shared by every subset listing it (None or absent: unlimited)."""

    def __init__(self, room: Mapping[str, int | None]) -> None:
        self._room = dict(room)

    def left(self, index: int, cluster: str) -> int | None:
        return self._room.get(cluster)

    def take(self, index: int, cluster: str) -> None:
        found = self._room.get(cluster)
        if found is not None:
            self._room[cluster] = found - 1


@dataclasses.dataclass(frozen=True)
class Plan:
    """Replicas per subset per cluster, what could not be placed and the rules that decided."""

    counts: dict[str, dict[str, int]]
    unplaced: int
    reasons: dict[str, tuple[Reason, ...]]
    unplaced_reasons: tuple[Reason, ...]
    floor_waiting: dict[str, int] = dataclasses.field(default_factory=dict)
    """Per subset, floor replicas that its usable clusters have no room for: they wait in their
    own subset (not in `counts`, not unplaced, not given to another subset)."""

    def totals(self) -> dict[str, int]:
        """Replicas per cluster over all subsets."""
        result: dict[str, int] = {}
        for per_cluster in self.counts.values():
            for name, count in per_cluster.items():
                result[name] = result.get(name, 0) + count
        return result


@dataclasses.dataclass
class _State:
    subsets: Sequence[SubsetRule]
    constraints: Sequence[ts.Constraint]
    labels: Mapping[str, Mapping[str, str]]
    usable: frozenset[str]
    room: Room
    counts: dict[str, dict[str, int]]
    reasons: dict[str, list[Reason]]
    steps: int = 0
    """Replicas moved one at a time so far (bounded by `_budget`)."""
    budget: int = 0

    def spent(self) -> bool:
        """The one-at-a-time budget of this placement is used up."""
        return self.steps >= self.budget

    def cluster_counts(self) -> dict[str, int]:
        result: dict[str, int] = {}
        for per_cluster in self.counts.values():
            for name, count in per_cluster.items():
                result[name] = result.get(name, 0) + count
        return result

    def has_room(self, index: int, name: str) -> bool:
        """Cluster `name` may take one more replica of subset number `index`."""
        rule = self.subsets[index]
        if name not in self.usable or (rule.usable is not None and name not in rule.usable):
            return False
        room = self.room.left(index, name)
        return room is None or room > 0

    def topologies(self) -> list[ts.Topology]:
        """The constraints over the domains eligible now: a cluster with room in some subset."""
        if not self.constraints:
            return []
        usable = {name for index, rule in enumerate(self.subsets) for name in rule.clusters
                  if self.has_room(index, name)}
        return [ts.Topology.of(c, labels=self.labels, usable=usable) for c in self.constraints]

    def total(self, index: int) -> int:
        return sum(self.counts[self.subsets[index].name].values())

    def note(self, subset: str, reason: Reason) -> None:
        if reason not in self.reasons[subset]:
            self.reasons[subset].append(reason)

    def add(self, index: int, cluster: str) -> None:
        """One more replica of subset number `index` in `cluster`, its room taken."""
        subset = self.subsets[index].name
        self.counts[subset][cluster] = self.counts[subset].get(cluster, 0) + 1
        self.room.take(index, cluster)
        self.steps += 1

    def remove(self, subset: str, cluster: str) -> None:
        """One replica fewer (a scale-down adds nothing after, so its room is not given back)."""
        self.counts[subset][cluster] -= 1
        self.steps += 1


def _mode_key(state: _State, index: int, cluster: str) -> int | float:
    rule = state.subsets[index]
    if rule.mode == "Balance":
        return state.counts[rule.name].get(cluster, 0)
    if rule.mode == "Capacity":
        room = state.room.left(index, cluster)
        return float("-inf") if room is None else -room
    return 0


def _pick(state: _State, index: int, topologies: Sequence[ts.Topology], *,
          enforce: bool) -> tuple[str | None, ts.Topology | None]:
    """The cluster of subset `index` that takes the next replica, or (None, the constraint that refused)."""
    rule = state.subsets[index]
    counts = state.cluster_counts()
    roomy = [name for name in rule.clusters if state.has_room(index, name)]
    admitted = [name for name in roomy if ts.blocking(topologies, name, counts) is None]
    refused = None
    if roomy and not admitted:
        refused = ts.blocking(topologies, roomy[0], counts)
    choices = admitted if admitted or enforce else roomy
    if not choices:
        return None, refused
    position = {name: index for index, name in enumerate(rule.clusters)}
    best = min(choices, key=lambda name: (
        ts.soft_skew(topologies, name, counts), _mode_key(state, index, name), position[name]))
    return best, None


def _usable_in(state: _State, index: int) -> bool:
    """Subset number `index` has a cluster that could take replicas but for room."""
    rule = state.subsets[index]
    allowed = rule.clusters if rule.usable is None else rule.usable
    return any(name in state.usable for name in allowed)


def _add_floors(state: _State, replicas: int, waiting: dict[str, int]) -> int:
    """Floors in subset order as far as `replicas` goes; a floor its subset has no room for waits
    there (`waiting`); one whose subset has no usable cluster at all is left to the other rules."""
    placed = sum(state.total(i) for i in range(len(state.subsets)))
    for index, rule in enumerate(state.subsets):
        while state.total(index) < rule.floor and placed < replicas and not state.spent():
            cluster, _ = _pick(state, index, state.topologies(), enforce=False)
            if cluster is None:
                if _usable_in(state, index):
                    short = min(rule.floor - state.total(index), replicas - placed)
                    waiting[rule.name] = short
                    placed += short
                    state.note(rule.name, Reason(ReasonKind.FLOOR_WAITING, floor=rule.floor, count=short))
                break
            state.add(index, cluster)
            placed += 1
    return placed


def _note_floors(state: _State, waiting: Mapping[str, int]) -> None:
    """"floor N" on every subset its floor holds where it is: at or below the floor, some replicas
    placed, none waiting (a waiting floor has its own note). Read from the end state, not from what
    this placement moved, so the same counts always give the same reasons (a floor kept through a
    scale-down, or placed by an earlier placement, is named as well)."""
    for index, rule in enumerate(state.subsets):
        if rule.floor and 0 < state.total(index) <= rule.floor and not waiting.get(rule.name):
            state.note(rule.name, Reason(ReasonKind.FLOOR, floor=rule.floor))


def _text(reason: Reason) -> str:
    return reason.text


def _add_rest(state: _State, placed: int, replicas: int) -> tuple[int, list[Reason]]:
    while placed < replicas:
        if state.spent():
            return replicas - placed, [Reason(ReasonKind.PACED, count=state.budget)]
        topologies = state.topologies()
        refusals: list[Reason] = []
        for index, rule in enumerate(state.subsets):
            if rule.cap is not None and sum(state.counts[rule.name].values()) >= rule.cap:
                continue
            cluster, refused = _pick(state, index, topologies, enforce=True)
            if cluster is not None:
                state.add(index, cluster)
                placed += 1
                break
            if refused is not None:
                said = Reason(ReasonKind.TOPOLOGY_SPREAD, detail=refused.constraint.describe())
                state.note(rule.name, said)
                refusals.append(said)
        else:
            return replicas - placed, sorted(set(refusals), key=_text) or [Reason(ReasonKind.NO_ROOM)]
    return 0, []


def _removal(state: _State, tier: Sequence[int], topologies: Sequence[ts.Topology]) -> tuple[str, str] | None:
    counts = state.cluster_counts()
    fallback: tuple[str, str] | None = None
    for index in tier:
        rule = state.subsets[index]
        held = state.counts[rule.name]
        position = {name: i for i, name in enumerate(rule.clusters)}
        candidates = sorted(
            (name for name in rule.clusters if held.get(name, 0) > 0),
            key=lambda name: (-max((t.domain_count(name, counts) for t in topologies), default=-1),
                              -held.get(name, 0) if rule.mode == "Balance" else 0, -position[name]))
        for name in candidates:
            if all(t.removal_keeps(name, counts) for t in topologies):
                return rule.name, name
        if fallback is None and candidates:
            fallback = (rule.name, candidates[0])
    return fallback


def _remove_in_bulk(state: _State, excess: int) -> None:
    """Past the budget: the rest of a scale-down by floors only (subsets above their floor, last
    first, each to its floor; then the others, last first), clusters last first — no skew kept."""
    floors = [rule.floor for rule in state.subsets]
    for keep_floor in (True, False):
        for index in reversed(range(len(state.subsets))):
            rule = state.subsets[index]
            held = state.counts[rule.name]
            can = state.total(index) - (floors[index] if keep_floor else 0)
            take = min(excess, max(0, can))
            for name in reversed(rule.clusters):
                cut = min(take, held.get(name, 0))
                if cut:
                    held[name] -= cut
                    take -= cut
                    excess -= cut
            if not excess:
                return


def _budget(subsets: Sequence[SubsetRule]) -> int:
    """How many replicas one placement moves one at a time: `WORK_LIMIT` cluster-steps over the
    clusters the spread names, at least `MIN_STEPS`. What is left is placed by the next placement
    (it starts from this one: stability), unplaced meanwhile; a scale-down past it ends by floors
    alone (`_remove_in_bulk`)."""
    clusters = len({name for rule in subsets for name in rule.clusters})
    return max(MIN_STEPS, WORK_LIMIT // max(1, clusters))


def _remove(state: _State, replicas: int) -> None:
    floors = [rule.floor for rule in state.subsets]
    while (placed := sum(state.total(i) for i in range(len(state.subsets)))) > replicas:
        if state.spent():
            _remove_in_bulk(state, placed - replicas)
            return
        totals = [state.total(i) for i in range(len(state.subsets))]
        order = floor_rules.removal_order(totals, floors)
        above = [i for i in order if totals[i] > floors[i]]
        tier = above or order
        chosen = _removal(state, tier, state.topologies())
        if chosen is None:  # replicas held by clusters no subset lists: nothing of ours to remove
            raise ValueError(f"cannot remove below {placed}: current names clusters outside the subsets")
        state.remove(chosen[0], chosen[1])


def plan(
    subsets: Sequence[SubsetRule],
    *,
    replicas: int,
    constraints: Sequence[ts.Constraint] = (),
    labels: Mapping[str, Mapping[str, str]],
    usable: Sequence[str] | None = None,
    room: Mapping[str, int | None] | Room | None = None,
    current: Mapping[str, Mapping[str, int]] | None = None,
) -> Plan:
    """Replicas per subset per cluster for `replicas` in total, from `current`.

    `labels` are every selectable cluster's MemberCluster labels (the domains come from them);
    `usable` the clusters that may take new replicas (default: all of `labels`); `room` how many
    more each cluster can take (absent or None: unlimited), shared by the subsets listing it, or a
    `Room` that answers per subset (the placement's capacity ledger).
    """
    if replicas < 0:
        raise ValueError(f"replicas must not be negative, got {replicas}")
    counts = {rule.name: {name: 0 for name in rule.clusters} for rule in subsets}
    for name, per_cluster in (current or {}).items():
        if name in counts:
            for cluster, count in per_cluster.items():
                if count:
                    counts[name][cluster] = counts[name].get(cluster, 0) + count
    state = _State(
        subsets=subsets, constraints=constraints, labels=labels,
        usable=frozenset(labels if usable is None else usable),
        room=SharedRoom(room or {}) if room is None or isinstance(room, Mapping) else room, counts=counts,
        reasons={rule.name: [] for rule in subsets}, budget=_budget(subsets),
    )
    unplaced, why, waiting = 0, list[Reason](), dict[str, int]()
    if sum(state.total(i) for i in range(len(subsets))) > replicas:
        _remove(state, replicas)
    else:
        placed = _add_floors(state, replicas, waiting)
        unplaced, why = _add_rest(state, placed, replicas)
    _note_floors(state, waiting)
    return Plan(counts=state.counts, unplaced=unplaced,
                reasons={name: tuple(found) for name, found in state.reasons.items()},
                unplaced_reasons=tuple(why), floor_waiting=waiting)
