"""Placement of spreads with `topologySpread` and floors (issue 25) through `placement.place`: the
pure rules of `skew_placement` wired into the passes — caps, stability, cordons, Adaptive capacity —
and spreads without these fields placing exactly as before."""

from __future__ import annotations

import datetime
from typing import Any

import hypothesis
from hypothesis import strategies as st

from federation.api import names, spread
from federation.core import placement, spread_status
from tests.support import builders

REGION = names.REGION_LABEL
SNAPSHOT = builders.snapshot(
    builders.member("a1", builders.pool(2), region="a"),
    builders.member("a2", builders.pool(2), region="a"),
    builders.member("b1", builders.pool(2), region="b"),
    builders.member("c1", builders.pool(2), region="c"),
)


def _spec(subsets: list[dict[str, Any]], *, topology: list[dict[str, Any]] | None = None,
          strategy: str = "Fixed") -> spread.FederatedSpreadSpec:
    body: dict[str, Any] = {"targetRef": {"name": "web"}, "subsets": subsets,
                            "scheduleStrategy": {"type": strategy}}
    if topology is not None:
        body["topologySpread"] = topology
    return spread.FederatedSpreadSpec.model_validate(body)


def _by_subset(result: placement.Placement) -> dict[str, int]:
    return {s.name: s.replicas for s in result.subsets}


ORDERED: list[dict[str, Any]] = [{"name": "a", "clusters": ["a1"]}, {"name": "b", "clusters": ["b1"]},
           {"name": "c", "clusters": ["c1"]}]
SKEW_ONE = [{"topologyKey": REGION, "maxSkew": 1}]


def test_max_skew_one_spreads_ordered_subsets_evenly() -> None:
    result = placement.place(_spec(ORDERED, topology=SKEW_ONE), replicas=7, snapshot=SNAPSHOT)
    assert _by_subset(result) == {"a": 3, "b": 2, "c": 2}
    assert result.unplaced == 0


def test_without_the_fields_the_first_subset_takes_all_as_before() -> None:
    result = placement.place(_spec(ORDERED), replicas=7, snapshot=SNAPSHOT)
    assert _by_subset(result) == {"a": 7, "b": 0, "c": 0}


def test_floor_on_a_later_subset_is_honoured_first() -> None:
    subsets: list[dict[str, Any]] = [
        {"name": "a", "clusters": ["a1"]}, {"name": "b", "clusters": ["b1"], "minReplicas": 2}]
    result = placement.place(_spec(subsets), replicas=5, snapshot=SNAPSHOT)
    assert _by_subset(result) == {"a": 3, "b": 2}
    assert "floor 2" in result.subsets[1].reason_texts


def test_min_domains_leaves_replicas_unplaced_naming_the_constraint() -> None:
    subsets: list[dict[str, Any]] = [{"name": "a", "clusters": ["a1"]}, {"name": "b", "clusters": ["b1"]}]
    topology = [{"topologyKey": REGION, "maxSkew": 1, "minDomains": 3}]
    result = placement.place(_spec(subsets, topology=topology), replicas=5, snapshot=SNAPSHOT)
    assert _by_subset(result) == {"a": 1, "b": 1}
    assert result.unplaced == 3
    assert f"topologySpread {REGION} maxSkew 1" in result.subsets[0].reason_texts


def test_running_replicas_stay_and_new_ones_follow_the_rule() -> None:
    current = {"a": {"a1": 3}, "b": {"b1": 1}, "c": {"c1": 1}}
    result = placement.place(_spec(ORDERED, topology=SKEW_ONE), replicas=6, snapshot=SNAPSHOT,
                             current=current)
    assert result.counts() == {"a": {"a1": 3}, "b": {"b1": 2}, "c": {"c1": 1}}


def test_scale_down_keeps_the_spread_and_the_floor() -> None:
    current = {"a": {"a1": 3}, "b": {"b1": 3}, "c": {"c1": 3}}
    subsets = [*ORDERED[:2], {"name": "c", "clusters": ["c1"], "minReplicas": 3}]
    result = placement.place(_spec(subsets, topology=SKEW_ONE), replicas=7, snapshot=SNAPSHOT,
                             current=current)
    assert _by_subset(result) == {"a": 2, "b": 2, "c": 3}


def test_a_capacity_change_alone_moves_no_running_replica() -> None:
    spec = _spec(ORDERED, topology=SKEW_ONE, strategy="Adaptive")
    first = placement.place(spec, replicas=6, snapshot=SNAPSHOT)
    assert first.counts() == {"a": {"a1": 2}, "b": {"b1": 2}, "c": {"c1": 2}}
    smaller = builders.snapshot(*(builders.member(name, builders.pool(1, pods=1), region=name[0])
                                  for name in ("a1", "a2", "b1", "c1")))
    again = placement.place(spec, replicas=6, snapshot=smaller, current=first.rule_counts())
    assert again.counts() == first.counts()


