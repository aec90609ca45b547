"""Spreading a Job (issue 24 §1): completions divided, stranded completions, member Job spec, hub status."""

from __future__ import annotations

import copy
import datetime
import fractions
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.core import job_status as js
from federation.core import jobs

T0 = datetime.datetime(2025, 1, 1, 12, 0, tzinfo=datetime.UTC)


def at(minutes: int) -> datetime.datetime:
    return T0 + datetime.timedelta(minutes=minutes)


# ---- dividing completions -------------------------------------------------------------------

DIVIDE_CASES = [
    pytest.param(12, {"a": 3, "b": 3}, {}, {"a": 6, "b": 6}, (), 0, id="issue-example-12-over-6"),
    pytest.param(12, {"a": 4, "b": 2}, {}, {"a": 8, "b": 4}, (), 0, id="in-proportion"),
    pytest.param(10, {"a": 1, "b": 1, "c": 1}, {}, {"a": 4, "b": 3, "c": 3}, (), 0,
                 id="largest-remainder-name-tie"),
    pytest.param(2, {"a": 1, "b": 3}, {}, {"b": 2}, ("a",), 0, id="tie-to-larger-share-and-idle"),
    pytest.param(1, {"c": 2, "a": 2, "b": 2}, {}, {"a": 1}, ("b", "c"), 0, id="one-completion-many-clusters"),
    pytest.param(12, {"a": 3, "b": 3}, {"a": 12}, {"a": 12}, ("b",), 0, id="late-joiner-nothing-left"),
    pytest.param(12, {"a": 3, "b": 3}, {"a": 6}, {"a": 6, "b": 6}, (), 0, id="late-joiner-gets-the-rest"),
    pytest.param(12, {"a": 9, "b": 3, "c": 3}, {"a": 4}, {"a": 4, "b": 4, "c": 4}, (), 0,
                 id="existing-kept-rest-split"),
    pytest.param(12, {"c": 2}, {"a": 8, "b": 8}, {"a": 8, "b": 8}, ("c",), 0,
                 id="over-assigned-never-below-0"),
    pytest.param(12, {"a": 3}, {"a": 5}, {"a": 5}, (), 7, id="no-cluster-without-a-job"),
    pytest.param(12, {}, {}, {}, (), 12, id="nothing-placed"),
    pytest.param(12, {"a": 0, "b": 2}, {}, {"b": 12}, (), 0, id="zero-share-is-no-candidate"),
    pytest.param(0, {"a": 2}, {}, {}, ("a",), 0, id="zero-completions"),
]


@pytest.mark.parametrize(("completions", "parallelism", "assigned", "per_cluster", "idle", "unplaced"),
                         DIVIDE_CASES)
def test_divide_completions(
    completions: int, parallelism: dict[str, int], assigned: dict[str, int],
    per_cluster: dict[str, int], idle: tuple[str, ...], unplaced: int,
) -> None:
    split = jobs.divide_completions(completions, parallelism=parallelism, assigned=assigned)
    assert dict(split.per_cluster) == per_cluster
    assert dict(split.created) == {k: v for k, v in per_cluster.items() if k not in assigned}
    assert split.idle_clusters == idle
    assert split.unplaced == unplaced
    assert split.stranded == 0


def test_divide_completions_refuses_negative_input() -> None:
    with pytest.raises(ValueError, match="negative"):
        jobs.divide_completions(-1, parallelism={"a": 1}, assigned={})
    with pytest.raises(ValueError, match="negative"):
        jobs.divide_completions(3, parallelism={"a": -1}, assigned={})
    with pytest.raises(ValueError, match="negative"):
        jobs.divide_completions(3, parallelism={"a": 1}, assigned={"b": -2})


