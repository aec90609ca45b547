"""Failback (issue 28), `federation.core.failback`: tables from the issue's rules, then properties.

Rules: with WhenRoom a step starts up to maxSurge replicas above the total where the from-scratch
placement has more than now, and removes as many from the lowest-priority pairs (the scale-down
order) once the new ones are Ready; never within the cooldown, never while fewer than `replicas`
are Ready, never beyond a cap; stopped when the new pods are not Ready within
rescheduleCriticalSeconds. Properties: no step takes Ready below `replicas` (a scale-down removes
not-Ready pods first; a finishing step even assumes every removed pod was Ready), no cap is
exceeded with the surge counted, and repeated steps end at the from-scratch placement (where a
cap may equal a subset's count: or stop at CapReached, only where every subset still short is full).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.api import spread
from federation.core import failback

NOW = datetime.datetime(2026, 11, 29, 5, 0, tzinfo=datetime.UTC)
SECOND = datetime.timedelta(seconds=1)


def spec_of(*subsets: dict[str, Any], rebalance: dict[str, Any] | None = None,
            critical: int = 30) -> spread.FederatedSpreadSpec:
    return spread.FederatedSpreadSpec.model_validate({
        "targetRef": {"name": "web"}, "subsets": list(subsets),
        "scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": critical}},
        "rebalance": rebalance if rebalance is not None else {"policy": "WhenRoom"}})


ONPREM_CLOUD = spec_of({"name": "onprem", "clusters": ["dc1"]}, {"name": "cloud", "clusters": ["eu"]})
OVERFLOWED = {"onprem": {"dc1": 2}, "cloud": {"eu": 2}}
HOME = {"onprem": {"dc1": 4}, "cloud": {"eu": 0}}


def decide(spec: spread.FederatedSpreadSpec = ONPREM_CLOUD, **given_: Any) -> failback.Decision:
    args: dict[str, Any] = {"replicas": 4, "current": OVERFLOWED, "from_scratch": HOME,
                            "ready": OVERFLOWED, "now": NOW}
    args.update(given_)
    return failback.next_step(spec, **args)


def test_a_step_starts_one_replica_above_the_total_in_the_preferred_subset() -> None:
    decision = decide()
    assert (decision.action, decision.reason) == ("start", "Started")
    assert decision.placement == {"onprem": {"dc1": 3}, "cloud": {"eu": 2}}
    assert decision.step is not None
    assert decision.step.adds == (failback.Shift("onprem", "dc1", 1),)
    assert decision.step.removes == (failback.Shift("cloud", "eu", 1),)
    assert decision.step.moves == (failback.Move("cloud", "eu", "onprem", "dc1", 1),)
    assert decision.retry_at == NOW + 30 * SECOND


def test_never_moves_nothing_unless_asked_on_demand() -> None:
    never = spec_of({"name": "onprem", "clusters": ["dc1"]}, {"name": "cloud", "clusters": ["eu"]},
                    rebalance={})
    assert (decide(never).action, decide(never).reason) == ("none", "PolicyNever")
    assert decide(never).placement == OVERFLOWED
    assert decide(never, on_demand=True).action == "start"


@pytest.mark.parametrize(("given_", "reason", "message"), [
    ({"current": HOME, "ready": HOME}, "NothingToMove", "matches"),
    ({"last_move": NOW - 100 * SECOND}, "Cooldown", "cooldownSeconds 300"),
    ({"ready": {"onprem": {"dc1": 2}, "cloud": {"eu": 1}}}, "NotReady", "3 of 4 replicas Ready"),
    ({"caps": {"onprem": 2, "cloud": None}}, "CapReached", "subset onprem is at its cap"),
])
def test_why_no_step_starts(given_: dict[str, Any], reason: str, message: str) -> None:
    decision = decide(**given_)
    assert (decision.action, decision.reason, decision.step) == ("none", reason, None)
    assert message in decision.message
    assert decision.placement == given_.get("current", OVERFLOWED)


def test_the_cooldown_ends_cooldown_seconds_after_the_last_move_and_on_demand_skips_it() -> None:
    assert decide(last_move=NOW - 100 * SECOND).retry_at == NOW + 200 * SECOND
    assert decide(last_move=NOW - 300 * SECOND).action == "start"
    assert decide(last_move=NOW - SECOND, on_demand=True).action == "start"


def test_a_cap_bounds_the_surge_with_the_new_pods_counted() -> None:
    decision = decide(caps={"onprem": 3, "cloud": None}, max_surge=2)
    assert decision.placement == {"onprem": {"dc1": 3}, "cloud": {"eu": 2}}


@pytest.mark.parametrize(("max_surge", "placed"), [("50%", 4), ("25%", 3), (5, 4)])
def test_max_surge_is_resolved_against_replicas_and_bounded_by_what_moves(max_surge: int | str,
                                                                           placed: int) -> None:
    spec = spec_of({"name": "onprem", "clusters": ["dc1"]}, {"name": "cloud", "clusters": ["eu"]},
                   rebalance={"policy": "WhenRoom", "maxSurge": max_surge})
    assert decide(spec).placement["onprem"] == {"dc1": placed}


def started(**given_: Any) -> failback.Step:
    step = decide(**given_).step
    assert step is not None
    return step


SURGED = {"onprem": {"dc1": 3}, "cloud": {"eu": 2}}


@pytest.mark.parametrize(("ready", "later", "action", "reason", "placement"), [
    (OVERFLOWED, 10, "none", "WaitingForReady", SURGED),
    (SURGED, 10, "finish", "Finished", {"onprem": {"dc1": 3}, "cloud": {"eu": 1}}),
    (SURGED, 31, "finish", "Finished", {"onprem": {"dc1": 3}, "cloud": {"eu": 1}}),
    (OVERFLOWED, 30, "stop", "NotReadyInTime", OVERFLOWED),
    # The new pod is Ready, an old one is not: removing one could leave 3 Ready of 4.
    ({"onprem": {"dc1": 3}, "cloud": {"eu": 1}}, 10, "none", "NotReady", SURGED),
])
def test_an_in_flight_step_finishes_once_its_pods_are_ready_or_stops_at_the_deadline(
        ready: failback.Counts, later: int, action: str, reason: str, placement: failback.Counts) -> None:
    step = started()
    decision = decide(current=SURGED, ready=ready, in_flight=step, now=NOW + later * SECOND)
    assert (decision.action, decision.reason, decision.placement) == (action, reason, placement)
    assert decision.step == step
    assert decision.completed == (action in ("finish", "stop"))


def test_ready_counts_of_the_pods_already_there_do_not_finish_a_step() -> None:
    # dc1 held one pod that was not Ready: its becoming Ready is not the new pod's.
    ready_before = {"onprem": {"dc1": 1}, "cloud": {"eu": 3}}
    step = started(current={"onprem": {"dc1": 1}, "cloud": {"eu": 3}}, ready=ready_before)
    assert step.ready_before == (failback.Shift("onprem", "dc1", 1),)
    decision = decide(current={"onprem": {"dc1": 2}, "cloud": {"eu": 3}}, in_flight=step,
                      ready={"onprem": {"dc1": 1}, "cloud": {"eu": 3}}, now=NOW + SECOND)
    assert decision.reason == "WaitingForReady"


THREE = spec_of({"name": "a", "clusters": ["dc1"]}, {"name": "b", "clusters": ["aws"]},
                {"name": "c", "clusters": ["gcp"]})


def test_removals_follow_the_scale_down_order_last_subset_first() -> None:
    current = {"a": {"dc1": 1}, "b": {"aws": 2}, "c": {"gcp": 2}}
    step = decide(THREE, replicas=5, current=current, ready=current, max_surge=3,
                  from_scratch={"a": {"dc1": 5}}).step
    assert step is not None
    assert step.removes == (failback.Shift("c", "gcp", 2), failback.Shift("b", "aws", 1))


def test_a_replica_only_moves_up() -> None:
    current = {"a": {"dc1": 4}, "b": {"aws": 0}}
    decision = decide(THREE, current=current, ready=current, from_scratch={"a": {"dc1": 2}, "b": {"aws": 2}})
    assert decision.reason == "NothingToMove"
    # b gains what c loses, a what b loses: only a's gain is a failback from b's and c's.
    current = {"a": {"dc1": 0}, "b": {"aws": 2}, "c": {"gcp": 2}}
    moves = failback.whole_plan(THREE, replicas=4, current=current,
                                from_scratch={"a": {"dc1": 2}, "b": {"aws": 0}, "c": {"gcp": 2}})
    assert moves == [(failback.Move("b", "aws", "a", "dc1", 1),), (failback.Move("b", "aws", "a", "dc1", 1),)]


@pytest.mark.parametrize(("cluster_spread", "moves"), [("Fill", 3), ("Capacity", 0), ("Balance", 0)])
def test_inside_a_subset_only_fill_order_is_priority(cluster_spread: str, moves: int) -> None:
    spec = spec_of({"name": "a", "clusters": ["dc1", "dc2"], "clusterSpread": cluster_spread})
    current = {"a": {"dc1": 1, "dc2": 3}}
    plan = failback.whole_plan(spec, replicas=4, current=current, from_scratch={"a": {"dc1": 4, "dc2": 0}})
    assert sum(move.replicas for step in plan for move in step) == moves


def test_a_whole_plan_chains_surge_sized_steps_to_the_from_scratch_placement() -> None:
    current = {"a": {"dc1": 1}, "b": {"aws": 2}, "c": {"gcp": 2}}
    plan = failback.whole_plan(THREE, replicas=5, current=current, from_scratch={"a": {"dc1": 5}},
                               max_surge=2)
    assert plan == [(failback.Move("c", "gcp", "a", "dc1", 2),),
                    (failback.Move("b", "aws", "a", "dc1", 2),)]
    assert failback.whole_plan(THREE, replicas=5, current=current, from_scratch=current) == []


def test_a_full_subset_cannot_surge_so_a_move_inside_it_waits() -> None:
    spec = spec_of({"name": "a", "clusters": ["dc1", "dc2"], "clusterSpread": "Fill", "maxReplicas": 2})
    current = {"a": {"dc1": 1, "dc2": 1}}
    decision = decide(spec, replicas=2, current=current, ready=current, from_scratch={"a": {"dc1": 2}})
    assert (decision.action, decision.reason) == ("none", "CapReached")
    assert failback.whole_plan(spec, replicas=2, current=current, from_scratch={"a": {"dc1": 2}}) == []


def test_the_steps_keep_every_move_upward_where_the_first_pairing_would_strand_one() -> None:
    # Top shortfall a/dc1 with bottom surplus c/gcp would leave b/aws2's shortfall facing b/aws1's
    # surplus, a move down: the plan pairs them the other way.
    spec = spec_of({"name": "a", "clusters": ["dc1"]},
                   {"name": "b", "clusters": ["aws1", "aws2"], "clusterSpread": "Fill"},
                   {"name": "c", "clusters": ["gcp"]})
    current = {"a": {"dc1": 0}, "b": {"aws1": 1, "aws2": 0}, "c": {"gcp": 1}}
    target = {"a": {"dc1": 1}, "b": {"aws1": 0, "aws2": 1}, "c": {"gcp": 0}}
    plan = failback.whole_plan(spec, replicas=2, current=current, from_scratch=target)
    assert plan == [(failback.Move("c", "gcp", "b", "aws2", 1),),
                    (failback.Move("b", "aws1", "a", "dc1", 1),)]


def test_the_simulate_entry_sums_the_moves_per_pair_of_clusters() -> None:
    current = {"a": {"dc1": 1}, "b": {"aws": 2}, "c": {"gcp": 2}}
    plan = failback.whole_plan(THREE, replicas=5, current=current, from_scratch={"a": {"dc1": 5}})
    assert len(plan) == 4
    assert failback.document("WhenRoom", plan) == {"policy": "WhenRoom", "moves": [
        {"from": "gcp", "to": "dc1", "replicas": 2}, {"from": "aws", "to": "dc1", "replicas": 2}]}
    assert failback.document("Never", []) is None


@pytest.mark.parametrize(("policy", "shown"), [("Never", OVERFLOWED), ("WhenRoom", HOME)])
def test_simulate_shows_the_current_placement_under_never_and_the_moved_one_under_when_room(
        policy: str, shown: dict[str, dict[str, int]]) -> None:
    spec = spec_of({"name": "onprem", "clusters": ["dc1"]}, {"name": "cloud", "clusters": ["eu"]},
                   rebalance={"policy": policy})
    entry, counts = failback.simulated(spec, replicas=4, current=OVERFLOWED, from_scratch=HOME)
    assert entry == {"policy": policy, "moves": [{"from": "eu", "to": "dc1", "replicas": 2}]}
    assert counts == shown
    assert failback.simulated(spec, replicas=4, current=HOME, from_scratch=HOME) == (None, HOME)


def test_after_applies_every_step() -> None:
    steps = [(failback.Move("cloud", "eu", "onprem", "dc1", 1),)] * 2
    assert failback.after(OVERFLOWED, steps) == HOME


# Properties ----------------------------------------------------------------------------------------

Case = tuple[spread.FederatedSpreadSpec, dict[str, dict[str, int]], dict[str, dict[str, int]],
             dict[str, int | None]]
"""A spec, the current placement, the from-scratch one and the caps (`failbacks`)."""


@st.composite
def failbacks(draw: st.DrawFn, *, full: bool = False) -> Case:
    """A spec, a current placement, a from-scratch one reached from it by upward moves, and caps
    both placements stay below (a subset at its cap cannot surge: `test_a_full_subset_cannot_...`);
    with `full`, a cap may also equal the larger of a subset's two counts."""
    subsets: list[dict[str, Any]] = []
    current: dict[str, dict[str, int]] = {}
    for index in range(draw(st.integers(1, 3))):
        clusters = [f"k{index}{j}" for j in range(draw(st.integers(1, 2)))]
        subsets.append({"name": f"s{index}", "clusters": clusters,
                        "clusterSpread": draw(st.sampled_from(["Fill", "Balance", "Capacity"]))})
        current[f"s{index}"] = {name: draw(st.integers(0, 4)) for name in clusters}
    surge = draw(st.integers(1, 4))
    spec = spec_of(*subsets, rebalance={"policy": "WhenRoom", "maxSurge": surge, "cooldownSeconds": 60})
    pairs = [(s["name"], c, i, j if s["clusterSpread"] == "Fill" else 0)
             for i, s in enumerate(subsets) for j, c in enumerate(s["clusters"])]
    target = {s: dict(row) for s, row in current.items()}
    for _ in range(draw(st.integers(0, 8))):
        source = draw(st.sampled_from(pairs))
        above = [p for p in pairs if (p[2], p[3]) < (source[2], source[3])]
        if not above or target[source[0]][source[1]] == 0:
            continue
        to = draw(st.sampled_from(above))
        target[source[0]][source[1]] -= 1
        target[to[0]][to[1]] += 1
    caps: dict[str, int | None] = {}
    for name in current:
        most = max(sum(current[name].values()), sum(target[name].values()))
        caps[name] = draw(st.one_of(st.none(), st.integers(most + (0 if full else 1), most + 2)))
    return spec, current, target, caps


