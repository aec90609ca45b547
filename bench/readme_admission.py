"""The admission benchmark's headline rows (`bench.readme`): the handler at 5 clients, each load
level's create p99 (a ratio only where no run of either mode collapsed), the collapse points, the
pods over a cap, and the latency each webhook adds over the floor.

Why a module of its own: the admission document is the richest the headline reads — per level,
per mode, per run, with collapses to say in words — and its rows alone are as long as every other
benchmark's together.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from bench import admission_report
from bench import readme_parts as parts


def rows(document: dict[str, Any]) -> Iterator[parts.Row]:
    found = document.get("admission") or {}
    if "levels" not in found:
        return
    levels = found["levels"]
    runs = found.get("runs_per_level", 3)
    when = parts.when(document, only="admission", runs=f"{runs} runs per mode and level")
    five = levels.get("clients-5")
    if five:
        ours, theirs = five["fedspread"], five["baseline"]
        handler = parts.spread(ours['handler_p99_ms'], 'ms')
        figure = (f"handler wall p99 at 5 clients, all samples: {handler}, "
                  f"median of {runs} runs (min\N{EN DASH}max); CPU p99 "
                  f"{parts.number(ours['handler_cpu_p99_ms']['median'])} ms; "
                  f"baseline {parts.number(theirs['handler_p99_ms']['median'])} ms")
        met = ours["handler_p99_ms"]["median"] <= 1.0
        yield ("admission", figure, "≤ 1 ms", parts.verdict(met), parts.load(five, document), when)
    collapse = {mode: admission_report.collapse(levels, mode) for mode in admission_report.MODES}
    for level in _in_client_order(levels.values()):
        figure, verdict = level_row(level, runs=found.get("runs") or [], collapse=collapse)
        yield ("admission", figure, "≥ 5\N{MULTIPLICATION SIGN} where no run of either mode collapsed",
               verdict, parts.load(level, document), when)
    points = "; ".join(f"{mode} {_point(collapse[mode])}" for mode in admission_report.MODES)
    first = next(iter(levels.values()))
    timeouts = (f"registered webhook timeouts: fedspread {first['fedspread']['webhook_timeout_s']:g} s, "
                f"baseline {first['baseline']['webhook_timeout_s']:g} s")
    figure = (f"collapse point, the lowest level where any run collapsed (create p99 past the webhook "
              f"timeout, creates refused or failed open): {points} ({timeouts})")
    yield ("admission", figure, "(reported; no goal set)", "\N{EM DASH}", parts.load(found, document), when)
    over = found["goals"]["fedspread_over_cap"]["figure"]
    figure = (f"{over} pods over a cap in any run ({found['pods_per_run']} pods per run, caps sum to "
              f"{found['replicas']})")
    yield ("admission", figure, "0 over a cap", parts.verdict(over == 0), parts.load(found, document), when)
    if "fedspread_added_p99_ms" in found["goals"]:
        yield from _added(found, load=parts.load(found, document), when=when)


def _added(found: dict[str, Any], *, load: str, when: str) -> Iterator[parts.Row]:
    """The goals on latency added over the floor, level by level in client order, and the handler's
    before and after."""
    goals = found["goals"]
    for level in _in_client_order(found["levels"].values()):
        added = {mode: level[mode]["added_p99_ms"] for mode in ("fedspread", "baseline", "baseline-1")
                 if level.get(mode, {}).get("added_p99_ms")}
        if "fedspread" not in added:
            continue
        floor = parts.spread(added["fedspread"]["floor_p99_ms"], "ms")
        each = ", ".join(f"{mode} {parts.spread(a, 'ms')}" for mode, a in added.items())
        figure = f"create p99 added over the floor at {_where(level)} ({floor} without a webhook): {each}"
        if level["clients"] in admission_report.ADDED_GOAL_CLIENTS:
            met = added["fedspread"]["median"] <= admission_report.ADDED_GOAL_MS
            yield ("admission", figure, "≤ 2 ms (fedspread)", parts.verdict(met), load, when)
        else:
            yield ("admission", figure, "(reported)", "\N{EM DASH}", load, when)
    for key in ("added_ratio_baseline", "added_ratio_baseline-1"):
        goal = goals[key]
        verdict = parts.NOT_COMPARABLE if goal["met"] is None else parts.verdict(goal["met"])
        by_level = goal["figure"] or {}
        ratios = ", ".join(f"{by_level[name]:g}\N{MULTIPLICATION SIGN} at {_where(found['levels'][name])}"
                           for name in _names_in_client_order(found["levels"], by_level))
        baseline = key.removeprefix("added_ratio_")
        figure = (f"{baseline}'s added create p99 over fedspread's, at each level where no {baseline} run "
                  f"collapsed: {ratios or 'no such level'}")
        yield ("admission", figure, f"≥ {admission_report.RATIO_GOAL:g}\N{MULTIPLICATION SIGN} at each",
               verdict, load, when)
    beyond = goals["fedspread_no_collapse_beyond_floor"]
    where = beyond["figure"].get("fedspread_collapsed_where_floor_did_not") or []
    tried = beyond["figure"].get("levels_tried") or []
    figure = (f"fedspread collapsed where the floor did not: {', '.join(map(str, where)) or 'nowhere'} "
              f"(client levels tried: {', '.join(map(str, tried))})")
    yield ("admission", figure, "at no level", parts.verdict(bool(beyond["met"])), load, when)
    wait = found.get("handler_wait")
    if wait:
        before, after = wait["before"]["handler_p99_ms"], wait["after"]["handler_p99_ms"]
        figure = (f"handler wall p99 at 5 clients as the agent ships {parts.spread(before, 'ms')}, with a "
                  f"0.5 ms switch interval {parts.spread(after, 'ms')}: before/after "
                  f"{wait['ratio_before_over_after']}")
        yield ("admission", figure, "(a candidate change, measured)", "\N{EM DASH}", load, when)


def _in_client_order(levels: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ReplicaSet controller's level first, then the client levels from the fewest clients."""
    return sorted(levels, key=lambda level: (level["clients"] is not None, level["clients"] or 0))