def test_stranded_completions_go_only_where_no_member_job_is_and_only_once() -> None:
    # a (6) was lost after 2 succeeded; b keeps its 6 (immutable); c has no Job: it takes the 4.
    first = jobs.divide_completions(
        12, parallelism={"b": 3, "c": 3}, assigned={"a": 6, "b": 6}, lost_succeeded={"a": 2})
    assert first.stranded == 4
    assert dict(first.created) == {"c": 4}
    assert dict(first.per_cluster) == {"a": 6, "b": 6, "c": 4}
    # The next round, with c's Job existing, places nothing again although a is still lost.
    again = jobs.divide_completions(
        12, parallelism={"b": 3, "c": 3}, assigned=first.per_cluster, lost_succeeded={"a": 2})
    assert (dict(again.created), again.unplaced, again.stranded) == ({}, 0, 4)
    # a returns: its Job resumes; nothing is taken back and nothing more placed.
    back = jobs.divide_completions(12, parallelism={"a": 2, "b": 2, "c": 2}, assigned=first.per_cluster)
    assert (dict(back.per_cluster), dict(back.created), back.stranded) == ({"a": 6, "b": 6, "c": 4}, {}, 0)


def test_a_lost_cluster_gets_no_new_member_job() -> None:
    split = jobs.divide_completions(6, parallelism={"a": 3, "b": 3}, assigned={}, lost_succeeded={"a": 0})
    assert (dict(split.created), split.idle_clusters, split.stranded) == ({"b": 6}, (), 0)


def test_stranded_completions_wait_when_every_cluster_has_a_member_job() -> None:
    split = jobs.divide_completions(
        12, parallelism={"b": 6}, assigned={"a": 6, "b": 6}, lost_succeeded={"a": 1})
    assert (dict(split.created), split.unplaced, split.stranded) == ({}, 5, 5)


STRANDED_CASES = [
    pytest.param({"a": 6, "b": 6}, {"a": 2, "b": 1}, {"a"}, {"a": 4}, id="one-lost"),
    pytest.param({"a": 6, "b": 6}, {"a": 2}, {"a", "b"}, {"a": 4, "b": 6}, id="unreported-succeeded-is-0"),
    pytest.param({"a": 6}, {"a": 7}, {"a"}, {}, id="more-succeeded-than-completions"),
    pytest.param({"a": 6}, {"a": 6}, {"a"}, {}, id="finished-before-lost"),
    pytest.param({"a": 6}, {}, {"x"}, {}, id="lost-without-member-job"),
    pytest.param({"a": 6}, {}, set(), {}, id="none-lost"),
]


@pytest.mark.parametrize(("completions_by_cluster", "succeeded", "lost", "expected"), STRANDED_CASES)
def test_stranded(
    completions_by_cluster: dict[str, int],
    succeeded: dict[str, int],
    lost: set[str],
    expected: dict[str, int],
) -> None:
    by_cluster = jobs.stranded_by_cluster(
        completions_by_cluster=completions_by_cluster, succeeded_by_cluster=succeeded, lost=lost)
    assert by_cluster == expected
    assert jobs.stranded_completions(
        completions_by_cluster=completions_by_cluster, succeeded_by_cluster=succeeded, lost=lost,
    ) == sum(expected.values())


def test_stranded_message_names_count_and_clusters() -> None:
    assert jobs.stranded_message({"b": 6, "a": 4}) == (
        "10 completions of member Jobs in lost clusters are unfinished: a (4), b (6); their member Jobs "
        "are kept, and the completions go to clusters with no member Job of this spread")


def test_may_take_stranded() -> None:
    assert jobs.may_take_stranded("c", member_jobs={"a", "b"})
    assert not jobs.may_take_stranded("a", member_jobs={"a", "b"})  # a lost cluster's Job is kept
    assert not jobs.may_take_stranded("b", member_jobs={"a": 6, "b": 6})


def test_paused_completions_are_unfinished_ones_without_a_share() -> None:
    assert jobs.paused_completions(
        completions_by_cluster={"a": 6, "b": 6, "c": 6, "d": 6},
        succeeded_by_cluster={"a": 1, "b": 6, "c": 2},
        parallelism={"a": 3, "b": 0, "d": 0},
        lost={"d"},
    ) == {"c": 4}  # a runs; b is done; c has no share (paused); d is lost (stranded, not paused)


