"""StatefulSet pods in subsets: ordinal ranges, what a scale-down removes, and misplaced pods.

Why ordinals and not deletion cost: the StatefulSet controller ignores
`controller.kubernetes.io/pod-deletion-cost`. It always removes the pod of the highest ordinal
first (`<name>-<n>`, n = replicas-1 down to the new count). So the only way to make a scale-down
remove the lowest-priority subset's pods first is to give that subset the highest ordinals. In one
member cluster, each subset's quota takes the next ordinals in subset (spec) order: the first
subset's quota the lowest ordinals, as OpenKruise's WorkloadSpread does for StatefulSets. With
quotas a=2, b=3 the ranges are a: [0, 2), b: [2, 5); a scale-down from 5 to 3 removes b's
ordinals 4 and 3, and only a scale-down below 2 reaches a.

The webhook then decides from the pod's name alone (`subset_for_ordinal`), with no count of the
pods already admitted: an ordinal belongs to one subset whatever order the controller creates pods
in (`podManagementPolicy: Parallel` included), and a retried admission gets the same answer.

An ordinal beyond every range (at or above the sum of this cluster's quotas: the member
StatefulSet was scaled before the webhook saw the new quota table, or the table lost quota) maps
to no subset. The webhook then admits the pod into none, as it does today for a pod that fits no
subset: it fails open, injects nothing, and the pod is a pod of no subset until it is recreated.

A quota change shifts the ranges, so pods already running may hold a subset their ordinal no
longer maps to (`misplaced`). Reschedule never deletes a StatefulSet pod to move it: its name,
identity and PersistentVolumeClaims are bound to it, and a volume bound to one node pool's
topology could keep it Pending anywhere else. The agent reports such pods instead
(`misplaced_message`); each moves when it is next recreated for another reason (a rolling
update, an eviction, a user's delete).

Ordinals repeat in every member cluster: each cluster runs its share as its own StatefulSet
numbered from 0 (Kubernetes 1.20 has no `spec.ordinals.start`), so `web-0` exists once per
cluster that runs replicas. Ranges are therefore per cluster.

Pure: no Kubernetes client, no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

MAX_ORDINAL = 2**31 - 2
"""The highest ordinal a StatefulSet can have: `spec.replicas` is an int32."""

_ORDINAL_GRAMMAR = re.compile(r"0|[1-9][0-9]{0,9}")
"""What the StatefulSet controller writes after the last '-': the decimal ordinal, ASCII digits."""


def ordinal_of(pod_name: str, *, statefulset: str) -> int | None:
    """The ordinal of the StatefulSet's pod `pod_name` (`<statefulset>-<n>`), else None.

    `n` is a non-negative decimal integer without leading zeros (except "0" itself), at most
    `MAX_ORDINAL`: exactly the names the StatefulSet controller makes. Any other name, including
    the pods of a StatefulSet whose name merely starts with `statefulset` (`web-1-0` is not a pod
    of `web`), gives None. ValueError when `statefulset` is empty.
    """
    if not statefulset:
        raise ValueError("a StatefulSet name must not be empty")
    prefix = f"{statefulset}-"
    if not pod_name.startswith(prefix):
        return None
    digits = pod_name[len(prefix):]
    if not _ORDINAL_GRAMMAR.fullmatch(digits):
        return None
    ordinal = int(digits)
    return ordinal if ordinal <= MAX_ORDINAL else None


def pod_name(statefulset: str, ordinal: int) -> str:
    """The name the StatefulSet controller gives the pod of `ordinal`: `<statefulset>-<ordinal>`."""
    if not statefulset:
        raise ValueError("a StatefulSet name must not be empty")
    _check_ordinal(ordinal)
    return f"{statefulset}-{ordinal}"


@dataclasses.dataclass(frozen=True)
class OrdinalRange:
    """The ordinals [start, stop) whose pods one subset admits in one cluster (empty: start == stop)."""

    subset: str
    start: int
    stop: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.stop:
            raise ValueError(
                f"subset {self.subset!r}: need 0 <= start <= stop, got [{self.start}, {self.stop})"
            )

    @property
    def size(self) -> int:
        """How many ordinals the range holds: the subset's quota."""
        return self.stop - self.start

    def holds(self, ordinal: int) -> bool:
        """Whether the pod of `ordinal` belongs to this range."""
        return self.start <= ordinal < self.stop


def ordinal_ranges(quotas: Sequence[tuple[str, int]]) -> tuple[OrdinalRange, ...]:
    """Each subset's ordinals in one cluster, from `(subset, quota)` pairs in subset (spec) order.

    The ranges tile [0, Σ quota) in the order given: the first subset's quota takes the lowest
    ordinals, so the StatefulSet's highest-first scale-down empties the last subset first. A quota
    of 0 gives an empty range at the point where the subset would start. ValueError on a negative
    quota, a repeated subset, or a total beyond what a StatefulSet can hold.
    """
    ranges: list[OrdinalRange] = []
    seen: set[str] = set()
    start = 0
    for subset, quota in quotas:
        if subset in seen:
            raise ValueError(f"subset {subset!r} appears twice")
        if quota < 0:
            raise ValueError(f"subset {subset!r}: quota must be >= 0, got {quota}")
        seen.add(subset)
        ranges.append(OrdinalRange(subset=subset, start=start, stop=start + quota))
        start += quota
    if start > MAX_ORDINAL + 1:
        raise ValueError(f"quotas sum to {start}, more replicas than a StatefulSet can have")
    return tuple(ranges)


