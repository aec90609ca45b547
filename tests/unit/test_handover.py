"""The handover rule: replacements are Ready before the originals go.

First the rule itself (`federation.core.handover.keep_ready`) on hand-made placements; then the
coordinator's loop plays the two moves that used to remove Ready pods at once — a member lost for
real that comes back, and a `NoExecute` cordon — with agents reporting their pods as a real agent
does, and checks at every step that the Ready pods the placement keeps never fall below what the
spread needs (all its replicas, minus the lost cluster's while it is away).
"""

from __future__ import annotations

import dataclasses
import datetime

from federation.api import common, names
from federation.coordinator.model import loop, world
from federation.core import handover, placement, status
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
KEY = "shop/web"
LOST_SECONDS = 60


def placed(*subsets: tuple[str, dict[str, int]], replicas: int) -> placement.Placement:
    """A placement of `subsets` (name, clusters) in order, every replica placed."""
    parts = tuple(placement.SubsetPlacement(name=name, replicas=sum(clusters.values()), clusters=clusters,
                                            cap=None, capacity=None, waiting=0, reasons=())
                  for name, clusters in subsets)
    totals: dict[str, int] = {}
    for part in parts:
        for name, count in part.clusters.items():
            totals[name] = totals.get(name, 0) + count
    return placement.Placement(replicas=replicas, unplaced=0, capacity_exhausted=0, subsets=parts,
                               clusters=totals)


# --- the rule ------------------------------------------------------------------------------------


def test_a_placement_that_removes_no_ready_pod_is_returned_as_it_is() -> None:
    result = placed(("a", {"x": 2, "y": 2}), replicas=4)
    assert handover.keep_ready(result, replicas=4, ready={"a": {"x": 2, "y": 1}}) is result


def test_ready_pods_stay_until_their_replacements_are_ready() -> None:
    moved = placed(("a", {"x": 0, "y": 4}), replicas=4)  # x's four moved to y
    kept = handover.keep_ready(moved, replicas=4, ready={"a": {"x": 4}})
    assert kept.subsets[0].clusters == {"x": 4, "y": 4} and kept.subsets[0].kept == 4
    assert kept.clusters == {"x": 4, "y": 4} and kept.replicas == 4 and kept.unplaced == 0
    assert any("x: keeps 4 Ready pods" in reason for reason in kept.subsets[0].reason_texts)
    half = handover.keep_ready(moved, replicas=4, ready={"a": {"x": 4, "y": 2}})
    assert half.subsets[0].clusters == {"x": 2, "y": 4}
    done = handover.keep_ready(moved, replicas=4, ready={"a": {"x": 4, "y": 4}})
    assert done.clusters == {"x": 0, "y": 4} and done.subsets[0].kept == 0


def test_what_can_be_spared_goes_by_the_scale_down_order() -> None:
    # Both subsets lose Ready pods; one can be spared: the last subset's goes, the first one's stays.
    shrunk = placed(("first", {"x": 1}), ("last", {"y": 1}), replicas=2)
    kept = handover.keep_ready(shrunk, replicas=2, ready={"first": {"x": 2}, "last": {"y": 2}})
    # Ready 4, replicas 2: two can be spared — y's surplus first, then x's.
    assert kept.clusters == {"x": 1, "y": 1}
    tight = handover.keep_ready(shrunk, replicas=3, ready={"first": {"x": 2}, "last": {"y": 2}})
    assert tight.subsets[1].clusters == {"y": 1} and tight.subsets[0].clusters == {"x": 2}


def test_a_returned_clusters_pods_are_kept_whole_and_do_not_count_as_ready() -> None:
    result = placed(("a", {"back": 0, "y": 4}), replicas=4)
    kept = handover.keep_ready(result, replicas=4, ready={"a": {"y": 4}}, unverified={"a": {"back": 3}})
    assert kept.subsets[0].clusters == {"back": 3, "y": 4}
    assert any("until its agent reports them again" in reason for reason in kept.subsets[0].reason_texts)


def test_a_cluster_the_spread_no_longer_selects_keeps_its_ready_pods_until_replacements_are_ready() -> None:
    # Deselection is a move: "gone" left the selection; its 4 Ready pods stay (in the subset they
    # ran in) while y's replacements start, and go one by one as y's become Ready.
    result = placed(("a", {"y": 4}), replicas=4)
    kept = handover.keep_ready(result, replicas=4, ready={"a": {"gone": 4}})
    assert kept.subsets[0].clusters == {"y": 4, "gone": 4}
    assert kept.clusters == {"y": 4, "gone": 4} and kept.subsets[0].kept == 4
    assert any("no longer takes this spread's pods" in r for r in kept.subsets[0].reason_texts)
    for ready_on_y in range(5):
        step = handover.keep_ready(result, replicas=4, ready={"a": {"gone": 4, "y": ready_on_y}})
        assert step.clusters["gone"] == 4 - ready_on_y
        assert step.clusters["gone"] + ready_on_y >= 4  # never fewer Ready pods than replicas


