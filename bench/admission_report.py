"""The admission benchmark's result document: the order of its runs, each run's row, and the figures
per load level, the collapse points, the ratios and the goals made from them.

Why apart from the benchmark's I/O (`admission`): what a figure means is decided here, and a reader
of the JSON should be able to check it against one short module. The rules:

* Order (`plan`): per level, the modes alternate in pairs that swap — A B, B A, A B (so A B B A A
  B) — and each level starts with the mode the previous one did not, so that neither mode always
  runs first, on a colder or a busier machine.
* A run's row (`run_row`) holds every figure over *all* its samples: handler wall p50/p99/p99.9
  and CPU p50/p99 over every CREATE admission, create p50/p99 over every stored pod (the client's
  timing; for the ReplicaSet level, where nobody can time a create, the apiserver's request
  histogram, interpolated), the apiserver's own view of the webhook, and the counts.
* A level's figure (`level_summary`) is the median of its runs with the smallest and largest; a
  mode was over the timeout, refusing creates or collapsed at a level when most of its runs were
  (`admission_stats.over_timeout`, `run_collapse`: over the timeout or refusing).
* Ratios (`comparison`): per level, baseline over fedspread, only where no run of either mode
  collapsed (over its webhook's timeout, refusing creates or failing open); elsewhere the level is
  not comparable and each collapsed mode is reported by its collapse point (`collapse`: the
  majority rule's, and `any_run_clients`, the lowest level where any run collapsed).
* The legacy keys (`legacy`) describe the 5-client level: each figure's median over its runs,
  `over_cap` the largest of any run (one pod over a cap is a failure however rare).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from bench import admission_stats as stats
from bench import webhook_samples

Json = dict[str, Any]

MODES = ("fedspread", "baseline")
LEGACY_LEVEL = "clients-5"
HANDLER_GOAL_MS, RATIO_GOAL = 1.0, 5.0

FIGURES = ("handler_p50_ms", "handler_p99_ms", "handler_p999_ms", "handler_cpu_p50_ms", "handler_cpu_p99_ms",
           "create_p50_ms", "create_p99_ms", "burst_s", "conflicts", "create_refused", "create_lost",
           "over_cap", "without_subset", "subsets_short", "handler_preempted")
"""The numeric figures of a run that a level reports as median, min and max."""
LEGACY = ("handler_p50_ms", "handler_p99_ms", "create_p50_ms", "create_p99_ms", "burst_s", "conflicts")


@dataclasses.dataclass(frozen=True)
class Level:
    """A load level: the ReplicaSet controller scaling a Deployment (`clients` None), or that many
    concurrent clients creating pods."""

    name: str
    clients: int | None = None

    @staticmethod
    def of(spec: str | int) -> Level:
        """`"replicaset"`, or a client count."""
        if spec == "replicaset":
            return Level("replicaset")
        return Level(f"clients-{int(spec)}", clients=int(spec))


def plan(levels: Sequence[Level], runs: int) -> list[tuple[Level, str, int]]:
    """Every run as (level, mode, run index), in the order to run them."""
    order = []
    for li, level in enumerate(levels):
        for run in range(runs):
            pair = MODES if (run + li) % 2 == 0 else MODES[::-1]
            order += [(level, mode, run) for mode in pair]
    return order


def run_row(*, mode: str, level: Level, run: int, order: int, asked: int, burst: Any,
            handler: Sequence[webhook_samples.Sample], apiserver: Mapping[str, Any],
            subsets: Mapping[str | None, int], limits: Mapping[str, int], timeout_s: float,
            conflicts: int, counters: Mapping[str, int], load: Json) -> Json:
    """One run's figures over all its samples (`burst`: an `admission_client.Burst`)."""
    wall, cpu = [s.seconds for s in handler], [s.cpu_seconds for s in handler]
    if level.clients is None:  # nobody timed the controller's creates, nor saw its refusals
        source = "apiserver (request histogram, bucket-interpolated)"
        p50, p99 = apiserver.get("create_p50"), apiserver.get("create_p99")
        create_p50 = p50["ms"] if p50 else 0.0
        create_p99 = p99["ms"] if p99 else 0.0
        codes = apiserver.get("create_requests") or {}
        refused = sum(n for code, n in codes.items() if not code.startswith("2"))
    else:
        source = "client"
        create_p50 = stats.milliseconds(burst.latencies, 50, digits=1)
        create_p99 = stats.milliseconds(burst.latencies, 99, digits=1)
        refused = burst.denied
    placed = {name: int(subsets.get(name, 0)) for name in limits}
    late = stats.over_timeout(create_p99_s=create_p99 / 1000, timeout_s=timeout_s, lost=burst.lost,
                              completed=burst.completed)
    reasons = stats.run_collapse(create_p99_s=create_p99 / 1000, timeout_s=timeout_s, lost=burst.lost,
                                 completed=burst.completed, refused=refused,
                                 failed_open=int(apiserver.get("webhook_failed_open", 0)))
    return {
        "mode": mode, "level": level.name, "clients": level.clients, "run": run, "order": order,
        "load": load, "pods_asked": asked, "pods_stored": burst.pods, "completed": burst.completed,
        "handler_p50_ms": stats.milliseconds(wall, 50), "handler_p99_ms": stats.milliseconds(wall, 99),
        "handler_p999_ms": stats.milliseconds(wall, 99.9),
        "handler_cpu_p50_ms": stats.milliseconds(cpu, 50), "handler_cpu_p99_ms": stats.milliseconds(cpu, 99),
        "handler_max_ms": round(max(wall, default=0.0) * 1000, 3), "admissions": len(handler),
        "handler_preempted": sum(s.preempted for s in handler),
        "create_p50_ms": create_p50, "create_p99_ms": create_p99, "create_source": source,
        "burst_s": round(burst.seconds, 2), "conflicts": conflicts,
        "create_refused": refused, "create_lost": burst.lost,
        "over_cap": sum(max(0, placed[name] - cap) for name, cap in limits.items()),
        "without_subset": int(subsets.get(None, 0)), "by_subset": placed,
        "subsets_short": sum(max(0, cap - placed[name]) for name, cap in limits.items()),
        "apiserver": dict(apiserver), "webhook_timeout_s": timeout_s,
        "over_timeout": bool(late), "collapsed": bool(reasons), "collapse_reasons": reasons,
        "counters": dict(sorted(counters.items())),
    }


