"""Admission under load: fedspread's local quota table against Kruise's design and the floor, level by level.

The claim (README, "How it compares"): a webhook that decides from a local quota table answers in
well under a millisecond and lets pods through as fast as the apiserver stores them, where Kruise's
webhook design — one optimistic-lock update of the spread object per pod, behind a per-spread
mutex — serialises every admission on an API write, retries 409s, and falls over as concurrency
grows. A claim like that is only worth the method behind it, so:

* On a sandbox of its own (one member, `bench-1`, three zones of simulated nodes with room for
  every pod; the hub the launcher always starts stays idle), a spread of three subsets capped at
  40/30/30 % of N, each pinned to its zone. Every run creates N + 20 % pods: the caps sum to N, so
  a fifth of the pods must be left without a subset, and `over_cap` counts whether any went over.
* Two kinds of load (`admission_report.Level`): the real ReplicaSet controller scaling a
  Deployment from 0 (`replicaset_load`), and direct creates by 1, 5, 20, 50, 100 and 200
  concurrent clients (`admission_client.burst`), each create timed as the client sees it.
* Modes (`admission_webhooks`): fedspread's agent; the baseline with 2 webhook replicas and with
  1, every replica and its controller a process of its own; the floor, the same creates with no
  webhook at all, against which each webhook's added latency is measured; and at 5 clients the
  agent with a tenth of the interpreter's default switch interval, a candidate change for the
  handler's wait, measured against the agent as it ships.
* Three runs per mode per level, the modes' order rotating from run to run (`admission_report.plan`),
  each run with fresh webhook processes and a cluster emptied of the previous run's pods
  (`admission_webhooks`). A level reports each figure's median run with the smallest and largest.
* Every figure over all samples of a run: the handler's wall p50/p99/p99.9 and CPU p50/p99 over
  every CREATE admission (`webhook_samples`), create p50/p99 over every pod, burst seconds.
  Beside them the apiserver's own `apiserver_admission_webhook_admission_duration_seconds` for the
  mode's webhook and its pod-create request latency, from /metrics scraped before and after the
  load (`apiserver_metrics`; p50/p99 interpolated inside the histogram's buckets).
* A mode collapsed at a level when, in most of its runs, its create p99 passed its webhook's
  registered timeout, a create never succeeded, the apiserver refused creates, or it gave up on a
  webhook call and let the pod in unexamined (its log says so; `failurePolicy: Ignore`); its collapse
  point is the lowest client count where that happened. Ratios are given per level only where
  neither mode's create p99 passed its timeout (refusals are flagged beside them).

Sizes: N = 100 (quick, 120 pods per run) and 500 (full, 600 per run) — 7 levels x 4 modes (5 at
5 clients) x 3 runs is 87 runs, and a collapsed baseline stores ~10 pods/s: the quick size takes
about 35 minutes on 2 shared cores, the full size well over an hour. A load stops taking new pods
after its deadline (the rest are lost, the run incomplete). Nothing here asserts a figure: the
benchmark records.
"""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from bench import admission_client as client
from bench import admission_report as report_mod
from bench import admission_webhooks, apiserver_metrics, rawkube, replicaset_load
from bench import run as runner
from federation.sandbox import launcher

Report = Callable[[str], None]
Json = dict[str, Any]

SUBSETS = (("a", 40), ("b", 30), ("c", 30))
"""Subset (and zone) names with their caps in percent of N."""
LEVELS: tuple[str | int, ...] = ("replicaset", 1, 5, 20, 50, 100, 200)
MODES: tuple[str, ...] = (*report_mod.EVERY_LEVEL, report_mod.AFTER)
"""Every mode; `fedspread-switch-0.5ms` runs only at 5 clients (`admission_report.level_modes`)."""
RUNS = 3


@dataclasses.dataclass(frozen=True)
class Size:
    """N (the caps' sum; each run creates N + 20 %) and how long a load may take."""

    replicas: int
    deadline: float


QUICK, FULL = Size(replicas=100, deadline=90.0), Size(replicas=500, deadline=240.0)


