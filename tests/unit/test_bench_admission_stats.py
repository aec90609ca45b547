"""The admission benchmark's arithmetic (`bench/admission_stats.py`, `bench/admission_report.py`).

Why: these rules decide what every admission figure means — a p99 over every sample, not a
flattering subset; a quantile read from the apiserver's buckets as Prometheus reads it; the median
of three runs with its spread, not the best; a ratio only where no run of either mode collapsed. A
benchmark runs rarely and slowly, so the rules are held here, on hand-made numbers.
"""

from __future__ import annotations

import ast
import math
import pathlib
import re
from typing import Any

import pytest
from admission_rows import LIMITS
from admission_rows import row as _row

from bench import admission_report as report
from bench import admission_stats as stats

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"


def test_percentiles_are_nearest_rank_over_every_sample() -> None:
    values = [float(v) for v in range(1, 1001)]  # 1..1000
    assert stats.percentile(values, 50) == 500
    assert stats.percentile(values, 99) == 990
    assert stats.percentile(values, 99.9) == 999
    assert stats.percentile(list(reversed(values)), 99) == 990, "order does not matter"
    assert stats.percentile([], 99) == 0.0
    tail = [0.001] * 98 + [0.5, 0.9]  # two slow admissions of 100 are above the p98
    assert stats.percentile(tail, 99) == 0.5 and stats.milliseconds(tail, 99) == 500.0


PERCENTILE_NAME = re.compile(r"percentile|quantile|p50|p99", re.IGNORECASE)
"""Names of functions that compute a percentile (or wrap one)."""


def _percentile_functions() -> dict[str, ast.FunctionDef]:
    """Every function of a bench/ module, outside admission_stats, whose name says it computes a
    percentile."""
    found = {}
    for path in sorted(BENCH.glob("*.py")):
        if path.stem == "admission_stats":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and PERCENTILE_NAME.search(node.name):
                found[f"{path.stem}.{node.name}"] = node
    return found


def test_every_benchmark_takes_its_percentiles_from_the_one_definition() -> None:
    functions = _percentile_functions()
    assert "autoscaling.percentiles" in functions, "the scan sees the wrappers it must judge"
    for name, function in functions.items():
        called = {n.attr for n in ast.walk(function) if isinstance(n, ast.Attribute)
                  and isinstance(n.value, ast.Name) and n.value.id in {"admission_stats", "stats"}}
        assert called & {"percentile", "milliseconds"}, (
            f"bench/{name} computes a percentile of its own; use admission_stats.percentile")
    from bench import autoscaling

    eight = [float(v) for v in (8, 1, 7, 2, 6, 3, 5, 4)]
    assert autoscaling.percentiles(eight) == {"n": 8, "p50": 4.5, "p99": 8.0, "min": 1.0, "max": 8.0}, (
        "p99 by nearest rank; p50 the median, as the committed runs report it")
    assert autoscaling.percentiles([]) == {"n": 0}


def test_histogram_quantiles_interpolate_inside_the_bucket() -> None:
    # the apiserver's webhook buckets: 10 calls <= 5 ms, 80 more <= 25 ms, 10 more <= 100 ms
    buckets = [(0.005, 10.0), (0.025, 90.0), (0.1, 100.0), (0.5, 100.0), (2.5, 100.0), (math.inf, 100.0)]
    p50 = stats.histogram_quantile(buckets, 0.5)
    assert p50 is not None and p50.seconds == pytest.approx(0.005 + 0.020 * 40 / 80) and not p50.beyond
    p99 = stats.histogram_quantile(buckets, 0.99)
    assert p99 is not None and p99.seconds == pytest.approx(0.025 + 0.075 * 9 / 10)
    first = stats.histogram_quantile(buckets, 0.05)
    assert first is not None and first.seconds == pytest.approx(0.0025), "the first bucket starts at 0"
    assert stats.histogram_quantile([(0.1, 0.0), (math.inf, 0.0)], 0.5) is None