def level_summary(rows: Sequence[Json]) -> Json:
    """One mode at one level: each figure's median over the runs with min and max, whether it
    collapsed (in most runs), and the load from the first run's start to the last run's end."""
    ordered = sorted(rows, key=lambda r: r["order"])
    figures = {name: stats.spread([r[name] for r in ordered]) for name in FIGURES}
    hook_p99 = [r["apiserver"]["webhook_p99"]["ms"] for r in ordered if r["apiserver"].get("webhook_p99")]
    hook_p50 = [r["apiserver"]["webhook_p50"]["ms"] for r in ordered if r["apiserver"].get("webhook_p50")]
    return {
        "runs": len(ordered), **figures,
        "apiserver_webhook_p50_ms": stats.spread(hook_p50) if hook_p50 else None,
        "apiserver_webhook_p99_ms": stats.spread(hook_p99) if hook_p99 else None,
        "webhook_timeout_s": ordered[0]["webhook_timeout_s"],
        "over_timeout": stats.majority([r["over_timeout"] for r in ordered]),
        "refusing": stats.majority([r["create_refused"] > 0 for r in ordered]),
        "collapsed": stats.majority([r["collapsed"] for r in ordered]),
        "collapsed_runs": sum(r["collapsed"] for r in ordered),
        "load": {"at_start": ordered[0]["load"]["at_start"], "at_end": ordered[-1]["load"]["at_end"]},
    }


def comparison(fedspread: Json, baseline: Json) -> Json:
    """A level's ratios (baseline median / fedspread median), each None where any run of either
    mode collapsed there; `baseline_refusing` says when the baseline refused creates there."""
    down = {"baseline_collapsed_runs": baseline["collapsed_runs"],
            "fedspread_collapsed_runs": fedspread["collapsed_runs"]}
    ratios: Json = {name: stats.level_ratio(baseline[name]["median"], fedspread[name]["median"], **down)
                    for name in ("create_p99_ms", "handler_p99_ms", "burst_s")}
    return {**ratios, "compared": not any(down.values()), "baseline_refusing": baseline["refusing"]}


