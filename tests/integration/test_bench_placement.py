"""The placement benchmark (`bench/placement.py`) at a tiny size, with both backends.

Why a test for a benchmark: `make bench` runs it rarely, and the Ray side starts a Ray of its
own in the coordinator's process. At 200 spreads over 20 clusters each backend runs the whole
path — the real facade and AgentServicer, one live stream per cluster from the stand-in agents'
process, every kind of event matched message by message on the agents' side — and must record
the keys bench/README.md and bench/results/latest.json name, the same placements and event effects
as the other backend, and what the Ray run ran on. The timings are not checked: they are the
benchmark's output. No sandbox is needed; the Ray run does not use the session's Ray (the
benchmark starts and stops its own).
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import placement
from bench.placement_world import Shape

SHAPE = Shape(spreads=200, clusters=20, per_spread=5)
KEYS = {"spreads", "clusters", "clusters_per_spread", "pools_per_cluster", "templates", "full_s",
        "delivered_s", "per_spread_ms", "event_p99_ms", "cordon_ms", "streams", "rss_mb", "rss_total_mb",
        "replicas_placed", "round_replaced", "full_cpu_s", "full_actors_cpu_s", "full_thread_cpu_s",
        "full_collector_s", "full_collections", "delivered_collector_s", "delivered_collections",
        "backend", "events", "streams_reopened", "streams_detached"}
EVENTS = {"scale_up", "new_spread", "capacity_shrink", "capacity_grow", "cordon", "uncordon"}
RAY_KEYS = {"ray_shards", "ray_cluster_shards", "ray_nodes", "ray_cpus", "ray_ready_s", "ray_actors_rss_mb"}


@pytest.fixture(scope="module")
def records() -> dict[str, dict[str, Any]]:
    return {backend: placement.run_one(SHAPE, backend=backend) for backend in placement.BACKENDS}


def test_each_backend_records_the_keys_and_places_the_same(records: dict[str, dict[str, Any]]) -> None:
    local, ray = records["local"], records["ray"]
    for backend, record in records.items():
        assert set(record) >= KEYS and record["backend"] == backend, record
        assert (record["spreads"], record["clusters"], record["streams"]) == (200, 20, 20)
        assert record["messages"] > 0 and record["delivered_s"] >= 0
        assert record["streams_reopened"] == record["streams_detached"] == 0, record  # none ended
        # The coordinator places a round with its cycle collector paused: at most the one young
        # collection that the first allocation after the pause starts, on what survived the round.
        assert 0 <= record["full_collections"] <= 1 and record["full_collector_s"] >= 0, record
        assert record["delivered_collections"] >= 0 and record["delivered_collector_s"] >= 0
    assert local["replicas_placed"] == ray["replicas_placed"] > 0
    # Both backends place the round against one snapshot: the same spreads are placed again.
    assert local["round_replaced"] == ray["round_replaced"]
    for kind in EVENTS:
        assert local["events"][kind]["replaced_median"] == ray["events"][kind]["replaced_median"], kind


def test_every_event_really_places_again_and_reaches_the_agents(records: dict[str, dict[str, Any]]) -> None:
    """No event of the benchmark is a no-op by construction: each places spreads again and sends
    messages that the stand-in agents were matched to have received."""
    for record in records.values():
        events = record["events"]
        assert set(events) == EVENTS
        for kind in EVENTS - {"uncordon"}:  # giving a cluster back moves nothing (placement is stable)
            found = events[kind]
            assert found["n"] >= 1 and found["replaced_median"] >= 1 and found["messages_median"] >= 1, \
                (kind, found)
        assert events["scale_up"]["n"] == placement.SCALE_UPS
        assert events["cordon"]["n"] == events["capacity_shrink"]["n"] == placement.CORDONS == 20
        assert events["cordon"]["lock_wait_p99_ms"] >= 0 and "lock_wait_p99_ms" not in events["capacity_grow"]
        assert record["left_out"] == placement.LEFT_OUT


def test_the_ray_run_says_what_it_ran_on(records: dict[str, dict[str, Any]]) -> None:
    ray = records["ray"]
    assert set(ray) >= RAY_KEYS, ray
    assert ray["ray_shards"] == placement.RAY_SHARDS and ray["ray_nodes"] == 1
    assert ray["ray_cpus"] == placement.RAY_CPUS and ray["ray_actors_rss_mb"] > 0
    assert not RAY_KEYS & set(records["local"])


def test_the_sweep_moves_one_dimension_at_a_time() -> None:
    points = placement.sweep(placement.FULL_BASE, placement.FULL_STEPS)
    assert points[0] == ("base", placement.FULL_BASE)
    for varied, shape in points[1:]:
        differs = {name for name in ("spreads", "clusters", "per_spread", "pools", "templates")
                   if getattr(shape, name) != getattr(placement.FULL_BASE, name)}
        assert differs == {varied}, (varied, shape)
    assert {shape.clusters for _, shape in points} == {1000}
