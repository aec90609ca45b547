"""The coordinator's placement loop over event sequences, with an injected clock (DESIGN §3, §5).

Each test plays hub and agent events (spreads, `kubectl scale`, inventories, pod counts, heartbeats,
marks) into a `world.World`, runs the loop, and checks placements and what the agents would receive.
"""

from __future__ import annotations

import datetime
import gc
import logging
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from federation.api import cluster, common, names
from federation.api import spread as spread_api
from federation.coordinator import backends, facade
from federation.coordinator.model import loop, world
from federation.coordinator.wire import assignments
from federation.core import placement, spread_status, status
from federation.rpc import assignment as agent_assignment
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)


TWO_SUBSETS: list[dict[str, Any]] = [
    {"name": "onprem", "clusters": ["dc1"], "maxReplicas": 3},
    {"name": "cloud", "clusters": ["aws"]},
]

REGION: list[dict[str, Any]] = [
    {"name": "eu", "clusterSelector": {"matchLabels": {names.REGION_LABEL: "eu"}}},
]
TINY_THEN_BIG: list[dict[str, Any]] = [
    {"name": "small", "clusters": ["tiny"]}, {"name": "rest", "clusters": ["big"]},
]


def new_world(clock: ManualClock, clusters: dict[str, int]) -> world.World:
    """A world whose clusters have `nodes` 4-cpu nodes each and have just been heard."""
    model = world.World(clock)
    for name, nodes in clusters.items():
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(nodes)])
        model.heartbeat(name)
    return model


def add_spread(
    model: world.World, item: spread_api.FederatedSpread, *, replicas: int, cpu: str = "1"
) -> set[str]:
    return model.upsert_spread(item) | model.set_target(
        item.key, replicas=replicas,
        template=builders.deployment(item.metadata.name, namespace="shop", cpu=cpu)
    )


def run(model: world.World, keys: Iterable[str], clock: ManualClock) -> loop.Round:
    return loop.recompute(model, keys, now=clock())


def sent(model: world.World, key: str, clock: ManualClock) -> dict[str, Any]:
    entry = model.spread(key)
    assert entry is not None
    return assignments.for_clusters(
        entry, model.placements[key], marks=model.marks_for(key), now=clock()
    )


# --- create, scale, edit, delete ------------------------------------------------------------------


@pytest.mark.parametrize(("replicas", "expected"), [
    pytest.param(5, {"onprem": {"dc1": 3}, "cloud": {"aws": 2}}, id="cap-3-then-rest"),
    pytest.param(2, {"onprem": {"dc1": 2}, "cloud": {"aws": 0}}, id="all-in-first-subset"),
    pytest.param(0, {"onprem": {"dc1": 0}, "cloud": {"aws": 0}}, id="zero-replicas"),
])
def test_create_places_the_spread(replicas: int, expected: dict[str, dict[str, int]]) -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2})
    keys = add_spread(model, builders.federated_spread(subsets=TWO_SUBSETS), replicas=replicas)
    assert keys == {"shop/web"}
    result = run(model, keys, clock)
    assert model.placements["shop/web"].counts() == expected
    assert result.placements["shop/web"].placed == replicas


def test_spread_without_a_target_waits_and_is_placed_when_the_deployment_arrives() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2})
    keys = model.upsert_spread(builders.federated_spread(subsets=TWO_SUBSETS))
    first = run(model, keys, clock)
    assert first.waiting_for_target == ("shop/web",) and not first.placements
    keys = model.set_target("shop/web", replicas=4, template=builders.deployment(namespace="shop"))
    assert run(model, keys, clock).placements["shop/web"].clusters == {"dc1": 3, "aws": 1}


def test_target_seen_before_the_spread_is_remembered() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2})
    assert model.set_target("shop/web", replicas=4, template=builders.deployment(namespace="shop")) == set()
    keys = model.upsert_spread(builders.federated_spread(subsets=TWO_SUBSETS))
    assert run(model, keys, clock).placements["shop/web"].clusters == {"dc1": 3, "aws": 1}


@pytest.mark.parametrize(("before", "after"), [
    pytest.param(4, 9, id="scale-up"),
    pytest.param(9, 4, id="scale-down"),
])
def test_kubectl_scale_moves_only_the_delta(before: int, after: int) -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"eu1": 2, "eu2": 2})
    region = REGION
    keys = add_spread(model, builders.federated_spread(subsets=region, strategy="Adaptive"), replicas=before)
    run(model, keys, clock)
    old = model.placements["shop/web"].clusters
    model.inventory("eu2", [builders.node_pool(6)])  # capacity changed: only new replicas may follow it
    keys = model.set_target("shop/web", replicas=after, template=builders.deployment(namespace="shop"))
    new = run(model, keys, clock).placements["shop/web"].clusters
    assert sum(new.values()) == after
    moved = sum(abs(new[n] - old[n]) for n in old)
    assert moved == abs(after - before)


