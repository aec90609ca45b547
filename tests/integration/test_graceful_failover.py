"""Graceful moves on the real sandbox: replacements are Ready before the originals go.

Two real `fedspread agent` processes manage sandbox member-1 and member-2 for a real coordinator
(placements on the session's Ray). The spread puts 2 replicas in member-1 (the first subset, capped
at 2) and 2 in member-2 (the second subset), with a short clusterLostSeconds. A sampler lists the
Ready pods of both members every quarter second, and each test judges every sample, not the end.

- **A member lost for real.** member-1's agent is killed for good (one cluster of two: not more than
  half, so the failover brake does not hold). Its pods keep running unmanaged; the coordinator
  places their replacements in member-2. At no sample are member-2's Ready pods fewer than the
  spread's replicas minus the lost cluster's (the replacements come on top). Then member-1's agent
  returns: its pods count again (first subset), nothing of member-1 is deleted, and member-2's
  surplus goes (the spread's scale-down order: last subset first) — at no sample after the return
  are the Ready pods of both members fewer than the spread's replicas.
- **A NoExecute cordon.** member-1's MemberCluster gets a `NoExecute` taint: its replicas move to
  member-2, and at no sample are the Ready pods of both members fewer than the spread's replicas
  (member-1's pods go only once member-2's replacements are Ready).
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
import sampling
import waiting

from federation import sdk
from federation.api import cluster
from tests.support import builders

MEMBERS = ("member-1", "member-2")
TIMEOUT = 120.0
LOST_SECONDS = 4
REPLICAS = 4
READY_AFTER = 4


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[list[str], Any]]:
    """A coordinator on the hub, and the cluster names of its two agents."""
    names = hubside.names("g1", "g2")
    with hubside.running_coordinator(sandbox, clusters, members=names) as process:
        yield names, process


class ReadyWatch:
    """The Ready pods of both members every 50 ms (a move in the sandbox takes about a second)."""

    def __init__(self, clusters: conftest.Clusters, namespace: str) -> None:
        self.clusters, self.namespace = clusters, namespace
        self.history: list[dict[str, int]] = []
        self.sampler = sampling.Sampler(self._observe, period=0.05, name="ready-watch")

    def __enter__(self) -> ReadyWatch:
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.sampler.__exit__(*exc_info)

    def _observe(self) -> None:
        self.history.append({m: len(sampling.pods_where(self.clusters, m, self.namespace, sampling.is_ready))
                             for m in MEMBERS})

    def fewest(self, *, members: tuple[str, ...] = MEMBERS, since: int = 0) -> int:
        """The fewest Ready pods of `members` together at any sample from number `since` on."""
        return min(sum(sample[m] for m in members) for sample in self.history[since:])


class Scene:
    """The two agents, the hub and the placement client of one test."""

    def __init__(self, clusters: conftest.Clusters, namespace: str, *, names: list[str], port: int,
                 tmp_path: pathlib.Path) -> None:
        self.clusters, self.namespace, self.names = clusters, namespace, names
        self.target = f"127.0.0.1:{port}"
        self.agents = [agentside.AgentProcess(clusters, cluster=name, member=member, coordinator=self.target,
                                              namespace=namespace, log=tmp_path / f"{member}.log")
                       for name, member in zip(names, MEMBERS, strict=True)]
        self.hub = hubside.Hub(clusters, namespace)
        self.key = f"{namespace}/web"

    def ready(self, member: str) -> set[str]:
        return sampling.pods_where(self.clusters, member, self.namespace, sampling.is_ready)

    def describe(self) -> str:
        return (f"ready pods {({m: sorted(self.ready(m)) for m in MEMBERS})}; "
                f"agent logs {[str(a.log) for a in self.agents]}")

    def wait(self, probe: Any, what: str) -> Any:
        return waiting.wait_for(probe, timeout=TIMEOUT, message=lambda: f"{what}; {self.describe()}")

    def start(self) -> dict[str, set[str]]:
        """Both agents up, the spread running 2 Ready pods in each member; those pods."""
        for agent, member in zip(self.agents, MEMBERS, strict=True):
            self.wait(lambda a=agent: a.metric("fedspread_agent_link_connected") == 1.0,
                      f"the agent of {member} never connected")
            self.wait(lambda a=agent, m=member: agentside.webhook_live(a, self.clusters, m, self.namespace),
                      f"the apiserver of {member} never called its agent's webhook")
        template = builders.deployment("web", REPLICAS, cpu="10m")
        # Ready 4 s after start (the sandbox's kubelets honour the probe's delay): a replacement is
        # Running but not Ready for a while, so removing an original before it would show.
        template["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] = {
            "exec": {"command": ["true"]}, "initialDelaySeconds": READY_AFTER}
        self.hub.create(template, hubside.spread_body(
            "web", target="web", lost_seconds=LOST_SECONDS, subsets=[
                {"name": "first", "clusters": [self.names[0]], "maxReplicas": 2},
                {"name": "second", "clusters": [self.names[1]]}]))
        self.wait(lambda: all(len(self.ready(m)) == 2 for m in MEMBERS),
                  "the spread never ran 2 Ready pods in each member")
        # The coordinator must know them Ready too (agents report changes, not instantly): a move
        # decided on older reports has no Ready pod to protect.
        self.wait(lambda: self.hub.spread_status("web").get("readyReplicas") == REPLICAS,
                  "the coordinator never heard of 4 Ready pods")
        return {m: self.ready(m) for m in MEMBERS}

    def stop(self) -> None:
        for agent in self.agents:
            agent.stop()


def test_a_member_lost_for_real_is_replaced_first_and_keeps_its_pods_when_it_returns(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    names, process = coordinator
    scene = Scene(clusters, namespace, names=names, port=process.port, tmp_path=tmp_path)
    lost, other = MEMBERS
    try:
        before = scene.start()
        with sdk.PlacementClient(scene.target) as placements, ReadyWatch(clusters, namespace) as watch:
            scene.agents[0].kill()
            scene.wait(lambda: placements.placement(scene.key).clusters == {names[0]: 0, names[1]: 4},
                       "the coordinator never failed member-1 over")
            scene.wait(lambda: len(scene.ready(other)) == 4, "member-2 never ran the 2 replacements")
            assert scene.ready(lost) == before[lost], f"the lost member's pods changed; {scene.describe()}"
            assert watch.fewest(members=(other,)) >= REPLICAS - 2, watch.history

            returned = len(watch.history)
            scene.agents[0].start()
            scene.wait(lambda: placements.placement(scene.key).clusters == {names[0]: 2, names[1]: 2},
                       "the returned member's pods never counted again")
            scene.wait(lambda: len(scene.ready(other)) == 2, "member-2's surplus never went")
            time.sleep(2)  # room for a wrong assignment to reach member-1's ReplicaSet
            assert scene.ready(lost) == before[lost], \
                f"the returned member's pods changed; {scene.describe()}"
            assert watch.fewest(since=returned) >= REPLICAS, watch.history[returned:]
        assert watch.sampler.samples > 20, watch.sampler.samples
        for agent in scene.agents:
            assert agent.alive and "Traceback" not in agent.output(), agent.log
    finally:
        scene.stop()


def test_a_noexecute_cordon_moves_replicas_and_starts_the_new_ones_first(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    names, process = coordinator
    scene = Scene(clusters, namespace, names=names, port=process.port, tmp_path=tmp_path)
    cordoned, other = MEMBERS
    try:
        scene.start()
        with sdk.PlacementClient(scene.target) as placements, ReadyWatch(clusters, namespace) as watch:
            clusters.custom(hubside.HUB).patch_cluster_custom_object(
                hubside.GROUP, hubside.VERSION, cluster.PLURAL, names[0],
                {"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}})
            scene.wait(lambda: placements.placement(scene.key).clusters == {names[0]: 0, names[1]: 4},
                       "the replicas never left the NoExecute member")
            scene.wait(lambda: not scene.ready(cordoned) and len(scene.ready(other)) == 4,
                       "the move never completed")
            assert watch.fewest() >= REPLICAS, watch.history
        assert watch.sampler.samples > 5, watch.sampler.samples
    finally:
        scene.stop()
