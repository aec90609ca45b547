"""Measures of the sandbox build's progress: what apt will download, what it has, what Go built.

Why apart from the build: each measure reads something the build's tools leave behind — the
`--print-uris` listing of apt-get, the bytes in a download directory, the log of the Kubernetes
`make` — and turns it into numbers for `progress.Advance`. Reading is all they do (the build
itself is unchanged), and the parsing is pure, so it is tested on recorded output.

The log's `+++ Building go targets` blocks say which tools or binaries are being built; a verbose
Go build (`-v`, not asked for today: `build.MAKE_ARGUMENTS`) would also name each Go package as it
is compiled, and those lines are counted. Their number is not known ahead, so the count has no total.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import threading
from collections.abc import Callable, Iterator
from types import TracebackType

from federation.sandbox import progress

POLL_SECONDS = 2.0
_URI_LINE = re.compile(r"^'(?P<uri>[^']+)'\s+(?P<name>\S+)\s+(?P<size>\d+)(\s|$)")
_GO_PACKAGE = re.compile(r"^[a-z0-9_.~-]+(/[A-Za-z0-9_.~+-]+)*$")
_TARGETS_HEADER = "Building go targets"


@dataclasses.dataclass(frozen=True)
class Download:
    """One file apt-get will fetch."""

    name: str
    size: int


def planned_downloads(listing: str) -> list[Download]:
    """The files of an `apt-get --print-uris` listing (`'URI' NAME SIZE HASH` lines)."""
    found = (_URI_LINE.match(line.strip()) for line in listing.splitlines())
    return [Download(name=m["name"], size=int(m["size"])) for m in found if m]


def bytes_under(directory: pathlib.Path) -> int:
    """The bytes of every file under `directory` now (files vanishing meanwhile count 0)."""
    total = 0
    for path in directory.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:
            continue
    return total


def files_complete(directory: pathlib.Path, planned: list[Download]) -> int:
    """How many of the planned files are in `directory` at their full size."""
    count = 0
    for item in planned:
        try:
            count += (directory / item.name).stat().st_size == item.size
        except OSError:
            continue
    return count


class GoBuildLog:
    """Reads the Kubernetes build's log as it grows: the current targets, Go packages compiled."""

    def __init__(self) -> None:
        self.packages = 0
        self.targets: list[str] = []
        self._in_header = False

    def feed(self, text: str) -> None:
        """Account for the next complete lines of the log."""
        for raw in text.splitlines():
            line = raw.rstrip()
            if _TARGETS_HEADER in line:
                self.targets, self._in_header = [], True
            elif self._in_header and raw.startswith((" ", "\t")) and line.strip():
                self.targets.append(line.strip().rsplit("/", 1)[-1])
            else:
                self._in_header = False
                if _GO_PACKAGE.match(line):
                    self.packages += 1

    @property
    def building(self) -> str:
        """What is being built: "building kube-apiserver, kube-scheduler", or ""."""
        return f"building {', '.join(self.targets)}" if self.targets else ""


def complete_lines(chunk: str, carry: str) -> tuple[str, str]:
    """(`carry` + the complete lines of `chunk`, the unfinished last line to carry on)."""
    text = carry + chunk
    cut = text.rfind("\n") + 1
    return text[:cut], text[cut:]


class Ticker:
    """Calls `tick` every `interval` seconds on a thread, and once more on leaving the `with`."""

    def __init__(self, tick: Callable[[], None], *, interval: float = POLL_SECONDS) -> None:
        self._tick = tick
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="build-progress", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._tick()

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        if kind is None:
            self._tick()


def tail_file(path: pathlib.Path) -> Iterator[str]:
    """Each call to `next` gives what was appended to `path` since the last one ("" if nothing)."""
    offset, carry = 0, ""
    while True:
        try:
            with path.open("r", errors="replace") as stream:
                stream.seek(offset)
                chunk = stream.read()
                offset = stream.tell()
        except OSError:
            chunk = ""
        lines, carry = complete_lines(chunk, carry)
        yield lines


def downloading(sink: progress.Sink, directory: pathlib.Path, planned: list[Download]) -> Ticker:
    """A ticker reporting the bytes (and files, when `planned` is known) under `directory`."""
    total = sum(item.size for item in planned) or None

    def tick() -> None:
        done = bytes_under(directory)
        files = f"{files_complete(directory, planned)} of {len(planned)} files" if planned else ""
        sink.advance(min(done, total) if total else done, total=total, unit="bytes", detail=files)

    return Ticker(tick)
