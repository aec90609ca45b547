"""`federation.core.spare_pods`: which pods starve a subset, and when nothing is removed."""

from __future__ import annotations

import dataclasses
import datetime

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.core import deletion_cost
from federation.core.spare_pods import Share, spare_pods

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def pods_of(*groups: tuple[str | None, int], ready: bool = True, revision: str = "r1",
            ) -> list[deletion_cost.PodView]:
    """Pods by (subset, how many), created a minute apart in that order."""
    found: list[deletion_cost.PodView] = []
    for subset, count in groups:
        for _ in range(count):
            n = len(found)
            found.append(deletion_cost.PodView(
                name=f"p{n:02d}", subset=subset, phase="Running", ready=ready, node_name="n1",
                created=T0 + datetime.timedelta(minutes=n), ready_since=T0 + datetime.timedelta(minutes=n),
                revision=revision))
    return found


CAPPED = [Share("s0", 4, kept=3), Share("s1", 3), Share("s2", 0)]
"""The soak's case: s0 capped at 1 with 3 Ready pods kept (quota 4), s1 given 3, all in one cluster."""


def test_pods_beyond_their_quota_make_room_for_the_subset_that_waits() -> None:
    pods = pods_of(("s0", 7))
    found = spare_pods(pods, shares=CAPPED, replicas=7, target=7)
    assert found.pods == ("p06", "p05", "p04")  # the newest: the ones the ReplicaSet gives up first
    assert dict(found.waiting) == {"s1": 3}


def test_pods_of_a_removed_subset_go_only_beyond_those_the_coordinator_keeps() -> None:
    pods = pods_of(("old", 4))
    found = spare_pods(pods, shares=[Share("s0", 4, leaving=2, kept=2)], replicas=4, target=4)
    assert found.pods == ("p03", "p02")
    assert dict(found.waiting) == {"s0": 2}


def test_no_more_pods_go_than_the_coordinator_keeps_here() -> None:
    # Pods of no subset stand in for s1's 2: nothing is kept in their stead, so the spread needs them.
    pods = pods_of(("s0", 1), (None, 2))
    assert spare_pods(pods, shares=[Share("s0", 1), Share("s1", 2)], replicas=3, target=3).pods == ()
    found = spare_pods(pods, shares=[Share("s0", 2, kept=1), Share("s1", 1)], replicas=3, target=3)
    assert found.pods == ("p02",)
    shares = [Share("s0", 4, kept=2), Share("s1", 3)]
    found = spare_pods(pods_of(("s0", 7)), shares=shares, replicas=7, target=7)
    assert found.pods == ("p06", "p05")


def test_a_subset_that_no_longer_has_the_cluster_keeps_what_the_coordinator_keeps() -> None:
    # s1 lost this cluster (quota 0); its 4 pods are kept in s0's quota until replaced elsewhere.
    pods = pods_of(("s1", 4))
    shares = [Share("s0", 4, leaving=4, kept=4), Share("s1", 0)]
    assert spare_pods(pods, shares=shares, replicas=4, target=4).pods == ()
    found = spare_pods(pods, shares=[Share("s0", 4, leaving=3, kept=3), Share("s1", 0)], replicas=4, target=4)
    assert found.pods == ("p03",)


def test_pods_not_ready_go_first_and_ready_ones_only_while_the_spread_keeps_what_it_needs() -> None:
    # s0 capped at 1, its 3 other pods kept for s1's (quota 4 = 1 + 3 kept); two of its pods never
    # became Ready (say its nodes filled): they go first, then one Ready pod, not more.
    pods = pods_of(("s0", 5)) + pods_of(("s0", 7), ready=False)[5:] + pods_of(("s0", 7), ("s1", 1))[7:]
    shares = [Share("s0", 5, kept=2), Share("s1", 3)]
    found = spare_pods(pods, shares=shares, replicas=8, target=8)
    assert found.pods == ("p06", "p05")  # not Ready, beyond s0's quota: the spread needs 6 Ready
    found = spare_pods(pods, shares=[Share("s0", 4, kept=3), Share("s1", 4)], replicas=8, target=8)
    assert found.pods == ("p06", "p05", "p04")  # one Ready pod of the three beyond s0's quota 4
    pods = pods_of(("s0", 7), ready=False)
    assert spare_pods(pods, shares=[Share("s0", 4), Share("s1", 3)], replicas=7, target=7).pods == (
        "p06", "p05", "p04")  # nothing kept, nothing Ready: not Ready pods go all the same


