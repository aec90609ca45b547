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
from collections.abc import Mapping

from federation.coordinator.model import pending_charges
from federation.core import placement, placement_round, placement_view, round_check


def placed(
    result: placement.Placement, *, running: Mapping[str, Mapping[str, int]] | None,
    plan: pending_charges.Plan, deferred: bool = False,
) -> placement_round.Placed:
    """A spread's answer as the round checks it: its pending pods (placed minus `running`) per
    cluster, charged as the ledgers will charge them once it is stored. `deferred`: computed only
    if read (`placement_round.DeferredCharges`), for a round checked on the shards of clusters."""
    if deferred:
        return placement_round.Placed(
            result, placement_round.DeferredCharges(result, running=running, profiles=plan.profiles),
            plan.profiles)
    return placement_round.Placed(
        result, placement_round.charges_of(result, running=running, profiles=plan.profiles), plan.profiles)


class Rooms:
    """The views of one round's contended spreads against the rooms they are placed again against.

    A member is built again only for a cluster the room charged (`FoldedRoom.stamp`), and once per
    state and kind of pods: spreads placed one after another mostly see a cluster as the same
    charge left it, and share its member.
    """

    def __init__(self, pools: placement_round.Pools) -> None:
        self._pools = pools
        self._built: dict[tuple[str, int], tuple[object, int, placement_view.Member]] = {}

    def view_in(
        self, view: placement_view.View, room: placement_view.Room, *, plan: pending_charges.Plan,
    ) -> placement_view.View:
        """`view` (a request's, built on the round's snapshot) as it is against `room`: the members
        whose nodes hold more there are built again from their pools (`member_of`), the others
        kept; the rooms of the members built again follow them. `room` is one `settle` gives
        (a `FoldedRoom`: TypeError otherwise)."""
        if not isinstance(room, round_check.FoldedRoom):
            raise TypeError(f"a room from placement_round.settle was expected, not {type(room).__name__}")
        members = dict(view.members)
        changed: set[str] = set()
        for name, member in view.members.items():
            found = self._member(name, room, like=member, plan=plan)
            if found is not None:
                members[name] = found
                changed.add(name)
        if not changed:
            return view
        rooms = tuple(
            {name: members[name].room(index) if name in changed else found for name, found in rooms.items()}
            for index, rooms in enumerate(view.rooms))
        return dataclasses.replace(view, members=members, rooms=rooms)

    def _member(
        self, name: str, room: round_check.FoldedRoom, *, like: placement_view.Member,
        plan: pending_charges.Plan,
    ) -> placement_view.Member | None:
        """Cluster `name` as `room` has it, for `plan`'s pods, as `like` (the snapshot's member:
        readiness, cordon and admitting pools) otherwise; None where the room is the snapshot's."""
        stamp = room.stamp(name)
        if not stamp:
            return None
        cached = self._built.get((name, plan.signature))
        if cached is not None and cached[0] is room.source and cached[1] == stamp:
            found = cached[2]
        else:
            found = placement_view.member_of(self._pools[name], room[name], ready=like.ready,
                                             cordon=like.cordon, kinds=plan.kinds, admits=like.admits)
            self._built[(name, plan.signature)] = (room.source, stamp, found)
        if (found.ready, found.cordon, found.admits) != (like.ready, like.cordon, like.admits):
            found = found._replace(ready=like.ready, cordon=like.cordon, admits=like.admits)
        return found
