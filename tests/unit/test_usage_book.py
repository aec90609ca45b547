"""The coordinator's usage reports (model.usage_book) and the facade receiving UsageReports.

Table-driven over the book's rules (replace per cluster, staleness from the agent's interval,
members without a metrics API, pod counts standing in, forgetting); the facade through its
`receive` and `usage`, bad reports refused with ValueError like every other kind.
"""

from __future__ import annotations

import datetime

import pytest

from federation.coordinator import facade
from federation.coordinator.model import usage_book, world
from federation.coordinator.model.usage_book import Availability, Report, UsageBook
from federation.coordinator.services import source
from federation.coordinator.wire import convert, inbound
from federation.core import status, usage
from federation.core.usage import ClusterUsage
from federation.rpc import agent_pb2
from federation.sdk import types
from tests.support import builders
from tests.support.clock import ManualClock

KEY = "shop/web"
NOW = 10_000.0
SERVED = Availability()
NO_API = Availability(reason="MetricsAPINotFound", message="metrics.k8s.io not served (404)")


def _figures(ready: int, *, measured: int | None = None, cpu_pct: int = 80) -> ClusterUsage:
    measured = ready if measured is None else measured
    return ClusterUsage(cluster="", ready_pods=ready, measured_pods=measured, cpu_requested_pods=measured,
                        memory_requested_pods=measured, cpu_usage_milli=400 * measured,
                        cpu_utilization_milli=cpu_pct * 1000 * measured, sampled_at=NOW - 20,
                        window_seconds=15.0)


def _report(*spreads: tuple[str, ClusterUsage], interval: float = 15.0,
            availability: Availability = SERVED) -> Report:
    return Report(interval_seconds=interval, availability=availability, spreads=dict(spreads))


Step = tuple[str, Report, float]
"""(cluster, report, received at)."""


@pytest.mark.parametrize(("steps", "ready_elsewhere", "expected"), [
    pytest.param([("a", _report((KEY, _figures(2))), NOW - 5), ("b", _report((KEY, _figures(2))), NOW - 5)],
                 {}, {"cpu": "320", "ready": 4, "stale": (), "without": ()}, id="two members measured"),
    pytest.param([("a", _report((KEY, _figures(2))), NOW - 100),
                  ("a", _report((KEY, _figures(3, cpu_pct=50))), NOW - 5)],
                 {}, {"cpu": "150", "ready": 3}, id="a cluster's new report replaces its last"),
    pytest.param([("a", _report((KEY, _figures(2))), NOW - 5),
                  ("b", _report((KEY, _figures(2, cpu_pct=10)), interval=10), NOW - 51)],
                 {}, {"cpu": "320", "ready": 4, "stale": ("b",)},
                 id="stale after 5 of the agent's own intervals: pods count, figures do not"),
    pytest.param([("a", _report((KEY, _figures(2))), NOW - 5),
                  ("b", _report((KEY, _figures(2, cpu_pct=10)), interval=30), NOW - 120)],
                 {}, {"cpu": "180", "stale": ()}, id="a longer interval is fresh longer"),
    pytest.param([("a", _report((KEY, _figures(2))), NOW - 5),
                  ("b", _report((KEY, _figures(3, measured=0)), availability=NO_API), NOW - 5)],
                 {}, {"cpu": "400", "ready": 5, "without": ("b",)},
                 id="a member without a metrics API: its pods at the measured average"),
    pytest.param([("a", _report((KEY, _figures(2))), NOW - 5)], {"a": 7, "old": 2},
                 {"cpu": "320", "ready": 4},
                 id="a member reporting pods but no usage counts them unmeasured"),
    pytest.param([("a", _report(("shop/other", _figures(2))), NOW - 5)], {},
                 {"cpu": None, "ready": 0}, id="another spread's figures"),
    pytest.param([("b", _report((KEY, _figures(1)), availability=NO_API), NOW - 5)], {},
                 {"cpu": None, "ready": 1, "without": ("b",)}, id="no member measured: no usage value"),
])
def test_usage_book(steps: list[Step], ready_elsewhere: dict[str, int], expected: dict[str, object]) -> None:
    book = UsageBook()
    for cluster, report, at in steps:
        book.receive(cluster, report, now=at)
    found = book.usage(KEY, now=NOW, ready_elsewhere=ready_elsewhere)
    value = found.values.get(usage.CPU_UTILIZATION)
    checks = {"cpu": value.quantity if value else None, "ready": found.ready_pods, "stale": found.stale,
              "without": found.without_metrics}
    for name, wanted in expected.items():
        assert checks[name] == wanted, name


