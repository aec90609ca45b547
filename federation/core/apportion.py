"""Dividing whole replicas in proportion: percentage caps and largest-remainder splits.

Why a module of its own: every proportional split in fedspread (percentage caps, Balance and Capacity
division inside a region) must sum exactly to what is being split. Kruise rounds each percentage
subset up on its own, so 34%/33%/33% of 10 becomes 4/4/4 = 12 (kruise#877). Here the percentage
subsets together get T = round-half-up(Σpct·R), and T is apportioned by the largest-remainder
method with ties to the earlier entry: 34/33/33 of 10 is 4/3/3, 20/20/60 of 7 is 2/1/4.
"""

from __future__ import annotations

import fractions
import hashlib
import itertools
import math
from collections.abc import Sequence

from federation.api import spread

Weight = int | fractions.Fraction


def round_half_up(value: fractions.Fraction) -> int:
    """Round to the nearest integer, halves up (2.5 -> 3)."""
    return math.floor(value + fractions.Fraction(1, 2))


def largest_remainder(total: int, weights: Sequence[Weight], *, ties_to_last: bool = False) -> list[int]:
    """Split `total` in proportion to non-negative `weights`; the sum is exactly `total`.

    Each entry gets the floor of its exact share; the units left go one each to the largest
    remainders, ties to the earlier entry (or the later one with `ties_to_last`). All-zero weights
    give all zeros when `total` is 0 and are an error otherwise.
    """
    if total < 0:
        raise ValueError(f"cannot split a negative total {total}")
    if weights and min(weights) < 0:
        raise ValueError("weights must not be negative")
    ints = [w for w in weights if type(w) is int]
    if len(ints) == len(weights):
        return split_ints(total, ints, ties_to_last=ties_to_last)
    weight_sum = sum(weights, start=fractions.Fraction(0))
    if weight_sum == 0:
        if total:
            raise ValueError(f"cannot split {total} over weights that are all zero")
        return [0] * len(weights)
    shares = [fractions.Fraction(total) * w / weight_sum for w in weights]
    result = [math.floor(s) for s in shares]
    left = total - sum(result)
    order = sorted(
        range(len(shares)),
        key=lambda i: (-(shares[i] - result[i]), -i if ties_to_last else i),
    )
    for i in order[:left]:
        result[i] += 1
    return result


def _floors(total: int, weights: Sequence[int]) -> tuple[list[int], int, int]:
    """Each int weight's floor of its share of `total`, the weight sum, and the units left over."""
    weight_sum = sum(weights)
    if weight_sum == 0:
        if total:
            raise ValueError(f"cannot split {total} over weights that are all zero")
        return [0] * len(weights), 0, 0
    result = [total * weight // weight_sum for weight in weights]
    return result, weight_sum, total - sum(result)


def split_ints(total: int, weights: Sequence[int], *, ties_to_last: bool = False) -> list[int]:
    """`largest_remainder` for weights known to be non-negative ints (unchecked), in int
    arithmetic: every share has the same denominator (the weight sum), so comparing remainders
    is comparing their numerators. Division calls this once per subset per spread."""
    result, weight_sum, left = _floors(total, weights)
    if left:
        remainders = [total * weight % weight_sum for weight in weights]
        # The `left` largest remainders get one more: all above the left-th largest, then of those
        # equal to it the earliest (or latest) ones.
        cut = sorted(remainders, reverse=True)[left - 1]
        indices = range(len(weights))
        chosen = list(itertools.compress(indices, map(cut.__le__, remainders)))
        if len(chosen) > left:  # ties at the cut: only some of them
            above = list(itertools.compress(indices, map(cut.__lt__, remainders)))
            tied = list(itertools.compress(indices, map(cut.__eq__, remainders)))
            need = left - len(above)  # at least one: fewer than `left` remainders exceed the cut
            chosen = above + (tied[-need:] if ties_to_last else tied[:need])
        for i in chosen:
            result[i] += 1
    return result


PHASE_SCALE = 2**32
"""A remainder phase is an int in [0, PHASE_SCALE): the offset, in units of 1/PHASE_SCALE, of the
first unit `split_phased` lays over the remainders."""


def phase_of(key: str) -> int:
    """A phase drawn from `key` (a spread's "namespace/name"): the same in every process and run
    (a digest, not Python's salted `hash`), spread evenly over [0, PHASE_SCALE)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=4).digest(), "big")


def split_phased(total: int, weights: Sequence[int], *, phase: int) -> list[int]:
    """`split_ints`, but the units left after the floors go by systematic sampling: lay the
    remainders end to end and give one unit to each entry under the points phase, phase + 1, ...
    (in units of one whole share). Each entry gets its floor or one more, exactly as with the
    largest remainders; which ones get one more depends on `phase`, and over phases an entry gets
    one more in proportion to its remainder. Why: many splits of one round, each of a pod or two,
    would all give their pod to the entry with the largest remainder (the roomiest cluster);
    with each split's own phase they spread over the entries as the weights say."""
    result, weight_sum, left = _floors(total, weights)
    if not left:
        return result
    # In units of 1/(weight_sum * PHASE_SCALE): entry i covers [reached, reached + remainder_i);
    # the points are phase * weight_sum + k * weight_sum * PHASE_SCALE for k in 0..left-1.
    step = weight_sum * PHASE_SCALE
    point, reached = phase * weight_sum, 0
    for index, weight in enumerate(weights):
        reached += (total * weight % weight_sum) * PHASE_SCALE
        if point < reached:
            result[index] += 1
            point += step
    return result


def percent_total(percents: Sequence[int], replicas: int) -> int:
    """T: the replicas all percentage subsets share, Σpct·R rounded half up."""
    return round_half_up(fractions.Fraction(sum(percents) * replicas, 100))


def subset_caps(subsets: Sequence[spread.Subset], replicas: int) -> list[int | None]:
    """Each subset's cap for `replicas` total: integer caps as given, percentages apportioned."""
    percents = [s.percent for s in subsets]
    bounded = [p for p in percents if p is not None]
    split = iter(largest_remainder(percent_total(bounded, replicas), bounded) if any(bounded) else
                 [0] * len(bounded))
    caps: list[int | None] = []
    for subset, pct in zip(subsets, percents, strict=True):
        if pct is not None:
            caps.append(next(split))
        elif isinstance(subset.max_replicas, int):
            caps.append(subset.max_replicas)
        else:
            caps.append(None)
    return caps
