"""A hub workload scaled keeps its spread's plan; one whose pods changed does not (`World.set_target`).

Why: a spread's plan (its pod shape per subset, `pending_charges.Plan`) is built from the hub
workload's pod template. A scale (`kubectl scale`, an HPA) brings a new workload object whose pods
are the same: building the plan again cost the coordinator the subsets' mutated shapes, and gave
the shape a new identity, so the SpreadShards were sent it again (`shard_specs`). A plan kept when
the pods did change would place by old requests: both sides are checked here, on the real World.
"""

from __future__ import annotations

import datetime
from typing import Any

from federation.api import names
from federation.coordinator.model import loop, world
from federation.core import fit, pod_shape
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
KEY = "shop/web"
TWO_SUBSETS: list[dict[str, Any]] = [
    {"name": "onprem", "clusters": ["dc1"], "maxReplicas": 3},
    {"name": "cloud", "clusters": ["aws"]},
]


def scaled_world(clock: ManualClock) -> world.World:
    """Spread `shop/web` (Adaptive) placed at 4 replicas of 1-cpu pods on two clusters of two 4-cpu
    nodes."""
    model = world.World(clock)
    for name in ("dc1", "aws"):
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(2)])
        model.heartbeat(name)
    model.upsert_spread(builders.federated_spread(subsets=TWO_SUBSETS, strategy="Adaptive"))
    model.set_target(KEY, replicas=4, template=builders.deployment(namespace="shop"))
    loop.recompute(model, {KEY}, now=clock())
    return model


def test_a_scale_keeps_the_plan_and_places_the_new_replicas() -> None:
    clock = ManualClock(T0)
    model = scaled_world(clock)
    plan = model.plan_for(KEY)
    scaled = builders.deployment(replicas=9, namespace="shop",
                                 metadata={"resourceVersion": "2", "generation": 2})
    assert model.set_target(KEY, replicas=9, template=scaled) == {KEY}
    assert model.plan_for(KEY) is plan
    found = loop.recompute(model, {KEY}, now=clock())
    assert found.placements[KEY].placed == 9


def test_new_pods_build_a_new_plan_with_their_requests() -> None:
    clock = ManualClock(T0)
    model = scaled_world(clock)
    plan = model.plan_for(KEY)
    larger = builders.deployment(replicas=4, namespace="shop", cpu="3")
    assert model.set_target(KEY, replicas=4, template=larger) == {KEY}
    replanned = model.plan_for(KEY)
    assert replanned is not plan
    assert dict(replanned.shape.requests) == dict(fit.shape_from_deployment(larger).requests)
    wanted = fit.profile(fit.shape_from_deployment(larger)).requests
    assert [p.requests for p in replanned.profiles] == [wanted, wanted]


def test_what_a_shape_reads_of_a_workload_tells_a_scale_from_new_pods() -> None:
    one = builders.deployment(replicas=1, namespace="shop")
    assert pod_shape.pod_template_of(one) == pod_shape.pod_template_of(
        builders.deployment(replicas=7, namespace="shop", metadata={"resourceVersion": "9"}))
    assert pod_shape.pod_template_of(one) != pod_shape.pod_template_of(
        builders.deployment(replicas=1, namespace="shop", image="nginx:2"))
    # Nothing to read and a malformed spec differ (the second's plan raises: not kept for it).
    assert pod_shape.pod_template_of({"spec": {}}) == pod_shape.pod_template_of(None)
    assert pod_shape.pod_template_of({"spec": 5}) != pod_shape.pod_template_of({"spec": {}})
