"""The handover rule: a Ready pod is removed only when the spread can spare it.

Why a rule after the placement: `placement.place_view` says where the replicas *should* be. Acted
on at once, every move would remove pods from one cluster the moment another is chosen — before
the replacements run. A cluster cordoned `NoExecute`, a lost cluster that returns, a lowered cap,
an Adaptive overflow: each would open a window with fewer Ready pods than the spread asks for.
Kubernetes' own rolling update avoids that window with `maxUnavailable: 0`; this is the same idea
across clusters: replacements first, then the originals.

`keep_ready` takes a placement and the spread's *verified* Ready pods per (subset, cluster) — counts
from agents heard since their cluster was last lost, for clusters the spread can still use — and
gives back the placement with some Ready pods kept above their cluster's share:

- The spread can spare `Ready - placed` Ready pods (never fewer than zero), where `placed` is what
  the rule places (its replicas less those no rule lets it place anywhere: a pod kept for a
  replacement that can never exist would be kept against the rule for good — a cap lowered to 0
  on the only subset removes its pods), counting the pods of (subset, cluster) pairs the placement
  still has (a subset edited away from a cluster loses its
  pods there first, by their deletion cost). The Ready pods the placement would remove are
  released in the spread's scale-down order — the last subset first, within a subset its last
  cluster first — while that budget lasts; the rest are kept. As the replacements become Ready (a
  new pod count report, a new placement), the budget grows and the kept pods go.
- A cluster that returns after being lost has reported nothing yet on its new stream: its pods are
  *unverified*. What it holds (its last report, or the share it ran before it was lost, whichever
  is more) is kept whole — it is not told to remove pods it may still need — and does not count as
  Ready (they may have died while it was away). The next report of the cluster verifies them.

The kept pods are visible: `SubsetPlacement.kept` counts them, the subset's reasons say why, and the
placement's `replicas`/`unplaced` still describe the rule's answer (`placed - kept + unplaced ==
replicas`). A cluster the spread no longer selects is not protected (its removal is what the user
asked); a lost cluster is never told anything (it is unreachable), so it needs no protection here.

Pure: no clock, no I/O; the same inputs give the same answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from federation.core import placement

Counts = Mapping[str, Mapping[str, int]]


def keep_ready(
    result: placement.Placement, *, replicas: int, ready: Counts, unverified: Counts | None = None,
) -> placement.Placement:
    """`result` with the Ready pods it cannot spare yet kept in place (see the module docstring).

    `ready`: verified Ready pods per subset per cluster (clusters the spread may tell something);
    `unverified`: per subset per cluster, the last reported pods of clusters that returned after
    being lost and have not reported since.
    """
    unverified = unverified or {}
    if not _removes_any(result, ready=ready, unverified=unverified):
        return result
    spare = max(0, _matched(result, ready) - (replicas - result.unplaced))
    subsets = list(result.subsets)
    for index in range(len(subsets) - 1, -1, -1):  # the scale-down order: the last subset first
        subset = subsets[index]
        counts, kept, reasons = dict(subset.clusters), 0, list(subset.reasons)
        ready_here = ready.get(subset.name) or {}
        waiting_here = unverified.get(subset.name) or {}
        for name in reversed(list(counts)):
            share = counts[name]
            pending = waiting_here.get(name, 0) - share
            if pending > 0:
                counts[name], kept = share + pending, kept + pending
                reasons.append(f"{name}: keeps its {pending} pods until it reports them again "
                               "(it was lost and has returned)")
                continue
            excess = ready_here.get(name, 0) - share
            if excess <= 0:
                continue
            released = min(excess, spare)
            spare -= released
            if excess > released:
                held = excess - released
                counts[name], kept = share + held, kept + held
                reasons.append(f"{name}: keeps {held} Ready pods until their replacements are Ready")
        if kept:
            subsets[index] = dataclasses.replace(
                subset, clusters=counts, replicas=subset.replicas + kept, kept=subset.kept + kept,
                reasons=tuple(reasons))
    totals = dict(result.clusters)
    for before, after in zip(result.subsets, subsets, strict=True):
        if after.kept != before.kept:
            for name, count in after.clusters.items():
                if name in totals:
                    totals[name] += count - before.clusters.get(name, 0)
    return dataclasses.replace(result, subsets=tuple(subsets), clusters=totals)


def _matched(result: placement.Placement, ready: Counts) -> int:
    """Ready pods of (subset, cluster) pairs the placement still has: the ones that may survive.
    Pods of a subset that no longer selects their cluster (or no longer exists) are removed first
    by their member (lowest deletion cost), so they do not count as Ready for the spread."""
    return sum(count for subset in result.subsets
               for name, count in (ready.get(subset.name) or {}).items() if name in subset.clusters)


def _removes_any(result: placement.Placement, *, ready: Counts, unverified: Counts) -> bool:
    """Whether `result` gives some (subset, cluster) fewer replicas than it has Ready (or unverified) pods."""
    for subset in result.subsets:
        for source in (ready.get(subset.name), unverified.get(subset.name)):
            if source and any(count > subset.clusters.get(name, count) for name, count in source.items()):
                return True
    return False
