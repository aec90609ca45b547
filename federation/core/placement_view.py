"""What one placement reads of the federation: a `View` of the clusters its spread can select.

Why a module of its own: a view has two builders that must agree exactly. `view_of` builds it from
a capacity snapshot (`fedspread simulate`, the SDK's what-if, the benchmarks); the coordinator
builds the same view from what it keeps per cluster (parsed pools, other spreads' pending pods
already charged, `coordinator/model/member_views.py`), so that a spread costs the clusters it can
use, not every cluster of the federation; a unit test compares the two on random worlds. That
builder needs the types, the subset selection and the room arithmetic, not the rules, so they live
here, apart from the keep/add/wait passes that read them.

A view holds, per selected cluster, its readiness, its cordon (net of the spec's
clusterTolerations) and, per kind of this spread's pods (subsets whose patched pods request the
same), the free pod slots per node pool; `holding` and
`braked` adjust a view for the failover brake (lost clusters keep their replicas, take no new ones).
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from collections.abc import Collection, Mapping, Sequence

from federation.api import cluster, quantity, spread
from federation.core import brake, fit, matching


def selected_clusters(subset: spread.Subset, snapshot: cluster.CapacitySnapshot) -> list[str]:
    """The clusters a subset names, in fill order: as listed, else matching ones by name; never a
    decommissioned one (it leaves every spread's selection)."""
    if subset.clusters is not None:
        retired = {c.name for c in snapshot.clusters if c.decommissioned}
        return [name for name in subset.clusters if name not in retired]
    selector = subset.cluster_selector
    if selector is None:
        return []
    return sorted(c.name for c in snapshot.clusters
                  if not c.decommissioned and matching.label_selector_matches(selector, c.labels))


class Limits:
    """Per pod kind, per node pool: the resource bounding what one node takes (`fit.binding`),
    worked out when first read.

    Why lazy: only a capacity reason reads it (a subset short of room), while member views are
    rebuilt for every spread whenever a cluster is touched; so a view keeps the per-node numbers it
    was built from (never changed afterwards) and names the resources only when asked. Two are
    equal when they name the same resources (views built from a snapshot and from the ledgers hold
    the same numbers in different objects).
    """

    __slots__ = ("_allocatable", "_found", "_kinds", "_requested")

    def __init__(
        self, allocatable: Sequence[Mapping[str, quantity.Nanos]],
        requested: Sequence[Mapping[str, quantity.Nanos]], kinds: Sequence[fit.Requests],
    ) -> None:
        self._allocatable = allocatable
        self._requested = requested
        """Per pool, what each node holds requested: read only, its owner never changes it."""
        self._kinds = kinds
        self._found: tuple[tuple[str, ...], ...] | None = None

    def value(self) -> tuple[tuple[str, ...], ...]:
        """Per kind, per pool, the binding resource."""
        found = self._found
        if found is None:
            pools = list(zip(self._allocatable, self._requested, strict=True))
            found = self._found = tuple(
                tuple(fit.binding(allocatable, node, k) for allocatable, node in pools) for k in self._kinds)
        return found

    def __getitem__(self, kind: int) -> tuple[str, ...]:
        return self.value()[kind]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Limits) and (other is self or self.value() == other.value())

    def __hash__(self) -> int:
        return hash(self.value())

    def __repr__(self) -> str:
        return f"Limits({self.value()!r})"

    def __reduce__(self) -> tuple[typing.Any, ...]:
        return Limits, (self._allocatable, self._requested, self._kinds)


class Member(typing.NamedTuple):
    """A selected cluster as one spread's placement sees it (a tuple: views hold thousands)."""

    ready: bool
    cordon: cluster.Cordon
    """The cluster taints' cordon: none (""), "NoSchedule" (keeps what it holds, takes nothing new)
    or "NoExecute" (holds nothing)."""
    slots: tuple[tuple[int, ...], ...]
    """Per pod kind of the spread (`kinds`), per node pool: how many more pods of that kind fit in
    the pool (its nodes times what one node takes), other spreads' pending pods charged."""
    admits: tuple[tuple[int, ...], ...]
    """Per subset in spec order, the pools (with nodes) whose nodes admit that subset's pods."""
    kinds: tuple[int, ...]
    """Per subset in spec order, the number of its pods' kind (`fit.kinds`: equal requests, one kind)."""
    nodes: tuple[int, ...]
    """Per node pool, its nodes."""
    limits: Limits
    """Per pod kind, per node pool: the resource bounding what one node takes (`fit.binding`)."""

    def room(self, subset: int) -> int:
        """How many more pods of subset number `subset` fit here, before anything is placed."""
        admitted = self.admits[subset]
        if not admitted:
            return 0
        slots = self.slots[self.kinds[subset]]
        if len(admitted) == 1:
            return slots[admitted[0]]
        return sum(slots[i] for i in admitted)

    def limit(self, subset: int) -> str:
        """What bounds subset number `subset` here: the resources of its admitting pools, or why no
        node admits its pods."""
        admitted = self.admits[subset]
        if not admitted:
            return "no node admits its pods"
        limits = self.limits[self.kinds[subset]]
        return ", ".join(dict.fromkeys(limits[i] for i in admitted))


