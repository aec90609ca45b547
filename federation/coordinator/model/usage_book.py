"""The agents' usage reports, kept in memory for the hub HPA's external metrics.

Why in memory and apart from the World: usage changes every few seconds and places nothing; it is
read on the metrics API's request path, which must never call a member (the stock HPA controller
asks every 15 s per HPA). Each agent's `UsageReport` is complete for its cluster, so receiving one
replaces that cluster's figures; the coordinator's clock stamps them (`received_at`), and a
cluster's figures are stale `STALE_INTERVALS` of its agent's stated interval after that (its agent
refreshes at least every 4 intervals: a member silent for 5 is not a steady one).

What it answers (`usage`): `federation.core.usage.federation_usage` over the reports of a spread,
with the clusters whose agent said it has no metrics API (`without_metrics`) left out of the
figures, not of the Ready pods. A cluster that reports pods of the spread (its pod counts) but no
usage for it — an agent from before usage reports, or a spread newer than its last usage report —
counts its Ready pods unmeasured, never as idle.

Forgetting: a spread deleted from the World and a cluster removed are dropped (`retain`, called
from the failover timer); a spread an agent no longer lists is dropped with its next report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping

from federation.core import usage

STALE_INTERVALS = 5
"""A cluster's figures are stale this many of its agent's intervals after they were received."""
DEFAULT_INTERVAL_SECONDS = 15.0
"""The interval assumed for a cluster that has not reported (the agent's `--usage-interval` default)."""


@dataclasses.dataclass(frozen=True)
class Availability:
    """Whether a member's metrics API answered its agent, as the agent last said."""

    reason: str = ""
    """"" when it answered; otherwise why not (`federation.core.pod_usage.UNAVAILABLE_REASONS`)."""
    message: str = ""

    @property
    def available(self) -> bool:
        return not self.reason


@dataclasses.dataclass(frozen=True)
class Report:
    """One checked UsageReport (`wire.inbound.usage_report`): per spread key, the cluster's sums."""

    interval_seconds: float
    availability: Availability
    spreads: Mapping[str, usage.ClusterUsage]


@dataclasses.dataclass
class _Cluster:
    interval_seconds: float
    availability: Availability
    spreads: dict[str, usage.ClusterUsage]


class UsageBook:
    """Per cluster, its last usage report (not thread-safe: the facade's lock guards it)."""

    def __init__(self) -> None:
        self._clusters: dict[str, _Cluster] = {}

    def receive(self, cluster: str, report: Report, *, now: float) -> bool:
        """Keep `report` as `cluster`'s figures, received at `now` (unix seconds); True when the
        cluster's metrics availability is new or changed (its MemberCluster condition is due)."""
        before = self._clusters.get(cluster)
        self._clusters[cluster] = _Cluster(
            interval_seconds=report.interval_seconds, availability=report.availability,
            spreads={key: dataclasses.replace(figures, cluster=cluster, received_at=now)
                     for key, figures in report.spreads.items()})
        return before is None or before.availability != report.availability

    def availability(self, cluster: str) -> Availability | None:
        """What `cluster`'s agent last said of its metrics API; None: it has not said."""
        found = self._clusters.get(cluster)
        return found.availability if found is not None else None

    def without_metrics(self) -> frozenset[str]:
        """The clusters whose agent says they have no usable metrics API."""
        return frozenset(name for name, found in self._clusters.items() if not found.availability.available)

    def stale_after(self, cluster: str) -> float:
        """Seconds after which `cluster`'s figures are stale."""
        found = self._clusters.get(cluster)
        interval = found.interval_seconds if found is not None else DEFAULT_INTERVAL_SECONDS
        return STALE_INTERVALS * interval

    def usage(self, key: str, *, now: float, ready_elsewhere: Mapping[str, int] | None = None
              ) -> usage.FederationUsage:
        """Spread `key`'s federation-wide figures at `now`. `ready_elsewhere`: Ready pods of the
        spread per cluster from the pod counts, counted unmeasured for a cluster with no usage
        figures for the spread."""
        reports = [found.spreads[key] for found in self._clusters.values() if key in found.spreads]
        reported = {r.cluster for r in reports}
        reports += [usage.ClusterUsage(cluster=name, ready_pods=ready, received_at=now)
                    for name, ready in sorted((ready_elsewhere or {}).items())
                    if name not in reported and ready > 0]
        limits = {r.cluster: self.stale_after(r.cluster) for r in reports}
        return usage.federation_usage(
            reports, without_metrics=self.without_metrics(), now=now,
            stale_after=STALE_INTERVALS * DEFAULT_INTERVAL_SECONDS, stale_after_by_cluster=limits)

    def retain(self, *, live: Callable[[str], bool], clusters: Collection[str]) -> None:
        """Forget removed clusters and the spreads for which `live(key)` is False."""
        for name in set(self._clusters) - set(clusters):
            del self._clusters[name]
        for found in self._clusters.values():
            for key in [k for k in found.spreads if not live(k)]:
                del found.spreads[key]

    def forget_cluster(self, name: str) -> None:
        """Drop what `name` reported (a MemberCluster deleted)."""
        self._clusters.pop(name, None)

    def clusters(self) -> list[str]:
        """The clusters with a report, by name."""
        return sorted(self._clusters)