def caps(replicas: int) -> dict[str, int]:
    """Each subset's cap: its share of `replicas`, rounded down, the remainder to the first ones."""
    shares = {name: replicas * percent // 100 for name, percent in SUBSETS}
    for name, _ in SUBSETS[: replicas - sum(shares.values())]:
        shares[name] += 1
    return shares


def pods_per_run(replicas: int) -> int:
    """N + 20 %: a fifth more pods than the caps hold."""
    return replicas + replicas // 5


def one_run(api: rawkube.RawApi, hooks: admission_webhooks.Webhooks, *, level: report_mod.Level, mode: str,
            run: int, order: int, pods: int, deadline: float, apiserver_log: pathlib.Path) -> Json:
    """One run of `mode` at `level` on an empty namespace, which it leaves empty; its row."""
    at_start = runner.load()
    namespace = hooks.namespaces[mode]
    with hooks.serving(mode, f"{level.name}-{run}") as session:
        if level.clients is None and session.scale is None:
            replicaset_load.create(api, namespace)
        before, log = apiserver_metrics.scrape(api), apiserver_metrics.LogWindow(apiserver_log)
        if level.clients is None:
            burst = replicaset_load.scale(api, namespace, replicas=pods, deadline=deadline,
                                          member=session.scale)
        else:
            burst = client.burst(api, namespace, count=pods, workers=level.clients, deadline=deadline)
        after = apiserver_metrics.scrape(api)
        subsets = client.stored_subsets(api, namespace)
        if level.clients is None and session.scale is not None:
            replicaset_load.drain_member(api, namespace, session.scale, deadline=deadline)
    at_end = runner.load()
    recorded = session.recorded
    if recorded is None:
        raise RuntimeError(f"the {mode} webhook recorded nothing")
    row = report_mod.run_row(
        mode=mode, level=level, run=run, order=order, asked=pods, burst=burst,
        handler=recorded.window(operation="CREATE", start=burst.started),
        apiserver={**apiserver_metrics.run_figures(before, after, webhook=session.webhook),
                   **(log.failed_calls(session.webhook) if session.webhook else
                      {"webhook_failed_open": 0, "webhook_failed_closed": 0})},
        subsets=subsets, limits=hooks.limits, timeout_s=session.timeout_s,
        conflicts=session.conflicts(), counters=recorded.counters,
        load={"at_start": at_start, "at_end": at_end})
    replicaset_load.delete_all(api, namespace)
    client.delete_pods(api, namespace)
    return row


def measure(*, size: int, report: Report, directory: pathlib.Path | None = None,
            levels: Sequence[str | int] = LEVELS, runs: int = RUNS, deadline: float = FULL.deadline,
            modes: Sequence[str] = MODES, only: dict[str, Sequence[str]] | None = None) -> Json:
    """The benchmark with caps summing to `size`, on a sandbox of its own (in `directory`, or a
    temporary one) that is stopped before this returns; `modes` must hold fedspread and baseline
    (at every level; `only`: level name -> the modes run there, where it names one)."""
    limits, pods = caps(size), pods_per_run(size)
    chosen = [report_mod.Level.of(spec) for spec in levels]
    order = report_mod.plan(chosen, runs, modes, only)
    clients = max((level.clients or 0 for level in chosen), default=0)
    rows: list[Json] = []
    with tempfile.TemporaryDirectory(prefix="fedspread-bench-admission-") as temporary:
        scratch = pathlib.Path(temporary)
        where = directory or scratch / "sandbox"
        member, profile = admission_webhooks.MEMBER, admission_webhooks.node_groups(limits)
        sandbox = launcher.up(where, members=[member], profiles={member: profile}, report=report)
        try:
            kubeconfig = sandbox.cluster(member).kubeconfig
            log = pathlib.Path(next(c.log for c in sandbox.components if c.name == f"{member}-apiserver"))
            api = rawkube.RawApi(rawkube.api_client(kubeconfig, pool_size=clients + 8))
            hooks = admission_webhooks.Webhooks(api, kubeconfig, scratch, limits=limits)
            hooks.prepare()
            for number, (level, mode, run) in enumerate(order):
                row = one_run(api, hooks, level=level, mode=mode, run=run, order=number, pods=pods,
                              deadline=deadline, apiserver_log=log)
                rows.append(row)
                report(f"{number + 1}/{len(order)} {level.name} {mode} run {run + 1}: {line(row)}")
        finally:
            launcher.down(where, remove=False)
    return report_mod.document(rows, levels=chosen, replicas=size, pods=pods, limits=limits,
                               method=method(levels=chosen, runs=runs, pods=pods, deadline=deadline,
                                             modes=modes))


def method(*, levels: Sequence[report_mod.Level], runs: int, pods: int, deadline: float,
           modes: Sequence[str] = MODES) -> Json:
    """How the figures were made, in the result document."""
    return {
        "levels": [level.name for level in levels], "runs_per_mode_and_level": runs, "modes": list(modes),
        "order": "per level each run takes the modes in an order rotated by one from the previous run's; "
                 "each level starts one further along",
        "pods_per_run": pods, "load_deadline_s": deadline, "client_create_attempts": client.ATTEMPTS,
        "client_retry": f"after a refused create: {client.RETRY_BACKOFF_SECONDS * 1000:g} ms doubling, "
                        f"+ up to {client.RETRY_JITTER:.0%} jitter",
        "baseline_replicas": dict(admission_webhooks.BASELINE_REPLICAS),
        "baseline_processes": "each webhook replica and the controller a process of its own; the replicas "
                              "share one port (SO_REUSEPORT)",
        "floor": "the same load in a namespace no webhook selects; added latency = the mode's create p99 "
                 "minus the floor's, run i against run i",
        "handler_after": f"{report_mod.AFTER}: the agent with a 0.5 ms thread switch interval (CPython's "
                         f"default 5 ms), at {report_mod.HANDLER_WAIT_LEVEL} only; 'before' is fedspread",
        "handler_latency": "inside the webhook's handler, parse to encoded answer; every CREATE admission",
        "create_latency": {"clients": "client side, first request to pod stored, refused attempts retried",
                           "replicaset": "the apiserver's apiserver_request_duration_seconds for POST pods, "
                                         "p50/p99 interpolated inside its buckets"},
        "apiserver_webhook": f"{apiserver_metrics.WEBHOOK_DURATION} of the mode's pod webhook, CREATE, "
                             "delta of scrapes around the load, p50/p99 interpolated inside its buckets",
        "over_timeout": "create p99 above the webhook's registered timeoutSeconds, a create that never "
                        "succeeded, or the load unfinished at its deadline, in most of a level's runs",
        "collapse": "over the timeout, creates refused by the apiserver, or webhook calls it gave up on "
                    "and failed open (its log), in most of a level's runs",
        "ratios": "baseline median / fedspread median per level, only where neither was over the timeout",
    }


def line(row: Json) -> str:
    """One run's result in a line of progress."""
    hook = row["apiserver"].get("webhook_p99") or {}
    bound = "\N{GREATER-THAN OR EQUAL TO}" if hook.get("beyond_last_bucket") else "~"
    return (f"{row['pods_stored']}/{row['pods_asked']} pods in {row['burst_s']:.2f} s, handler p99 "
            f"{row['handler_p99_ms']:.3f} ms (cpu {row['handler_cpu_p99_ms']:.3f}), create p99 "
            f"{row['create_p99_ms']:.0f} ms, apiserver webhook p99 {bound}{hook.get('ms', 0):.0f} ms, "
            f"conflicts {row['conflicts']}, refused {row['create_refused']}, over cap {row['over_cap']}, "
            f"without subset {row['without_subset']}, short of caps {row['subsets_short']}, failed open "
            f"{row['apiserver'].get('webhook_failed_open', 0)}"
            f"{', COLLAPSED' if row['collapsed'] else ''}")


def run(*, quick: bool, report: Callable[[str], None]) -> dict[str, Any]:
    """The admission benchmark: N = 100 (quick) or 500, every level, three runs per mode."""
    size = QUICK if quick else FULL
    return measure(size=size.replicas, report=report, deadline=size.deadline)
