"""Admission under a burst : fedspread's local quota table against Kruise's design.

The claim (README, "How it compares"): a webhook that decides from a local quota table answers in
well under a millisecond and lets a burst of pods through as fast as the apiserver stores them,
where Kruise's webhook design — one optimistic-lock update of the spread object per pod, behind a
per-spread mutex — serialises every admission on an API write and retries 409s.

How it is measured, on a sandbox of its own (one member, `bench-1`, three zones of simulated nodes
with room for every pod; the hub apiserver the launcher always starts stays idle), twice in the
same run:

* a spread of three subsets capped at 40/30/30 % of N (integers), each pinned to one zone;
* (a) fedspread's agent, then (b) Kruise's design, each a webhook process of its own in its own
  namespace, the other one unregistered and its pods gone (`admission_webhooks`);
* the burst: N pods created at once by a pool of client threads (50), each create timed as the
  client sees it (`admission_client`).

Reported per mode: handler p50/p99 (every CREATE admission during the burst, as the webhook's own
handler timed it: parse -> decision -> encoded answer), create p50/p99 (client side, from the first
request to success; a denied create is retried, up to 5 attempts), burst_s (first request to last
pod stored), conflicts (the webhook's 409 retries; fedspread makes no API call to admit) and
over_cap (stored pods whose subset annotation exceeds that subset's cap). `details` says what the
fixed keys cannot: denials, pods left without a subset, the baseline controller's own 409s and
deletion-cost patches, and what the handler's wall time was made of — its CPU time, and how many
admissions the OS preempted (`webhook_samples`): on 2 cores shared with a whole control plane, a
sub-millisecond handler's tail is the scheduler's, and the report should say so rather than hide it.
"""

from __future__ import annotations

import math
import pathlib
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from bench import admission_client, admission_webhooks, baseline_webhook, rawkube
from federation.sandbox import launcher

Report = Callable[[str], None]
Json = dict[str, Any]

SUBSETS = (("a", 40), ("b", 30), ("c", 30))
"""Subset (and zone) names with their caps in percent of N."""
QUICK_REPLICAS, FULL_REPLICAS = 200, 1000
WORKERS = 50
"""Concurrent creates of the burst's client."""


def caps(replicas: int) -> dict[str, int]:
    """Each subset's cap: its share of `replicas`, rounded down, the remainder to the first ones."""
    shares = {name: replicas * percent // 100 for name, percent in SUBSETS}
    for name, _ in SUBSETS[: replicas - sum(shares.values())]:
        shares[name] += 1
    return shares


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def _ms(values: Sequence[float], pct: float) -> float:
    """The `pct` percentile of `values` (seconds) in milliseconds."""
    return round(percentile(values, pct) * 1000, 3)


def summary(mode: admission_webhooks.Mode, limits: dict[str, int]) -> Json:
    """The result keys of one mode (bench/README.md lists them)."""
    wall = [s.seconds for s in mode.handler]
    return {
        "handler_p50_ms": _ms(wall, 50),
        "handler_p99_ms": _ms(wall, 99),
        "create_p50_ms": round(percentile(mode.burst.latencies, 50) * 1000, 1),
        "create_p99_ms": round(percentile(mode.burst.latencies, 99) * 1000, 1),
        "burst_s": round(mode.burst.seconds, 2),
        "conflicts": mode.conflicts,
        "over_cap": admission_client.over_cap(mode.subsets, limits),
    }


def details(mode: admission_webhooks.Mode) -> Json:
    """What the fixed keys leave out: counts behind the percentiles, denials, pods without a subset,
    and what the handler's wall time consisted of (its CPU time; admissions the OS preempted)."""
    calm = [s.seconds for s in mode.handler if not s.preempted]
    return {
        "admissions": len(mode.handler), "pods_stored": len(mode.burst.latencies),
        "create_denied": mode.burst.denied, "pods_lost": mode.burst.lost,
        "without_subset": mode.subsets.get(None, 0),
        "by_subset": {str(k): v for k, v in sorted(mode.subsets.items(), key=lambda kv: str(kv[0])) if k},
        "handler_max_ms": round(max((s.seconds for s in mode.handler), default=0.0) * 1000, 3),
        "handler_cpu_p50_ms": _ms([s.cpu_seconds for s in mode.handler], 50),
        "handler_cpu_p99_ms": _ms([s.cpu_seconds for s in mode.handler], 99),
        "handler_preempted": sum(s.preempted for s in mode.handler),
        "handler_p99_not_preempted_ms": _ms(calm, 99),
        "load_average_at_start": round(mode.burst.load, 2),
        **{k: v for k, v in sorted(mode.counters.items())},
    }


def _ratio(baseline: float, fedspread: float) -> float | None:
    """How many times fedspread's number is below the baseline's (None: fedspread's is 0)."""
    return round(baseline / fedspread, 1) if fedspread > 0 else None


def measure(*, size: int, report: Report, directory: pathlib.Path | None = None,
            workers: int = WORKERS) -> Json:
    """The benchmark at `size` pods on a sandbox of its own (in `directory`, or a temporary one),
    stopped before this returns."""
    limits = caps(size)
    with tempfile.TemporaryDirectory(prefix="fedspread-bench-admission-") as temporary:
        scratch = pathlib.Path(temporary)
        where = directory or scratch / "sandbox"
        member, profile = admission_webhooks.MEMBER, admission_webhooks.node_groups(limits)
        sandbox = launcher.up(where, members=[member], profiles={member: profile}, report=report)
        try:
            kubeconfig = sandbox.cluster(member).kubeconfig
            api = rawkube.RawApi(rawkube.api_client(kubeconfig, pool_size=workers + 8))
            fed = admission_webhooks.run_fedspread(api, kubeconfig, scratch, limits=limits, workers=workers,
                                                   report=report)
            report(f"fedspread: {_line(fed)}")
            base = admission_webhooks.run_baseline(api, kubeconfig, scratch, limits=limits, workers=workers,
                                                   report=report)
            report(f"baseline: {_line(base)}")
        finally:
            launcher.down(where, remove=False)
    fed_summary, base_summary = summary(fed, limits), summary(base, limits)
    return {
        "replicas": size,
        "fedspread": fed_summary,
        "baseline": base_summary,
        "ratios": {"handler_p99": _ratio(base_summary["handler_p99_ms"], fed_summary["handler_p99_ms"]),
                   "burst": _ratio(base_summary["burst_s"], fed_summary["burst_s"])},
        "details": {
            "method": {"caps": limits, "client_threads": workers,
                       "baseline_replicas": baseline_webhook.REPLICAS,
                       "create_latency": "client side: first request to pod stored, denied attempts retried",
                       "handler_latency": "inside the webhook's handler: parse to encoded answer"},
            "fedspread": details(fed), "baseline": details(base)},
    }


def _line(mode: admission_webhooks.Mode) -> str:
    """One mode's result in a line of progress."""
    return (f"{len(mode.burst.latencies)} pods in {mode.burst.seconds:.2f} s, handler p99 "
            f"{_ms([s.seconds for s in mode.handler], 99):.3f} ms, create p99 "
            f"{percentile(mode.burst.latencies, 99) * 1000:.0f} ms, conflicts {mode.conflicts}, "
            f"subsets {dict(mode.subsets)}")


def run(*, quick: bool, report: Callable[[str], None]) -> dict[str, Any]:
    """The admission benchmark: N = 200 (quick) or 1,000 pods, fedspread then the baseline."""
    return measure(size=QUICK_REPLICAS if quick else FULL_REPLICAS, report=report)
