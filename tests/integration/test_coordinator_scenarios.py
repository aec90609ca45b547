"""The coordinator's scenarios on the sandbox hub, with placement on Ray and stand-in agents.

Each test plays a user on the hub (create, `kubectl scale`, edit, break, delete a spread) and
watches what the stand-in agents (the real agent link, `tests/support/standin_agent.py`) are told,
what the hub shows (FederatedSpread status, the hub Deployment's aggregated status, MemberCluster
conditions) and what the SDK answers. The coordinator is the real `CoordinatorProcess`, its
placements on SpreadShard actors and its capacity answers on ClusterShard actors of the session's
local Ray. (The coordinator killed mid-scale and restarted is a fault test:
test_faults_coordinator.py.)
"""

from __future__ import annotations

import time
from typing import Any

import conftest
import hubside
import pytest
import waiting

from federation import sdk
from tests.support import builders, standin_agent

TIMEOUT = 30.0


@pytest.fixture
def hub(clusters: conftest.Clusters, namespace: str) -> hubside.Hub:
    return hubside.Hub(clusters, namespace)


def cloud_only_subset(name: str) -> dict[str, Any]:
    return {"name": "cloud", "clusters": [name]}


# --- create, scale, edit, break, status, SDK ---------------------------------------------------------


def test_edit_scale_and_a_broken_edit_reach_agents_hub_status_and_sdk(
        sandbox: Any, clusters: conftest.Clusters, hub: hubside.Hub, local_ray: str) -> None:
    dc1, aws = hubside.names("dc1", "aws")
    with hubside.running_coordinator(sandbox, clusters, members=[dc1, aws]) as process:
        target = f"127.0.0.1:{process.port}"
        agents = hubside.agents_for(target, {dc1: (2, "4"), aws: (3, "4")})
        try:
            key = hub.create(builders.deployment("web", 5, cpu="1"), hubside.spread_body(
                "web", target="web", subsets=[{"name": "onprem", "clusters": [dc1], "maxReplicas": 2},
                                              {"name": "cloud", "clusters": [aws]}]))
            hubside.wait_replicas(agents, key, {dc1: 2, aws: 3}, what="created")

            hub.scale("web", 7)
            hubside.wait_replicas(agents, key, {dc1: 2, aws: 5}, what="after kubectl scale to 7")

            onprem_cap_1 = [{"name": "onprem", "clusters": [dc1], "maxReplicas": 1},
                            {"name": "cloud", "clusters": [aws]}]
            hub.patch_spread("web", {"spec": {"subsets": onprem_cap_1}})
            hubside.wait_replicas(agents, key, {dc1: 1, aws: 6}, what="after lowering the cap to 1")
            assert agents[dc1].quotas(key) == {"onprem": 1, "cloud": 0}

            agents[dc1].report_running(key, subset="onprem", running=1)
            agents[aws].report_running(key, subset="cloud", running=6, ready=4)
            aggregated = waiting.wait_for(
                lambda: (found := hub.deployment_status("web")).get("ready_replicas") == 5 and found,
                timeout=TIMEOUT, message=lambda: f"hub Deployment status is {hub.deployment_status('web')}")
            assert (aggregated["replicas"], aggregated["available_replicas"]) == (7, 5)
            assert aggregated["unavailable_replicas"] == 2
            status = waiting.wait_for(
                lambda: (found := hub.spread_status("web")).get("readyReplicas") == 5 and found,
                timeout=TIMEOUT, message=lambda: f"spread status is {hub.spread_status('web')}")
            assert {p["cluster"]: p["replicas"] for p in status["placement"]} == {dc1: 1, aws: 6}

            with sdk.PlacementClient(target) as placements:
                assert [p.spread for p in placements.placements(hub.namespace)] == [key]
                assert placements.placement(key).clusters == {dc1: 1, aws: 6}
                why = placements.explain(key)
                assert (why.subsets[0].cap, why.subsets[0].replicas) == ("1", 1)
                free = {c.cluster: c.free_capacity for s in why.subsets for c in s.clusters}
                assert free == {dc1: 8, aws: 12}  # every placed pod runs: nothing pending to deduct
                cloud_only = hubside.spread_body("what-if", target="web", subsets=[cloud_only_subset(aws)])
                one_cpu = builders.deployment("w", 1, cpu="1")
                what_if = placements.simulate(cloud_only, replicas=20, template=one_cpu)
                assert what_if.clusters[aws] == 20 == what_if.replicas  # Fixed: no capacity check
                assert placements.placement(key).clusters == {dc1: 1, aws: 6}  # the what-if applied nothing
                with pytest.raises(sdk.SpreadNotFound):
                    placements.explain(f"{hub.namespace}/missing")
                stream = placements.watch(key, timeout=20)
                assert next(stream).clusters == {dc1: 1, aws: 6}
                hub.scale("web", 8)
                assert next(stream).clusters == {dc1: 1, aws: 7}

            # An edit the CRD schema accepts but the rules do not: an integer and a percentage cap.
            hub.patch_spread("web", {"spec": {"subsets": [
                {"name": "onprem", "clusters": [dc1], "maxReplicas": 2},
                {"name": "cloud", "clusters": [aws], "maxReplicas": "50%"}]}})
            invalid = waiting.wait_for(
                lambda: (found := hub.condition("web", "Valid")).get("status") == "False" and found,
                timeout=TIMEOUT, message=lambda: f"Valid condition is {hub.condition('web', 'Valid')}")
            assert invalid["reason"] == "InvalidSpec"
            assert "subsets[1].maxReplicas" in invalid["message"] and "mixes cap kinds" in invalid["message"]
            hub.scale("web", 9)  # the last valid spec stays in force
            hubside.wait_replicas(agents, key, {dc1: 1, aws: 8}, what="scale while the spec is invalid")

            hub.patch_spread("web", {"spec": {"subsets": onprem_cap_1}})
            waiting.wait_for(lambda: hub.condition("web", "Valid").get("status") == "True", timeout=TIMEOUT,
                             message=lambda: f"Valid condition is {hub.condition('web', 'Valid')}")

            hub.delete_spread("web")
            hubside.wait_replicas(agents, key, {dc1: None, aws: None}, what="after deleting the spread")  # type: ignore[dict-item]
        finally:
            hubside.stop_all(agents)


