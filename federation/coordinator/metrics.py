"""The coordinator's Prometheus metrics: placement rounds, agents, outboxes, status writes, failover.

Why a module of its own, and why most values are read at scrape time: the parts that do the work
(the facade, the model, the status writer) keep plain counts — `Coordinator.clusters_lost`,
`Brakes.suspensions`, `FailoverRateLimit.deferred`, `StatusWriter.writes/skips/retries/failures` —
and know nothing of Prometheus, so the model stays pure and a test of them needs no registry.
This module turns them into metrics when Prometheus asks (`Collector.collect`), under the facade's
lock for what the World holds, so one scrape describes one consistent World. Only the round
latency must be seen as it happens: the facade calls `observe_round` (its `on_round` hook) after
every round with spreads to place.

As for the agent (`agents.metrics`), each `CoordinatorMetrics` owns its `CollectorRegistry`: tests
run several coordinators in one process, and the global registry would refuse the second.

What is measured (names as Prometheus shows them):
* `fedspread_coordinator_placement_rounds_total`, `..._placement_round_seconds` (histogram) and
  `..._spread_placements_total` — rounds with spreads to place (a hub event, a report, a tick),
  how long each took under the lock (recompute and queueing to the streams), spreads placed.
* `..._spreads_known`, `..._spreads_placed`, `..._hub_synced` — the World; before the hub is
  listed nothing is placed (`facade`), so `spreads_placed` stays 0 while `hub_synced` is 0.
* `..._agents_connected`, `..._outbox_messages` — streams, and messages queued to them and not
  yet written (coalesced per spread, `wire.outbox`): a growing outbox is a slow agent.
* `..._status_writes_total{kind}`, `..._status_write_skips_total{kind}`,
  `..._status_write_retries_total{kind}`, `..._status_write_failures_total{kind}` — the hub
  writes (`hub.status_writer`): patches applied, skipped as unchanged (read and found right; a
  status the watch says is unchanged since it was written is not read, nor counted:
  `hub.held_statuses`), attempts repeated after 409/429/5xx, writes given up.
* `..._loop_stalled{loop}`, `..._loop_seconds_since_turn{loop}` — the watchdog's view of each
  long-running loop (`federation.watchdog`, names in `federation.watchdog_metrics`): 1 while a
  loop has not turned within its limit, and the seconds since its last turn.
* `..._clusters_lost_total`, `..._failovers_suspended_total`, `..._failovers_deferred_total`,
  `..._failover_brakes_holding` — clusters newly lost (their replicas move unless held), times a
  spread's brake began holding (more than half its clusters silent), lost clusters made to wait
  for `--failover-clusters-per-minute`, spreads whose brake holds now.
* `..._events_total{outcome}` — the Events recorder's counts (`federation.event_metrics`):
  created, updated (deduplicated into a series), dropped, limited, failed.
* `..._external_metrics_requests_total{code}` — answers of the `external.metrics.k8s.io` API
  (`services.metrics_api`) by HTTP status: 401s are callers that are not the aggregator.
* `..._leader_stall_stepdowns_total` — times this leader gave its Lease up because its hub-events
  or timer loop stayed stalled (`model.stall`); the process then exits, so the count is seen
  between the decision and the end of its stop (the log line stays).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import prometheus_client
from prometheus_client import core as prometheus_core
from prometheus_client import registry as prometheus_registry

from federation import event_metrics, metrics_endpoint, watchdog_metrics
from federation import watchdog as watchdog_mod
from federation.coordinator import facade
from federation.coordinator.hub import status_writer
from federation.coordinator.model import loop
from federation.coordinator.model import world as world_model

PREFIX = "fedspread_coordinator_"
# 1 ms .. 30 s: a round of a few spreads takes milliseconds; a full placement after the hub is
# listed (every spread at once) may take seconds at 10,000 spreads (bench/README.md).
ROUND_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LOCK_SECONDS = 2.0
"""A scrape waits this long for the facade's lock before it leaves the World's metrics out."""
STATUS_KINDS = ("spread", "cluster", "deployment", "replicaset", "statefulset", "job")
"""The kinds `StatusWriter` writes; each is reported (0 until written), so rates need no absent series."""


class Collector(prometheus_registry.Collector):
    """What the coordinator's parts count, read when Prometheus scrapes."""

    def __init__(self, coordinator: facade.Coordinator, writer: status_writer.StatusWriter | None,
                 watchdog: watchdog_mod.Watchdog | None = None,
                 events: event_metrics.Counts | None = None) -> None:
        self.coordinator = coordinator
        self.writer = writer
        self.watchdog = watchdog
        self.events = events

    def collect(self) -> Iterator[prometheus_core.Metric]:
        """One consistent reading: the World and the streams under the facade's lock. When the lock
        is not free within `LOCK_SECONDS` (a loop stalled holding it), those are left out of this
        scrape and the rest is served, so the loop metrics still say what stalls."""
        coordinator, world = self.coordinator, self.coordinator.world
        read: list[prometheus_core.Metric] = []
        if coordinator.lock.acquire(timeout=LOCK_SECONDS):
            try:
                read = self._world(coordinator, world)
            finally:
                coordinator.lock.release()
        yield from read
        if self.writer is not None:
            writer = self.writer
            yield by_kind("status_writes", "Status patches applied to the hub, by kind.", writer.writes)
            yield by_kind("status_write_skips", "Status writes skipped: read and found unchanged, by kind.",
                          writer.skips)
            yield by_kind("status_write_retries",
                          "Status write attempts repeated after 409/429/5xx, by kind.", writer.retries)
            yield by_kind("status_write_failures",
                          "Status writes given up (retries exhausted or not retriable), by kind.",
                          writer.failures)
        if self.watchdog is not None:
            yield from watchdog_metrics.loop_metrics(PREFIX, self.watchdog)
        if self.events is not None:
            yield event_metrics.event_metrics(PREFIX, self.events())

    @staticmethod
    def _world(coordinator: facade.Coordinator, world: world_model.World) -> list[prometheus_core.Metric]:
        """The World's and the streams' gauges and counters (under the facade's lock)."""
        known, placed = len(world.spreads()), len(world.placements)
        connected, queued = len(coordinator.connected()), coordinator.backlog()
        synced = coordinator.hub_listed()
        lost, suspended = coordinator.clusters_lost, world.brakes.suspensions
        deferred = world.failover_limit.deferred
        holding = sum(1 for entry in world.spreads()
                      if (state := world.brakes.state(entry.key)) is not None and state.suspended)
        return [
            gauge("spreads_known", "FederatedSpreads in the World (valid, not deleted).", known),
            gauge("spreads_placed", "Spreads with a placement.", placed),
            gauge("hub_synced", "1 once the hub has been listed (placement has begun), else 0.",
                  1 if synced else 0),
            gauge("agents_connected", "Agents with an open stream.", connected),
            gauge("outbox_messages",
                  "Messages queued to the agents' streams and not yet written (after coalescing).", queued),
            counter("clusters_lost", "Clusters newly reported lost (silent past clusterLostSeconds).", lost),
            counter("failovers_suspended",
                    "Times a spread's failover was suspended (its failover brake began holding).", suspended),
            counter("failovers_deferred",
                    "Lost clusters whose failover waited for the federation's failover rate limit.",
                    deferred),
            gauge("failover_brakes_holding", "Spreads whose failover brake holds now.", holding),
        ]