def test_availability_changes_are_told_once() -> None:
    book = UsageBook()
    assert book.availability("a") is None
    assert book.receive("a", _report(availability=NO_API), now=NOW) is True
    assert book.receive("a", _report(availability=NO_API), now=NOW + 15) is False
    assert book.without_metrics() == {"a"}
    assert book.receive("a", _report(), now=NOW + 30) is True
    assert book.availability("a") == Availability() and book.without_metrics() == frozenset()


def test_deleted_spreads_and_removed_clusters_are_forgotten() -> None:
    book = UsageBook()
    book.receive("a", _report((KEY, _figures(2)), ("shop/gone", _figures(1))), now=NOW)
    book.receive("b", _report((KEY, _figures(1))), now=NOW)
    book.retain(live=lambda key: key == KEY, clusters=["a"])
    assert book.clusters() == ["a"]
    assert book.usage("shop/gone", now=NOW).ready_pods == 0
    assert book.usage(KEY, now=NOW).ready_pods == 2


def _pb(**fields: object) -> agent_pb2.UsageReport:
    report = agent_pb2.UsageReport(interval_seconds=15)
    spread = fields.pop("spread", None)
    for name, value in fields.items():
        setattr(report, name, value)
    if spread is not None:
        report.spreads.append(agent_pb2.SpreadUsage(**spread))  # type: ignore[arg-type]
    return report


@pytest.mark.parametrize(("report", "field"), [
    pytest.param(_pb(interval_seconds=0), "interval_seconds", id="no interval"),
    pytest.param(_pb(interval_seconds=99_999), "interval_seconds", id="an interval past an hour"),
    pytest.param(_pb(metrics_unavailable_reason="not a reason!"), "metrics_unavailable_reason",
                 id="a reason that is no condition reason"),
    pytest.param(_pb(spread={"spread": "no-slash"}), r"spreads\[0\]\.spread", id="a bad spread key"),
    pytest.param(_pb(spread={"spread": KEY, "ready_pods": -1}), "ready_pods", id="a negative count"),
    pytest.param(_pb(spread={"spread": KEY, "ready_pods": 1, "measured_pods": 2}), "measured",
                 id="more measured than Ready"),
    pytest.param(_pb(spread={"spread": KEY, "ready_pods": 1, "measured_pods": 1, "cpu_requested_pods": 2}),
                 "measured", id="more with a request than measured"),
])
def test_bad_usage_reports_are_refused(report: agent_pb2.UsageReport, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        inbound.usage_report(report)


def test_duplicate_spreads_are_refused() -> None:
    report = _pb(spread={"spread": KEY})
    report.spreads.append(agent_pb2.SpreadUsage(spread=KEY))
    with pytest.raises(ValueError, match="twice"):
        inbound.usage_report(report)


def _coordinator() -> tuple[facade.Coordinator, facade.AgentStream, ManualClock]:
    clock = ManualClock(datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))
    coordinator = facade.Coordinator(world.World(clock), clock=clock)
    with coordinator.lock:
        coordinator.world.upsert_spread(builders.federated_spread(
            "web", [{"name": "all", "clusters": ["dc1"]}], generation=1, uid="uid-web"))
    stream = coordinator.attach(agent_pb2.Hello(cluster_name="dc1"), heartbeat_seconds=1)
    return coordinator, stream, clock


