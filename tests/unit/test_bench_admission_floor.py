"""The admission benchmark's floor, added latency, handler wait and baseline processes, on hand-made
numbers (`bench/admission_report.py`, `bench/webhook_samples.py`, `bench/admission_client.py`).

Why: issue 29 moved the admission goals onto latency *added* over the apiserver's own path (a
floor with no webhook, measured in the same run), measures a candidate change to the handler's
wait against the agent as it ships in the same run, and split the baseline into processes. Each
rule that turns runs into a verdict is held here: the floor runs at every level and the candidate
only at 5 clients, in rotating order; added p99 is paired run by run; a ratio of added latency
only where the baseline did not collapse, a fedspread indistinguishable from the floor meeting it;
a fedspread collapse where the floor stood is a goal missed; the slowest samples' wait is split
into blocked and preempted.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from admission_rows import LIMITS
from admission_rows import row as _row

from bench import admission_client, webhook_samples
from bench import admission_report as report


def _document(rows: list[dict[str, Any]], clients: tuple[int, ...] = (5,)) -> dict[str, Any]:
    return report.document(rows, levels=[report.Level.of(c) for c in clients], replicas=10, pods=12,
                           limits=LIMITS, method={})


def test_the_floor_runs_at_every_level_and_the_candidate_only_at_five_clients_in_rotating_order() -> None:
    modes = (*report.EVERY_LEVEL, report.AFTER)
    levels = [report.Level.of(1), report.Level.of(5)]
    order = report.plan(levels, 3, modes)
    one = [(mode, run) for level, mode, run in order if level.name == "clients-1"]
    five = [(mode, run) for level, mode, run in order if level.name == "clients-5"]
    assert len(one) == 3 * 4 and report.AFTER not in {m for m, _ in one}
    assert len(five) == 3 * 5 and sum(m == report.AFTER for m, _ in five) == 3
    first_of_each_run = [next(m for m, r in one if r == run) for run in range(3)]
    assert first_of_each_run == ["fedspread", "baseline", "baseline-1"], "each run starts one further on"
    assert next(m for m, r in five if r == 0) == "baseline", "each level starts one further on"
    assert report.plan(levels, 3) == report.plan(levels, 3, report.MODES), "two modes: swapped pairs"


def test_added_latency_is_paired_run_by_run_and_judged_against_two_milliseconds() -> None:
    rows = [_row("floor", r, create=c) for r, c in enumerate((20.0, 40.0, 30.0))]
    rows += [_row("fedspread", r, create=c) for r, c in enumerate((21.0, 41.5, 33.0))]
    rows += [_row("baseline", r, create=c) for r, c in enumerate((60.0, 80.0, 70.0))]
    found = _document(rows)
    level = found["levels"]["clients-5"]
    assert level["fedspread"]["added_p99_ms"]["median"] == 1.5, "run i against run i, not medians"
    ours = level["fedspread"]["added_p99_ms"]
    assert (ours["min"], ours["max"]) == (1.0, 3.0)
    assert level["baseline"]["added_p99_ms"]["median"] == 40.0
    assert level["added_ratios"]["baseline"]["ratio"] == pytest.approx(26.7)
    assert found["goals"]["fedspread_added_p99_ms"] == {
        "figure": {"clients-5": 1.5}, "goal": "<= 2.0 ms over the floor at 1, 5, 20, 50 clients", "met": True}
    assert found["goals"]["added_ratio_baseline"]["met"] is True
    assert found["goals"]["fedspread_no_collapse_beyond_floor"]["met"] is True
    slower = [_row("fedspread", r, create=c + 5.0) for r, c in enumerate((21.0, 41.5, 33.0))]
    missed = _document([r for r in rows if r["mode"] != "fedspread"] + slower)
    assert missed["goals"]["fedspread_added_p99_ms"]["met"] is False
    assert missed["goals"]["added_ratio_baseline"]["met"] is True, "65 / 6.5 ms added is 10x"


def test_a_fedspread_within_the_floor_meets_the_ratio_and_a_collapsed_baseline_is_not_compared() -> None:
    rows = [_row("floor", r, create=30.0) for r in range(3)]
    rows += [_row("fedspread", r, create=29.0) for r in range(3)]
    rows += [_row("baseline", r, create=90.0, refused=3) for r in range(3)]
    rows += [_row("baseline-1", r, create=50.0) for r in range(3)]
    found = _document(rows)
    ratios = found["levels"]["clients-5"]["added_ratios"]
    assert not ratios["baseline"]["compared"], "a baseline that refused creates is not healthy"
    assert ratios["baseline-1"] == {"compared": True, "ratio": None, "fedspread_within_floor": True,
                                    "baseline_added_ms": 20.0, "fedspread_added_ms": -1.0}
    assert found["goals"]["added_ratio_baseline"]["met"] is None, "nothing compared is not a goal met"
    assert found["goals"]["added_ratio_baseline-1"]["met"] is True
    assert found["collapse"]["baseline"]["clients"] == 5 and found["collapse"]["floor"]["clients"] is None


def test_fedspread_collapsing_where_the_floor_did_not_is_a_goal_missed() -> None:
    rows = []
    for clients in (50, 200):
        floor_late = clients == 200
        rows += [_row("floor", r, clients=clients, create=3000.0 if floor_late else 80.0) for r in range(3)]
        rows += [_row("fedspread", r, clients=clients, create=3000.0 if r == 0 else 90.0) for r in range(3)]
        rows += [_row("baseline", r, clients=clients, create=900.0) for r in range(3)]
    found = _document(rows, clients=(50, 200))
    verdict = found["goals"]["fedspread_no_collapse_beyond_floor"]
    assert verdict["figure"] == {"fedspread_collapsed_where_floor_did_not": [50], "levels_tried": [50, 200]}
    assert verdict["met"] is False, "one collapsed run where no floor run collapsed"


def _sample(wall: float, cpu: float, *, preempted: bool, blocked: bool) -> webhook_samples.Sample:
    return webhook_samples.Sample(0.0, "CREATE", wall / 1000, cpu / 1000, preempted, blocked)


def test_the_wait_profile_splits_the_slowest_samples_by_what_held_them() -> None:
    fast = [_sample(0.3, 0.3, preempted=False, blocked=False)] * 96
    slow = [_sample(6.0, 0.5, preempted=False, blocked=True),
            _sample(5.0, 0.4, preempted=True, blocked=False), _sample(7.0, 0.5, preempted=True, blocked=True),
            _sample(8.0, 0.6, preempted=False, blocked=True)]
    profile = report.wait_profile(fast + slow)
    assert profile["samples"] == 2, "every sample at or above the p99 (the 99th of 100 is 7.0 ms)"
    assert (profile["blocked"], profile["preempted"], profile["both"], profile["neither"]) == (1, 0, 1, 0)
    assert profile["wait_p50_ms"] == 6.5 and profile["cpu_p50_ms"] == 0.5
    assert report.wait_profile([]) == {"samples": 0}
    row = _row("fedspread", 0, create=10.0, samples=fast + slow)
    assert row["handler_blocked"] == 3 and row["handler_wait_p99_ms"] == 6.5


def test_the_handler_before_and_after_are_compared_in_the_same_run() -> None:
    rows = [_row("fedspread", r, create=30.0, handler=4.0) for r in range(3)]
    rows += [_row("fedspread-switch-0.5ms", r, create=30.0, handler=0.8) for r in range(3)]
    rows += [_row("baseline", r, create=90.0) for r in range(3)]
    found = _document(rows)
    assert found["handler_wait"]["ratio_before_over_after"] == 5.0
    assert found["handler_wait"]["before"]["handler_p99_ms"]["median"] == 4.0
    assert found["handler_wait"]["after"]["handler_p99_ms"]["median"] == 0.8
    assert "fedspread-switch-0.5ms" not in found["collapse"], "the candidate is no mode to collapse"
    assert _document(rows[:3] + rows[6:])["handler_wait"] is None


def test_a_baseline_of_several_processes_is_read_as_one() -> None:
    first = webhook_samples.Recorded(samples=(_sample(1.0, 0.5, preempted=False, blocked=False),),
                                     counters={"conflicts": 2})
    later = dataclasses.replace(first.samples[0], at=5.0)
    second = webhook_samples.Recorded(samples=(later,), counters={"conflicts": 1, "controller_writes": 7})
    both = webhook_samples.merged([second, first])
    assert both.counters == {"conflicts": 3, "controller_writes": 7}
    assert [s.at for s in both.samples] == [0.0, 5.0]


def test_old_samples_without_the_blocked_flag_still_load(tmp_path: Any) -> None:
    path = tmp_path / "samples.json"
    path.write_text('{"samples": [[1.0, "CREATE", 0.001, 0.0005, false]], "counters": {}}')
    assert webhook_samples.load(path).samples[0].blocked is None


def test_the_client_backs_off_before_retrying_a_refused_create() -> None:
    delays = [admission_client.retry_delay(attempt) for attempt in range(4)]
    for attempt, delay in enumerate(delays):
        base = admission_client.RETRY_BACKOFF_SECONDS * 2 ** attempt
        assert base <= delay <= base * (1 + admission_client.RETRY_JITTER)


def test_the_headline_table_gives_the_added_latency_goals_when_the_document_has_them() -> None:
    from bench import readme_admission, readme_parts

    rows = [_row("floor", r, create=30.0) for r in range(3)]
    rows += [_row("fedspread", r, create=31.0, handler=4.0) for r in range(3)]
    rows += [_row("fedspread-switch-0.5ms", r, create=31.0, handler=4.0) for r in range(3)]
    rows += [_row("baseline", r, create=90.0, refused=2) for r in range(3)]
    rows += [_row("baseline-1", r, create=40.0) for r in range(3)]
    document = {"admission": _document(rows), "command": "python -m bench.run --only admission",
                "started_at": "2026-11-29T11:00:00+00:00"}
    found = {figure: (goal, verdict) for _, figure, goal, verdict, _, _ in readme_admission.rows(document)}
    added = next(figure for figure in found if figure.startswith("create p99 added over the floor"))
    assert "fedspread 1 ms (1\N{EN DASH}1)" in added and "baseline-1 10.0 ms" in added, added
    assert found[added] == ("≤ 2 ms (fedspread)", "met")
    ratios = {figure.split("'")[0]: (figure.split(": ")[-1], verdict)
              for figure, (_, verdict) in found.items() if "added create p99 over fedspread's" in figure}
    assert ratios == {"baseline": ("no such level", readme_parts.NOT_COMPARABLE),
                      "baseline-1": ("10\N{MULTIPLICATION SIGN} at 5 clients", "met")}, (
        "the 2-replica baseline refused creates; the 1-replica one adds 10 ms to fedspread's 1 ms: 10x")
    assert found["fedspread collapsed where the floor did not: nowhere (client levels tried: 5)"] == (
        "at no level", "met")
    assert any(f.startswith("handler wall p99 at 5 clients as the agent ships") for f in found)


def test_a_smaller_run_may_name_the_modes_of_a_level() -> None:
    modes = (*report.EVERY_LEVEL, report.AFTER)
    levels = [report.Level.of("replicaset"), report.Level.of(5)]
    order = report.plan(levels, 1, modes, only={"replicaset": ("fedspread", "baseline")})
    assert [(level.name, mode) for level, mode, _ in order][:2] == [("replicaset", "fedspread"),
                                                                  ("replicaset", "baseline")]
    assert len(order) == 2 + 5, "the 5-client level keeps every mode"
