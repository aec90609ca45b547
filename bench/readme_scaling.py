"""The headline rows of Ray's round on a machine with more cores, for `bench.readme`.

Why a module of its own: these rows come from runs that no full run (`make bench`) repeats — a
lent machine with more cores, reached through `bench.device_kit` — and their figure is a ratio
between two variants of one run (Ray with N spread shards against in-process, same federation,
same machine), not a figure against a fixed bound. The goal is set at 12 shard actors
(`GOAL_ACTORS`): the full round at least `ROUND_GOAL` times and delivery at least `DELIVERY_GOAL`
times faster than in-process; the rows at other actor counts show how the speed-up grows with
actors and carry no verdict. A document that is not a reference, or lacks its in-process arm,
gives no rows: a ratio needs both arms of one run.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator, Sequence
from typing import Any

from bench import readme_parts as parts

SCALING_RUNS: tuple[tuple[str, str], ...] = (
    ("reference-placement-16cores-30k.json",
     "dedicated run on a lent 16-core machine (bench.device_kit), the kit's default shape"),
    ("reference-placement-16cores-30k-again.json",
     "dedicated run on the same lent machine minutes later, 12 actors and in-process again"),
    ("reference-placement-16cores-60k.json",
     "dedicated run on the same lent machine, twice the kit's default shape"),
)
"""The `bench.placement_compare` runs on a machine with more cores: file, and why it is shown."""
GOAL_ACTORS = 12
ROUND_GOAL = 5.0
DELIVERY_GOAL = 3.0
BASELINE = "local"
"""The in-process arm every Ray arm of the same run is compared with."""


def ratio(baseline_s: float, candidate_s: float) -> float:
    """How many times faster the candidate is than the baseline (2.0: half the time)."""
    return baseline_s / candidate_s if candidate_s > 0 else float("inf")


def document_rows(document: dict[str, Any], *, reason: str) -> Iterator[parts.Row]:
    """A row per Ray arm of one run: its full round and delivery against the in-process arm's."""
    points: dict[str, Any] = document.get("points") or {}
    baseline = points.get(BASELINE)
    if not parts.is_reference(document) or not baseline or "error" in baseline:
        return
    cores = (document.get("machine") or {}).get("cores", "?")
    runs = int(document.get("runs_per_backend", 1))
    started = str(document.get("started_at", "?"))[:16].replace("T", " ")
    when = (f"{started} UTC; {reason}; {runs} run{'s' if runs != 1 else ''} per variant; "
            f"`{document['command']}`, from `bash .device-kit/run.sh`")
    arms = sorted(((int(point.get("ray_shards") or 0), variant, point) for variant, point in points.items()
                   if variant != BASELINE and "error" not in point and point.get("ray_shards")))
    for actors, variant, point in arms:
        round_x = ratio(baseline["full_s"], point["full_s"])
        delivery_x = ratio(baseline["delivered_s"], point["delivered_s"])
        figure = (f"{baseline['spreads']:,} spreads \N{MULTIPLICATION SIGN} {baseline['clusters']:,} "
                  f"clusters, {baseline['clusters_per_spread']} per spread, {cores} cores, {variant} "
                  f"({actors} spread shards, {point.get('ray_cluster_shards', 1)} cluster shard): "
                  f"full round {point['full_s']} s against in-process {baseline['full_s']} s, "
                  f"{round_x:.2f}\N{MULTIPLICATION SIGN}; delivered {point['delivered_s']} s against "
                  f"{baseline['delivered_s']} s, {delivery_x:.2f}\N{MULTIPLICATION SIGN}; the "
                  f"coordinator's placing thread {point['full_thread_cpu_s']} s of CPU in Ray's round "
                  f"({baseline['full_thread_cpu_s']} s in-process)")
        goal = (f"≥ {ROUND_GOAL:g}\N{MULTIPLICATION SIGN} the round and ≥ {DELIVERY_GOAL:g}"
                f"\N{MULTIPLICATION SIGN} delivery at {GOAL_ACTORS} actors")
        if actors == GOAL_ACTORS:
            met = round_x >= ROUND_GOAL and delivery_x >= DELIVERY_GOAL
            yield ("placement", figure, goal, parts.verdict(met), parts.load(point, document), when)
        else:
            yield ("placement", figure, f"(how it grows with actors; the goal: {goal})", "—",
                   parts.load(point, document), when)


def rows(results: pathlib.Path, runs: Sequence[tuple[str, str]] = SCALING_RUNS) -> list[parts.Row]:
    """Every scaling row, from the documents in `results` named by `runs` (a missing one gives none)."""
    found: list[parts.Row] = []
    for name, reason in runs:
        path = results / name
        if path.exists():
            found += document_rows(json.loads(path.read_text()), reason=reason)
    return found
