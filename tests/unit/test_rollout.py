"""Rollouts that keep the spread (issue 28): `federation.core.rollout` and the multi-revision
deletion costs of `federation.core.deletion_cost`.

Rules: a pod takes the first subset whose count of its own revision is below its quota, among those
whose pods of all revisions are below quota + surge; old-revision pods cost less than new ones, and
inside a revision the spread's order is reversed (over-quota first). A model of a Deployment's
rolling update in one cluster (create while below replicas + surge, then scale the old ReplicaSet
down by the modelled 1.22 ranking) checks the whole rollout: every new pod gets a subset, no subset
is ever above quota + surge, and the rollout ends with every subset at its quota.
"""

from __future__ import annotations

import datetime

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.core import deletion_cost as dc
from federation.core import quotas, rollout

NOW = datetime.datetime(2026, 11, 29, 5, 0, tzinfo=datetime.UTC)


def table(**quota: int) -> list[quotas.SubsetQuota]:
    return [quotas.SubsetQuota(subset=name, index=i, quota=q) for i, (name, q) in enumerate(quota.items())]


AB = table(a=2, b=2)


@pytest.mark.parametrize(("counts", "surge", "chosen"), [
    # Old pods fill both subsets: the plain rule finds none, the revision rule the first (kruise#834).
    ({"old": {"a": 2, "b": 2}}, 1, "a"),
    # a has its new pod and is at quota + surge: the next new pod goes to b, not beyond a's bound.
    ({"old": {"a": 2, "b": 1}, "new": {"a": 1}}, 1, "b"),
    # With a surge of 2, a still has room under its bound.
    ({"old": {"a": 2, "b": 0}, "new": {"a": 1}}, 2, "a"),
    # a has its share of new pods: b, whatever old pods remain in a.
    ({"old": {"a": 1}, "new": {"a": 2}}, 1, "b"),
    # Every subset has its share of the new revision: no subset (as the plain rule says when full).
    ({"old": {"a": 1}, "new": {"a": 2, "b": 2}}, 1, None),
    # One revision: the plain rule's answer.
    ({"new": {"a": 1, "b": 0}}, 1, "a"),
    ({"new": {"a": 2, "b": 1}}, 1, "b"),
])
def test_a_new_revision_pod_takes_the_first_subset_below_its_share(
        counts: rollout.RevisionCounts, surge: int, chosen: str | None) -> None:
    assert rollout.choose(AB, counts=counts, revision="new", surge=surge, adaptive=False) == chosen


def test_with_one_revision_the_choice_is_the_plain_one() -> None:
    for a in range(4):
        for b in range(4):
            plain = quotas.choose_subset(AB, assigned={"a": a, "b": b}, adaptive=False)
            assert rollout.choose(AB, counts={"r": {"a": a, "b": b}}, revision="r", surge=1,
                                  adaptive=False) == plain


def test_marks_and_a_retried_admission_are_kept_as_in_the_plain_rule() -> None:
    counts = {"old": {"a": 2, "b": 2}}
    for adaptive, chosen in ((True, "b"), (False, "a")):
        assert rollout.choose(AB, counts=counts, revision="new", surge=1, adaptive=adaptive,
                              unschedulable={"a"}) == chosen
    assert rollout.choose(AB, counts=counts, revision="new", surge=1, adaptive=False, previous="b") == "b"


@pytest.mark.parametrize(("max_surge", "replicas", "surge"), [(None, 10, 3), (None, 3, 1), ("50%", 5, 3),
                                                             (2, 9, 2), (0, 9, 0), ("0%", 4, 0)])
def test_the_surge_is_resolved_as_the_deployment_controller_does(
        max_surge: int | str | None, replicas: int, surge: int) -> None:
    assert rollout.surge_here(max_surge, replicas) == surge


def test_over_bound_and_revision_counts() -> None:
    counts = rollout.revision_counts([("a", "old"), ("a", "old"), ("a", "new"), ("a", "new"), ("b", "new"),
                                      (None, "new"), ("b", None)])
    assert counts == {"old": {"a": 2}, "new": {"a": 2, "b": 1}}
    assert rollout.over_bound(AB, counts=counts, surge=1) == {"a": 1}
    assert rollout.over_bound(AB, counts=counts, surge=2) == {}


def view(name: str, subset: str | None, revision: str | None, *, age: int = 10) -> dc.PodView:
    return dc.PodView(name=name, subset=subset, phase="Running", ready=True, node_name="n1",
                      created=NOW - datetime.timedelta(minutes=age), revision=revision)


