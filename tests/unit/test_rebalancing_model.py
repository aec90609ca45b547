"""Failback in the coordinator's rounds (issue 28): the World, the loop and the status, with a clock.

A spread prefers dc1 (one 4-cpu node, full with its own pods) and overflows to aws; a node is
added to dc1. Under `spec.rebalance.policy: WhenRoom` the rounds move the replicas back surge
first — a pod above the total in dc1, one removed from aws once it is Ready — one step per
cooldown, and a step in flight survives a coordinator restart through the spread's status.
"""

from __future__ import annotations

import datetime

from federation.api import names
from federation.api import spread as spread_api
from federation.coordinator.model import loop, rebalancing, world
from federation.core import spread_status, status
from tests.support import builders
from tests.support.clock import ManualClock
from tests.support.failback_scene import FULL, KEY, NEW, overflowed, place, report, the_spread

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)


def condition(model: world.World, clock: ManualClock) -> tuple[str, str, str]:
    said = model.rebalancing.condition(KEY, previous=[], now=clock(), generation=1)
    assert said is not None
    return said.status, said.reason, said.message


def test_room_in_the_preferred_subset_moves_replicas_back_surge_first_one_step_per_cooldown() -> None:
    clock = ManualClock(T0)
    model = overflowed(clock, the_spread("WhenRoom", cooldown=60))
    assert condition(model, clock)[:2] == ("False", "NothingToMove")
    keys = model.inventory("dc1", [FULL, NEW])
    assert KEY in keys  # settled, but a WhenRoom spread waits for room
    assert place(model, keys, clock) == {"onprem": {"dc1": 5}, "cloud": {"aws": 2}}  # 1 above the total
    said = condition(model, clock)
    assert said[:2] == ("True", "Started") and "1 in onprem/dc1" in said[2] and "1 in cloud/aws" in said[2]
    clock.advance(5)
    assert place(model, report(model, dc1=4, aws=2, dc1_pending=1), clock) == {
        "onprem": {"dc1": 5}, "cloud": {"aws": 2}}  # the new pod is not Ready: aws keeps its pods
    assert condition(model, clock)[:2] == ("True", "WaitingForReady")
    assert place(model, report(model, dc1=5, aws=2), clock) == {"onprem": {"dc1": 5}, "cloud": {"aws": 1}}
    assert condition(model, clock)[:2] == ("True", "Finished")
    finished = clock()
    clock.advance(1)
    assert place(model, report(model, dc1=5, aws=1), clock) == {"onprem": {"dc1": 5}, "cloud": {"aws": 1}}
    assert condition(model, clock)[:2] == ("True", "Cooldown")  # one more to move, not yet
    assert KEY not in loop.due(model, since=finished, now=finished + datetime.timedelta(seconds=59))
    clock.advance(59)
    assert KEY in loop.due(model, since=finished + datetime.timedelta(seconds=59), now=clock())
    assert place(model, model.heartbeat("dc1") | model.heartbeat("aws"), clock) == {
        "onprem": {"dc1": 6}, "cloud": {"aws": 1}}
    assert place(model, report(model, dc1=6, aws=1), clock) == {"onprem": {"dc1": 6}, "cloud": {"aws": 0}}
    clock.advance(61)
    assert place(model, report(model, dc1=6, aws=0), clock) == {"onprem": {"dc1": 6}, "cloud": {"aws": 0}}
    assert condition(model, clock)[:2] == ("False", "NothingToMove")


