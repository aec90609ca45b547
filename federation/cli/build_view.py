"""The live terminal view of `fedspread sandbox build`: one `rich` progress line per step.

Why apart from `federation.sandbox.progress`: the build speaks in events, and how they look on a
terminal (a spinner, a bar when the size is known, bytes or packages done, elapsed time, redrawn
in place) is the CLI's business. Off a terminal the CLI uses the plain line rendering instead,
so a CI log gets appended lines and no carriage returns.
"""

from __future__ import annotations

from types import TracebackType

import rich.console
import rich.progress

from federation.sandbox import progress


class RichView(progress.Sink):
    """Steps as rich progress tasks; notes printed above them. Use as a context manager."""

    def __init__(self, console: rich.console.Console) -> None:
        self._progress = rich.progress.Progress(
            rich.progress.SpinnerColumn(finished_text="[green]done"),
            rich.progress.TextColumn("{task.description}"),
            rich.progress.BarColumn(),
            rich.progress.TextColumn("{task.fields[amount]}"),
            rich.progress.TimeElapsedColumn(),
            console=console,
        )
        self._task: rich.progress.TaskID | None = None
        self._completed = 0

    def __enter__(self) -> RichView:
        self._progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._progress.stop()

    def emit(self, event: progress.Event) -> None:
        if isinstance(event, progress.Step):
            self._finish()
            self._completed = 0
            self._task = self._progress.add_task(
                f"[{event.index}/{event.total}] {event.title}", total=None, amount="")
        elif isinstance(event, progress.Advance) and self._task is not None:
            said = progress.amount(event.done, event.total, event.unit)
            self._completed = event.done
            self._progress.update(self._task, completed=event.done, total=event.total,
                                  amount=f"{said}, {event.detail}" if event.detail else said)
        elif isinstance(event, progress.Note):
            self._progress.console.print(f"    {event.text}" if self._task is not None else event.text,
                                         markup=False, highlight=False)
        elif isinstance(event, progress.StepDone):
            if event.summary and self._task is not None:
                self._progress.update(self._task, amount=event.summary)
            self._finish()

    def _finish(self) -> None:
        if self._task is None:
            return
        done = max(self._completed, 1)
        self._progress.update(self._task, total=done, completed=done)
        self._progress.stop_task(self._task)
        self._task = None
