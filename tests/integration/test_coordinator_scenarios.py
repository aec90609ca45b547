"""The coordinator's scenarios on the sandbox hub, with placement on Ray and stand-in agents.

Each test plays a user on the hub (create, `kubectl scale`, edit, break, delete a spread) and
watches what the stand-in agents (the real agent link, `tests/support/standin_agent.py`) are told,
what the hub shows (FederatedSpread status, the hub Deployment's aggregated status, MemberCluster
conditions) and what the SDK answers. The coordinator is the real `CoordinatorProcess`, its
placements on SpreadShard actors and its capacity answers on ClusterShard actors of the session's
local Ray — or, for the restart test, a real `fedspread coordinator` process joining that Ray
with `--ray-address`, killed with SIGKILL mid-scale and started again.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import conftest
import hubside
import pytest
import waiting

from federation import sdk
from tests.support import standin_agent

TIMEOUT = 30.0


def names(*bases: str) -> list[str]:
    """Cluster names unique to one test (MemberClusters are cluster-scoped on the shared hub)."""
    suffix = uuid.uuid4().hex[:5]
    return [f"{base}-{suffix}" for base in bases]


@pytest.fixture
def hub(clusters: conftest.Clusters, namespace: str) -> hubside.Hub:
    return hubside.Hub(clusters, namespace)


def cloud_only_subset(name: str) -> dict[str, Any]:
    return {"name": "cloud", "clusters": [name]}


def agents_for(target: str, specs: dict[str, tuple[int, str]]) -> dict[str, standin_agent.StandInAgent]:
    """Stand-in agents, by cluster name ((nodes, cpu per node) each), connected and resynced.

    Waiting matters: a spread created before a cluster's first Hello is placed without that
    cluster, and (stability) its replicas stay where they went when the cluster arrives.
    """
    agents = {name: standin_agent.StandInAgent(target, name=name, nodes=nodes, cpu=cpu).start()
              for name, (nodes, cpu) in specs.items()}
    for agent in agents.values():
        waiting.wait_for(agent.link.synced.is_set, timeout=60,
                         message=f"agent {agent.name} never got ResyncComplete")
    return agents


def stop_all(agents: dict[str, standin_agent.StandInAgent]) -> None:
    for agent in agents.values():
        agent.stop()


def replicas_of(agents: dict[str, standin_agent.StandInAgent], key: str) -> dict[str, int | None]:
    return {name: agent.replicas(key) for name, agent in agents.items()}


def wait_replicas(agents: dict[str, standin_agent.StandInAgent], key: str, expected: dict[str, int], *,
                  what: str, timeout: float = TIMEOUT) -> None:
    waiting.wait_for(lambda: replicas_of(agents, key) == expected, timeout=timeout,
                     message=lambda: f"{what}: agents have {replicas_of(agents, key)}, expected {expected}")


# --- create, scale, edit, break, status, SDK ---------------------------------------------------------


def test_edit_scale_and_a_broken_edit_reach_agents_hub_status_and_sdk(
        sandbox: Any, clusters: conftest.Clusters, hub: hubside.Hub, local_ray: str) -> None:
    dc1, aws = names("dc1", "aws")
    with hubside.running_coordinator(sandbox, clusters, members=[dc1, aws]) as process:
        target = f"127.0.0.1:{process.port}"
        agents = agents_for(target, {dc1: (2, "4"), aws: (3, "4")})
        try:
            key = hub.create(hubside.deployment("web", 5, cpu="1"), hubside.spread_body(
                "web", target="web", subsets=[{"name": "onprem", "clusters": [dc1], "maxReplicas": 2},
                                              {"name": "cloud", "clusters": [aws]}]))
            wait_replicas(agents, key, {dc1: 2, aws: 3}, what="created")

            hub.scale("web", 7)
            wait_replicas(agents, key, {dc1: 2, aws: 5}, what="after kubectl scale to 7")

            onprem_cap_1 = [{"name": "onprem", "clusters": [dc1], "maxReplicas": 1},
                            {"name": "cloud", "clusters": [aws]}]
            hub.patch_spread("web", {"spec": {"subsets": onprem_cap_1}})
            wait_replicas(agents, key, {dc1: 1, aws: 6}, what="after lowering the cap to 1")
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
                one_cpu = hubside.deployment("w", 1, cpu="1")
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
            wait_replicas(agents, key, {dc1: 1, aws: 8}, what="scale while the spec is invalid")

            hub.patch_spread("web", {"spec": {"subsets": onprem_cap_1}})
            waiting.wait_for(lambda: hub.condition("web", "Valid").get("status") == "True", timeout=TIMEOUT,
                             message=lambda: f"Valid condition is {hub.condition('web', 'Valid')}")

            hub.delete_spread("web")
            wait_replicas(agents, key, {dc1: None, aws: None}, what="after deleting the spread")  # type: ignore[dict-item]
        finally:
            stop_all(agents)


# --- overcommit -----------------------------------------------------------------------------------


def test_two_spreads_competing_for_one_small_cluster_never_overcommit_it(
        sandbox: Any, clusters: conftest.Clusters, hub: hubside.Hub, local_ray: str) -> None:
    tiny, big = names("tiny", "big")
    with hubside.running_coordinator(sandbox, clusters, members=[tiny, big]) as process:
        target = f"127.0.0.1:{process.port}"
        agents = agents_for(target, {tiny: (1, "4"), big: (5, "4")})  # tiny: four one-cpu pods
        try:
            subsets = [{"name": "small", "clusters": [tiny]}, {"name": "rest", "clusters": [big]}]
            keys = [hub.create(hubside.deployment(name, 3, cpu="1"), hubside.spread_body(
                name, target=name, subsets=subsets, strategy="Adaptive")) for name in ("a", "b")]

            def settled() -> dict[str, dict[str, int | None]] | None:
                found = {key: replicas_of(agents, key) for key in keys}
                placed = all(sum(v or 0 for v in per.values()) == 3 for per in found.values())
                return found if placed else None

            found = waiting.wait_for(settled, timeout=TIMEOUT,
                                     message=lambda: f"agents have {[replicas_of(agents, k) for k in keys]}")
            on_tiny = sum(found[key][tiny] or 0 for key in keys)
            assert on_tiny == 4, found  # 6 one-cpu pods wanted, 4 fit: never 6
            with sdk.PlacementClient(target) as placements:
                why = placements.explain(keys[0])
                free = {c.cluster: c.free_capacity for s in why.subsets for c in s.clusters}
                assert free[tiny] == 0  # the ClusterShard counts both spreads' pending pods
        finally:
            stop_all(agents)


# --- failover -------------------------------------------------------------------------------------


def test_a_silent_agent_fails_over_after_cluster_lost_seconds_and_nothing_flaps_back(
        sandbox: Any, clusters: conftest.Clusters, hub: hubside.Hub, local_ray: str) -> None:
    east, west = names("east", "west")
    lost_seconds = 4
    with hubside.running_coordinator(sandbox, clusters, members=[east, west]) as process:
        target = f"127.0.0.1:{process.port}"
        agents = agents_for(target, {east: (3, "4"), west: (3, "4")})
        try:
            key = hub.create(hubside.deployment("web", 4), hubside.spread_body(
                "web", target="web", lost_seconds=lost_seconds,
                subsets=[{"name": "primary", "clusters": [east]}, {"name": "backup", "clusters": [west]}]))
            wait_replicas(agents, key, {east: 4, west: 0}, what="created")
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
            time.sleep(3)  # long enough for any flap to show
            assert replicas_of(agents, key) == {east: 0, west: 4}  # no flap back on return
            hub.scale("web", 6)  # new replicas go in spec order: east first
            wait_replicas(agents, key, {east: 2, west: 4}, what="scale-up after the return")
        finally:
            stop_all(agents)


# --- restart --------------------------------------------------------------------------------------


class CoordinatorCommand:
    """`fedspread coordinator` as a real process, joining the session's Ray."""

    def __init__(self, kubeconfig: str, *, port: int, ray_address: str, log: pathlib.Path) -> None:
        self.args = [str(pathlib.Path(sys.executable).with_name("fedspread")), "coordinator",
                     "--hub-kubeconfig", kubeconfig, "--listen", f"127.0.0.1:{port}",
                     "--ray-address", ray_address, "--heartbeat-seconds", "1",
                     "--insecure"]  # its agents are in-process plaintext links; mTLS: test_mtls.py
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, as a crash or an OOM kill."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def coordinator_command(sandbox: Any, local_ray: str, tmp_path: pathlib.Path) -> Iterator[CoordinatorCommand]:
    command = CoordinatorCommand(sandbox.hub.kubeconfig, port=hubside.free_port(), ray_address=local_ray,
                                 log=tmp_path / "coordinator.log")
    try:
        yield command
    finally:
        command.stop()


