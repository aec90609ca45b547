"""The failover brake: a partition on the coordinator's side moves no replica and deletes no pod.

The rule (`federation.core.brake`) is checked as a table; then the coordinator's loop plays the
partition that used to move every replica — three clusters of four replicas each, every agent
silent past clusterLostSeconds, the agents returning one by one — and must keep 4/4/4 at every
step, never send a quota below what a cluster holds, and say `FailoverSuspended` meanwhile. A real
loss (one cluster of three) still fails over, and a cluster that stays silent after the brake lifts
fails over one clusterLostSeconds later.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from federation.api import names
from federation.coordinator.model import loop, world
from federation.coordinator.wire import assignments
from federation.core import brake, spread_status
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
KEY = "shop/web"
LOST_SECONDS = 60
CLUSTERS = ("aws", "dc1", "gcp")
REGION = [{"name": "eu", "clusterSpread": "Balance",
           "clusterSelector": {"matchLabels": {names.REGION_LABEL: "eu"}}}]


# --- the rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("selectable", "lost", "heard", "suspended"), [
    pytest.param(3, 0, True, False, id="none-lost"),
    pytest.param(3, 1, True, False, id="one-of-three-is-a-real-loss"),
    pytest.param(2, 1, True, False, id="half-is-not-more-than-half"),
    pytest.param(3, 2, True, True, id="two-of-three"),
    pytest.param(1, 1, True, True, id="the-only-cluster"),
    pytest.param(10, 1, False, True, id="no-agent-heard-at-all"),
    pytest.param(10, 0, False, False, id="nothing-lost-nothing-to-keep"),
])
def test_the_brake_holds_when_more_than_half_are_lost_or_nobody_is_heard(
        selectable: int, lost: int, heard: bool, suspended: bool) -> None:
    assert brake.suspends(selectable=selectable, lost=lost, heard_from_any=heard) is suspended


def test_after_lifting_the_still_silent_clusters_get_one_more_grace() -> None:
    grace = datetime.timedelta(seconds=LOST_SECONDS)
    every = frozenset(CLUSTERS)
    held = brake.next_state(None, selectable=every, lost=every, heard_from_any=False, now=T0, grace=grace)
    assert held is not None and held.suspended and held.clusters == every
    later = T0 + datetime.timedelta(seconds=5)
    lifted = brake.next_state(held, selectable=every, lost={"gcp"}, heard_from_any=True,
                              now=later, grace=grace)
    assert lifted is not None and not lifted.suspended and lifted.clusters == {"gcp"}
    assert lifted.grace_ends(grace) == later + grace
    still = brake.next_state(lifted, selectable=every, lost={"gcp"}, heard_from_any=True,
                             now=later + grace, grace=grace)
    assert still == lifted
    assert brake.next_state(lifted, selectable=every, lost={"gcp"}, heard_from_any=True,
                            now=later + grace + datetime.timedelta(seconds=1), grace=grace) is None
    assert brake.next_state(lifted, selectable=every, lost=(), heard_from_any=True,
                            now=later, grace=grace) is None


# --- the coordinator's loop ----------------------------------------------------------------------


def balanced_world(clock: ManualClock) -> world.World:
    """Three clusters, one spread of 12 balanced 4/4/4, every agent heard now."""
    model = world.World(clock)
    for name in CLUSTERS:
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    keys = model.upsert_spread(builders.federated_spread(subsets=REGION, lost_seconds=LOST_SECONDS))
    keys |= model.set_target(KEY, replicas=12, template=builders.deployment(namespace="shop"))
    loop.recompute(model, keys, now=clock())
    assert model.placements[KEY].clusters == {"aws": 4, "dc1": 4, "gcp": 4}
    return model


def partitioned_world(clock: ManualClock) -> world.World:
    """The balanced world, then every agent silent past the limit."""
    model = balanced_world(clock)
    clock.advance(LOST_SECONDS + 1)
    return model


def quotas(model: world.World, clock: ManualClock) -> dict[str, int]:
    """What each cluster's agent would be told to run."""
    entry = model.spread(KEY)
    assert entry is not None
    sent: dict[str, Any] = assignments.for_clusters(entry, model.placements[KEY], marks=(), now=clock())
    return {name: sum(rule.quota for rule in message.subsets) for name, message in sent.items()}


def tick(model: world.World, clock: ManualClock) -> None:
    loop.recompute(model, loop.failover(model).keys, now=clock())


def come_back(model: world.World, clock: ManualClock, name: str) -> None:
    keys = model.heartbeat(name)
    loop.recompute(model, keys | loop.failover(model).keys, now=clock())


def condition(model: world.World, clock: ManualClock) -> tuple[str, str] | None:
    entry = model.spread(KEY)
    assert entry is not None
    shown = spread_status.spread_status(
        placement=model.placements[KEY], spec=entry.spec, generation=1, reports={}, marks=(),
        previous=None, now=clock(), failover=model.brakes.state(KEY), selectable=len(CLUSTERS))
    found = [c for c in shown.conditions if c.type == brake.CONDITION]
    return (found[0].status, found[0].message) if found else None


def test_a_partition_of_the_coordinator_moves_nothing_while_agents_return_one_by_one() -> None:
    clock = ManualClock(T0)
    model = partitioned_world(clock)
    tick(model, clock)
    assert model.placements[KEY].clusters == {"aws": 4, "dc1": 4, "gcp": 4}
    state = condition(model, clock)
    assert state is not None and state[0] == "True" and "aws, dc1, gcp" in state[1]
    for name in CLUSTERS:
        clock.advance(2)
        come_back(model, clock, name)
        tick(model, clock)
        assert model.placements[KEY].clusters == {"aws": 4, "dc1": 4, "gcp": 4}, name
        assert quotas(model, clock) == {"aws": 4, "dc1": 4, "gcp": 4}, name
    assert model.brakes.state(KEY) is None
    clock.advance(LOST_SECONDS + 30)  # the last agent back in time: nothing is due later either
    for name in CLUSTERS:
        model.heartbeat(name)
    tick(model, clock)
    assert model.placements[KEY].clusters == {"aws": 4, "dc1": 4, "gcp": 4}


