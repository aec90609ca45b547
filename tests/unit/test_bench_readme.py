"""bench/README.md's headline table is the committed result documents, rendered.

Why: a figure typed by hand drifts from the run that produced it; `python -m bench.readme` renders
the table from `bench/results/reference-*.json`, and this test fails when the two differ (as the
CRD and proto drift tests do for generated code).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from bench import readme, readme_admission, readme_parts, readme_scaling


def test_the_headline_table_matches_the_committed_results() -> None:
    assert readme.main(["--check"]) == 0, "run `python -m bench.readme` and commit bench/README.md"


def test_every_row_states_its_goal_verdict_load_and_command() -> None:
    rows = readme.rows()
    assert {row[0] for row in rows} >= {"admission", "placement", "failover", "inventory", "accuracy"}
    for name, figure, goal, verdict, load, when in rows:
        assert figure and goal and verdict in (
            "met", "**missed**", "—", "**not measured**", readme_parts.NOT_COMPARABLE), (name, figure)
        assert "→" in load or load == "not recorded", (name, load)
        assert ("python -m bench.run" in when or "python -m bench.placement_compare" in when) \
            and "UTC" in when, (name, when)


def _summary(create_p99_ms: float, *, collapsed_runs: int, runs: int = 3) -> dict[str, Any]:
    return {"create_p99_ms": {"median": create_p99_ms, "min": create_p99_ms, "max": create_p99_ms},
            "handler_p99_ms": {"median": 1.0, "min": 1.0, "max": 1.0},
            "burst_s": {"median": 1.0, "min": 1.0, "max": 1.0},
            "collapsed_runs": collapsed_runs, "runs": runs, "refusing": bool(collapsed_runs)}


@pytest.mark.parametrize(("clients", "fedspread_down", "baseline_down", "verdict", "says"), [
    (1, 0, 0, "**missed**", "15.0 ms (15.0\N{EN DASH}15.0) vs baseline 27.0 ms"),
    (5, 0, 3, readme_parts.NOT_COMPARABLE, "baseline collapsed in 3 of 3 runs (creates refused in 3 runs; "
                                     "its collapse point: 5 clients): no ratio"),
    (20, 0, 1, readme_parts.NOT_COMPARABLE, "baseline collapsed in 1 of 3 runs"),
    (50, 2, 0, readme_parts.NOT_COMPARABLE, "fedspread collapsed in 2 of 3 runs"),
    (None, 0, 3, readme_parts.NOT_COMPARABLE, "its client-level collapse point: 5 clients"),
])
def test_a_level_is_compared_only_where_no_run_of_either_mode_collapsed(
        clients: int | None, fedspread_down: int, baseline_down: int, verdict: str, says: str) -> None:
    name = "replicaset" if clients is None else f"clients-{clients}"
    ratio = 27.0 / 15.0 if not (fedspread_down or baseline_down) else 200.0 / 15.0
    level = {"clients": clients, "fedspread": _summary(15.0, collapsed_runs=fedspread_down),
             "baseline": _summary(15.0 * ratio, collapsed_runs=baseline_down)}
    runs = [{"level": name, "mode": mode, "collapse_reasons": ["4 create attempts refused"]}
            for mode, down in (("fedspread", fedspread_down), ("baseline", baseline_down))
            for _ in range(down)]
    collapse: dict[str, dict[str, Any]] = {"fedspread": {"any_run_clients": 50 if fedspread_down else None},
                "baseline": {"any_run_clients": 5}}
    figure, found = readme_admission.level_row(level, runs=runs, collapse=collapse)
    assert found == verdict, figure
    assert says in figure, figure
    if verdict == readme_parts.NOT_COMPARABLE:
        assert "\N{MULTIPLICATION SIGN}" not in figure, "no ratio against a collapsed side"


@pytest.mark.parametrize(("event", "says"), [
    ({"n": 3, "p99_ms": 0.0, "messages_median": 0, "replaced_median": 10},
     "uncordon: nothing sent (n=3, 10 spreads placed)"),
    ({"n": 3, "p99_ms": 12.5, "messages_median": 0, "replaced_median": 10},
     "uncordon p99 12.5 ms (n=3, 10 spreads placed, the median sample sent nothing)"),
    ({"n": 3, "p99_ms": 12.5, "messages_median": 4, "replaced_median": 10},
     "uncordon p99 12.5 ms (n=3, 10 spreads placed)"),
    ({"n": 3, "sent_nothing": 3, "p99_ms": None, "messages_median": 0, "replaced_median": 10},
     "uncordon: nothing sent (n=3, 10 spreads placed)"),
    ({"n": 3, "sent_nothing": 1, "p99_ms": 12.5, "messages_median": 4, "replaced_median": 10},
     "uncordon p99 12.5 ms (n=3, 10 spreads placed, 1 of them sent nothing)"),
])
def test_an_event_that_sent_nothing_is_not_reported_as_a_latency(event: dict[str, Any], says: str) -> None:
    assert readme._event("uncordon", event) == says


@pytest.mark.parametrize(("document", "reference"), [
    ({"commit": "bb30ac7", "command": "python -m bench.run"}, True),
    ({"commit": "a64819b+dirty", "command": "python -m bench.run"}, False),  # uncommitted code
    ({"command": "python -m bench.placement"}, False),                       # hand-assembled, no commit
    ({"commit": "bb30ac7"}, False),                                          # no command to rerun
])
def test_only_a_clean_commit_with_its_command_is_a_reference(
        document: dict[str, Any], reference: bool) -> None:
    assert readme_parts.is_reference(document) is reference


def test_every_row_says_how_many_runs_stand_behind_it() -> None:
    for row in readme.rows():
        assert " run" in row[5], row


@pytest.mark.parametrize(("sent", "expected"), [
    ([(0.020, 2), (0.010, 1), (0.005, 0)], {"n": 3, "sent_nothing": 1, "p50_ms": 10.0, "p99_ms": 20.0}),
    ([(0.0, 0), (0.0, 0)], {"n": 2, "sent_nothing": 2, "p50_ms": None, "p99_ms": None}),
])
def test_an_event_summary_times_only_the_samples_that_sent_something(
        sent: list[tuple[float, int]], expected: dict[str, Any]) -> None:
    from bench import placement_events

    samples = [placement_events.Sample(latency, None, 1, messages) for latency, messages in sent]
    found = placement_events.summary(samples)
    assert {key: found[key] for key in expected} == expected


def test_the_point_through_a_hub_is_a_row_of_its_own_without_a_goal() -> None:
    hub = {"varied": "base+hub", "hub": True, "spreads": 1000, "clusters": 1000, "streams": 1000,
           "created_s": 11.2, "placed_s": 12.1, "delivered_s": 11.6, "status_s": 26.4, "events": {},
           "runs_per_point": 3}
    document = {"placement": [hub], "commit": "abc", "command": "python -m bench.run",
                "started_at": "2026-11-29T21:37:08+00:00", "mode": "full"}
    rows = list(readme._placement(document))
    assert len(rows) == 1
    name, figure, goal, verdict, _load, _when = rows[0]
    assert (name, verdict) == ("placement", "—") and "no goal" in goal
    assert "placed 12.1 s" in figure and "every status shown 26.4 s" in figure and "TLS" in figure


TIMES = "\N{MULTIPLICATION SIGN}"


def _goal_point(backend: str, full_s: float) -> dict[str, Any]:
    event = {"n": 20, "replaced_median": 1, "p99_ms": 12.0, "messages_median": 10}
    events = {"scale_up": event, "cordon": {**event, "replaced_median": 1000}}
    return {"varied": "goal", "backend": backend, "spreads": 10000, "clusters": 1000,
            "clusters_per_spread": 100, "pools_per_cluster": 2, "templates": 1, "streams": 1000,
            "full_s": full_s, "per_spread_ms": 1.0,
            "delivered_s": 25.0, "event_p99_ms": 12.0, "cordon_ms": 400.0, "rss_total_mb": 900,
            "events": events, "runs_per_point": 3}


def test_the_goals_come_from_the_dedicated_goal_run_once_when_it_is_a_reference(
        monkeypatch: pytest.MonkeyPatch) -> None:
    full = {"placement": [_goal_point("local", 19.4), _goal_point("ray", 21.5)], "commit": "abc",
            "command": "python -m bench.run", "started_at": "2026-11-24T16:18:04+00:00", "mode": "full"}
    dedicated = {"points": {"local": _goal_point("local", 8.0), "ray": _goal_point("ray", 9.0),
                            "local-unbatched": _goal_point("local", 11.0)},  # a before arm: no row
                 "commit": "def", "command": "python -m bench.placement_compare --runs 3",
                 "started_at": "2026-11-30T01:52:24+00:00", "runs_per_backend": 3}
    monkeypatch.setattr(readme, "_goal_run", lambda: dedicated)
    goals = [row for row in readme._placement(full) if row[2] == "≤ 10 s"]
    assert [row[1] for row in goals] == [f"10k {TIMES} 1,000, local: full round 8.0 s",
                                         f"10k {TIMES} 1,000, ray: full round 9.0 s"]
    assert all("dedicated run of the goal's federation" in row[5] and "bench.placement_compare" in row[5]
               and "3 runs per backend" in row[5] for row in goals)
    monkeypatch.setattr(readme, "_goal_run", lambda: None)  # none (or not a reference): the full run's
    assert [row[1] for row in readme._placement(full) if row[2] == "≤ 10 s"] == [
        f"10k {TIMES} 1,000, local: full round 19.4 s", f"10k {TIMES} 1,000, ray: full round 21.5 s"]


def test_a_dedicated_run_older_than_the_full_run_is_superseded(
        monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    def write(name: str, started: str, **body: Any) -> None:
        document = {"commit": "abc", "command": "python -m bench.run", "started_at": started, **body}
        (tmp_path / name).write_text(json.dumps(document))

    monkeypatch.setattr(readme, "RESULTS", tmp_path)
    monkeypatch.setattr(readme, "DEDICATED", {"admission": ("dedicated.json", "the reason")})
    monkeypatch.setattr(readme, "GOAL_RUN", ("goal.json", "the goal's reason"))
    write("reference-full.json", "2026-11-30T13:00:00+00:00", admission={"from": "full"})
    write("dedicated.json", "2026-11-30T12:59:59+00:00", admission={"from": "dedicated"})
    write("goal.json", "2026-11-29T10:00:00+00:00", points={"local": {}})
    assert readme._document("admission")["admission"] == {"from": "full"}
    assert readme._goal_run() is None
    write("dedicated.json", "2026-11-30T13:00:01+00:00", admission={"from": "dedicated"})
    write("goal.json", "2026-12-01T10:00:00+00:00", points={"local": {}})
    chosen = readme._document("admission")
    assert chosen["admission"] == {"from": "dedicated"} and chosen[readme_parts.REASON] == "the reason"
    assert readme._goal_run() is not None


@pytest.mark.parametrize(("recorded", "shown"), [
    ('python -m bench.placement_compare --shape {"spreads": 10, "clusters": 5} --runs 3',
     'python -m bench.placement_compare --shape \'{"spreads": 10, "clusters": 5}\' --runs 3'),
    ("python -m bench.placement_compare --shape '{\"spreads\": 10}' --runs 3",
     "python -m bench.placement_compare --shape '{\"spreads\": 10}' --runs 3"),
    ("python -m bench.run --only placement", "python -m bench.run --only placement"),
])
def test_a_recorded_shape_is_shown_as_a_shell_takes_it(recorded: str, shown: str) -> None:
    assert readme.shell_quoted(recorded) == shown


def _scaling_run(arms: dict[str, tuple[float, float]], *, commit: str = "abc1234") -> dict[str, Any]:
    """A comparison on a machine with more cores: per variant (full round s, delivered s)."""
    def point(variant: str, full_s: float, delivered_s: float) -> dict[str, Any]:
        shards = int(variant.split("-")[1]) if variant.startswith("ray-") else None
        return {"spreads": 30000, "clusters": 1000, "clusters_per_spread": 10, "full_s": full_s,
                "delivered_s": delivered_s, "full_thread_cpu_s": full_s * 0.8, "ray_shards": shards,
                "ray_cluster_shards": 1 if shards else None,
                "load": {"at_start": [0.5, 0.4, 0.3], "at_end": [1.5, 1.0, 0.5]}}
    return {"commit": commit, "command": "python -m bench.placement_compare --variants local ray-4 ray-12",
            "started_at": "2026-12-04T14:18:25+00:00", "machine": {"cores": 16},
            "points": {variant: point(variant, *times) for variant, times in arms.items()}}


def test_ray_scaling_is_judged_at_twelve_actors_and_reported_at_the_others() -> None:
    document = _scaling_run({"local": (30.0, 30.0), "ray-4": (12.0, 15.0), "ray-12": (5.0, 9.0)})
    found = list(readme_scaling.document_rows(document, reason="the reason"))
    assert [row[3] for row in found] == ["\N{EM DASH}", "met"]  # sorted by actors; 6x and 3.33x
    assert "2.50\N{MULTIPLICATION SIGN}" in found[0][1] and "(how it grows with actors" in found[0][2]
    assert "6.00\N{MULTIPLICATION SIGN}" in found[1][1] and "3.33\N{MULTIPLICATION SIGN}" in found[1][1]
    assert found[1][4] == "0.5 \N{RIGHTWARDS ARROW} 1.5" and "the reason" in found[1][5]
    short = _scaling_run({"local": (30.0, 30.0), "ray-12": (5.0, 11.0)})  # the round met, delivery not
    assert [row[3] for row in readme_scaling.document_rows(short, reason="r")] == ["**missed**"]


@pytest.mark.parametrize("document", [
    _scaling_run({"ray-12": (5.0, 9.0)}),  # no in-process arm: no ratio
    _scaling_run({"local": (30.0, 30.0), "ray-12": (5.0, 9.0)}, commit="abc1234+dirty"),
    {"points": {}},
])
def test_a_scaling_run_without_both_arms_or_a_clean_commit_gives_no_rows(document: dict[str, Any]) -> None:
    assert list(readme_scaling.document_rows(document, reason="r")) == []


def test_the_scaling_rows_come_from_the_named_documents_that_exist(tmp_path: pathlib.Path) -> None:
    document = _scaling_run({"local": (30.0, 30.0), "ray-12": (5.0, 9.0)})
    (tmp_path / "here.json").write_text(json.dumps(document))
    assert len(readme_scaling.rows(tmp_path, [("here.json", "r"), ("gone.json", "r")])) == 1