def test_capacity_change_alone_moves_nothing() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"eu1": 2, "eu2": 2})
    region = REGION
    keys = add_spread(model, builders.federated_spread(subsets=region, strategy="Adaptive"), replicas=6)
    run(model, keys, clock)
    old = model.placements["shop/web"].clusters
    assert placement.settled(model.placements["shop/web"])
    assert model.inventory("eu2", [builders.node_pool(8)]) == set()  # settled: not even placed again
    assert run(model, {"shop/web"}, clock).placements["shop/web"].clusters == old  # and if it were


def test_capacity_change_places_the_spreads_waiting_for_it() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"eu1": 1, "eu2": 1})
    keys = add_spread(model, builders.federated_spread(subsets=REGION, strategy="Adaptive"), replicas=40)
    waiting = run(model, keys, clock).placements["shop/web"]
    assert waiting.capacity_exhausted > 0 and not placement.settled(waiting)
    assert model.inventory("eu2", [builders.node_pool(8)]) == {"shop/web"}  # not settled: placed again


def test_spread_edit_of_a_cap_recomputes_and_sends_deltas() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2, "gcp": 2})
    keys = add_spread(model, builders.federated_spread(subsets=TWO_SUBSETS, generation=1), replicas=5)
    run(model, keys, clock)
    before = sent(model, "shop/web", clock)
    edited = [{**TWO_SUBSETS[0], "maxReplicas": 1}, TWO_SUBSETS[1]]
    keys = model.upsert_spread(builders.federated_spread(subsets=edited, generation=2))
    assert keys == {"shop/web"}
    run(model, keys, clock)
    assert model.placements["shop/web"].counts() == {"onprem": {"dc1": 1}, "cloud": {"aws": 4}}
    delta = assignments.changed(before, sent(model, "shop/web", clock))
    assert sorted(delta) == ["aws", "dc1"]
    assert all(m is not None and m.generation == 2 for m in delta.values())


def test_a_spreads_entry_keeps_its_key_and_lost_after_until_its_spec_changes() -> None:
    """The entry keeps what it derives from its spread (key, clusterLostSeconds as a timedelta): a
    status-only update refreshes the object and affects nothing; an edit makes a new entry."""
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2})
    first = builders.federated_spread(subsets=TWO_SUBSETS, generation=1, lost_seconds=40)
    add_spread(model, first, replicas=2)
    entry = model.spread("shop/web")
    assert entry is not None and (entry.key, entry.lost_after) == ("shop/web", datetime.timedelta(seconds=40))
    again = builders.federated_spread(subsets=TWO_SUBSETS, generation=1, lost_seconds=40)
    again.status = spread_api.FederatedSpreadStatus()
    assert model.upsert_spread(again) == set()
    assert model.spread("shop/web") is entry and entry.spread is again
    edited = builders.federated_spread(subsets=TWO_SUBSETS, generation=2, lost_seconds=90)
    assert model.upsert_spread(edited) == {"shop/web"}
    changed = model.spread("shop/web")
    assert changed is not None and changed.lost_after == datetime.timedelta(seconds=90)
    with pytest.raises(ValueError, match="refreshed only by itself"):
        changed.refresh(builders.federated_spread("api", subsets=TWO_SUBSETS, lost_seconds=90))


def test_delete_sends_a_removal_to_every_cluster() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2})
    keys = add_spread(model, builders.federated_spread(subsets=TWO_SUBSETS), replicas=5)  # 3 + 2
    run(model, keys, clock)
    before = sent(model, "shop/web", clock)
    keys = model.delete_spread("shop/web")
    result = run(model, keys, clock)
    assert result.removed == ("shop/web",) and "shop/web" not in model.placements
    assert assignments.changed(before, {}) == {"dc1": None, "aws": None}
    message = assignments.removal("shop/web", generation=3, orphan=True, reason="spread deleted")
    assert (message.spread, message.generation, message.orphan) == ("shop/web", 3, True)


def test_unrelated_cluster_events_affect_no_spread() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2})
    keys = add_spread(model, builders.federated_spread(subsets=TWO_SUBSETS), replicas=2)
    run(model, keys, clock)
    assert model.inventory("elsewhere", [builders.node_pool(3)]) == set()
    assert model.upsert_cluster("other", labels={"x": "y"}) == set()
    assert model.inventory("dc1", [builders.node_pool(2)]) == set()  # same report again: nothing changed
    written = builders.federated_spread(subsets=TWO_SUBSETS).model_copy(
        update={"status": spread_api.FederatedSpreadStatus(replicas=2)}
    )
    assert model.upsert_spread(written) == set()  # our own status write: nothing to recompute


# --- overcommit --------------------------------------------------------------------------------


@pytest.mark.parametrize(("replicas_a", "replicas_b"), [
    pytest.param(3, 3, id="3+3-on-4-slots"),
    pytest.param(4, 4, id="4+4-on-4-slots"),
    pytest.param(1, 5, id="1+5-on-4-slots"),
])
def test_two_spreads_never_overcommit_a_small_cluster(replicas_a: int, replicas_b: int) -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"tiny": 1, "big": 10})  # tiny: one 4-cpu node = 4 one-cpu pods
    subsets = TINY_THEN_BIG
    first, second = (builders.federated_spread(n, subsets, strategy="Adaptive") for n in ("a", "b"))
    keys = add_spread(model, first, replicas=replicas_a)
    keys |= add_spread(model, second, replicas=replicas_b)
    result = run(model, keys, clock)
    on_tiny = sum(p.clusters["tiny"] for p in result.placements.values())
    assert on_tiny == min(4, replicas_a + replicas_b)
    assert all(p.placed == p.replicas for p in result.placements.values())


