"""The admission benchmark's result document: the order of its runs, each run's row, and the figures
per load level, the collapse points, the ratios and the goals made from them.

Why apart from the benchmark's I/O (`admission`): what a figure means is decided here, and a reader
of the JSON should be able to check it against one short module. The rules:

* Order (`plan`): per level, each run goes through the level's modes in an order rotated by one
  from the previous run's (two modes: A B, B A, A B), and each level starts one further along, so
  that no mode always runs first, on a colder or a busier machine. The floor (no webhook) runs at
  every level; `fedspread-switch-0.5ms` (a candidate change to the agent's thread switch
  interval) only at `HANDLER_WAIT_LEVEL`, where the handler goal is judged.
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
* Added latency (`added`): per level, a webhook's create p99 minus the floor's, run by run (run i
  of the mode against run i of the floor, which ran beside it), median with min-max: what the
  webhook adds to the apiserver's own path. Goals on it (`goals`): fedspread adds at most
  `ADDED_GOAL_MS` at `ADDED_GOAL_CLIENTS`; the baseline's added p99 over fedspread's is at least
  `RATIO_GOAL` at every level where no baseline run collapsed (a fedspread that adds nothing
  measurable meets it); fedspread collapses at no level where the floor did not.
* Handler wait (`handler_wait`): fedspread as it ships ("before") against `fedspread-switch-0.5ms`
  ("after") at `HANDLER_WAIT_LEVEL`, the wall p99's ratio (before / after) and where each one's
  wait went (`wait_profile`, `others_share`).
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
"""The two modes every level compares since the first version (their legacy keys, ratios, collapse)."""
FLOOR, AFTER, BASELINE_ONE = "floor", "fedspread-switch-0.5ms", "baseline-1"
BASELINES = ("baseline", BASELINE_ONE)
EVERY_LEVEL = ("fedspread", "baseline", BASELINE_ONE, FLOOR)
"""The modes run at every level by default (`admission_webhooks.MODES` names each)."""
LEGACY_LEVEL = HANDLER_WAIT_LEVEL = "clients-5"
HANDLER_GOAL_MS, RATIO_GOAL, ADDED_GOAL_MS = 1.0, 5.0, 2.0
ADDED_GOAL_CLIENTS = (1, 5, 20, 50)

FIGURES = ("handler_p50_ms", "handler_p99_ms", "handler_p999_ms", "handler_cpu_p50_ms", "handler_cpu_p99_ms",
           "create_p50_ms", "create_p99_ms", "burst_s", "conflicts", "create_refused", "create_lost",
           "over_cap", "without_subset", "subsets_short", "handler_preempted", "handler_blocked",
           "handler_wait_p99_ms")
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


def level_modes(level: Level, modes: Sequence[str], only: Mapping[str, Sequence[str]] | None = None
                ) -> list[str]:
    """The modes of `modes` that run at `level`: `AFTER` only at `HANDLER_WAIT_LEVEL`, and where
    `only` names the level, only the modes it gives there (a test's smaller run)."""
    chosen = [mode for mode in modes if mode != AFTER or level.name == HANDLER_WAIT_LEVEL]
    if only is not None and level.name in only:
        chosen = [mode for mode in chosen if mode in only[level.name]]
    return chosen


def plan(levels: Sequence[Level], runs: int, modes: Sequence[str] = MODES,
         only: Mapping[str, Sequence[str]] | None = None) -> list[tuple[Level, str, int]]:
    """Every run as (level, mode, run index), in the order to run them."""
    order = []
    for li, level in enumerate(levels):
        chosen = level_modes(level, modes, only)
        for run in range(runs):
            turn = (run + li) % len(chosen)
            order += [(level, mode, run) for mode in chosen[turn:] + chosen[:turn]]
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
        "handler_blocked": sum(bool(s.blocked) for s in handler),
        "handler_wait_p99_ms": stats.milliseconds([max(0.0, s.seconds - s.cpu_seconds) for s in handler], 99),
        "wait_profile": wait_profile(handler),
        "handler_wait_others_share": others_share(handler),
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
    figures = {name: stats.spread([r.get(name, 0) for r in ordered]) for name in FIGURES}
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
                  if summary["clients"] is not None and mode in summary}
    runs_by_clients = {summary["clients"]: summary[mode]["collapsed_runs"] for summary in levels.values()
                       if summary["clients"] is not None and mode in summary}
    replicaset = levels.get("replicaset")
    if replicaset is not None and mode not in replicaset:
        replicaset = None
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


