"""The placement benchmark (`bench/placement.py`) at a tiny size, with both backends.

Why a test for a benchmark: `make bench` runs it rarely, and the Ray side starts a Ray of its
own in the coordinator's process. At 20 spreads over 4 clusters each backend runs the whole path
(the real facade and AgentServicer, stand-in agents in a process of their own) and must record
the keys bench/README.md names, the same placements as the other backend, and what the Ray run
ran on. The timings are not checked: they are the benchmark's output. No sandbox is needed; the
Ray run does not use the session's Ray (the benchmark starts and stops its own).
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import placement

KEYS = {"spreads", "clusters", "full_s", "delivered_s", "per_spread_ms", "incremental_ms", "cordon_ms",
        "rss_mb", "replicas_placed", "round_replaced", "full_cpu_s", "full_actors_cpu_s", "backend"}
RAY_KEYS = {"ray_shards", "ray_cluster_shards", "ray_nodes", "ray_cpus", "ray_ready_s", "ray_actors_rss_mb"}


@pytest.fixture(scope="module")
def records() -> dict[str, dict[str, Any]]:
    return {backend: placement.run_one(spreads=20, clusters=4, backend=backend)
            for backend in placement.BACKENDS}


def test_each_backend_records_the_keys_and_places_the_same(records: dict[str, dict[str, Any]]) -> None:
    local, ray = records["local"], records["ray"]
    for backend, record in records.items():
        assert set(record) >= KEYS and record["backend"] == backend, record
        assert (record["spreads"], record["clusters"]) == (20, 4)
    assert local["replicas_placed"] == ray["replicas_placed"] > 0
    assert local["cordon_replaced"] == ray["cordon_replaced"]
    assert local["round_replaced"] == 0  # placed one after the other: nothing to place again


def test_the_ray_run_says_what_it_ran_on(records: dict[str, dict[str, Any]]) -> None:
    ray = records["ray"]
    assert set(ray) >= RAY_KEYS, ray
    assert ray["ray_shards"] == placement.RAY_SHARDS and ray["ray_nodes"] == 1
    assert ray["ray_cpus"] == placement.RAY_CPUS and ray["ray_actors_rss_mb"] > 0
    assert not RAY_KEYS & set(records["local"])