@pytest.mark.parametrize(("replicas_a", "replicas_b", "replaced"), [
    # Both answers against the snapshot take 3 of tiny's 4 slots: the pool is contended; a's takes
    # fit first in key order (its answer stands), b's do not: b alone is placed again, after a,
    # which is the one-after-the-other answer.
    pytest.param(3, 3, 1, id="competing-the-later-is-placed-again"),
    pytest.param(2, 2, 0, id="room-for-both-nothing-placed-twice"),
    pytest.param(0, 3, 0, id="a-places-nothing-b-keeps-its-answer"),
])
def test_a_parallel_round_equals_placing_one_spread_after_the_other(
    replicas_a: int, replicas_b: int, replaced: int
) -> None:
    clock = ManualClock(T0)
    together, in_process, one_by_one = (new_world(clock, {"tiny": 1, "big": 10}) for _ in range(3))
    batches: list[list[str]] = []

    def parallel(requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        batches.append([r.key for r in requests])  # every request built on the world before the round
        return loop.answer_all(requests)

    keys: set[str] = set()
    for model in (together, in_process, one_by_one):
        keys = add_spread(model, builders.federated_spread("a", TINY_THEN_BIG, strategy="Adaptive"),
                          replicas=replicas_a)
        keys |= add_spread(model, builders.federated_spread("b", TINY_THEN_BIG, strategy="Adaptive"),
                           replicas=replicas_b)
    result = loop.recompute(together, keys, now=clock(), place_batch=parallel)
    here = loop.recompute(in_process, keys, now=clock())
    for key in sorted(keys):
        loop.recompute(one_by_one, [key], now=clock())
    assert batches == [["shop/a", "shop/b"]]
    assert result.replaced == here.replaced == replaced
    assert together.placements == in_process.placements  # either backend: the same round
    # The answer is the one-after-the-other one; a subset's `capacity` figure is the snapshot's (the
    # room at the round's start, as Explain said it then), so only the answers are compared.
    assert ({k: (p.counts(), p.unplaced) for k, p in together.placements.items()}
            == {k: (p.counts(), p.unplaced) for k, p in one_by_one.placements.items()})


def test_a_round_of_one_spread_is_placed_in_process() -> None:
    """One spread (a scale, a new spread) never pays the parallel backend's round trip: a round of
    one is never contended, so the shards could only give the same answer later."""
    clock = ManualClock(T0)
    model = new_world(clock, {"tiny": 1, "big": 10})
    keys = add_spread(model, builders.federated_spread("a", TINY_THEN_BIG, strategy="Adaptive"), replicas=3)

    def refused(requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        raise AssertionError(f"a round of one was sent to the backend: {[r.key for r in requests]}")

    result = loop.recompute(model, keys, now=clock(), place_batch=refused)
    assert result.placements["shop/a"].clusters == {"tiny": 3, "big": 0}
    assert (result.replaced, result.fell_back) == (0, "")


def test_a_rounds_spreads_do_not_see_each_others_old_pending_pods() -> None:
    """Against one snapshot the round's own pending pods are lifted: a spread placed with others no
    longer sees, as it did when the round went one by one in key order, the old pending pods of a
    spread after it. b holds tiny's 4 slots pending; a round of a (new, 2) and b (scaled to 2): a
    sees tiny empty and b's 2 fit beside it, where one by one a went to big (b's 4 still there)."""
    clock = ManualClock(T0)
    model, one_by_one = (new_world(clock, {"tiny": 1, "big": 10}) for _ in range(2))
    for world_ in (model, one_by_one):
        add_spread(world_, builders.federated_spread("b", TINY_THEN_BIG, strategy="Adaptive"), replicas=4)
        run(world_, {"shop/b"}, clock)
        assert world_.placements["shop/b"].clusters == {"tiny": 4, "big": 0}
    keys: set[str] = set()
    for world_ in (model, one_by_one):
        for name in ("a", "b"):
            keys |= add_spread(world_, builders.federated_spread(name, TINY_THEN_BIG, strategy="Adaptive"),
                               replicas=2)
    result = loop.recompute(model, keys, now=clock())
    for key in sorted(keys):
        loop.recompute(one_by_one, [key], now=clock())
    assert result.placements["shop/a"].clusters == {"tiny": 2, "big": 0}
    assert result.placements["shop/b"].clusters == {"tiny": 2, "big": 0}
    assert result.replaced == 0
    assert one_by_one.placements["shop/a"].clusters == {"tiny": 0, "big": 2}, "the old rule, for contrast"


def test_a_round_that_fails_midway_leaves_every_pending_pod_charged() -> None:
    """A round of several lifts its spreads' pending pods out of the views; when it raises before
    storing (here the backend fails in a way it has no fallback for), the placements stay as they
    were and so does every view: the lifted pods are charged again."""
    def broken(requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        raise RuntimeError("a backend bug")

    clock = ManualClock(T0)
    model, twin = (new_world(clock, {"tiny": 1, "big": 10}) for _ in range(2))
    keys: set[str] = set()
    for world_ in (model, twin):
        for name in ("a", "b"):
            keys |= add_spread(world_, builders.federated_spread(name, TINY_THEN_BIG, strategy="Adaptive"),
                               replicas=2)
        run(world_, keys, clock)  # a and b hold tiny's four slots, pending
        for name in ("a", "b"):
            world_.set_target(f"shop/{name}", replicas=3,
                              template=builders.deployment(name, namespace="shop", cpu="1"))
    with pytest.raises(RuntimeError, match="a backend bug"):
        loop.recompute(model, keys, now=clock(), place_batch=broken)
    assert model.placements == twin.placements
    for key in sorted(keys):
        assert model.view_for(key) == twin.view_for(key), key
    assert run(model, keys, clock).placements == run(twin, keys, clock).placements


def test_running_pods_are_not_deducted_twice() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"tiny": 1, "big": 10})
    subsets = TINY_THEN_BIG
    keys = add_spread(model, builders.federated_spread("a", subsets, strategy="Adaptive"), replicas=2)
    run(model, keys, clock)
    # a's two pods now run: the inventory counts them, pod counts say so; b sees 2 free slots.
    model.inventory("tiny", [cluster.NodePool(
        name="std", count=1, allocatable={"cpu": "4", "pods": "110"}, requested={"cpu": "2", "pods": "2"},
    )])
    model.pod_counts("tiny", {"shop/a": {"small": status.ClusterPods(running=2, ready=2)}})
    keys = add_spread(model, builders.federated_spread("b", subsets, strategy="Adaptive"), replicas=3)
    assert run(model, keys, clock).placements["shop/b"].clusters == {"tiny": 2, "big": 1}


# --- failover ----------------------------------------------------------------------------------


def failover_world(clock: ManualClock) -> world.World:
    model = new_world(clock, {"dc1": 2, "aws": 2})
    keys = add_spread(model, builders.federated_spread(subsets=TWO_SUBSETS, lost_seconds=30), replicas=5)
    run(model, keys, clock)
    for name, message in sent(model, "shop/web", clock).items():  # delivered, as the facade does
        model.pods.sent(name, "shop/web", quotas=assignments.quotas(message))
    return model


@pytest.mark.parametrize(("silent", "moved"), [
    pytest.param(29, False, id="29s-not-yet"),
    pytest.param(30, False, id="30s-at-the-limit"),
    pytest.param(31, True, id="31s-lost"),
])
def test_silent_agent_fails_over_only_after_cluster_lost_seconds(silent: int, moved: bool) -> None:
    clock = ManualClock(T0)
    model = failover_world(clock)
    clock.advance(silent)
    model.heartbeat("aws")
    lost = loop.failover(model)
    assert lost.clusters == (("dc1",) if moved else ())
    assert lost.keys == ({"shop/web"} if moved else frozenset())
    run(model, lost.keys, clock)
    expected = {"dc1": 0, "aws": 5} if moved else {"dc1": 3, "aws": 2}
    assert model.placements["shop/web"].clusters == expected


def test_lost_is_reported_once_and_a_longer_limit_moves_later() -> None:
    clock = ManualClock(T0)
    model = failover_world(clock)
    keys = add_spread(model, builders.federated_spread("slow", TWO_SUBSETS, lost_seconds=90), replicas=2)
    run(model, keys, clock)
    clock.advance(31)
    model.heartbeat("aws")
    first = loop.failover(model)
    assert first.clusters == ("dc1",) and first.keys == {"shop/web"}
    run(model, first.keys, clock)
    assert loop.failover(model) == loop.Lost(clusters=(), keys=frozenset())
    clock.advance(60)
    model.heartbeat("aws")
    later = loop.failover(model)
    assert later.clusters == () and later.keys == {"shop/slow"}
    assert run(model, later.keys, clock).placements["shop/slow"].clusters == {"dc1": 0, "aws": 2}


def test_a_returning_cluster_counts_its_pods_again_and_the_surplus_goes_by_scale_down_order() -> None:
    clock = ManualClock(T0)
    model = failover_world(clock)
    assert model.placements["shop/web"].clusters == {"dc1": 3, "aws": 2}
    clock.advance(31)
    model.heartbeat("aws")
    run(model, loop.failover(model).keys, clock)
    assert model.placements["shop/web"].clusters == {"dc1": 0, "aws": 5}
    keys = model.heartbeat("dc1")
    assert keys == {"shop/web"}
    keys |= loop.failover(model).keys
    run(model, keys, clock)
    # dc1 ran 3 when it was lost (its agent kept that assignment): they count again, and the
    # replicas beyond the spread's 5 go from the last subset (no pod is Ready here to protect).
    assert model.placements["shop/web"].clusters == {"dc1": 3, "aws": 2}
    keys = model.set_target("shop/web", replicas=7, template=builders.deployment(namespace="shop"))
    assert run(model, keys, clock).placements["shop/web"].clusters == {"dc1": 3, "aws": 4}


# --- unschedulable marks ---------------------------------------------------------------------


def test_unschedulable_mark_releases_pending_replicas_to_the_next_subset() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 4, "aws": 4})
    subsets = [{"name": "onprem", "clusters": ["dc1"]}, {"name": "cloud", "clusters": ["aws"]}]
    keys = add_spread(model, builders.federated_spread(subsets=subsets, strategy="Adaptive"), replicas=4)
    run(model, keys, clock)
    assert model.placements["shop/web"].clusters == {"dc1": 4, "aws": 0}
    model.pod_counts("dc1", {"shop/web": {"onprem": status.ClusterPods(running=1, pending=3)}})
    keys = model.unschedulable("dc1", spread="shop/web", subset="onprem", since=clock())
    assert keys == {"shop/web"}
    run(model, keys, clock)
    assert model.placements["shop/web"].clusters == {"dc1": 1, "aws": 3}
    rule = agent_assignment.Assignment.from_proto(sent(model, "shop/web", clock)["dc1"]).rule("onprem")
    assert rule is not None
    assert rule.unschedulable_until == T0 + datetime.timedelta(seconds=300)
    clock.advance(301)
    assert agent_assignment.Assignment.from_proto(sent(model, "shop/web", clock)["dc1"]).rule("onprem") == \
        agent_assignment.SubsetRule(name="onprem", index=0, quota=1, leaving=0, kept=0)


