"""FederatedSpread, MemberCluster and hub Deployment statuses (DESIGN §2) from placements and reports.

Each case states a situation and the status fields a person reading `kubectl get -o yaml` should
see; condition messages are checked for the facts they must carry (counts, subsets, what to do).
"""

from __future__ import annotations

import datetime

import hypothesis
import pytest

# tests/unit has no __init__.py: pytest's default import mode puts this directory on sys.path.
import strategies as fs
from hypothesis import strategies as st

from federation.api import cluster, common, spread
from federation.core import placement, spread_status, status
from tests.support.builders import member, pool, snapshot, spread_spec

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
EARLIER = NOW - datetime.timedelta(hours=1)
MINUTE = datetime.timedelta(minutes=1)




ONPREM_CLOUD = spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 30},
                    {"name": "cloud", "clusters": ["aws-eu", "gcp-eu"], "clusterSpread": "Fill"})
THREE = snapshot(member("dc1", pool(1)), member("aws-eu", pool(1)), member("gcp-eu", pool(1)))


def compute(sp: spread.FederatedSpreadSpec, snap: cluster.CapacitySnapshot, replicas: int, *,
            reports: dict[str, dict[str, status.ClusterPods]] | None = None,
            marks: tuple[placement.UnschedulableMark, ...] = (),
            previous: spread.FederatedSpreadStatus | None = None,
            now: datetime.datetime = NOW) -> spread.FederatedSpreadStatus:
    result = placement.place(sp, replicas=replicas, snapshot=snap, unschedulable=marks, now=now)
    return spread_status.spread_status(placement=result, spec=sp, generation=3, reports=reports or {},
                                       marks=marks, previous=previous, now=now)


def condition(st_: spread.FederatedSpreadStatus | list[common.Condition], kind: str) -> common.Condition:
    conditions = st_ if isinstance(st_, list) else st_.conditions
    (found,) = [c for c in conditions if c.type == kind]
    return found


def all_ready(result: placement.Placement) -> dict[str, dict[str, status.ClusterPods]]:
    """Reports in which every placed replica runs and is ready."""
    reports: dict[str, dict[str, status.ClusterPods]] = {}
    for s in result.subsets:
        for name, count in s.clusters.items():
            if count:
                reports.setdefault(name, {})[s.name] = status.ClusterPods(running=count, ready=count)
    return reports


# --- the placement part ---------------------------------------------------------------------------


def test_capped_subset_and_overflow_with_reports() -> None:
    reports = {
        "dc1": {"onprem": status.ClusterPods(running=28, ready=27, pending=2, unschedulable=1)},
        "aws-eu": {"cloud": status.ClusterPods(running=10, ready=10)},
    }
    got = compute(ONPREM_CLOUD, THREE, 40, reports=reports)
    totals = (got.observed_generation, got.replicas, got.ready_replicas, got.unplaced_replicas)
    assert totals == (3, 40, 37, 0)
    assert [(p.cluster, p.replicas, p.ready_replicas) for p in got.placement] == [
        ("aws-eu", 10, 10), ("dc1", 30, 27)]  # gcp-eu: nothing placed, nothing reported
    onprem, cloud = got.subset_statuses
    assert (onprem.name, onprem.replicas, onprem.placed(), onprem.missing_replicas) == (
        "onprem", 30, {"dc1": 30}, 0)
    assert (cloud.name, cloud.replicas, cloud.placed(), cloud.missing_replicas) == (
        "cloud", 10, {"aws-eu": 10, "gcp-eu": 0}, -1)
    assert [(c.cluster, c.replicas, c.kept) for c in cloud.clusters] == [
        ("aws-eu", 10, 0), ("gcp-eu", 0, 0)]
    assert onprem.creating_pods == {} and onprem.deleting_pods == {}
    assert onprem.subset_unscheduled_status is None


def test_a_cluster_with_pods_but_no_replicas_is_listed() -> None:
    reports = {"gcp-eu": {"cloud": status.ClusterPods(running=2, ready=1, deleting=2)}}
    got = compute(ONPREM_CLOUD, THREE, 5, reports=reports)
    assert [(p.cluster, p.replicas, p.ready_replicas) for p in got.placement] == [
        ("dc1", 5, 0), ("gcp-eu", 0, 1)]


def test_unassigned_pods_count_as_ready_but_in_no_subset() -> None:
    reports = {"dc1": {"onprem": status.ClusterPods(running=5, ready=5),
                       status.UNASSIGNED: status.ClusterPods(running=1, ready=1)}}
    got = compute(ONPREM_CLOUD, THREE, 5, reports=reports)
    assert got.ready_replicas == 6
    assert got.subset_statuses[0].missing_replicas == 25


