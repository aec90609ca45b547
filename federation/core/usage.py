"""A spread's pod usage over the whole federation, as the hub's HorizontalPodAutoscaler reads it.

Why: the hub has no pods, so the stock HPA controller on the hub scales a spread's workload from an
`External` metric with an `AverageValue` target, and computes `ceil(sum / target)` from the sum we
serve. Each member's agent reports, per spread, the sums of its Running and Ready pods (usage, and
usage as a percentage of requests); this module turns the members' reports into the five metrics
the coordinator serves (`external.metrics.k8s.io`), with no call to any member on the request path.

Rules (each table-tested):

- Only Running and Ready pods count (the agent counts them; a pod starting up is not measured).
- **Unmeasured is not idle.** A pod the metrics API had no sample for (its member has no metrics
  API, its sample is missing, or its member's report is stale), or, for a utilization, a pod with
  no request of that resource, is left out of the average, not counted as zero: a sum is the
  measured pods' sum scaled by `ready / measured`, so the HPA's `ceil(sum / target)` sees every
  Ready pod at the measured pods' average. Counting them as zero would shrink a service exactly
  when a member's metrics pipeline breaks.
- With no measured pod at all a usage metric has no value (the API returns an empty list, the HPA
  shows `<unknown>` and keeps the replica count): nothing to base a decision on.
- A report older than `stale_after` counts its Ready pods, not its figures, and is named in
  `FederationUsage.stale`. `fedspread-ready-replicas` always has a value (zero with no report).
- The metric's `timestamp` is the oldest sample time that went into it, its `window` the longest
  sampling window: the HPA and a reader see how old the figure is.

Values are integers in thousandths (milli-units), as a Kubernetes quantity is written:
`quantity(450)` is "450m", `quantity(2000)` is "2".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping

from federation.api import names

CPU_UTILIZATION = "fedspread-cpu-utilization"
MEMORY_UTILIZATION = "fedspread-memory-utilization"
CPU_USAGE = "fedspread-cpu-usage"
MEMORY_USAGE = "fedspread-memory-usage"
READY_REPLICAS = "fedspread-ready-replicas"
SERVED_METRICS: tuple[str, ...] = (CPU_UTILIZATION, MEMORY_UTILIZATION, CPU_USAGE, MEMORY_USAGE,
                                   READY_REPLICAS)
"""Every metric name the coordinator serves, in the order the API lists them."""

SPREAD_SELECTOR_LABEL = names.SPREAD_LABEL
"""The metric selector's label: `fedspread.io/spread=<name>` picks a spread in the namespace (the
label the spread's pods carry in the members)."""


@dataclasses.dataclass(frozen=True)
class ClusterUsage:
    """One member's report for one spread: sums over its Running and Ready pods of that spread."""

    cluster: str
    ready_pods: int
    """Running and Ready pods of the spread in the member."""
    measured_pods: int = 0
    """Of those, pods the metrics API had a sample for."""
    cpu_requested_pods: int = 0
    """Of the measured pods, those with a CPU request (their CPU utilization is known)."""
    memory_requested_pods: int = 0
    """Of the measured pods, those with a memory request."""
    cpu_usage_milli: int = 0
    """Summed CPU usage of the measured pods, in millicores."""
    memory_usage_milli: int = 0
    """Summed memory usage of the measured pods, in thousandths of a byte (a quantity's milli)."""
    cpu_utilization_milli: int = 0
    """Sum over `cpu_requested_pods` of usage as a percentage of requests, in thousandths of a percent."""
    memory_utilization_milli: int = 0
    """Sum over `memory_requested_pods` of usage as a percentage of requests, in thousandths."""
    sampled_at: float = 0.0
    """Unix time of the oldest sample in the sums (0: no sample)."""
    window_seconds: float = 0.0
    """The longest sampling window of the samples."""
    received_at: float = 0.0
    """Unix time the coordinator received the report (what `stale_after` is measured from)."""


@dataclasses.dataclass(frozen=True)
class MetricValue:
    """One served metric: its value in milli-units and how old it is."""

    name: str
    milli_value: int
    timestamp: float
    window_seconds: float

    @property
    def quantity(self) -> str:
        """The value as a Kubernetes quantity."""
        return quantity(self.milli_value)


@dataclasses.dataclass(frozen=True)
class FederationUsage:
    """Every metric of one spread that has a value, and the members left out of its figures."""

    values: Mapping[str, MetricValue]
    ready_pods: int
    unmeasured_pods: int
    """Ready pods counted at the measured average (no sample, no metrics API, or a stale report)."""
    without_metrics: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()


def quantity(milli_value: int) -> str:
    """A milli-unit integer as a Kubernetes quantity: whole units without a suffix, else `m`."""
    return str(milli_value // 1000) if milli_value % 1000 == 0 else f"{milli_value}m"


def _scaled(measured_sum: int, *, measured: int, ready: int) -> int | None:
    """The measured pods' sum with every Ready pod counted at their average; None: none measured."""
    if measured <= 0:
        return None
    if measured >= ready:
        return measured_sum
    return (measured_sum * ready + measured // 2) // measured


def federation_usage(
    reports: Iterable[ClusterUsage],
    *,
    without_metrics: Collection[str] = (),
    now: float,
    stale_after: float,
    stale_after_by_cluster: Mapping[str, float] | None = None,
) -> FederationUsage:
    """The spread's metrics from its members' reports.

    `without_metrics` names members whose agent said they have no metrics API: their figures, if
    any, are ignored, their Ready pods count at the measured average. `stale_after_by_cluster`
    gives a member its own limit (its agent's reporting interval decides it), `stale_after` the rest.
    """
    limits = stale_after_by_cluster or {}
    ready = measured = cpu_requested = memory_requested = 0
    cpu_usage = memory_usage = cpu_utilization = memory_utilization = 0
    oldest, window = 0.0, 0.0
    stale: list[str] = []
    missing: list[str] = []
    for report in sorted(reports, key=lambda r: r.cluster):
        ready += report.ready_pods
        if report.cluster in without_metrics:
            missing.append(report.cluster)
            continue
        if now - report.received_at > limits.get(report.cluster, stale_after):
            stale.append(report.cluster)
            continue
        if report.measured_pods <= 0:
            continue
        measured += report.measured_pods
        cpu_requested += report.cpu_requested_pods
        memory_requested += report.memory_requested_pods
        cpu_usage += report.cpu_usage_milli
        memory_usage += report.memory_usage_milli
        cpu_utilization += report.cpu_utilization_milli
        memory_utilization += report.memory_utilization_milli
        oldest = report.sampled_at if oldest == 0.0 else min(oldest, report.sampled_at)
        window = max(window, report.window_seconds)
    figures = {
        CPU_UTILIZATION: _scaled(cpu_utilization, measured=cpu_requested, ready=ready),
        MEMORY_UTILIZATION: _scaled(memory_utilization, measured=memory_requested, ready=ready),
        CPU_USAGE: _scaled(cpu_usage, measured=measured, ready=ready),
        MEMORY_USAGE: _scaled(memory_usage, measured=measured, ready=ready),
    }
    values = {name: MetricValue(name=name, milli_value=value, timestamp=oldest or now,
                                window_seconds=window)
              for name, value in figures.items() if value is not None}
    values[READY_REPLICAS] = MetricValue(name=READY_REPLICAS, milli_value=ready * 1000,
                                         timestamp=now, window_seconds=0.0)
    return FederationUsage(
        values={name: values[name] for name in SERVED_METRICS if name in values},
        ready_pods=ready, unmeasured_pods=max(0, ready - measured),
        without_metrics=tuple(missing), stale=tuple(stale))