def gauge(name: str, documentation: str, value: float) -> prometheus_core.GaugeMetricFamily:
    """A gauge of the coordinator's, named with the prefix."""
    return prometheus_core.GaugeMetricFamily(PREFIX + name, documentation, value=value)


def counter(name: str, documentation: str, value: float) -> prometheus_core.CounterMetricFamily:
    """A counter of the coordinator's (`_total` is added by the exposition)."""
    return prometheus_core.CounterMetricFamily(PREFIX + name, documentation, value=value)


def by_kind(name: str, documentation: str, counts: Mapping[str, int]) -> prometheus_core.CounterMetricFamily:
    """A counter per status kind (every known kind, 0 until counted)."""
    family = prometheus_core.CounterMetricFamily(PREFIX + name, documentation, labels=["kind"])
    snapshot = dict(counts)  # one C-level copy: the status thread may count meanwhile
    for kind in sorted(set(STATUS_KINDS) | set(snapshot)):
        family.add_metric([kind], snapshot.get(kind, 0))
    return family


class CoordinatorMetrics(metrics_endpoint.Endpoint):
    """The metrics of one coordinator, in their own registry; `serve` exposes them."""

    def __init__(self, coordinator: facade.Coordinator, *,
                 writer: status_writer.StatusWriter | None = None,
                 watchdog: watchdog_mod.Watchdog | None = None,
                 events: event_metrics.Counts | None = None) -> None:
        """`events`: the Events recorder's counts by outcome (`EventRecorder.outcomes`)."""
        super().__init__(prometheus_client.CollectorRegistry(auto_describe=True))
        self.rounds = prometheus_client.Counter(
            PREFIX + "placement_rounds", "Placement rounds that had spreads to place.",
            registry=self.registry)
        self.round_seconds = prometheus_client.Histogram(
            PREFIX + "placement_round_seconds",
            "Time one placement round took under the coordinator's lock (recompute and queueing).",
            buckets=ROUND_BUCKETS, registry=self.registry)
        self.placements = prometheus_client.Counter(
            PREFIX + "spread_placements", "Spreads placed, over all rounds.", registry=self.registry)
        self.stall_stepdowns = prometheus_client.Counter(
            PREFIX + "leader_stall_stepdowns",
            "Times this leader gave its Lease up because its hub-events or timer loop stayed stalled.",
            registry=self.registry)
        self.external_metrics_requests = prometheus_client.Counter(
            PREFIX + "external_metrics_requests",
            "Requests to the external.metrics.k8s.io API (--external-metrics-port), by answer code.",
            ["code"], registry=self.registry)
        self.registry.register(Collector(coordinator, writer, watchdog, events))

    def count_external_metrics(self, code: int) -> None:
        """One answer of the external metrics API (`services.metrics_api`)."""
        self.external_metrics_requests.labels(code=str(code)).inc()

    def observe_round(self, result: loop.Round, seconds: float) -> None:
        """One placement round (`facade.Coordinator.on_round`)."""
        self.rounds.inc()
        self.round_seconds.observe(seconds)
        self.placements.inc(len(result.placements))

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """One sample's current value (`fedspread_coordinator_` + `name`), None when absent."""
        return self.registry.get_sample_value(PREFIX + name, dict(labels or {}))
