"""The Event recorder's counts as Prometheus metrics, for the coordinator and the agent alike.

Why apart from `federation.kube.events`: the recorder keeps plain counts and knows nothing of
Prometheus (its tests need no registry), while the metric's name and help are a contract that the
coordinator's and the agent's /metrics share; it is defined here once, each process adding its
own prefix (`fedspread_coordinator_`, `fedspread_agent_`), as `federation.watchdog_metrics` does
for the loops:

* `events_total{outcome}` — what the recorder did with the Events it was given, by outcome
  (`federation.kube.events.OUTCOMES`): `created` (a new Event written), `updated` (a repeat
  deduplicated into an existing Event's series, its count written), `dropped` (not queued: the
  queue was full or the recorder closed), `limited` (a new Event refused by the token buckets),
  `failed` (a write that failed after its retries). Every outcome is reported, 0 until met.

The counts are read at scrape time, from a function the process gives (`EventRecorder.outcomes`),
so this module needs nothing of the recorder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import core as prometheus_core
from prometheus_client import registry as prometheus_registry

EVENTS = "events"
"""The metric's name after the prefix (`_total` is added by the exposition)."""
HELP = ("Kubernetes Events handed to the recorder, by outcome: created, updated (a repeat "
        "deduplicated into the Event's series), dropped (queue full or closed), limited (rate), failed.")

Counts = Callable[[], Mapping[str, int]]


def event_metrics(prefix: str, counts: Mapping[str, int]) -> prometheus_core.CounterMetricFamily:
    """`events_total{outcome}`, named with `prefix`, from the recorder's counts."""
    family = prometheus_core.CounterMetricFamily(prefix + EVENTS, HELP, labels=["outcome"])
    for outcome, value in sorted(counts.items()):
        family.add_metric([outcome], value)
    return family


class EventCollector(prometheus_registry.Collector):
    """The Event counts of one recorder, for a registry of its process."""

    def __init__(self, prefix: str, counts: Counts) -> None:
        self.prefix = prefix
        self.counts = counts

    def collect(self) -> Iterator[prometheus_core.Metric]:
        """Read at scrape time."""
        yield event_metrics(self.prefix, self.counts())