CLUSTERS = ("c0", "c1", "c2", "c3", "c4")
_SHARES = st.dictionaries(st.sampled_from(CLUSTERS), st.integers(0, 10), max_size=5)
_ASSIGNED = st.dictionaries(st.sampled_from(CLUSTERS), st.integers(0, 30), max_size=5)


@hypothesis.given(completions=st.integers(0, 80), parallelism=_SHARES, assigned=_ASSIGNED)
def test_division_properties(completions: int, parallelism: dict[str, int], assigned: dict[str, int]) -> None:
    split = jobs.divide_completions(completions, parallelism=parallelism, assigned=assigned)
    left = max(0, completions - sum(assigned.values()))
    candidates = {n for n, p in parallelism.items() if p > 0 and n not in assigned}
    # Existing member Jobs are kept exactly; the new ones are the rest.
    assert {n: split.per_cluster[n] for n in assigned} == assigned
    assert dict(split.per_cluster) == {**assigned, **split.created}
    # Never more than the completions not yet assigned; all of them when a cluster can take them.
    assert sum(split.created.values()) + split.unplaced == left
    assert split.unplaced == (0 if candidates else left)
    assert sum(split.per_cluster.values()) <= max(completions, sum(assigned.values()))
    # Every candidate gets a member Job with completions, or is reported idle; nobody else.
    assert all(count > 0 for count in split.created.values())
    assert set(split.created) | set(split.idle_clusters) == candidates
    assert not set(split.created) & set(split.idle_clusters)
    # Proportional to parallelism within one completion.
    total_share = sum(parallelism[n] for n in candidates)
    for name in candidates:
        exact = fractions.Fraction(left * parallelism[name], total_share)
        assert abs(split.created.get(name, 0) - exact) < 1


@hypothesis.given(
    completions=st.integers(0, 80), parallelism=_SHARES, assigned=_ASSIGNED,
    lost=st.sets(st.sampled_from(CLUSTERS)), succeeded=_ASSIGNED,
)
def test_division_with_lost_clusters_is_idempotent(
    completions: int, parallelism: dict[str, int], assigned: dict[str, int], lost: set[str],
    succeeded: dict[str, int],
) -> None:
    lost_succeeded = {n: succeeded.get(n, 0) for n in lost}
    split = jobs.divide_completions(
        completions, parallelism=parallelism, assigned=assigned, lost_succeeded=lost_succeeded)
    assert {n: split.per_cluster[n] for n in assigned} == assigned
    assert split.stranded == jobs.stranded_completions(
        completions_by_cluster=assigned, succeeded_by_cluster=succeeded, lost=lost)
    # What is held (lost clusters counting only what they did) never exceeds the completions, unless
    # the existing member Jobs held more already.
    held_before = sum(assigned.values()) - split.stranded
    assert sum(split.created.values()) <= max(0, completions - held_before)
    assert all(jobs.may_take_stranded(n, member_jobs=assigned) for n in split.created)
    assert not set(split.created) & lost
    again = jobs.divide_completions(
        completions, parallelism=parallelism, assigned=split.per_cluster, lost_succeeded=lost_succeeded)
    assert dict(again.created) == {}
    assert dict(again.per_cluster) == dict(split.per_cluster)


# ---- the member Job's spec ------------------------------------------------------------------

HUB_UID = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"


def hub_job_spec() -> dict[str, Any]:
    """A Job's spec as the hub apiserver stores it: selector and template labels generated."""
    return {
        "parallelism": 6,
        "completions": 12,
        "backoffLimit": 4,
        "activeDeadlineSeconds": 600,
        "ttlSecondsAfterFinished": 100,
        "selector": {"matchLabels": {"controller-uid": HUB_UID}},
        "template": {
            "metadata": {"labels": {"app": "crunch", "controller-uid": HUB_UID, "job-name": "crunch"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "args": ["sh", "-c", "true"]}],
            },
        },
    }