def test_a_fixed_spread_ignores_unschedulable_marks() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 4, "aws": 4})
    subsets = [{"name": "onprem", "clusters": ["dc1"]}, {"name": "cloud", "clusters": ["aws"]}]
    keys = add_spread(model, builders.federated_spread(subsets=subsets, strategy="Fixed"), replicas=4)
    run(model, keys, clock)
    model.pod_counts("dc1", {"shop/web": {"onprem": status.ClusterPods(running=1, pending=3)}})
    keys = model.unschedulable("dc1", spread="shop/web", subset="onprem", since=clock())
    assert keys == set(), "a mark does not concern a Fixed spread"
    assert run(model, {"shop/web"}, clock).placements["shop/web"].clusters == {"dc1": 4, "aws": 0}
    assert model.marks_for("shop/web") == []
    rule = agent_assignment.Assignment.from_proto(sent(model, "shop/web", clock)["dc1"]).rule("onprem")
    assert rule is not None and rule.unschedulable_until is None


def test_marks_are_spent_by_a_new_strategy_type_or_subset_list_only() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 4, "aws": 4})
    subsets = [{"name": "onprem", "clusters": ["dc1"]}, {"name": "cloud", "clusters": ["aws"]}]

    def edit(strategy: str = "Adaptive", *, items: list[dict[str, Any]] = subsets, **extra: Any) -> None:
        model.upsert_spread(builders.federated_spread(subsets=items, strategy=strategy, **extra))

    def mark() -> None:
        model.unschedulable("dc1", spread="shop/web", subset="onprem", since=clock())

    add_spread(model, builders.federated_spread(subsets=subsets, strategy="Adaptive"), replicas=4)
    mark()
    edit(lost_seconds=90)
    edit(lost_seconds=90, adaptive={"unschedulableSeconds": 600})
    assert [m.subset for m in model.marks_for("shop/web")] == ["onprem"], "other fields keep the marks"
    edit(items=[*subsets, {"name": "spill", "clusters": ["aws"]}])
    assert model.marks_for("shop/web") == [], "a new subset list spends them"
    mark()
    edit("Fixed")
    edit("Adaptive")
    assert model.marks_for("shop/web") == [], "a new strategy type spends them"


