"""Hub objects are not the cluster, on the real sandbox: deleting a MemberCluster moves nothing.

Two real `fedspread agent` processes manage sandbox member-1 and member-2 for a real coordinator;
one spread balances 4 replicas over both (2 each) through a `clusterSelector` on a label of their
MemberClusters (as a region selects its clusters), pods Ready 4 s after they start (the node
simulator honours the readiness probe's delay, so a pod deleted and recreated would show as a
gap). A sampler lists the Ready pods of both members every quarter second.

- **Deleted while its agent is connected** (a GitOps prune, a mistaken `kubectl delete`): at no
  sample does member-1 hold fewer Ready pods than before, its pods are the very same, and the
  MemberCluster comes back (a new object, the labels it had).
- **Decommissioned, then deleted**: `spec.decommission: true` takes the cluster out of the
  spread's selection, its replicas go to member-2, the MemberCluster says `Decommissioned=True`;
  deleting it then is final: it is not recreated, even when its agent connects again.
- **A hub restored without MemberClusters or statuses** (a namespaced backup leaves the
  cluster-scoped MemberClusters out; backup tools drop `status`): a new coordinator whose first
  agent back is member-1's must not give member-1 every replica (`model.settling`): member-1 never
  runs more than its 2 pods, member-2's stay Ready throughout, and once member-2's agent is back the
  placement is 2 + 2 again.
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
from kubernetes import client

from federation import sdk
from federation.api import cluster
from federation.coordinator import process as coordinator_main
from tests.support import builders

MEMBERS = ("member-1", "member-2")
TIMEOUT = 120.0
LOST_SECONDS = 4
REPLICAS = 4
READY_AFTER = 4
SETTLE = LOST_SECONDS + READY_AFTER + 4
"""Long enough after the deletion for a wrong move to show: a cluster taken as lost, its pods
deleted and their replacements not yet Ready."""


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[list[str], Any]]:
    """A coordinator on the hub, and the cluster names of its two agents."""
    names = hubside.names("kept", "other")
    with hubside.running_coordinator(sandbox, clusters, members=names) as process:
        yield names, process


class Scene:
    """Two agents, the hub, a spread of 2 + 2 Ready pods, and a Ready sampler."""

    def __init__(self, clusters: conftest.Clusters, namespace: str, *, names: list[str], port: int,
                 tmp_path: pathlib.Path) -> None:
        self.clusters, self.namespace, self.names = clusters, namespace, names
        self.target = f"127.0.0.1:{port}"
        self.agents = [agentside.AgentProcess(clusters, cluster=name, member=member, coordinator=self.target,
                                              namespace=namespace, log=tmp_path / f"{member}.log")
                       for name, member in zip(names, MEMBERS, strict=True)]
        self.hub = hubside.Hub(clusters, namespace)
        self.custom = clusters.custom(hubside.HUB)
        self.key = f"{namespace}/web"
        self.label = {"fedspread-test/run": names[0]}
        """Put on both MemberClusters; the spread's clusterSelector matches it."""
        self.history: list[dict[str, int]] = []

    def ready(self, member: str) -> set[str]:
        return sampling.pods_where(self.clusters, member, self.namespace, sampling.is_ready)

    def observe(self) -> None:
        self.history.append({m: len(self.ready(m)) for m in MEMBERS})

    def describe(self) -> str:
        return (f"ready pods {({m: sorted(self.ready(m)) for m in MEMBERS})}; "
                f"agent logs {[str(a.log) for a in self.agents]}")

    def wait(self, probe: Any, what: str) -> Any:
        return waiting.wait_for(probe, timeout=TIMEOUT, message=lambda: f"{what}; {self.describe()}")

    def member_cluster(self, name: str) -> dict[str, Any] | None:
        try:
            found = self.custom.get_cluster_custom_object(
                hubside.GROUP, hubside.VERSION, cluster.PLURAL, name)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        assert isinstance(found, dict)
        return found

    def condition(self, name: str, kind: str) -> dict[str, Any]:
        found = self.member_cluster(name) or {}
        return next((dict(c) for c in (found.get("status") or {}).get("conditions") or []
                     if c.get("type") == kind), {})

    def start(self, *, by_name: bool = False) -> dict[str, set[str]]:
        """Both agents up, the spread running 2 Ready pods in each member; those pods. `by_name`:
        the subset lists the clusters by name rather than selecting them by label."""
        for agent, member in zip(self.agents, MEMBERS, strict=True):
            self.wait(lambda a=agent: a.metric("fedspread_agent_link_connected") == 1.0,
                      f"the agent of {member} never connected")
            self.wait(lambda a=agent, m=member: agentside.webhook_live(a, self.clusters, m, self.namespace),
                      f"the apiserver of {member} never called its agent's webhook")
        for name in self.names:  # registered by the agent's Hello; labelled as an operator would
            self.wait(lambda n=name: self.member_cluster(n) is not None, f"{name} was never registered")
            self.custom.patch_cluster_custom_object(hubside.GROUP, hubside.VERSION, cluster.PLURAL, name,
                                                    {"metadata": {"labels": self.label}})
        with sdk.PlacementClient(self.target) as placements:
            self.wait(lambda: sum(1 for c in placements.clusters()
                                  if c.name in self.names and self.label.items() <= c.labels.items()) == 2,
                      "the coordinator never saw both clusters labelled")
        chosen = {"clusters": self.names} if by_name else {"clusterSelector": {"matchLabels": self.label}}
        template = builders.deployment("web", REPLICAS, cpu="10m")
        template["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] = {
            "exec": {"command": ["true"]}, "initialDelaySeconds": READY_AFTER}
        self.hub.create(template, hubside.spread_body(
            "web", target="web", lost_seconds=LOST_SECONDS, subsets=[
                {"name": "both", "clusterSpread": "Balance", **chosen}]))
        self.wait(lambda: all(len(self.ready(m)) == 2 for m in MEMBERS),
                  "the spread never ran 2 Ready pods in each member")
        self.wait(lambda: self.hub.spread_status("web").get("readyReplicas") == REPLICAS,
                  "the coordinator never heard of 4 Ready pods")
        return {m: self.ready(m) for m in MEMBERS}

    def stop(self) -> None:
        for agent in self.agents:
            agent.stop()