def test_a_departed_cluster_with_no_ready_pods_left_to_keep_is_sent_a_zero_share() -> None:
    # Once the replacements are Ready the departed cluster is still listed at 0: it is sent its
    # zero quotas (quota 0, then the removal once it reports no pods), not deleted at once.
    result = placed(("a", {"y": 4}), replicas=4)
    kept = handover.keep_ready(result, replicas=4, ready={"a": {"gone": 2, "y": 4}})
    assert kept.subsets[0].clusters == {"y": 4, "gone": 0} and kept.subsets[0].kept == 0


def test_a_removed_subsets_pods_keep_counting_until_they_are_gone() -> None:
    # Subset "old" was removed from the spec; its 3 Ready pods on x (now counted in no subset)
    # stay until "new"'s replacements on y are Ready, carried by the last subset.
    result = placed(("new", {"x": 0, "y": 3}), replicas=3)
    kept = handover.keep_ready(result, replicas=3, ready={"old": {"x": 3}, "new": {"y": 1}})
    assert kept.subsets[0].clusters == {"x": 2, "y": 3}
    assert kept.clusters == {"x": 2, "y": 3}


def test_pods_in_no_subset_within_their_clusters_share_are_not_kept_twice() -> None:
    # x's share is 3: 2 counted in the subset and 1 in none (the webhook was down). The member
    # workload keeps all 3; nothing is kept above the share (no extra pod is created).
    result = placed(("a", {"x": 3}), replicas=3)
    ready = {"a": {"x": 2}, status.UNASSIGNED: {"x": 1}}
    assert handover.keep_ready(result, replicas=3, ready=ready) is result


def test_an_unverified_departing_cluster_is_kept_whole() -> None:
    # The departing cluster's agent restarted: it has not reported since, so what it held stays.
    result = placed(("a", {"y": 4}), replicas=4)
    kept = handover.keep_ready(result, replicas=4, ready={"a": {"y": 4}}, unverified={"a": {"gone": 3}})
    assert kept.clusters["gone"] == 3


# --- the coordinator's loop ----------------------------------------------------------------------

SUBSETS = [{"name": "onprem", "clusters": ["dc1"], "maxReplicas": 4},
           {"name": "cloud", "clusters": ["aws", "gcp"], "clusterSpread": "Balance"}]


def federation(clock: ManualClock) -> world.World:
    """dc1 (first subset, cap 4), aws and gcp (second subset): 8 replicas, 4/2/2, all Ready."""
    model = world.World(clock)
    for name in ("dc1", "aws", "gcp"):
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    keys = model.upsert_spread(builders.federated_spread(subsets=SUBSETS, lost_seconds=LOST_SECONDS))
    keys |= model.set_target(KEY, replicas=8, template=builders.deployment(namespace="shop"))
    loop.recompute(model, keys, now=clock())
    assert model.placements[KEY].clusters == {"dc1": 4, "aws": 2, "gcp": 2}
    for name, subset, count in (("dc1", "onprem", 4), ("aws", "cloud", 2), ("gcp", "cloud", 2)):
        report(model, clock, name, {subset: count})
    return model


def report(model: world.World, clock: ManualClock, name: str, ready: dict[str, int]) -> None:
    """`name`'s agent reports its pods of the spread: `ready` per subset, all running and Ready."""
    counts = {KEY: {subset: status.ClusterPods(running=n, ready=n) for subset, n in ready.items()}}
    keys = model.pod_counts(name, counts) | model.heartbeat(name)
    loop.recompute(model, keys | loop.failover(model).keys, now=clock())


def kept_ready(model: world.World, ready: dict[str, int]) -> int:
    """Of the Ready pods per cluster, how many the current placement keeps."""
    return sum(min(count, model.placements[KEY].clusters.get(name, 0)) for name, count in ready.items())