def collapse(levels: Mapping[str, Json], mode: str) -> Json:
    """A mode's collapse point over the client levels (most runs, and any run), and whether the
    ReplicaSet level collapsed (in most runs; in how many)."""
    by_clients = {summary["clients"]: summary[mode]["collapsed"] for summary in levels.values()
                  if summary["clients"] is not None}
    runs_by_clients = {summary["clients"]: summary[mode]["collapsed_runs"] for summary in levels.values()
                       if summary["clients"] is not None}
    replicaset = levels.get("replicaset")
    return {"clients": stats.collapse_point(by_clients), "levels_tried": sorted(by_clients),
            "any_run_clients": stats.any_collapse_point(runs_by_clients),
            "replicaset_collapsed": replicaset[mode]["collapsed"] if replicaset else None,
            "replicaset_collapsed_runs": replicaset[mode]["collapsed_runs"] if replicaset else None}


def legacy(levels: Mapping[str, Json], mode: str) -> Json:
    """The keys scripts read (bench/README.md): the 5-client level's medians, over_cap the worst run."""
    chosen = levels.get(LEGACY_LEVEL) or next(iter(levels.values()))
    summary = chosen[mode]
    found: Json = {name: summary[name]["median"] for name in LEGACY}
    found["conflicts"] = int(found["conflicts"])
    found["over_cap"] = int(summary["over_cap"]["max"])
    return found


def goals(levels: Mapping[str, Json]) -> Json:
    """Each goal with the figure it is judged on, and whether it was met (None: nothing to judge)."""
    five = levels.get(LEGACY_LEVEL)
    handler = five["fedspread"]["handler_p99_ms"]["median"] if five else None
    ratios = {name: s["ratios"]["create_p99_ms"] for name, s in levels.items() if s["ratios"]["compared"]}
    compared = [r for r in ratios.values() if r is not None]
    over = max(s["fedspread"]["over_cap"]["max"] for s in levels.values())
    return {
        "handler_p99_5_clients_ms": {"figure": handler, "goal": f"<= {HANDLER_GOAL_MS} ms",
                                     "met": None if handler is None else handler <= HANDLER_GOAL_MS},
        "create_p99_ratio": {"figure": ratios, "goal": f">= {RATIO_GOAL}x at every level where no run "
                             "of either mode collapsed",
                             "met": min(compared) >= RATIO_GOAL if compared else None},
        "fedspread_over_cap": {"figure": over, "goal": "0 in every run", "met": over == 0},
    }


def document(rows: Sequence[Json], *, levels: Sequence[Level], replicas: int, pods: int,
             limits: Mapping[str, int], method: Json) -> Json:
    """The admission result: legacy keys, per-level summaries and ratios, collapse points, goals,
    and every run's row."""
    by_level: dict[str, Json] = {}
    for level in levels:
        summary: Json = {"clients": level.clients}
        for mode in MODES:
            summary[mode] = level_summary([r for r in rows if r["level"] == level.name and r["mode"] == mode])
        summary["ratios"] = comparison(summary["fedspread"], summary["baseline"])
        ran = sorted((r for r in rows if r["level"] == level.name), key=lambda r: r["order"])
        summary["load"] = {"at_start": ran[0]["load"]["at_start"], "at_end": ran[-1]["load"]["at_end"]}
        by_level[level.name] = summary
    return {
        "replicas": replicas, "pods_per_run": pods, "caps": dict(limits),
        "legacy_keys": f"{LEGACY_LEVEL}: each figure's median over its runs; over_cap the largest run's",
        **{mode: legacy(by_level, mode) for mode in MODES},
        "levels": by_level,
        "collapse": {mode: collapse(by_level, mode) for mode in MODES},
        "goals": goals(by_level),
        "runs": list(rows),
        "runs_per_level": len({r["run"] for r in rows}),
        "details": {"method": method},
    }
