"""Progress of `fedspread sandbox build` as events, and their plain line-per-step rendering.

Why events: the build runs for minutes (downloads, unpacking, a Go build of three large binaries)
and used to print one stale line every 20 s. The build now says what it does — a step begins,
so much of it is done, a remark, the step ends — and a view decides how to show it: a live `rich`
display on a terminal (`federation.cli.build_view`), or, when stdout is a log (CI), lines that are
only ever appended, never rewritten with carriage returns, and few: a progress line at most
every `interval` seconds, plus one when a step ends. That rendering is a pure function of the
events and the times they happened at (`LineRenderer`), so it is tested without a build.

Callers that hand the build a plain `report(line)` callable (tests, `fedspread sandbox up`) get
the line rendering through `sink_of`.
"""

from __future__ import annotations

import abc
import dataclasses
import threading
import time
from collections.abc import Callable

Report = Callable[[str], None]
INTERVAL = 30.0
"""Seconds between two progress lines of one step in the line rendering."""


@dataclasses.dataclass(frozen=True)
class Step:
    """Step `index` of `total` begins."""

    index: int
    total: int
    title: str


@dataclasses.dataclass(frozen=True)
class Advance:
    """So much of the current step is done: `done` of `total` (None: unknown) `unit`s.

    `unit` "bytes" is shown in MB; any other unit as a count ("files", "Go packages").
    `detail` says what is under way ("building kube-apiserver")."""

    done: int
    total: int | None = None
    unit: str = ""
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class Note:
    """A remark within the current step (or outside any)."""

    text: str


@dataclasses.dataclass(frozen=True)
class StepDone:
    """The current step ended; `summary` says what came of it."""

    summary: str = ""


Event = Step | Advance | Note | StepDone


def duration(seconds: float) -> str:
    """`42s`, `5m02s`: elapsed time as people read it."""
    whole = int(seconds)
    return f"{whole}s" if whole < 60 else f"{whole // 60}m{whole % 60:02d}s"


def amount(done: int, total: int | None, unit: str) -> str:
    """`12.5 of 35.0 MB`, `2 of 3 files`, `412 Go packages`."""
    if unit == "bytes":
        shown = f"{done / 1e6:.1f}"
        return f"{shown} of {total / 1e6:.1f} MB" if total is not None else f"{shown} MB"
    counted = f"{done} of {total}" if total is not None else str(done)
    return f"{counted} {unit}".rstrip()


class LineRenderer:
    """Events and the times they happened at, as log lines: pure, no clock, no output."""

    def __init__(self, *, interval: float = INTERVAL) -> None:
        self.interval = interval
        self._step: Step | None = None
        self._started = 0.0
        self._printed = 0.0
        self._last: Advance | None = None
        self._shown: Advance | None = None

    def render(self, event: Event, *, now: float) -> list[str]:
        """The lines (perhaps none) `event`, happening at `now` (seconds, any origin), adds."""
        if isinstance(event, Step):
            self._step, self._started, self._printed, self._last, self._shown = event, now, now, None, None
            return [f"{self._prefix()} {event.title}"]
        if isinstance(event, Note):
            return [f"    {event.text}" if self._step else event.text]
        if isinstance(event, Advance):
            first, shown = self._last is None, self._shown
            self._last = event
            finished = event.total is not None and event.done >= event.total
            due = first or finished or now - self._printed >= self.interval
            if not due or event == shown:  # nothing new said: the step is quiet, the log too
                return []
            self._printed, self._shown = now, event
            return [f"    {self._progress(event, now)}"]
        step, self._step, last, self._last = self._step, None, self._last, None
        if step is None:
            return [event.summary] if event.summary else []
        parts = [amount(last.done, last.total, last.unit)] if last else []
        parts += [event.summary] if event.summary else []
        said = f" ({', '.join(parts)})" if parts else ""
        return [f"{self._prefix(step)} {step.title}: done in {duration(now - self._started)}{said}"]

    def _prefix(self, step: Step | None = None) -> str:
        step = step or self._step
        return f"[{step.index}/{step.total}]" if step else ""

    def _progress(self, event: Advance, now: float) -> str:
        said = amount(event.done, event.total, event.unit)
        detail = f", {event.detail}" if event.detail else ""
        return f"{said}{detail} ({duration(now - self._started)})"


class Sink(abc.ABC):
    """Where the build reports; a view implements `emit`. Steps are numbered as they begin,
    out of the number `plan` announced (or of as many as began, without a plan)."""

    _planned = 0
    _begun = 0

    @abc.abstractmethod
    def emit(self, event: Event) -> None:
        """Show one event."""

    def plan(self, steps: int) -> None:
        """The next `steps` steps make up the work: they are numbered 1 to `steps`."""
        self._planned, self._begun = steps, 0

    def step(self, title: str) -> None:
        """The next step begins."""
        self._begun += 1
        self.emit(Step(index=self._begun, total=max(self._planned, self._begun), title=title))

    def advance(self, done: int, *, total: int | None = None, unit: str = "", detail: str = "") -> None:
        """So much of the current step is done."""
        self.emit(Advance(done=done, total=total, unit=unit, detail=detail))

    def note(self, text: str) -> None:
        """A remark."""
        self.emit(Note(text))

    def done(self, summary: str = "") -> None:
        """The current step ended."""
        self.emit(StepDone(summary))

    def __call__(self, text: str) -> None:
        """A sink is also a `report(line)` callable: the line is a note."""
        self.note(text)


class Lines(Sink):
    """The line rendering, written through `write` (say, to stderr); for logs and tests."""

    def __init__(self, write: Report, *, interval: float = INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._write = write
        self._clock = clock
        self._renderer = LineRenderer(interval=interval)
        self._lock = threading.Lock()  # the build's measures report from a thread of their own

    def emit(self, event: Event) -> None:
        with self._lock:
            for line in self._renderer.render(event, now=self._clock()):
                self._write(line)


def sink_of(report: Report | Sink) -> Sink:
    """`report` itself when it is a Sink; else the line rendering written through it."""
    return report if isinstance(report, Sink) else Lines(report)
