"""The Ray wrapper without Ray: LocalBackend answers, shard routing, the unit-test Ray guard, and
the coordinator saying when a parallel round was redone in its own process."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import pytest

from federation.api import cluster, names
from federation.api import spread as spread_api
from federation.coordinator import backends, facade, shards, startup
from federation.coordinator.model import loop, routing, world
from federation.core import fit, placement, placement_inputs
from tests.support import builders

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
ONE_CPU = fit.shape_from_pod_spec({"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]})


def snapshot() -> cluster.CapacitySnapshot:
    def member(name: str, nodes: int) -> dict[str, Any]:
        return {"name": name, "labels": {names.REGION_LABEL: "eu"}, "nodePools": [
            {"count": nodes, "allocatable": {"cpu": "4", "pods": 110}, "requested": {"cpu": "0"}}]}
    return cluster.CapacitySnapshot.model_validate(
        {"clusters": [member("dc1", 2), member("aws", 3), member("gcp", 5)]}
    )


def spec(index: int) -> spread_api.FederatedSpreadSpec:
    return spread_api.FederatedSpreadSpec.model_validate({
        "targetRef": {"name": f"web-{index}"},
        "subsets": [{"name": "onprem", "clusters": ["dc1"], "maxReplicas": index % 4},
                    {"name": "cloud", "clusters": ["aws", "gcp"]}],
        "scheduleStrategy": {"type": "Adaptive" if index % 2 else "Fixed"},
    })


def requests(count: int = 12) -> list[loop.PlaceRequest]:
    snap = snapshot()
    out = []
    for i in range(count):
        marks = (placement.UnschedulableMark("cloud", "aws", NOW),) if i % 5 == 0 else ()
        out.append(loop.PlaceRequest(
            key=f"shop/web-{i}", spec=spec(i), replicas=3 + i, snapshot=snap,
            inputs=placement_inputs.PlacementInputs(
                shape=ONE_CPU if i % 3 else None, current={"onprem": {"dc1": 1}} if i % 2 else None,
                running={"onprem": {"dc1": 1}} if i % 2 else None, marks=marks, now=NOW),
        ))
    return out


def test_local_backend_gives_exactly_placement_place_answers_in_order() -> None:
    batch = requests()
    expected = [
        placement.place(r.spec, replicas=r.replicas, snapshot=r.snapshot, shape=r.inputs.shape,
                        current=r.inputs.current, running=r.inputs.running, unschedulable=r.inputs.marks,
                        now=r.inputs.now)
        for r in batch
    ]
    backend = backends.LocalBackend()
    assert backend.place_batch(batch) == expected
    assert backend.simulate_many(batch) == expected
    assert backend.place_batch([]) == []
    backend.close()


def test_a_request_from_the_world_is_what_the_loop_would_place() -> None:
    model = world.World(lambda: NOW)
    for name, nodes in {"dc1": 1, "aws": 2}.items():
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(nodes)])
        model.heartbeat(name)
    template = {"spec": {"replicas": 1, "template": {"spec": {"containers": [
        {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]}}}}
    keys = []
    for name in ("a", "b"):
        item = spread_api.FederatedSpread.model_validate({
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"targetRef": {"name": name}, "scheduleStrategy": {"type": "Adaptive"},
                     "subsets": [{"name": "onprem", "clusters": ["dc1"]},
                                 {"name": "cloud", "clusters": ["aws"]}]},
        })
        model.upsert_spread(item)
        model.set_target(item.key, replicas=5, template=template)
        keys.append(item.key)
    loop.recompute(model, keys[:1], now=NOW)  # "a" placed: its pending pods are deducted for "b"
    entry = model.spread(keys[1])
    assert entry is not None
    request = loop.request_for(model, entry, replicas=5, now=NOW)
    assert request.key == keys[1]
    expected = [loop.place_one(model, entry, replicas=5, now=NOW)]
    assert backends.LocalBackend().place_batch([request]) == expected


@pytest.mark.parametrize("count", [3, 4, 7])
def test_requests_are_routed_to_the_shard_that_owns_their_key(count: int) -> None:
    keys = [f"ns-{i % 3}/spread-{i}" for i in range(40)]
    groups = routing.group_by_shard(keys, shards=count)
    assert len(groups) == count
    assert sorted(i for g in groups for i in g) == list(range(len(keys)))
    for shard, indices in enumerate(groups):
        assert indices == sorted(indices)
        assert all(routing.shard_of(keys[i], shards=count) == shard for i in indices)


def test_one_shard_owns_everything_and_zero_shards_is_refused() -> None:
    assert routing.group_by_shard(["a/b", "c/d"], shards=1) == [[0, 1]]
    with pytest.raises(ValueError, match="shards must be at least 1"):
        routing.group_by_shard(["a/b"], shards=0)


def test_the_autouse_guard_forbids_starting_ray() -> None:
    import ray

    with pytest.raises(RuntimeError, match="unit tests must not start Ray; use LocalBackend"):
        ray.init()
    with pytest.raises(RuntimeError, match="unit tests must not start Ray"):
        shards.RayBackend(shards=2)
    assert not ray.is_initialized()


class ParallelLocal(backends.LocalBackend):
    """In-process answers through the parallel path, as the Ray shards' round takes it."""

    parallel = True


