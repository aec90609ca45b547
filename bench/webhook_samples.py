"""Handler latencies recorded inside a webhook process, handed to the admission benchmark at exit.

Why inside: the benchmark compares the handlers themselves — parse, decide, encode — as each
webhook's own `AdmissionHandler.respond` measures it (the time it passes to
`AgentMetrics.observe_admission`), not as the apiserver or the client sees it (those include TLS,
queueing and the apiserver's own work, and are reported separately). The Prometheus histogram the
agent exports has buckets; a p99 needs every observation.

`Recorder.attach` wraps, on one handler instance, `respond` and its metrics' `observe_admission`:
each admission becomes a `Sample` with the handler's own wall time, plus what explains a slow one
— the thread's CPU time over the call and whether the OS preempted it meanwhile (involuntary
context switches, from getrusage(RUSAGE_THREAD)). On a small machine shared with a control plane,
wall time above CPU time with preemption is the scheduler's doing, not the handler's; the report
says how much of each. `write` saves everything as JSON when the process stops; the benchmark
keeps the samples of its burst window.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import resource
import threading
import time
from typing import Any

from agents.webhook import handler as handler_mod
from agents.webhook import review


@dataclasses.dataclass(frozen=True)
class Sample:
    """One admission: when it ended (epoch seconds), its operation, the handler's own wall time,
    the thread's CPU time over the call, and whether the OS preempted the thread meanwhile."""

    at: float
    operation: str
    seconds: float
    cpu_seconds: float
    preempted: bool


class Recorder:
    """Keeps every admission of one handler, and named counters (e.g. 409 retries)."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.counters: dict[str, int] = {}
        self._lock = threading.Lock()
        self._last = threading.local()

    def attach(self, target: handler_mod.AdmissionHandler) -> None:
        """Record every admission `target` answers (its metric and answers are unchanged)."""
        observe, respond = target.metrics.observe_admission, target.respond

        def observing(operation: str, seconds: float) -> None:
            observe(operation, seconds)
            self._last.value = (operation, seconds)

        def responding(body: bytes, *, max_body: int = review.MAX_BODY) -> bytes:
            self._last.value = None
            before, cpu = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw, time.thread_time()
            try:
                return respond(body, max_body=max_body)
            finally:
                spent = time.thread_time() - cpu
                preempted = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw > before
                if self._last.value is not None:
                    operation, seconds = self._last.value
                    self.samples.append(Sample(time.time(), operation, seconds, spent, preempted))

        target.metrics.observe_admission = observing  # type: ignore[method-assign]
        target.respond = responding  # type: ignore[method-assign]

    def count(self, name: str, amount: int = 1) -> None:
        """Add `amount` to counter `name`."""
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + amount

    def write(self, path: pathlib.Path) -> None:
        """Save samples and counters as JSON (written whole, then renamed into place)."""
        document = {"samples": [dataclasses.astuple(s) for s in list(self.samples)],
                    "counters": dict(self.counters)}
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(document))
        partial.replace(path)


@dataclasses.dataclass(frozen=True)
class Recorded:
    """What a webhook process wrote at exit."""

    samples: tuple[Sample, ...]
    counters: dict[str, int]

    def window(self, *, operation: str, start: float) -> list[Sample]:
        """The `operation` admissions that ended at or after `start`."""
        return [s for s in self.samples if s.operation == operation and s.at >= start]


def load(path: pathlib.Path) -> Recorded:
    """Read what `Recorder.write` saved."""
    document: dict[str, Any] = json.loads(path.read_text())
    return Recorded(samples=tuple(Sample(*item) for item in document["samples"]),
                    counters=dict(document["counters"]))
