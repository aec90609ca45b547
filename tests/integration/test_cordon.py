"""A NoSchedule cordon on a MemberCluster keeps what runs there, on the real sandbox.

Why a test of its own: the rule "do no harm" — a cordon stops new replicas from going to a
cluster, it never deletes the pods already there — is only proven where pods really run. Two real
`fedspread agent` processes manage sandbox member-1 and member-2 for a real coordinator
(placements on the session's Ray); one spread balances over both. Then member-1's MemberCluster
gets a `NoSchedule` taint: once the coordinator has placed the spread again (its explanation says
so), member-1 must still run the very same pods, and a scale-up of the hub Deployment must land on
member-2 only.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator
from typing import Any

import agentside
import conftest
import hubside
import pytest
import waiting

from federation import sdk
from federation.api import cluster
from tests.support import builders

TIMEOUT = 90.0
MEMBERS = ("member-1", "member-2")


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[list[str], Any]]:
    """A coordinator on the hub, and the cluster names its two agents use."""
    names = hubside.names("cordoned", "open")
    with hubside.running_coordinator(sandbox, clusters, members=names) as process:
        yield names, process


def running_pods(clusters: conftest.Clusters, member: str, namespace: str) -> set[str]:
    """Names of the spread's Running pods in `member` that a ReplicaSet owns."""
    pods = agentside.owned(agentside.spread_pods(clusters, member, namespace, "web"))
    return {p.metadata.name for p in pods if p.status.phase == "Running"}


def all_pods(clusters: conftest.Clusters, member: str, namespace: str) -> set[str]:
    """Names of every pod of the spread in `member` (not being deleted)."""
    return {p.metadata.name for p in agentside.spread_pods(clusters, member, namespace, "web")}


def test_a_noschedule_cordon_keeps_running_pods_and_scale_up_goes_elsewhere(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    (cordoned, open_), process = coordinator
    target = f"127.0.0.1:{process.port}"
    agents = [agentside.AgentProcess(clusters, cluster=name, member=member, coordinator=target,
                                     namespace=namespace, log=tmp_path / f"{member}.log")
              for name, member in zip((cordoned, open_), MEMBERS, strict=True)]
    hub = hubside.Hub(clusters, namespace)
    key = f"{namespace}/web"

    def scene() -> str:
        return (f"pods {({m: sorted(all_pods(clusters, m, namespace)) for m in MEMBERS})}; "
                f"agent logs {[str(a.log) for a in agents]}")

    def wait(probe: Any, what: str) -> Any:
        return waiting.wait_for(probe, timeout=TIMEOUT, message=lambda: f"{what}; {scene()}")

    try:
        for agent, member in zip(agents, MEMBERS, strict=True):
            wait(lambda a=agent: a.metric("fedspread_agent_link_connected") == 1.0,
                 f"the agent of {member} never connected")
            wait(lambda a=agent, m=member: agentside.webhook_live(a, clusters, m, namespace),
                 f"the apiserver of {member} never called its agent's webhook")
        with sdk.PlacementClient(target) as placements:
            wait(lambda: {c.name for c in placements.clusters()} >= {cordoned, open_},
                 "the coordinator never listed both clusters")

            hub.create(builders.deployment("web", 4, cpu="10m"), hubside.spread_body(
                "web", target="web", lost_seconds=600, subsets=[
                    {"name": "both", "clusters": [cordoned, open_], "clusterSpread": "Balance"}]))
            wait(lambda: len(running_pods(clusters, MEMBERS[0], namespace)) == 2
                 and len(running_pods(clusters, MEMBERS[1], namespace)) == 2,
                 "the spread never ran 2 pods in each member")
            before = running_pods(clusters, MEMBERS[0], namespace)

            clusters.custom(hubside.HUB).patch_cluster_custom_object(
                hubside.GROUP, hubside.VERSION, cluster.PLURAL, cordoned,
                {"spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}})
            wait(lambda: any(c.name == cordoned and c.cordoned for c in placements.clusters()),
                 "the coordinator never saw the cordon")
            kept = "cordoned (NoSchedule): keeps its 2 running, takes no new replicas"
            wait(lambda: any(c.cluster == cordoned and kept in c.reasons
                             for s in placements.explain(key).subsets for c in s.clusters),
                 f"the placement never said {cordoned}: {kept!r} (explanation {placements.explain(key)})")
            assert placements.placement(key).clusters == {cordoned: 2, open_: 2}, scene()
            time.sleep(3)  # room for a wrong assignment to reach the agent and its ReplicaSet
            assert all_pods(clusters, MEMBERS[0], namespace) == before, f"the cordon deleted pods; {scene()}"
            member_deployment = clusters.apps(MEMBERS[0]).read_namespaced_deployment("web", namespace)
            assert member_deployment.spec.replicas == 2, scene()

            hub.scale("web", 6)
            wait(lambda: len(running_pods(clusters, MEMBERS[1], namespace)) == 4,
                 "the scale-up never reached the uncordoned member")
            wait(lambda: placements.placement(key).clusters == {cordoned: 2, open_: 4},
                 f"the placement is {placements.placement(key).clusters}")
            assert running_pods(clusters, MEMBERS[0], namespace) == before, \
                f"the cordoned member's pods changed; {scene()}"
            assert all_pods(clusters, MEMBERS[0], namespace) == before, \
                f"the cordoned member got new pods; {scene()}"
        for agent in agents:
            assert agent.alive, f"an agent exited; {scene()}"
            assert "Traceback" not in agent.output(), f"an agent logged a traceback; {scene()}"
    finally:
        for agent in agents:
            agent.stop()
