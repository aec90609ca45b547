"""Handler latencies recorded inside a webhook process, handed to the admission benchmark at exit.

Why inside: the benchmark compares the handlers themselves — parse, decide, encode — as each
webhook's own `AdmissionHandler.respond` measures it (the time it passes to
`AgentMetrics.observe_admission`), not as the apiserver or the client sees it (those include TLS,
queueing and the apiserver's own work, and are reported separately). The Prometheus histogram the
agent exports has buckets; a p99 needs every observation.

`Recorder.attach` wraps, on one handler instance, `respond` and its metrics' `observe_admission`:
each admission becomes a `Sample` with the handler's own wall time, plus what explains a slow one
— the thread's CPU time over the call, whether the OS preempted it meanwhile (involuntary
context switches, from getrusage(RUSAGE_THREAD)), whether it blocked (voluntary ones: the
handler does no I/O, so a block is a wait for the interpreter lock, or a lock of the bookkeeping),
and the CPU time the process's *other* threads spent meanwhile (the process's CPU time over the
call less the thread's: with one interpreter lock, Python code they ran is time the handler could
not run; what the wait holds beyond it was spent by other processes on the cores).
On a small machine shared with a control plane, wall time above CPU time with preemption is the
scheduler's doing, without it the other threads of the process holding the interpreter lock; the
report says how much of each (`admission_report.wait_profile`). `write` saves everything as JSON
when the process stops; the benchmark keeps the samples of its burst window.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import resource
import threading
import time
from collections.abc import Sequence
from typing import Any

from agents.webhook import handler as handler_mod
from agents.webhook import review


@dataclasses.dataclass(frozen=True)
class Sample:
    """One admission: when it ended (epoch seconds), its operation, the handler's own wall time,
    the thread's CPU time over the call, whether the OS preempted the thread meanwhile, and whether
    the thread blocked and the CPU time the process's other threads used meanwhile (None: recorded
    before these were)."""

    at: float
    operation: str
    seconds: float
    cpu_seconds: float
    preempted: bool
    blocked: bool | None = None
    others_cpu_seconds: float | None = None


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
            before, cpu = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
            process = time.process_time()
            try:
                return respond(body, max_body=max_body)
            finally:
                spent, process_spent = time.thread_time() - cpu, time.process_time() - process
                after = resource.getrusage(resource.RUSAGE_THREAD)
                if self._last.value is not None:
                    operation, seconds = self._last.value
                    self.samples.append(Sample(time.time(), operation, seconds, spent,
                                               after.ru_nivcsw > before.ru_nivcsw,
                                               after.ru_nvcsw > before.ru_nvcsw,
                                               max(0.0, process_spent - spent)))

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


def merged(parts: Sequence[Recorded]) -> Recorded:
    """What several processes of one mode recorded (a baseline's replicas and its controller), as one:
    every sample, in the order they ended, and each counter summed."""
    counters: dict[str, int] = {}
    for part in parts:
        for name, value in part.counters.items():
            counters[name] = counters.get(name, 0) + value
    samples = sorted((s for part in parts for s in part.samples), key=lambda s: s.at)
    return Recorded(samples=tuple(samples), counters=counters)
