"""One member's usage sums for a spread (federation.core.pod_usage), table-driven."""

from __future__ import annotations

import fractions

import pytest

from federation.core import pod_usage
from federation.core.pod_usage import PodSample, PodState

F = fractions.Fraction
T = 1_700_000_000.0


def _pod(name: str, *, phase: str = "Running", ready: bool = True, cpu: str | None = "500m",
         memory: str | None = "128Mi") -> PodState:
    requests = {k: pod_usage.quantity.parse_quantity(v) for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return PodState(name=name, phase=phase, ready=ready, requests=requests)


def _sample(name: str, *, cpu: str = "250m", memory: str = "64Mi", at: float = T, window: float = 15.0
            ) -> PodSample:
    return PodSample(name=name, cpu=pod_usage.quantity.parse_quantity(cpu),
                     memory=pod_usage.quantity.parse_quantity(memory), timestamp=at, window_seconds=window)


@pytest.mark.parametrize(("pods", "samples", "expected"), [
    pytest.param([_pod("a"), _pod("b")], [_sample("a"), _sample("b")],
                 {"ready_pods": 2, "measured_pods": 2, "cpu_usage_milli": 500,
                  "cpu_utilization_milli": 100_000, "memory_utilization_milli": 100_000,
                  "cpu_requested_pods": 2}, id="two measured pods at half their requests"),
    pytest.param([_pod("a"), _pod("b", ready=False), _pod("c", phase="Pending", ready=False)],
                 [_sample("a"), _sample("b"), _sample("c")],
                 {"ready_pods": 1, "measured_pods": 1, "cpu_usage_milli": 250},
                 id="only Running and Ready pods count, whatever was sampled"),
    pytest.param([_pod("a"), _pod("b")], [_sample("a")],
                 {"ready_pods": 2, "measured_pods": 1, "cpu_usage_milli": 250,
                  "cpu_utilization_milli": 50_000},
                 id="a pod without a sample is not measured (not zero)"),
    pytest.param([_pod("a", cpu=None), _pod("b")], [_sample("a"), _sample("b")],
                 {"measured_pods": 2, "cpu_requested_pods": 1, "memory_requested_pods": 2,
                  "cpu_usage_milli": 500, "cpu_utilization_milli": 50_000},
                 id="no CPU request: left out of the CPU utilization only"),
    pytest.param([_pod("a", cpu="200m")], [_sample("a", cpu="450m")],
                 {"cpu_utilization_milli": 225_000, "cpu_usage_milli": 450}, id="over its request"),
    pytest.param([_pod("a", cpu="3")], [_sample("a", cpu="1")],
                 {"cpu_utilization_milli": 33_333}, id="rounded to the thousandth"),
    pytest.param([_pod("a", memory="1Gi")], [_sample("a", memory="256Mi")],
                 {"memory_usage_milli": 256 * 2**20 * 1000, "memory_utilization_milli": 25_000},
                 id="memory in thousandths of a byte"),
    pytest.param([_pod("a"), _pod("b")], [_sample("a", at=T - 30, window=10), _sample("b", window=30)],
                 {"sampled_at": T - 30, "window_seconds": 30.0}, id="oldest sample, longest window"),
    pytest.param([], [_sample("a")], {"ready_pods": 0, "measured_pods": 0, "sampled_at": 0.0},
                 id="no pods"),
])
def test_cluster_usage(pods: list[PodState], samples: list[PodSample], expected: dict[str, object]) -> None:
    found = pod_usage.cluster_usage("east", pods, {s.name: s for s in samples})
    assert found.cluster == "east"
    for field, value in expected.items():
        assert getattr(found, field) == value, field


def test_without_metrics_api_counts_ready_pods_only() -> None:
    found = pod_usage.cluster_usage("east", [_pod("a"), _pod("b", ready=False)], {"a": _sample("a")},
                                    measured=False)
    assert (found.ready_pods, found.measured_pods, found.cpu_usage_milli) == (1, 0, 0)


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({"containers": [{"resources": {"requests": {"cpu": "100m", "memory": "1Mi"}}},
                                 {"resources": {"requests": {"cpu": "1"}}}]},
                 {"cpu": F(11, 10), "memory": F(2**20)}, id="summed over containers"),
    pytest.param({"initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
                  "containers": [{"resources": {}}]}, {}, id="init containers and no requests"),
    pytest.param({}, {}, id="no containers"),
])
def test_container_requests(spec: dict[str, object], expected: dict[str, F]) -> None:
    assert pod_usage.container_requests(spec) == expected


@pytest.mark.parametrize(("item", "expected"), [
    pytest.param({"metadata": {"name": "a"}, "timestamp": "2023-11-14T22:13:20Z", "window": "15s",
                  "containers": [{"usage": {"cpu": "250m", "memory": "64Mi"}},
                                 {"usage": {"cpu": "50m", "memory": "0"}}]},
                 PodSample(name="a", cpu=F(3, 10), memory=F(64 * 2**20), timestamp=T, window_seconds=15.0),
                 id="summed over containers"),
    pytest.param({"metadata": {"name": "a"}, "timestamp": "2023-11-14T22:13:20+00:00", "window": "1m0s",
                  "containers": [{"usage": {"cpu": "123456n"}}]},
                 PodSample(name="a", cpu=F(123456, 10**9), memory=F(0), timestamp=T, window_seconds=60.0),
                 id="nanocores, a minute's window"),
])
def test_pod_sample(item: dict[str, object], expected: PodSample) -> None:
    assert pod_usage.pod_sample(item) == expected


@pytest.mark.parametrize("item", [
    pytest.param({"timestamp": "2023-11-14T22:13:20Z", "containers": []}, id="no name"),
    pytest.param({"metadata": {"name": "a"}, "timestamp": "yesterday"}, id="bad timestamp"),
    pytest.param({"metadata": {"name": "a"}, "timestamp": "2023-11-14T22:13:20Z", "window": "soon"},
                 id="bad window"),
    pytest.param({"metadata": {"name": "a"}, "timestamp": "2023-11-14T22:13:20Z",
                  "containers": [{"usage": {"cpu": "lots"}}]}, id="bad quantity"),
])
def test_unreadable_samples_are_no_samples(item: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        pod_usage.pod_sample(item)
    assert pod_usage.samples([item]) == {}


@pytest.mark.parametrize(("text", "seconds"), [("15s", 15.0), ("1m0s", 60.0), ("500ms", 0.5),
                                               ("10.5s", 10.5), ("1h", 3600.0), (30, 30.0)])
def test_duration_seconds(text: object, seconds: float) -> None:
    assert pod_usage.duration_seconds(text) == seconds
