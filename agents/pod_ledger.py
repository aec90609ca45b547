"""What the agent's bookkeeping records of each spread's pods, and the running tally of their quota.

Why a module of its own: these are the records — a pod as the controller's cache saw it
(`PodRecord`), a creatingPods or deletingPods entry (`Pending`, with how long each lives), and one
spread's book with its tally per (revision, subset) — that the cache builds, the reports carry and
`bookkeeping.Bookkeeping` keeps under its lock. Which pod holds whose quota (`SpreadBook.holder`)
is the rule every count follows; the locking and the admission decisions are the bookkeeping's.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime

from federation.core import status

CREATING_TTL = datetime.timedelta(seconds=30)
DELETING_TTL = datetime.timedelta(seconds=15)
FINISHED_PHASES = frozenset({"Succeeded", "Failed"})

@dataclasses.dataclass(frozen=True, slots=True)
class PodRecord:
    """What the controller's cache knows about one pod of a spread (slotted: the cache holds one per
    pod of every spread, tens of thousands on a big member)."""

    name: str
    subset: str | None
    revision: str
    phase: str
    ready: bool
    node_name: str
    created: datetime.datetime
    deleting: bool = False
    unschedulable_since: datetime.datetime | None = None
    current_cost: int | None = None
    restarts: int = 0
    owned: bool = True
    """Made by a controller (a controller ownerReference, the member Deployment's ReplicaSet): only
    such pods are part of the workload and matched to a subset by their node."""

    @property
    def active(self) -> bool:
        """Holds quota: not being deleted and not finished."""
        return not self.deleting and self.phase not in FINISHED_PHASES


@dataclasses.dataclass(frozen=True)
class Pending:
    """A creatingPods or deletingPods entry."""

    subset: str
    revision: str
    since: datetime.datetime

Holder = tuple[str, str]
"""(revision, subset): whose quota a pod holds."""


@dataclasses.dataclass
class SpreadBook:
    """One spread's pods as this agent knows them, and the running tally of whose quota each holds."""

    observed: dict[str, PodRecord] = dataclasses.field(default_factory=dict)
    creating: dict[str, Pending] = dataclasses.field(default_factory=dict)
    deleting: dict[str, Pending] = dataclasses.field(default_factory=dict)
    local_marks: dict[str, datetime.datetime] = dataclasses.field(default_factory=dict)
    matched: dict[str, str] = dataclasses.field(default_factory=dict)
    """Pods of no subset given one by their node (`match_by_node`), until the cache shows it."""
    tally: collections.Counter[Holder] = dataclasses.field(default_factory=collections.Counter)
    """Pods holding quota by (revision, subset), in step with the three maps above."""

    def holder(self, name: str) -> Holder | None:
        """Whose quota pod `name` holds now: an observed pod that has a subset, is active and is
        not being deleted, or a creatingPods entry the cache has not seen yet."""
        if name in self.deleting:
            return None
        pod = self.observed.get(name)
        if pod is not None:
            return (pod.revision, pod.subset) if pod.subset and pod.active else None
        entry = self.creating.get(name)
        return (entry.revision, entry.subset) if entry is not None else None

    def moved(self, before: Holder | None, after: Holder | None) -> None:
        """Move one pod in the tally from `before` to `after` (either may be None)."""
        if before == after:
            return
        if before is not None:
            self.tally[before] -= 1
            if self.tally[before] <= 0:
                del self.tally[before]
        if after is not None:
            self.tally[after] += 1

    def revision_counts(self) -> dict[str, dict[str, int]]:
        """The tally as `rollout.RevisionCounts`: pods holding quota per revision per subset."""
        found: dict[str, dict[str, int]] = collections.defaultdict(dict)
        for (revision, subset), count in self.tally.items():
            found[revision][subset] = count
        return found

    def recount(self) -> None:
        """The tally from scratch (after the maps changed wholesale)."""
        names = self.observed.keys() | self.creating.keys()
        self.tally = collections.Counter(h for h in map(self.holder, names) if h is not None)


SubsetCounts = status.ClusterPods
"""Pods of one subset in this cluster, by state (the same record the coordinator reads)."""
