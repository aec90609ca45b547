"""The watchdog's loops as Prometheus metrics, for the coordinator and the agent alike.

Why apart from `federation.watchdog`: the watchdog is pure logic (no Prometheus, so every layer may
use it and its tests need no registry), while the metric names and their help are a contract
that the coordinator's and the agent's /metrics share; they are defined here once, each process
adding its own prefix (`fedspread_coordinator_`, `fedspread_agent_`):

* `loop_stalled{loop}` — 1 while a long-running loop has not turned within its limit (its period
  times the watchdog's factor, at least its floor), else 0;
* `loop_seconds_since_turn{loop}` — seconds since the loop last turned (read at scrape time).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import core as prometheus_core
from prometheus_client import registry as prometheus_registry

from federation import watchdog as watchdog_mod

STALLED = "loop_stalled"
SINCE_TURN = "loop_seconds_since_turn"


def loop_metrics(prefix: str, watchdog: watchdog_mod.Watchdog) -> Iterator[prometheus_core.Metric]:
    """`loop_stalled{loop}` and `loop_seconds_since_turn{loop}`, named with `prefix`."""
    stalled = prometheus_core.GaugeMetricFamily(
        prefix + STALLED, "1 while a long-running loop has not turned within its limit "
        "(the watchdog's period times factor), else 0.", labels=["loop"])
    since = prometheus_core.GaugeMetricFamily(
        prefix + SINCE_TURN, "Seconds since a long-running loop last turned.", labels=["loop"])
    for state in watchdog.snapshot():
        stalled.add_metric([state.name], 1 if state.stalled else 0)
        since.add_metric([state.name], state.seconds_since_turn)
    yield stalled
    yield since


class LoopCollector(prometheus_registry.Collector):
    """The loop metrics of `watchdog`, for a registry of their own process."""

    def __init__(self, prefix: str, watchdog: watchdog_mod.Watchdog) -> None:
        self.prefix = prefix
        self.watchdog = watchdog

    def collect(self) -> Iterator[prometheus_core.Metric]:
        """Read at scrape time."""
        return loop_metrics(self.prefix, self.watchdog)