def test_a_mark_found_under_a_spec_whose_marks_an_edit_spent_is_refused() -> None:
    """An agent reports a mark made under the assignment it holds; one that arrives after an edit
    spent the spread's marks, made under the older generation, speaks of the old subsets: it
    would keep the subset's replicas out of the cluster until it ran out. Refused; one made
    under the new generation (or by an agent that does not say, generation 0) is recorded."""
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 4, "aws": 4})
    subsets = [{"name": "onprem", "clusters": ["dc1"]}, {"name": "cloud", "clusters": ["aws"]}]
    add_spread(model, builders.federated_spread(subsets=subsets, strategy="Adaptive", generation=3),
               replicas=4)

    def mark(generation: int) -> set[str]:
        clock.advance(1)
        return model.unschedulable("dc1", spread="shop/web", subset="onprem", since=clock(),
                                   generation=generation)

    assert mark(3) == {"shop/web"}
    capped = [{**subsets[0], "maxReplicas": 2}, subsets[1]]
    model.upsert_spread(builders.federated_spread(subsets=capped, strategy="Adaptive", generation=4))
    assert model.marks_for("shop/web") == []
    assert mark(3) == set(), "found under the subsets the edit replaced"
    assert model.marks_for("shop/web") == []
    assert mark(4) == {"shop/web"}
    model.upsert_spread(builders.federated_spread(subsets=capped, strategy="Adaptive", generation=5,
                                                  lost_seconds=90))
    assert [m.subset for m in model.marks_for("shop/web")] == ["onprem"]
    assert mark(4) == {"shop/web"}, "an edit that keeps the marks keeps accepting them"
    model.upsert_spread(builders.federated_spread(subsets=subsets, strategy="Adaptive", generation=6))
    assert mark(0) == {"shop/web"}, "an agent that does not say its generation is heard"


