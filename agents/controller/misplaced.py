"""StatefulSet pods whose ordinal now maps to another subset: found each round, reported, never moved.

Why a report and not a repair: a quota change moves the ordinal ranges (`federation.core.ordinals`),
so a running pod may hold a subset its ordinal no longer maps to. Deleting it to move it would
throw away what makes a StatefulSet pod what it is (its name, identity and claims; a volume bound
to one node pool's topology would keep it Pending in another), so the reconciler never does
(`KindPolicy.reschedule_deletes_pods` is false for the kind). What it owes the user is to say so:
this module turns the spread's cached pods into the text the agent reports with its pod counts
(`SpreadPodCounts.misplaced`), which the coordinator shows as the spread's `PodsMisplaced`
condition. Each pod moves when it is next recreated (a rolling update, an eviction, a delete).

Which pods count: the member StatefulSet's own pods (named `<statefulset>-<n>`) that are not being
deleted and have not finished, below both the member StatefulSet's `spec.replicas` and the sum of
this cluster's quotas (`ordinals.misplaced`'s `replicas`). A pod at or above either is on its way
out: the StatefulSet controller removes it, or the workload sync is about to scale the member
StatefulSet down to the quotas' sum — reporting it would flap the condition on every ordinary
scale-down. The ranges are the ones the webhook admits by (`Bookkeeping`'s `_ordinal_subset`):
this cluster's quotas in subset order.
"""

from __future__ import annotations

from collections.abc import Sequence

from agents.cache import views
from federation.core import ordinals, workload_kinds
from federation.rpc import assignment


def misplaced_report(value: assignment.Assignment, pods: Sequence[views.SpreadPod],
                     member: views.WorkloadView | None) -> str:
    """The report for `value`'s pods in this cluster ("" when none is misplaced, or the spread's
    kind is not ordered by ordinals)."""
    try:
        by_ordinal = workload_kinds.policy_for(value.api_version, value.kind).scale_down_order == "ordinals"
    except workload_kinds.UnsupportedKind:
        return ""
    if not by_ordinal or not value.workload:
        return ""
    held: dict[int, str | None] = {}
    for pod in pods:
        record = pod.record
        if record.deleting or not record.active:
            continue
        ordinal = ordinals.ordinal_of(record.name, statefulset=value.workload)
        if ordinal is not None:
            held[ordinal] = record.subset
    rules = sorted(value.subsets, key=lambda rule: rule.index)
    ranges = ordinals.ordinal_ranges([(rule.name, rule.quota) for rule in rules])
    replicas = sum(held_range.size for held_range in ranges)
    if member is not None and member.replicas is not None:
        replicas = min(replicas, member.replicas)
    found = ordinals.misplaced(held, ranges, replicas=replicas)
    return ordinals.misplaced_message(found, statefulset=value.workload)
