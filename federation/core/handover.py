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
- A cluster whose counts are *unverified* (it returned after being lost, its agent reconnected or
  restarted, or the coordinator restarted, and it has not reported holding the spread since) keeps
  what it holds (its last report, the share it ran before it was lost, or the share the hub status
  recorded, whichever is more; for a cluster leaving the selection, its pending pods too) whole — it
  is not told to remove pods it may still need — and its pods do not count as Ready. The next
  report that holds the spread's assignment verifies them.
- **Deselection is a move.** Pods the placement has no (subset, cluster) pair for — a cluster that
  left the spread's selection (subset removed, cluster dropped from a list, labels no longer
  matching, a decommissioned member), a removed or renamed subset's pods, pods in no subset beyond
  their cluster's share — are *strays*: they count as the spread's Ready pods and are kept like
  any other until the spread can spare them, released first. The cluster stays in the placement
  (in the subset that still has it, else the first its pods are counted in, else the last) with
  the pods it keeps, and at 0 once it keeps none: it is sent its zero quotas, and its workload is
  removed only once it reports no pods (Karmada deletes a deselected cluster's work at once).

The kept pods are visible: `SubsetPlacement.kept` counts them, the subset's reasons say why, and the
placement's `replicas`/`unplaced` still describe the rule's answer (`placed - kept + unplaced ==
replicas`). A lost cluster is never told anything (it is unreachable), so it needs no protection here.

Pure: no clock, no I/O; the same inputs give the same answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from federation.core import placement
from federation.core.reasons import Reason, ReasonKind

Counts = Mapping[str, Mapping[str, int]]


def keep_ready(
    result: placement.Placement, *, replicas: int, ready: Counts, unverified: Counts | None = None,
) -> placement.Placement:
    """`result` with the Ready pods it cannot spare yet kept in place (see the module docstring).

    `ready`: verified Ready pods per subset per cluster (clusters the spread may tell something,
    including the ones leaving its selection); `unverified`: per subset per cluster, what clusters
    whose counts are not verified hold (kept whole).
    """
    unverified = unverified or {}
    shares = _shares(result) if ready or unverified else {}
    strays, stray_waiting = _strays(shares, ready), _strays(shares, unverified)
    if not strays and not stray_waiting and not _removes_any(result, ready=ready, unverified=unverified):
        return result
    spare = max(0, _matched(result, ready) + sum(strays.values()) - (replicas - result.unplaced))
    departing: dict[str, int] = {}  # per cluster, the stray pods kept
    for name in sorted(set(strays) | set(stray_waiting), reverse=True):
        if stray_waiting.get(name):
            departing[name] = stray_waiting[name]
            continue
        released = min(strays[name], spare)
        spare -= released
        departing[name] = strays[name] - released
    subsets = list(result.subsets)
    for index in range(len(subsets) - 1, -1, -1):  # the scale-down order: the last subset first
        subset = subsets[index]
        counts, kept, reasons = dict(subset.clusters), 0, list(subset.reasons)
        kept_here = dict(subset.kept_clusters)
        ready_here = ready.get(subset.name) or {}
        waiting_here = unverified.get(subset.name) or {}
        for name in reversed(list(counts)):
            share = counts[name]
            pending = waiting_here.get(name, 0) - share
            if pending > 0:
                counts[name], kept = share + pending, kept + pending
                kept_here[name] = kept_here.get(name, 0) + pending
                reasons.append(Reason(ReasonKind.KEPT_UNVERIFIED, name, count=pending))
                continue
            excess = ready_here.get(name, 0) - share
            if excess <= 0:
                continue
            released = min(excess, spare)
            spare -= released
            if excess > released:
                held = excess - released
                counts[name], kept = share + held, kept + held
                kept_here[name] = kept_here.get(name, 0) + held
                reasons.append(Reason(ReasonKind.KEPT_UNTIL_READY, name, count=held))
        for name, held in departing.items():
            if _home(result, name, ready=ready, unverified=unverified) == index:
                counts[name], kept = counts.get(name, 0) + held, kept + held
                kept_here[name] = kept_here.get(name, 0) + held
                reasons.append(Reason(ReasonKind.LEAVING, name, count=held))
        if kept or any(_home(result, n, ready=ready, unverified=unverified) == index for n in departing):
            subsets[index] = dataclasses.replace(
                subset, clusters=counts, replicas=subset.replicas + kept, kept=subset.kept + kept,
                reasons=tuple(reasons), kept_clusters={n: c for n, c in kept_here.items() if c})
    totals = dict(result.clusters)
    for before, after in zip(result.subsets, subsets, strict=True):
        if after is not before:
            for name, count in after.clusters.items():
                totals[name] = totals.get(name, 0) + count - before.clusters.get(name, 0)
    return dataclasses.replace(result, subsets=tuple(subsets), clusters=totals)


def _shares(result: placement.Placement) -> dict[str, dict[str, int]]:
    """The placement's share per cluster, per subset name."""
    shares: dict[str, dict[str, int]] = {}
    for subset in result.subsets:
        for name, share in subset.clusters.items():
            shares.setdefault(name, {})[subset.name] = share
    return shares


def _strays(shares: Mapping[str, Mapping[str, int]], counts: Counts) -> dict[str, int]:
    """Per cluster, the pods of `counts` the placement (its `_shares`) would remove although no
    pair of it has them: pods in (subset, cluster) pairs the placement does not have (a subset
    removed or renamed, a cluster its subset no longer selects, pods in no subset) beyond the room
    the cluster's own pairs leave (a share above its pods: the member workload keeps that many).
    They are the spread's until they are gone, so they count and are released first."""
    if not counts:
        return {}
    outside: dict[str, int] = {}
    room: dict[str, int] = {}
    for subset_name, per_cluster in counts.items():
        for name, count in per_cluster.items():
            if subset_name not in shares.get(name, {}):
                outside[name] = outside.get(name, 0) + count
    for name in outside:
        room[name] = sum(max(0, share - (counts.get(pair) or {}).get(name, 0))
                         for pair, share in shares.get(name, {}).items())
    return {name: count - room[name] for name, count in outside.items() if count > room[name]}


def _home(result: placement.Placement, name: str, *, ready: Counts, unverified: Counts) -> int:
    """The index of the subset that carries cluster `name`'s stray pods in the placement: the
    first subset that still has the cluster, else the first one its pods are counted in, else the
    last (the first to be scaled down)."""
    for index, subset in enumerate(result.subsets):
        if name in subset.clusters:
            return index
    for index, subset in enumerate(result.subsets):
        if (ready.get(subset.name) or {}).get(name) or (unverified.get(subset.name) or {}).get(name):
            return index
    return len(result.subsets) - 1


def _matched(result: placement.Placement, ready: Counts) -> int:
    """Ready pods of (subset, cluster) pairs the placement still has (the strays are added apart)."""
    return sum(count for subset in result.subsets
               for name, count in (ready.get(subset.name) or {}).items() if name in subset.clusters)


def _removes_any(result: placement.Placement, *, ready: Counts, unverified: Counts) -> bool:
    """Whether `result` gives some (subset, cluster) fewer replicas than it has Ready (or unverified) pods."""
    for subset in result.subsets:
        for source in (ready.get(subset.name), unverified.get(subset.name)):
            if source and any(count > subset.clusters.get(name, count) for name, count in source.items()):
                return True
    return False