def test_a_member_lost_for_real_gets_replacements_first_and_keeps_its_pods_when_it_returns() -> None:
    clock = ManualClock(T0)
    model = federation(clock)
    clock.advance(LOST_SECONDS + 1)
    for name in ("aws", "gcp"):
        model.heartbeat(name)
    loop.recompute(model, loop.failover(model).keys, now=clock())
    # dc1 is lost (one of three: a real loss): its four are replaced in the cloud subset.
    assert model.placements[KEY].clusters == {"dc1": 0, "aws": 4, "gcp": 4}
    report(model, clock, "aws", {"cloud": 4})
    report(model, clock, "gcp", {"cloud": 4})
    # dc1 returns: its pods count again (first subset, within its cap), are kept whole until it
    # reports them, and the cloud's replacements are Ready: nobody is told to drop a needed pod.
    clock.advance(5)
    loop.recompute(model, model.heartbeat("dc1") | loop.failover(model).keys, now=clock())
    assert model.placements[KEY].clusters == {"dc1": 4, "aws": 4, "gcp": 4}
    assert kept_ready(model, {"aws": 4, "gcp": 4}) == 8
    report(model, clock, "dc1", {"onprem": 4})
    # Verified: the surplus goes by the scale-down order (the last subset), dc1 keeps its four.
    assert model.placements[KEY].clusters == {"dc1": 4, "aws": 2, "gcp": 2}
    assert model.placements[KEY].subsets[1].kept == 0


def test_a_noexecute_cordon_moves_replicas_and_the_originals_go_when_the_new_ones_are_ready() -> None:
    clock = ManualClock(T0)
    model = federation(clock)
    taint = common.Taint(key="maintenance", effect="NoExecute")
    loop.recompute(model, model.upsert_cluster("dc1", labels={names.REGION_LABEL: "eu"}, taints=[taint]),
                   now=clock())
    result = model.placements[KEY]
    assert result.subsets[1].clusters == {"aws": 4, "gcp": 4}  # the replacements, placed first
    assert result.clusters["dc1"] == 4 and result.subsets[0].kept == 4  # the originals, kept
    report(model, clock, "aws", {"cloud": 4})
    assert model.placements[KEY].clusters["dc1"] == 2  # two replacements Ready: two originals go
    assert kept_ready(model, {"dc1": 4, "aws": 4, "gcp": 2}) >= 8
    report(model, clock, "gcp", {"cloud": 4})
    assert model.placements[KEY].clusters == {"dc1": 0, "aws": 4, "gcp": 4}


def test_a_scale_down_removes_ready_pods_at_once_when_the_rest_are_ready() -> None:
    clock = ManualClock(T0)
    model = federation(clock)
    loop.recompute(model, model.set_target(KEY, replicas=4, template=builders.deployment(namespace="shop")),
                   now=clock())
    assert model.placements[KEY].clusters == {"dc1": 4, "aws": 0, "gcp": 0}


def test_a_timed_toleration_keeps_replicas_on_a_noexecute_cluster_until_it_ends() -> None:
    clock = ManualClock(T0)
    model = federation(clock)
    tolerating = builders.federated_spread(subsets=SUBSETS, lost_seconds=LOST_SECONDS, cluster_tolerations=[
        {"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}])
    loop.recompute(model, model.upsert_spread(tolerating), now=clock())
    taint = common.Taint(key="maintenance", effect="NoExecute")  # no timeAdded: counted from first seen
    loop.recompute(model, model.upsert_cluster("dc1", labels={names.REGION_LABEL: "eu"}, taints=[taint]),
                   now=clock())
    assert model.placements[KEY].clusters == {"dc1": 4, "aws": 2, "gcp": 2}
    since = clock()
    clock.advance(29)
    # The same taint listed again (a resync of the hub): its time is the one first seen, not now.
    loop.recompute(model, model.upsert_cluster("dc1", labels={names.REGION_LABEL: "eu"}, taints=[taint]),
                   now=clock())
    assert loop.due(model, since=since, now=clock()) == set()
    assert model.placements[KEY].clusters == {"dc1": 4, "aws": 2, "gcp": 2}
    clock.advance(2)
    due = loop.due(model, since=since + datetime.timedelta(seconds=29), now=clock())
    assert due == {KEY}
    loop.recompute(model, due, now=clock())
    result = model.placements[KEY]
    assert result.subsets[1].clusters == {"aws": 4, "gcp": 4}  # the toleration ended: the move starts,
    assert result.subsets[0].kept == 4  # gracefully (dc1's Ready pods stay until the new ones are Ready)


def test_pods_no_rule_places_anywhere_are_not_kept_for_replacements_that_cannot_exist() -> None:
    # The only subset's cap lowered to 0: its three replicas are unplaced, so no replacement will
    # ever be Ready; the Ready pods go (the user's rule), they are not kept for good.
    capped = dataclasses.replace(placed(("a", {"x": 0}), replicas=3), unplaced=3)
    assert handover.keep_ready(capped, replicas=3, ready={"a": {"x": 3}}).clusters == {"x": 0}
    # One of three still placed elsewhere: one Ready pod stays until its replacement is Ready.
    partly = dataclasses.replace(placed(("a", {"x": 0}), ("b", {"y": 1}), replicas=3), unplaced=2)
    kept = handover.keep_ready(partly, replicas=3, ready={"a": {"x": 3}})
    assert kept.clusters == {"x": 1, "y": 1} and kept.subsets[0].kept == 1