def _names_in_client_order(levels: dict[str, dict[str, Any]], names: Iterable[str]) -> list[str]:
    chosen = set(names)
    return [_level_name(level) for level in _in_client_order(levels.values()) if _level_name(level) in chosen]


def _where(level: dict[str, Any]) -> str:
    clients = level["clients"]
    if clients is None:
        return "the ReplicaSet controller"
    return f"{clients} client{'s' if clients != 1 else ''}"


def level_row(level: dict[str, Any], *, runs: Sequence[dict[str, Any]],
                     collapse: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """One level's create p99 row: the ratio where no run of either mode collapsed; elsewhere each
    collapsed mode as its collapse point and why, and the verdict "not comparable"."""
    clients, where = level["clients"], _where(level)
    source = " (apiserver, bucket-interpolated)" if clients is None else ""
    ratio = admission_report.comparison(level["fedspread"], level["baseline"])["create_p99_ms"]
    if ratio is not None:
        ours = parts.spread(level['fedspread']['create_p99_ms'], 'ms')
        figure = (f"pod create p99 at {where}{source}: {ours} "
                  f"vs baseline {parts.spread(level['baseline']['create_p99_ms'], 'ms')}: "
                  f"{ratio:g}\N{MULTIPLICATION SIGN}")
        return figure, parts.verdict(ratio >= admission_report.RATIO_GOAL)
    sides = []
    for mode in admission_report.MODES:
        summary = level[mode]
        if not summary["collapsed_runs"]:
            sides.append(f"{mode} {parts.spread(summary['create_p99_ms'], 'ms')}")
            continue
        why = _collapse_reasons([r for r in runs if r.get("level") == _level_name(level)
                                 and r.get("mode") == mode])
        point = collapse[mode]["any_run_clients"]
        at = (f"{'its client-level' if clients is None else 'its'} collapse point: {point} clients"
              if point is not None else "no client level collapsed")
        down = f"{summary['collapsed_runs']} of {summary['runs']} runs"
        sides.append(f"{mode} collapsed in {down} ({why}; {at})")
    return f"pod create p99 at {where}{source}: {'; '.join(sides)}: no ratio", parts.NOT_COMPARABLE


def _level_name(level: dict[str, Any]) -> str:
    return "replicaset" if level["clients"] is None else f"clients-{level['clients']}"


def _collapse_reasons(runs: Sequence[dict[str, Any]]) -> str:
    """Why a mode's runs at one level collapsed, in words, with how many runs gave each reason."""
    kinds = {"refused": "creates refused", "failed open": "calls failed open", "timeout": "past its timeout",
             "never succeeded": "creates lost", "did not finish": "load unfinished"}
    counts: dict[str, int] = {}
    for run in runs:
        said = {text for reason in run.get("collapse_reasons") or []
                for key, text in kinds.items() if key in reason}
        for text in said:
            counts[text] = counts.get(text, 0) + 1
    return ", ".join(f"{text} in {n} run{'s' if n != 1 else ''}" for text, n in counts.items()) or (
        "reasons not recorded")


def _point(collapse: dict[str, Any]) -> str:
    tried = collapse.get("levels_tried") or []
    point = (f"none up to {max(tried, default=0)} clients" if collapse.get("any_run_clients") is None
             else f"at {collapse['any_run_clients']} clients")
    replicaset = collapse.get("replicaset_collapsed_runs")
    if replicaset is not None:
        point += (f", {'collapsed' if replicaset else 'did not collapse'} under the ReplicaSet controller "
                  f"({replicaset} run{'s' if replicaset != 1 else ''} collapsed)")
    return point