def test_adaptive_capacity_bounds_a_domain_and_the_rest_waits_or_goes_elsewhere() -> None:
    tight = builders.snapshot(
        builders.member("a1", builders.pool(1, pods=2), region="a"),
        builders.member("b1", builders.pool(1, pods=10), region="b"),
        builders.member("c1", builders.pool(1, pods=10), region="c"))
    spec = _spec(ORDERED, topology=[{"topologyKey": REGION, "maxSkew": 1}], strategy="Adaptive")
    result = placement.place(spec, replicas=6, snapshot=tight)
    # a is full at 2: no longer eligible, so b and c go on past it.
    assert _by_subset(result) == {"a": 2, "b": 2, "c": 2}
    more = placement.place(spec, replicas=9, snapshot=tight)
    assert _by_subset(more) == {"a": 2, "b": 4, "c": 3}


def test_cluster_key_makes_each_cluster_a_domain_inside_a_region_subset() -> None:
    subsets = [{"name": "a", "clusters": ["a1", "a2"], "clusterSpread": "Fill"},
               {"name": "b", "clusters": ["b1"]}]
    topology = [{"topologyKey": "fedspread.io/cluster", "maxSkew": 1}]
    result = placement.place(_spec(subsets, topology=topology), replicas=6, snapshot=SNAPSHOT)
    assert result.counts() == {"a": {"a1": 2, "a2": 2}, "b": {"b1": 2}}


def test_same_inputs_same_answer() -> None:
    spec = _spec(ORDERED, topology=SKEW_ONE)
    assert placement.place(spec, replicas=11, snapshot=SNAPSHOT) == placement.place(
        spec, replicas=11, snapshot=SNAPSHOT)


def test_a_floor_that_does_not_fit_waits_in_its_own_subset() -> None:
    tight = builders.snapshot(
        builders.member("a1", builders.pool(1, pods=10), region="a"),
        builders.member("b1", builders.pool(1, pods=1), region="b"))
    subsets: list[dict[str, Any]] = [
        {"name": "a", "clusters": ["a1"]}, {"name": "b", "clusters": ["b1"], "minReplicas": 3}]
    result = placement.place(_spec(subsets, strategy="Adaptive"), replicas=5, snapshot=tight)
    assert _by_subset(result) == {"a": 2, "b": 3}
    assert result.subsets[1].waiting == 2
    assert result.capacity_exhausted == 2
    assert "floor 3: 2 waiting for room" in result.subsets[1].reason_texts


CLUSTERS = ("a1", "a2", "b1", "c1")


@st.composite
def _ordered(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(min_value=1, max_value=3))
    return [{"name": f"s{index}", "clusters": draw(st.lists(st.sampled_from(CLUSTERS), min_size=1, max_size=3,
                                                            unique=True)),
             "clusterSpread": draw(st.sampled_from(["Fill", "Balance", "Capacity"]))}
            for index in range(count)]


@hypothesis.settings(max_examples=100, deadline=None)
@hypothesis.given(subsets=_ordered(),
                  scales=st.lists(st.integers(min_value=0, max_value=25), min_size=1, max_size=6),
                  max_skew=st.integers(min_value=1, max_value=2))
def test_placements_keep_the_skew_through_any_scale_sequence(
        subsets: list[dict[str, Any]], scales: list[int], max_skew: int) -> None:
    spec = _spec(subsets, topology=[{"topologyKey": REGION, "maxSkew": max_skew}])
    used = {name for subset in subsets for name in subset["clusters"]}
    current: dict[str, dict[str, int]] | None = None
    for replicas in scales:
        result = placement.place(spec, replicas=replicas, snapshot=SNAPSHOT, current=current)
        assert result.unplaced == 0 and result.placed == replicas
        per_region: dict[str, int] = {}
        for name in used:
            per_region[name[0]] = per_region.get(name[0], 0) + result.clusters.get(name, 0)
        assert max(per_region.values()) - min(per_region.values()) <= max_skew, result.counts()
        current = result.rule_counts()


def test_the_placed_condition_names_the_constraint_not_the_clusters() -> None:
    subsets: list[dict[str, Any]] = [{"name": "a", "clusters": ["a1"]}, {"name": "b", "clusters": ["b1"]}]
    spec = _spec(subsets, topology=[{"topologyKey": REGION, "maxSkew": 1, "minDomains": 3}])
    result = placement.place(spec, replicas=5, snapshot=SNAPSHOT)
    found = spread_status.spread_status(
        placement=result, spec=spec, generation=1, reports={}, marks=(), previous=None,
        now=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))
    placed = next(c for c in found.conditions if c.type == "Placed")
    assert (placed.status, placed.reason) == ("False", "TopologySpread")
    assert f"topologySpread {REGION} maxSkew 1 admit no further replica" in placed.message
    assert "no usable cluster" not in placed.message
    assert found.unplaced_replicas == 3
