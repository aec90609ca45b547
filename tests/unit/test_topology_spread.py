"""Table tests of the topology-spread rules (issue 25) from KEP-895's definitions, lifted to clusters.

Each cluster stands for a node of the Kubernetes scheduler's filter tests, its region label for the
node's zone, the current placement for the existing pods and one more replica for the pod under
test: where the scheduler's filter passes a node, `Topology.admits` must admit the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from federation.core import topology_spread as ts

REGION = "topology.fedspread.io/region"


def _labels(regions: Mapping[str, str | None]) -> dict[str, dict[str, str]]:
    return {name: ({REGION: region} if region is not None else {}) for name, region in regions.items()}


def _topology(constraint: ts.Constraint, regions: Mapping[str, str | None],
              usable: list[str] | None = None) -> ts.Topology:
    labels = _labels(regions)
    return ts.Topology.of(constraint, labels=labels, usable=usable if usable is not None else list(labels))


def _admitted(topology: ts.Topology, counts: dict[str, int]) -> list[str]:
    return sorted(name for name in topology.domains if topology.admits(name, counts))


THREE_REGIONS = {"a1": "a", "b1": "b", "c1": "c"}


@pytest.mark.parametrize(("counts", "max_skew", "expected"), [
    ({"a1": 1, "b1": 1, "c1": 0}, 1, ["c1"]),  # KEP: 1/1/0 with maxSkew 1 puts the next in the empty domain
    ({"a1": 1, "b1": 1, "c1": 0}, 2, ["a1", "b1", "c1"]),  # maxSkew 2 allows any
    ({"a1": 0, "b1": 0, "c1": 0}, 1, ["a1", "b1", "c1"]),  # nothing placed: every domain
    ({"a1": 3, "b1": 1, "c1": 1}, 1, ["b1", "c1"]),  # 3/1/1: not repaired, not worsened
    ({"a1": 2, "b1": 1, "c1": 3}, 1, ["b1"]),
])
def test_admission_follows_count_plus_one_minus_global_minimum(
        counts: dict[str, int], max_skew: int, expected: list[str]) -> None:
    topology = _topology(ts.Constraint(REGION, max_skew), THREE_REGIONS)
    assert _admitted(topology, counts) == expected


def test_scheduler_filter_nodes_2_1_0_3_by_hostname_lifted_to_clusters() -> None:
    # The scheduler's "pods spread across nodes as 2/1/0/3" cases: only node-x fits with maxSkew 1;
    # node-b and node-x with maxSkew 2.
    clusters = {"node-a": None, "node-b": None, "node-x": None, "node-y": None}
    counts = {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 3}
    one = _topology(ts.Constraint(ts.CLUSTER_KEY, 1), clusters)
    two = _topology(ts.Constraint(ts.CLUSTER_KEY, 2), clusters)
    assert _admitted(one, counts) == ["node-x"]
    assert _admitted(two, counts) == ["node-b", "node-x"]


def test_a_cluster_without_the_key_is_in_no_domain() -> None:
    regions = {"a1": "a", "b1": "b", "bare": None}
    hard = _topology(ts.Constraint(REGION, 1), regions)
    soft = _topology(ts.Constraint(REGION, 1, "ScheduleAnyway"), regions)
    assert not hard.admits("bare", {})
    assert soft.admits("bare", {"a1": 5})
    assert ts.domain_counts({"a1": 2, "bare": 7}, hard.domains) == {"a": 2, "b": 0}


def test_min_domains_over_two_eligible_domains_caps_each_at_max_skew() -> None:
    topology = _topology(ts.Constraint(REGION, 2, min_domains=3), {"a1": "a", "b1": "b"})
    assert topology.minimum({"a": 5, "b": 4}) == 0
    assert topology.admits("a1", {"a1": 1, "b1": 0})
    assert not topology.admits("a1", {"a1": 2, "b1": 0})  # 2 + 1 - 0 > 2
    assert not topology.admits("b1", {"a1": 2, "b1": 2})


def test_min_domains_met_uses_the_real_minimum() -> None:
    topology = _topology(ts.Constraint(REGION, 1, min_domains=2), {"a1": "a", "b1": "b"})
    assert topology.admits("a1", {"a1": 3, "b1": 3})


def test_eligibility_comes_from_usable_clusters() -> None:
    # b's only cluster is not usable: b is not eligible, so its 0 is not the global minimum.
    topology = _topology(ts.Constraint(REGION, 1), {"a1": "a", "a2": "a", "b1": "b"}, usable=["a1", "a2"])
    assert topology.eligible == frozenset({"a"})
    assert topology.admits("a1", {"a1": 4, "a2": 4})
    assert topology.skew({"a1": 4}) == 0


def test_global_minimum_without_eligible_domains_is_zero() -> None:
    assert ts.global_minimum({"a": 3}, [], min_domains=None) == 0


def test_removal_keeps_the_spread_or_does_not_worsen_it() -> None:
    topology = _topology(ts.Constraint(REGION, 1), THREE_REGIONS)
    assert topology.removal_keeps("a1", {"a1": 2, "b1": 1, "c1": 1})
    assert not topology.removal_keeps("b1", {"a1": 2, "b1": 1, "c1": 1})  # 2/0/1: skew 2
    assert topology.removal_keeps("a1", {"a1": 4, "b1": 1, "c1": 1})  # 3/1/1 is better than 4/1/1
    soft = _topology(ts.Constraint(REGION, 1, "ScheduleAnyway"), THREE_REGIONS)
    assert soft.removal_keeps("b1", {"a1": 2, "b1": 1, "c1": 1})


def test_blocking_and_soft_skew_name_and_measure_the_constraints() -> None:
    hard = _topology(ts.Constraint(REGION, 1), THREE_REGIONS)
    soft = _topology(ts.Constraint(REGION, 1, "ScheduleAnyway"), THREE_REGIONS)
    counts = {"a1": 1, "b1": 0, "c1": 0}
    assert ts.blocking([hard, soft], "a1", counts) is hard
    assert ts.blocking([hard, soft], "b1", counts) is None
    assert ts.soft_skew([hard, soft], "a1", counts) == 2
    assert ts.soft_skew([hard, soft], "b1", counts) == 1
    assert hard.constraint.describe() == f"topologySpread {REGION} maxSkew 1"
