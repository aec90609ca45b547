"""What the coordinator gives the round against one snapshot (`federation.core.placement_round`).

Why a module of its own: the rule is pure and speaks of pools and rooms; the coordinator keeps
its capacity as ledgers and cached member views (`member_views`). A round of several spreads
(`loop.recompute`) lifts the round's own pending pods out of the ledgers, so every request built
then is the snapshot's (the ledgers' pools, read lazily, are `settle`'s `Pools`); this module turns
an answer into what `settle` checks (`placed`: its charges, computed from the running pods the
request already carries and the profiles the World already has, so a shard returns only the
`Placement`), and a request's view into the view of the room a contended spread is placed again
against (`view_in`): the members of the clusters that room charged are built again from their
pools with what their nodes hold there, every other member is kept as the snapshot built it
(readiness, cordon net of the spread's tolerations, the failover brake's hold). The view is the
one `placement_view.view_of` would build from the room (the two builders agree on a snapshot; here
only `requested` differs), so a spread placed again sees what the sequential rule shows it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from federation.coordinator.model import member_views
from federation.core import placement, placement_round, placement_view


def placed(
    result: placement.Placement, *, running: Mapping[str, Mapping[str, int]] | None, plan: member_views.Plan,
) -> placement_round.Placed:
    """A spread's answer as the round checks it: its pending pods (placed minus `running`) per
    cluster, charged as the ledgers will charge them once it is stored."""
    return placement_round.Placed(
        result, placement_round.charges_of(result, running=running, profiles=plan.profiles), plan.profiles)


def view_in(
    view: placement_view.View, room: placement_view.Room, *, pools: placement_round.Pools,
    plan: member_views.Plan,
) -> placement_view.View:
    """`view` (a request's, built on the round's snapshot `pools`) as it is against `room`: the
    members whose nodes hold more there are built again from their pools (`member_of`), the
    others kept; the rooms of the members built again follow them."""
    members = dict(view.members)
    changed: set[str] = set()
    for name, member in view.members.items():
        if name not in pools:  # a cluster that has reported no pools: nothing to charge there
            continue
        numbers, state = pools[name], room[name]
        if all(node is pool.requested or node == pool.requested
               for node, pool in zip(state, numbers, strict=True)):
            continue
        members[name] = placement_view.member_of(
            numbers, state, ready=member.ready, cordon=member.cordon, kinds=plan.kinds, admits=member.admits)
        changed.add(name)
    if not changed:
        return view
    rooms = tuple(
        {name: members[name].room(index) if name in changed else found for name, found in rooms.items()}
        for index, rooms in enumerate(view.rooms))
    return dataclasses.replace(view, members=members, rooms=rooms)