@settings(max_examples=150, deadline=None)
@given(failbacks(), st.data())
def test_steps_keep_ready_and_caps_and_end_at_the_from_scratch_placement(
        case: Case, data: st.DataObject) -> None:
    spec, current, target, caps = case
    # New pods are Ready by the next round or the one after (a round is 20 s, within
    # rescheduleCriticalSeconds; the cooldown spans rounds).
    placed = run_to_the_end(spec, current=current, target=target, caps=caps,
                            late=lambda: data.draw(st.booleans()))
    assert without_zeros(placed) == without_zeros(target)


@settings(max_examples=150, deadline=None)
@given(failbacks(full=True), st.data())
def test_where_a_cap_is_reached_the_steps_stop_only_when_every_subset_still_short_is_full(
        case: Case, data: st.DataObject) -> None:
    """Caps that may equal a subset's count: Ready and the caps hold as above, and the steps end
    at the from-scratch placement or stop at CapReached with nothing in flight, and then only
    where every subset that still has fewer replicas somewhere than from scratch is at its cap
    (a surge pod there would exceed it): never while a move could still start."""
    spec, current, target, caps = case
    placed = run_to_the_end(spec, current=current, target=target, caps=caps,
                            late=lambda: data.draw(st.booleans()), stop_at_cap=True)
    if without_zeros(placed) == without_zeros(target):
        return
    short = {s for s, row in target.items() for c, n in row.items() if placed.get(s, {}).get(c, 0) < n}
    assert short, (placed, target)
    for name in short:
        cap = caps[name]
        assert cap is not None and sum(placed.get(name, {}).values()) == cap, (name, placed, target, caps)


