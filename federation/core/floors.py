"""Floors per subset (`subsets[].minReplicas`): the user's explicit minimum, honoured first.

Why a module of its own: a floor changes the order in which replicas fill the subsets (floors
first, in subset order, then the rest as today) and the order in which they leave (no subset goes
below its floor while another above its own floor still has replicas). Percentage floors are
apportioned exactly like percentage caps (`apportion`: Σpct·R rounded half up, split by largest
remainder), so 34%/33%/33% floors of 10 are 4/3/3, never 4/4/4. A floor is never above its
subset's cap: validation refuses it for integers, and here a percentage floor that apportioning
would lift above its cap is clipped to the cap.
"""

from __future__ import annotations

from collections.abc import Sequence

from federation.core import apportion


def percent_of_floor(floor: int | str | None) -> int | None:
    """The percentage of a `"N%"` floor, or None for an integer or absent floor."""
    if isinstance(floor, str) and floor.endswith("%") and floor[:-1].isdigit():
        return int(floor[:-1])
    return None


def subset_floors(floors: Sequence[int | str | None], replicas: int, *,
                  caps: Sequence[int | None] | None = None) -> list[int]:
    """Each subset's floor for `replicas` in total: integers as given, percentages apportioned,
    absent ones 0; each clipped to its cap when `caps` are given."""
    percents = [percent_of_floor(floor) for floor in floors]
    bounded = [p for p in percents if p is not None]
    split = iter(apportion.largest_remainder(apportion.percent_total(bounded, replicas), bounded)
                 if any(bounded) else [0] * len(bounded))
    result: list[int] = []
    for floor, pct in zip(floors, percents, strict=True):
        if pct is not None:
            result.append(next(split))
        elif isinstance(floor, int):
            result.append(floor)
        else:
            result.append(0)
    if caps is not None:
        result = [floor if cap is None else min(floor, cap) for floor, cap in zip(result, caps, strict=True)]
    return result


def floor_shares(floors: Sequence[int], replicas: int) -> list[int]:
    """How much of each floor the total pays for: floors in subset order, as far as `replicas` goes."""
    left = replicas
    shares: list[int] = []
    for floor in floors:
        take = min(floor, max(left, 0))
        shares.append(take)
        left -= take
    return shares


def removal_order(totals: Sequence[int], floors: Sequence[int]) -> list[int]:
    """Subset indices in the order they give a replica back: the subsets above their floor, last
    subset first, then (only when none is above its floor) the subsets at or below it, last first.
    Subsets holding nothing are left out."""
    above = [i for i in reversed(range(len(totals))) if totals[i] > floors[i]]
    rest = [i for i in reversed(range(len(totals))) if 0 < totals[i] <= floors[i]]
    return above + rest