@pytest.mark.parametrize(("pods", "cap", "expected"), [
    pytest.param([status.ClusterPods(running=20, pending=3, creating=2, deleting=1)], 30, 5,
                 id="cap minus running+pending+creating (a deleting pod is in none of them)"),
    pytest.param([status.ClusterPods(running=10), status.ClusterPods(running=5, pending=5)], 30, 10,
                 id="summed over the subset's clusters"),
    pytest.param([status.ClusterPods(running=35)], 30, 0, id="over the cap is floored at 0"),
    pytest.param([], 30, 30, id="no pods yet: the whole cap is missing"),
    pytest.param([status.ClusterPods(running=20)], None, -1, id="an uncapped subset reports -1"),
])
def test_missing_replicas(pods: list[status.ClusterPods], cap: int | None, expected: int) -> None:
    sp = spread_spec({"name": "eu", "clusters": ["dc1", "aws-eu"], "maxReplicas": cap})
    reports = {name: {"eu": p} for name, p in zip(["dc1", "aws-eu"], pods, strict=False)}
    assert compute(sp, THREE, 40, reports=reports).subset_statuses[0].missing_replicas == expected


def test_percentage_cap_is_resolved_against_the_replicas() -> None:
    sp = spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": "50%"},
                     {"name": "b", "clusters": ["aws-eu"]})
    got = compute(sp, THREE, 10, reports={"dc1": {"a": status.ClusterPods(running=2)}})
    assert [s.missing_replicas for s in got.subset_statuses] == [3, -1]


# --- conditions -----------------------------------------------------------------------------------


def test_everything_placed_and_ready() -> None:
    result = placement.place(ONPREM_CLOUD, replicas=40, snapshot=THREE)
    got = spread_status.spread_status(
        placement=result, spec=ONPREM_CLOUD, generation=3, reports=all_ready(result), marks=(),
        previous=None, now=NOW)
    assert [(c.type, c.status, c.reason) for c in got.conditions] == [
        ("Valid", "True", "SpecValid"), ("Placed", "True", "AllPlaced"),
        ("CapacityExhausted", "False", "NotSimulated"), ("Ready", "True", "AllReady"),
        ("Conflict", "False", "NoConflict")]
    assert all(c.last_transition_time == NOW and c.observed_generation == 3 for c in got.conditions)


def test_a_member_deployment_we_do_not_own_is_a_conflict_naming_the_cluster() -> None:
    result = placement.place(ONPREM_CLOUD, replicas=40, snapshot=THREE)
    got = spread_status.spread_status(
        placement=result, spec=ONPREM_CLOUD, generation=3, reports=all_ready(result), marks=(),
        previous=None, now=NOW, conflicts={"dc1": "Deployment shop/web is not fedspread's (no federation)"})
    found = condition(got, "Conflict")
    assert (found.status, found.reason) == ("True", "MemberDeploymentNotOwned")
    assert found.message.startswith("1 cluster left alone (dc1: Deployment shop/web is not fedspread's")


def test_replicas_beyond_every_cap_are_unplaced() -> None:
    sp = spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 30},
              {"name": "cloud", "clusters": ["aws-eu"], "maxReplicas": 5})
    got = compute(sp, THREE, 38)
    placed = condition(got, "Placed")
    assert (got.unplaced_replicas, placed.status, placed.reason) == (3, "False", "BeyondCaps")
    assert placed.message.startswith("3 replicas of 38 could not be placed")
    assert "onprem is capped at 30" in placed.message and "cloud is capped at 5" in placed.message
    assert "raise maxReplicas" in placed.message


def test_unplaced_because_the_only_unbounded_subset_has_no_ready_cluster() -> None:
    snap = snapshot(member("dc1", pool(1)), member("aws-eu", pool(1), ready=False))
    sp = spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 30},
              {"name": "cloud", "clusters": ["aws-eu"]})
    placed = condition(compute(sp, snap, 32), "Placed")
    assert (placed.status, placed.reason) == ("False", "NoUsableCluster")
    assert "2 replicas" in placed.message
    assert "cloud has no usable cluster (aws-eu: not ready)" in placed.message


