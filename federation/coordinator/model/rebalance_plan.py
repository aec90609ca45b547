"""The whole failback of a live spread, for `fedspread rebalance` and Explain.

Why apart from `rebalancing`: the plan needs the round's inputs (`loop.request_for`: the spread's
view with every other spread's pending pods charged, what runs, the marks), and `loop` imports the
World, which keeps the `rebalancing` book; this module sits above both. It reads only: asking the
World to make the plan happen is `Rebalancings.ask`, which the facade calls.
"""

from __future__ import annotations

import datetime

from federation.coordinator.model import loop
from federation.coordinator.model import world as world_model
from federation.core import failback, failback_round, placement

Plan = failback_round.Plan


def plan(world: world_model.World, key: str, *, now: datetime.datetime, max_surge: int | None = None,
         ) -> Plan | None:
    """Spread `key`'s whole failback on the world as it is (None: no such spread, or no target yet).
    A step in flight comes first, as it was started; the steps after it start from where it ends."""
    entry = world.spread(key)
    if entry is None or entry.replicas is None:
        return None
    request = loop.request_for(world, entry, replicas=entry.replicas, now=now)
    if request.view is None:
        return None
    inputs = request.inputs
    result = placement.place_view(entry.spec, replicas=entry.replicas, view=request.view,
                                  **inputs.place_args())
    current = result.counts()
    state = world.rebalancing.state(key)
    steps: list[tuple[failback.Move, ...]] = []
    if state is not None and state.in_flight is not None:
        steps.append(state.in_flight.moves)
        current = failback.after(current, steps)
    steps.extend(failback_round.whole(
        entry.spec, replicas=entry.replicas, view=request.view, current=current, now=now,
        running=inputs.running, marks=inputs.marks, waiting=inputs.waiting, max_surge=max_surge,
        remainder_phase=inputs.remainder_phase))
    return Plan(key=key, policy=entry.spec.rebalance.policy, steps=tuple(steps))