# --- assignments ------------------------------------------------------------------------------


def test_assignments_round_trip_through_the_agent_decoder() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2, "gcp": 2})
    subsets: list[dict[str, Any]] = [
        {**TWO_SUBSETS[0],
         "requiredNodeSelectorTerm": {"matchExpressions": [
             {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5"]}]},
         "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
         "patch": {"metadata": {"labels": {"tier": "onprem"}}}},
        {"name": "cloud", "clusters": ["aws", "gcp"], "clusterSpread": "Balance"},
    ]
    keys = add_spread(model, builders.federated_spread(subsets=subsets, generation=4), replicas=7)
    run(model, keys, clock)
    messages = sent(model, "shop/web", clock)
    assert sorted(messages) == ["aws", "dc1", "gcp"]
    result = model.placements["shop/web"]
    for name, message in messages.items():
        decoded = agent_assignment.Assignment.from_proto(message)
        assert decoded.quotas() == {s.name: s.clusters.get(name, 0) for s in result.subsets}
        assert decoded.replicas == result.clusters[name]
        assert (decoded.spread, decoded.generation, decoded.namespace, decoded.workload) == \
            ("shop/web", 4, "shop", "web")
        assert decoded.subset_count == 2 and decoded.strategy == agent_assignment.Strategy()
        assert decoded.template["metadata"] == {"name": "web", "namespace": "shop"}
        assert "status" not in decoded.template
    onprem = agent_assignment.Assignment.from_proto(messages["aws"]).rule("onprem")
    assert onprem is not None and onprem.quota == 0
    assert onprem.required_term == {"matchFields": [], "matchExpressions": [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5"]}]}
    assert onprem.tolerations == ({"key": "spot", "operator": "Exists", "value": "", "effect": "NoSchedule"},)
    assert onprem.patch == {"metadata": {"labels": {"tier": "onprem"}}}


def test_identical_recompute_changes_nothing() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2})
    keys = add_spread(model, builders.federated_spread(subsets=TWO_SUBSETS), replicas=5)
    run(model, keys, clock)
    first = sent(model, "shop/web", clock)
    assert assignments.changed({}, first) == first
    clock.advance(5)
    run(model, {"shop/web"}, clock)
    assert assignments.changed(first, sent(model, "shop/web", clock)) == {}


def test_cluster_taint_cordons() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2})
    keys = add_spread(model, builders.federated_spread(subsets=TWO_SUBSETS), replicas=2)
    keys |= model.upsert_cluster(
        "dc1", labels={names.REGION_LABEL: "eu"},
        taints=[common.Taint(key="cordon", effect="NoSchedule")],
    )
    assert run(model, keys, clock).placements["shop/web"].clusters == {"dc1": 0, "aws": 2}


def test_a_noschedule_cordon_keeps_what_runs_and_a_noexecute_one_moves_it() -> None:
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2})
    keys = add_spread(model, builders.federated_spread(subsets=TWO_SUBSETS), replicas=2)
    assert run(model, keys, clock).placements["shop/web"].clusters == {"dc1": 2, "aws": 0}
    keys = model.upsert_cluster("dc1", labels={names.REGION_LABEL: "eu"},
                                taints=[common.Taint(key="cordon", effect="NoSchedule")])
    assert keys == {"shop/web"}
    assert run(model, keys, clock).placements["shop/web"].clusters == {"dc1": 2, "aws": 0}
    keys = model.set_target("shop/web", replicas=4, template=builders.deployment(namespace="shop"))
    # onprem's cap (3) has room, but the cordoned dc1 takes nothing new.
    assert run(model, keys, clock).placements["shop/web"].clusters == {"dc1": 2, "aws": 2}
    keys = model.upsert_cluster("dc1", labels={names.REGION_LABEL: "eu"},
                                taints=[common.Taint(key="cordon", effect="NoExecute")])
    assert run(model, keys, clock).placements["shop/web"].clusters == {"dc1": 0, "aws": 4}


