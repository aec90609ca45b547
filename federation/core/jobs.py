"""Spreading a Job: dividing its completions, finding stranded ones, rendering a member Job's spec.

Why a module of its own: a Job is not a Deployment with another name. Its spread quantity is
`parallelism` (caps, percentages and overflow apply to it as to replicas, placed elsewhere), but
`completions` is a budget of work that must add up across the member Jobs, and a member Job's
`completions` is immutable once created. So the completions are divided once per member Job, when
it is created, in proportion to the clusters' parallelism shares (largest remainder); a later
scale changes member parallelism only; a cluster joining later gets only the completions no member
Job holds yet, and a cluster whose share would be 0 completions gets no member Job at all (a Job
with `completions: 0` is complete at once, which would count as done work that never ran).

A lost cluster's member Job is never deleted (do no harm: it may be running). The completions it
had not finished when it was last heard are *stranded*: reported (`CompletionsStranded`) and
divided again, but only among clusters with no member Job of the spread, because no existing
member Job can take more. The division is stateless and idempotent: a lost cluster counts as
having done only what it reported succeeded, so once the stranded completions sit in a new member
Job they are no longer "not yet assigned" and are not placed twice.

Pure: no Kubernetes client; Job specs are plain camelCase mappings as the apiserver returns them.
The hub Job's status, which the coordinator writes, is aggregated in `job_status`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

from federation.core import apportion

GENERATED_TEMPLATE_LABELS = (
    "controller-uid",
    "job-name",
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
)
"""Template labels an apiserver adds to a Job it generates the selector of (the unprefixed ones
through Kubernetes 1.26, the prefixed ones from 1.27): the hub's carry the hub Job's uid, which
a member apiserver refuses (`selector` not auto-generated) and must generate itself."""

_NOT_COPIED = ("selector", "manualSelector", "ttlSecondsAfterFinished")
"""Hub Job spec fields a member Job does not get: the selector is the hub's own (each member
generates its own), and a TTL would delete a finished member Job, which its agent would then
create again and run its completions a second time."""


@dataclasses.dataclass(frozen=True)
class CompletionSplit:
    """How a Job's completions are held by its member Jobs after a division.

    `per_cluster`: the completions of each member Job, those that exist (unchanged) and those to
    create (> 0 each). `created`: only those to create. `idle_clusters`: clusters with a
    parallelism share that get no member Job because no completions are left for them (to be
    reported; their share runs nothing). `unplaced`: completions no cluster could take (no
    cluster with a share and no member Job). `stranded`: unfinished completions of lost clusters'
    member Jobs, counted as not assigned.
    """

    per_cluster: Mapping[str, int]
    created: Mapping[str, int]
    idle_clusters: tuple[str, ...] = ()
    unplaced: int = 0
    stranded: int = 0


def stranded_by_cluster(
    *,
    completions_by_cluster: Mapping[str, int],
    succeeded_by_cluster: Mapping[str, int],
    lost: Collection[str],
) -> dict[str, int]:
    """Each lost cluster's unfinished completions: its member Job's completions minus what it last
    reported succeeded (never below 0); lost clusters without a member Job or with none left out."""
    stranded = {}
    for name in sorted(lost):
        if name not in completions_by_cluster:
            continue
        left = completions_by_cluster[name] - succeeded_by_cluster.get(name, 0)
        if left > 0:
            stranded[name] = left
    return stranded


def stranded_completions(
    *,
    completions_by_cluster: Mapping[str, int],
    succeeded_by_cluster: Mapping[str, int],
    lost: Collection[str],
) -> int:
    """The unfinished completions of lost clusters' member Jobs (`CompletionsStranded`'s count)."""
    return sum(stranded_by_cluster(
        completions_by_cluster=completions_by_cluster, succeeded_by_cluster=succeeded_by_cluster, lost=lost,
    ).values())


def stranded_message(stranded: Mapping[str, int]) -> str:
    """The `CompletionsStranded` condition's message for `stranded_by_cluster`'s answer."""
    total = sum(stranded.values())
    where = ", ".join(f"{name} ({count})" for name, count in sorted(stranded.items()))
    return (f"{total} completions of member Jobs in lost clusters are unfinished: {where}; their member "
            "Jobs are kept, and the completions go to clusters with no member Job of this spread")


def paused_completions(
    *,
    completions_by_cluster: Mapping[str, int],
    succeeded_by_cluster: Mapping[str, int],
    parallelism: Mapping[str, int],
    lost: Collection[str] = (),
) -> dict[str, int]:
    """Unfinished completions of member Jobs whose parallelism share is now 0 (a scale-down or a
    cordon took it): such a member Job runs no pods, and as its completions are immutable and
    nobody else may take them, the hub Job cannot complete until the cluster gets a share again.
    To be reported, like stranded completions; lost clusters are left out (they are stranded)."""
    paused = {}
    for name, count in sorted(completions_by_cluster.items()):
        left = count - succeeded_by_cluster.get(name, 0)
        if name not in lost and parallelism.get(name, 0) <= 0 and left > 0:
            paused[name] = left
    return paused


def may_take_stranded(cluster: str, *, member_jobs: Collection[str]) -> bool:
    """Whether `cluster` may be given stranded completions: only if no member Job of the spread is
    there (a member Job's completions are immutable; a lost cluster's member Job is never deleted)."""
    return cluster not in member_jobs


def divide_completions(
    completions: int,
    *,
    parallelism: Mapping[str, int],
    assigned: Mapping[str, int],
    lost_succeeded: Mapping[str, int] | None = None,
) -> CompletionSplit:
    """The completions each member Job is created with.

    `parallelism`: each cluster's parallelism share, as placed. `assigned`: the completions of the
    member Jobs that exist, kept as they are. `lost_succeeded`: for each lost cluster, what its
    member Job last reported succeeded; only that counts as done, so the rest of its completions
    (stranded) are divided again. The completions not yet assigned go to the clusters with a share
    > 0 and no member Job, in proportion to their share by largest remainder (ties: the larger
    share, then the cluster name); one that gets 0 is idle (no member Job); a lost cluster gets
    none (nothing reaches it, and what it was given would be stranded at once). The new member Jobs
    together never get more than `completions` minus what the others hold or did.
    """
    if completions < 0:
        raise ValueError(f"completions must not be negative: {completions}")
    if any(count < 0 for count in assigned.values()) or any(p < 0 for p in parallelism.values()):
        raise ValueError("assigned completions and parallelism shares must not be negative")
    lost = lost_succeeded or {}
    lost_in_jobs = [name for name in lost if name in assigned]
    stranded = stranded_completions(
        completions_by_cluster=assigned, succeeded_by_cluster=lost, lost=lost_in_jobs,
    )
    held = sum(assigned.values()) - stranded
    left = max(0, completions - held)
    open_ = [name for name, share in parallelism.items() if share > 0 and name not in lost]
    candidates = sorted(
        (name for name in open_ if may_take_stranded(name, member_jobs=assigned)),
        key=lambda name: (-parallelism[name], name),
    )
    if not candidates:
        return CompletionSplit(dict(assigned), {}, unplaced=left, stranded=stranded)
    shares = apportion.split_ints(left, [parallelism[name] for name in candidates])
    created = {name: share for name, share in zip(candidates, shares, strict=True) if share}
    idle = tuple(sorted(name for name in candidates if name not in created))
    return CompletionSplit({**assigned, **created}, created, idle_clusters=idle, stranded=stranded)


def unsupported_job_fields(hub_job_spec: Mapping[str, Any]) -> list[str]:
    """Problems, with their field paths, that make a Job impossible to spread (for validation).

    An `Indexed` Job's completion indexes 0..completions-1 cannot be divided: every member Job
    would number its own completions from 0, so indexes would repeat and some never run.
    """
    problems = []
    if hub_job_spec.get("completionMode", "NonIndexed") != "NonIndexed":
        problems.append(
            f"spec.completionMode: {hub_job_spec.get('completionMode')!r} cannot be spread: member Jobs "
            "would each number their completions from 0; use NonIndexed")
    return problems


def member_job_spec(
    hub_job_spec: Mapping[str, Any], *, parallelism: int, completions: int | None, suspend: bool,
) -> dict[str, Any]:
    """The member Job's spec from the hub Job's; `hub_job_spec` is not changed.

    `parallelism` is the cluster's share; `completions` the member Job's own (from
    `divide_completions` at creation, then the member's existing value: it is immutable), None for
    a work queue. `suspend` is the hub Job's, written explicitly so resuming the hub resumes the
    member. The hub's selector, `manualSelector` and the labels the hub apiserver generated in the
    template are dropped (the member's apiserver generates its own); `ttlSecondsAfterFinished` is
    not copied (see `_NOT_COPIED`).
    """
    problems = unsupported_job_fields(hub_job_spec)
    if problems:
        raise ValueError("; ".join(problems))
    if parallelism < 0 or (completions is not None and completions < 0):
        raise ValueError(f"parallelism {parallelism} and completions {completions} must not be negative")
    spec = {key: copy.deepcopy(value) for key, value in hub_job_spec.items() if key not in _NOT_COPIED}
    spec["parallelism"] = parallelism
    if completions is None:
        spec.pop("completions", None)
    else:
        spec["completions"] = completions
    spec["suspend"] = suspend
    metadata = spec.get("template", {}).get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("labels"), dict):
        labels = {k: v for k, v in metadata["labels"].items() if k not in GENERATED_TEMPLATE_LABELS}
        if labels:
            metadata["labels"] = labels
        else:
            del metadata["labels"]
    return spec