def test_a_quantile_above_the_last_finite_bucket_is_only_a_lower_bound() -> None:
    buckets = [(0.5, 50.0), (2.5, 90.0), (math.inf, 100.0)]
    p99 = stats.histogram_quantile(buckets, 0.99)
    assert p99 == stats.Quantile(seconds=2.5, beyond=True)
    assert stats.quantile_ms(buckets, 0.99) == {"ms": 2500.0, "beyond_last_bucket": True}


def test_a_run_is_the_difference_of_the_scrapes_around_it() -> None:
    before = [(0.005, 3.0), (0.025, 5.0), (math.inf, 5.0)]
    after = [(0.005, 13.0), (0.025, 95.0), (0.1, 105.0), (math.inf, 105.0)]  # a bucket first seen now
    assert stats.bucket_delta(before, after) == [(0.005, 10.0), (0.025, 90.0), (0.1, 105.0),
                                                 (math.inf, 100.0)]


def test_runs_give_the_median_with_its_spread_not_the_best() -> None:
    assert stats.spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert stats.spread([5.0]) == {"median": 5.0, "min": 5.0, "max": 5.0}
    assert stats.median_index([9.0, 1.0, 4.0]) == 2
    with pytest.raises(ValueError):
        stats.spread([])


def test_a_run_is_over_the_timeout_past_it_or_when_a_create_never_succeeds() -> None:
    assert stats.over_timeout(create_p99_s=9.9, timeout_s=10, lost=0, completed=True) == []
    assert stats.over_timeout(create_p99_s=10.5, timeout_s=10, lost=0, completed=True)
    assert stats.over_timeout(create_p99_s=0.1, timeout_s=10, lost=1, completed=True)
    assert stats.over_timeout(create_p99_s=0.1, timeout_s=10, lost=0, completed=False)
    assert stats.majority([True, True, False]) and not stats.majority([True, False, False])


def test_a_run_collapses_over_the_timeout_or_when_creates_are_refused() -> None:
    assert stats.run_collapse(create_p99_s=9.9, timeout_s=10, lost=0, completed=True, refused=0) == []
    assert stats.run_collapse(create_p99_s=0.1, timeout_s=10, lost=0, completed=True, refused=3) == [
        "3 create attempts refused"]
    assert stats.run_collapse(create_p99_s=11, timeout_s=10, lost=0, completed=True, refused=0)
    assert stats.run_collapse(create_p99_s=0.1, timeout_s=2, lost=0, completed=True, refused=0,
                              failed_open=1) == ["1 webhook calls timed out and failed open"]


def test_the_collapse_point_is_the_lowest_collapsed_concurrency() -> None:
    assert stats.collapse_point({1: False, 5: False, 20: True, 50: True}) == 20
    assert stats.collapse_point({1: False, 50: True, 5: True}) == 5
    assert stats.collapse_point({1: False, 5: False}) is None


@pytest.mark.parametrize(("baseline_collapsed_runs", "fedspread_collapsed_runs", "expected"), [
    (0, 0, 10.0),   # both healthy in every run: the only level a ratio means something
    (3, 0, None),   # the baseline collapsed in every run (refusing creates, say) even under its timeout
    (1, 0, None),   # one collapsed run of three is enough: its p99 is a failure's, not a cost's
    (0, 1, None),   # fedspread's own collapse hides the ratio too
    (2, 3, None),
])
def test_a_ratio_only_where_no_run_of_either_mode_collapsed(
        baseline_collapsed_runs: int, fedspread_collapsed_runs: int, expected: float | None) -> None:
    assert stats.level_ratio(100.0, 10.0, baseline_collapsed_runs=baseline_collapsed_runs,
                             fedspread_collapsed_runs=fedspread_collapsed_runs) == expected
    assert stats.ratio(1.0, 0.0) is None