def test_deleting_a_member_cluster_whose_agent_runs_recreates_it_and_keeps_every_ready_pod(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    names, process = coordinator
    scene = Scene(clusters, namespace, names=names, port=process.port, tmp_path=tmp_path)
    deleted, member = names[0], MEMBERS[0]
    try:
        before = scene.start()
        old = scene.member_cluster(deleted)
        assert old is not None
        with sdk.PlacementClient(scene.target) as placements, sampling.Sampler(scene.observe) as sampler:
            scene.custom.delete_cluster_custom_object(hubside.GROUP, hubside.VERSION, cluster.PLURAL, deleted)
            time.sleep(SETTLE)
            assert sampler.samples > SETTLE * 2, sampler.samples
            assert min(sample[member] for sample in scene.history) >= 2, scene.history
            assert min(sum(sample.values()) for sample in scene.history) >= REPLICAS, scene.history
            assert scene.ready(member) == before[member], f"the member's pods changed; {scene.describe()}"
            assert placements.placement(scene.key).clusters == {names[0]: 2, names[1]: 2}
        back = scene.wait(lambda: (found := scene.member_cluster(deleted)) is not None
                          and found["metadata"]["uid"] != old["metadata"]["uid"] and found,
                          "the MemberCluster never came back")
        assert back["metadata"].get("labels") == old["metadata"].get("labels"), back
        scene.wait(lambda: scene.condition(deleted, "Ready").get("status") == "True",
                   "the recreated MemberCluster never said Ready")
        for agent in scene.agents:
            assert agent.alive and "Traceback" not in agent.output(), agent.log
    finally:
        scene.stop()


def test_a_decommissioned_member_cluster_empties_and_once_deleted_is_not_recreated(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    names, process = coordinator
    scene = Scene(clusters, namespace, names=names, port=process.port, tmp_path=tmp_path)
    retired, other = names
    try:
        scene.start()
        with sdk.PlacementClient(scene.target) as placements, sampling.Sampler(scene.observe) as sampler:
            scene.custom.patch_cluster_custom_object(hubside.GROUP, hubside.VERSION, cluster.PLURAL, retired,
                                                     {"spec": {"decommission": True}})
            scene.wait(lambda: placements.placement(scene.key).clusters.get(retired, 0) == 0
                       and placements.placement(scene.key).clusters.get(other) == REPLICAS,
                       "the decommissioned cluster's replicas never moved")
            scene.wait(lambda: not scene.ready(MEMBERS[0]) and len(scene.ready(MEMBERS[1])) == REPLICAS,
                       "the move never completed")
            scene.wait(lambda: scene.condition(retired, "Decommissioned").get("status") == "True",
                       f"the MemberCluster never said Decommissioned=True ({scene.member_cluster(retired)})")
        # Decommission is deselection for every spread, and deselection is a move: the retired
        # member's Ready pods go only as their replacements become Ready.
        assert sampler.samples > 5, sampler.samples
        assert min(sum(sample.values()) for sample in scene.history) >= REPLICAS, scene.history
        scene.custom.delete_cluster_custom_object(hubside.GROUP, hubside.VERSION, cluster.PLURAL, retired)
        time.sleep(3)
        assert scene.member_cluster(retired) is None, "a decommissioned MemberCluster was recreated"
        scene.agents[0].stop()  # its agent connects again: a Hello registers nothing either
        scene.agents[0].start()
        scene.wait(lambda: scene.agents[0].metric("fedspread_agent_link_connected") == 1.0,
                   "the agent never connected again")
        time.sleep(3)
        assert scene.member_cluster(retired) is None, "the agent's Hello registered a decommissioned cluster"
        assert len(scene.ready(MEMBERS[1])) == REPLICAS, scene.describe()
    finally:
        scene.stop()


def test_a_restored_hub_does_not_give_the_first_agent_back_every_replica(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    names, process = coordinator
    scene = Scene(clusters, namespace, names=names, port=process.port, tmp_path=tmp_path)
    first, second = MEMBERS
    restored: coordinator_main.CoordinatorProcess | None = None
    try:
        before = scene.start(by_name=True)
        scene.agents[1].stop()  # member-2's agent is late: its pods run on (fail static)
        process.stop()
        hubside.delete_member_clusters(scene.custom, names)  # the restore: no MemberCluster,
        scene.custom.patch_namespaced_custom_object_status(  # no status
            hubside.GROUP, hubside.VERSION, namespace, "federatedspreads", "web", {"status": None},
            _content_type="application/merge-patch+json")
        assert scene.hub.spread_status("web") == {}

        def pods(member: str) -> set[str]:
            return sampling.pods_where(clusters, member, namespace,
                                       lambda p: p.metadata.deletion_timestamp is None)

        history: list[tuple[int, int]] = []
        sample = lambda: history.append((len(pods(first)), len(scene.ready(second))))  # noqa: E731
        with sampling.Sampler(sample) as sampler:
            restored = coordinator_main.CoordinatorProcess(process.settings)
            restored.start()
            scene.wait(lambda: scene.agents[0].metric("fedspread_agent_link_connected") == 1.0,
                       "member-1's agent never reconnected")
            time.sleep(SETTLE)  # member-1 alone is back: placed now, it would take all 4
            scene.agents[1].start()
            scene.wait(lambda: scene.agents[1].metric("fedspread_agent_link_connected") == 1.0,
                       "member-2's agent never reconnected")
            with sdk.PlacementClient(scene.target) as placements:

                def placed() -> dict[str, int]:
                    try:
                        return placements.placement(scene.key).clusters
                    except sdk.SpreadNotFound:  # not placed while it waits for the agents
                        return {}

                scene.wait(lambda: placed() == dict.fromkeys(names, 2),
                           "the restored spread was never placed 2 + 2")
            time.sleep(2)
        assert sampler.samples > SETTLE * 2, sampler.samples
        assert max(count for count, _ in history) <= 2, f"member-1 was given more: {history}"
        assert min(ready for _, ready in history) >= 2, f"member-2 lost Ready pods: {history}"
        assert scene.ready(first) == before[first] and scene.ready(second) == before[second], scene.describe()
    finally:
        if restored is not None:
            restored.stop()
        scene.stop()

