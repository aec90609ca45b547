"""How the demo shows itself: a live table in a terminal, or one JSON line per step for scripts.

Why two views behind one interface: a person watches replicas move (the table is redrawn on every
observation, then left on screen when the step ends); a script or a test wants one machine-readable
record per step and nothing else on stdout. `story.Story` only calls `progress` and `step`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Protocol, TextIO

import rich.console
import rich.live
import rich.table
import rich.text

from federation.demo import story


class View(Protocol):
    """What the story reports to."""

    def note(self, line: str) -> None:
        """A line of progress outside a step (starting processes, tearing down)."""

    def progress(self, what: str, seen: story.Observation) -> None:
        """An observation while a step waits."""

    def step(self, done: story.Step) -> None:
        """A step finished."""

    def close(self) -> None:
        """The story ended (or was interrupted)."""


def table(title: str, seen: story.Observation) -> rich.table.Table:
    """Subset, cluster, desired, running, pending — one row per (subset, cluster)."""
    shown = rich.table.Table(title=title, title_justify="left")
    for column in ("subset", "cluster", "desired", "running", "pending", "agent"):
        shown.add_column(column, justify="right" if column in ("desired", "running", "pending") else "left")
    for row in seen.rows:
        ready = seen.ready.get(row.cluster)
        agent = rich.text.Text("heard" if ready else "SILENT", style="green" if ready else "bold red")
        shown.add_row(row.subset, row.cluster, str(row.desired), str(row.running),
                      str(row.pending) if row.pending else "", agent)
    return shown


class TerminalView:
    """A live table per step (rich), kept on screen when the step ends."""

    def __init__(self, console: rich.console.Console | None = None) -> None:
        self.console = console or rich.console.Console()
        self._live: rich.live.Live | None = None

    def note(self, line: str) -> None:
        self._stop_live()
        self.console.print(f"[dim]{line}[/dim]")

    def progress(self, what: str, seen: story.Observation) -> None:
        shown = table(f"{what} …", seen)
        if self._live is None:
            self._live = rich.live.Live(shown, console=self.console, refresh_per_second=4, transient=True)
            self._live.start()
        else:
            self._live.update(shown)

    def step(self, done: story.Step) -> None:
        self._stop_live()
        title = f"step {done.number} ({done.seconds:.0f} s): {done.title}"
        self.console.print(table(title, done.observation))
        self.console.print(f"  {done.explanation}\n")

    def close(self) -> None:
        self._stop_live()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


class JsonLinesView:
    """`--non-interactive`: one JSON object per step on stdout; notes go to stderr."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def note(self, line: str) -> None:
        print(line, file=self.err, flush=True)

    def progress(self, what: str, seen: story.Observation) -> None:
        return None

    def step(self, done: story.Step) -> None:
        record = {"step": done.number, "title": done.title, "explanation": done.explanation,
                  "seconds": done.seconds, **done.observation.to_json()}
        record["rows"] = [dataclasses.asdict(r) for r in done.observation.rows]
        print(json.dumps(record, sort_keys=True), file=self.out, flush=True)

    def close(self) -> None:
        return None