def wait_profile(handler: Sequence[webhook_samples.Sample]) -> Json:
    """Where the handler's wall time went beyond its CPU time, over the samples whose wall time is
    at or above the run's p99: how many, their median wait, and how many blocked (the thread waited:
    the handler does no I/O, so for the interpreter lock or a lock of the bookkeeping), were
    preempted by the OS (the cores were busy) or both; the CPU the process's other threads used
    during them, and its share of their wait (the rest: other processes on the cores) — the
    profile of the slowest percent."""
    if not handler:
        return {"samples": 0}
    threshold = stats.percentile([s.seconds for s in handler], 99)
    slow = [s for s in handler if s.seconds >= threshold]
    waits = [max(0.0, s.seconds - s.cpu_seconds) for s in slow]
    others = [s.others_cpu_seconds or 0.0 for s in slow]
    waited = sum(waits)
    return {"samples": len(slow), "wait_p50_ms": stats.milliseconds(waits, 50),
            "cpu_p50_ms": stats.milliseconds([s.cpu_seconds for s in slow], 50),
            "others_cpu_p50_ms": stats.milliseconds(others, 50),
            "others_cpu_share_of_wait": round(min(sum(others), waited) / waited, 2) if waited else None,
            "blocked": sum(bool(s.blocked) and not s.preempted for s in slow),
            "preempted": sum(s.preempted and not s.blocked for s in slow),
            "both": sum(bool(s.blocked) and s.preempted for s in slow),
            "neither": sum(not s.blocked and not s.preempted for s in slow)}


def others_share(handler: Sequence[webhook_samples.Sample]) -> float | None:
    """Over every sample: the CPU the process's other threads used during the handler's calls, as a
    share of the handler's whole wait (wall less CPU); None without a wait or the figure."""
    waits = sum(max(0.0, s.seconds - s.cpu_seconds) for s in handler)
    if not waits or any(s.others_cpu_seconds is None for s in handler):
        return None
    return round(min(1.0, sum(s.others_cpu_seconds or 0.0 for s in handler) / waits), 2)


def added(rows: Sequence[Json], floor_rows: Sequence[Json]) -> Json | None:
    """A mode's create p99 over the floor's at one level, run i against run i (median, min, max of
    the differences); None when the floor did not run there."""
    mine = sorted(rows, key=lambda r: r["run"])
    floor = {r["run"]: r for r in floor_rows}
    pairs = [r["create_p99_ms"] - floor[r["run"]]["create_p99_ms"] for r in mine if r["run"] in floor]
    if not pairs:
        return None
    found = stats.spread([round(d, 1) for d in pairs])
    return {**found, "floor_p99_ms": stats.spread([floor[r["run"]]["create_p99_ms"] for r in mine
                                                   if r["run"] in floor])}


def added_ratio(baseline: Json, fedspread: Json) -> Json:
    """The baseline's added create p99 over fedspread's at one level, where no baseline run and no
    fedspread run collapsed; `fedspread_within_floor` when fedspread added nothing measurable (then
    any baseline that adds time is more than 5x worse)."""
    healthy = not baseline["collapsed_runs"] and not fedspread["collapsed_runs"]
    mine, theirs = (fedspread.get("added_p99_ms") or {}), (baseline.get("added_p99_ms") or {})
    if not healthy or not mine or not theirs:
        return {"compared": False, "ratio": None, "fedspread_within_floor": False}
    ours, other = mine["median"], theirs["median"]
    within = ours <= 0
    return {"compared": True, "ratio": None if within else round(other / ours, 1),
            "fedspread_within_floor": within, "baseline_added_ms": other, "fedspread_added_ms": ours}


def handler_wait(levels: Mapping[str, Json]) -> Json | None:
    """fedspread at `HANDLER_WAIT_LEVEL` as it ships (before) and with the candidate switch interval
    (after): each one's handler wall, CPU and wait p99, blocked and preempted counts, and the share
    of the wait its other threads' CPU explains (medians over runs); the wall p99's ratio."""
    level = levels.get(HANDLER_WAIT_LEVEL)
    if level is None or AFTER not in level or "fedspread" not in level:
        return None
    names = ("handler_p99_ms", "handler_cpu_p99_ms", "handler_wait_p99_ms", "handler_blocked",
             "handler_preempted", "handler_wait_others_share")
    before, after = level["fedspread"], level[AFTER]
    return {"before": {name: before[name] for name in names if name in before},
            "after": {name: after[name] for name in names if name in after},
            "before_switch_interval_s": 0.005, "after_switch_interval_s": 0.0005,
            "ratio_before_over_after": stats.ratio(before["handler_p99_ms"]["median"],
                                                   after["handler_p99_ms"]["median"])}


