"""bench/README.md's headline table is the committed result documents, rendered.

Why: a figure typed by hand drifts from the run that produced it; `python -m bench.readme` renders
the table from `bench/results/reference-*.json`, and this test fails when the two differ (as the
CRD and proto drift tests do for generated code).
"""

from __future__ import annotations

from bench import readme


def test_the_headline_table_matches_the_committed_results() -> None:
    assert readme.main(["--check"]) == 0, "run `python -m bench.readme` and commit bench/README.md"


def test_every_row_states_its_goal_verdict_load_and_command() -> None:
    rows = readme.rows()
    assert {row[0] for row in rows} >= {"admission", "placement", "failover", "inventory", "accuracy"}
    for name, figure, goal, verdict, load, when in rows:
        assert figure and goal and verdict in ("met", "**missed**", "—", "**not measured**"), (name, figure)
        assert "→" in load or load == "not recorded", (name, load)
        assert "python -m bench.run" in when and "UTC" in when, (name, when)
