"""A placement round against one snapshot: the rule, pure.

Why: a round places many spreads that share clusters. Placed one after another in key order (each
seeing the pending pods of the ones before it), no spread can be placed before the previous one is
answered, so shards cannot share the work: the coordinator used to place the round on the shards
and then again, itself, nearly every spread whose clusters an earlier one had changed. Placed
against one snapshot, every spread of a round is independent of the others; what they may promise
twice is found afterwards, per node pool, and only the spreads involved are placed again:

1. **Every spread is placed against the snapshot**: the room at the round's start, minus what
   spreads outside the round hold pending (`pools`: per cluster its node pools, `requested` what
   each node holds with those pending pods charged). Any partition of the round into shards gives
   the same answers (`place_round(first=...)` takes them).
2. **The check** (`settle`): per cluster, the round's pending charges (`charges_of`: placed minus
   running, per subset) are folded in key order as `overcommit.deduct_pending` folds them; before
   a spread's charges are folded, the room its placement took (`Placement.takes`, recorded when
   capacity bounds it: Adaptive with simulation) is taken again, in order, with the placement's
   own arithmetic (`placement_passes.NodesLeft`), on what the spreads before it left. A take that no
   longer fits makes the pools its pods may use *contended*, and its spread is placed again.
3. **Only the spreads whose takes do not fit are placed again**: they are taken out of the round;
   the others are checked again without them (until no check fails: taking charges out can only
   make room, but a fold of what remains may lay charges out differently across a cluster's
   pools) — in the clusters where the spreads taken out charged or took room, the only ones whose
   fold changes. Then they are placed one after another, in key order, against the snapshot minus the
   charges of the kept ones and of those placed before. A spread that charged a contended pool
   but whose takes fit, in key order, keeps its answer: it is the sequential one (below). Placing
   every charger of a contended pool again (the first form of this rule) gave the same answers
   and placed every spread of a herded round twice: spreads that see one snapshot send their
   replicas to the same roomiest clusters, so in a tight round nearly every pool is contended.

Properties (tests/unit/test_placement_round.py): the answer depends only on the inputs (never on
the shards or their number); nothing is promised twice (the answer is the sequential one in the
order "kept spreads by key, then the spreads placed again by key", the kept ones keeping their
snapshot answers); with room for everyone nothing is placed twice; and when no pool is
contended and no subset splits by `Capacity`, the answer equals placing the round's spreads one
after another in key order (`place_in_order`). Why equal: a check that passes means the
placement, run again on the fuller snapshot, would make the very same decisions — each take still
fits, rooms only shrink, and a `Fill` or `Balance` division whose rooms shrink but still hold
what it took divides the same way; a subset that took all its room finds no less. `Capacity`
divides in proportion to the rooms themselves, so inside a round it divides by the snapshot's:
its answer no longer depends on the names of the spreads placed before it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence

from federation.api import quantity, spread
from federation.core import fit, overcommit, placement, placement_view
from federation.core import placement_passes as passes

Pools = Mapping[str, Sequence[fit.Pool]]
"""Per cluster, its node pools in numbers; `requested`: what each node holds at the round's start,
the pending pods of spreads outside the round charged (the round's snapshot)."""

Charges = Mapping[str, tuple[overcommit.Charge, ...]]
"""Per cluster, one spread's pending pods: per subset, in the placement's order."""

Node = dict[str, quantity.Nanos]


@dataclasses.dataclass(frozen=True)
class Placed:
    """One spread's answer in a round, and what it charges."""

    result: placement.Placement
    charges: Charges
    """Its pending pods per cluster (`charges_of`)."""
    profiles: tuple[fit.Profile, ...]
    """Per subset in spec order, its pods (`profiles_of`): `result.takes` name subsets by number."""


Place = Callable[[str, placement_view.Room], Placed]
"""Place spread `key` against a room (per cluster, per pool: what each node holds requested)."""


@dataclasses.dataclass(frozen=True)
class Settled:
    """A round's answer."""

    placed: dict[str, Placed]
    """Every spread of the round, in key order."""
    contended: frozenset[tuple[str, int]]
    """(cluster, pool number) pairs where the snapshot answers promised room twice."""
    replaced: tuple[str, ...]
    """The spreads placed again (their takes did not fit), in key order."""


def profiles_of(spec: spread.FederatedSpreadSpec, shape: fit.PodShape) -> tuple[fit.Profile, ...]:
    """Per subset in spec order, the profile of the pod it creates (the subset's patch applied)."""
    return tuple(fit.profile(fit.with_subset(shape, subset)) for subset in spec.subsets)


def charges_of(
    result: placement.Placement, *, running: Mapping[str, Mapping[str, int]] | None,
    profiles: Sequence[fit.Profile],
) -> dict[str, tuple[overcommit.Charge, ...]]:
    """Per cluster, the placement's pending pods (placed minus running, where positive), per subset
    in placement order: what other spreads' placements see deducted (`member_views`)."""
    running = running or {}
    found: dict[str, list[overcommit.Charge]] = {}
    for subset, profile in zip(result.subsets, profiles, strict=True):
        ran = running.get(subset.name) or {}
        for name, count in subset.clusters.items():
            pending = count - ran.get(name, 0)
            if pending > 0:
                found.setdefault(name, []).append(overcommit.Charge(profile, pending))
    return {name: tuple(items) for name, items in found.items()}


def room_of(pools: Pools) -> dict[str, tuple[Mapping[str, quantity.Nanos], ...]]:
    """The room of the snapshot itself: per cluster, per pool, what each node holds."""
    return {name: tuple(p.requested for p in members) for name, members in pools.items()}


class _Fold:
    """Per cluster, the snapshot's pools with charges folded on, in the order they come."""

    def __init__(self, pools: Pools) -> None:
        self._pools = pools
        self._state: dict[str, list[Node]] = {}
        self._admitted: dict[tuple[str, object], tuple[int, ...]] = {}
        self._stamps: dict[str, int] = {}
        """Per cluster a charge changed, the number of the last such change (in this fold)."""
        self._changes = 0
        self._slots: dict[tuple[str, int], tuple[fit.Requests, int]] = {}
        """Per (cluster, pool), the free pod slots last computed for one kind of pod, until a
        charge changes that pool: a check asks each pool's slots before the spread's charges fold
        onto it, and the next spread asks again for the pools it did not change."""

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
        """Fold charges onto cluster `name` as `overcommit.deduct_pending` does: each pool in turn
        up to its free pod slots, what fits nowhere charged to nothing."""
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
            for index in range(len(self._pools.get(name, ()))):
                self._slots.pop((name, index), None)

    def room(self) -> FoldedRoom:
        """The room as folded so far, frozen (clusters nothing was charged to as the snapshot has
        them); it costs the clusters charged, not every cluster of the snapshot."""
        state = self._state
        return FoldedRoom(self._pools, {name: tuple(state[name]) for name in self._stamps},
                          stamps=dict(self._stamps), source=self)

    def refused(self, name: str, placed: Placed, takes: Sequence[passes.Take]) -> tuple[int, ...] | None:
        """Take `takes` (in cluster `name`) again on what is folded there; None when every take
        fits, else the pools the first one that does not fit may use."""
        pools = self._pools.get(name)
        if not pools:
            return ()
        profiles, state = placed.profiles, self.state(name)
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


class LedgerPools(Mapping[str, Sequence[fit.Pool]]):
    """A round's snapshot as `Pools`, from per-cluster ledgers (`overcommit.Ledger`) that hold the
    pending pods of the spreads outside the round: each cluster's pools with every charge its
    ledger holds as `requested`, read when first asked for (a round reads only the clusters it
    charges or places on). Valid until a ledger changes."""

    def __init__(self, ledgers: Mapping[str, overcommit.Ledger]) -> None:
        self._ledgers = ledgers
        self._read: dict[str, tuple[fit.Pool, ...]] = {}

    def __getitem__(self, name: str) -> tuple[fit.Pool, ...]:
        found = self._read.get(name)
        if found is None:
            ledger = self._ledgers[name]
            found = self._read[name] = tuple(
                dataclasses.replace(pool, requested=state)
                for pool, state in zip(ledger.pools, ledger.requested(None), strict=True))  # None: no spread
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._ledgers)

    def __len__(self) -> int:
        return len(self._ledgers)


