"""Unschedulable marks: (spread, subset, cluster) where an agent saw pods stay unschedulable.

Why a store of its own: marks arrive from agents, expire by the spread's `unschedulableSeconds`
(the placement's business), are spent by a new strategy type or subset list, and vanish with
their spread or cluster. Keeping them apart from the World's other facts keeps each rule in one
place; the World owns one `Marks` and asks it.

Marks belong to the Adaptive strategy: the World hands none to a Fixed spread's placement.
"""

from __future__ import annotations

import datetime

from federation.api import spread as spread_api
from federation.core import placement


def spent(old: spread_api.FederatedSpreadSpec, new: spread_api.FederatedSpreadSpec) -> bool:
    """A mark speaks of the strategy type and subsets it was found under: a new type or subset list
    spends it; an edit of anything else (target, failover, adaptive timings) keeps it."""
    return (old.schedule_strategy.type, old.subsets) != (new.schedule_strategy.type, new.subsets)


class Marks:
    """The latest mark per (spread, subset, cluster), with a per-spread index built on demand."""

    def __init__(self) -> None:
        self._since: dict[tuple[str, str, str], datetime.datetime] = {}
        self._by_spread: dict[str, list[placement.UnschedulableMark]] | None = None
        self._spent_at: dict[str, int] = {}
        """Per spread, the generation of the spec that last spent its marks (`spent`)."""

    def mark(self, *, spread: str, subset: str, cluster: str, since: datetime.datetime,
             generation: int = 0) -> bool:
        """Record a mark (the latest wins); whether it is new. A mark found under a generation
        older than the spec that spent the spread's marks speaks of subsets that are gone (an
        agent reports before it has the new assignment) and is not recorded; generation 0 (an
        agent that does not say) is."""
        if 0 < generation < self._spent_at.get(spread, 0):
            return False
        key = (spread, subset, cluster)
        if self._since.get(key) == since:
            return False
        self._since[key] = since
        self._by_spread = None
        return True

    def of_spread(self, spread: str) -> list[placement.UnschedulableMark]:
        """Spread `spread`'s marks, by subset then cluster."""
        if self._by_spread is None:
            index: dict[str, list[placement.UnschedulableMark]] = {}
            for (key, subset, name), since in sorted(self._since.items()):
                index.setdefault(key, []).append(
                    placement.UnschedulableMark(subset=subset, cluster=name, since=since))
            self._by_spread = index
        return list(self._by_spread.get(spread, ()))

    def drop_spread(self, spread: str, *, spent_at: int = 0) -> None:
        """Forget every mark of `spread`: deleted, or its marks are spent by the spec of generation
        `spent_at` (marks found under an older one are refused from then on)."""
        self._since = {k: v for k, v in self._since.items() if k[0] != spread}
        self._by_spread = None
        if spent_at:
            self._spent_at[spread] = spent_at
        else:
            self._spent_at.pop(spread, None)

    def drop_cluster(self, cluster: str) -> None:
        """Forget every mark in `cluster` (its MemberCluster was deleted)."""
        self._since = {k: v for k, v in self._since.items() if k[2] != cluster}
        self._by_spread = None
