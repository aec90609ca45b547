"""What the agents' pod-count reports prove ("unknown is not zero", `model/pod_reports.py`).

A report is evidence only for the spreads its agent lists as `assigned`; a reconnect makes a
cluster's counts unverified until such a report; after a removal, a report still in flight says
nothing of that spread until the cluster is sent it again.
"""

from __future__ import annotations

from federation.coordinator.model import pod_reports
from federation.core import placement, status

KEY = "shop/web"


def pods(running: int) -> dict[str, status.ClusterPods]:
    return {"a": status.ClusterPods(running=running, ready=running, pending=0, unschedulable=0, creating=0,
                                    deleting=0)}


def test_a_restarted_agents_empty_report_is_not_no_pods() -> None:
    reports = pod_reports.PodReports()
    reports.report("dc1", {KEY: pods(2)}, assigned=[KEY])
    assert reports.verified("dc1", KEY) and reports.ready_for(KEY, usable={"dc1"}) == {"a": {"dc1": 2}}
    reports.reconnected("dc1")  # the agent restarted: its first report lists nothing
    assert reports.report("dc1", {}, assigned=[]) is None
    assert not reports.verified("dc1", KEY)
    assert reports.holding(KEY) == {"dc1"}  # its last counts stand
    assert reports.ready_for(KEY, usable={"dc1"}) == {}  # but prove nothing Ready
    assert reports.unverified_for(KEY, usable={"dc1"}) == {"a": {"dc1": 2}}  # kept whole
    assert reports.report("dc1", {KEY: pods(2)}, assigned=[KEY]) == {KEY}  # verified again
    assert reports.unverified_for(KEY, usable={"dc1"}) == {}


def test_a_listed_spread_with_no_counts_has_no_pods() -> None:
    reports = pod_reports.PodReports()
    reports.report("dc1", {KEY: pods(2)}, assigned=[KEY])
    assert reports.report("dc1", {}, assigned=[KEY]) == {KEY}
    assert reports.holding(KEY) == frozenset()


def test_a_report_in_flight_after_a_removal_says_nothing_of_that_spread() -> None:
    reports = pod_reports.PodReports()
    reports.report("dc1", {KEY: pods(2)}, assigned=[KEY])
    assert reports.removed("dc1", KEY) == {KEY}
    reports.report("dc1", {KEY: pods(2)}, assigned=[KEY])  # made before the removal was applied
    assert reports.holding(KEY) == frozenset()
    reports.sent("dc1", KEY)  # assigned again: its reports count again
    reports.report("dc1", {KEY: pods(1)}, assigned=[KEY])
    assert reports.holding(KEY) == {"dc1"}


def test_a_departing_unverified_cluster_holds_its_pending_pods_too() -> None:
    """A cluster no subset selects any more, whose workload was released (a spread deleted under
    `Orphan`, created again) and whose pods never ran: kept with its pending pods, it is sent the
    spread and so reports it; held by its running pods alone, it held nothing, was never sent the
    spread, and its workload stayed unmanaged for good. A selected cluster holds running pods."""
    reports = pod_reports.PodReports()
    stuck = {"a": status.ClusterPods(running=0, ready=0, pending=1, unschedulable=1, creating=0, deleting=0)}
    reports.report("aws", {KEY: stuck}, assigned=[KEY])
    reports.released("aws", KEY)  # an orphaning removal: unverified until it is sent the spread again
    assert reports.holders(KEY) == {"aws"}
    assert reports.unverified_for(KEY, usable={"aws"}) == {}
    assert reports.unverified_for(KEY, usable={"aws"}, departing={"aws"}) == {"a": {"aws": 1}}


def test_a_restarted_coordinator_holds_the_recorded_share_until_the_cluster_reports() -> None:
    reports = pod_reports.PodReports()
    reports.recorded(KEY, {"a": {"dc1": 3}})
    assert reports.holders(KEY) == {"dc1"}
    assert reports.unverified_for(KEY, usable={"dc1"}) == {"a": {"dc1": 3}}
    reports.report("dc1", {KEY: pods(3)}, assigned=[KEY])
    assert reports.unverified_for(KEY, usable={"dc1"}) == {}


def test_an_agent_that_does_not_list_verifies_every_spread() -> None:
    reports = pod_reports.PodReports()
    reports.reconnected("dc1")
    reports.report("dc1", {KEY: pods(1)})
    assert reports.verified("dc1", KEY) and reports.verified("dc1", "other/spread")


def test_pods_of_a_renamed_subset_are_the_share_they_serve_not_more() -> None:
    """Regression (`make soak`): a cluster ran 2 pods labelled `a`; an edit renamed that subset `b`
    (same clusters), so its share of 2 is in `b` while its pods still say `a`. Lost and back, it
    holds 2 — the larger total of report and share — not 2 in `a` plus 2 in `b` (the handover kept
    4 and the placement grew by the phantom pods)."""
    reports = pod_reports.PodReports()
    reports.report("dc1", {KEY: pods(2)}, assigned=[KEY])
    reports.recorded(KEY, {"b": {"dc1": 2}})  # (a lost cluster's share: `remember_away`, the same store)
    reports.reconnected("dc1")
    assert reports.held_by("dc1", KEY) == {"a": 2}
    assert reports.unverified_for(KEY, usable={"dc1"}) == {"a": {"dc1": 2}}
    reports.recorded(KEY, {"b": {"dc1": 3}})  # a share larger than the pods reported: the share
    assert reports.held_by("dc1", KEY) == {"b": 3}


