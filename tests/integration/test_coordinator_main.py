"""The whole coordinator process on the sandbox hub, with a stand-in agent speaking the real protocol.

Why: every coordinator part is tested alone; this test checks the wiring in `main.py` — hub events
reach the agent stream, a `kubectl scale` on the hub follows through to the agent's assignment,
statuses come back to the hub, the PlacementService answers from the same World, and a deleted
spread is removed from the agent. Placement runs on Ray shard actors (the session's local Ray).
The agent side is a real `agents.link.client.Link` with real bookkeeping
(`tests/support/standin_agent.py`), so no member cluster is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import conftest
import hubside
import pytest
import waiting
from kubernetes import client

from federation import sdk
from federation.api import cluster, common, names
from federation.api import spread as spread_api
from federation.coordinator import process as coordinator_main
from tests.support import builders, standin_agent

MEMBER = "member-1"
GROUP, VERSION = common.API_GROUP, common.API_VERSION
TIMEOUT = 30.0


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters,
                local_ray: str) -> Iterator[coordinator_main.CoordinatorProcess]:
    """A CoordinatorProcess on the sandbox hub, listening on a free local port, placing on Ray."""
    with hubside.running_coordinator(sandbox, clusters, members=[MEMBER]) as process:
        yield process


def test_coordinator_drives_an_agent_from_the_hub(
        coordinator: coordinator_main.CoordinatorProcess, clusters: conftest.Clusters,
        namespace: str) -> None:
    key = f"{namespace}/spread"
    target = f"127.0.0.1:{coordinator.port}"
    custom, apps = clusters.custom(hubside.HUB), clusters.apps(hubside.HUB)
    agent = standin_agent.StandInAgent(target, name=MEMBER).start()
    try:
        assert agent.link.wait_connected(TIMEOUT), "the stand-in agent never got a Welcome"
        waiting.wait_for(lambda: coordinator.hub_synced.is_set(), timeout=TIMEOUT,
                         message="the coordinator never finished listing the hub")

        def member_cluster() -> dict[str, Any] | None:
            try:
                found = custom.get_cluster_custom_object(GROUP, VERSION, cluster.PLURAL, MEMBER)
                assert isinstance(found, dict)
                return found
            except client.ApiException as error:
                if error.status == 404:
                    return None
                raise

        registered = waiting.wait_for(member_cluster, timeout=TIMEOUT,
                                      message="no MemberCluster member-1 after the agent's Hello")
        assert registered["metadata"]["labels"] == {names.REGION_LABEL: "eu"}

        apps.create_namespaced_deployment(namespace, builders.deployment("web", 4, cpu="100m"))
        body = hubside.spread_body("spread", target="web", subsets=[{"name": "one", "clusters": [MEMBER]}])
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, spread_api.PLURAL, body)
        waiting.wait_for(lambda: agent.replicas(key) == 4, timeout=TIMEOUT,
                         message=lambda: f"agent never got 4 replicas; has {agent.replicas(key)}")

        apps.patch_namespaced_deployment("web", namespace, {"spec": {"replicas": 6}})
        waiting.wait_for(lambda: agent.replicas(key) == 6, timeout=TIMEOUT,
                         message=lambda: f"agent never followed the scale to 6; has {agent.replicas(key)}")

        def spread_status() -> dict[str, Any] | None:
            obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, spread_api.PLURAL, "spread")
            assert isinstance(obj, dict)
            found = obj.get("status") or {}
            placed = [c for c in found.get("conditions") or [] if c.get("type") == "Placed"]
            return found if found.get("replicas") == 6 and placed else None

        written = waiting.wait_for(spread_status, timeout=TIMEOUT,
                                   message="the hub spread status never showed 6 replicas and Placed")
        assert written["placement"] == [{"cluster": MEMBER, "replicas": 6, "readyReplicas": 0}]
        waiting.wait_for(
            lambda: any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in ((member_cluster() or {}).get("status") or {}).get("conditions") or []),
            timeout=TIMEOUT, message="MemberCluster member-1 never got Ready=True")

        with sdk.PlacementClient(target) as placements:
            answer = placements.placement(key)
            assert answer.replicas == 6 and answer.clusters == {MEMBER: 6}
            assert [c.name for c in placements.clusters()] == [MEMBER]
            with pytest.raises(sdk.SpreadNotFound):
                placements.placement(f"{namespace}/missing")

        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, spread_api.PLURAL, "spread")
        waiting.wait_for(lambda: agent.bookkeeping.assignment(key) is None, timeout=TIMEOUT,
                         message="the agent still holds the deleted spread's assignment")
    finally:
        agent.stop()