SUBSETS = ("a", "b", "c")


def test_old_revisions_cost_less_than_new_and_inside_one_the_spread_order_is_reversed() -> None:
    pods = [view("new-a", "a", "r2"), view("new-c", "c", "r2"), view("old-a", "a", "r1"),
            view("old-b", "b", "r1"), view("old-c", "c", "r1"), view("older-a", "a", "r0"),
            view("stray", None, "r2"), view("unknown-a", "a", None)]
    costs = dc.revision_deletion_costs(pods, subsets=SUBSETS, quotas={"a": 2, "b": 1, "c": 1},
                                       revisions=["r2", "r1", "r0"])
    band = dc.revision_band(3)
    assert band == 800
    # The newest revision keeps today's costs.
    assert (costs["new-a"], costs["new-c"], costs["stray"]) == (300, 100, -400)
    # r1: a's quota less its new pod leaves 1 (old-a in quota), c's new pod leaves c none: old-c is
    # replaced, and replaced pods cost less in spec order (c, the third of three: -100).
    assert (costs["old-a"], costs["old-b"], costs["old-c"]) == (300 - band, 200 - band, -100 - band)
    # r0: a's quota is used up by then (replaced, the first subset: -300); a pod of no known
    # revision is a band below the oldest, replaced too.
    assert (costs["older-a"], costs["unknown-a"]) == (-300 - 2 * band, -300 - 3 * band)
    order = sorted(costs, key=costs.__getitem__)
    assert order.index("old-a") > order.index("old-b") > order.index("old-c")
    assert max(costs[p] for p in ("old-a", "old-b", "old-c")) < min(
        costs[p] for p in ("new-a", "new-c", "stray"))


def test_one_revision_or_none_given_gives_the_plain_costs() -> None:
    pods = [view("a1", "a", "r"), view("a2", "a", "r"), view("b1", "b", None), view("x", None, "r")]
    plain = dc.deletion_costs(pods, subsets=SUBSETS, quotas={"a": 1, "b": 1, "c": None})
    assert dc.revision_deletion_costs(pods, subsets=SUBSETS, quotas={"a": 1, "b": 1, "c": None},
                                      revisions=[]) == plain
    only = [view("a1", "a", "r"), view("a2", "a", "r"), view("x", None, "r")]
    assert dc.revision_deletion_costs(only, subsets=SUBSETS, quotas={"a": 1, "b": 1, "c": None},
                                      revisions=["r"]) == dc.deletion_costs(
        only, subsets=SUBSETS, quotas={"a": 1, "b": 1, "c": None})


def test_the_lowest_band_stays_within_int32() -> None:
    pods = [view(f"p{i}", "s0", f"r{i}") for i in range(12)]
    subsets = [f"s{i}" for i in range(1000)]
    costs = dc.revision_deletion_costs(pods, subsets=subsets, quotas={},
                                       revisions=[f"r{i}" for i in range(12)])
    assert min(costs.values()) == 100 * 1000 - (dc.REVISION_BANDS - 1) * dc.revision_band(1000)
    assert dc.parse_cost(str(min(costs.values()))) is not None


@hypothesis.settings(max_examples=120, deadline=None)
@hypothesis.given(st.lists(st.integers(0, 4), min_size=1, max_size=4), st.integers(0, 3))
def test_a_modelled_rolling_update_keeps_every_subset_within_quota_plus_surge(
        shares: list[int], surge: int) -> None:
    hypothesis.assume(sum(shares) > 0)
    subsets = [f"s{i}" for i in range(len(shares))]
    quota_table = [quotas.SubsetQuota(subset=name, index=i, quota=q) for i, (name, q) in
                   enumerate(zip(subsets, shares, strict=True))]
    replicas = sum(shares)
    pods = [view(f"old-{name}-{k}", name, "old", age=100) for name, q in zip(subsets, shares, strict=True)
            for k in range(q)]
    created = 0
    for _ in range(4 * replicas + 4):
        new = [p for p in pods if p.revision == "new"]
        old = [p for p in pods if p.revision == "old"]
        if not old and len(new) == replicas:
            break
        # maxSurge `surge`, maxUnavailable 0 (1 with no surge: the controller's own rule); pods are
        # Ready at once, so the controller creates while it may and otherwise scales the old down.
        if len(pods) < replicas + surge and len(new) < replicas:
            counts = rollout.revision_counts((p.subset, p.revision) for p in pods)
            chosen = rollout.choose(quota_table, counts=counts, revision="new", surge=surge, adaptive=False)
            assert chosen is not None
            created += 1
            pods.append(view(f"new-{created}", chosen, "new", age=0))
        else:
            # The old ReplicaSet scales down by one; its own pods are its candidates.
            quota_of = dict(zip(subsets, shares, strict=True))
            costs = dc.revision_deletion_costs(pods, subsets=subsets, quotas=quota_of,
                                               revisions=["new", "old"])
            victim = dc.scale_down_victims(old, costs=costs, count=1)[0]
            assert costs[victim] == min(costs[p.name] for p in old)
            pods = [p for p in pods if p.name != victim]
        assert rollout.over_bound(quota_table, counts=rollout.revision_counts(
            (p.subset, p.revision) for p in pods), surge=surge) == {}
    else:
        pytest.fail("the rollout did not end")
    assert rollout.revision_counts((p.subset, p.revision) for p in pods) == {
        "new": {name: q for name, q in zip(subsets, shares, strict=True) if q}}


