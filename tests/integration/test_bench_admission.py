"""The admission benchmark (`bench/admission.py`) at a tiny size, end to end on its own sandbox.

Why a test for a benchmark: `make bench` runs it once, rarely, and a benchmark that silently
measures the wrong thing is worse than none. At 20 pods it proves that both webhooks really
admitted every pod (the real agent with quotas from the stand-in coordinator; the seed's design
on its custom resource), that the result has the keys issue 7 fixes, that fedspread kept every
cap without a single API write to do so — and that nothing it started outlives it.
"""

from __future__ import annotations

import pathlib

from leftovers import processes_mentioning

from bench import admission
from federation.sandbox import state

SIZE = 20
MODE_KEYS = {"handler_p50_ms", "handler_p99_ms", "create_p50_ms", "create_p99_ms", "burst_s", "conflicts",
             "over_cap"}


def test_a_small_run_keeps_fedspread_under_its_caps_and_cleans_up(tmp_path: pathlib.Path) -> None:
    directory = tmp_path / "sandbox"
    lines: list[str] = []
    result = admission.measure(size=SIZE, workers=10, report=lines.append, directory=directory)

    assert result["replicas"] == SIZE
    for mode in ("fedspread", "baseline"):
        assert set(result[mode]) == MODE_KEYS, mode
        assert all(isinstance(v, int | float) and v >= 0 for v in result[mode].values()), result[mode]
        assert result[mode]["burst_s"] > 0 and result[mode]["handler_p99_ms"] > 0, result[mode]
        assert result["details"][mode]["pods_stored"] == SIZE, result["details"][mode]
    assert set(result["ratios"]) == {"handler_p99", "burst"}
    assert all(isinstance(v, float) for v in result["ratios"].values()), result["ratios"]

    fedspread = result["fedspread"]
    assert fedspread["over_cap"] == 0 and fedspread["conflicts"] == 0
    caps = admission.caps(SIZE)
    assert result["details"]["fedspread"]["by_subset"] == caps, "every pod placed, every subset to its cap"
    assert result["details"]["fedspread"]["admissions"] == SIZE, "one admission per pod, in the window"

    recorded = state.SandboxState.load(directory)
    assert recorded.components, "the benchmark started its sandbox here"
    assert not [c.name for c in recorded.components if c.alive()], "sandbox components still running"
    assert not processes_mentioning(str(directory)), "a webhook or sandbox process outlived the benchmark"
