"""Which spreads name, select or occupy each cluster, and which clusters each spread selects.

Why an index: with thousands of spreads and clusters, an event about one cluster must
cost the spreads that can use it, not every spread, and a request must cost the clusters its
spread can use, not every cluster. So the World's selection index keeps, per cluster, the spreads
whose subsets name it and the spreads with replicas placed on it; per distinct cluster selector
(spreads often share one), the spreads using it and the clusters it matches; and per spread, its
subsets' clusters in fill order. Matches are cached against an epoch bumped when the set of
clusters or their labels change (`relabel`), so a selector is matched against every cluster once
per such change, not once per spread per request. A decommissioned cluster (`spec.decommission`)
is in no spread's selection, named or matched: that is how it leaves the federation (every spread
handles it as a cluster that left its selection).

The index reads the World's spreads, clusters and inventories through references to its
dictionaries and never writes them; the World tells it what changed.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping, Set

from federation.api import cluster, common
from federation.api import spread as spread_api
from federation.coordinator.model import facts
from federation.core import matching, placement

Occupancy = list[tuple[str, list[tuple[str, int]]]]
"""Per subset of a placement (in its order), the clusters holding replicas and how many."""


def occupancy(result: placement.Placement) -> Occupancy:
    """Per subset of `result`, the clusters it places replicas on and how many."""
    return [(s.name, list(filter(_COUNT, s.clusters.items()))) for s in result.subsets]


_COUNT = operator.itemgetter(1)


@dataclasses.dataclass
class Selector:
    """One distinct cluster selector, the spreads using it, and the clusters it matches."""

    selector: common.LabelSelector
    users: set[str]
    epoch: int = -1
    members: tuple[str, ...] = ()
    ready: tuple[int, dict[str, bool], frozenset[str]] | None = None
    """(epoch, readiness map, the members ready in it): `ready_members` for this selector."""


class SelectionIndex:
    """Per cluster the spreads naming, selecting or occupying it; per spread the clusters it selects."""

    def __init__(
        self, spreads: Mapping[str, facts.SpreadEntry], clusters: Mapping[str, facts.ClusterFacts], *,
        pools: Mapping[str, list[cluster.NodePool]], decommissioned: Set[str] = frozenset(),
    ) -> None:
        self._spreads = spreads
        self._clusters = clusters
        self._pools = pools
        self._decommissioned = decommissioned
        """The World's decommissioned clusters (a change of it comes with `relabel`)."""
        self._names: tuple[str, ...] | None = None
        self._name_set: frozenset[str] = frozenset()
        self._epoch = 0
        """Bumped when the set of clusters or their labels change: selections are stale."""
        self._named: dict[str, set[str]] = {}
        self._selectors: dict[str, Selector] = {}
        self.selector_keys: dict[str, tuple[str | None, ...]] = {}
        """Per spread, per subset in spec order, the key of its cluster selector (None: it has none)."""
        self._selection: dict[str, tuple[int, tuple[tuple[str, ...], ...], frozenset[str]]] = {}
        """Per spread, the epoch it was matched at, its selection (`selection_of`) and the clusters
        in it (`selected_of`): a round asks for both several times per spread."""
        self._unions: dict[frozenset[str], frozenset[str]] = {}
        """The distinct `selected_of` sets of this epoch, each kept once: spreads that select the
        same clusters (a region, whatever their subsets) share one set, not a set of hundreds of
        names each."""
        self._placed_on: dict[str, set[str]] = {}
        self._occupied: dict[str, frozenset[str]] = {}

    def cluster_names(self) -> tuple[str, ...]:
        """Clusters known from a MemberCluster or an agent's inventory, by name (the same tuple
        until `relabel`)."""
        if self._names is None:
            self._names = tuple(sorted(set(self._clusters) | set(self._pools)))
            self._name_set = frozenset(self._names)
        return self._names

    def cluster_set(self) -> frozenset[str]:
        """`cluster_names` as a set (the same object until `relabel`)."""
        self.cluster_names()
        return self._name_set

    def relabel(self) -> None:
        """The set of clusters or their labels changed: selections must be matched again."""
        self._names = None
        self._epoch += 1
        self._unions = {}

    def labels(self, name: str) -> dict[str, str]:
        """Cluster `name`'s topology labels (none before its MemberCluster is seen)."""
        member = self._clusters.get(name)
        return member.labels if member else {}

    def register(self, key: str, spec: spread_api.FederatedSpreadSpec) -> None:
        """Index the clusters spread `key`'s subsets name and the selectors they use."""
        keys: list[str | None] = []
        for subset in spec.subsets:
            found: str | None = None
            if subset.clusters is not None:
                for name in subset.clusters:
                    self._named.setdefault(name, set()).add(key)
            if subset.cluster_selector is not None:
                found = subset.cluster_selector.model_dump_json()
                entry = self._selectors.get(found)
                if entry is None:
                    entry = self._selectors[found] = Selector(subset.cluster_selector, set())
                entry.users.add(key)
            keys.append(found)
        self.selector_keys[key] = tuple(keys)

    def unregister(self, key: str) -> None:
        """Undo `register` for spread `key` (call while the World still holds its old entry)."""
        entry = self._spreads.get(key)
        if entry is not None:
            for subset in entry.spec.subsets:
                for name in subset.clusters or ():
                    users = self._named.get(name)
                    if users is not None:
                        users.discard(key)
                        if not users:
                            del self._named[name]
        for found in self.selector_keys.pop(key, ()):
            if found is None or found not in self._selectors:
                continue
            users = self._selectors[found].users
            users.discard(key)
            if not users:
                del self._selectors[found]
        self._selection.pop(key, None)

    def forget(self, key: str) -> None:
        """Spread `key`'s spec changed: its selection is worked out again when next asked."""
        self._selection.pop(key, None)

    def selector_members(self, found: str) -> tuple[str, ...]:
        """The clusters selector `found` matches, by name."""
        entry = self._selectors[found]
        if entry.epoch != self._epoch:
            retired = self._decommissioned
            entry.members = tuple(
                n for n in self.cluster_names()
                if n not in retired and matching.label_selector_matches(entry.selector, self.labels(n))
            )
            entry.epoch = self._epoch
        return entry.members

    def ready_members(self, found: str, ready: dict[str, bool]) -> frozenset[str]:
        """The clusters selector `found` matches that are ready in the readiness map `ready`."""
        entry = self._selectors[found]
        members = self.selector_members(found)
        cached = entry.ready
        if cached is None or cached[0] != self._epoch or cached[1] is not ready:
            cached = entry.ready = (self._epoch, ready, frozenset(n for n in members if ready.get(n)))
        return cached[2]

    def selection_of(self, key: str) -> tuple[tuple[str, ...], ...]:
        """Per subset its member clusters in fill order (`placement_view.selected_clusters`)."""
        return self._selected(key)[1]

    def selected_of(self, key: str) -> frozenset[str]:
        """Every cluster in spread `key`'s selection (`selection_of`), as one set."""
        return self._selected(key)[2]

    def _selected(self, key: str) -> tuple[int, tuple[tuple[str, ...], ...], frozenset[str]]:
        cached = self._selection.get(key)
        if cached is not None and cached[0] == self._epoch:
            return cached
        selected: list[tuple[str, ...]] = []
        for subset, found in zip(self._spreads[key].spec.subsets, self.selector_keys[key], strict=True):
            if subset.clusters is not None:
                retired = self._decommissioned
                selected.append(tuple(n for n in subset.clusters if n not in retired))
            elif found is not None:
                selected.append(self.selector_members(found))
            else:
                selected.append(())
        every = frozenset(selected[0]) if len(selected) == 1 else frozenset().union(*selected)
        every = self._unions.setdefault(every, every)
        cached = self._selection[key] = (self._epoch, tuple(selected), every)
        return cached

    def selecting(self, name: str) -> set[str]:
        """Spreads whose subsets can select cluster `name`, or that have replicas placed there."""
        found = set(self._named.get(name, ()))
        labels = self.labels(name)
        for selector in self._selectors.values():
            if matching.label_selector_matches(selector.selector, labels):
                found |= selector.users
        found.update(key for key in self._placed_on.get(name, ()) if key in self._spreads)
        return found

    def occupying(self, name: str) -> frozenset[str]:
        """The spreads with replicas placed on cluster `name`."""
        return frozenset(key for key in self._placed_on.get(name, ()) if key in self._spreads)

    def index_placed(self, key: str, occupied: Occupancy) -> None:
        """Spread `key` now holds replicas where `occupied` says (empty: nowhere)."""
        before = self._occupied.pop(key, frozenset())
        after = frozenset(name for _subset, counts in occupied for name, _count in counts)
        if after:
            self._occupied[key] = after
        for name in before - after:
            users = self._placed_on.get(name)
            if users is not None:
                users.discard(key)
                if not users:
                    del self._placed_on[name]
        for name in after - before:
            self._placed_on.setdefault(name, set()).add(key)
