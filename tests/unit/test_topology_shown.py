"""Everything that shows a placement names the rule of `topologySpread` and floors that decided it:
`fedspread simulate` (json and table), the SDK's placement, simulation and explanation, `fedspread
get placement -o json`, and the `Placed`/`CapacityExhausted` conditions ("floor 2",
"topologySpread topology.fedspread.io/region maxSkew 1", "floor 3 of subset b waits for room").

The spread is examples/topology-spread.yaml (onprem dc1 first, then the eu region with a floor of 2,
regions within one replica of each other) on the demo's snapshot, so the numbers are the ones its
comment documents."""

from __future__ import annotations

import datetime
import json
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from click import testing

from federation import cli
from federation.api import names, problems, spread
from federation.coordinator.services import aio_server, placement_service
from federation.coordinator.wire import convert
from federation.core import placement, spread_status
from tests.support import builders, in_memory_source, sdk_clients

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "topology-spread.yaml"
DEMO = EXAMPLES / "simulate" / "demo-federation.yaml"
SKEW = f"topologySpread {names.REGION_LABEL} maxSkew 1"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def simulate(*args: str) -> testing.Result:
    result = testing.CliRunner().invoke(cli.main, ["simulate", "-f", str(EXAMPLE), "--clusters", str(DEMO),
                                                   *args], catch_exceptions=False, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result


def reasons_by_subset(document: dict[str, Any]) -> dict[str, list[str]]:
    return {s["name"]: s["reasons"] for s in document["subsets"]}


def example_spread() -> dict[str, Any]:
    """The example's FederatedSpread document (the file's second)."""
    found: dict[str, Any] = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d][1]
    return found


def example_spec() -> spread.FederatedSpreadSpec:
    return spread.FederatedSpreadSpec.model_validate(example_spread()["spec"])


def demo_snapshot() -> Any:
    return problems.load_snapshot(DEMO)


# --- fedspread simulate --------------------------------------------------------------------------


def test_simulate_json_names_the_floor_and_the_constraint_per_subset() -> None:
    five = json.loads(simulate("--replicas", "5").stdout)
    assert {s["name"]: s["replicas"] for s in five["subsets"]} == {"onprem": 3, "eu": 2}
    assert reasons_by_subset(five) == {"onprem": [], "eu": ["floor 2"]}
    nine = json.loads(simulate("--replicas", "9").stdout)
    assert {s["name"]: s["replicas"] for s in nine["subsets"]} == {"onprem": 5, "eu": 4}
    # onprem was refused a 4th and a 6th replica: the skew rule, not its order, bounded it.
    assert reasons_by_subset(nine) == {"onprem": [SKEW], "eu": []}


def test_simulate_table_shows_the_same_rules_as_notes() -> None:
    assert "floor 2" in simulate("--replicas", "5", "-o", "table").stdout
    assert SKEW in simulate("--replicas", "9", "-o", "table").stdout


def test_a_floor_kept_through_a_scale_down_is_named_and_current_reads_older_documents(
        tmp_path: pathlib.Path) -> None:
    nine = json.loads(simulate("--replicas", "9").stdout)
    older = {key: value for key, value in nine.items()}
    older["subsets"] = [{k: v for k, v in s.items() if k != "reasons"} for s in nine["subsets"]]
    current = tmp_path / "before-reasons.json"
    current.write_text(json.dumps(older))  # a document written before subsets had "reasons"
    three = json.loads(simulate("--replicas", "3", "--current", str(current)).stdout)
    assert {s["name"]: s["clusters"] for s in three["subsets"]} == {
        "onprem": {"dc1": 1}, "eu": {"aws-eu": 1, "gcp-eu": 1}}
    assert reasons_by_subset(three) == {"onprem": [], "eu": ["floor 2"]}


# --- conditions ----------------------------------------------------------------------------------


def conditions(spec: spread.FederatedSpreadSpec, result: placement.Placement) -> dict[str, Any]:
    found = spread_status.spread_status(placement=result, spec=spec, generation=1, reports={}, marks=(),
                                        previous=None, now=NOW)
    return {c.type: c for c in found.conditions}