# --- what the agent reads of its member workload and pods -----------------------------------------


@pytest.mark.parametrize(("spec", "kind", "replicas", "surge"), [
    ({}, "Deployment", 10, 3),  # the default 25%, rounded up
    ({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}}, "Deployment", 10, 2),
    ({"strategy": {"rollingUpdate": {"maxSurge": "10%"}}}, "Deployment", 11, 2),
    ({"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}}, "Deployment", 4, 0),
    ({"strategy": {"type": "Recreate"}}, "Deployment", 10, 0),
    ({"strategy": {"rollingUpdate": {"maxSurge": "lots"}}}, "Deployment", 4, 1),  # refused: default
    ({"strategy": {"rollingUpdate": {"maxSurge": True}}}, "Deployment", 4, 1),
    ({"updateStrategy": {"type": "RollingUpdate"}}, "StatefulSet", 10, 0),
    ({}, "ReplicaSet", 10, 0),
    ({}, "Job", 10, 0),
])
def test_the_surge_of_a_member_workload(spec: dict[str, object], kind: str, replicas: int,
                                        surge: int) -> None:
    assert rollout.workload_surge(spec, kind=kind, replicas=replicas) == surge


@pytest.mark.parametrize(("labels", "revision"), [
    ({"pod-template-hash": "5d9c7f"}, "5d9c7f"),  # a Deployment's pod
    ({"controller-revision-hash": "db-7f9d"}, "db-7f9d"),  # a StatefulSet's pod
    ({"pod-template-hash": "5d9c7f", "controller-revision-hash": "x"}, "5d9c7f"),
    ({"app": "web"}, ""),  # a ReplicaSet's pod: one revision
    (None, ""),
])
def test_the_revision_of_a_pod(labels: dict[str, str] | None, revision: str) -> None:
    assert rollout.pod_revision(labels) == revision


def test_replaced_old_pods_go_first_subset_first() -> None:
    # The sandbox's dc1 mid-rollout: a (3) has its 3 new pods Ready and one old pod left; c (2) has
    # its 2 new pods starting and its 2 old ones. The old pod to remove first is a's (its
    # replacement serves), not c's, whose replacements do not yet; the costs cannot wait for c's to
    # be Ready (the controller acts first), so replaced pods go in spec order, as new pods came.
    def pod(name: str, subset: str, revision: str, *, ready: bool = True) -> dc.PodView:
        return dc.PodView(name=name, subset=subset, phase="Running", ready=ready, node_name="n1",
                          created=NOW, revision=revision)

    pods = [pod("new-a1", "a", "r2"), pod("new-a2", "a", "r2"), pod("new-a3", "a", "r2"),
            pod("new-b", "b", "r2"), pod("new-c1", "c", "r2", ready=False),
            pod("new-c2", "c", "r2", ready=False), pod("old-a", "a", "r1"), pod("old-c1", "c", "r1"),
            pod("old-c2", "c", "r1")]
    costs = dc.revision_deletion_costs(pods, subsets=SUBSETS, quotas={"a": 3, "b": 1, "c": 2},
                                       revisions=["r2", "r1"])
    old = [p for p in pods if p.revision == "r1"]
    assert dc.scale_down_victims(old, costs=costs, count=1) == ["old-a"]
    assert costs["old-a"] < costs["old-c1"] == costs["old-c2"]
    assert costs["old-c1"] < min(costs[p.name] for p in pods if p.revision == "r2")
    plain = dc.deletion_costs(old, subsets=SUBSETS, quotas={"a": 0, "b": 0, "c": 0})
    assert dc.scale_down_victims(old, costs=plain, count=1) == ["old-c1"], "the plain order: c's first"