def sharing(
    count: int, *, cpu: str = "1", backend: backends.PlacementBackend | None = None,
) -> tuple[facade.Coordinator, world.World, list[str]]:
    """`count` spreads over the same two clusters (20 one-cpu pods of room: `count` of 2 replicas
    each and more compete for every pool), placed through the parallel path."""
    clock = lambda: NOW  # noqa: E731
    model = world.World(clock)
    for name, nodes in (("dc1", 2), ("aws", 3)):
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(nodes)])
        model.heartbeat(name)
    keys = []
    for index in range(count):
        item = builders.federated_spread(f"web-{index}", [{"name": "all", "clusters": ["dc1", "aws"]}],
                                         strategy="Adaptive")
        model.upsert_spread(item)
        model.set_target(item.key, replicas=2, template=builders.deployment(f"web-{index}", cpu=cpu))
        keys.append(item.key)
    return facade.Coordinator(model, clock=clock, backend=backend or ParallelLocal()), model, keys


class ParallelFromThree(ParallelLocal):
    """A parallel backend whose crossover is three spreads, counting the batches it is asked."""

    parallel_from = 3

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def place_batch(self, requests: Sequence[loop.PlaceRequest]) -> list[placement.Placement]:
        self.asked.append(len(requests))
        return super().place_batch(requests)


@pytest.mark.parametrize("count", [2, 3])
def test_the_coordinator_asks_a_parallel_backend_only_from_its_crossover(count: int) -> None:
    """A round of fewer spreads than the backend's `parallel_from` (the Ray shards':
    `RAY_ROUND_MIN_SPREADS`, measured) is placed in the coordinator's process, with the answer a
    round on the backend gives."""
    backend = ParallelFromThree()
    coordinator, _model, keys = sharing(count, backend=backend)
    placed = coordinator.publish(keys).placements
    assert backend.asked == ([] if count < 3 else [3])
    on_backend, _, same_keys = sharing(count)  # ParallelLocal: every round of two or more asked
    assert placed == on_backend.publish(same_keys).placements and len(placed) == count


def test_a_round_below_the_crossover_is_not_said_to_be_wasted(caplog: pytest.LogCaptureFixture) -> None:
    """The log line that Ray gained nothing speaks of a round the shards were asked for only."""
    class FarCrossover(ParallelLocal):
        parallel_from = facade.WASTED_ROUND_SPREADS + 1

    coordinator, _model, keys = sharing(facade.WASTED_ROUND_SPREADS, backend=FarCrossover())
    with caplog.at_level("WARNING", logger="federation.coordinator.facade"):
        result = coordinator.publish(keys)
    assert result.replaced * 2 > len(result.placements) == facade.WASTED_ROUND_SPREADS
    assert not coordinator.ray_gained_nothing and not caplog.records


def test_the_ray_backends_crossover_is_the_measured_constant_unless_the_flag_says() -> None:
    assert shards.RayBackend.parallel_from == shards.RAY_ROUND_MIN_SPREADS > 2
    assert backends.LocalBackend.parallel_from == 2
    settings = startup.CoordinatorConfig(hub_kubeconfig=None)
    assert settings.ray_round_min_spreads == shards.RAY_ROUND_MIN_SPREADS
    with pytest.raises(ValueError, match="at least 2 spreads"):  # refused before Ray is asked anything
        shards.RayBackend(shards=2, parallel_from=1)
    from federation.cli import coordinator as coordinator_cli
    flag = next(p for p in coordinator_cli.coordinator_command.params if p.name == "ray_round_min_spreads")
    assert f"Default: {shards.RAY_ROUND_MIN_SPREADS}," in " ".join((flag.help or "").split()), \
        "the --help names the constant's value"


def test_a_parallel_round_redone_in_the_coordinator_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    coordinator, model, keys = sharing(facade.WASTED_ROUND_SPREADS)
    with caplog.at_level("WARNING", logger="federation.coordinator.facade"):
        first = coordinator.publish(keys)
        for key in keys:  # a new round over the same shared clusters: redone again, said no more
            name = key.split("/")[1]
            model.set_target(key, replicas=3, template=builders.deployment(name, cpu="1"))
        coordinator.publish(keys)
    assert first.replaced * 2 > len(first.placements) == facade.WASTED_ROUND_SPREADS
    said = [r for r in caplog.records if "mostly redone in the coordinator" in r.getMessage()]
    assert len(said) == 1 and coordinator.ray_gained_nothing
    assert said[0].placed_again == first.replaced  # type: ignore[attr-defined]


def test_a_small_round_says_nothing_however_much_is_redone() -> None:
    coordinator, _model, keys = sharing(facade.WASTED_ROUND_SPREADS - 1)
    result = coordinator.publish(keys)
    assert result.replaced * 2 > len(result.placements) and not coordinator.ray_gained_nothing


def test_a_parallel_round_with_room_for_all_places_nothing_again() -> None:
    """Spreads sharing clusters with room for every pod (100 pods of 0.1 cpu on 200 slots): the
    shards' answers against the round's snapshot are final, and nothing is said."""
    coordinator, _model, keys = sharing(facade.WASTED_ROUND_SPREADS, cpu="100m")
    result = coordinator.publish(keys)
    assert len(result.placements) == facade.WASTED_ROUND_SPREADS
    assert all(p.placed == 2 for p in result.placements.values())
    assert result.replaced == 0 and not coordinator.ray_gained_nothing
