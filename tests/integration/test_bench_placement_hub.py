"""The placement benchmark's hub point (`bench/placement_hub.py`) at a tiny size, on the session's hub.

Why a test for a benchmark: the point runs the whole coordinator process against a real hub
apiserver, which no other placement point does, and it must measure what it says — every spread
created through the hub's API, placed, delivered to the stand-in agents over mutual TLS and shown
in its status on the hub — and then leave the shared hub as it found it: other tests'
coordinators watch that hub, and a MemberCluster or a spread left behind would be theirs to
place. It runs on the session's sandbox hub (a hub of its own would add a sandbox start to the
suite); the timings are not checked, they are the benchmark's output.
"""

from __future__ import annotations

import pathlib
import uuid

from kubernetes import client

from bench import placement_hub, placement_world
from bench.placement_world import Shape
from federation.api import common
from federation.coordinator import startup
from federation.sandbox import state

SHAPE = Shape(spreads=12, clusters=6, per_spread=3)


def test_the_hub_point_places_delivers_shows_and_cleans_up(sandbox: state.SandboxState) -> None:
    kubeconfig = pathlib.Path(sandbox.hub.kubeconfig)
    prefix = f"bh-{uuid.uuid4().hex[:6]}-"
    found = placement_hub.measure_on(kubeconfig, SHAPE, namespace_prefix=prefix, report=print)

    assert found["streams"] == SHAPE.clusters
    assert found["created_s"] <= found["placed_s"] <= found["status_s"]
    assert found["messages"] >= SHAPE.spreads, "every spread sends at least one assignment"
    assert found["status_writes"].get("spread", 0) >= SHAPE.spreads, found["status_writes"]
    assert set(found["left_out"]) == {"identity"}, "TLS, the hub and the status pass are in"

    api = startup.hub_client(kubeconfig)
    custom = client.CustomObjectsApi(api)
    left = custom.list_cluster_custom_object(common.API_GROUP, common.API_VERSION, placement_hub.PLURAL)
    assert not [i for i in left["items"] if i["metadata"]["namespace"].startswith(prefix)]
    members = custom.list_cluster_custom_object(common.API_GROUP, common.API_VERSION, "memberclusters")
    ours = {placement_world.cluster_name(i) for i in range(SHAPE.clusters)}
    assert not [i["metadata"]["name"] for i in members["items"] if i["metadata"]["name"] in ours]
