"""Spare pods that starve a subset: which pods to remove when the member workload, at its target,
will never create the pods a subset below its quota waits for.

Why a rule of its own: a member Deployment counts pods, not subsets. Its replicas are the sum of
this cluster's quotas, and it stops creating pods once it has that many, whichever subsets they
hold. Pods beyond their own subset's quota (a cap lowered while a scale-down was under way, a
re-created spread that adopted more pods than it keeps) and pods of no subset or of a removed one
can fill that sum while another subset is below its quota: its replacements are never created,
the coordinator keeps the old pods until they are Ready, and nothing converges (`make soak` found
both; RELIABILITY.md, "Spare pods removed"). The ReplicaSet would have removed those very pods had
its target been right; this rule removes them, so that it creates the missing ones, which the
webhook admits into the subsets below their quota.

A pod is *outside* when no quota of its own subset counts it: it has no subset or one the spec no
longer has, or it is beyond its subset's quota here (the ones the ReplicaSet gives up first,
`deletion_cost`'s ranking). The coordinator keeps some outside pods until their replacements are
Ready, counted inside some subset's quota (`Share.leaving`: its `leaving` reasons for this
cluster); the others are *spare*. A subset *waits* for the pods its quota counts and nobody
holds: its quota less its own pods and less the kept pods it carries. The rule removes
min(spare, waiting) outside pods, those the ReplicaSet would remove first (not Ready before Ready),
and no Ready pod once the cluster would hold fewer Ready pods than the spread *needs* here: the
quotas less every Ready pod the coordinator keeps until its replacement is Ready (`Share.kept`: its
handover's, `leaving` included). Pods of no subset that stand in for a waiting subset's pods, with
nothing kept in their stead, are therefore left running: they serve what the spread needs until
a pod is replaced. It removes, and only when nothing else is moving:

- the workload is at its target: as many active pods as its replicas and the assignment's
  replicas, none terminating (otherwise the ReplicaSet is still creating or deleting);
- every pod is of one template revision (no rollout);
- only subsets the webhook admits into now count as waiting (not marked unschedulable here): a pod
  removed for a subset the webhook skips would come back where it was.

It never removes a pod a quota counts, nor more outside pods than the coordinator does not keep,
so the Ready pods its handover keeps stay. With a coordinator that does not say what it keeps
(`leaving`, `kept` unset), it removes nothing.
The agent calls it each round and removes the pods it names (`agents.controller.spare`).

Pure: no Kubernetes client, no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from federation.core import deletion_cost


@dataclasses.dataclass(frozen=True)
class Share:
    """One subset's share in this cluster, as the assignment gives it."""

    name: str
    quota: int
    leaving: int | None = 0
    """Of `quota`, the pods outside their own subset's quota here (of no subset, of a removed
    subset, of a subset that no longer has this cluster) the coordinator keeps in it until their
    replacements are Ready (its `leaving` reasons for this cluster); None when the coordinator does
    not say (an older one): nothing is then removed."""
    kept: int | None = 0
    """Of `quota`, every Ready pod the coordinator keeps here until its replacement is Ready
    (`leaving` included); None when the coordinator does not say: nothing is then removed."""
    admits: bool = True
    """Whether the webhook admits pods into it here now (False while marked unschedulable)."""


@dataclasses.dataclass(frozen=True)
class SparePods:
    """What `spare_pods` found: the pods to remove, and the subsets waiting for them (by name, how
    many pods each waits for), for the log and the Event that say why."""

    pods: tuple[str, ...] = ()
    waiting: Mapping[str, int] = dataclasses.field(default_factory=dict)


NONE = SparePods()


def spare_pods(pods: Sequence[deletion_cost.PodView], *, shares: Sequence[Share], replicas: int,
               target: int | None) -> SparePods:
    """The spare pods of a spread's member workload in this cluster to remove now (module docstring).

    `pods`: the workload's pods; `shares`: its subsets in spec order; `replicas`: the assignment's
    replicas (the quotas' sum); `target`: the member workload's `spec.replicas` as the cluster holds
    it (None: unknown, nothing is removed).
    """
    if target is None or target != replicas or replicas <= 0:
        return NONE
    if any(s.leaving is None or s.kept is None for s in shares):  # a coordinator that does not say
        return NONE
    if any(not p.active for p in pods) or len(pods) != replicas:
        return NONE
    if len({p.revision for p in pods}) > 1:
        return NONE
    known = {s.name: s for s in shares}
    held: dict[str, list[deletion_cost.PodView]] = {name: [] for name in known}
    strays: list[str] = []
    for pod in pods:
        if pod.subset is not None and pod.subset in known:
            held[pod.subset].append(pod)
        else:
            strays.append(pod.name)
    waiting = {s.name: s.quota - (s.leaving or 0) - len(held[s.name]) for s in shares if s.admits}
    waiting = {name: count for name, count in waiting.items() if count > 0}
    needed = replicas - sum(s.kept or 0 for s in shares)  # what the spread needs Ready here
    costs = deletion_cost.deletion_costs(pods, subsets=[s.name for s in shares],
                                         quotas={s.name: s.quota for s in shares})
    outside = list(strays)  # pods no quota of their own subset counts
    for share in shares:
        group = held[share.name]
        over = len(group) - max(0, share.quota)
        if over > 0:
            outside += deletion_cost.replicaset_deletion_order(group, costs=costs)[:over]
    spare = len(outside) - sum(s.leaving or 0 for s in shares)  # less those kept inside a quota
    count = min(spare, sum(waiting.values()))
    if count <= 0:
        return NONE
    ready_left = sum(p.ready for p in pods) - needed  # Ready pods that may go
    picked = set(outside)
    chosen: list[str] = []
    ready = {p.name for p in pods if p.ready}
    for name in deletion_cost.replicaset_deletion_order([p for p in pods if p.name in picked], costs=costs):
        if len(chosen) == count or (name in ready and ready_left <= 0):
            break
        chosen.append(name)
        ready_left -= name in ready
    if not chosen:
        return NONE
    return SparePods(pods=tuple(chosen), waiting=waiting)
