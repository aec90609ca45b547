"""One member's usage sums for one spread, from its pods and the metrics API's PodMetrics.

Why pure and here: the agent reads pods from its watch cache and PodMetrics from its cluster's
`metrics.k8s.io` API; what counts and how is a rule the hub HPA's figures depend on, so it is
table-tested without a cluster. The result is the `federation.core.usage.ClusterUsage` the agent
reports and the coordinator sums over members.

Rules:

- Only Running and Ready pods count (`ready_pods`); a pod starting up or shutting down is not.
- A counted pod with no PodMetrics sample is not measured (it counts at the measured average on
  the coordinator, never as idle). A sample whose containers' usage cannot be read is no sample.
- Utilization, as the HPA computes it: per pod, 100 x usage / requests, each summed over the
  pod's containers (init containers are not running and are not counted). A measured pod
  without a request of a resource (its containers' requests sum to zero) is left out of that
  resource's utilization, not of its usage.
- The sums' age: `sampled_at` is the oldest sample's timestamp, `window_seconds` the longest
  sampling window.
"""

from __future__ import annotations

import dataclasses
import datetime
import fractions
import re
from collections.abc import Iterable, Mapping
from typing import Any

from federation.api import quantity
from federation.core import usage

CPU, MEMORY = "cpu", "memory"
RUNNING = "Running"

# Why a member has no usable metrics API: the MemberCluster condition's reasons (`MetricsAvailable`).
METRICS_API_NOT_FOUND = "MetricsAPINotFound"
"""The apiserver does not serve `metrics.k8s.io` (404: no metrics-server, no APIService)."""
METRICS_API_UNAVAILABLE = "MetricsAPIUnavailable"
"""The APIService exists but its backend does not answer (503 and other server errors)."""
METRICS_API_FORBIDDEN = "MetricsAPIForbidden"
"""The agent may not read PodMetrics (401/403: its RBAC lacks `metrics.k8s.io` pods)."""
METRICS_API_UNREACHABLE = "MetricsAPIUnreachable"
"""No answer at all (connection refused, reset, or the call's deadline passed)."""
UNAVAILABLE_REASONS = frozenset({METRICS_API_NOT_FOUND, METRICS_API_UNAVAILABLE, METRICS_API_FORBIDDEN,
                                 METRICS_API_UNREACHABLE})
METRICS_API_AVAILABLE = "MetricsAPIAvailable"
"""The True condition's reason: the agent read PodMetrics."""

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?"
                       r"(?:(\d+(?:\.\d+)?)ms)?$")


@dataclasses.dataclass(frozen=True)
class PodState:
    """What the sums need of one pod of the spread (from the agent's cache)."""

    name: str
    phase: str
    ready: bool
    requests: Mapping[str, fractions.Fraction] = dataclasses.field(default_factory=dict)
    """The pod's containers' requests, summed per resource (`container_requests`)."""


@dataclasses.dataclass(frozen=True)
class PodSample:
    """One PodMetrics item: the pod's usage summed over its containers, and when it was measured."""

    name: str
    cpu: fractions.Fraction
    """Cores."""
    memory: fractions.Fraction
    """Bytes."""
    timestamp: float
    """Unix time of the sample (the end of its window)."""
    window_seconds: float


def container_requests(spec: Mapping[str, Any]) -> dict[str, fractions.Fraction]:
    """A pod spec's containers' requests summed per resource (unreadable quantities: ValueError)."""
    found: dict[str, fractions.Fraction] = {}
    for container in spec.get("containers") or ():
        requests = ((container or {}).get("resources") or {}).get("requests") or {}
        for resource, amount in requests.items():
            found[resource] = found.get(resource, fractions.Fraction(0)) + quantity.parse_quantity(amount)
    return found


def duration_seconds(text: Any) -> float:
    """A Go duration as the metrics API writes a window ("15s", "1m0s", "500ms"); ValueError else."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    match = _DURATION.match(str(text)) if text else None
    if match is None or not any(match.groups()):
        raise ValueError(f"not a duration: {text!r}")
    hours, minutes, seconds, millis = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds + millis / 1000


def pod_sample(item: Mapping[str, Any]) -> PodSample:
    """One PodMetrics item of the metrics API's list (ValueError when it cannot be read)."""
    meta = item.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("PodMetrics without a name")
    cpu, memory = fractions.Fraction(0), fractions.Fraction(0)
    for container in item.get("containers") or ():
        used = (container or {}).get("usage") or {}
        cpu += quantity.parse_quantity(used.get(CPU, 0))
        memory += quantity.parse_quantity(used.get(MEMORY, 0))
    when = item.get("timestamp")
    try:
        stamp = datetime.datetime.fromisoformat(str(when).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"PodMetrics {name}: unreadable timestamp {when!r}") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.UTC)
    return PodSample(name=name, cpu=cpu, memory=memory, timestamp=stamp.timestamp(),
                     window_seconds=duration_seconds(item.get("window") or 0))


def samples(items: Iterable[Mapping[str, Any]]) -> dict[str, PodSample]:
    """The readable samples of a PodMetrics list by pod name (an unreadable one is no sample)."""
    found: dict[str, PodSample] = {}
    for item in items:
        try:
            sample = pod_sample(item)
        except (ValueError, TypeError, AttributeError):
            continue
        found[sample.name] = sample
    return found


def _milli(amount: fractions.Fraction) -> int:
    """An amount in thousandths, rounded half up."""
    return int(amount * 1000 + fractions.Fraction(1, 2))


def cluster_usage(cluster: str, pods: Iterable[PodState], sampled: Mapping[str, PodSample], *,
                  measured: bool = True) -> usage.ClusterUsage:
    """The spread's sums in `cluster` (module docstring); `measured=False` (no metrics API): ready
    counts only, whatever `sampled` holds."""
    ready = count = cpu_requested = memory_requested = 0
    cpu = memory = cpu_pct = memory_pct = fractions.Fraction(0)
    oldest, window = 0.0, 0.0
    for pod in pods:
        if pod.phase != RUNNING or not pod.ready:
            continue
        ready += 1
        sample = sampled.get(pod.name) if measured else None
        if sample is None:
            continue
        count += 1
        cpu += sample.cpu
        memory += sample.memory
        oldest = sample.timestamp if oldest == 0.0 else min(oldest, sample.timestamp)
        window = max(window, sample.window_seconds)
        cpu_request, memory_request = pod.requests.get(CPU, 0), pod.requests.get(MEMORY, 0)
        if cpu_request > 0:
            cpu_requested += 1
            cpu_pct += 100 * sample.cpu / cpu_request
        if memory_request > 0:
            memory_requested += 1
            memory_pct += 100 * sample.memory / memory_request
    return usage.ClusterUsage(
        cluster=cluster, ready_pods=ready, measured_pods=count, cpu_requested_pods=cpu_requested,
        memory_requested_pods=memory_requested, cpu_usage_milli=_milli(cpu),
        memory_usage_milli=_milli(memory),
        cpu_utilization_milli=_milli(cpu_pct), memory_utilization_milli=_milli(memory_pct),
        sampled_at=oldest, window_seconds=window)