def test_capacity_exhausted_names_the_subsets_and_what_to_do() -> None:
    sp = spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 30},
              {"name": "eu", "clusterSelector": {"matchLabels": {"topology.fedspread.io/region": "eu"}}},
              strategy="Adaptive")
    snap = snapshot(member("dc1", pool(1)), member("aws-eu", pool(1, pods=0), region="eu"))
    got = compute(sp, snap, 33)
    exhausted = condition(got, "CapacityExhausted")
    assert (exhausted.status, exhausted.reason) == ("True", "NoCapacity")
    assert exhausted.message == (
        "3 replicas wait Pending for capacity (3 in eu): subset onprem is capped at 30 and "
        "eu has no free capacity; add nodes or raise maxReplicas")
    assert condition(got, "Placed").status == "True"  # waiting replicas are placed, not dropped


def test_replicas_waiting_in_a_capped_subset_do_not_blame_its_cap() -> None:
    sp = spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 30},
              {"name": "eu", "clusterSelector": {"matchLabels": {"topology.fedspread.io/region": "eu"}}},
              strategy="Adaptive")
    snap = snapshot(member("dc1", pool(1, pods=20)), member("aws-eu", pool(1, pods=5), region="eu"))
    exhausted = condition(compute(sp, snap, 40), "CapacityExhausted")
    assert exhausted.message == (
        "15 replicas wait Pending for capacity (10 in onprem, 5 in eu): onprem has no free capacity and "
        "eu has no free capacity; add nodes or raise maxReplicas")


def test_capacity_exhausted_is_false_when_everything_fits_in_adaptive() -> None:
    sp = spread_spec({"name": "onprem", "clusters": ["dc1"]}, strategy="Adaptive")
    exhausted = condition(compute(sp, THREE, 10), "CapacityExhausted")
    assert (exhausted.status, exhausted.reason) == ("False", "CapacityAvailable")


@pytest.mark.parametrize(("reports", "reason", "words"), [
    pytest.param({"dc1": {"onprem": status.ClusterPods(running=5, ready=3, pending=2, unschedulable=2)}},
                 "ReplicasNotReady",
                 ["3 of 5 replicas are ready", "dc1 3/5", "2 pending, 2 of them unschedulable"],
                 id="pending pods are named"),
    pytest.param({}, "ReplicasNotReady", ["0 of 5 replicas are ready (dc1 0/5)"], id="nothing reported yet"),
    pytest.param({"dc1": {"onprem": status.ClusterPods(running=7, ready=7)}}, "ScalingDown",
                 ["7 replicas are ready for 5 wanted"], id="more ready than wanted while scaling down"),
])
def test_not_ready(reports: dict[str, dict[str, status.ClusterPods]], reason: str, words: list[str]) -> None:
    ready = condition(compute(ONPREM_CLOUD, THREE, 5, reports=reports), "Ready")
    assert (ready.status, ready.reason) == ("False", reason)
    for word in words:
        assert word in ready.message


def test_last_transition_time_kept_when_unchanged_and_bumped_when_changed() -> None:
    first = compute(ONPREM_CLOUD, THREE, 40, now=EARLIER)
    assert condition(first, "Ready").status == "False"
    result = placement.place(ONPREM_CLOUD, replicas=40, snapshot=THREE)
    later = NOW + datetime.timedelta(microseconds=123)
    second = spread_status.spread_status(placement=result, spec=ONPREM_CLOUD, generation=4,
                                         reports=all_ready(result), marks=(), previous=first, now=later)
    assert condition(second, "Placed").last_transition_time == EARLIER  # still True
    assert condition(second, "Ready").last_transition_time == NOW  # flipped; whole seconds
    assert condition(second, "Placed").observed_generation == 4


# --- unschedulable marks --------------------------------------------------------------------------


def mark(at: datetime.datetime, cluster_name: str = "dc1") -> placement.UnschedulableMark:
    return placement.UnschedulableMark(subset="onprem", cluster=cluster_name, since=at)


def test_marks_set_the_unscheduled_status() -> None:
    got = compute(ONPREM_CLOUD, THREE, 10, marks=(mark(NOW - MINUTE), mark(NOW - 2 * MINUTE, "x")))
    unscheduled = got.subset_statuses[0].subset_unscheduled_status
    assert unscheduled == spread.SubsetUnscheduledStatus(
        unschedulable=True, unscheduled_time=NOW - MINUTE, failed_count=2)
    assert got.subset_statuses[1].subset_unscheduled_status is None


