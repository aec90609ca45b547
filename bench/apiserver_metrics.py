"""The member apiserver's own view of a run: its /metrics scraped before and after, as deltas.

Why the apiserver's figures beside our own: the handler times inside each webhook (`webhook_samples`)
and the client times each create, but the apiserver is the party that waits for the webhook — its
`apiserver_admission_webhook_admission_duration_seconds` (labels name, operation, type, rejected)
is the webhook's latency as Kubernetes itself sees it, TLS and connection handling included, and
its `apiserver_request_duration_seconds` for POST pods is the create latency of requests no client
of ours timed (the ReplicaSet controller's). Kubernetes 1.20 serves both; the admin token of the
sandbox's kubeconfig may read /metrics.

Both are cumulative histograms; a run's figures are the bucket-by-bucket difference of the scrapes
taken just before and just after its load (`admission_stats.bucket_delta`), so each run stands on
its own whatever ran before. Only the needed series are parsed, from Prometheus's text format.

What the metrics of 1.20 do not count is a webhook call the apiserver gave up on: with
`failurePolicy: Ignore` (fedspread's) the pod is then created without a subset, silently. The
apiserver logs each such call ("Failed calling webhook, failing open NAME: ..."; "failing closed"
under `Fail`), so `LogWindow` counts those lines in the part of its log a run wrote.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re
from collections.abc import Iterable, Mapping

from bench import admission_stats, rawkube

WEBHOOK_DURATION = "apiserver_admission_webhook_admission_duration_seconds"
REQUEST_DURATION = "apiserver_request_duration_seconds"
REQUEST_TOTAL = "apiserver_request_total"
SCRAPE_TIMEOUT = 30.0

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Labels = Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class Series:
    """One sample line: metric name (with its _bucket/_count suffix), labels, value."""

    name: str
    labels: dict[str, str]
    value: float


def parse(text: str, *, prefixes: Iterable[str]) -> list[Series]:
    """The sample lines of Prometheus's text format whose metric name starts with one of `prefixes`."""
    wanted = tuple(prefixes)
    found = []
    for line in text.splitlines():
        if not line.startswith(wanted):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"] or ""))
        found.append(Series(name=match["name"], labels=labels, value=float(match["value"])))
    return found


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The series of one scrape that the benchmark reads."""

    series: tuple[Series, ...]

    def buckets(self, metric: str, **match: str) -> list[admission_stats.Bucket]:
        """The cumulative buckets of histogram `metric`, summed over every series whose labels
        include `match` (e.g. both `rejected` values of one webhook's CREATE calls)."""
        sums: dict[float, float] = {}
        for item in self.series:
            if item.name == f"{metric}_bucket" and _matches(item.labels, match):
                bound = math.inf if item.labels.get("le") == "+Inf" else float(item.labels["le"])
                sums[bound] = sums.get(bound, 0.0) + item.value
        return sorted(sums.items())

    def total(self, metric: str, **match: str) -> float:
        """The sum of the samples named `metric` whose labels include `match`."""
        return sum(item.value for item in self.series if item.name == metric and _matches(item.labels, match))

    def codes(self, metric: str, **match: str) -> dict[str, float]:
        """Counter `metric` by its `code` label, over the series whose labels include `match`."""
        found: dict[str, float] = {}
        for item in self.series:
            if item.name == metric and _matches(item.labels, match):
                code = item.labels.get("code", "")
                found[code] = found.get(code, 0.0) + item.value
        return found


def _matches(labels: Labels, match: Labels) -> bool:
    return all(labels.get(key) == value for key, value in match.items())


def scrape(api: rawkube.RawApi, *, timeout: float = SCRAPE_TIMEOUT) -> Snapshot:
    """The apiserver's /metrics, the series this benchmark reads."""
    text = api.text("/metrics", timeout=timeout)
    return Snapshot(tuple(parse(text, prefixes=(WEBHOOK_DURATION, REQUEST_DURATION, REQUEST_TOTAL))))


POD_CREATE = {"verb": "POST", "resource": "pods", "subresource": ""}
"""The labels of a pod create in the apiserver's request metrics (bindings are a subresource)."""


def run_figures(before: Snapshot, after: Snapshot, *, webhook: str) -> dict[str, object]:
    """What the apiserver saw between two scrapes: webhook `webhook`'s CREATE calls (count, how many
    it rejected, p50/p99 interpolated in the metric's buckets) and the pod creates (count by HTTP
    code, p50/p99 interpolated likewise)."""
    hook = {"name": webhook, "operation": "CREATE", "type": "admit"}
    calls = admission_stats.bucket_delta(before.buckets(WEBHOOK_DURATION, **hook),
                                         after.buckets(WEBHOOK_DURATION, **hook))
    rejected = (after.total(f"{WEBHOOK_DURATION}_count", rejected="true", **hook)
                - before.total(f"{WEBHOOK_DURATION}_count", rejected="true", **hook))
    creates = admission_stats.bucket_delta(before.buckets(REQUEST_DURATION, **POD_CREATE),
                                           after.buckets(REQUEST_DURATION, **POD_CREATE))
    earlier = before.codes(REQUEST_TOTAL, **POD_CREATE)
    codes = {code: int(count - earlier.get(code, 0.0))
             for code, count in sorted(after.codes(REQUEST_TOTAL, **POD_CREATE).items())}
    return {
        "webhook_calls": int(calls[-1][1]) if calls else 0,
        "webhook_rejected": int(rejected),
        "webhook_p50": admission_stats.quantile_ms(calls, 0.50),
        "webhook_p99": admission_stats.quantile_ms(calls, 0.99),
        "webhook_buckets_s": [bound for bound, _ in calls if not math.isinf(bound)],
        "create_requests": {code: n for code, n in codes.items() if n},
        "create_p50": admission_stats.quantile_ms(creates, 0.50),
        "create_p99": admission_stats.quantile_ms(creates, 0.99),
    }


class LogWindow:
    """The lines an apiserver log gained since this was made (the log is only ever appended to)."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.offset = path.stat().st_size

    def failed_calls(self, webhook: str) -> dict[str, int]:
        """The calls of `webhook` the apiserver gave up on since then: failing open, failing closed."""
        with self.path.open("rb") as log:
            log.seek(self.offset)
            text = log.read().decode(errors="replace")
        return {"webhook_failed_open": text.count(f"failing open {webhook}:"),
                "webhook_failed_closed": text.count(f"failing closed {webhook}:")}