def _takes_by_cluster(placed: Placed) -> dict[str, list[passes.Take]]:
    found: dict[str, list[passes.Take]] = {}
    for take in placed.result.takes:
        found.setdefault(take.cluster, []).append(take)
    return found


def _chargers(first: Mapping[str, Placed], keys: Sequence[str],
              takes: Mapping[str, Mapping[str, Sequence[passes.Take]]]) -> dict[str, list[str]]:
    """Per cluster, the spreads among `keys` (in key order) that charge or take room there."""
    per_cluster: dict[str, list[str]] = {}
    for key in keys:
        for name in first[key].charges.keys() | takes[key].keys():
            per_cluster.setdefault(name, []).append(key)
    return per_cluster


def _check(
    fold: _Fold, first: Mapping[str, Placed], per_cluster: Mapping[str, Sequence[str]],
    takes: Mapping[str, Mapping[str, Sequence[passes.Take]]],
) -> tuple[set[str], set[tuple[str, int]]]:
    """Per cluster of `per_cluster` (each folded from the snapshot: none may be in `fold` yet), the
    spreads whose takes do not fit on what the spreads before them there left, and the pools those
    takes may use; every spread's charges folded, so `fold` ends holding them all. Clusters are
    independent of each other: any partition of them checks the same."""
    failed: set[str] = set()
    contended: set[tuple[str, int]] = set()
    for name, chargers in per_cluster.items():
        for key in chargers:  # in key order
            mine = takes[key].get(name)
            if mine:
                refused = fold.refused(name, first[key], mine)
                if refused is not None:
                    failed.add(key)
                    contended.update((name, index) for index in refused)
            fold.charge(name, first[key].charges.get(name, ()))
    return failed, contended


