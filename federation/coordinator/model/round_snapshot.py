"""What the coordinator gives the round against one snapshot (`federation.core.placement_round`).

Why a module of its own: the rule is pure and speaks of pools and rooms; the coordinator keeps
its capacity as ledgers and cached member views (`member_views`). A round of several spreads
(`loop.recompute`) lifts the round's own pending pods out of the ledgers, so every request built
then is the snapshot's (the ledgers' pools, read lazily, are `settle`'s `Pools`); this module turns
an answer into what `settle` checks (`placed`: its charges, computed from the running pods the
request already carries and the profiles the World already has, so a shard returns only the
`Placement`), and a request's view into the view of the room a contended spread is placed again
against (`Rooms.view_in`): the members of the clusters that room charged are built again from their
pools with what their nodes hold there, every other member is kept as the snapshot built it
(readiness, cordon net of the spread's tolerations, the failover brake's hold). The view is the
one `placement_view.view_of` would build from the room (the two builders agree on a snapshot; here
only `requested` differs), so a spread placed again sees what the sequential rule shows it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from federation.api import quantity
from federation.coordinator.model import member_views
from federation.core import fit, placement, placement_round, placement_view


def placed(
    result: placement.Placement, *, running: Mapping[str, Mapping[str, int]] | None, plan: member_views.Plan,
) -> placement_round.Placed:
    """A spread's answer as the round checks it: its pending pods (placed minus `running`) per
    cluster, charged as the ledgers will charge them once it is stored."""
    return placement_round.Placed(
        result, placement_round.charges_of(result, running=running, profiles=plan.profiles), plan.profiles)


_State = tuple[Mapping[str, quantity.Nanos], ...]
"""Per node pool of a cluster, what each node holds requested."""


class Rooms:
    """The views of one round's contended spreads against the rooms they are placed again against.

    A member is built again only for a cluster the room charged; spreads with equal pods placed
    one after another mostly see the same charged state of a cluster (the fold copies a node's
    dict when it charges it, so an unchanged state is the very same dicts), and share its member:
    one is kept per cluster and kind of pods, with the state it was built on.
    """

    def __init__(self, pools: placement_round.Pools) -> None:
        self._pools = pools
        self._built: dict[tuple[str, int], tuple[_State, placement_view.Member]] = {}

    def view_in(
        self, view: placement_view.View, room: placement_view.Room, *, plan: member_views.Plan,
    ) -> placement_view.View:
        """`view` (a request's, built on the round's snapshot) as it is against `room`: the members
        whose nodes hold more there are built again from their pools (`member_of`), the others
        kept; the rooms of the members built again follow them."""
        pools = self._pools
        members = dict(view.members)
        changed: set[str] = set()
        for name, member in view.members.items():
            if name not in pools:  # a cluster that has reported no pools: nothing to charge there
                continue
            numbers, state = pools[name], tuple(room[name])
            if all(node is pool.requested or node == pool.requested
                   for node, pool in zip(state, numbers, strict=True)):
                continue
            members[name] = self._member(name, numbers, state, like=member, plan=plan)
            changed.add(name)
        if not changed:
            return view
        rooms = tuple(
            {name: members[name].room(index) if name in changed else found for name, found in rooms.items()}
            for index, rooms in enumerate(view.rooms))
        return dataclasses.replace(view, members=members, rooms=rooms)

    def _member(
        self, name: str, numbers: Sequence[fit.Pool], state: _State, *,
        like: placement_view.Member, plan: member_views.Plan,
    ) -> placement_view.Member:
        """Cluster `name` with its nodes holding `state`, for `plan`'s pods, as `like` (the
        snapshot's member: readiness, cordon and admitting pools) otherwise."""
        key = (name, plan.signature)
        cached = self._built.get(key)
        if cached is not None and len(cached[0]) == len(state) \
                and all(a is b for a, b in zip(cached[0], state, strict=True)):
            found = cached[1]
        else:
            found = placement_view.member_of(
                numbers, state, ready=like.ready, cordon=like.cordon, kinds=plan.kinds, admits=like.admits)
            self._built[key] = (state, found)
        if (found.ready, found.cordon, found.admits) != (like.ready, like.cordon, like.admits):
            found = found._replace(ready=like.ready, cordon=like.cordon, admits=like.admits)
        return found
