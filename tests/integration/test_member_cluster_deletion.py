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

import conftest
import hubside
import pytest
import sampling
from handover_scene import MEMBERS, READY_AFTER, ReadyWatch, Scene

from federation import sdk
from federation.coordinator import process as coordinator_main

LOST_SECONDS = 4
REPLICAS = 4
SETTLE = LOST_SECONDS + READY_AFTER + 4
"""Long enough after the deletion for a wrong move to show: a cluster taken as lost, its pods
deleted and their replacements not yet Ready."""


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[list[str], Any]]:
    """A coordinator on the hub, and the cluster names of its two agents."""
    names = hubside.names("kept", "other")
    with hubside.running_coordinator(sandbox, clusters, members=names) as process:
        yield names, process


def new_scene(clusters: conftest.Clusters, namespace: str, *, names: list[str], port: int,
              tmp_path: pathlib.Path) -> Scene:
    return Scene(clusters, namespace, names=names, target=f"127.0.0.1:{port}", tmp_path=tmp_path)


def start(scene: Scene, *, by_name: bool = False) -> dict[str, set[str]]:
    """Both agents up, their MemberClusters labelled, the spread running 2 Ready pods in each
    member; those pods. `by_name`: the subset lists the clusters by name rather than selecting them
    by the label."""
    scene.agents_live()
    label = {"fedspread-test/run": scene.names[0]}
    scene.label_member_clusters(label)
    chosen = {"clusters": scene.names} if by_name else {"clusterSelector": {"matchLabels": label}}
    return scene.create_spread(hubside.spread_body(
        "web", target="web", lost_seconds=LOST_SECONDS, subsets=[
            {"name": "both", "clusterSpread": "Balance", **chosen}]),
        replicas=REPLICAS, expect=dict.fromkeys(MEMBERS, 2), ready_after=READY_AFTER)


def ready_watch(clusters: conftest.Clusters, namespace: str) -> ReadyWatch:
    """Both members' Ready pods every quarter second."""
    return ReadyWatch(clusters, namespace, period=sampling.PERIOD)


def test_deleting_a_member_cluster_whose_agent_runs_recreates_it_and_keeps_every_ready_pod(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    names, process = coordinator
    scene = new_scene(clusters, namespace, names=names, port=process.port, tmp_path=tmp_path)
    deleted, member = names[0], MEMBERS[0]
    try:
        before = start(scene)
        old = scene.member_cluster(deleted)
        assert old is not None
        with sdk.PlacementClient(scene.target) as placements, ready_watch(clusters, namespace) as watch:
            scene.delete_member_cluster(deleted)
            time.sleep(SETTLE)
            assert watch.sampler.samples > SETTLE * 2, watch.sampler.samples
            assert watch.fewest(members=(member,)) >= 2, watch.history
            assert watch.fewest() >= REPLICAS, watch.history
            assert scene.ready(member) == before[member], f"the member's pods changed; {scene.describe()}"
            assert placements.placement(scene.key).clusters == {names[0]: 2, names[1]: 2}
        back = scene.wait(lambda: (found := scene.member_cluster(deleted)) is not None
                          and found["metadata"]["uid"] != old["metadata"]["uid"] and found,
                          "the MemberCluster never came back")
        assert back["metadata"].get("labels") == old["metadata"].get("labels"), back
        scene.wait(lambda: scene.member_condition(deleted, "Ready").get("status") == "True",
                   "the recreated MemberCluster never said Ready")
        for agent in scene.agents:
            assert agent.alive and "Traceback" not in agent.output(), agent.log
    finally:
        scene.stop()


def test_a_decommissioned_member_cluster_empties_and_once_deleted_is_not_recreated(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    names, process = coordinator
    scene = new_scene(clusters, namespace, names=names, port=process.port, tmp_path=tmp_path)
    retired, other = names
    try:
        start(scene)
        with sdk.PlacementClient(scene.target) as placements, ready_watch(clusters, namespace) as watch:
            scene.patch_member_cluster(retired, {"spec": {"decommission": True}})
            scene.wait(lambda: placements.placement(scene.key).clusters.get(retired, 0) == 0
                       and placements.placement(scene.key).clusters.get(other) == REPLICAS,
                       "the decommissioned cluster's replicas never moved")
            scene.wait(lambda: not scene.ready(MEMBERS[0]) and len(scene.ready(MEMBERS[1])) == REPLICAS,
                       "the move never completed")
            scene.wait(lambda: scene.member_condition(retired, "Decommissioned").get("status") == "True",
                       f"the MemberCluster never said Decommissioned=True ({scene.member_cluster(retired)})")
        # Decommission is deselection for every spread, and deselection is a move: the retired
        # member's Ready pods go only as their replacements become Ready.
        assert watch.sampler.samples > 5, watch.sampler.samples
        assert watch.fewest() >= REPLICAS, watch.history
        scene.delete_member_cluster(retired)
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
    scene = new_scene(clusters, namespace, names=names, port=process.port, tmp_path=tmp_path)
    first, second = MEMBERS
    restored: coordinator_main.CoordinatorProcess | None = None
    try:
        before = start(scene, by_name=True)
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