def test_member_job_spec_replaces_counts_and_drops_what_the_hub_generated() -> None:
    member = jobs.member_job_spec(hub_job_spec(), parallelism=3, completions=6, suspend=False)
    assert member == {
        "parallelism": 3,
        "completions": 6,
        "suspend": False,
        "backoffLimit": 4,
        "activeDeadlineSeconds": 600,
        "template": {
            "metadata": {"labels": {"app": "crunch"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "args": ["sh", "-c", "true"]}],
            },
        },
    }


def test_member_job_spec_work_queue_suspend_and_newer_labels() -> None:
    hub = hub_job_spec()
    del hub["completions"]
    hub["manualSelector"] = False
    hub["suspend"] = True
    hub["template"]["metadata"]["labels"] = {
        "batch.kubernetes.io/controller-uid": HUB_UID, "batch.kubernetes.io/job-name": "crunch",
        "controller-uid": HUB_UID, "job-name": "crunch",
    }
    member = jobs.member_job_spec(hub, parallelism=2, completions=None, suspend=True)
    assert "completions" not in member
    assert member["suspend"] is True
    assert "manualSelector" not in member and "selector" not in member
    assert member["template"]["metadata"] == {}  # only generated labels: none left
    resumed = jobs.member_job_spec(hub, parallelism=2, completions=None, suspend=False)
    assert resumed["suspend"] is False  # written, so resuming the hub resumes the member


def test_member_job_spec_never_changes_or_shares_its_input() -> None:
    hub = hub_job_spec()
    before = copy.deepcopy(hub)
    member = jobs.member_job_spec(hub, parallelism=1, completions=1, suspend=True)
    assert hub == before
    member["template"]["spec"]["containers"][0]["image"] = "changed"
    member["template"]["metadata"]["labels"]["x"] = "y"
    assert hub == before


def test_indexed_jobs_cannot_be_spread() -> None:
    hub = hub_job_spec() | {"completionMode": "Indexed"}
    assert jobs.unsupported_job_fields(hub) == [
        "spec.completionMode: 'Indexed' cannot be spread: member Jobs would each number their "
        "completions from 0; use NonIndexed"]
    assert jobs.unsupported_job_fields(hub_job_spec() | {"completionMode": "NonIndexed"}) == []
    assert jobs.unsupported_job_fields(hub_job_spec()) == []
    with pytest.raises(ValueError, match="completionMode"):
        jobs.member_job_spec(hub, parallelism=1, completions=1, suspend=False)


def test_member_job_spec_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match="negative"):
        jobs.member_job_spec(hub_job_spec(), parallelism=-1, completions=1, suspend=False)
    with pytest.raises(ValueError, match="negative"):
        jobs.member_job_spec(hub_job_spec(), parallelism=1, completions=-1, suspend=False)


# ---- the hub Job's status -------------------------------------------------------------------

def done(succeeded: int, *, start: int = 0, end: int = 10, failed: int = 0) -> js.MemberJob:
    return js.MemberJob(succeeded=succeeded, failed=failed, start_time=at(start), completion_time=at(end),
                        complete=True, completions=succeeded)


def running(active: int, succeeded: int = 0, *, start: int = 0, completions: int | None = 6) -> js.MemberJob:
    return js.MemberJob(active=active, succeeded=succeeded, start_time=at(start), completions=completions)


def broken(*, when: int = 7, reason: str = "BackoffLimitExceeded") -> js.MemberJob:
    return js.MemberJob(failed=5, start_time=at(1), failed_condition=True, failed_time=at(when),
                        failed_reason=reason, completions=6)


def test_status_counts_are_sums_and_start_is_earliest() -> None:
    status = js.aggregate_status(
        {"a": running(3, 1, start=5), "b": js.MemberJob(active=2, failed=4, start_time=at(2)),
         "c": js.MemberJob()},
        completions=12, expected_clusters={"a", "b", "c"})
    assert (status.active, status.succeeded, status.failed) == (5, 1, 4)
    assert status.start_time == at(2)
    assert status.completion_time is None and status.conditions == ()


