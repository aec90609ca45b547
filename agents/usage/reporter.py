"""The usage reporter: each spread's pod usage here, read from the metrics API and sent to the
coordinator for the hub HPA's external metrics.

Why the agent and not the coordinator reads the metrics: the coordinator answers the hub's
metrics API from memory and never calls a member on the request path; the agent already holds
the spread's pods in its watch cache, so one PodMetrics list per spread per interval is all it
adds to its member's apiserver.

Every `interval` seconds (`--usage-interval`, 15 by default, metrics-server's own resolution),
for each spread the agent enforces: the PodMetrics of the spread's namespace selected by
`fedspread.io/spread=<name>` (the label every pod of the spread carries), summed over the spread's
own pods in the cache — those whose owner chain leads to its member workload, as the pod counts
count — by `federation.core.pod_usage`. The report is complete (every enforced spread), and goes
into the outbox (latest wins, resent after a reconnect) only when a spread's figures or the metrics
API's availability changed, else every `REFRESH_INTERVALS` intervals, so the coordinator can tell
a silent member (stale after 5 intervals) from a steady one.

A member without a metrics API (404, 503, 401/403, no answer: `metrics_api.MetricsUnavailable`) is
said in the report's reason (logged once per change); its spreads' pods are sent unmeasured
(Ready counts only) and the reporter stops asking for the rest of that interval.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
import time
from collections.abc import Mapping, Sequence

from agents import bookkeeping, outbox, owners, runnable
from agents.cache import store as cache_mod
from agents.usage import metrics_api
from federation import clock as clock_mod
from federation.api import names
from federation.core import pod_usage, usage
from federation.rpc import agent_pb2, assignment

LOG = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 15
REFRESH_INTERVALS = 4
"""Without a change, a report still goes out this many intervals after the last."""


@dataclasses.dataclass(frozen=True)
class UsageSettings:
    """What the usage reporter is told (`agents.main.AgentConfig.usage`)."""

    interval_seconds: int = DEFAULT_INTERVAL_SECONDS
    """Seconds between reads of the metrics API (`--usage-interval`)."""


DEFAULT_SETTINGS = UsageSettings()


def _figures(found: usage.ClusterUsage) -> tuple[int, ...]:
    """What "changed" compares: the sums, not the samples' age."""
    return (found.ready_pods, found.measured_pods, found.cpu_requested_pods, found.memory_requested_pods,
            found.cpu_usage_milli, found.memory_usage_milli, found.cpu_utilization_milli,
            found.memory_utilization_milli)


def usage_message(per_spread: Mapping[str, usage.ClusterUsage], *, interval_seconds: int,
                  unavailable: metrics_api.MetricsUnavailable | None,
                  observed_at: datetime.datetime) -> agent_pb2.AgentMessage:
    """A UsageReport of every spread's sums (agent.proto)."""
    report = agent_pb2.UsageReport(
        interval_seconds=interval_seconds,
        metrics_unavailable_reason=unavailable.reason if unavailable is not None else "",
        metrics_unavailable_message=unavailable.message if unavailable is not None else "")
    report.observed_at.FromDatetime(observed_at)
    for key, found in sorted(per_spread.items()):
        item = report.spreads.add(
            spread=key, ready_pods=found.ready_pods, measured_pods=found.measured_pods,
            cpu_requested_pods=found.cpu_requested_pods, memory_requested_pods=found.memory_requested_pods,
            cpu_usage_milli=found.cpu_usage_milli, memory_usage_milli=found.memory_usage_milli,
            cpu_utilization_milli=found.cpu_utilization_milli,
            memory_utilization_milli=found.memory_utilization_milli,
            window_milliseconds=round(found.window_seconds * 1000))
        if found.sampled_at:
            item.sampled_at.FromDatetime(datetime.datetime.fromtimestamp(found.sampled_at, tz=datetime.UTC))
    return agent_pb2.AgentMessage(usage=report)


