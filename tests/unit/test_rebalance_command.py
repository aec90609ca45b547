"""`fedspread rebalance` and PlacementService `Rebalance` (issue 28): a whole failback on demand.

The coordinator is the real facade over a World (`tests.support.failback_scene`: a `Never` spread
whose preferred dc1 got a new node), served by a real gRPC server; the command line runs through
click. A dry run prints the steps and moves nothing; without it the rounds make the steps one after
the other, surge first, with no cooldown between them, and the on-demand failback ends once the
placement matches the one from scratch. Explain of the spread carries the `rebalance` entry.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator

import pytest
from click import testing

from federation import cli
from federation.coordinator import facade
from federation.coordinator.model import loop
from federation.coordinator.services import aio_server, placement_service, source
from tests.support import sdk_clients
from tests.support.clock import ManualClock
from tests.support.failback_scene import FULL, KEY, NEW, overflowed, place, report, the_spread

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
Scene = tuple[facade.Coordinator, ManualClock, str]
"""The coordinator, its clock and its PlacementService's address."""


@pytest.fixture()
def scene() -> Iterator[Scene]:
    clock = ManualClock(T0)
    model = overflowed(clock, the_spread("Never"))
    loop.recompute(model, model.inventory("dc1", [FULL, NEW]) | {KEY}, now=clock())
    coordinator = facade.Coordinator(model, clock=clock)
    server = aio_server.AioServer(workers=2)
    placement_service.add_to_server(server.server, source.WorldSource(coordinator))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield coordinator, clock, f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


def rebalance(target: str, *args: str) -> testing.Result:
    return testing.CliRunner().invoke(
        cli.main, ["rebalance", *args, "--coordinator", target, "--insecure", "--timeout", "5"])


def test_a_dry_run_prints_the_steps_and_moves_nothing(scene: Scene) -> None:
    coordinator, _, target = scene
    result = rebalance(target, KEY, "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "shop/web (rebalance policy Never): 2 steps, each surge first",
        "  step 1: 1 from cloud/aws to onprem/dc1",
        "  step 2: 1 from cloud/aws to onprem/dc1",
        "dry run: nothing was started",
    ]
    assert coordinator.world.placements[KEY].counts() == {"onprem": {"dc1": 4}, "cloud": {"aws": 2}}
    assert coordinator.world.rebalancing.state(KEY) is None
    wide = rebalance(target, "web", "-n", "shop", "--dry-run", "--max-surge", "2", "-o", "json")
    assert json.loads(wide.output) == {"spread": KEY, "policy": "Never", "started": False, "steps": [[
        {"fromSubset": "cloud", "fromCluster": "aws", "toSubset": "onprem", "toCluster": "dc1",
         "replicas": 2}]]}


def test_rebalance_makes_every_step_surge_first_without_cooldown(scene: Scene) -> None:
    coordinator, clock, target = scene
    model = coordinator.world
    result = rebalance(target, KEY)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1].startswith("started")
    assert model.placements[KEY].counts() == {"onprem": {"dc1": 5}, "cloud": {"aws": 2}}  # 1 above the total
    assert place(model, report(model, dc1=5, aws=2), clock) == {"onprem": {"dc1": 5}, "cloud": {"aws": 1}}
    clock.advance(1)  # no cooldown: the next round starts the next step
    assert KEY in loop.due(model, since=clock() - datetime.timedelta(seconds=1), now=clock())
    assert place(model, report(model, dc1=5, aws=1), clock) == {"onprem": {"dc1": 6}, "cloud": {"aws": 1}}
    assert place(model, report(model, dc1=6, aws=1), clock) == {"onprem": {"dc1": 6}, "cloud": {"aws": 0}}
    assert place(model, report(model, dc1=6, aws=0), clock) == {"onprem": {"dc1": 6}, "cloud": {"aws": 0}}
    state = model.rebalancing.state(KEY)
    assert state is not None and not state.on_demand  # done: a Never spread stays put again
    assert rebalance(target, KEY).output.strip() == (
        "shop/web: nothing to move (the placement matches the one from scratch)")


@pytest.mark.parametrize("flavour", sdk_clients.FLAVOURS, ids=repr)
def test_explain_and_the_sdk_show_the_rebalance_entry(scene: Scene, flavour: sdk_clients.Flavour) -> None:
    _, _, target = scene
    with flavour.connect(target, timeout=5.0) as client:
        explained = client.explain(KEY).placement
        planned = client.rebalance(KEY, dry_run=True)
    assert explained.rebalance is not None
    assert explained.to_json()["rebalance"] == {"policy": "Never", "moves": [
        {"from": "aws", "to": "dc1", "replicas": 2}]}
    assert planned.entry() == explained.rebalance.entry() and not planned.started
    assert [len(step) for step in planned.steps] == [1, 1]


def test_errors_are_one_line(scene: Scene) -> None:
    _, _, target = scene
    missing = rebalance(target, "shop/nope", "--dry-run")
    assert missing.exit_code == 1 and "shop/nope" in missing.output
    assert rebalance(target, KEY, "--max-surge", "0").exit_code == 2


def test_help_says_what_it_does_for_a_newcomer() -> None:
    result = testing.CliRunner().invoke(cli.main, ["rebalance", "--help"])
    assert result.exit_code == 0
    for words in ("surge", "--dry-run", "--max-surge", "Ready", "Rebalancing condition", "WhenRoom", "patch"):
        assert words in result.output