def test_failed_count_is_carried_from_previous_and_not_recounted() -> None:
    first = compute(ONPREM_CLOUD, THREE, 10, marks=(mark(EARLIER),), now=EARLIER + MINUTE)
    assert first.subset_statuses[0].subset_unscheduled_status.failed_count == 1  # type: ignore[union-attr]
    again = compute(ONPREM_CLOUD, THREE, 10, marks=(mark(EARLIER),), previous=first, now=EARLIER + 2 * MINUTE)
    assert again.subset_statuses[0].subset_unscheduled_status.failed_count == 1  # type: ignore[union-attr]
    # an hour later the old mark has expired and a new one arrives
    third = compute(ONPREM_CLOUD, THREE, 10, marks=(mark(EARLIER), mark(NOW)), previous=again, now=NOW)
    assert third.subset_statuses[0].subset_unscheduled_status == spread.SubsetUnscheduledStatus(
        unschedulable=True, unscheduled_time=NOW, failed_count=2)
    # marks forgotten (e.g. a coordinator restart): the count and time survive, the flag clears
    fourth = compute(ONPREM_CLOUD, THREE, 10, previous=third, now=NOW + MINUTE)
    assert fourth.subset_statuses[0].subset_unscheduled_status == spread.SubsetUnscheduledStatus(
        unschedulable=False, unscheduled_time=NOW, failed_count=2)


def test_an_expired_mark_is_no_longer_unschedulable() -> None:
    got = compute(ONPREM_CLOUD, THREE, 10, marks=(mark(NOW - 10 * MINUTE),))  # default window 300 s
    assert got.subset_statuses[0].subset_unscheduled_status.unschedulable is False  # type: ignore[union-attr]


# --- hub Deployment and MemberCluster -------------------------------------------------------------


@pytest.mark.parametrize(("members", "replicas", "expected"), [
    pytest.param({"dc1": status.WorkloadStatus(replicas=30, ready=28, available=27, updated=30),
                  "aws": status.WorkloadStatus(replicas=10, ready=10, available=10, updated=8)}, 40,
                 {"replicas": 40, "readyReplicas": 38, "availableReplicas": 37, "updatedReplicas": 38,
                  "unavailableReplicas": 3}, id="sums over members, unavailable against spec.replicas"),
    pytest.param({}, 5, {"replicas": 0, "readyReplicas": 0, "availableReplicas": 0, "updatedReplicas": 0,
                         "unavailableReplicas": 5}, id="no member reported: every field present"),
    pytest.param({"dc1": status.WorkloadStatus(replicas=12, ready=12, available=12, updated=12)}, 10,
                 {"replicas": 12, "readyReplicas": 12, "availableReplicas": 12, "updatedReplicas": 12,
                  "unavailableReplicas": 0}, id="scaling down: unavailable floored at 0"),
])
def test_deployment_status(members: dict[str, status.WorkloadStatus], replicas: int,
                           expected: dict[str, int]) -> None:
    assert status.deployment_status(members, replicas=replicas) == expected


def test_cluster_reports_split_into_pods_and_workloads() -> None:
    reports = {"dc1": status.ClusterReport(pods={"a": status.ClusterPods(ready=1)},
                                           workload=status.WorkloadStatus(replicas=1)),
               "aws": status.ClusterReport()}
    assert status.pods_by_cluster(reports) == {"dc1": {"a": status.ClusterPods(ready=1)}, "aws": {}}
    assert status.workloads_by_cluster(reports) == {"dc1": status.WorkloadStatus(replicas=1)}


LIMIT = datetime.timedelta(seconds=60)


@pytest.mark.parametrize(("ready", "heartbeat", "state", "reason", "message"), [
    pytest.param(True, NOW - datetime.timedelta(seconds=5), "True", "AgentHeartbeat",
                 "the agent was heard 5 s ago (limit 60 s)", id="heard recently"),
    pytest.param(False, NOW - datetime.timedelta(seconds=75), "False", "AgentLost",
                 "no heartbeat for 75 s (limit 60 s); its replicas are being moved", id="silent too long"),
    pytest.param(False, None, "False", "AgentNeverConnected", "no agent has connected", id="never connected"),
])
def test_member_cluster_ready(ready: bool, heartbeat: datetime.datetime | None, state: str, reason: str,
                              message: str) -> None:
    (got,) = status.member_cluster_conditions(ready=ready, last_heartbeat=heartbeat, lost_after=LIMIT,
                                              previous=[], now=NOW)
    assert (got.type, got.status, got.reason, got.last_transition_time) == ("Ready", state, reason, NOW)
    assert got.message.startswith(message)