@pytest.mark.parametrize(("collapsed_runs", "expected"), [
    ({1: 0, 5: 0, 20: 0}, None),
    ({1: 0, 5: 3, 20: 3}, 5),
    ({1: 0, 5: 0, 20: 1, 50: 3}, 20),   # one run of three sets the point (the majority rule would say 50)
    ({50: 1, 1: 2, 5: 0}, 1),
])
def test_the_any_run_collapse_point_is_the_lowest_level_with_a_collapsed_run(
        collapsed_runs: dict[int, int], expected: int | None) -> None:
    assert stats.any_collapse_point(collapsed_runs) == expected


def test_the_modes_alternate_in_swapped_pairs_and_levels_start_alternately() -> None:
    levels = [report.Level.of("replicaset"), report.Level.of(5)]
    order = [(level.name, mode[0]) for level, mode, _ in report.plan(levels, 3)]
    assert [m for name, m in order if name == "replicaset"] == list("fbbffb")
    assert [m for name, m in order if name == "clients-5"] == list("bffbbf")
    assert report.Level.of(5) == report.Level("clients-5", clients=5)


def test_the_document_reports_medians_spreads_and_the_worst_over_cap() -> None:
    rows = [_row("fedspread", 0, create=30, handler=0.5),
            _row("fedspread", 1, create=20, handler=0.9, over=1),
            _row("fedspread", 2, create=40, handler=0.7),
            _row("baseline", 0, create=300, handler=40), _row("baseline", 1, create=200, handler=20),
            _row("baseline", 2, create=12000, handler=30)]
    found = report.document(rows, levels=[report.Level.of(5)], replicas=10, pods=12,
                            limits=LIMITS, method={})
    level = found["levels"]["clients-5"]
    assert level["fedspread"]["create_p99_ms"] == {"median": 30.0, "min": 20.0, "max": 40.0}
    assert level["baseline"]["collapsed_runs"] == 1
    assert not level["baseline"]["collapsed"], "one run of three is no majority"
    assert level["ratios"]["create_p99_ms"] is None and not level["ratios"]["compared"], (
        "one collapsed run of the baseline is enough to withhold the ratio")
    assert found["fedspread"]["handler_p99_ms"] == 0.7 and found["fedspread"]["over_cap"] == 1
    assert set(found["fedspread"]) == {"handler_p50_ms", "handler_p99_ms", "create_p50_ms", "create_p99_ms",
                                       "burst_s", "conflicts", "over_cap"}
    assert found["goals"]["handler_p99_5_clients_ms"]["met"] is True
    assert found["goals"]["create_p99_ratio"]["met"] is None, "nothing comparable is not a goal met"
    assert found["goals"]["fedspread_over_cap"]["met"] is False
    assert found["collapse"]["baseline"]["clients"] is None
    assert found["collapse"]["baseline"]["any_run_clients"] == 5


def test_a_collapsed_baseline_gets_no_ratio_and_a_collapse_point() -> None:
    rows = [_row("fedspread", r, create=30, handler=0.5) for r in range(3)]
    rows += [_row("baseline", r, create=12000, handler=40) for r in range(3)]
    found = report.document(rows, levels=[report.Level.of(5)], replicas=10, pods=12,
                            limits=LIMITS, method={})
    assert found["levels"]["clients-5"]["ratios"] == {"create_p99_ms": None, "handler_p99_ms": None,
                                                      "burst_s": None, "compared": False,
                                                      "baseline_refusing": False}
    assert found["collapse"] == {
        "fedspread": {"clients": None, "levels_tried": [5], "any_run_clients": None,
                      "replicaset_collapsed": None, "replicaset_collapsed_runs": None},
        "baseline": {"clients": 5, "levels_tried": [5], "any_run_clients": 5,
                     "replicaset_collapsed": None, "replicaset_collapsed_runs": None}}
    assert found["goals"]["create_p99_ratio"]["met"] is None, "nothing to compare is not a goal met"


