"""The placement passes for a spread with `topologySpread` or floors: `skew_placement` on the passes' state.

Why a separate path: the closed-form passes (`placement_passes.add`, `division`) place a subset's
whole share at once, which cannot honour a skew between domains nor a later subset's floor. A spread
that sets neither field never comes here and places exactly as before. One that does keeps the
passes' bookkeeping — caps trimmed by `keep`, held replicas kept where they are (stability), the
capacity (`NodesLeft`) per subset and cluster, the Adaptive wait — and replaces two steps:

- the trimming of held replicas down to `replicas` (scale-down): floors kept, the spread kept;
- the adding of new replicas (scale-up): floors first, then one replica at a time under the
  constraints.

What no constraint admits stays unplaced, its subset's reasons naming the constraint; what only
capacity refuses waits as before (Adaptive), a floor that does not fit in its own subset.
"""

from __future__ import annotations

from federation.api import spread
from federation.core import division, floors, placement_passes, placement_view, skew_placement
from federation.core import topology_spread as ts
from federation.core.reasons import ReasonKind


def applies(spec: spread.FederatedSpreadSpec) -> bool:
    """The spread sets `topologySpread` or a floor: its placement takes this path."""
    return bool(spec.topology_spread) or any(s.min_replicas is not None for s in spec.subsets)


def constraints_of(spec: spread.FederatedSpreadSpec) -> list[ts.Constraint]:
    """The spec's constraints as the rules read them."""
    return [ts.Constraint(c.topology_key, c.max_skew, c.when_unsatisfiable, c.min_domains)
            for c in spec.topology_spread]


class _NodesLeftRoom:
    """The passes' nodes left (`placement_passes.NodesLeft`) per subset and cluster (simulate), or no
    bound (Fixed)."""

    def __init__(self, nodes_left: placement_passes.NodesLeft, *, simulate: bool) -> None:
        self._nodes_left = nodes_left
        self._simulate = simulate

    def left(self, index: int, cluster: str) -> int | None:
        return self._nodes_left.room(index, cluster) if self._simulate else None

    def take(self, index: int, cluster: str) -> None:
        self._nodes_left.take_for(index, cluster, 1)


def place(
    spec: spread.FederatedSpreadSpec,
    work: list[placement_passes.SubsetWork],
    *,
    replicas: int,
    view: placement_view.View,
    nodes_left: placement_passes.NodesLeft,
    simulate: bool,
) -> tuple[int, bool, int]:
    """Bring the subsets' held replicas to `replicas` under floors and constraints; return how many
    are left unplaced, whether a constraint (not capacity) refused them, and how many floor
    replicas wait for room in their own subset (capacity-exhausted, as `placement_passes.wait`)."""
    for item in work:
        item.capacity = sum(item.held.values()) + sum(nodes_left.rooms(item).values())
    caps = [item.cap for item in work]
    floor_counts = floors.subset_floors([s.min_replicas for s in spec.subsets], replicas, caps=caps)
    rules = [
        skew_placement.SubsetRule(
            item.spec.name, tuple(item.held), mode=item.spec.cluster_spread, cap=item.cap,
            floor=floor, usable=tuple(item.usable))
        for item, floor in zip(work, floor_counts, strict=True)
    ]
    members = {name for item in work for name in item.held}
    labels = {name: view.labels.get(name, {}) for name in members}
    current = {item.spec.name: dict(item.held) for item in work}
    result = skew_placement.plan(
        rules, replicas=replicas, constraints=constraints_of(spec), labels=labels,
        usable=sorted({name for item in work for name in item.usable}),
        room=_NodesLeftRoom(nodes_left, simulate=simulate), current=current)
    for item in work:
        counts = result.counts[item.spec.name]
        for name in item.held:
            after = counts.get(name, 0)
            if after < item.held[name]:
                item.held[name] = after
            else:
                item.added[name] = item.added.get(name, 0) + after - item.held[name]
        item.reasons.extend(result.reasons[item.spec.name])
    waited = 0
    for item in work:
        short = result.floor_waiting.get(item.spec.name, 0)
        if not short:
            continue
        placed = division.divide(
            short, mode=item.spec.cluster_spread, clusters=item.usable,
            held=item.held, room=dict.fromkeys(item.usable, None), weights={})
        for name, count in filter(placement_passes.COUNT, placed.items()):
            item.added[name] = item.added.get(name, 0) + count
            item.waiting_at[name] = item.waiting_at.get(name, 0) + count
        item.waiting += short
        waited += short
    paced = [reason for reason in result.unplaced_reasons if reason.kind is ReasonKind.PACED]
    if paced and work:
        work[0].reasons.extend(paced)
    refused = any(reason.kind is ReasonKind.TOPOLOGY_SPREAD for reason in result.unplaced_reasons)
    return result.unplaced, refused, waited
