"""A spread of a hub Job, as the coordinator sees it: who holds which completions, and its status.

Why here: the rules are pure (`federation.core.jobs`, `federation.core.job_status`), but their
inputs are the World's — each cluster's parallelism share in the placement, the member Jobs its
agent last reported (completions, succeeded, conditions), which clusters are lost, and whether the
coordinator has heard from a cluster about this spread at all. This module gathers them once for
the assignments (`completions`) and the status pass (`hub_status`, `stranded_condition`).

**No division on partial knowledge.** A member Job's completions are immutable, and the division
is stateless: it reads which clusters already hold a member Job from their agents' reports. A
coordinator that has not heard from a cluster (it just started, or the agent reconnected) would
take "no report" for "no member Job" and give the same completions twice. So new completions are
divided only once every cluster with a parallelism share that is not lost has reported on this
spread since (`PodReports.verified`); until then each existing member Job is sent its own
completions and every other cluster 0 (its agent creates nothing: `agents.controller.kinds.JobKind`).
The first assignment of a Job spread therefore creates no member Job; the reports it causes
(each agent reports the spreads it holds) let the next round divide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from federation.api import common
from federation.coordinator.model import facts
from federation.coordinator.model import world as world_model
from federation.core import job_status, jobs, placement
from federation.core import status as status_core

STRANDED = "CompletionsStranded"
"""The spread's condition while completions of lost clusters' member Jobs are unfinished."""
PAUSED = "CompletionsPaused"
"""The spread's condition while member Jobs with unfinished completions have no parallelism share
(a scale-down, a cordon or a deselection took it): they run nothing, and the hub Job cannot
complete until they get a share again."""


@dataclasses.dataclass(frozen=True)
class JobSpread:
    """What the World says of one Job spread now."""

    completions: int | None
    """The hub Job's `spec.completions` (None: a work queue)."""
    parallelism: Mapping[str, int]
    """Each cluster's parallelism share in the placement."""
    members: Mapping[str, job_status.MemberJob]
    """Each cluster's member Job as its agent last reported it (lost clusters' included)."""
    lost: frozenset[str]
    """Clusters not heard within the spread's clusterLostSeconds."""
    informed: bool
    """Every cluster with a share, not lost and without a member Job, has reported on the spread."""

    def split(self) -> jobs.CompletionSplit | None:
        """The completions of every member Job, existing and to create (None for a work queue)."""
        if self.completions is None:
            return None
        assigned = job_status.member_completions(self.members)
        lost_succeeded = {name: self.members[name].succeeded for name in self.lost if name in self.members}
        return jobs.divide_completions(self.completions, parallelism=self.parallelism, assigned=assigned,
                                       lost_succeeded=lost_succeeded)


def is_job(entry: facts.SpreadEntry) -> bool:
    """Whether the spread targets a Job."""
    return entry.spec.target_ref.kind == "Job"


def hub_completions(template: Mapping[str, Any] | None) -> int | None:
    """The hub Job's `spec.completions` (None when unset or not a count)."""
    value = ((template or {}).get("spec") or {}).get("completions")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def job_spread(world: world_model.World, entry: facts.SpreadEntry, result: placement.Placement) -> JobSpread:
    """The World's facts of Job spread `entry` placed as `result`."""
    parallelism: dict[str, int] = {}
    for subset in result.subsets:
        for name, count in subset.clusters.items():
            parallelism[name] = parallelism.get(name, 0) + count
    members = {name: found.job for name, found in world.pods.workloads_for(entry.key).items()
               if found.job is not None}
    known = set(parallelism) | set(members)
    lost = frozenset(name for name in known if not world.ready(name, after=entry.lost_after))
    informed = all(world.pods.verified(name, entry.key) for name, share in parallelism.items()
                   if share > 0 and name not in lost and name not in members)
    return JobSpread(hub_completions(entry.template), parallelism, members, lost, informed)


def completions(world: world_model.World, entry: facts.SpreadEntry, result: placement.Placement,
                ) -> dict[str, int] | None:
    """Per cluster, the completions its member Job has or is to be created with (clusters absent:
    0, create none); None for a spread of another kind or of a work queue (module docstring: new
    completions wait until every cluster concerned has reported)."""
    if not is_job(entry):
        return None
    found = job_spread(world, entry, result)
    split = found.split()
    if split is None:
        return None
    if not found.informed:
        return {name: count for name, count in split.per_cluster.items() if name not in split.created}
    return dict(split.per_cluster)


def hub_status(world: world_model.World, entry: facts.SpreadEntry, result: placement.Placement,
               ) -> dict[str, Any]:
    """The hub Job's `.status` (`job_status.to_status_dict`) from its member Jobs: with completions,
    complete when every cluster that holds completions has completed them; a work queue when one
    member Job completed and none of the clusters with a share is still running or unheard."""
    found = job_spread(world, entry, result)
    split = found.split()
    if split is None:
        expected: Sequence[str] = sorted(name for name, share in found.parallelism.items() if share > 0)
    else:
        expected = sorted(name for name, count in split.per_cluster.items() if count > 0)
    aggregated = job_status.aggregate_status(found.members, completions=found.completions,
                                             expected_clusters=expected)
    return job_status.to_status_dict(aggregated)


def conditions(world: world_model.World, entry: facts.SpreadEntry, result: placement.Placement, *,
               previous: Sequence[common.Condition], now: Any) -> list[common.Condition]:
    """The spread's Job conditions, each True with counts and clusters while it holds, left out
    otherwise: `CompletionsStranded` while lost clusters' member Jobs have unfinished completions
    (their member Jobs are kept; the completions are placed only where no member Job of the spread
    exists), `CompletionsPaused` while member Jobs with unfinished completions have no share."""
    found = job_spread(world, entry, result)
    if found.completions is None:
        return []
    held = job_status.member_completions(found.members)
    succeeded = {name: m.succeeded for name, m in found.members.items()}
    generation = entry.spread.metadata.generation
    said: list[common.Condition] = []
    stranded = jobs.stranded_by_cluster(completions_by_cluster=held, succeeded_by_cluster=succeeded,
                                        lost=found.lost)
    if stranded:
        said.append(status_core.condition(STRANDED, "True", reason="ClusterLost",
                                          message=jobs.stranded_message(stranded), previous=previous,
                                          now=now, generation=generation))
    paused = jobs.paused_completions(completions_by_cluster=held, succeeded_by_cluster=succeeded,
                                     parallelism=found.parallelism, lost=found.lost)
    if paused:
        where = ", ".join(f"{name} ({count})" for name, count in sorted(paused.items()))
        said.append(status_core.condition(
            PAUSED, "True", reason="NoParallelism", previous=previous, now=now, generation=generation,
            message=f"{sum(paused.values())} completions of member Jobs with no parallelism share are "
                    f"unfinished: {where}; they run again when their cluster gets a share (the hub Job "
                    "completes only then)"))
    return said