_HOOK = "apiserver_admission_webhook_admission_duration_seconds"
_POST = 'component="apiserver",resource="pods",verb="POST"'
METRICS = "\n".join([
    f"# TYPE {_HOOK} histogram",
    f'{_HOOK}_bucket{{name="pods.a",operation="CREATE",rejected="false",type="admit",le="0.005"}} 4',
    f'{_HOOK}_bucket{{name="pods.a",operation="CREATE",rejected="false",type="admit",le="+Inf"}} 9',
    f'{_HOOK}_bucket{{name="pods.a",operation="CREATE",rejected="true",type="admit",le="0.005"}} 0',
    f'{_HOOK}_bucket{{name="pods.a",operation="CREATE",rejected="true",type="admit",le="+Inf"}} 1',
    f'{_HOOK}_count{{name="pods.a",operation="CREATE",rejected="true",type="admit"}} 1',
    f'{_HOOK}_bucket{{name="pods.b",operation="CREATE",rejected="false",type="admit",le="+Inf"}} 7',
    f'apiserver_request_total{{code="201",{_POST},subresource=""}} 12',
    f'apiserver_request_total{{code="500",{_POST},subresource=""}} 2',
    f'apiserver_request_total{{code="201",{_POST},subresource="binding"}} 9',
])


def test_the_apiserver_metrics_are_read_per_webhook_and_summed_over_rejected() -> None:
    from bench import apiserver_metrics

    snapshot = apiserver_metrics.Snapshot(tuple(apiserver_metrics.parse(
        METRICS, prefixes=(apiserver_metrics.WEBHOOK_DURATION, apiserver_metrics.REQUEST_TOTAL))))
    hook = apiserver_metrics.WEBHOOK_DURATION
    assert snapshot.buckets(hook, name="pods.a", operation="CREATE") == [(0.005, 4.0), (math.inf, 10.0)]
    assert snapshot.total(f"{hook}_count", name="pods.a", rejected="true") == 1
    assert snapshot.codes(apiserver_metrics.REQUEST_TOTAL, **apiserver_metrics.POD_CREATE) == {
        "201": 12.0, "500": 2.0}, "bindings are a subresource, not creates"


def test_a_baseline_refusing_creates_under_its_timeout_has_collapsed_and_gets_no_ratio() -> None:
    rows = [_row("fedspread", r, create=30, handler=0.5) for r in range(3)]
    rows += [_row("baseline", r, create=600, handler=40, refused=5 if r else 0) for r in range(3)]
    found = report.document(rows, levels=[report.Level.of(5)], replicas=10, pods=12,
                            limits=LIMITS, method={})
    level = found["levels"]["clients-5"]
    assert level["baseline"]["collapsed"] and level["baseline"]["refusing"]
    assert not level["baseline"]["over_timeout"], "under its timeout, yet refusing creates"
    assert level["ratios"]["create_p99_ms"] is None and level["ratios"]["baseline_refusing"]
    assert found["goals"]["create_p99_ratio"]["met"] is None
    assert found["collapse"]["baseline"]["clients"] == 5


def test_the_apiserver_log_counts_the_calls_it_gave_up_on_since_the_window_opened(tmp_path: Any) -> None:
    from bench import apiserver_metrics

    log = tmp_path / "apiserver.log"
    log.write_text("W1 dispatcher.go:170] Failed calling webhook, failing open pods.a: old\n")
    window = apiserver_metrics.LogWindow(log)
    with log.open("a") as sink:
        sink.write("W2 dispatcher.go:170] Failed calling webhook, failing open pods.a: context deadline\n")
        sink.write("W3 dispatcher.go:170] Failed calling webhook, failing closed pods.b: timeout\n")
    assert window.failed_calls("pods.a") == {"webhook_failed_open": 1, "webhook_failed_closed": 0}
    assert window.failed_calls("pods.b") == {"webhook_failed_open": 0, "webhook_failed_closed": 1}
