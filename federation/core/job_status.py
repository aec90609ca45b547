"""The hub Job's status, aggregated from its member Jobs.

Why: the hub runs no Job controller, so nothing but the coordinator writes the hub Job's status,
and `kubectl wait --for=condition=complete job/...` on the hub only returns if that status says
what a Job controller would. The counts (`active`, `succeeded`, `failed`) are sums over the member
Jobs, `startTime` the earliest, `completionTime` the latest once the hub Job is complete. The
conditions follow Kubernetes' Job, which never sets `Complete` and `Failed` both:

- `Failed` when any member Job has the `Failed` condition: its completions will not all succeed
  (its backoff limit or deadline is spent), so the hub Job cannot either. Failed wins: it is then
  not `Complete` and has no `completionTime`. The other member Jobs are left to run (do no harm);
  `active` shows them.
- `Complete`, with `completions`: every expected cluster's member Job is complete and the
  succeeded sum reaches `completions` (completions not yet placed, or stranded in a lost cluster,
  keep it from completing), and no member Job has active pods (a Job is never Complete while pods
  of it run; a member Job outside the expected clusters may still be running).
- `Complete`, without `completions` (a work queue): one member Job completed and none is still
  active, where a member Job that has not finished (neither Complete nor Failed) counts as active
  even with no pod at this moment: its controller may still start pods (retrying after a failure,
  or not yet synced). An expected cluster that has not reported counts as active too (unknown is
  not zero).

Pure: no Kubernetes client; times are aware datetimes (naive ones are taken as UTC) and are written
as RFC 3339 in whole seconds, as Kubernetes writes them.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection, Mapping
from typing import Any, Literal

JobConditionType = Literal["Complete", "Failed"]


@dataclasses.dataclass(frozen=True)
class MemberJob:
    """What a member Job's status (and its `spec.completions`) says, as its agent reported it."""

    active: int = 0
    succeeded: int = 0
    failed: int = 0
    start_time: datetime.datetime | None = None
    completion_time: datetime.datetime | None = None
    complete: bool = False
    failed_condition: bool = False
    completions: int | None = None
    failed_time: datetime.datetime | None = None
    """lastTransitionTime of its `Failed` condition, when it has one."""
    failed_reason: str = ""
    """reason of its `Failed` condition (BackoffLimitExceeded, DeadlineExceeded)."""

    @property
    def finished(self) -> bool:
        """Whether its Job controller is done with it: Complete or Failed."""
        return self.complete or self.failed_condition


@dataclasses.dataclass(frozen=True)
class JobCondition:
    """One condition of the hub Job; only True conditions are written, as the Job controller does."""

    type: JobConditionType
    reason: str
    message: str
    last_transition_time: datetime.datetime | None


@dataclasses.dataclass(frozen=True)
class HubJobStatus:
    """The hub Job's status: sums, times and conditions over its member Jobs."""

    active: int = 0
    succeeded: int = 0
    failed: int = 0
    start_time: datetime.datetime | None = None
    completion_time: datetime.datetime | None = None
    conditions: tuple[JobCondition, ...] = ()

    def has(self, kind: JobConditionType) -> bool:
        """Whether the condition `kind` is True."""
        return any(c.type == kind for c in self.conditions)


def member_completions(members: Mapping[str, MemberJob]) -> dict[str, int]:
    """The completions each existing member Job holds (for `jobs.divide_completions`'s `assigned`);
    member Jobs of a work queue (no completions) are left out."""
    return {name: m.completions for name, m in members.items() if m.completions is not None}


def _failed(members: Mapping[str, MemberJob]) -> JobCondition | None:
    failed = sorted(name for name, m in members.items() if m.failed_condition)
    if not failed:
        return None
    times = [t for name in failed if (t := members[name].failed_time) is not None]
    reasons = {name: members[name].failed_reason for name in failed}
    where = ", ".join(f"{name} ({reason})" if reason else name for name, reason in reasons.items())
    return JobCondition(
        "Failed", "MemberJobFailed",
        f"the member Job failed in {len(failed)} cluster(s): {where}",
        min(times, default=None))


def _complete(
    members: Mapping[str, MemberJob], *, completions: int | None, expected: Collection[str], succeeded: int,
) -> bool:
    if any(m.active > 0 for m in members.values()):
        return False
    if completions is not None:
        every = all(name in members and members[name].complete for name in expected)
        return every and succeeded >= completions
    still_active = any(m.active > 0 or not m.finished for m in members.values())
    unheard = any(name not in members for name in expected)
    return any(m.complete for m in members.values()) and not still_active and not unheard


def aggregate_status(
    members: Mapping[str, MemberJob], *, completions: int | None, expected_clusters: Collection[str],
) -> HubJobStatus:
    """The hub Job's status from its member Jobs' (see the module docstring for the rules).

    `members`: each cluster's member Job as last reported (a lost cluster's last report included).
    `completions`: the hub Job's, None for a work queue. `expected_clusters`: the clusters whose
    member Job must be complete for the hub Job to be (those the spread gave a member Job).
    """
    active = sum(m.active for m in members.values())
    succeeded = sum(m.succeeded for m in members.values())
    failed = sum(m.failed for m in members.values())
    start = min((m.start_time for m in members.values() if m.start_time is not None), default=None)
    failed_condition = _failed(members)
    if failed_condition is not None:
        return HubJobStatus(active, succeeded, failed, start, None, (failed_condition,))
    if not _complete(members, completions=completions, expected=expected_clusters, succeeded=succeeded):
        return HubJobStatus(active, succeeded, failed, start)
    done = [m.completion_time for m in members.values() if m.complete and m.completion_time is not None]
    end = max(done, default=None)
    finished = sum(1 for m in members.values() if m.complete)
    of = "" if completions is None else f" of {completions}"
    condition = JobCondition(
        "Complete", "MemberJobsComplete",
        f"{finished} member Job(s) complete, {succeeded}{of} completions succeeded", end)
    return HubJobStatus(active, succeeded, failed, start, end, (condition,))


def rfc3339(at: datetime.datetime | None) -> str | None:
    """`at` as Kubernetes writes a time: UTC, whole seconds, `Z` (naive times are taken as UTC)."""
    if at is None:
        return None
    aware = at if at.tzinfo is not None else at.replace(tzinfo=datetime.UTC)
    return aware.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def to_status_dict(status: HubJobStatus) -> dict[str, Any]:
    """The JSON of a Job's `.status` for `status`, camelCase.

    Every key is present (null for an unknown time, an empty list without conditions), so a merge
    patch of the status also clears what an earlier write set.
    """
    return {
        "active": status.active,
        "succeeded": status.succeeded,
        "failed": status.failed,
        "startTime": rfc3339(status.start_time),
        "completionTime": rfc3339(status.completion_time),
        "conditions": [
            {
                "type": c.type,
                "status": "True",
                "reason": c.reason,
                "message": c.message,
                "lastProbeTime": rfc3339(c.last_transition_time),
                "lastTransitionTime": rfc3339(c.last_transition_time),
            }
            for c in status.conditions
        ],
    }


def finished(job_status: Mapping[str, Any]) -> bool:
    """Whether a Job's `.status` (a dict as the apiserver returns it) has `Complete` or `Failed`
    True: a finished Job stays finished, so its writer keeps what it wrote rather than recompute."""
    conditions = job_status.get("conditions") or []
    return any(
        isinstance(c, Mapping) and c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in conditions
    )
