"""The accuracy benchmark (`bench/accuracy.py`) at a tiny size, end to end on a federation of its own.

Why: the benchmark's figures are only as good as its watch. At two small steps this proves, on the
real sandbox, coordinator and agents, that the watch saw every replica of the spread (every pod
that ended Running counts as placed and accurate), that what ran per (subset, cluster) at each
settled step is what the coordinator placed there, that the result has the keys bench/README.md
names — and that nothing the run started outlives it. Whether the accuracy is 100 % is the
benchmark's output, not this test's claim (its definitions are tested in tests/unit).
"""

from __future__ import annotations

import pathlib

from leftovers import processes_mentioning

from bench import accuracy
from bench import accuracy_scenario as world
from federation.sandbox import state

TINY = world.Size(nodes=1, steps=(2, 8))
KEYS = {"replicas", "accuracy_pct", "share", "stuck_pending", "placed", "accurate", "rescheduled",
        "waiting", "unassigned",
        "pending_over_10s", "stuck_with_room", "pending_p50_s", "pending_p99_s", "pending_max_s",
        "measured_s", "wall_s", "steps", "details"}


def test_a_tiny_run_sees_every_replica_where_the_coordinator_placed_it(tmp_path: pathlib.Path) -> None:
    lines: list[str] = []
    result = accuracy.measure(TINY, report=lines.append, directory=tmp_path)

    assert set(result) == KEYS
    assert result["replicas"] == 8
    assert result["accurate"] == 8, "each replica running at the end ran without being deleted"
    assert result["placed"] == result["accurate"] + result["rescheduled"] + result["waiting"]
    assert result["unassigned"] == 0
    for step in result["steps"]:
        assert step["settled"], step
        placed = {f"{subset}@{cluster}": n for subset, clusters in step["placement"].items()
                  for cluster, n in clusters.items()}
        assert step["running"] == placed, step
        assert set(step["room_left"]) == {s.name for s in world.scenario(TINY).subsets}
    assert any(line.startswith("accuracy ") for line in lines)

    recorded = state.SandboxState.load(tmp_path / "sandbox")
    assert recorded.components, "the benchmark started its sandbox here"
    assert not [c.name for c in recorded.components if c.alive()], "sandbox components still running"
    assert not processes_mentioning(str(tmp_path)), "a coordinator, agent or sandbox process outlived the run"