def subset_for_ordinal(ordinal: int, ranges: Sequence[OrdinalRange]) -> str | None:
    """The subset the pod of `ordinal` is admitted into; None beyond every range.

    None means: the webhook admits the pod into no subset (fail open, as for a pod that fits no
    subset of a Deployment). ValueError on a negative ordinal.
    """
    _check_ordinal(ordinal)
    return next((r.subset for r in ranges if r.holds(ordinal)), None)


def scale_down_losses(ranges: Sequence[OrdinalRange], *, before: int, after: int) -> dict[str, int]:
    """Per subset (every subset, in order, zeros included): the pods a scale-down from `before` to
    `after` replicas removes.

    The StatefulSet holds ordinals [0, before) and removes [after, before), highest first, so the
    losses fall on the latest subsets first. A scale-up (`after >= before`) removes nothing.
    Ordinals beyond every range belong to no subset and are not counted: the pods of no subset
    removed are `before - after - sum(result)` when `after < before`. ValueError on a negative count.
    """
    if before < 0 or after < 0:
        raise ValueError(f"replica counts must be >= 0, got before={before}, after={after}")
    return {r.subset: _overlap(r.start, r.stop, after, before) for r in ranges}


def misplaced(
    pods: Mapping[int, str | None], ranges: Sequence[OrdinalRange], *, replicas: int | None = None
) -> dict[int, tuple[str | None, str | None]]:
    """Pods whose subset is not the one their ordinal now maps to: ordinal -> (has, should).

    `pods` maps each pod's ordinal to the subset it was admitted into (None: no subset). A pod of
    no subset whose ordinal now has one is misplaced, and so is a pod of a subset whose ordinal is
    beyond every range (should is None: the quota table holds fewer pods than the StatefulSet).
    `replicas`, when given, is the member StatefulSet's `spec.replicas`: pods of an ordinal at or
    above it are being removed by its controller and are never misplaced (a scale-down in
    progress reports nothing). Ordered by ordinal. ValueError on a negative ordinal or count.
    """
    if replicas is not None and replicas < 0:
        raise ValueError(f"replicas must be >= 0, got {replicas}")
    found: dict[int, tuple[str | None, str | None]] = {}
    for ordinal in sorted(pods):
        _check_ordinal(ordinal)
        if replicas is not None and ordinal >= replicas:
            continue
        has = pods[ordinal]
        should = subset_for_ordinal(ordinal, ranges)
        if has != should:
            found[ordinal] = (has, should)
    return found


def misplaced_message(
    found: Mapping[int, tuple[str | None, str | None]], *, statefulset: str, limit: int = 10
) -> str:
    """The agent's report of misplaced pods (from `misplaced`), naming pods and subsets.

    At most `limit` pods are named, lowest ordinal first, then how many more; "" when there is
    nothing to report. The text says why nothing is done: the reader's next question.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if not found:
        return ""
    ordinals = sorted(found)
    named = [_pod_text(statefulset, o, *found[o]) for o in ordinals[:limit]]
    more = len(ordinals) - len(named)
    listed = ", ".join(named) + (f" and {more} more" if more else "")
    count = len(ordinals)
    pods, are = ("pod", "is") if count == 1 else ("pods", "are")
    return (
        f"{count} {pods} of StatefulSet {statefulset} {are} not in the subset their ordinal maps to: "
        f"{listed}; "
        "left in place (a StatefulSet pod keeps its identity and volumes), each moves when next recreated"
    )


def ranges_text(ranges: Sequence[OrdinalRange]) -> str:
    """The ranges as people read them, for status and explain: `a: 0-1, b: 2-4, c: none`."""
    return ", ".join(f"{r.subset}: {_range_text(r)}" for r in ranges)


def _range_text(r: OrdinalRange) -> str:
    if r.size == 0:
        return "none"
    if r.size == 1:
        return str(r.start)
    return f"{r.start}-{r.stop - 1}"


def _pod_text(statefulset: str, ordinal: int, has: str | None, should: str | None) -> str:
    return f"{pod_name(statefulset, ordinal)} ({_subset_text(has)}, ordinal maps to {_subset_text(should)})"


def _subset_text(subset: str | None) -> str:
    return "no subset" if subset is None else f"subset {subset}"


def _overlap(start: int, stop: int, low: int, high: int) -> int:
    """How many integers [start, stop) and [low, high) share."""
    return max(0, min(stop, high) - max(start, low))


def _check_ordinal(ordinal: int) -> None:
    if ordinal < 0:
        raise ValueError(f"an ordinal must be >= 0, got {ordinal}")
