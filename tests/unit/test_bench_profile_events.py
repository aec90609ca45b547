"""`bench/profile_events.py` at a tiny size: it builds the placement benchmark's world and times
each event.

Why: the script is run by hand, rarely, and it once stopped importing for weeks after the
placement benchmark's world moved to `bench/placement_world.py`. At a tiny shape it runs the whole
path in well under a second; the timings are its output and are not checked, but what each event
placed is: every spread in the full round, and in a cordon exactly the spreads that can select the
cordoned cluster. The loop that adds the world's spreads (`placement_world.add_spreads`, shared by
bench/placement.py and bench/placement_crossover.py) is held here too, and so is the collector the
script runs with (the coordinator's, unless asked for the interpreter's), the agents it attaches
with `--streams` (each event then queues their messages) and the record its JSON line is.
"""

from __future__ import annotations

import gc
import json
import pathlib
import shlex
from typing import Any

import pytest

from bench import placement_crossover, placement_world, profile_events
from federation import collector
from federation.coordinator.model import world

SHAPE = placement_world.Shape(spreads=40, clusters=10, per_spread=5)


def _can_select(index: int, cluster: int, shape: placement_world.Shape) -> bool:
    home = placement_world.home_of(index, shape)
    if placement_world.hungry(index):
        return cluster in (home, placement_world.spill_of(index, shape))
    region = placement_world.region_of(home, shape)
    return cluster == home or placement_world.region_of(cluster, shape) == region


def test_each_event_is_timed_and_places_the_spreads_it_concerns() -> None:
    found = profile_events.measure(SHAPE, profile=False).timings
    assert list(found) == ["full round", "full round, again", "scale-up of one spread", "capacity shrink",
                           "capacity grow", "cordon (NoExecute)"]
    assert found["full round"]["placed"] == found["full round, again"]["placed"] == SHAPE.spreads
    assert found["scale-up of one spread"]["placed"] == 1
    cordoned = SHAPE.clusters // 2
    expected = sum(_can_select(i, cordoned, SHAPE) for i in range(SHAPE.spreads))
    assert 0 < expected < SHAPE.spreads
    assert found["cordon (NoExecute)"]["affected"] == expected
    assert all(timing["cpu_s"] >= 0 and timing["s"] >= 0 for timing in found.values())
    assert all(timing["collector_s"] >= 0 and timing["collections"] >= 0 for timing in found.values())


@pytest.mark.parametrize("shape", ['{"spreads": 40, "clusterz": 10}', "[40, 10]", "not json"])
def test_a_shape_that_is_not_one_is_refused_at_parse_time(shape: str) -> None:
    with pytest.raises(SystemExit) as refused:
        profile_events.main(["--shape", shape, "--json"])
    assert refused.value.code == 2


def test_the_shared_spread_loop_adds_every_spread_with_its_target_in_index_order() -> None:
    shape = placement_world.Shape(spreads=12, clusters=6, per_spread=3)
    model = placement_crossover.build(shape)  # placement_world.add_spreads, then one round in-process
    keys = [placement_world.spread(i, shape).key for i in range(shape.spreads)]
    for index, key in enumerate(keys):
        entry = model.spread(key)
        assert entry is not None, key
        assert entry.replicas == placement_world.replicas_of(index)
        assert entry.template == placement_world.template(index, shape)
    assert set(model.placements) == set(keys), "every spread placed once"
    fresh = world.World(lambda: placement_crossover.NOW)
    assert placement_world.add_spreads(fresh, shape) == keys
    again = placement_world.add_spread(fresh, placement_world.spread(0, shape), index=0, shape=shape)
    assert keys[0] in again


@pytest.mark.parametrize(("flags", "expected"),
                         [([], list(collector.THRESHOLDS)), (["--interpreter-gc"], None)])
