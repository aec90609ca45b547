"""The admission benchmark (`bench/admission.py`) at a tiny size, end to end on its own sandbox.

Why a test for a benchmark: `make bench` runs it once, rarely, and a benchmark that silently
measures the wrong thing is worse than none. At N = 10 (12 pods per run: the caps hold 10) and one
run per mode, through the ReplicaSet controller and through 5 clients, it proves that every webhook
really admitted every pod (the real agent with quotas from the stand-in coordinator, also with a
0.5 ms thread switch interval at 5 clients; the seed's design on its custom resource, with
2 webhook replica processes and with 1, its controller a process too), that the floor's creates
met no webhook, that fedspread filled every cap and left exactly the surplus without a subset,
that the apiserver's own webhook histogram counted each mode's calls, that the result keeps the
keys issue 7 fixed and has the per-level shape issues 16 and 29 ask for (added latency over the
floor, the handler's before and after) — and that nothing it started outlives it.
"""

from __future__ import annotations

import pathlib

import pytest
from leftovers import processes_mentioning

from bench import admission
from federation.sandbox import state

SIZE = 10
MODE_KEYS = {"handler_p50_ms", "handler_p99_ms", "create_p50_ms", "create_p99_ms", "burst_s", "conflicts",
             "over_cap"}


def test_a_small_run_keeps_fedspread_under_its_caps_and_cleans_up(tmp_path: pathlib.Path) -> None:
    directory = tmp_path / "sandbox"
    lines: list[str] = []
    # Every mode at 5 clients; under the ReplicaSet controller only fedspread and the baseline (the
    # floor and the 1-replica baseline would create there through the baseline's code: no `scale`).
    result = admission.measure(size=SIZE, report=lines.append, directory=directory,
                               levels=("replicaset", 5), runs=1, deadline=60.0,
                               only={"replicaset": ("fedspread", "baseline")})

    pods = admission.pods_per_run(SIZE)
    assert (result["replicas"], result["pods_per_run"]) == (SIZE, 12)
    for mode in ("fedspread", "baseline"):
        assert set(result[mode]) == MODE_KEYS, mode
        assert all(isinstance(v, int | float) and v >= 0 for v in result[mode].values()), result[mode]
        assert result[mode]["burst_s"] > 0 and result[mode]["handler_p99_ms"] > 0, result[mode]
    assert set(result["levels"]) == {"replicaset", "clients-5"}
    assert [(r["level"], r["mode"]) for r in result["runs"]] == [
        ("replicaset", "fedspread"), ("replicaset", "baseline"), ("clients-5", "baseline"),
        ("clients-5", "baseline-1"), ("clients-5", "floor"), ("clients-5", "fedspread-switch-0.5ms"),
        ("clients-5", "fedspread")], "modes rotate, levels start further on"

    caps = admission.caps(SIZE)
    for row in result["runs"]:
        where = (row["level"], row["mode"])
        assert row["pods_stored"] == pods and row["completed"], where
        assert row["apiserver"]["create_requests"].get("201") == pods, where
        assert len(row["load"]["at_start"]) == 3 and len(row["load"]["at_end"]) == 3
        if row["mode"] == "floor":
            assert row["admissions"] == 0 and row["apiserver"]["webhook_calls"] == 0, where
            assert row["without_subset"] == pods, f"{where}: no webhook placed a floor pod"
            continue
        # One handler sample per pod, in the window. A pod's admission may reach a handler twice (the
        # baseline's once had 13 for 12 pods in a `make test`, all 12 stored: a call made again); a
        # window that took another run's samples would be a run's worth off, not one or two.
        assert pods <= row["admissions"] <= pods + 2, f"{where}: one handler sample per pod, in the window"
        assert row["apiserver"]["webhook_calls"] >= pods, f"{where}: the apiserver counted the calls"
        assert row["apiserver"]["webhook_failed_open"] == 0, f"{where}: the apiserver's log was read"
        if row["mode"].startswith("fedspread"):
            assert row["by_subset"] == caps and row["without_subset"] == pods - SIZE, where
            assert row["over_cap"] == 0 and row["conflicts"] == 0, where
            profile = row["wait_profile"]
            assert profile["samples"] >= 1 and profile["others_cpu_p50_ms"] >= 0, where
        else:
            assert row["counters"].get("controller_writes", 0) > 0, f"{where}: its controller process ran"
    level = result["levels"]["clients-5"]
    assert level["fedspread"]["webhook_timeout_s"] == 2 and level["baseline"]["webhook_timeout_s"] == 10
    assert level["fedspread"]["handler_p99_ms"]["median"] == result["fedspread"]["handler_p99_ms"]
    assert set(level["ratios"]) == {"create_p99_ms", "handler_p99_ms", "burst_s", "compared",
                                    "baseline_refusing"}
    assert set(result["collapse"]["baseline"]) == {"clients", "levels_tried", "replicaset_collapsed",
                                                   "any_run_clients", "replicaset_collapsed_runs"}
    assert set(result["collapse"]) == {"fedspread", "baseline", "baseline-1", "floor"}
    replicaset = result["levels"]["replicaset"]
    assert "floor" not in replicaset and "added_ratios" not in replicaset, "no floor ran there"
    for mode in ("fedspread", "baseline", "baseline-1"):
        added = level[mode]["added_p99_ms"]
        difference = level[mode]["create_p99_ms"]["median"] - added["floor_p99_ms"]["median"]
        assert added["median"] == pytest.approx(difference, abs=0.051), mode
    assert set(level["added_ratios"]) == {"baseline", "baseline-1"}
    assert result["handler_wait"]["after"]["handler_p99_ms"]["median"] > 0
    assert {"fedspread_added_p99_ms", "added_ratio_baseline", "added_ratio_baseline-1",
            "fedspread_no_collapse_beyond_floor"} <= set(result["goals"])

    recorded = state.SandboxState.load(directory)
    assert recorded.components, "the benchmark started its sandbox here"
    assert not [c.name for c in recorded.components if c.alive()], "sandbox components still running"
    assert not processes_mentioning(str(directory)), "a webhook or sandbox process outlived the benchmark"
