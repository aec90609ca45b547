"""A round's check against one snapshot, cluster by cluster: the fold of pending charges on each
cluster's node pools, and which spreads' takes no longer fit on it.

Why a module of its own: a cluster's check reads only the spreads that charge or take room there,
in key order, on that cluster's own fold (`placement_round`'s rule, step 2), so clusters are
checked apart: all of them in the coordinator, or each part of them by the shard that owns it
(`ClusterCheck` over any part of a round's `Row`s; `test_placement_round.py`'s
`test_a_check_split_over_parts_of_the_clusters_settles_the_same`), and
`placement_round.settle` only unions what the parts find. A check that found spreads to take out
is asked again without them (`ClusterCheck.again`), only where they were: elsewhere the same
spreads fold the same charges. Pure: no Ray here; the shards that run it import this.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

from federation.api import quantity
from federation.core import fit, overcommit, placement, placement_view
from federation.core import placement_passes as passes

Pools = Mapping[str, Sequence[fit.Pool]]
"""Per cluster, its node pools in numbers; `requested`: what each node holds at the round's start,
the pending pods of spreads outside the round charged (the round's snapshot)."""

Node = dict[str, quantity.Nanos]

Found = tuple[frozenset[str], frozenset[tuple[str, int]]]
"""What a check finds: the spreads whose takes do not fit, and the (cluster, pool number) pairs
those takes may use (the contended pools)."""


@dataclasses.dataclass(frozen=True)
class Row:
    """One spread of a round in one cluster: what the check of that cluster reads of it."""

    key: str
    profiles: tuple[fit.Profile, ...]
    """Per subset in spec order, its pods (the takes name subsets by number)."""
    takes: tuple[passes.Take, ...]
    """The room its placement took in this cluster, in order (none: it only charges here)."""
    charges: tuple[overcommit.Charge, ...]
    """Its pending pods in this cluster, per subset in placement order."""


def rows_of(key: str, result: placement.Placement, *, charges: Mapping[str, tuple[overcommit.Charge, ...]],
            profiles: tuple[fit.Profile, ...]) -> dict[str, Row]:
    """Spread `key`'s rows, per cluster it charges or took room in."""
    takes: dict[str, list[passes.Take]] = {}
    for take in result.takes:
        takes.setdefault(take.cluster, []).append(take)
    return {name: Row(key, profiles, tuple(takes.get(name, ())), charges.get(name, ()))
            for name in takes.keys() | charges.keys()}


def merged(parts: Iterable[Mapping[str, Sequence[Row]]]) -> dict[str, list[Row]]:
    """Per cluster, the rows of every part there (each part's rows per cluster: one spread's, or
    one shard's), in key order."""
    found: dict[str, list[Row]] = {}
    for part in parts:
        for name, rows in part.items():
            found.setdefault(name, []).extend(rows)
    for listed in found.values():
        listed.sort(key=lambda row: row.key)
    return found


def by_cluster(rows: Iterable[Mapping[str, Row]]) -> dict[str, list[Row]]:
    """Per cluster, the rows of every spread there, in key order (`rows`: each spread's `rows_of`)."""
    return merged({name: (row,) for name, row in mine.items()} for mine in rows)


class Fold:
    """Per cluster, the snapshot's pools with charges folded on, in the order they come."""

    def __init__(self, pools: Pools) -> None:
        self._pools = pools
        self._state: dict[str, list[Node]] = {}
        self._admitted: dict[tuple[str, object], tuple[int, ...]] = {}
        self._stamps: dict[str, int] = {}
        """Per cluster a charge changed, the number of the last such change (in this fold)."""
        self._frozen: dict[str, tuple[Node, ...]] = {}
        """Per cluster a charge changed, its state as the last `room` froze it; `_thawed` names
        those changed since. A room is asked once per spread placed again in a contended round
        (38,558 at 100,000 spreads), and freezing every charged cluster each time cost 8.5 s of
        such a round under the profiler; now a room freezes only what changed since the last."""
        self._thawed: set[str] = set()
        self._changes = 0
        self._slots: dict[tuple[str, int], tuple[fit.Requests, int]] = {}
        """Per (cluster, pool), the free pod slots last computed for one kind of pod, until a
        charge changes that pool: a check asks each pool's slots before the spread's charges fold
        onto it, and the next spread asks again for the pools it did not change."""

    @classmethod
    def seeded(cls, pools: Pools, states: Mapping[str, Sequence[Mapping[str, quantity.Nanos]]]) -> Fold:
        """A fold whose clusters `states` hold what those states say (what checks elsewhere folded
        there, `ClusterCheck.folded`), the others as the snapshot has them."""
        fold = cls(pools)
        for name, state in states.items():
            fold._state[name] = [dict(node) for node in state]
            fold._changes += 1
            fold._stamps[name] = fold._changes
            fold._thawed.add(name)
        return fold

    def folded(self) -> dict[str, tuple[Node, ...]]:
        """Every cluster a charge changed, with what its nodes hold now (for `seeded`)."""
        return {name: tuple(self._state[name]) for name in self._stamps}

    def state(self, name: str) -> list[Node]:
        found = self._state.get(name)
        if found is None:
            found = self._state[name] = [dict(p.requested) for p in self._pools.get(name, ())]
        return found

    def admitted(self, name: str, profile: fit.Profile) -> tuple[int, ...]:
        """The pools of cluster `name` (with nodes) whose nodes admit the profile's pods."""
        key = (name, profile.admission)
        found = self._admitted.get(key)
        if found is None:
            found = self._admitted[key] = fit.admitting(self._pools.get(name, ()), profile.shape)
        return found

    def charge(self, name: str, items: Iterable[overcommit.Charge]) -> None:
        """Fold charges onto cluster `name` as `pending_deduction.deduct_pending` does: each pool in
        turn up to its free pod slots, what fits nowhere charged to nothing."""
        pools, state = self._pools.get(name, ()), self.state(name)
        for item in items:
            left, requests = item.pods, item.profile.requests
            for index in self.admitted(name, item.profile):
                pool = pools[index]
                take = min(left, self.slots(name, index, requests))
                if take:
                    node = state[index] = dict(state[index])
                    fit.charge(node, requests, pods=take, count=pool.count)
                    self._slots.pop((name, index), None)
                    left -= take
                    self._changes += 1
                    self._stamps[name] = self._changes
                    self._thawed.add(name)
                if not left:
                    break

    def slots(self, name: str, index: int, requests: fit.Requests) -> int:
        """Pods of `requests` pool `index` of cluster `name` still takes, as folded so far
        (`fit.slots`, remembered until a charge changes the pool)."""
        found = self._slots.get((name, index))
        if found is not None and (found[0] is requests or found[0] == requests):
            return found[1]
        value = fit.slots(self._pools[name][index], self.state(name)[index], requests)
        self._slots[(name, index)] = (requests, value)
        return value

    def forget(self, names: Iterable[str]) -> None:
        """Clusters `names` back to the snapshot, as if nothing had been charged there."""
        for name in names:
            self._state.pop(name, None)
            self._stamps.pop(name, None)
            self._frozen.pop(name, None)
            self._thawed.discard(name)
            for index in range(len(self._pools.get(name, ()))):
                self._slots.pop((name, index), None)

    def room(self) -> FoldedRoom:
        """The room as folded so far, frozen (clusters nothing was charged to as the snapshot has
        them); it costs the clusters charged since the last room, not every cluster of the snapshot."""
        state, frozen = self._state, self._frozen
        for name in self._thawed:  # a charge replaces a node's dict, never changes one in place
            frozen[name] = tuple(state[name])
        self._thawed.clear()
        return FoldedRoom(self._pools, dict(frozen), stamps=dict(self._stamps), source=self)

    def refused(self, name: str, profiles: Sequence[fit.Profile],
                takes: Sequence[passes.Take]) -> tuple[int, ...] | None:
        """Take `takes` (in cluster `name`) again on what is folded there; None when every take
        fits, else the pools the first one that does not fit may use."""
        pools = self._pools.get(name)
        if not pools:
            return ()
        state = self.state(name)
        first = profiles[takes[0].subset]
        admitted = self.admitted(name, first)
        if all(profiles[t.subset].requests == first.requests
               and self.admitted(name, profiles[t.subset]) == admitted for t in takes):
            # One kind of pod on the same pools (the usual case): `NodesLeft` fills their nodes
            # with it exactly, so the takes fit when their pods do not outnumber the pools' free slots.
            fits = sum(self.slots(name, i, first.requests) for i in admitted)
            return None if sum(t.pods for t in takes) <= fits else admitted
        member = placement_view.member_of(
            pools, state, ready=True, cordon="", kinds=fit.kinds([p.requests for p in profiles]),
            admits=tuple(self.admitted(name, p) for p in profiles),
        )
        view = placement_view.View(names=(name,), selected=(), members={name: member}, rooms=())
        nodes_left = passes.NodesLeft(view)
        for take in takes:
            if nodes_left.room(take.subset, name) < take.pods:
                return member.admits[take.subset]
            nodes_left.take_for(take.subset, name, take.pods)
        return None


class FoldedRoom(Mapping[str, Sequence[Mapping[str, quantity.Nanos]]]):
    """A room as a fold of charges on the snapshot left it: the charged clusters' states, the
    others' as the snapshot's pools have them. `stamp` tells, without comparing states, whether a
    cluster differs from the snapshot and whether two rooms of one fold (`source`) hold the same
    state there: what a caller that builds views from rooms needs to build each only once."""

    def __init__(self, pools: Pools, folded: Mapping[str, Sequence[Mapping[str, quantity.Nanos]]], *,
                 stamps: Mapping[str, int], source: object) -> None:
        self._pools, self._folded, self._stamps = pools, folded, stamps
        self.source = source
        """The fold that made this room: the same stamp of the same source is the same state."""

    def stamp(self, name: str) -> int:
        """0: cluster `name` holds what the snapshot says; else the number of the fold's last
        change to it (equal numbers from one `source`: equal states)."""
        return self._stamps.get(name, 0)

    def __getitem__(self, name: str) -> Sequence[Mapping[str, quantity.Nanos]]:
        found = self._folded.get(name)
        return found if found is not None else tuple(p.requested for p in self._pools[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._pools)

    def __len__(self) -> int:
        return len(self._pools)


class ClusterCheck:
    """The check of the clusters `rows` names (per cluster, its rows in key order) on one fold."""

    def __init__(self, pools: Pools, rows: Mapping[str, Sequence[Row]]) -> None:
        self.fold = Fold(pools)
        """Ends holding the charges of every spread not taken out, in every cluster checked."""
        self._rows = rows
        self._out: set[str] = set()
        self._clusters_of: dict[str, list[str]] = {}
        for name, listed in rows.items():
            for row in listed:
                self._clusters_of.setdefault(row.key, []).append(name)

    def first(self) -> Found:
        """Every cluster's check, from the snapshot."""
        return self._check(self._rows)

    def again(self, taken_out: Collection[str]) -> Found:
        """Without the spreads `taken_out` (and those before): the clusters where they were checked
        again from the snapshot, the others kept as their last check left them (the same spreads
        fold the same charges there, and that check passed)."""
        self._out.update(taken_out)
        touched = {name for key in taken_out for name in self._clusters_of.get(key, ())}
        self.fold.forget(touched)
        out = self._out
        return self._check({name: [r for r in self._rows[name] if r.key not in out] for name in touched})

    def folded(self) -> dict[str, tuple[Node, ...]]:
        """What the checked clusters' nodes hold with the kept spreads' charges (`Fold.seeded`)."""
        return self.fold.folded()

    def _check(self, rows: Mapping[str, Sequence[Row]]) -> Found:
        failed: set[str] = set()
        contended: set[tuple[str, int]] = set()
        fold = self.fold
        for name, listed in rows.items():
            for row in listed:  # in key order
                if row.takes:
                    refused = fold.refused(name, row.profiles, row.takes)
                    if refused is not None:
                        failed.add(row.key)
                        contended.update((name, index) for index in refused)
                fold.charge(name, row.charges)
        return frozenset(failed), frozenset(contended)
