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
   running, per subset) are folded in key order as `pending_deduction.deduct_pending` folds them; before
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
from collections.abc import Callable, Collection, ItemsView, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from federation.api import quantity, spread
from federation.core import fit, overcommit, placement, placement_view, round_check

Pools = round_check.Pools

Charges = Mapping[str, tuple[overcommit.Charge, ...]]
"""Per cluster, one spread's pending pods: per subset, in the placement's order."""

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


def _given(item: tuple[str, int]) -> bool:
    return item[1] > 0


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
        # Most members of a wide subset hold nothing: with no negative running count, only the
        # clusters given replicas can have pods pending.
        placed = (subset.clusters.items() if any(count < 0 for count in ran.values())
                  else filter(_given, subset.clusters.items()))
        for name, count in placed:
            pending = count - ran.get(name, 0)
            if pending > 0:
                found.setdefault(name, []).append(overcommit.Charge(profile, pending))
    return {name: tuple(items) for name, items in found.items()}


class DeferredCharges(Mapping[str, tuple[overcommit.Charge, ...]]):
    """`charges_of` a placement, computed when first read; equal to it as a mapping.

    Why: a round checked on the shards of clusters (a `Checker` given to `settle`) never reads
    the charges of the spreads it keeps — the coordinator charges its ledgers from the stored
    placements — so computing them for every answer of a Ray round was work its placing thread
    did for nothing (bench/README.md, "A kept answer's charges, computed only when read"). Only
    the spreads placed again, and a check that falls back here, read them.
    """

    __slots__ = ("_found", "_profiles", "_result", "_running")

    def __init__(
        self, result: placement.Placement, *, running: Mapping[str, Mapping[str, int]] | None,
        profiles: Sequence[fit.Profile],
    ) -> None:
        self._result, self._running, self._profiles = result, running, profiles
        self._found: dict[str, tuple[overcommit.Charge, ...]] | None = None

    def _charges(self) -> dict[str, tuple[overcommit.Charge, ...]]:
        if self._found is None:
            self._found = charges_of(self._result, running=self._running, profiles=self._profiles)
        return self._found

    @property
    def computed(self) -> bool:
        """Whether anything has read the charges yet (they are computed once, when first read)."""
        return self._found is not None

    def __getitem__(self, name: str) -> tuple[overcommit.Charge, ...]:
        return self._charges()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._charges())

    def __len__(self) -> int:
        return len(self._charges())

    def __contains__(self, name: object) -> bool:
        return name in self._charges()

    def items(self) -> ItemsView[str, tuple[overcommit.Charge, ...]]:
        return self._charges().items()

    def __repr__(self) -> str:
        return f"DeferredCharges({self._charges()!r})"


def room_of(pools: Pools) -> dict[str, tuple[Mapping[str, quantity.Nanos], ...]]:
    """The room of the snapshot itself: per cluster, per pool, what each node holds."""
    return {name: tuple(p.requested for p in members) for name, members in pools.items()}


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


class Checker(Protocol):
    """A round's check (`round_check.ClusterCheck`, or one that asks the shards of clusters that
    run its parts): what the first check finds, what it finds again without the spreads taken out,
    and the fold that ends holding the kept spreads' charges."""

    def first(self) -> round_check.Found: ...

    def again(self, taken_out: Collection[str]) -> round_check.Found: ...

    def kept(self) -> round_check.Fold: ...


class _InProcess:
    """The check of every cluster here, on one fold."""

    def __init__(self, pools: Pools, first: Mapping[str, Placed]) -> None:
        self._check = round_check.ClusterCheck(pools, round_check.by_cluster(
            round_check.rows_of(key, found.result, charges=found.charges, profiles=found.profiles)
            for key, found in first.items()))

    def first(self) -> round_check.Found:
        return self._check.first()

    def again(self, taken_out: Collection[str]) -> round_check.Found:
        return self._check.again(taken_out)

    def kept(self) -> round_check.Fold:
        return self._check.fold


def settle(pools: Pools, first: Mapping[str, Placed], *, place: Place,
           checker: Checker | None = None) -> Settled:
    """The round's answer from `first`, every spread's answer against the snapshot `pools` (in any
    order, from any number of shards): the spreads whose takes do not fit found (by `checker`, the
    check of every cluster here by default) and placed again with `place`, one after another in
    key order (see the module docstring), from the fold the checks end with."""
    keys = sorted(first)
    check = checker if checker is not None else _InProcess(pools, first)
    failed, contended = check.first()
    again = set(failed)
    while failed:
        failed, found = check.again(failed)
        contended |= found
        again |= failed
    placed = {key: first[key] for key in keys}
    if again:
        fold = check.kept()
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
    fold = round_check.Fold(pools)
    placed: dict[str, Placed] = {}
    for key in keys:
        placed[key] = answer = place(key, fold.room())
        for name, items in answer.charges.items():
            fold.charge(name, items)
    return placed