def test_coordinator_killed_mid_scale_converges_and_never_hands_out_a_quota_twice(
        clusters: conftest.Clusters, hub: hubside.Hub, coordinator_command: CoordinatorCommand) -> None:
    capped, elastic = names("capped", "elastic")
    custom = clusters.custom(hubside.HUB)
    hubside.delete_member_clusters(custom, [capped, elastic])
    target = coordinator_command.args[coordinator_command.args.index("--listen") + 1]
    coordinator_command.start()
    agents = agents_for(target, {capped: (3, "4"), elastic: (5, "4")})
    violations: list[str] = []
    watching = threading.Event()

    def watch_quotas(key: str) -> None:  # fail static: what agents enforce must stay within bounds
        while not watching.wait(0.05):
            held = replicas_of(agents, key)
            if (held[capped] or 0) > 3 or sum(v or 0 for v in held.values()) > 10:
                violations.append(f"{held}")

    try:
        key = hub.create(hubside.deployment("web", 2), hubside.spread_body(
            "web", target="web", subsets=[{"name": "onprem", "clusters": [capped], "maxReplicas": 3},
                                          {"name": "cloud", "clusters": [elastic]}]))
        wait_replicas(agents, key, {capped: 2, elastic: 0}, what="created", timeout=60)
        watcher = threading.Thread(target=watch_quotas, args=(key,), daemon=True)
        watcher.start()

        hub.scale("web", 10)
        time.sleep(0.3)  # the scale is being handled (or about to be) ...
        coordinator_command.kill()  # ... when the coordinator dies
        time.sleep(2)
        assert all(agent.link.connected is False for agent in agents.values())
        coordinator_command.start()
        wait_replicas(agents, key, {capped: 3, elastic: 7}, what="after the restart", timeout=90)
        hub.scale("web", 4)
        wait_replicas(agents, key, {capped: 3, elastic: 1}, what="scale-down after the restart")
        status = waiting.wait_for(
            lambda: (found := hub.spread_status("web")).get("replicas") == 4 and found, timeout=TIMEOUT,
            message=lambda: f"spread status is {hub.spread_status('web')}")
        assert {p["cluster"]: p["replicas"] for p in status["placement"]} == {capped: 3, elastic: 1}
        watching.set()
        watcher.join(5)
        assert violations == [], violations[:5]
    finally:
        watching.set()
        stop_all(agents)
        coordinator_command.stop()
        hubside.delete_member_clusters(custom, [capped, elastic])