def test_new_pods_not_ready_within_reschedule_critical_seconds_stop_the_step() -> None:
    clock = ManualClock(T0)
    model = overflowed(clock, the_spread("WhenRoom"))
    started = place(model, model.inventory("dc1", [FULL, NEW]), clock)
    assert started == {"onprem": {"dc1": 5}, "cloud": {"aws": 2}}
    clock.advance(31)  # rescheduleCriticalSeconds (30 by default) passed, the new pod still Pending
    assert KEY in loop.due(model, since=clock() - datetime.timedelta(seconds=2), now=clock())
    assert place(model, report(model, dc1=4, aws=2, dc1_pending=1), clock) == {
        "onprem": {"dc1": 4}, "cloud": {"aws": 2}}
    status_, reason, message = condition(model, clock)
    assert (status_, reason) == ("False", "NotReadyInTime") and "onprem/dc1" in message
    recorded = model.rebalancing.status_of(KEY)
    assert recorded is not None and recorded.last_outcome == "Stopped"  # (its Event: RebalanceStopped)
    stopped, second = clock(), datetime.timedelta(seconds=1)
    cooldown = datetime.timedelta(seconds=60)  # a stopped step counts as a move: the next try after it
    assert KEY not in loop.due(model, since=stopped, now=stopped + cooldown - second)
    assert KEY in loop.due(model, since=stopped + cooldown - second, now=stopped + cooldown)


def test_a_step_never_takes_ready_pods_below_replicas() -> None:
    """The new pod is Ready but one of aws's is not: removing one would leave 5 Ready of 6."""
    clock = ManualClock(T0)
    model = overflowed(clock, the_spread("WhenRoom"))
    place(model, model.inventory("dc1", [FULL, NEW]), clock)
    keys = model.pod_counts("dc1", {KEY: {"onprem": status.ClusterPods(running=5, ready=5)}})
    keys |= model.pod_counts("aws", {KEY: {"cloud": status.ClusterPods(running=2, ready=1)}})
    assert place(model, keys, clock) == {"onprem": {"dc1": 5}, "cloud": {"aws": 2}}
    assert condition(model, clock)[:2] == ("True", "NotReady")


def test_a_never_spread_moves_nothing_and_has_no_rebalancing_condition() -> None:
    clock = ManualClock(T0)
    model = overflowed(clock, the_spread("Never"))
    keys = model.inventory("dc1", [FULL, NEW])
    assert place(model, keys, clock) == {"onprem": {"dc1": 4}, "cloud": {"aws": 2}}
    assert model.rebalancing.condition(KEY, previous=[], now=clock(), generation=1) is None
    assert model.rebalancing.status_of(KEY) is None


def test_a_step_in_flight_survives_a_coordinator_restart_through_the_status() -> None:
    clock = ManualClock(T0)
    item = the_spread("WhenRoom")
    before = overflowed(clock, item)
    place(before, before.inventory("dc1", [FULL, NEW]), clock)
    written = spread_status.spread_status(placement=before.placements[KEY], spec=item.spec, generation=1,
                                          reports={}, marks=[], previous=None, now=clock())
    written = before.rebalancing.annotated(KEY, written, previous=None, now=clock(), generation=1)
    assert written.rebalancing is not None and written.rebalancing.step is not None
    assert [c.reason for c in written.conditions if c.type == rebalancing.CONDITION] == ["Started"]
    stored = spread_api.FederatedSpreadStatus.model_validate(written.model_dump(mode="json", by_alias=True))

    clock.advance(10)  # the coordinator restarts; the surge pod became Ready meanwhile
    after = world.World(clock, grace_from=clock())
    for name, pools in {"dc1": [FULL, NEW], "aws": [builders.node_pool(2)]}.items():
        after.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        after.inventory(name, pools)
        after.heartbeat(name)
    after.upsert_spread(item.model_copy(update={"status": stored}))
    after.set_target(KEY, replicas=6, template=builders.deployment("web", namespace="shop", cpu="1"))
    assert after.current_for(KEY) == {"onprem": {"dc1": 5}, "cloud": {"aws": 2}}
    assert place(after, report(after, dc1=5, aws=2), clock) == {"onprem": {"dc1": 5}, "cloud": {"aws": 1}}
    assert condition(after, clock)[:2] == ("True", "Finished")
    recorded = after.rebalancing.status_of(KEY)
    assert recorded is not None and recorded.step is None and recorded.last_move == clock()
    assert recorded.last_outcome == "Finished"