def member_of(
    pools: Sequence[fit.Pool], requested: Sequence[Mapping[str, quantity.Nanos]], *, ready: bool,
    cordon: cluster.Cordon, kinds: tuple[tuple[fit.Requests, ...], tuple[int, ...]],
    admits: tuple[tuple[int, ...], ...],
) -> Member:
    """A member from its pools in numbers (`requested`: what each pool's nodes hold, charges included)."""
    distinct, numbers = kinds
    return Member(
        ready, cordon,
        tuple(tuple(fit.slots(p, r, k) for p, r in zip(pools, requested, strict=True)) for k in distinct),
        admits, numbers, tuple(p.count for p in pools),
        Limits([p.allocatable for p in pools], requested, distinct),
    )


@dataclasses.dataclass(frozen=True)
class View:
    """What a placement reads of a snapshot, for one spec and pod shape."""

    names: tuple[str, ...]
    """The clusters the placement's `clusters` lists: every snapshot cluster, in snapshot order,
    for `view_of` (`simulate`); the selectable ones for the coordinator's views."""
    selected: tuple[tuple[str, ...], ...]
    """Per subset in spec order, its member clusters in fill order (`selected_clusters`)."""
    members: Mapping[str, Member]
    """Every selected cluster that is in the snapshot."""
    rooms: tuple[Mapping[str, int], ...]
    """Per subset, `Member.room` of each of its members in the snapshot, in fill order (`rooms_of`)."""
    labels: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    """The MemberCluster labels of the members (their topology domains): filled only for a spec
    with `topologySpread`, the one reader (`placement_topology`)."""


def rooms_of(selected: Sequence[Sequence[str]], members: Mapping[str, Member]) -> tuple[dict[str, int], ...]:
    """Per subset, the room of each selected member before anything is placed."""
    return tuple(
        {name: members[name].room(index) for name in names if name in members}
        for index, names in enumerate(selected)
    )


def holding(view: View, names: Collection[str]) -> View:
    """`view` with lost clusters `names` keeping their replicas but taking no new ones, as under a
    NoSchedule cordon (the failover brake holds, or their failover waits for the rate limit)."""
    if not any(name in view.members and not view.members[name].ready for name in names):
        return view
    members = dict(view.members)
    for name in names:
        member = members.get(name)
        if member is not None and not member.ready:
            cordon: cluster.Cordon = member.cordon or "NoSchedule"
            members[name] = member._replace(ready=True, cordon=cordon)
    return dataclasses.replace(view, members=members)


def braked(view: View, *, heard_from_any: bool) -> View:
    """`view` under the failover brake, judged on this one view (what-ifs: no history): when more
    than half of the selectable clusters are unready, or none is ready anywhere, they keep their
    replicas and take no new ones. The coordinator keeps the brake's state across placements."""
    selectable = {name for names in view.selected for name in names if name in view.members}
    lost = [name for name in selectable if not view.members[name].ready]
    if brake.suspends(selectable=len(selectable), lost=len(lost), heard_from_any=heard_from_any):
        return holding(view, lost)
    return view


Room = Mapping[str, Sequence[Mapping[str, quantity.Nanos]]]
"""Per cluster, per node pool in the snapshot's order: what each node holds requested (a snapshot
with pending pods charged, `placement_round`)."""


def view_of(
    spec: spread.FederatedSpreadSpec, *, snapshot: cluster.CapacitySnapshot, shape: fit.PodShape,
    now: datetime.datetime | None = None, room: Room | None = None,
) -> View:
    """The view of `snapshot` for `spec`'s subsets and pods of `shape` (cordons net of the spec's
    clusterTolerations at `now`: a timed one no longer tolerates past its end). `room`, given,
    says what the nodes of the clusters it names hold instead of what their pools report."""
    clusters = snapshot.by_name()
    shapes = [fit.with_subset(shape, subset) for subset in spec.subsets]
    kinds = fit.kinds([fit.requests_of(s) for s in shapes])
    selected = tuple(tuple(selected_clusters(subset, snapshot)) for subset in spec.subsets)
    tolerations = spec.cluster_tolerations
    members: dict[str, Member] = {}
    for names in selected:
        for name in names:
            found = clusters.get(name)
            if found is None or name in members:
                continue
            pools = [fit.pool_of(p) for p in found.node_pools]
            requested = room.get(name) if room is not None else None
            members[name] = member_of(
                pools, [p.requested for p in pools] if requested is None else requested, ready=found.ready,
                cordon=cluster.cordon_of(found.taints, tolerations=tolerations, now=now), kinds=kinds,
                admits=tuple(fit.admitting(pools, s) for s in shapes),
            )
    labels = {name: dict(clusters[name].labels) for name in members} if spec.topology_spread else {}
    return View(
        names=tuple(c.name for c in snapshot.clusters), selected=selected, members=members,
        rooms=rooms_of(selected, members), labels=labels,
    )