def test_complete_with_completions_when_every_member_is() -> None:
    members = {"a": done(6, start=1, end=9), "b": done(6, start=3, end=14)}
    status = js.aggregate_status(members, completions=12, expected_clusters={"a", "b"})
    assert status.has("Complete") and not status.has("Failed")
    assert (status.start_time, status.completion_time) == (at(1), at(14))
    assert status.conditions == (js.JobCondition(
        "Complete", "MemberJobsComplete", "2 member Job(s) complete, 12 of 12 completions succeeded",
        at(14)),)


COMPLETIONS_NOT_YET = [
    pytest.param({"a": done(6), "b": running(2, 4)}, {"a", "b"}, id="one-still-running"),
    pytest.param({"a": done(12)}, {"a", "b"}, id="expected-member-unheard"),
    pytest.param({"a": done(6), "b": done(4)}, {"a", "b"}, id="succeeded-short-of-completions"),
    pytest.param({"a": done(6), "b": done(6), "x": running(1, 0)}, {"a", "b"}, id="unexpected-member-active"),
]


@pytest.mark.parametrize(("members", "expected"), COMPLETIONS_NOT_YET)
def test_not_complete_with_completions(members: dict[str, js.MemberJob], expected: set[str]) -> None:
    status = js.aggregate_status(members, completions=12, expected_clusters=expected)
    assert not status.has("Complete") and status.completion_time is None


def test_failed_wins_over_complete() -> None:
    members = {"a": done(6), "b": done(6), "c": broken(when=8),
               "d": broken(when=5, reason="DeadlineExceeded")}
    status = js.aggregate_status(members, completions=12, expected_clusters={"a", "b"})
    assert status.conditions == (js.JobCondition(
        "Failed", "MemberJobFailed",
        "the member Job failed in 2 cluster(s): c (BackoffLimitExceeded), d (DeadlineExceeded)", at(5)),)
    assert status.completion_time is None and not status.has("Complete")
    quiet = js.aggregate_status({"a": js.MemberJob(failed_condition=True)}, completions=None,
                                expected_clusters={"a"})
    assert quiet.conditions == (js.JobCondition("Failed", "MemberJobFailed",
                                                "the member Job failed in 1 cluster(s): a", None),)


WORK_QUEUE_CASES = [
    pytest.param({"a": done(1), "b": done(0)}, {"a", "b"}, True, id="all-finished-one-succeeded"),
    pytest.param({"a": done(1)}, {"a"}, True, id="single-member"),
    pytest.param({"a": done(1), "b": running(2, completions=None)}, {"a", "b"}, False, id="another-active"),
    pytest.param({"a": done(1), "b": js.MemberJob(failed=2, start_time=at(1))}, {"a", "b"}, False,
                 id="another-between-retries"),
    pytest.param({"a": done(1), "b": js.MemberJob()}, {"a", "b"}, False, id="another-not-started"),
    pytest.param({"a": done(1)}, {"a", "b"}, False, id="expected-member-unheard"),
    pytest.param({"a": running(0, completions=None)}, {"a"}, False, id="none-complete"),
    pytest.param({}, set(), False, id="no-members"),
]


@pytest.mark.parametrize(("members", "expected", "complete"), WORK_QUEUE_CASES)
def test_work_queue_completion(members: dict[str, js.MemberJob], expected: set[str], complete: bool) -> None:
    status = js.aggregate_status(members, completions=None, expected_clusters=expected)
    assert status.has("Complete") is complete
    assert (status.completion_time is not None) is complete


def test_status_dict_is_a_jobs_status() -> None:
    members = {"a": done(6, start=1, end=9), "b": done(6, start=3, end=14)}
    status = js.aggregate_status(members, completions=12, expected_clusters={"a", "b"})
    assert js.to_status_dict(status) == {
        "active": 0, "succeeded": 12, "failed": 0,
        "startTime": "2025-01-01T12:01:00Z", "completionTime": "2025-01-01T12:14:00Z",
        "conditions": [{
            "type": "Complete", "status": "True", "reason": "MemberJobsComplete",
            "message": "2 member Job(s) complete, 12 of 12 completions succeeded",
            "lastProbeTime": "2025-01-01T12:14:00Z", "lastTransitionTime": "2025-01-01T12:14:00Z",
        }],
    }
    assert js.to_status_dict(js.HubJobStatus(active=2)) == {
        "active": 2, "succeeded": 0, "failed": 0, "startTime": None, "completionTime": None, "conditions": [],
    }