def goals(levels: Mapping[str, Json]) -> Json:
    """Each goal with the figure it is judged on, and whether it was met (None: nothing to judge)."""
    five = levels.get(LEGACY_LEVEL)
    handler = five["fedspread"]["handler_p99_ms"]["median"] if five else None
    ratios = {name: s["ratios"]["create_p99_ms"] for name, s in levels.items() if s["ratios"]["compared"]}
    compared = [r for r in ratios.values() if r is not None]
    over = max(s["fedspread"]["over_cap"]["max"] for s in levels.values())
    found: Json = {
        "handler_p99_5_clients_ms": {"figure": handler, "goal": f"<= {HANDLER_GOAL_MS} ms",
                                     "met": None if handler is None else handler <= HANDLER_GOAL_MS},
        "create_p99_ratio": {"figure": ratios, "goal": f">= {RATIO_GOAL}x at every level where no run "
                             "of either mode collapsed",
                             "met": min(compared) >= RATIO_GOAL if compared else None},
        "fedspread_over_cap": {"figure": over, "goal": "0 in every run", "met": over == 0},
    }
    with_floor = {name: s for name, s in levels.items() if FLOOR in s}
    if not with_floor:
        return found
    added_figure = {name: s["fedspread"]["added_p99_ms"]["median"] for name, s in with_floor.items()
                    if s["clients"] in ADDED_GOAL_CLIENTS}
    found["fedspread_added_p99_ms"] = {
        "figure": added_figure, "goal": f"<= {ADDED_GOAL_MS} ms over the floor at "
        f"{', '.join(map(str, ADDED_GOAL_CLIENTS))} clients",
        "met": all(v <= ADDED_GOAL_MS for v in added_figure.values()) if added_figure else None}
    for baseline in BASELINES:
        compared_levels = {name: s["added_ratios"][baseline] for name, s in with_floor.items()
                           if baseline in s["added_ratios"] and s["added_ratios"][baseline]["compared"]}
        verdicts = [r["fedspread_within_floor"] or (r["ratio"] is not None and r["ratio"] >= RATIO_GOAL)
                    for r in compared_levels.values()]
        found[f"added_ratio_{baseline}"] = {
            "figure": {name: r["ratio"] if not r["fedspread_within_floor"] else "fedspread within the floor"
                       for name, r in compared_levels.items()},
            "goal": f">= {RATIO_GOAL}x smaller added create p99 than {baseline} where no run of it collapsed",
            "met": all(verdicts) if verdicts else None}
    beyond = sorted(s["clients"] for s in with_floor.values() if s["clients"] is not None
                    and s["fedspread"]["collapsed_runs"] and not s[FLOOR]["collapsed_runs"])
    found["fedspread_no_collapse_beyond_floor"] = {
        "figure": {"fedspread_collapsed_where_floor_did_not": beyond,
                   "levels_tried": sorted(s["clients"] for s in with_floor.values() if s["clients"])},
        "goal": "no fedspread run collapses at a level where no floor run did", "met": not beyond}
    return found


def document(rows: Sequence[Json], *, levels: Sequence[Level], replicas: int, pods: int,
             limits: Mapping[str, int], method: Json) -> Json:
    """The admission result: legacy keys, per-level summaries, ratios and added latency over the
    floor, collapse points, the handler's before and after, goals, and every run's row."""
    by_level: dict[str, Json] = {}
    present = [mode for mode in (*MODES, BASELINE_ONE, AFTER, FLOOR) if any(r["mode"] == mode for r in rows)]
    for level in levels:
        summary: Json = {"clients": level.clients}
        ran_here = {mode: [r for r in rows if r["level"] == level.name and r["mode"] == mode]
                    for mode in present}
        for mode, mode_rows in ran_here.items():
            if mode_rows:
                summary[mode] = level_summary(mode_rows)
        summary["ratios"] = comparison(summary["fedspread"], summary["baseline"])
        if FLOOR in summary:
            for mode in summary.keys() & {*MODES, BASELINE_ONE, AFTER}:
                summary[mode]["added_p99_ms"] = added(ran_here[mode], ran_here[FLOOR])
            summary["added_ratios"] = {b: added_ratio(summary[b], summary["fedspread"])
                                       for b in BASELINES if b in summary}
        ran = sorted((r for r in rows if r["level"] == level.name), key=lambda r: r["order"])
        summary["load"] = {"at_start": ran[0]["load"]["at_start"], "at_end": ran[-1]["load"]["at_end"]}
        by_level[level.name] = summary
    return {
        "replicas": replicas, "pods_per_run": pods, "caps": dict(limits),
        "legacy_keys": f"{LEGACY_LEVEL}: each figure's median over its runs; over_cap the largest run's",
        **{mode: legacy(by_level, mode) for mode in MODES},
        "levels": by_level,
        "collapse": {mode: collapse(by_level, mode) for mode in present if mode != AFTER},
        "handler_wait": handler_wait(by_level),
        "goals": goals(by_level),
        "runs": list(rows),
        "runs_per_level": len({r["run"] for r in rows}),
        "details": {"method": method},
    }
