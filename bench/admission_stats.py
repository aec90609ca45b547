"""The admission benchmark's arithmetic: percentiles over every sample, quantiles of the apiserver's
histograms, the median of repeated runs with its spread, collapse points and per-level ratios.

Why a module of its own, without I/O: these few rules decide what every reported figure means, and
they are where a benchmark is most easily made to flatter — a p99 over a hand-picked subset of the
samples, the best of three runs, a ratio against a baseline that had already fallen over. Kept pure,
each rule is unit-tested directly:

* `percentile` — nearest rank over *all* samples of a run; no sample is dropped. It is every
  benchmark's percentile (admission, placement events, accuracy, autoscaling, the cache's fit).
* `histogram_quantile` — a quantile of a Prometheus histogram (the apiserver's own metrics) by
  linear interpolation inside the bucket that holds it, as Prometheus's `histogram_quantile` does;
  when it falls in the `+Inf` bucket only a lower bound is known, and `Quantile.beyond` says so.
* `spread` — each figure's median over the runs of a level, with the smallest and largest run.
* `over_timeout` / `run_collapse` / `collapse_point` — a run is over the timeout when its create
  p99 passed the webhook's registered timeout or a create never succeeded (or the load did not
  finish); it collapsed when it was over the timeout, or the apiserver refused a create or gave up
  on a webhook call and let the pod in unexamined; a level is either for a mode when most of its
  runs were; the collapse point is the lowest concurrency whose level collapsed.
* `level_ratio` — baseline over fedspread, only where neither mode collapsed in *any* run of that
  level (over the timeout, refusing creates or failing open): a quotient against a mode that had
  stopped answering in time, or was refusing creates that its client retried, measures its
  failure, not a per-operation cost. A collapsed side is reported as its collapse point instead.
* `any_collapse_point` — the lowest concurrency at which any run of a mode collapsed.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

Bucket = tuple[float, float]
"""A cumulative histogram bucket: (upper bound `le`, observations at or below it)."""


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of every value (0 for none): the smallest value with at least
    `pct` percent of the values at or below it."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = math.ceil(round(pct * len(ordered) / 100, 9))  # rounded: 99.9 % of 1000 is 999, not 999.0...01
    return ordered[max(0, rank - 1)]


def milliseconds(values: Sequence[float], pct: float, *, digits: int = 3) -> float:
    """The `pct` percentile of `values` (seconds) in milliseconds, rounded."""
    return round(percentile(values, pct) * 1000, digits)


@dataclasses.dataclass(frozen=True)
class Quantile:
    """A histogram quantile: `seconds` interpolated inside its bucket; `beyond` when it lies above
    the last finite bucket (then `seconds` is that bucket's bound, a lower bound only)."""

    seconds: float
    beyond: bool = False


def bucket_delta(before: Iterable[Bucket], after: Iterable[Bucket]) -> list[Bucket]:
    """The observations made between two scrapes of one cumulative histogram, bucket by bucket
    (a bucket missing from `before` counted 0 then)."""
    earlier = dict(before)
    return sorted((bound, count - earlier.get(bound, 0.0)) for bound, count in after)


def histogram_quantile(buckets: Iterable[Bucket], q: float) -> Quantile | None:
    """The `q` quantile (0..1) of a cumulative histogram, None when it holds no observation.

    As Prometheus computes it: the rank q x total is found in the first bucket whose cumulative
    count reaches it, and the value is interpolated linearly between that bucket's lower bound (the
    previous bucket's bound, 0 for the first) and its upper bound, assuming the observations are
    spread evenly inside it. The figure is only as fine as the buckets are.
    """
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] <= 0:
        return None
    total = ordered[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank and count > lower_count:
            if math.isinf(bound):
                return Quantile(seconds=lower_bound, beyond=True)
            share = (rank - lower_count) / (count - lower_count)
            return Quantile(seconds=lower_bound + (bound - lower_bound) * share)
        lower_bound, lower_count = bound, count
    return Quantile(seconds=lower_bound, beyond=True)


def quantile_ms(buckets: Iterable[Bucket], q: float) -> dict[str, float | bool] | None:
    """`histogram_quantile` in milliseconds as a result row states it ({"ms", "beyond_last_bucket"})."""
    found = histogram_quantile(buckets, q)
    if found is None:
        return None
    return {"ms": round(found.seconds * 1000, 1), "beyond_last_bucket": found.beyond}


def spread(values: Sequence[float]) -> dict[str, float]:
    """A figure over the runs of one level: the median run's value, and the smallest and largest."""
    if not values:
        raise ValueError("no runs to take the median of")
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def median_index(values: Sequence[float]) -> int:
    """The position of the median run by `values` (the lower middle for an even count)."""
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    return order[(len(order) - 1) // 2]


def over_timeout(*, create_p99_s: float, timeout_s: float, lost: int, completed: bool) -> list[str]:
    """Why one run was not answered in time (empty: it was): its create p99 passed the webhook's
    registered timeout, some create never succeeded, or the load did not finish by its deadline."""
    reasons = []
    if create_p99_s > timeout_s:
        reasons.append(f"create p99 {create_p99_s:.2f} s > webhook timeout {timeout_s:g} s")
    if lost:
        reasons.append(f"{lost} creates never succeeded")
    if not completed:
        reasons.append("the load did not finish before its deadline")
    return reasons


def run_collapse(*, create_p99_s: float, timeout_s: float, lost: int, completed: bool,
                 refused: int, failed_open: int = 0) -> list[str]:
    """Why one run counts as collapsed (empty: it did not): `over_timeout`'s reasons, creates the
    apiserver refused (retried, but failed as the creator saw them), or webhook calls it gave up
    on and let through unexamined (a webhook registered to fail open)."""
    reasons = over_timeout(create_p99_s=create_p99_s, timeout_s=timeout_s, lost=lost, completed=completed)
    if refused:
        reasons.append(f"{refused} create attempts refused")
    if failed_open:
        reasons.append(f"{failed_open} webhook calls timed out and failed open")
    return reasons


def majority(flags: Sequence[bool]) -> bool:
    """True when more than half of `flags` are: a level collapsed in most of its runs."""
    return sum(flags) * 2 > len(flags)


def collapse_point(collapsed: Mapping[int, bool]) -> int | None:
    """The lowest concurrency whose level collapsed, None when none did."""
    return min((level for level, down in collapsed.items() if down), default=None)


def ratio(baseline: float, fedspread: float) -> float | None:
    """How many times fedspread's figure is below the baseline's (None when fedspread's is 0)."""
    return round(baseline / fedspread, 1) if fedspread > 0 else None


def level_ratio(baseline: float, fedspread: float, *, baseline_collapsed_runs: int,
                fedspread_collapsed_runs: int) -> float | None:
    """`ratio` at one load level, only where no run of either mode collapsed there (None otherwise:
    the quotient would measure timeouts or refused creates, not a per-operation cost)."""
    if baseline_collapsed_runs or fedspread_collapsed_runs:
        return None
    return ratio(baseline, fedspread)


def any_collapse_point(collapsed_runs: Mapping[int, int]) -> int | None:
    """The lowest concurrency at which at least one run collapsed (`collapsed_runs`: concurrency to
    its count of collapsed runs), None when no run did."""
    return collapse_point({level: count > 0 for level, count in collapsed_runs.items()})
