"""The agent's Prometheus metrics: admission latency, decisions per subset, link state.

Why a registry per agent instead of prometheus_client's global one: tests (and a process that runs
one agent per member, like the demo) create several agents; metrics registered twice in the global
registry raise, and metrics shared between agents would mix their numbers. Each `AgentMetrics`
owns a `CollectorRegistry`, and `serve` exposes exactly that registry.

What is measured and why:
* `fedspread_agent_admission_seconds` — the webhook runs on every pod create of the cluster that
  carries the spread label; it must stay in the sub-millisecond range (no network on the path).
* `fedspread_agent_admission_decisions_total{spread,subset,outcome}` — how pods are being placed:
  `assigned` (a subset with quota), `no-subset` (every subset full: the pod will go first on
  scale-down), `passthrough` (not ours), `deleting` (a delete or eviction noted), `not-counted`
  (refused for now: a just-started agent has not counted the spread's pods yet).
* `fedspread_agent_link_connected` and `fedspread_agent_fail_static` — whether the coordinator is
  reachable and whether the agent is enforcing its last quotas without it (fail static).
* `fedspread_agent_loop_stalled{loop}` and `fedspread_agent_loop_seconds_since_turn{loop}` — the
  watchdog's view of the agent's loops (workload, reconciler, reporter, link; `watch_loops`).
* `fedspread_agent_events_total{outcome}` — what the agent's Events recorder did: created,
  updated (deduplicated into a series), dropped, limited, failed (`watch_events`,
  `federation.event_metrics`).
"""

from __future__ import annotations

import dataclasses

import prometheus_client

from federation import event_metrics, metrics_endpoint, watchdog_metrics
from federation import watchdog as watchdog_mod

PREFIX = "fedspread_agent_"


@dataclasses.dataclass(frozen=True)
class MetricsSettings:
    """Where the agent serves its metrics (`agents.main.AgentConfig.metrics`)."""

    port: int = 9090
    """Port of the Prometheus /metrics endpoint (`--metrics-port`; 0: off)."""


# 50 µs .. 100 ms: a local decision is tens of microseconds; anything near 100 ms is a problem
# (the apiserver gives the webhook 2 s in total, for every webhook of the request).
LATENCY_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
)
ASSIGNED = "assigned"
NO_SUBSET = "no-subset"
PASSTHROUGH = "passthrough"
DELETING = "deleting"
NOT_COUNTED = "not-counted"
OUTCOMES = (ASSIGNED, NO_SUBSET, PASSTHROUGH, DELETING, NOT_COUNTED)


class AgentMetrics(metrics_endpoint.Endpoint):
    """The metrics of one agent, in their own registry."""

    def __init__(self, *, cluster: str = "") -> None:
        super().__init__(prometheus_client.CollectorRegistry(auto_describe=True))
        self.cluster = cluster
        self.admission_latency = prometheus_client.Histogram(
            "fedspread_agent_admission_seconds",
            "Time the webhook took to answer one AdmissionReview (parse to response).",
            ["operation"], buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.decisions = prometheus_client.Counter(
            "fedspread_agent_admission_decisions",
            "Admission decisions by spread, subset and outcome.",
            ["spread", "subset", "outcome"], registry=self.registry,
        )
        self.rejected = prometheus_client.Counter(
            "fedspread_agent_admission_rejected",
            "Requests to the webhook answered with an HTTP error, by status code.",
            ["code"], registry=self.registry,
        )
        self.link_connected = prometheus_client.Gauge(
            "fedspread_agent_link_connected",
            "1 while the stream to the coordinator is up, 0 otherwise.",
            registry=self.registry,
        )
        self.fail_static = prometheus_client.Gauge(
            "fedspread_agent_fail_static",
            "1 while the agent enforces its last quotas without a coordinator.",
            registry=self.registry,
        )

    def watch_loops(self, watchdog: watchdog_mod.Watchdog) -> None:
        """Add `fedspread_agent_loop_stalled{loop}` and `..._loop_seconds_since_turn{loop}` from the
        agent's watchdog (`federation.watchdog_metrics`)."""
        self.registry.register(watchdog_metrics.LoopCollector(PREFIX, watchdog))

    def watch_events(self, counts: event_metrics.Counts) -> None:
        """Add `fedspread_agent_events_total{outcome}` from the Events recorder's counts
        (`EventRecorder.outcomes`, read at scrape time)."""
        self.registry.register(event_metrics.EventCollector(PREFIX, counts))

    def observe_admission(self, operation: str, seconds: float) -> None:
        """Record one admission's latency."""
        self.admission_latency.labels(operation=operation).observe(seconds)

    def decision(self, *, spread: str, subset: str | None, outcome: str) -> None:
        """Count one admission decision (`subset` None for pods given no subset)."""
        self.decisions.labels(spread=spread, subset=subset or "", outcome=outcome).inc()

    def decision_count(self, *, spread: str, subset: str | None, outcome: str) -> float:
        """How many decisions of that kind were counted (for tests and the status command)."""
        value = self.registry.get_sample_value(
            "fedspread_agent_admission_decisions_total",
            {"spread": spread, "subset": subset or "", "outcome": outcome},
        )
        return value or 0.0

    def http_error(self, code: int) -> None:
        """Count a request answered with HTTP `code`."""
        self.rejected.labels(code=str(code)).inc()

    def set_link(self, *, connected: bool) -> None:
        """The link went up (fail static ends) or down (fail static begins)."""
        self.link_connected.set(1 if connected else 0)
        self.fail_static.set(0 if connected else 1)