def test_capacity_exhausted_names_the_floor_that_waits_for_room_not_the_other_subsets() -> None:
    tight = builders.snapshot(builders.member("a1", builders.pool(1, pods=10), region="a"),
                              builders.member("b1", builders.pool(1, pods=1), region="b"))
    spec = spread.FederatedSpreadSpec.model_validate({
        "targetRef": {"name": "web"}, "scheduleStrategy": {"type": "Adaptive"},
        "subsets": [{"name": "a", "clusters": ["a1"]}, {"name": "b", "clusters": ["b1"], "minReplicas": 3}]})
    result = placement.place(spec, replicas=5, snapshot=tight)
    exhausted = conditions(spec, result)["CapacityExhausted"]
    assert (exhausted.status, exhausted.reason) == ("True", "NoCapacity")
    assert exhausted.message == (
        "2 replicas wait Pending for capacity (2 in b): floor 3 of subset b waits for room (2 replicas); "
        "add nodes to its clusters or lower its minReplicas")


def test_capacity_exhausted_names_a_waiting_floor_beside_an_overflow_that_waits() -> None:
    tight = builders.snapshot(builders.member("a1", builders.pool(1, pods=2), region="a"),
                              builders.member("b1", builders.pool(1, pods=1), region="b"))
    spec = spread.FederatedSpreadSpec.model_validate({
        "targetRef": {"name": "web"}, "scheduleStrategy": {"type": "Adaptive"},
        "subsets": [{"name": "a", "clusters": ["a1"]}, {"name": "b", "clusters": ["b1"], "minReplicas": 2}]})
    result = placement.place(spec, replicas=6, snapshot=tight)
    assert result.capacity_exhausted == 3  # b's floor: 1 waits; then 2 more than a and b hold
    message = conditions(spec, result)["CapacityExhausted"].message
    assert message.startswith("3 replicas wait Pending for capacity (")
    assert "floor 2 of subset b waits for room (1 replica)" in message
    assert "a has no free capacity" in message
    assert message.endswith(
        "; add nodes to its clusters or lower its minReplicas and add nodes or raise maxReplicas")


def test_all_placed_keeps_the_constraint_that_bounded_a_subset_in_its_reasons() -> None:
    spec = example_spec()
    result = placement.place(spec, replicas=9, snapshot=demo_snapshot())
    placed = conditions(spec, result)["Placed"]
    assert (placed.status, placed.reason) == ("True", "AllPlaced")
    assert result.subsets[0].reason_texts == (SKEW,)


# --- the SDK, explain and fedspread get ----------------------------------------------------------


@pytest.fixture()
def target() -> Iterator[str]:
    """A PlacementService over the example's placement of 9 (key shop/web) on the demo's clusters."""
    snapshot = demo_snapshot()
    records = [convert.ClusterRecord(name=c.name, labels=dict(c.labels), node_pools=tuple(c.node_pools))
               for c in snapshot.clusters]
    source = in_memory_source.InMemorySource(clusters=records)
    spec = example_spec()
    source.put("shop/web", convert.PlacementRecord(
        key="shop/web", placement=placement.place(spec, replicas=9, snapshot=snapshot), spec=spec,
        generation=1, computed_at=NOW))
    server = aio_server.AioServer(workers=2)
    placement_service.add_to_server(server.server, source)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


@pytest.mark.parametrize("flavour", sdk_clients.FLAVOURS, ids=repr)
def test_the_sdk_names_the_rules_in_placement_simulation_and_explanation(
        target: str, flavour: sdk_clients.Flavour) -> None:
    with flavour.connect(target, timeout=5.0) as client:
        live = client.placement("shop/web")
        assert [(s.name, s.replicas, s.reasons) for s in live.subsets] == [
            ("onprem", 5, [SKEW]), ("eu", 4, [])]
        why = client.explain("shop/web")
        assert [(s.name, s.reasons) for s in why.subsets] == [("onprem", [SKEW]), ("eu", [])]
        simulated = client.simulate(example_spread(), replicas=5)
        assert [(s.name, s.replicas, s.reasons) for s in simulated.subsets] == [
            ("onprem", 3, []), ("eu", 2, ["floor 2"])]


def test_get_placement_wide_shows_the_rules_as_notes(target: str) -> None:
    shown = testing.CliRunner().invoke(
        cli.main, ["get", "placement", "shop/web", "-o", "wide", "--coordinator", target, "--insecure"],
        env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    onprem = next(line for line in shown.output.splitlines() if " onprem " in line)
    assert SKEW in onprem


def test_get_placement_json_is_the_simulate_shape_with_the_reasons(target: str) -> None:
    shown = testing.CliRunner().invoke(
        cli.main, ["get", "placement", "shop/web", "-o", "json", "--coordinator", target, "--insecure"])
    assert shown.exit_code == 0, shown.output
    live = json.loads(shown.output)
    offline = json.loads(simulate("--replicas", "9").stdout)
    assert {k: v for k, v in live.items() if k != "ready"} == offline