def _placed(per_cluster: dict[str, int]) -> placement.Placement:
    subset = placement.SubsetPlacement(name="a", replicas=sum(per_cluster.values()), clusters=per_cluster,
                                       cap=None, capacity=None, waiting=0, reasons=())
    return placement.Placement(replicas=subset.replicas, unplaced=0, capacity_exhausted=0, subsets=(subset,),
                               clusters=dict(per_cluster))


def test_a_lost_cluster_holds_what_it_was_sent_not_what_was_placed_while_it_was_away() -> None:
    reports = pod_reports.PodReports()
    reports.sent("dc1", KEY, quotas={"a": 2})
    reports.remember_away(KEY, _placed({"dc1": 5, "aws": 1}), lost=["dc1", "aws"])
    # dc1 runs toward the 2 it was sent; aws, disconnected when the share was placed, runs nothing
    assert reports.unverified_for(KEY, usable={"dc1", "aws"}) == {"a": {"dc1": 2}}
    assert reports.holders(KEY) == {"dc1"}
    reports.removed("dc1", KEY)  # a removal sent: what dc1 was sent, and what it held, no longer stand
    reports.remember_away(KEY, _placed({"dc1": 5}), lost=["dc1"])
    assert reports.held_by("dc1", KEY) == {}
    reports.forget("dc1")
    reports.remember_away(KEY, _placed({"dc1": 5}), lost=["dc1"])
    assert reports.holders(KEY) == frozenset()


def test_a_deleted_spreads_hold_on_a_lost_cluster_stays_for_a_re_creation() -> None:
    """The lost cluster was sent no removal: its workload runs on, and a spread created again
    under the key adopts it (what it holds counts) until the cluster is sent a removal."""
    reports = pod_reports.PodReports()
    reports.sent("dc1", KEY, quotas={"a": 3})
    reports.lost("dc1")
    reports.remember_away(KEY, _placed({"dc1": 3}), lost=["dc1"])
    assert reports.held_by("dc1", KEY) == {"a": 3}  # (the spread is deleted now: nothing changes)
    assert reports.unverified_for(KEY, usable={"dc1"}) == {"a": {"dc1": 3}}
    reports.removed("dc1", KEY)
    assert reports.holders(KEY) == frozenset()



def test_a_rolling_members_surge_is_not_ready_pods_to_keep() -> None:
    """Pods of two template revisions in a subset (the member workload rolls): its Ready pods count
    at most the quota last sent there, so the handover does not keep the rollout's surge by raising
    the share. One revision: every Ready pod counts, as before."""
    reports = pod_reports.PodReports()
    reports.sent("dc1", KEY, quotas={"a": 3})
    rolling = status.ClusterPods(running=4, ready=4, revisions=(("new", 1), ("old", 3)))
    reports.report("dc1", {KEY: {"a": rolling}}, assigned=[KEY])
    assert reports.ready_for(KEY, usable={"dc1"}) == {"a": {"dc1": 3}}
    settled = status.ClusterPods(running=4, ready=4, revisions=(("new", 4),))
    reports.report("dc1", {KEY: {"a": settled}}, assigned=[KEY])
    assert reports.ready_for(KEY, usable={"dc1"}) == {"a": {"dc1": 4}}


def test_a_hello_count_above_what_is_known_is_held_until_a_report_verifies_it() -> None:
    """Unknown is not zero: the Hello's pods per subset raise what an unverified cluster holds in
    each subset (never another subset's, never lower), and a verifying report replaces them."""
    reports = pod_reports.PodReports()
    reports.recorded(KEY, {"a": {"dc1": 1}, "b": {"dc1": 2}})
    assert reports.announced("dc1", KEY, {"a": 3, "b": 1})
    assert reports.unverified_for(KEY, usable={"dc1"}) == {"a": {"dc1": 3}, "b": {"dc1": 2}}
    assert not reports.announced("dc1", KEY, {"a": 2, "b": 2})  # no more than held: no news
    reports.report("dc1", {KEY: pods(2)}, assigned=[KEY])
    assert reports.unverified_for(KEY, usable={"dc1"}) == {}
    assert not reports.announced("dc1", KEY, {"a": 9})  # verified: the report stands


def test_a_hello_count_with_nothing_held_is_held_as_counted() -> None:
    reports = pod_reports.PodReports()
    reports.reconnected("dc1")
    assert not reports.announced("dc1", KEY, {})
    assert reports.announced("dc1", KEY, {"b": 2})
    assert reports.holders(KEY) == {"dc1"}
    assert reports.unverified_for(KEY, usable={"dc1"}) == {"b": {"dc1": 2}}
