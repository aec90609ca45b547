"""Per-revision subset counts while a rollout runs (issue 28), layer by layer.

Why: during a rolling update the spread's status should say how far each subset has rolled
(`kubectl describe`). The agent counts each subset's pods per template revision from its admission
tally, sends them in `SubsetPodCounts.revisions`, the coordinator decodes them into
`ClusterPods.revisions`, and the status shows `subsetStatuses[].revisions`, summed over the
clusters, only while pods of more than one revision run anywhere.
"""

from __future__ import annotations

import datetime

import pytest

from agents import bookkeeping, outbox, pod_ledger
from federation.coordinator.wire import convert, inbound
from federation.core import placement, spread_status, status
from federation.rpc import agent_pb2, assignment
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2026, 11, 29, 11, 0, tzinfo=datetime.UTC)
SPREAD = "shop/web"


def record(name: str, subset: str, revision: str, *, deleting: bool = False) -> pod_ledger.PodRecord:
    return pod_ledger.PodRecord(name=name, subset=subset, revision=revision, phase="Running", ready=True,
                                 node_name="n1", created=T0, deleting=deleting)


def rolling_book() -> bookkeeping.Bookkeeping:
    """Subsets a (3) and b (2), mid-rollout: a holds old o1, o2 and new n1, n2 (one being created);
    b holds old o3, o4 and a deleted old pod."""
    book = bookkeeping.Bookkeeping(clock=ManualClock(T0))
    rules = (assignment.SubsetRule(name="a", index=0, quota=3),
             assignment.SubsetRule(name="b", index=1, quota=2))
    book.set_assignment(assignment.Assignment(
        spread=SPREAD, generation=1, namespace="shop", workload="web", replicas=5, template={},
        template_revision="r2", subsets=rules, subset_count=2))
    book.observe(SPREAD, [record("o1", "a", "old"), record("o2", "a", "old"), record("n1", "a", "new"),
                          record("o3", "b", "old"), record("o4", "b", "old"),
                          record("o5", "b", "old", deleting=True)])
    rule = book.admit(SPREAD, "n2", revision="new")
    assert rule is not None and rule.name == "a"
    return book


def test_the_agent_counts_each_subsets_pods_per_revision() -> None:
    counts = rolling_book().counts(SPREAD)
    assert counts["a"].revisions == (("new", 2), ("old", 2))
    assert counts["b"].revisions == (("old", 2),), "a pod being deleted holds no quota"
    assert counts["a"].active == 4 and counts["b"].deleting == 1


def test_pods_of_no_revision_are_left_out() -> None:
    book = bookkeeping.Bookkeeping(clock=ManualClock(T0))
    book.set_assignment(assignment.Assignment(
        spread=SPREAD, generation=1, namespace="shop", workload="web", replicas=1, template={},
        template_revision="r", subsets=(assignment.SubsetRule(name="a", index=0, quota=1),), subset_count=1,
        kind="ReplicaSet"))
    book.observe(SPREAD, [record("p1", "a", "")])
    assert book.counts(SPREAD)["a"].revisions == ()
    assert book.counts(SPREAD)["a"].running == 1


def test_the_revisions_travel_to_the_coordinator() -> None:
    sent = outbox.counts_message({SPREAD: rolling_book().counts(SPREAD)}, sequence=1, generations={},
                                 observed_at=T0)
    wire = agent_pb2.AgentMessage.FromString(sent.SerializeToString())
    inbound.check_pod_counts(wire.pod_counts)
    found = convert.counts_from_pb(wire.pod_counts).counts[SPREAD]
    assert found["a"].revisions == (("new", 2), ("old", 2))
    assert found["b"].revisions == (("old", 2),)
    older = agent_pb2.SubsetPodCounts(subset="a", counts=agent_pb2.PodCounts(running=1))
    assert convert.pods_from_pb(older.counts, older.revisions).revisions == (), "an older agent sends none"


def test_a_negative_revision_count_is_refused() -> None:
    report = agent_pb2.PodCountsReport(spreads=[agent_pb2.SpreadPodCounts(spread=SPREAD, subsets=[
        agent_pb2.SubsetPodCounts(subset="a",
                                  revisions=[agent_pb2.RevisionPodCount(revision="x", pods=-1)])])])
    with pytest.raises(ValueError, match=r"subsets\[0\]\.revisions\[0\]\.pods is negative"):
        inbound.check_pod_counts(report)


SPEC = builders.spread_spec({"name": "a", "clusters": ["dc1", "aws-eu"], "maxReplicas": 4},
                            {"name": "b", "clusters": ["dc1"]})
SNAPSHOT = builders.snapshot(builders.member("dc1", builders.pool(4)),
                             builders.member("aws-eu", builders.pool(4)))


def shown(reports: dict[str, dict[str, status.ClusterPods]]) -> dict[str, list[tuple[str, int]] | None]:
    result = placement.place(SPEC, replicas=6, snapshot=SNAPSHOT, now=T0)
    made = spread_status.spread_status(placement=result, spec=SPEC, generation=1, reports=reports, marks=(),
                                       previous=None, now=T0)
    return {s.name: None if s.revisions is None else [(r.revision, r.replicas) for r in s.revisions]
            for s in made.subset_statuses}


def pods(running: int, *revisions: tuple[str, int]) -> status.ClusterPods:
    return status.ClusterPods(running=running, ready=running, revisions=revisions)


def test_the_status_shows_each_subsets_revisions_summed_over_clusters_while_a_rollout_runs() -> None:
    # aws-eu has rolled already (new only), dc1 is halfway: the subset sums both clusters.
    reports = {"dc1": {"a": pods(2, ("new", 1), ("old", 1)), "b": pods(2, ("old", 2)),
                       status.UNASSIGNED: pods(1, ("stray", 1))},
               "aws-eu": {"a": pods(2, ("new", 2))}}
    assert shown(reports) == {"a": [("new", 3), ("old", 1)], "b": [("old", 2)]}


def test_the_status_shows_no_revisions_once_one_revision_runs() -> None:
    reports = {"dc1": {"a": pods(2, ("new", 2)), "b": pods(2, ("new", 2))},
               "aws-eu": {"a": pods(2, ("new", 2))}}
    assert shown(reports) == {"a": None, "b": None}
    assert shown({"dc1": {"a": pods(2)}}) == {"a": None, "b": None}, "an older agent's report"
    result = placement.place(SPEC, replicas=6, snapshot=SNAPSHOT, now=T0)
    made = spread_status.spread_status(placement=result, spec=SPEC, generation=1, reports=reports, marks=(),
                                       previous=None, now=T0)
    dumped = made.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert all("revisions" not in s for s in dumped["subsetStatuses"]), "absent from the written status"