class UsageReporter:
    """Puts the member's UsageReport into the outbox (an `agents.runnable.Runnable`; not critical:
    it only talks to the coordinator)."""

    name = "usage"
    critical = False

    def __init__(self, cluster: str, books: bookkeeping.Bookkeeping, cache: cache_mod.Cache,
                 box: outbox.ReportOutbox, reader: metrics_api.PodMetricsReader, *,
                 settings: UsageSettings = DEFAULT_SETTINGS,
                 clock: clock_mod.Clock = clock_mod.utcnow) -> None:
        self._cluster = cluster
        self._books = books
        self._cache = cache
        self._outbox = box
        self._reader = reader
        self.interval_seconds = settings.interval_seconds
        self._clock = clock
        self._sent: tuple[dict[str, tuple[int, ...]], str] | None = None
        self._last_sent = float("-inf")
        self._said = ""
        """The unavailability reason last logged ("": available)."""

    @property
    def period(self) -> float:
        """The watchdog's period: one read of the metrics API per interval."""
        return float(self.interval_seconds)

    def measure(self, current: Sequence[assignment.Assignment]) -> tuple[
            dict[str, usage.ClusterUsage], metrics_api.MetricsUnavailable | None]:
        """Each spread's sums now, and why the metrics API could not be read (None: it could)."""
        unavailable: metrics_api.MetricsUnavailable | None = None
        found: dict[str, usage.ClusterUsage] = {}
        for value in current:
            pods = self._pods(value)
            sampled: dict[str, pod_usage.PodSample] = {}
            if unavailable is None and any(p.phase == pod_usage.RUNNING and p.ready for p in pods):
                try:
                    sampled = pod_usage.samples(self._reader.list(
                        value.namespace, f"{names.SPREAD_LABEL}={value.name}"))
                except metrics_api.MetricsUnavailable as error:
                    unavailable = error
            found[value.spread] = pod_usage.cluster_usage(self._cluster, pods, sampled,
                                                          measured=unavailable is None)
        return found, unavailable

    def _pods(self, value: assignment.Assignment) -> list[pod_usage.PodState]:
        """The spread's own pods (owner chain to its member workload), with their requests."""
        view = self._cache.member_workload(value.kind, value.namespace, value.workload)
        chain = owners.controllers(value, view, self._cache.replicasets_of)
        found = []
        for pod in owners.owned(self._cache.spread_pods(value.spread), chain):
            record = pod.record
            requests = self._cache.pod_requests(pod.namespace, record.name)
            found.append(pod_usage.PodState(name=record.name, phase=record.phase, ready=record.ready,
                                            requests=requests or {}))
        return found

    def report_once(self) -> bool:
        """Measure, and put a report when something changed or the refresh is due; True if put."""
        current = self._books.assignments()
        found, unavailable = self.measure(current)
        reason = unavailable.reason if unavailable is not None else ""
        if reason != self._said:
            if unavailable is not None:
                LOG.warning("no usable metrics API: the spreads' pods are reported unmeasured",
                            extra={"reason": reason, "error": unavailable.message})
            else:
                LOG.info("metrics API available again")
            self._said = reason
        summary = ({key: _figures(f) for key, f in found.items()}, reason)
        now = time.monotonic()
        if summary == self._sent and now - self._last_sent < REFRESH_INTERVALS * self.interval_seconds:
            return False
        self._outbox.put_usage(usage_message(found, interval_seconds=self.interval_seconds,
                                             unavailable=unavailable, observed_at=self._clock()))
        self._sent, self._last_sent = summary, now
        return True

    def run(self, stop: threading.Event, beat: runnable.Beat) -> None:
        """Report every interval until `stop`; `beat` every turn (the watchdog's heartbeat)."""
        while not stop.is_set():
            beat()
            if self._cache.synced:
                try:
                    self.report_once()
                except Exception as error:  # a malformed object must not end the loop
                    LOG.warning("usage report failed", extra={"error": str(error)[:300]})
            if stop.wait(self.interval_seconds):
                break