def test_only_subsets_the_webhook_admits_into_count_as_waiting() -> None:
    pods = pods_of(("s0", 4))
    shares = [Share("s0", 1), Share("s1", 2, kept=0, admits=False), Share("s2", 1, kept=3)]
    assert spare_pods(pods, shares=shares, replicas=4, target=4).pods == ("p03",)
    shares = [Share("s0", 1, kept=3), Share("s1", 3, admits=False)]
    assert spare_pods(pods, shares=shares, replicas=4, target=4).pods == ()


@pytest.mark.parametrize(("pods", "replicas", "target", "shares"), [
    (pods_of(("s0", 7)), 7, 8, CAPPED),  # the member workload's target is not the quotas' sum
    (pods_of(("s0", 7)), 7, None, CAPPED),  # no member workload of ours
    (pods_of(("s0", 6)), 7, 7, CAPPED),  # below its target: the ReplicaSet is creating
    (pods_of(("s0", 7))[:6] + pods_of(("s0", 7), revision="r2")[6:], 7, 7, CAPPED),  # a rollout
    (pods_of(("s0", 4), ("s1", 3)), 7, 7, CAPPED),  # every pod in its quota
    (pods_of(("s0", 7)), 7, 7, [Share("s0", 4, leaving=None, kept=None), Share("s1", 3)]),  # older
    (pods_of(), 0, 0, CAPPED),  # scaled to 0
], ids=["target-differs", "no-workload", "creating", "two-revisions", "in-quota",
        "coordinator-does-not-say", "scaled-to-zero"])
def test_nothing_is_removed_while_anything_moves_or_nothing_starves(
        pods: list[deletion_cost.PodView], replicas: int, target: int | None, shares: list[Share]) -> None:
    assert spare_pods(pods, shares=shares, replicas=replicas, target=target).pods == ()


def test_nothing_is_removed_while_a_pod_terminates() -> None:
    pods = pods_of(("s0", 8))
    pods[0] = deletion_cost.PodView(**{**pods[0].__dict__, "deleting": True})
    assert spare_pods(pods, shares=CAPPED, replicas=7, target=7).pods == ()


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[deletion_cost.PodView], list[Share]]:
    """A member workload at its target: pods of subsets s0..s2, of no subset and of a removed one,
    with quotas (some of them carrying kept outside pods) that add up to the pods."""
    held = draw(st.lists(st.integers(0, 5), min_size=3, max_size=3))
    outside = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    pods = pods_of(("s0", held[0]), ("s1", held[1]), ("s2", held[2]), (None, outside[0]),
                   ("gone", outside[1]))
    unready = draw(st.sets(st.sampled_from([p.name for p in pods]))) if pods else set()
    pods = [dataclasses.replace(p, ready=p.name not in unready) for p in pods]
    total = len(pods)
    cuts = sorted(draw(st.lists(st.integers(0, total), min_size=2, max_size=2)))
    quotas = [cuts[0], cuts[1] - cuts[0], total - cuts[1]]
    kept = [draw(st.integers(0, q)) for q in quotas]
    leaving = [draw(st.integers(0, k)) for k in kept]
    admits = draw(st.lists(st.booleans(), min_size=3, max_size=3))
    return pods, [Share(f"s{i}", quotas[i], leaving=leaving[i], kept=kept[i], admits=admits[i])
                  for i in range(3)]


@hypothesis.given(clusters())
def test_only_pods_no_quota_counts_and_the_coordinator_does_not_keep_are_removed(
        case: tuple[list[deletion_cost.PodView], list[Share]]) -> None:
    pods, shares = case
    found = spare_pods(pods, shares=shares, replicas=len(pods), target=len(pods))
    costs = deletion_cost.deletion_costs(pods, subsets=[s.name for s in shares],
                                         quotas={s.name: s.quota for s in shares})
    in_quota = {p.name for p in pods if p.subset in {s.name for s in shares}
                and costs[p.name] == deletion_cost.in_quota_cost(int(p.subset[1:]), subset_count=3)}
    outside = len(pods) - len(in_quota)
    assert not set(found.pods) & in_quota
    assert len(found.pods) <= max(0, outside - sum(s.leaving or 0 for s in shares))
    needed = sum(s.quota - (s.kept or 0) for s in shares)
    ready = sum(p.ready for p in pods)
    assert ready - sum(p.ready for p in pods if p.name in found.pods) >= min(ready, needed)
    assert len(found.pods) <= sum(max(0, s.quota - (s.leaving or 0) - sum(p.subset == s.name for p in pods))
                                  for s in shares if s.admits)