def test_cluster_tolerations_lift_a_cordon_for_the_spread_that_has_them_only() -> None:
    """Two spreads with equal pods share the cached member views of dc1: one tolerates its taints
    and uses it, the other does not, whichever view was built first."""
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 4, "aws": 4})
    balance = [{**REGION[0], "clusterSpread": "Balance"}]
    keys = add_spread(model, builders.federated_spread("api", subsets=balance), replicas=4)
    keys |= add_spread(model, builders.federated_spread(
        "web", subsets=balance, cluster_tolerations=[{"operator": "Exists"}]), replicas=4)
    keys |= add_spread(model, builders.federated_spread(
        "pin", subsets=TWO_SUBSETS, cluster_tolerations=[{"key": "cordon", "operator": "Exists"}]),
        replicas=4)
    keys |= model.upsert_cluster("dc1", labels={names.REGION_LABEL: "eu"},
                                 taints=[common.Taint(key="cordon", effect="NoSchedule")])
    placed = run(model, keys, clock).placements
    assert placed["shop/api"].clusters == {"dc1": 0, "aws": 4}
    assert placed["shop/web"].clusters == {"dc1": 2, "aws": 2}
    assert placed["shop/pin"].clusters == {"dc1": 3, "aws": 1}
    keys = model.upsert_cluster("dc1", labels={names.REGION_LABEL: "eu"},
                                taints=[common.Taint(key="cordon", effect="NoExecute")])
    assert keys == {"shop/api", "shop/web", "shop/pin"}
    placed = run(model, keys, clock).placements
    assert placed["shop/api"].clusters == {"dc1": 0, "aws": 4}
    assert placed["shop/web"].clusters == {"dc1": 2, "aws": 2}
    assert placed["shop/pin"].clusters == {"dc1": 3, "aws": 1}
    keys = model.upsert_cluster("dc1", labels={names.REGION_LABEL: "eu"},
                                taints=[common.Taint(key="drain", effect="NoExecute")])
    placed = run(model, keys, clock).placements
    assert placed["shop/web"].clusters == {"dc1": 2, "aws": 2}
    assert placed["shop/pin"].clusters == {"dc1": 0, "aws": 4}  # tolerates key "cordon" only


# --- restart ----------------------------------------------------------------------------------------


def test_a_restarted_world_keeps_the_placement_the_hub_status_recorded() -> None:
    clock = ManualClock(T0)
    before = new_world(clock, {"aws": 2})
    before.upsert_cluster("dc1", labels={names.REGION_LABEL: "eu"})
    before.inventory("dc1", [builders.node_pool(1, cpu="1")])  # room for one one-cpu pod
    before.heartbeat("dc1")
    spread = builders.federated_spread(subsets=TWO_SUBSETS, strategy="Adaptive")
    keys = add_spread(before, spread, replicas=4)
    run(before, keys, clock)
    placed = before.placements["shop/web"].counts()
    assert placed == {"onprem": {"dc1": 1}, "cloud": {"aws": 3}}
    written = spread_status.spread_status(placement=before.placements["shop/web"], spec=spread.spec,
                                          generation=1, reports={}, marks=[], previous=None, now=clock())

    clock.advance(30)  # the coordinator restarts; meanwhile dc1 grew to two 4-cpu nodes
    after = world.World(clock, grace_from=clock())
    for name, nodes in {"dc1": 2, "aws": 2}.items():  # listed and reported; no heartbeat yet
        after.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        after.inventory(name, [builders.node_pool(nodes)])
    add_spread(after, spread.model_copy(update={"status": written}), replicas=4)
    assert after.current_for("shop/web") == placed
    result = run(after, {"shop/web"}, clock)
    assert result.placements["shop/web"].counts() == placed  # nothing moves: dc1 would now take 3
    assert after.seeded == {}
    fresh = new_world(clock, {"dc1": 2, "aws": 2})
    run(fresh, add_spread(fresh, spread, replicas=4), clock)
    assert fresh.placements["shop/web"].counts() != placed  # what forgetting would have done
    clock.advance(61)  # no agent came back within clusterLostSeconds of the restart
    assert loop.failover(after).keys == {"shop/web"}


def test_a_standby_that_leads_long_after_it_was_made_gives_agents_their_grace_from_then() -> None:
    """A standby's World is made when its process starts; the lead may come an hour later. Agents
    that have not reconnected yet must not be lost at its first tick (`World.restart_grace`)."""
    clock = ManualClock(T0)
    spread = builders.federated_spread(subsets=TWO_SUBSETS)  # clusterLostSeconds 60
    standby, unrestarted = (world.World(clock, grace_from=clock()) for _ in range(2))
    for model in (standby, unrestarted):
        for name, nodes in {"dc1": 2, "aws": 2}.items():
            model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
            model.inventory(name, [builders.node_pool(nodes)])
        add_spread(model, spread, replicas=4)
    clock.advance(3600)  # it leads: aws's agent reconnects first, dc1's a moment later
    standby.restart_grace(clock())
    for model in (standby, unrestarted):
        model.heartbeat("aws")
    assert standby.ready_selected("shop/web") == {"dc1", "aws"}
    assert loop.failover(standby).keys == frozenset()
    assert unrestarted.ready_selected("shop/web") == {"aws"}, "without it, dc1 would be lost at once"
    clock.advance(61)  # dc1's agent never came back: lost one clusterLostSeconds after the lead
    standby.heartbeat("aws")
    assert standby.ready_selected("shop/web") == {"aws"}


