"""The pieces every headline row of bench/README.md is made of (`bench.readme`): the row, the load
it ran under, when, which run and which command, the verdict, and its figures as the table prints
them.

Why a module of its own: the admission rows (`bench.readme_admission`) and every other benchmark's
(`bench.readme`) are made of the same pieces, and each is defined once here.
"""

from __future__ import annotations

from typing import Any

COMMAND = ".venv/bin/python -m bench.run"
"""The full run's command (`make bench`), named where a document records none."""
REASON = "_dedicated_because"
"""The key `bench.readme` adds to a dedicated run's document: why it was chosen over the full run."""
NOT_COMPARABLE = "not comparable"
"""The verdict of a ratio goal at a level where a run of either side collapsed."""

Row = tuple[str, str, str, str, str, str]
"""benchmark, figure, goal, verdict, load at start → end (1-minute averages), when and command."""


def is_reference(document: dict[str, Any]) -> bool:
    """A document can stand behind a figure: it records its command and a commit that is not dirty."""
    commit = str(document.get("commit") or "")
    return bool(commit) and not commit.endswith("+dirty") and bool(document.get("command"))


def load(found: dict[str, Any], document: dict[str, Any]) -> str:
    load = found.get("load") if isinstance(found, dict) else None
    stamp = load if isinstance(load, dict) else document.get("load_average") or {}
    start, end = stamp.get("at_start"), stamp.get("at_end")
    if not start or not end:
        return "not recorded"
    scope = "" if load else " (whole run)"
    return f"{start[0]:g} → {end[0]:g}{scope}"


def when(document: dict[str, Any], *, only: str, runs: str) -> str:
    """When the run started, which run it was (the reason, for a dedicated one), how many runs stand
    behind the figure, and the command."""
    command = document.get("command") or f"{COMMAND}{' --quick' if document.get('mode') == 'quick' else ''}"
    if "--only" not in command:
        command += f" --only {only}"
    which = document.get(REASON) or "the full run"
    started = str(document.get("started_at", "?"))[:16].replace("T", " ")
    return f"{started} UTC; {which}; {runs}; `{command}`"


def verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def number(value: float) -> str:
    """Three significant figures or so: 0.564, 3.87, 69.9, 2,441."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def spread(figure: dict[str, Any], unit: str) -> str:
    """A level's figure: its median run, and the smallest and largest run in brackets."""
    return f"{number(figure['median'])} {unit} ({number(figure['min'])}\N{EN DASH}{number(figure['max'])})"