def test_member_cluster_transition_time_and_other_conditions() -> None:
    other = common.Condition(type="Cordoned", status="True", reason="Operator")
    first = status.member_cluster_conditions(ready=True, last_heartbeat=EARLIER, lost_after=LIMIT,
                                             previous=[other], now=EARLIER)
    same = status.member_cluster_conditions(ready=True, last_heartbeat=NOW, lost_after=LIMIT,
                                            previous=first, now=NOW)
    assert condition(same, "Ready").last_transition_time == EARLIER
    assert condition(same, "Cordoned") == other
    lost = status.member_cluster_conditions(ready=False, last_heartbeat=EARLIER, lost_after=LIMIT,
                                            previous=same, now=NOW)
    assert (condition(lost, "Ready").status, condition(lost, "Ready").last_transition_time) == ("False", NOW)


# --- status_changed -------------------------------------------------------------------------------


def test_status_changed() -> None:
    reports = {"dc1": {"onprem": status.ClusterPods(running=1, ready=1)}}
    base = compute(ONPREM_CLOUD, THREE, 40, reports=reports)
    assert status.status_changed(None, base)
    assert not status.status_changed(base, base.model_copy(deep=True))
    reordered = base.model_copy(update={"conditions": list(reversed(base.conditions)),
                                        "placement": list(reversed(base.placement))})
    assert not status.status_changed(base, reordered)
    assert not status.status_changed(base, spread.FederatedSpreadStatus.model_validate(
        base.model_dump(mode="json", by_alias=True)))  # read back from the hub
    assert status.status_changed(base, base.model_copy(update={"replicas": 41}))
    assert status.status_changed(base, compute(ONPREM_CLOUD, THREE, 41, previous=base))
    subsets = list(reversed(base.subset_statuses))  # spec order is meaningful
    assert status.status_changed(base, base.model_copy(update={"subset_statuses": subsets}))


# --- properties -----------------------------------------------------------------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[spread.FederatedSpreadSpec, placement.Placement,
                                        dict[str, dict[str, status.ClusterPods]]]:
    snap = draw(fs.snapshots())
    sp = draw(fs.spreads([c.name for c in snap.clusters]))
    result = placement.place(sp, replicas=draw(st.integers(0, 60)), snapshot=snap)
    counts = st.builds(status.ClusterPods, *[st.integers(0, 20)] * 6)
    reports = draw(st.dictionaries(st.sampled_from(fs.CLUSTER_NAMES),
                                   st.dictionaries(st.sampled_from([s.name for s in sp.subsets]), counts)))
    return sp, result, reports


@hypothesis.settings(max_examples=100, deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(scenarios())
def test_status_invariants(case: tuple[spread.FederatedSpreadSpec, placement.Placement,
                                       dict[str, dict[str, status.ClusterPods]]]) -> None:
    sp, result, reports = case
    got = spread_status.spread_status(placement=result, spec=sp, generation=1, reports=reports, marks=(),
                                      previous=None, now=NOW)
    assert [s.name for s in got.subset_statuses] == [s.name for s in sp.subsets]
    assert [p.cluster for p in got.placement] == sorted({p.cluster for p in got.placement})
    assert sum(p.replicas for p in got.placement) == result.placed
    assert got.ready_replicas == sum(p.ready_replicas for p in got.placement)
    assert all(s.missing_replicas >= -1 for s in got.subset_statuses)
    assert [c.type for c in got.conditions] == ["Valid", "Placed", "CapacityExhausted", "Ready", "Conflict"]
    assert (condition(got, "Placed").status == "True") == (got.unplaced_replicas == 0)
    again = spread_status.spread_status(placement=result, spec=sp, generation=1, reports=reports, marks=(),
                                        previous=got, now=NOW + MINUTE)
    assert not status.status_changed(got, again)


def test_subset_clusters_are_named_entries_and_an_older_map_still_reads() -> None:
    """`subsetStatuses[].clusters` is a list of `{cluster, replicas, kept}` (the API conventions: a
    map keyed by cluster name renders `aws-eu` as `Aws - Eu` in `kubectl describe`); a status an
    older coordinator wrote as `{cluster: replicas}` still reads, so a restart after an upgrade
    seeds its placement from it."""
    entry = spread.SubsetClusterStatus(cluster="aws-eu", replicas=3, kept=1)
    written = spread.SubsetStatus(name="a", clusters=[entry]).model_dump(mode="json", by_alias=True)
    assert written["clusters"] == [{"cluster": "aws-eu", "replicas": 3, "kept": 1}]
    again = spread.SubsetStatus.model_validate(written)
    assert again.placed() == {"aws-eu": 3} and again.ruled() == {"aws-eu": 2}
    older = spread.SubsetStatus.model_validate({"name": "a", "clusters": {"dc1": 2, "aws-eu": 0}})
    assert older.placed() == {"dc1": 2, "aws-eu": 0} and older.ruled() == older.placed()