def test_rfc3339_is_utc_whole_seconds() -> None:
    assert js.rfc3339(datetime.datetime(2025, 1, 1, 12, 0, 5, 999_999)) == "2025-01-01T12:00:05Z"
    east = datetime.timezone(datetime.timedelta(hours=2))
    assert js.rfc3339(datetime.datetime(2025, 1, 1, 14, 0, tzinfo=east)) == "2025-01-01T12:00:00Z"
    assert js.rfc3339(None) is None


@pytest.mark.parametrize(("status", "expected"), [
    pytest.param({"conditions": [{"type": "Complete", "status": "True"}]}, True, id="complete"),
    pytest.param({"conditions": [{"type": "Failed", "status": "True"}]}, True, id="failed"),
    pytest.param({"conditions": [{"type": "Complete", "status": "False"}]}, False, id="not-true"),
    pytest.param({"conditions": [{"type": "Suspended", "status": "True"}]}, False, id="other-type"),
    pytest.param({"conditions": None}, False, id="null"),
    pytest.param({}, False, id="empty"),
])
def test_finished(status: dict[str, Any], expected: bool) -> None:
    assert js.finished(status) is expected


def test_finished_reads_what_to_status_dict_writes() -> None:
    complete = js.aggregate_status({"a": done(1)}, completions=1, expected_clusters={"a"})
    assert js.finished(js.to_status_dict(complete))
    assert not js.finished(js.to_status_dict(js.HubJobStatus(active=1)))


def test_member_completions() -> None:
    assert js.member_completions({"a": done(6), "b": running(1, completions=None), "c": running(1)}) == {
        "a": 6, "c": 6}


_TIME = st.none() | st.integers(0, 100).map(at)
_MEMBER = st.builds(
    js.MemberJob, active=st.integers(0, 4), succeeded=st.integers(0, 8), failed=st.integers(0, 3),
    start_time=_TIME, completion_time=_TIME, complete=st.booleans(), failed_condition=st.booleans(),
    completions=st.none() | st.integers(0, 8), failed_time=_TIME,
)


@hypothesis.given(
    members=st.dictionaries(st.sampled_from(CLUSTERS), _MEMBER, max_size=5),
    completions=st.none() | st.integers(0, 30),
    expected=st.sets(st.sampled_from(CLUSTERS)),
)
def test_status_properties(
    members: dict[str, js.MemberJob], completions: int | None, expected: set[str],
) -> None:
    status = js.aggregate_status(members, completions=completions, expected_clusters=expected)
    assert status.active == sum(m.active for m in members.values())
    assert status.succeeded == sum(m.succeeded for m in members.values())
    assert status.failed == sum(m.failed for m in members.values())
    starts = [m.start_time for m in members.values() if m.start_time is not None]
    assert status.start_time == (min(starts) if starts else None)
    # Never both; Failed exactly when a member Job failed.
    assert not (status.has("Complete") and status.has("Failed"))
    assert status.has("Failed") == any(m.failed_condition for m in members.values())
    if status.completion_time is not None:
        assert status.has("Complete")
    if status.has("Complete"):
        assert status.active == 0
        if completions is not None:
            assert status.succeeded >= completions
            assert all(name in members and members[name].complete for name in expected)
        else:
            assert any(m.complete for m in members.values())
            assert all(name in members for name in expected)
            assert all(m.complete for m in members.values())  # no failure (Failed wins): all finished
    rendered = js.to_status_dict(status)
    assert [c["type"] for c in rendered["conditions"]] == [c.type for c in status.conditions]
