"""Dividing a subset's replicas among its clusters, and taking them back.

Why separate from placement: a region subset spans several clusters and `clusterSpread` says how
its share is divided — `Fill` (clusters in order, each up to its room), `Balance` (totals as even
as room allows; with room to spare this is the largest-remainder even split) or `Capacity` (new
replicas in proportion to free capacity, Karmada's dynamic weight). Only *new* replicas are divided
here; replicas already running stay put, which is what makes placement stable. Removal on
scale-down is the mirror image: Fill empties the last cluster first, Balance trims the largest,
Capacity trims in proportion to what each cluster holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from federation.api import spread
from federation.core import apportion


def _fill(count: int, clusters: Sequence[str], room: Mapping[str, int | None]) -> dict[str, int]:
    added = dict.fromkeys(clusters, 0)
    left = count
    for name in clusters:
        limit = room.get(name)
        take = left if limit is None else min(limit, left)
        added[name] = take
        left -= take
        if not left:
            break
    return added


def _drain_level(count: int, amounts: Sequence[int]) -> int:
    """The smallest level L >= 0 with Σ max(0, a - L) <= count: the level down to which `count`
    units, taken one at a time from the largest amount, bring every amount (binary search)."""
    low, high = -1, max(amounts, default=0)  # the answer is in (low, high]
    while high - low > 1:
        middle = (low + high) // 2
        if sum(max(0, a - middle) for a in amounts) <= count:
            high = middle
        else:
            low = middle
    return high


def _balance(
    count: int, clusters: Sequence[str], held: Mapping[str, int], room: Mapping[str, int | None]
) -> dict[str, int]:
    """Water-filling: each new replica to the cluster with the lowest total (held + added) that
    has room, ties to the earlier cluster — in closed form (binary search for the level), never
    one replica at a time: a spread scaled to two billion replicas must not hold the coordinator
    for an hour."""
    added = dict.fromkeys(clusters, 0)
    open_ = [name for name in clusters if room.get(name) is None or (room.get(name) or 0) > 0]
    if not open_ or count <= 0:
        return added
    limits = {name: room.get(name) for name in open_}
    if all(limit is not None for limit in limits.values()) and sum(
            limit or 0 for limit in limits.values()) <= count:
        added.update({name: limit or 0 for name, limit in limits.items()})
        return added

    def filled(level: int, name: str) -> int:
        limit = limits[name]
        take = max(0, level - held.get(name, 0))
        return take if limit is None else min(limit, take)

    # needed(L) = Σ filled(L) grows with L; find the largest level L the count pays for.
    low, high = min(held.get(n, 0) for n in open_), max(held.get(n, 0) for n in open_) + count + 1
    while high - low > 1:
        middle = (low + high) // 2
        if sum(filled(middle, n) for n in open_) <= count:
            low = middle
        else:
            high = middle
    for name in open_:
        added[name] = filled(low, name)
    left = count - sum(added.values())
    for name in open_:  # one more each to the clusters at the level with room left, earlier first
        if not left:
            break
        limit = limits[name]
        if held.get(name, 0) + added[name] == low and (limit is None or added[name] < limit):
            added[name] += 1
            left -= 1
    return added


def _capacity(
    count: int,
    clusters: Sequence[str],
    held: Mapping[str, int],
    room: Mapping[str, int | None],
    weights: Mapping[str, int],
    phase: int | None = None,
) -> dict[str, int]:
    limits = room.get
    eligible = [n for n in clusters if (r := limits(n)) is None or r > 0]
    shown = list(map(weights.get, eligible, itertools.repeat(0)))
    if not eligible or sum(shown) == 0:
        return _balance(count, clusters, held, room)
    if min(shown) >= 0 and phase is not None:  # the units left go by the split's own phase
        shares = apportion.split_phased(count, shown, phase=phase)
    elif min(shown) >= 0:  # free capacities: the checks of `largest_remainder` would only cost
        shares = apportion.split_ints(count, shown)
    else:
        shares = apportion.largest_remainder(count, shown)
    added = dict.fromkeys(clusters, 0)
    spill = 0
    for name, share in zip(itertools.compress(eligible, shares), filter(None, shares), strict=True):
        limit = limits(name)
        take = share if limit is None else min(share, limit)
        added[name] = take
        spill += share - take
    if spill:
        rest = {n: (None if room.get(n) is None else (room.get(n) or 0) - added[n]) for n in clusters}
        for name, extra in _fill(spill, clusters, rest).items():
            added[name] += extra
    return added


def divide(
    count: int,
    *,
    mode: spread.ClusterSpread,
    clusters: Sequence[str],
    held: Mapping[str, int],
    room: Mapping[str, int | None],
    weights: Mapping[str, int],
    phase: int | None = None,
) -> dict[str, int]:
    """New replicas per cluster for `count` new replicas of one subset.

    `clusters` are the usable clusters in the subset's order; `held` what each already has; `room`
    how many more each can take (None: unlimited); `weights` the free capacity used by `Capacity`;
    `phase` (`Capacity` only): the split's remainder phase (`apportion.split_phased`), None for the
    largest remainders. The result never exceeds a cluster's room; it sums to `count` when the
    rooms allow.
    """
    if count <= 0 or not clusters:
        return dict.fromkeys(clusters, 0)
    if mode == "Fill":
        return _fill(count, clusters, room)
    if mode == "Balance":
        return _balance(count, clusters, held, room)
    return _capacity(count, clusters, held, room, weights, phase)


def remove(
    count: int, *, mode: spread.ClusterSpread, clusters: Sequence[str], held: Mapping[str, int]
) -> dict[str, int]:
    """Replicas to take away per cluster to shrink a subset by `count` (at most what it holds)."""
    removed = dict.fromkeys(clusters, 0)
    count = min(count, sum(held.get(n, 0) for n in clusters))
    if count <= 0:
        return removed
    if mode == "Fill":
        left = count
        for name in reversed(clusters):
            take = min(held.get(name, 0), left)
            removed[name] = take
            left -= take
        return removed
    if mode == "Capacity":
        shares = apportion.largest_remainder(
            count, [held.get(n, 0) for n in clusters], ties_to_last=True
        )
        return dict(zip(clusters, shares, strict=True))
    # Balance: trim the largest cluster first, ties to the later cluster — in closed form: drain
    # every cluster down to the lowest level L the count pays for, then one more from each cluster
    # at L, later clusters first.
    level = _drain_level(count, [held.get(n, 0) for n in clusters])
    for name in clusters:
        removed[name] = max(0, held.get(name, 0) - level)
    left = count - sum(removed.values())
    for name in reversed(clusters):
        if not left:
            break
        if held.get(name, 0) >= level > 0:
            removed[name] += 1
            left -= 1
    return removed
