"""Per spread, what it was last placed at and what its next placement starts from.

Why a module of its own: stability comes from passing the last placement back as `current`, and
what `current` is depends on history the World's facts do not hold — before the first placement of
a restarted coordinator, what the spread's hub status recorded (`seeded`); for a spread deleted and
created again, what the deleted one ran (`remember`ed for the most recent
`lifecycle.REMEMBERED_DELETIONS`); after a placement, which of its clusters were ready, which
leaving its selection kept its pods, and which lost ones the brake or the failover rate limit held
(so a cluster heard again is told apart from one whose share never moved). These records are
written only by the World's `store`, `settled_placement` and `drop`, which keep the pending-pod
ledgers in step; everyone else reads them through read-only mappings.
"""

from __future__ import annotations

import collections
import types
from collections.abc import Callable, Mapping

from federation.coordinator.model import lifecycle
from federation.core import placement

Counts = dict[str, dict[str, int]]
"""Per subset, per cluster: replicas."""


class PlacementRecords:
    """Per spread: its last placement, the clusters it was placed among, and what it starts from."""

    def __init__(self) -> None:
        self._seeded: dict[str, Counts] = {}
        self.seeded: Mapping[str, Counts] = types.MappingProxyType(self._seeded)
        """Per spread, the placement its hub status recorded: `current` until the first recompute."""
        self._previous: collections.OrderedDict[str, Counts] = collections.OrderedDict()
        """Per deleted spread (the most recent `lifecycle.REMEMBERED_DELETIONS`), its last placement:
        a spread of the same key created again starts from it (re-creation adopts what ran)."""
        self._placed: dict[str, placement.Placement] = {}
        self.placements: Mapping[str, placement.Placement] = types.MappingProxyType(self._placed)
        """The last placement per spread."""
        self._placed_ready: dict[str, frozenset[str]] = {}
        self.placed_ready: Mapping[str, frozenset[str]] = types.MappingProxyType(self._placed_ready)
        """Per placed spread, the selected clusters that were ready when it was placed."""
        self._placed_departing: dict[str, frozenset[str]] = {}
        """Per spread, the clusters leaving its selection that kept its pods when it was placed."""
        self._placed_held: dict[str, frozenset[str]] = {}
        """Per spread, the lost clusters whose replicas the brake or the rate limit held when it was
        last placed (their shares did not move, so they are not "returned" when heard again)."""

    # --- before the first placement ----------------------------------------------------------

    def seed(self, key: str, counts: Counts) -> None:
        """Spread `key`'s hub status recorded this placement (a restarted coordinator starts from it)."""
        self._seeded[key] = counts

    def adopt_previous(self, key: str) -> None:
        """Spread `key` was created: if a deleted one of the key is remembered, and nothing else
        says where it runs, it is placed from what the deleted one ran."""
        previous = self._previous.pop(key, None)
        if previous is not None and key not in self._seeded and key not in self._placed:
            self._seeded[key] = previous

    def forget_seed(self, key: str) -> None:
        """Spread `key`'s recorded placement is spent (placed from the live world, or deleted)."""
        self._seeded.pop(key, None)

    # --- placements ----------------------------------------------------------------------------

    def store(self, key: str, result: placement.Placement) -> placement.Placement | None:
        """Record spread `key`'s new placement; the one it replaces, if any."""
        old = self._placed.get(key)
        self._placed[key] = result
        return old

    def settled(
        self, key: str, *, ready: frozenset[str], departing: frozenset[str], held: frozenset[str]
    ) -> None:
        """Spread `key` was placed from the live world: its recorded placement is spent; the clusters
        it selects that were `ready`, those leaving its selection that kept its pods (`departing`)
        and the lost ones whose replicas were `held` are remembered."""
        self._seeded.pop(key, None)
        self._placed_ready[key] = ready
        if departing:
            self._placed_departing[key] = departing
        else:
            self._placed_departing.pop(key, None)
        self._placed_held[key] = held

    def drop(self, key: str, *, deleted: bool) -> placement.Placement | None:
        """Forget spread `key`'s placement; the one it had, if any. Of a `deleted` spread it is
        remembered for a re-creation of the key."""
        self._placed_ready.pop(key, None)
        self._placed_departing.pop(key, None)
        self._placed_held.pop(key, None)
        old = self._placed.pop(key, None)
        if old is not None and deleted:
            self._previous[key] = old.rule_counts()
            self._previous.move_to_end(key)
            while len(self._previous) > lifecycle.REMEMBERED_DELETIONS:
                self._previous.popitem(last=False)
        return old

    # --- what the next placement starts from ----------------------------------------------------

    def current_for(
        self, key: str, *, ready_now: Callable[[str], frozenset[str]],
        held_by: Callable[[str, str], Mapping[str, int]],
    ) -> Counts:
        """Spread `key`'s last placement per subset per cluster; before the first, what its hub
        status recorded, else empty. A cluster that was lost when the spread was last placed and
        is ready now (`ready_now`: the selected clusters ready for a spread) holds (at least) the
        pods it last reported running (`held_by`: per subset, of a cluster and a spread)."""
        last = self._placed.get(key)
        if last is None:
            return {subset: dict(counts) for subset, counts in self._seeded.get(key, {}).items()}
        counts = last.rule_counts()  # not the pods the handover kept: they are recomputed each round
        kept = {s.name: s.kept_clusters for s in last.subsets}
        returned = (ready_now(key) - self._placed_ready.get(key, frozenset())
                    - self._placed_held.get(key, frozenset()))
        for name in returned:  # lost when last placed, heard again: what it runs counts again
            for subset, count in held_by(name, key).items():  # (less what was kept there)
                held = counts.setdefault(subset, {})
                held[name] = max(held.get(name, 0), count - kept.get(subset, {}).get(name, 0))
        return counts

    def waiting_for(self, key: str) -> Counts:
        """Spread `key`'s replicas its last placement left waiting for capacity, per subset per cluster."""
        last = self._placed.get(key)
        return {} if last is None else {s.name: dict(s.waiting_clusters) for s in last.subsets if s.waiting}

    def departing_lost(self, departing: Callable[[str], frozenset[str]]) -> set[str]:
        """The spreads placed while a cluster leaving their selection kept their pods, that cluster
        no longer among those `departing` (the heard clusters holding pods of a spread that no
        longer selects them): its kept pods are no longer heard of."""
        return {key for key, seen in self._placed_departing.items() if not seen <= departing(key)}
