"""Whose pod is it: a pod counts as a spread's only while its owner chain leads to the spread's
member workload (its Deployment, ReplicaSet, StatefulSet or Job, by the spread's `targetRef.kind`),
marked as the spread's.

Why not the `fedspread.io/spread` label alone: a label outlives what it says. A Deployment
released by a deleted spread (`deletionPolicy: Orphan`) keeps its pod template, so its pods keep
the label; a user's Deployment, another federation's, or a StatefulSet may carry it too, and so may
a pod made by hand (which nothing recreates). Counting such pods as the spread's made the agent
report them Ready, write their deletion costs, delete them to reschedule and admit them into
subsets. So the agent acts on a pod of spread K only when its controller (its controller
ownerReference) is

- for a spread of a Deployment: a ReplicaSet that the cache knows and whose controller is K's
  member Deployment, or K's member Deployment itself;
- for a spread of a ReplicaSet, a StatefulSet or a Job: K's member workload itself (Pod →
  ReplicaSet, Pod → StatefulSet, Pod → Job, no link between),

and that workload carries K's marks (`agents.ownership.owns`: the federation label and the
spread uid of K's assignment). Everything else is someone else's: not counted, not costed, not
rescheduled, not matched by node.

Cheap on purpose: the cache keeps each spread's ReplicaSets (a few objects) indexed by their
Deployment, and each pod's controller uid; a round asks once per spread for the set of controller
uids (`controllers`) and keeps the pods whose controller is in it (`owned`), one set lookup a pod.

The webhook admits a pod at CREATE, when its ReplicaSet may be too new for the cache. Its rule
(`admission`): a pod whose controller is known and not the spread's (a ReplicaSet in the cache
controlled by another Deployment or by none, a controller of another kind, a Deployment not the
spread's marked one) is admitted untouched; a pod whose ReplicaSet the cache does not know yet
(the first pods of a rollout) and a pod no controller owns are admitted as before, by label — the
controller will not count the latter, and its creatingPods entry expires. For a spread of a
ReplicaSet (or StatefulSet) the rule is the same one link shorter: a pod of K's marked member
workload is ours, a pod of another ReplicaSet (StatefulSet) or of another kind of controller is
foreign, and a pod of that kind while the cache knows no member workload of K yet (the first pods
after it was created) is admitted by label.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from agents import ownership
from agents.cache import views
from federation.api import names
from federation.rpc import assignment

Controllers = frozenset[int | str]
"""Compact uids (`views.compact_uid`) of the objects whose pods are a spread's."""

OURS, FOREIGN, UNKNOWN = "ours", "foreign", "unknown"


DIRECT_KINDS = frozenset({"ReplicaSet", "StatefulSet", "Job"})
"""Member workload kinds that are their pods' controller themselves (no ReplicaSet between)."""


def member_workload(value: assignment.Assignment, view: views.WorkloadView | None
                    ) -> views.WorkloadView | None:
    """`view` (the cached member workload of `value`'s kind and target name) if it is `value`'s:
    labelled for the spread and carrying its federation and spread uid; else None."""
    if view is None or view.spread_label != value.name or not ownership.owns(
            federation=view.federation, uid=view.annotations.get(names.SPREAD_UID_ANNOTATION), value=value):
        return None
    return view


def controllers(value: assignment.Assignment, view: views.WorkloadView | None,
                replicasets_of: Callable[[str], Collection[int | str]]) -> Controllers:
    """The controllers whose pods are `value`'s: its marked member workload (`view`, the cached
    workload of its kind and target name) and, for a Deployment, the ReplicaSets it controls;
    empty when the workload is missing or not `value`'s."""
    mine = member_workload(value, view)
    if mine is None or not mine.uid:
        return frozenset()
    if value.kind in DIRECT_KINDS:
        return frozenset({views.compact_uid(mine.uid)})
    return frozenset({views.compact_uid(mine.uid), *replicasets_of(mine.uid)})


def owned(pods: Iterable[views.SpreadPod], chain: Controllers) -> list[views.SpreadPod]:
    """The pods whose controller is in `chain` (`controllers`)."""
    if not chain:
        return []
    return [p for p in pods if p.owner != "" and p.owner in chain]


def admission(value: assignment.Assignment, *, namespace: str, owner_references: Any,
              workload: views.WorkloadView | None,
              replicaset: Callable[[str, str], views.ReplicaSetView | None]) -> str:
    """Whose pod a pod being created is, from its ownerReferences (the webhook's rule, module
    docstring): OURS, FOREIGN (admit it untouched) or UNKNOWN (admit it by label, as before).

    `workload`: the cached member workload of `value`'s kind and target name;
    `replicaset(namespace, name)`: the cached ReplicaSet of that name."""
    ref = _controller(owner_references)
    if ref is None:
        return UNKNOWN
    mine = member_workload(value, workload)
    kind, uid = ref.get("kind"), str(ref.get("uid") or "")
    if value.kind in DIRECT_KINDS:
        if kind != value.kind:
            return FOREIGN
        if mine is None:
            return UNKNOWN  # our member workload too new for the cache: as before
        return OURS if uid == mine.uid else FOREIGN
    if kind == "Deployment":
        return OURS if mine is not None and uid == mine.uid else FOREIGN
    if kind != "ReplicaSet":
        return FOREIGN
    known = replicaset(namespace, str(ref.get("name") or ""))
    if known is None or known.uid != uid:
        return UNKNOWN  # too new for the cache (a rollout's first pods): as before
    return OURS if mine is not None and known.owner == mine.uid else FOREIGN


def _controller(owner_references: Any) -> Mapping[str, Any] | None:
    if not isinstance(owner_references, list):
        return None
    return views.controller_of({"ownerReferences": [r for r in owner_references if isinstance(r, Mapping)]})
