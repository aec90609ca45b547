"""`bench/profile_events.py` at a tiny size: it builds the placement benchmark's world and times
each event.

Why: the script is run by hand, rarely, and it once stopped importing for weeks after the
placement benchmark's world moved to `bench/placement_world.py`. At a tiny shape it runs the whole
path in well under a second; the timings are its output and are not checked, but what each event
placed is: every spread in the full round, and in a cordon exactly the spreads that can select the
cordoned cluster. The loop that adds the world's spreads (`placement_world.add_spreads`, shared by
bench/placement.py and bench/placement_crossover.py) is held here too, and so is the collector the
script runs with: the coordinator's, unless asked for the interpreter's.
"""

from __future__ import annotations

import gc
import json

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
    assert list(found) == ["full round", "scale-up of one spread", "capacity shrink", "capacity grow",
                           "cordon (NoExecute)"]
    assert found["full round"]["placed"] == SHAPE.spreads
    assert found["scale-up of one spread"]["placed"] == 1
    cordoned = SHAPE.clusters // 2
    expected = sum(_can_select(i, cordoned, SHAPE) for i in range(SHAPE.spreads))
    assert 0 < expected < SHAPE.spreads
    assert found["cordon (NoExecute)"]["affected"] == expected
    assert all(timing["cpu_s"] >= 0 and timing["s"] >= 0 for timing in found.values())


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