def test_ready_selected_follows_the_clock_for_a_named_cluster_the_world_does_not_know() -> None:
    """`ready_selected` is remembered per spread while its entry, selection and readiness stand;
    a named cluster the World does not know is ready only within its grace, which the readiness
    of the known clusters does not end: its answer is read again, not remembered."""
    clock = ManualClock(T0)
    model = world.World(clock, grace_from=clock())
    model.upsert_cluster("aws", labels={names.REGION_LABEL: "eu"})
    model.inventory("aws", [builders.node_pool(2)])
    add_spread(model, builders.federated_spread(subsets=[
        {"name": "onprem", "clusters": ["ghost"]}, {"name": "cloud", "clusters": ["aws"]}],
        lost_seconds=100), replicas=2)
    clock.advance(50)
    model.heartbeat("aws")  # aws is ready until T0 + 150, the ghost's grace ends at T0 + 100
    clock.advance(10)
    assert model.ready_selected("shop/web") == {"ghost", "aws"}
    clock.advance(50)  # T0 + 110: no heartbeat since, the readiness of aws stands
    assert model.ready_selected("shop/web") == {"aws"}
    model.heartbeat("aws")
    assert model.ready_selected("shop/web") == {"aws"}


def test_a_remembered_ready_selected_keeps_no_reading_of_every_cluster_alive() -> None:
    """The memo keeps the readiness's serial, not the reading (a map of every cluster): spreads
    asked at different times must not each hold a reading of their own once it is replaced."""
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2})
    for name in ("web", "api"):
        add_spread(model, builders.federated_spread(name, subsets=TWO_SUBSETS), replicas=2)
    entry = model.spread("shop/web")
    assert entry is not None
    reading = weakref.ref(model.liveness.readiness(entry.lost_after))
    assert model.ready_selected("shop/web") == {"dc1", "aws"}  # remembered, and not asked again
    clock.advance(61)  # dc1 silent past clusterLostSeconds: a new reading
    model.heartbeat("aws")
    assert model.ready_selected("shop/api") == {"aws"}
    gc.collect()
    assert reading() is None


def test_spreads_that_select_the_same_clusters_share_one_set_of_them() -> None:
    """A round remembers each spread's selected and ready clusters; spreads selecting the same
    clusters (a region, with or without a named cluster of it) share one set rather than hold
    one each (hundreds of names at 10,000 spreads); one cluster lost, each has its own answer."""
    clock = ManualClock(T0)
    model = new_world(clock, {"dc1": 2, "aws": 2, "gcp": 2})
    add_spread(model, builders.federated_spread("web", subsets=REGION), replicas=2)
    home = {"name": "home", "clusters": ["aws"]}
    add_spread(model, builders.federated_spread("api", subsets=[home, *REGION]), replicas=2)
    assert model.selected("shop/web") is model.selected("shop/api")
    assert model.ready_selected("shop/web") is model.ready_selected("shop/api") is model.selected("shop/web")
    clock.advance(61)
    for name in ("aws", "gcp"):
        model.heartbeat(name)
    assert model.ready_selected("shop/web") == model.ready_selected("shop/api") == {"aws", "gcp"}


def test_a_batch_the_backend_cannot_answer_is_placed_in_process() -> None:
    """`place_batch` raising BatchUnavailable (the Ray shards' deadline): the round answers the same
    requests here, says why, and gives what the one-after-the-other pass gives."""
    def unavailable(requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        raise loop.BatchUnavailable("shards did not answer within 1 s")

    clock = ManualClock(T0)
    fell, alone = (new_world(clock, {"tiny": 1, "big": 10}) for _ in range(2))
    keys: set[str] = set()
    for model in (fell, alone):
        for name, replicas in (("a", 3), ("b", 3), ("c", 2)):  # competing for tiny's four slots
            keys |= add_spread(model, builders.federated_spread(name, TINY_THEN_BIG, strategy="Adaptive"),
                               replicas=replicas)
    result = loop.recompute(fell, keys, now=clock(), place_batch=unavailable)
    expected = loop.recompute(alone, keys, now=clock())
    assert result.fell_back == "shards did not answer within 1 s"
    assert result.placements == expected.placements and len(result.placements) == 3
    assert fell.placements == alone.placements
    assert sum(p.clusters["tiny"] for p in result.placements.values()) == 4
    assert loop.recompute(alone, keys, now=clock()).fell_back == ""


class _Unanswering(backends.LocalBackend):
    """A parallel backend whose every batch misses its deadline (the Ray shards, hung)."""

    parallel = True

    def place_batch(self, requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        raise backends.PlaceTimeout("the placement shards did not answer 2 requests within 1 s")


def test_the_facade_places_a_round_the_shards_miss_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(T0)
    models = [new_world(clock, {"tiny": 1, "big": 10}) for _ in range(2)]
    keys: set[str] = set()
    for model in models:
        for name in ("a", "b"):
            keys |= add_spread(model, builders.federated_spread(name, TINY_THEN_BIG, strategy="Adaptive"),
                               replicas=3)
    hung = facade.Coordinator(models[0], clock=clock, backend=_Unanswering())
    with caplog.at_level(logging.WARNING, logger="federation.coordinator.facade"):
        result = hung.publish(keys)
    assert result.fell_back == "the placement shards did not answer 2 requests within 1 s"
    assert result.placements == facade.Coordinator(models[1], clock=clock).publish(keys).placements
    assert [r.message for r in caplog.records] == [
        "the placement shards did not answer; this round was placed or checked in the coordinator's process "
        "instead"]
