"""Queries are pure: Explain, Simulate and building a placement request change nothing.

The failover brake and the federation's failover rate limit are decided while a request is built
(`loop.brake_decision`), but only the placement round commits them (`loop.brake_for`, once per
spread placed). Before this rule, one `Explain` call admitted a lost cluster to failover and spent
the minute's budget (issue 23, case 7).

Each test builds a world where answering the question would move something — clusters lost, a
rate limit of one cluster a minute, a brake about to hold — asks it, and compares every fact the
round decides from (brakes, rate-limit budget and waiting set, placements, marks, recorded
placements) before and after. Then a round runs on the questioned world and on an identical twin
that was never asked: they decide the same.
"""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from federation.api import names
from federation.coordinator import facade
from federation.coordinator.model import loop, world
from federation.coordinator.services import source
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
KEY = "shop/web"
LOST_SECONDS = 60
SIX = ("c1", "c2", "c3", "c4", "c5", "c6")
REGION = [{"name": "eu", "clusterSpread": "Balance",
           "clusterSelector": {"matchLabels": {names.REGION_LABEL: "eu"}}}]


def lost_world(clock: ManualClock, *, lost: tuple[str, ...], per_minute: int | None) -> world.World:
    """Six clusters of 2 replicas each; then the clusters `lost` silent past the limit, the others
    heard. Nothing placed since: the next question or round is the first to see the loss."""
    model = world.World(clock, failover_per_minute=per_minute)
    for name in SIX:
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    keys = model.upsert_spread(builders.federated_spread(subsets=REGION, lost_seconds=LOST_SECONDS))
    keys |= model.set_target(KEY, replicas=12, template=builders.deployment(namespace="shop"))
    loop.recompute(model, keys, now=clock())
    model.unschedulable("c3", spread=KEY, subset="eu", since=clock())
    clock.advance(LOST_SECONDS + 1)
    for name in SIX:
        if name not in lost:
            model.heartbeat(name)
    return model


def state_of(thing: object) -> dict[str, Any]:
    """An object's attributes, less methods a test wrapped on it."""
    return {name: value for name, value in vars(thing).items() if not callable(value)}


def facts(model: world.World) -> dict[str, Any]:
    """Everything a round decides from or commits, as plain comparable data."""
    return copy.deepcopy({
        "brakes": state_of(model.brakes),
        "rate_limit": state_of(model.failover_limit),
        "placements": dict(model.placements),
        "placed_ready": dict(model.placed_ready),
        "seeded": dict(model.seeded),
        "marks": dict(model._marks._since),  # (the per-spread index beside it is a cache)
        "refusals": dict(model.lifecycle.refusals()),
    })


SCENES = [
    pytest.param(("c1", "c2"), 1, id="two-lost-one-admitted-a-minute"),
    pytest.param(("c1",), 1, id="one-lost-admitted-at-once"),
    pytest.param(("c1", "c2", "c3", "c4"), 1, id="most-lost-the-brake-would-hold"),
]


def ask_everything(model: world.World, clock: ManualClock) -> None:
    """Explain and Simulate through the PlacementService's source, and the loop's request."""
    coordinator = facade.Coordinator(model, clock=clock, coordinator_id="t")
    asked = source.WorldSource(coordinator)
    for _ in range(3):
        assert asked.explained(KEY) is not None
        entry = model.spread(KEY)
        assert entry is not None
        asked.simulate(entry.spec, replicas=20, template=builders.deployment(namespace="shop"), snapshot=None)
        loop.request_for(model, entry, replicas=12, now=clock())
        loop.place_one(model, entry, replicas=12, now=clock())
        loop.brake_decision(model, entry, now=clock())


@pytest.mark.parametrize(("lost", "per_minute"), SCENES)
def test_explain_simulate_and_requests_leave_the_world_unchanged(
        lost: tuple[str, ...], per_minute: int | None) -> None:
    clock = ManualClock(T0)
    model = lost_world(clock, lost=lost, per_minute=per_minute)
    before = facts(model)
    ask_everything(model, clock)
    assert facts(model) == before


@pytest.mark.parametrize(("lost", "per_minute"), SCENES)
def test_the_round_decides_the_same_whether_or_not_it_was_asked_first(
        lost: tuple[str, ...], per_minute: int | None) -> None:
    """Asked 30 s before the round, a committing question would have started the budget's minute
    early: 40 s after the round, the asked world would fail the second lost cluster over while the
    quiet one still waits."""
    clocks = ManualClock(T0), ManualClock(T0)
    asked, quiet = (lost_world(clock, lost=lost, per_minute=per_minute) for clock in clocks)
    ask_everything(asked, clocks[0])
    for seconds in (30, 40):
        for model, clock in zip((asked, quiet), clocks, strict=True):
            clock.advance(seconds)
            for name in set(SIX) - set(lost):
                model.heartbeat(name)
            loop.recompute(model, {KEY} | loop.failover(model).keys, now=clock())
        assert facts(asked) == facts(quiet)


def test_the_round_commits_what_a_question_only_decides() -> None:
    """The question's answer is what the round then commits: the decision is the same, only the
    round keeps it (one cluster admitted, one waiting, the budget spent)."""
    clock = ManualClock(T0)
    model = lost_world(clock, lost=("c1", "c2"), per_minute=1)
    entry = model.spread(KEY)
    assert entry is not None
    decided = loop.brake_decision(model, entry, now=clock())
    assert decided.kept == {"c2"} and decided.admission.newly == {"c1"}
    assert model.failover_limit.deferred == 0 and not model.brakes.held()
    loop.recompute(model, {KEY}, now=clock())
    assert not model.failover_limit.has_budget(clock())  # c1 spent the minute's budget, c2 waits
    assert model.brakes.held() == {KEY} and model.failover_limit.deferred == 1
    placed = model.placements[KEY].clusters
    assert placed["c1"] == 0 and placed["c2"] == 2, placed
    assert loop.brake_decision(model, entry, now=clock()).kept == {"c2"}


def test_a_parallel_round_commits_each_spread_s_decision_once_as_the_sequential_round_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A round of several builds every request first (against one snapshot) and may place a
    spread again when its pools are contended: each spread's brake and admission is committed once,
    and the round ends where it ends in-process."""
    worlds = []
    for batch in (None, loop.answer_all):
        clock = ManualClock(T0)
        model = lost_world(clock, lost=("c1", "c2"), per_minute=1)
        api = builders.federated_spread("api", subsets=REGION, lost_seconds=LOST_SECONDS)
        keys = model.upsert_spread(api)
        keys |= model.set_target(api.key, replicas=6, template=builders.deployment("api", namespace="shop"))
        commits: list[str] = []
        commit = model.brakes.commit
        monkeypatch.setattr(model.brakes, "commit",
                            lambda d, c=commit, seen=commits: (seen.append(d.key), c(d))[1])
        done = loop.recompute(model, keys | {KEY}, now=clock(), place_batch=batch)
        assert sorted(commits) == ["shop/api", KEY], commits
        assert done.placements[KEY].clusters["c1"] == 0, done.placements[KEY]
        worlds.append(facts(model))
    assert worlds[0] == worlds[1]