def test_a_move_into_a_full_subset_waits_for_the_move_out_of_it_not_forever() -> None:
    # Found by the property above: the first step's replica from s2 goes to s1/k10 and fills s1 to
    # its cap; s1/k11 -> s1/k10 then needs a surge pod s1 has no room for, but s1/k11 -> s0/k00
    # needs none there and makes that room. Every step used to stop at CapReached.
    spec = spec_of({"name": "s0", "clusters": ["k00"], "clusterSpread": "Fill"},
                   {"name": "s1", "clusters": ["k10", "k11"], "clusterSpread": "Fill"},
                   {"name": "s2", "clusters": ["k20"], "clusterSpread": "Fill"},
                   rebalance={"policy": "WhenRoom", "maxSurge": 1, "cooldownSeconds": 60})
    current = {"s0": {"k00": 0}, "s1": {"k10": 0, "k11": 2}, "s2": {"k20": 1}}
    target = {"s0": {"k00": 1}, "s1": {"k10": 2, "k11": 0}, "s2": {"k20": 0}}
    caps: dict[str, int | None] = {"s0": None, "s1": 3, "s2": None}
    placed = run_to_the_end(spec, current=current, target=target, caps=caps, late=lambda: False)
    assert without_zeros(placed) == without_zeros(target)
    plan = failback.whole_plan(spec, replicas=3, current=current, from_scratch=target, caps=caps)
    assert plan == [(failback.Move("s2", "k20", "s1", "k10", 1),),
                    (failback.Move("s1", "k11", "s0", "k00", 1),),
                    (failback.Move("s1", "k11", "s1", "k10", 1),)]
    assert without_zeros(failback.after(current, plan)) == without_zeros(target)


