"""Rollouts that keep the spread: the webhook's subset choice per template revision.

Why: when the hub template changes, every member workload rolls. The webhook's plain rule
(`quotas.choose_subset`: the first subset with quota left) counts pods of every revision, so a
surge pod of the new revision finds every subset full — its old-revision predecessor still runs —
and lands in the wrong subset for good (kruise#834). Counting per revision fixes that:

- **A pod takes the first subset, in spec order, whose count of the pod's own revision is below
  its quota** (its share here), so when the rollout ends every subset holds exactly its share
  again. Pods that already have a subset keep it (the webhook only labels pods it admits).
- **A subset never holds more than its quota plus the workload's surge here**, all revisions
  counted. The issue states the bound as "cap plus surge"; the quota in this cluster is what the
  webhook knows of the cap and never exceeds it, so the bound here is the stricter one. It never
  leaves a pod without a subset while the workload keeps its own surge: were every subset with a
  revision count below its quota at quota + surge, the pods would number at least
  `replicas + surge` before this one, more than the workload runs (`choose` says why in full).
- Old revisions go first: `deletion_cost.revision_deletion_costs`.

`revision_counts` turns (subset, revision) pairs into the per-revision subset counts the spread's
status shows while a rollout runs. Pure: counts in, a subset name out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from federation.api import names, rebalance
from federation.core import quotas

DEFAULT_MAX_SURGE = "25%"
"""A Deployment's `spec.strategy.rollingUpdate.maxSurge` when unset."""

RevisionCounts = Mapping[str, Mapping[str, int]]
"""Pods per template revision per subset (not those being deleted)."""


def surge_here(max_surge: int | str | None, replicas: int) -> int:
    """The workload's surge in pods in this cluster, as the Deployment controller resolves it: a
    percentage of its replicas rounded up (default 25%). A StatefulSet or a Deployment with the
    Recreate strategy surges by nothing: pass 0."""
    return rebalance.resolve_int_or_percent(
        DEFAULT_MAX_SURGE if max_surge is None else max_surge, replicas, round_up=True)


def workload_surge(spec: Mapping[str, Any], *, kind: str, replicas: int) -> int:
    """The surge in pods of a member workload whose `spec` is as given, with `replicas` here.

    A Deployment's is its `strategy.rollingUpdate.maxSurge` (`surge_here`), 0 under the Recreate
    strategy; every other kind surges by nothing (a StatefulSet replaces pod by pod, a ReplicaSet
    or a Job has no rollout). A maxSurge the apiserver would refuse (the member Deployment is then
    never written, so it never rolls) reads as the default.
    """
    if kind != "Deployment":
        return 0
    strategy = spec.get("strategy") or {}
    if not isinstance(strategy, Mapping) or strategy.get("type") == "Recreate":
        return 0
    rolling = strategy.get("rollingUpdate") or {}
    value = rolling.get("maxSurge") if isinstance(rolling, Mapping) else None
    if not isinstance(value, (int, str)) or isinstance(value, bool):
        value = None
    try:
        return max(0, surge_here(value, replicas))
    except ValueError:
        return surge_here(None, replicas)


def pod_revision(labels: Mapping[str, str] | None) -> str:
    """A pod's template revision: a Deployment's pod's `pod-template-hash`, a StatefulSet's pod's
    `controller-revision-hash`; "" for a pod of neither (a ReplicaSet has one revision)."""
    found = labels or {}
    return found.get(names.REVISION_LABEL) or found.get(names.CONTROLLER_REVISION_LABEL) or ""


def choose(
    table: Sequence[quotas.SubsetQuota],
    *,
    counts: RevisionCounts,
    revision: str,
    surge: int,
    adaptive: bool,
    unschedulable: Collection[str] = (),
    previous: str | None = None,
) -> str | None:
    """The subset for a new pod of `revision`: `quotas.choose_subset` counting only `revision`'s
    pods, among the subsets whose pods of all revisions are below quota + `surge`.

    `counts` holds every revision's pods here (not the pod being chosen for); `previous`,
    `adaptive` and `unschedulable` as in `choose_subset`. With one revision this is
    `choose_subset`'s answer: a subset whose count is below its quota is below quota + surge.

    Why the bound never leaves a pod without a subset while the workload holds `replicas + surge`
    pods at most (this one included): take the subsets whose `revision` count is below quota
    (some are, or `revision` already has its `replicas`); were all of them at quota + surge or
    above, they would hold their quotas plus at least one surge, and every other subset at least
    its quota in `revision` pods alone, `replicas + surge` before this pod.
    """
    mine = counts.get(revision, {})
    everything = totals(counts)
    allowed = [row for row in table if everything.get(row.subset, 0) < row.quota + surge]
    return quotas.choose_subset(allowed, assigned=mine, adaptive=adaptive, unschedulable=unschedulable,
                                previous=previous)


def totals(counts: RevisionCounts) -> dict[str, int]:
    """Pods per subset, all revisions together."""
    found: dict[str, int] = {}
    for per_subset in counts.values():
        for subset, count in per_subset.items():
            found[subset] = found.get(subset, 0) + count
    return found


def over_bound(table: Sequence[quotas.SubsetQuota], *, counts: RevisionCounts, surge: int) -> dict[str, int]:
    """The subsets holding more than quota + `surge` pods of all revisions here, and how many more:
    what a rollout must never show (empty while it keeps the bound)."""
    everything = totals(counts)
    return {row.subset: everything.get(row.subset, 0) - row.quota - surge for row in table
            if everything.get(row.subset, 0) > row.quota + surge}


def revision_counts(pods: Iterable[tuple[str | None, str | None]]) -> dict[str, dict[str, int]]:
    """Per-revision subset counts from (subset, revision) pairs of the pods that are not being
    deleted; pods of no subset or no known revision are left out."""
    counts: dict[str, dict[str, int]] = {}
    for subset, revision in pods:
        if subset is None or revision is None:
            continue
        row = counts.setdefault(revision, {})
        row[subset] = row.get(subset, 0) + 1
    return counts