def test_the_events_are_timed_with_the_collector_the_coordinator_ships_with(
        flags: list[str], expected: list[int] | None, capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    assert before != collector.THRESHOLDS, "the test process runs with the interpreter's thresholds"
    profile_events.main(["--shape", '{"spreads": 6, "clusters": 3, "per_spread": 2}', "--json", *flags])
    printed = json.loads(capsys.readouterr().out)
    assert printed["gc_thresholds"] == (expected or list(before))
    assert gc.get_threshold() == before, "the thresholds are restored"


@pytest.mark.parametrize(("flags", "freezing"), [([], True), (["--no-freeze"], False)])
def test_the_events_freeze_a_large_rounds_survivors_as_the_coordinator_does_unless_asked_not_to(
        flags: list[str], freezing: bool, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []
    real = collector.freeze_rounds

    def recorded(on: bool = True, **given: Any) -> bool:
        asked.append(on)
        return real(on, **given)

    monkeypatch.setattr(collector, "freeze_rounds", recorded)
    monkeypatch.setattr(collector, "FREEZE_FROM", 1)  # the tiny shape's rounds count as large
    profile_events.main(["--shape", '{"spreads": 6, "clusters": 3, "per_spread": 2}', "--json", *flags])
    assert json.loads(capsys.readouterr().out)["freeze_rounds"] is freezing
    assert asked == [freezing, False], "on (or not) for the run, then as the test process had it"
    assert gc.get_freeze_count() == 0, "nothing is left frozen in the test process"


def test_with_streams_every_agent_is_attached_and_the_round_queues_a_message_per_cluster_it_uses() -> None:
    coordinator, keys = profile_events.build(SHAPE, streams=True)
    assert coordinator.connected() == [placement_world.cluster_name(i) for i in range(SHAPE.clusters)]
    before = coordinator.backlog()
    with coordinator.lock:
        result = coordinator.publish(keys)
    used = {(name, key) for key, found in result.placements.items()
            for subset in found.subsets for name, count in subset.clusters.items() if count > 0}
    assert used, "the round placed replicas"
    assert coordinator.backlog() - before >= len(used), "an assignment queued for every cluster a spread uses"
    quiet, quiet_keys = profile_events.build(SHAPE)
    with quiet.lock:
        quiet.publish(quiet_keys)
    assert quiet.connected() == [] and quiet.backlog() == 0, "without streams no message is built"


def test_the_json_line_names_its_command_and_commit_and_goes_to_the_output_file(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "events.json"
    arguments = ["--shape", '{"spreads": 6, "clusters": 3, "per_spread": 2}', "--json", "--streams",
                 "--output", str(output)]
    profile_events.main(arguments)
    printed = json.loads(capsys.readouterr().out)
    assert json.loads(output.read_text()) == printed
    assert printed["command"] == shlex.join(["python", "-m", "bench.profile_events", *arguments])
    assert printed["streams"] is True and printed["backend"] == "local"
    assert printed["commit"] != "unknown" and set(printed["load_average"]) == {"at_start", "at_end"}
    assert printed["full round"]["placed"] == 6


def test_an_output_file_without_json_is_refused() -> None:
    with pytest.raises(SystemExit) as refused:
        profile_events.main(["--output", "x.json"])
    assert refused.value.code == 2


def test_single_spread_scales_are_sampled_and_their_percentiles_reported(
        capsys: pytest.CaptureFixture[str]) -> None:
    found = profile_events.measure(SHAPE, profile=False, scale_samples=7).timings["single-spread scales"]
    assert found["n"] == 7
    assert 0 < found["p50_ms"] <= found["p99_ms"] <= found["max_ms"]
    profile_events.main(["--shape", '{"spreads": 6, "clusters": 3, "per_spread": 2}', "--scale-samples", "3",
                         "--top", "1"])
    assert "=== single-spread scales: n 3, p50_ms" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        profile_events.main(["--scale-samples", "-1"])
    assert refused.value.code == 2
