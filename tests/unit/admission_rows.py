"""Hand-made runs of the admission benchmark, as `bench/admission_report.run_row` rows.

Why a module of its own: the unit tests of the admission arithmetic (test_bench_admission_stats.py)
and of the floor and added latency (test_bench_admission_floor.py) both judge rows built from a few
numbers — a create latency, a handler time, pods over a cap, refused creates — and one copy of how
such a row is made keeps both about the rule they hold.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bench import admission_report as report
from bench import webhook_samples

LIMITS = {"a": 4, "b": 3, "c": 3}
"""The caps of the three subsets of every hand-made run."""
MODE_ORDER = (*report.EVERY_LEVEL, report.AFTER)
"""Within a run, the modes ran in this order (the row's `order`)."""


@dataclasses.dataclass
class Burst:
    """What `admission_client` measured of one run's load: every create's latency."""

    latencies: list[float]
    seconds: float = 1.0
    denied: int = 0
    lost: int = 0
    completed: bool = True

    @property
    def pods(self) -> int:
        return len(self.latencies)


def handler_samples(handler_ms: float) -> list[webhook_samples.Sample]:
    """Ten CREATE admissions of `handler_ms` wall time each, half of it CPU."""
    return [webhook_samples.Sample(0.0, "CREATE", handler_ms / 1000, handler_ms / 2000, False, False)] * 10


def row(mode: str, run: int, *, create: float, clients: int = 5, handler: float = 0.5, over: int = 0,
        refused: int = 0, samples: list[webhook_samples.Sample] | None = None) -> dict[str, Any]:
    """Run `run` of `mode` at `clients` clients: 12 creates of `create` ms each (`refused` of them
    refused), handler samples of `handler` ms (none for the floor, which no webhook serves), `over`
    pods past subset a's cap; the baselines' webhooks time out after 10 s, fedspread's after 2 s."""
    if samples is None:
        samples = [] if mode == report.FLOOR else handler_samples(handler)
    order = run * len(MODE_ORDER) + MODE_ORDER.index(mode)
    return report.run_row(
        mode=mode, level=report.Level.of(clients), run=run, order=order, asked=12,
        burst=Burst(latencies=[create / 1000] * 12, denied=refused), handler=samples, apiserver={},
        subsets={"a": 4 + over, "b": 3, "c": 3, None: 2 - over}, limits=LIMITS,
        timeout_s=10.0 if mode.startswith("baseline") else 2.0, conflicts=0, counters={},
        load={"at_start": [1.0, 1.0, 1.0], "at_end": [2.0, 1.0, 1.0]})