def run_to_the_end(spec: spread.FederatedSpreadSpec, *, current: dict[str, dict[str, int]],
                   target: dict[str, dict[str, int]], caps: dict[str, int | None],
                   late: Callable[[], bool], stop_at_cap: bool = False) -> failback.Counts:
    """Round after round of `next_step` until NothingToMove (or, with `stop_at_cap`, CapReached
    with no step in flight), checking each round keeps Ready and the caps; `late()` says whether a
    round's new pods are not Ready yet. The placement at the end."""
    replicas = sum(sum(row.values()) for row in current.values())
    placed: failback.Counts = current
    ready: failback.Counts = current
    now, last_move, step = NOW, None, None
    for _ in range(4 * replicas + 4):
        decision = failback.next_step(spec, replicas=replicas, current=placed, from_scratch=target,
                                      ready=ready, now=now, last_move=last_move, in_flight=step, caps=caps)
        # A ReplicaSet scaled down removes its not-Ready pods first (deletion_cost's model).
        ready_lost = sum(max(0, ready.get(s, {}).get(c, 0) - decision.placement.get(s, {}).get(c, 0))
                         for s, row in placed.items() for c in row)
        assert sum(sum(row.values()) for row in ready.values()) - ready_lost >= replicas
        for name, cap in caps.items():
            assert cap is None or sum(decision.placement.get(name, {}).values()) <= cap
        if decision.action == "start":
            assert decision.step is not None and decision.step.surge <= spec.rebalance.surge(replicas)
            assert last_move is None or now >= last_move + 60 * SECOND
            for move in decision.step.moves:
                assert move.replicas > 0 and rank(spec, move.to_subset, move.to_cluster) < rank(
                    spec, move.from_subset, move.from_cluster), f"a move that does not go up: {move}"
        before, placed = placed, decision.placement
        step = decision.step if decision.action in ("start", "none") else None
        if decision.completed:
            last_move = now
        if decision.reason == "NothingToMove" or (stop_at_cap and decision.reason == "CapReached"):
            return placed
        is_late = late()
        ready = {s: {c: min(n, before.get(s, {}).get(c, 0)) if is_late else n for c, n in row.items()}
                 for s, row in placed.items()}
        now += 20 * SECOND
    pytest.fail(f"the failback did not end: {decision.reason}: {decision.message}")


def rank(spec: spread.FederatedSpreadSpec, subset: str, cluster: str) -> tuple[int, int]:
    """A pair's priority as the rules give it: the subset's index, then a Fill subset's cluster
    index (the generated specs name their clusters; Balance and Capacity clusters are equals)."""
    index = next(i for i, s in enumerate(spec.subsets) if s.name == subset)
    chosen = spec.subsets[index]
    fill = chosen.cluster_spread == "Fill" and chosen.clusters is not None
    return (index, chosen.clusters.index(cluster) if fill and chosen.clusters else 0)


def without_zeros(counts: failback.Counts) -> dict[str, dict[str, int]]:
    return {s: {c: n for c, n in row.items() if n} for s, row in counts.items()}