# --- overcommit -----------------------------------------------------------------------------------


def test_two_spreads_competing_for_one_small_cluster_never_overcommit_it(
        sandbox: Any, clusters: conftest.Clusters, hub: hubside.Hub, local_ray: str) -> None:
    tiny, big = hubside.names("tiny", "big")
    with hubside.running_coordinator(sandbox, clusters, members=[tiny, big]) as process:
        target = f"127.0.0.1:{process.port}"
        agents = hubside.agents_for(target, {tiny: (1, "4"), big: (5, "4")})  # tiny: four one-cpu pods
        try:
            subsets = [{"name": "small", "clusters": [tiny]}, {"name": "rest", "clusters": [big]}]
            keys = [hub.create(builders.deployment(name, 3, cpu="1"), hubside.spread_body(
                name, target=name, subsets=subsets, strategy="Adaptive")) for name in ("a", "b")]

            def settled() -> dict[str, dict[str, int | None]] | None:
                found = {key: hubside.replicas_of(agents, key) for key in keys}
                placed = all(sum(v or 0 for v in per.values()) == 3 for per in found.values())
                return found if placed else None

            found = waiting.wait_for(
                settled, timeout=TIMEOUT,
                message=lambda: f"agents have {[hubside.replicas_of(agents, k) for k in keys]}")
            on_tiny = sum(found[key][tiny] or 0 for key in keys)
            assert on_tiny == 4, found  # 6 one-cpu pods wanted, 4 fit: never 6
            with sdk.PlacementClient(target) as placements:
                why = placements.explain(keys[0])
                free = {c.cluster: c.free_capacity for s in why.subsets for c in s.clusters}
                assert free[tiny] == 0  # the ClusterShard counts both spreads' pending pods
        finally:
            hubside.stop_all(agents)


# --- failover -------------------------------------------------------------------------------------


def test_a_silent_agent_fails_over_after_cluster_lost_seconds_and_counts_again_when_back(
        sandbox: Any, clusters: conftest.Clusters, hub: hubside.Hub, local_ray: str) -> None:
    east, west = hubside.names("east", "west")
    lost_seconds = 4
    with hubside.running_coordinator(sandbox, clusters, members=[east, west]) as process:
        target = f"127.0.0.1:{process.port}"
        agents = hubside.agents_for(target, {east: (3, "4"), west: (3, "4")})
        try:
            key = hub.create(builders.deployment("web", 4, cpu="100m"), hubside.spread_body(
                "web", target="web", lost_seconds=lost_seconds,
                subsets=[{"name": "primary", "clusters": [east]}, {"name": "backup", "clusters": [west]}]))
            hubside.wait_replicas(agents, key, {east: 4, west: 0}, what="created")
            custom = clusters.custom(hubside.HUB)
            waiting.wait_for(lambda: hubside.member_ready(custom, east) == "True", timeout=TIMEOUT,
                             message="east never Ready")

            silent_at = time.monotonic()
            agents[east].stop()
            waiting.wait_for(lambda: agents[west].replicas(key) == 4, timeout=TIMEOUT,
                             message=lambda: f"no failover: west has {agents[west].replicas(key)}")
            moved_after = time.monotonic() - silent_at
            assert lost_seconds - 1 <= moved_after <= lost_seconds + 8, moved_after  # heartbeats are 0.5 s
            waiting.wait_for(lambda: hubside.member_ready(custom, east) == "False", timeout=TIMEOUT,
                             message="MemberCluster east never became Ready=False")
            lost = waiting.wait_for(
                lambda: (found := hub.spread_status("web")) and
                {p["cluster"]: p["replicas"] for p in found.get("placement") or []} == {west: 4} and found,
                timeout=TIMEOUT, message=lambda: f"spread status is {hub.spread_status('web')}")
            assert lost["replicas"] == 4

            back = standin_agent.StandInAgent(target, name=east, bookkeeping=agents[east].bookkeeping).start()
            agents[east] = back
            waiting.wait_for(lambda: hubside.member_ready(custom, east) == "True", timeout=TIMEOUT,
                             message="east never Ready again")
            # What east ran when it was lost counts again; the surplus goes from the last subset.
            hubside.wait_replicas(agents, key, {east: 4, west: 0}, what="the return")
            hub.scale("web", 6)  # new replicas go in spec order: east first
            hubside.wait_replicas(agents, key, {east: 6, west: 0}, what="scale-up after the return")
        finally:
            hubside.stop_all(agents)