def test_a_cluster_still_silent_after_the_brake_lifts_fails_over_one_grace_later() -> None:
    clock = ManualClock(T0)
    model = partitioned_world(clock)
    tick(model, clock)
    for name in ("aws", "dc1"):
        clock.advance(1)
        come_back(model, clock, name)
    state = model.brakes.state(KEY)
    assert state is not None and not state.suspended and state.clusters == {"gcp"}
    assert model.placements[KEY].clusters == {"aws": 4, "dc1": 4, "gcp": 4}
    lifted = condition(model, clock)
    assert lifted is not None and lifted[0] == "False"
    clock.advance(LOST_SECONDS)
    for name in ("aws", "dc1"):
        model.heartbeat(name)
    tick(model, clock)
    assert model.placements[KEY].clusters == {"aws": 4, "dc1": 4, "gcp": 4}  # at the limit: not yet
    clock.advance(1)
    for name in ("aws", "dc1"):
        model.heartbeat(name)
    tick(model, clock)
    assert model.placements[KEY].clusters == {"aws": 6, "dc1": 6, "gcp": 0}
    assert model.brakes.state(KEY) is None


def test_one_lost_cluster_of_three_is_a_real_loss_and_fails_over() -> None:
    clock = ManualClock(T0)
    model = partitioned_world(clock)
    for name in ("aws", "dc1"):
        model.heartbeat(name)
    tick(model, clock)
    assert model.placements[KEY].clusters == {"aws": 6, "dc1": 6, "gcp": 0}
    assert model.brakes.state(KEY) is None
    assert condition(model, clock) is None


# --- the federation's failover rate limit --------------------------------------------------------

SIX = ("c1", "c2", "c3", "c4", "c5", "c6")


def six_cluster_world(clock: ManualClock, *, per_minute: int | None) -> world.World:
    """Six clusters of 2 replicas each, then c1 and c2 silent past the limit (a third: no brake)."""
    model = world.World(clock, failover_per_minute=per_minute)
    for name in SIX:
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    keys = model.upsert_spread(builders.federated_spread(subsets=REGION, lost_seconds=LOST_SECONDS))
    keys |= model.set_target(KEY, replicas=12, template=builders.deployment(namespace="shop"))
    loop.recompute(model, keys, now=clock())
    assert model.placements[KEY].clusters == dict.fromkeys(SIX, 2)
    clock.advance(LOST_SECONDS + 1)
    for name in SIX[2:]:
        model.heartbeat(name)
    return model


def test_without_a_rate_limit_every_lost_cluster_fails_over_at_once() -> None:
    clock = ManualClock(T0)
    model = six_cluster_world(clock, per_minute=None)
    tick(model, clock)
    assert model.placements[KEY].clusters == {"c1": 0, "c2": 0, "c3": 3, "c4": 3, "c5": 3, "c6": 3}


def test_the_rate_limit_fails_clusters_over_one_budget_at_a_time() -> None:
    clock = ManualClock(T0)
    model = six_cluster_world(clock, per_minute=1)
    tick(model, clock)
    first = model.placements[KEY].clusters
    assert first["c1"] == 0 and first["c2"] == 2 and sum(first.values()) == 12, first  # c2 waits, keeps 2
    assert sorted(first[name] for name in SIX[2:]) == [2, 2, 3, 3], first  # c1's 2 went to heard clusters
    clock.advance(30)
    for name in SIX[2:]:
        model.heartbeat(name)
    tick(model, clock)
    assert model.placements[KEY].clusters == first  # the minute's budget is spent
    clock.advance(31)
    for name in SIX[2:]:
        model.heartbeat(name)
    tick(model, clock)
    assert model.placements[KEY].clusters == {"c1": 0, "c2": 0, "c3": 3, "c4": 3, "c5": 3, "c6": 3}


def test_a_cluster_heard_again_leaves_the_rate_limit() -> None:
    clock = ManualClock(T0)
    model = six_cluster_world(clock, per_minute=1)
    tick(model, clock)
    come_back(model, clock, "c2")  # it was waiting for the budget, with its replicas: nothing moved
    tick(model, clock)
    placed = model.placements[KEY].clusters
    assert placed["c2"] == 2 and placed["c1"] == 0, placed
    assert not model.failover_limit.has_budget(clock())


def test_clusters_falling_silent_a_few_seconds_apart_are_judged_together() -> None:
    """A partition cuts agents off a heartbeat apart: the first declared lost must not be failed
    over alone while the next one is already silent for most of the limit."""
    clock = ManualClock(T0)
    model = balanced_world(clock)  # every agent heard at T0
    clock.advance(3)
    model.heartbeat("dc1")  # dc1 is cut off 3 s after aws
    clock.advance(LOST_SECONDS - 2)  # aws is lost, dc1 has been silent for most of the limit
    model.heartbeat("gcp")
    tick(model, clock)
    assert model.placements[KEY].clusters == {"aws": 4, "dc1": 4, "gcp": 4}
    state = model.brakes.state(KEY)
    assert state is not None and state.suspended and state.clusters == {"aws"}, state
    clock.advance(5)
    model.heartbeat("gcp")
    tick(model, clock)
    assert model.placements[KEY].clusters == {"aws": 4, "dc1": 4, "gcp": 4}
    state = model.brakes.state(KEY)
    assert state is not None and state.clusters == {"aws", "dc1"}, state
