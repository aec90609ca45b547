"""One value for what a placement reads (`core.placement_inputs`), answered the same on every path.

Why: the request built for a round, a what-if and the failback's plan each used to pass their own
subset of the inputs; the what-if branch of `loop.answer` dropped the last placement's waiting
replicas. These tests fail if a branch drops an input again or the value stops travelling whole.
"""

from __future__ import annotations

import datetime
import pickle

from federation.coordinator.model import loop
from federation.core import placement, placement_inputs
from tests.support import builders

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
SPEC = builders.spread_spec({"name": "onprem", "clusters": ["dc1"]}, {"name": "cloud", "clusters": ["aws"]},
                            strategy="Adaptive")
SNAPSHOT = builders.snapshot(builders.member("dc1", builders.pool(1, pods=2)),
                             builders.member("aws", builders.pool(1, pods=10)))


def test_a_what_if_forwards_every_input_the_core_takes() -> None:
    inputs = placement_inputs.PlacementInputs(
        current={"onprem": {"dc1": 0}, "cloud": {"aws": 2}},
        running={"onprem": {"dc1": 0}, "cloud": {"aws": 0}},
        marks=(placement.UnschedulableMark("onprem", "dc1", NOW - datetime.timedelta(days=1)),), now=NOW,
        waiting={"cloud": {"aws": 1}})
    request = loop.PlaceRequest(key="shop/web", spec=SPEC, replicas=4, snapshot=SNAPSHOT, inputs=inputs)
    expected = placement.place(SPEC, replicas=4, snapshot=SNAPSHOT, current=inputs.current,
                               running=inputs.running, unschedulable=inputs.marks, now=NOW,
                               waiting=inputs.waiting)
    assert loop.answer(request) == expected
    without_waiting = placement.place(SPEC, replicas=4, snapshot=SNAPSHOT, current=inputs.current,
                                      running=inputs.running, unschedulable=inputs.marks, now=NOW)
    assert expected != without_waiting, "the case must depend on `waiting`, or it proves nothing"


def test_the_inputs_travel_whole_to_a_shard() -> None:
    inputs = placement_inputs.PlacementInputs(current={"onprem": {"dc1": 1}}, now=NOW,
                                              marks=(placement.UnschedulableMark("cloud", "aws", NOW),))
    request = loop.PlaceRequest(key="shop/web", spec=SPEC, replicas=3, snapshot=SNAPSHOT, inputs=inputs)
    assert pickle.loads(pickle.dumps(request)) == request
    assert inputs.place_args() == {"current": inputs.current, "running": None, "unschedulable": inputs.marks,
                                   "now": NOW, "waiting": None, "remainder_phase": None}
