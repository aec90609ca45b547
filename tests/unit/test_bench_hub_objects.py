"""The hub point's objects are the benchmark's federation, and its status check reads a status right.

Why: the point compares a federation fed to the World in process with the same federation applied
through a hub, so the FederatedSpread a user would apply must be the very spread the in-process
points place (`placement_world.spread`), and `shown` must not take a status of an older
generation, or one without a Placed condition, for the placement shown.
"""

from __future__ import annotations

import pytest

from bench import placement_hub, placement_world
from bench.placement_world import Shape
from federation.api import spread as spread_api

SHAPE = Shape(spreads=60, clusters=20, per_spread=5)


@pytest.mark.parametrize("index", [0, 7, 25, 59])  # 25: a hungry spread (home, then its spill)
def test_the_applied_spread_is_the_one_the_in_process_points_place(index: int) -> None:
    applied = placement_hub.federated_spread(index, SHAPE, namespace="ns9")
    item = spread_api.FederatedSpread.model_validate({**applied, "metadata": {**applied["metadata"],
                                                                              "generation": 1}})
    fed = placement_world.spread(index, SHAPE)
    assert item.spec.subsets == fed.spec.subsets
    assert item.spec.schedule_strategy == fed.spec.schedule_strategy
    assert item.spec.target_ref.name == fed.spec.target_ref.name == applied["metadata"]["name"]
    assert (item.spec.target_ref.kind, item.metadata.namespace) == ("Deployment", "ns9")


def test_the_hub_deployment_carries_the_spreads_replicas_and_requests() -> None:
    hungry, plain = 25, 3
    for index in (hungry, plain):
        body = placement_hub.deployment(index, SHAPE, namespace="ns1")
        assert body["spec"]["replicas"] == placement_world.replicas_of(index)
        container = body["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"]["requests"] == placement_world.requests(index, SHAPE)
        assert body["spec"]["selector"]["matchLabels"] == body["spec"]["template"]["metadata"]["labels"]
    assert placement_world.replicas_of(hungry) != placement_world.replicas_of(plain)


@pytest.mark.parametrize(("status", "generation", "expected"), [
    ({"observedGeneration": 2, "conditions": [{"type": "Placed", "status": "False"}]}, 2, True),
    ({"observedGeneration": 2, "conditions": [{"type": "Placed", "status": "True"}]}, 2, True),
    ({"observedGeneration": 1, "conditions": [{"type": "Placed", "status": "True"}]}, 2, False),
    ({"observedGeneration": 2, "conditions": [{"type": "Valid", "status": "True"}]}, 2, False),
    (None, 1, False),
])
def test_a_status_shows_the_placement_only_at_its_generation_with_placed(
        status: dict[str, object] | None, generation: int, expected: bool) -> None:
    item = {"metadata": {"generation": generation}, **({"status": status} if status else {})}
    assert placement_hub.shown(item) is expected