def test_the_facade_answers_from_the_reports() -> None:
    coordinator, stream, clock = _coordinator()
    assert coordinator.usage("shop", "web") is not None
    report = _pb(spread={"spread": KEY, "ready_pods": 2, "measured_pods": 2, "cpu_requested_pods": 2,
                         "cpu_usage_milli": 900, "cpu_utilization_milli": 180_000,
                         "window_milliseconds": 15_000})
    report.spreads[0].sampled_at.FromDatetime(clock())
    coordinator.receive(stream, agent_pb2.AgentMessage(usage=report))
    found = coordinator.usage("shop", "web")
    assert found is not None
    assert found.values[usage.CPU_UTILIZATION].quantity == "180"
    assert found.values[usage.CPU_USAGE].quantity == "900m"
    assert found.values[usage.CPU_USAGE].timestamp == clock().timestamp()
    clock.advance(5 * 15 + 1)
    later = coordinator.usage("shop", "web")
    assert later is not None and later.stale == ("dc1",) and usage.CPU_USAGE not in later.values
    assert coordinator.usage("shop", "nothing") is None


def test_the_facade_refuses_a_bad_usage_report_and_keeps_the_last() -> None:
    coordinator, stream, _ = _coordinator()
    coordinator.receive(stream, agent_pb2.AgentMessage(usage=_pb(spread={"spread": KEY, "ready_pods": 3})))
    with pytest.raises(ValueError):
        bad = _pb(spread={"spread": KEY, "ready_pods": -3})
        coordinator.receive(stream, agent_pb2.AgentMessage(usage=bad))
    found = coordinator.usage("shop", "web")
    assert found is not None and found.ready_pods == 3


def test_metrics_condition() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    missing = status.metrics_condition(reason="MetricsAPINotFound", message="no API", previous=[], now=now)
    assert (missing.type, missing.status) == ("MetricsAvailable", "False")
    assert missing.reason == "MetricsAPINotFound"
    assert "never as idle" in missing.message
    back = status.metrics_condition(reason="", message="", previous=[missing], now=now)
    assert (back.status, back.reason) == ("True", "MetricsAPIAvailable")
    assert usage_book.STALE_INTERVALS == 5


def test_one_placed_spreads_answer_carries_its_usage_and_a_list_does_not() -> None:
    """GetPlacement and Explain (`WorldSource.get`, `explained`) carry the usage the hub's HPAs read;
    ListPlacements leaves it out (each spread's costs a pass over the clusters' reports); the wire
    and the SDK keep every figure."""
    coordinator, stream, clock = _coordinator()
    with coordinator.lock:
        coordinator.world.set_target(KEY, replicas=2, template=builders.deployment("web", 2))
    coordinator.publish({KEY})
    placements = source.WorldSource(coordinator)
    record = placements.get(KEY)
    assert record is not None and record.usage is not None
    assert list(record.usage.values) == [usage.READY_REPLICAS], "nothing reported yet: Ready pods only"
    report = _pb(spread={"spread": KEY, "ready_pods": 2, "measured_pods": 1, "cpu_requested_pods": 1,
                         "cpu_usage_milli": 450, "cpu_utilization_milli": 90_000,
                         "window_milliseconds": 15_000})
    report.spreads[0].sampled_at.FromDatetime(clock())
    coordinator.receive(stream, agent_pb2.AgentMessage(usage=report))
    record, explained = placements.get(KEY), placements.explained(KEY)
    assert record is not None and record.usage is not None and explained is not None
    assert explained.usage == record.usage == coordinator.usage("shop", "web")
    assert (record.usage.ready_pods, record.usage.unmeasured_pods) == (2, 1)
    assert {usage.CPU_USAGE, usage.CPU_UTILIZATION, usage.READY_REPLICAS} <= set(record.usage.values)
    assert [r.usage for r in placements.placements(None)] == [None]
    shown = types.placement_from_pb(convert.placement_to_pb(record))
    metrics = {name: value.quantity for name, value in sorted(record.usage.values.items())}
    assert shown.usage == types.SpreadUsage(metrics=metrics, ready_pods=2, unmeasured_pods=1)
    assert shown.to_json()["usage"] == {"metrics": metrics, "readyPods": 2, "unmeasuredPods": 1,
                                        "withoutMetrics": [], "stale": []}
