"""Which deletion cost each pod of a spread should carry: the agent's side of
`federation.core.deletion_cost`, from the cache's pods and the assignment's quotas.

Why apart from the reconciler loop: these are the pure steps between what the cache holds and the
core's rule — a cached pod as the rule reads it, the subset order with the spread's own n and i,
and, while a rollout runs, which template revision is the newest (the member Deployment's
ReplicaSets say; a revision they do not name ranks by its newest pod). Tested row by row without a
loop; the reconciler only fetches, calls `desired_costs` and patches what differs.
"""

from __future__ import annotations

import collections
import datetime
from collections.abc import Sequence

from agents.cache import views
from federation.core import deletion_cost
from federation.rpc import assignment


def pod_view(pod: views.SpreadPod) -> deletion_cost.PodView:
    """What deletion cost reads of a cached pod."""
    r = pod.record
    return deletion_cost.PodView(
        name=r.name, subset=r.subset, phase=r.phase, ready=r.ready, node_name=r.node_name,
        created=r.created, deleting=r.deleting, restarts=r.restarts, ready_since=pod.ready_since,
        current_cost=r.current_cost, revision=r.revision,
    )


def subset_order(value: assignment.Assignment) -> list[str]:
    """Subset names by spec index, `subset_count` long; indices the assignment omits get a
    placeholder no pod can carry, so n and i in the cost formula stay the spread's own."""
    names = [f"\x00absent-{i}" for i in range(value.spec_subsets)]
    for rule in value.subsets:
        if 0 <= rule.index < len(names):
            names[rule.index] = rule.name
    return names


def desired_costs(value: assignment.Assignment, pods: Sequence[views.SpreadPod], *,
                  revisions: Sequence[str] = ()) -> dict[str, int]:
    """Deletion cost of every pod of a spread, by pod name.

    One revision among the active pods: `deletion_cost.deletion_costs`. Several (a rollout):
    `deletion_cost.revision_deletion_costs`, old revisions below new ones, each older one's quota
    what the newer ones leave of it; `revisions` are the member workload's newest first (its
    ReplicaSets'), and a revision it does not name ranks by its newest pod (`revision_order`).
    """
    order, quotas = subset_order(value), value.quotas()
    views_ = [pod_view(pod) for pod in pods]
    present = {p.revision for p in views_ if p.active}
    if len(present) <= 1:
        groups: dict[str | None, list[deletion_cost.PodView]] = collections.defaultdict(list)
        for view in views_:
            groups[view.revision].append(view)
        costs: dict[str, int] = {}
        for group in groups.values():
            costs.update(deletion_cost.deletion_costs(group, subsets=order, quotas=quotas))
        return costs
    return deletion_cost.revision_deletion_costs(views_, subsets=order, quotas=quotas,
                                                 revisions=revision_order(pods, known=revisions))


def revision_order(pods: Sequence[views.SpreadPod], *, known: Sequence[str]) -> list[str]:
    """The revisions of `pods`, newest first: those in `known` (newest first) in its order, then the
    others by their newest pod's creation, the most recent first (a pod of a template created later
    is of a later rollout)."""
    newest: dict[str, datetime.datetime] = {}
    for pod in pods:
        revision = pod.record.revision
        newest[revision] = max(newest.get(revision, pod.record.created), pod.record.created)
    named = [r for r in known if r in newest]
    rest = sorted((r for r in newest if r not in named), key=lambda r: (newest[r], r), reverse=True)
    return named + rest
