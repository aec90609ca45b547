"""The federation-wide usage metrics of a spread (federation.core.usage), table-driven."""

from __future__ import annotations

import pytest

from federation.core import usage
from federation.core.usage import ClusterUsage

NOW = 1_000.0


def _report(cluster: str, *, ready: int, measured: int | None = None, cpu_pct: int = 100,
            cpu_milli: int = 500, received: float = NOW - 5, sampled: float = NOW - 10,
            requested: int | None = None) -> ClusterUsage:
    """`measured` pods each using `cpu_milli` millicores, `cpu_pct` percent of their request."""
    measured = ready if measured is None else measured
    requested = measured if requested is None else requested
    return ClusterUsage(
        cluster=cluster, ready_pods=ready, measured_pods=measured, cpu_requested_pods=requested,
        memory_requested_pods=requested, cpu_usage_milli=cpu_milli * measured,
        memory_usage_milli=64 * 2**20 * 1000 * measured, cpu_utilization_milli=cpu_pct * 1000 * requested,
        memory_utilization_milli=50_000 * requested, sampled_at=sampled, window_seconds=15.0,
        received_at=received)


@pytest.mark.parametrize(("reports", "without", "expected"), [
    pytest.param([_report("a", ready=2), _report("b", ready=2)], (),
                 {usage.CPU_UTILIZATION: "400", usage.CPU_USAGE: "2", usage.READY_REPLICAS: "4",
                  usage.MEMORY_UTILIZATION: "200"}, id="every pod measured: plain sums"),
    pytest.param([_report("a", ready=2), _report("b", ready=2, measured=0)], (),
                 {usage.CPU_UTILIZATION: "400", usage.CPU_USAGE: "2", usage.READY_REPLICAS: "4"},
                 id="unsampled pods count at the measured average, not as idle"),
    pytest.param([_report("a", ready=2), _report("b", ready=3, cpu_pct=0, cpu_milli=0)], ("b",),
                 {usage.CPU_UTILIZATION: "500", usage.READY_REPLICAS: "5"},
                 id="a member without a metrics API: its figures ignored, its pods at the average"),
    pytest.param([_report("a", ready=2), _report("b", ready=2, received=NOW - 120, cpu_pct=0)], (),
                 {usage.CPU_UTILIZATION: "400", usage.READY_REPLICAS: "4"},
                 id="a stale report: its pods count, its figures do not"),
    pytest.param([_report("a", ready=2, requested=1)], (),
                 {usage.CPU_UTILIZATION: "200", usage.CPU_USAGE: "1"},
                 id="a pod without a request is left out of the utilization only"),
    pytest.param([_report("a", ready=3, measured=0)], (),
                 {usage.CPU_UTILIZATION: None, usage.CPU_USAGE: None, usage.READY_REPLICAS: "3"},
                 id="nothing measured: no usage value, ready replicas still served"),
    pytest.param([], (), {usage.CPU_UTILIZATION: None, usage.READY_REPLICAS: "0"}, id="no report"),
    pytest.param([_report("a", ready=1, cpu_milli=450, cpu_pct=90)], (),
                 {usage.CPU_USAGE: "450m", usage.CPU_UTILIZATION: "90"}, id="milli quantities"),
])
def test_federation_usage(reports: list[ClusterUsage], without: tuple[str, ...],
                          expected: dict[str, str | None]) -> None:
    figures = usage.federation_usage(reports, without_metrics=without, now=NOW, stale_after=60.0)
    for name, value in expected.items():
        got = figures.values.get(name)
        assert (got.quantity if got else None) == value, name


def test_left_out_members_are_named_and_counted() -> None:
    figures = usage.federation_usage(
        [_report("a", ready=2), _report("b", ready=1), _report("c", ready=4, received=NOW - 61)],
        without_metrics={"b"}, now=NOW, stale_after=60.0)
    assert (figures.without_metrics, figures.stale) == (("b",), ("c",))
    assert (figures.ready_pods, figures.unmeasured_pods) == (7, 5)


def test_timestamp_is_the_oldest_sample_and_window_the_longest() -> None:
    figures = usage.federation_usage(
        [_report("a", ready=1, sampled=NOW - 30), _report("b", ready=1, sampled=NOW - 3)],
        now=NOW, stale_after=60.0)
    value = figures.values[usage.CPU_USAGE]
    assert (value.timestamp, value.window_seconds) == (NOW - 30, 15.0)
    assert list(figures.values) == [n for n in usage.SERVED_METRICS if n in figures.values]


@pytest.mark.parametrize(("milli", "text"), [(0, "0"), (1000, "1"), (450, "450m"), (123_000, "123"),
                                             (1500, "1500m")])
def test_quantity(milli: int, text: str) -> None:
    assert usage.quantity(milli) == text


def test_a_member_can_have_its_own_staleness_limit() -> None:
    reports = [_report("a", ready=1, received=NOW - 50), _report("b", ready=1, received=NOW - 50)]
    figures = usage.federation_usage(reports, now=NOW, stale_after=60.0, stale_after_by_cluster={"b": 40.0})
    assert figures.stale == ("b",)