def settle(pools: Pools, first: Mapping[str, Placed], *, place: Place) -> Settled:
    """The round's answer from `first`, every spread's answer against the snapshot `pools` (in any
    order, from any number of shards): the spreads whose takes do not fit found and placed again
    with `place`, one after another in key order (see the module docstring).

    After the first check, only the clusters where the spreads just taken out charged or took room
    are checked again: elsewhere the same spreads fold the same charges, and their check passed.
    The fold then holds the kept spreads' charges everywhere, which is the room the spreads placed
    again start from."""
    keys = sorted(first)
    takes = {key: _takes_by_cluster(first[key]) for key in keys}
    per_cluster = _chargers(first, keys, takes)
    fold = _Fold(pools)
    failed, contended = _check(fold, first, per_cluster, takes)
    again = set(failed)
    while failed:
        touched = {name for key in failed for name in first[key].charges.keys() | takes[key].keys()}
        fold.forget(touched)
        failed, found = _check(
            fold, first, {name: [k for k in per_cluster[name] if k not in again] for name in touched}, takes)
        contended |= found
        again |= failed
    placed = {key: first[key] for key in keys}
    for key in sorted(again):
        placed[key] = answer = place(key, fold.room())
        for name, items in answer.charges.items():
            fold.charge(name, items)
    return Settled(placed=placed, contended=frozenset(contended), replaced=tuple(sorted(again)))


def place_round(
    keys: Collection[str], *, pools: Pools, place: Place, first: Mapping[str, Placed] | None = None,
) -> Settled:
    """The round of spreads `keys` against the snapshot `pools`: each placed against it (unless
    `first` already holds those answers, e.g. from shards), then `settle`d."""
    if first is None:
        room = room_of(pools)
        first = {key: place(key, room) for key in sorted(set(keys))}
    elif set(first) != set(keys):
        raise ValueError(f"the first answers are for {sorted(first)}, not the round's {sorted(set(keys))}")
    return settle(pools, first, place=place)


def place_in_order(keys: Iterable[str], *, pools: Pools, place: Place) -> dict[str, Placed]:
    """The sequential rule the round is compared with: the spreads in the order given, each against
    the snapshot minus the pending charges of the ones before it."""
    fold = _Fold(pools)
    placed: dict[str, Placed] = {}
    for key in keys:
        placed[key] = answer = place(key, fold.room())
        for name, items in answer.charges.items():
            fold.charge(name, items)
    return placed
