"""A placement point's runs combined into one record: the median run, with the smallest and largest.

Why apart from `bench.placement` (which runs the points): the sweep and `bench.placement_compare`
both run a point several times, each run in a fresh coordinator process, and both report it the
same way — each figure the median run's, its spread kept beside it, every run kept — so that a
single noisy run neither makes nor breaks a figure. One rule, here, for both.
"""

from __future__ import annotations

import statistics
from typing import Any

from bench import admission_stats


def combine(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One point's runs as one record: each numeric figure the median run's, with `spread` giving
    its median, smallest and largest; each event's figures likewise (`p99_ms_range`: the smallest
    and largest run's p99; None runs — nothing sent — left out); every run kept under `runs`. A
    point none of whose runs completed is the first run's error."""
    done = [r for r in records if "error" not in r]
    if not done:
        return {**records[0], "runs_per_point": len(records), "runs": records}
    first = done[0]
    combined: dict[str, Any] = {key: value for key, value in first.items() if not _number(value)}
    spread: dict[str, Any] = {}
    for key, value in first.items():
        if _number(value):
            values = [r[key] for r in done if _number(r.get(key))]
            spread[key] = admission_stats.spread(values)
            combined[key] = spread[key]["median"]
    combined["events"] = {kind: _combined_event([r["events"][kind] for r in done])
                          for kind in first.get("events", {})}
    for key in ("event_p99_ms", "cordon_ms"):  # the goals' figures: from the combined events
        kind = "scale_up" if key == "event_p99_ms" else "cordon"
        combined[key] = combined["events"].get(kind, {}).get("p99_ms")
    combined.update(spread=spread, runs_per_point=len(records), runs_completed=len(done), runs=records,
                    load={"at_start": records[0]["load"]["at_start"] if "load" in records[0] else None,
                          "at_end": records[-1]["load"]["at_end"] if "load" in records[-1] else None})
    return combined


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _combined_event(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """An event kind over the runs of a point: each figure's median over the runs that have it."""
    found: dict[str, Any] = {"runs": len(runs), "n": min(r.get("n", 0) for r in runs),
                             "n_timed": sum(r.get("n_timed", 0) for r in runs)}
    for key in ("p50_ms", "p99_ms", "max_ms", "replaced_median", "messages_median", "inside_p50_ms",
                "lock_wait_p99_ms", "sent_nothing"):
        values = [r[key] for r in runs if r.get(key) is not None]
        found[key] = statistics.median(values) if values else None
    timed = [r["p99_ms"] for r in runs if r.get("p99_ms") is not None]
    found["p99_ms_range"] = [min(timed), max(timed)] if timed else None
    return found
