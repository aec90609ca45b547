"""Graceful moves on the real sandbox: replacements are Ready before the originals go.

Two real `fedspread agent` processes manage sandbox member-1 and member-2 for a real coordinator
(placements on the session's Ray). The spread puts 2 replicas in member-1 (the first subset, capped
at 2) and 2 in member-2 (the second subset), with a short clusterLostSeconds. A sampler lists the
Ready pods of both members every 50 ms, and each test judges every sample, not the end.

- **A member lost for real.** member-1's agent is killed for good (one cluster of two: not more than
  half, so the failover brake does not hold). Its pods keep running unmanaged; the coordinator
  places their replacements in member-2. At no sample are member-2's Ready pods fewer than the
  spread's replicas minus the lost cluster's (the replacements come on top). While it is away,
  member-1's pods restart (its node came back: they are Ready only `RESTARTED_READY_AFTER` s after
  they start). Then member-1's agent returns: its pods count again (first subset), nothing of
  member-1 is deleted, and member-2's surplus goes (the spread's scale-down order: last subset
  first) only once member-1's pods are Ready again — the coordinator's last report of them is stale
  until the returned agent reports (the handover rule) — so at no sample after the return are the
  Ready pods of both members fewer than the spread's replicas. Without that rule the surplus goes
  the moment the agent says Hello, while member-1's restarted pods are not Ready yet.
- **A NoExecute cordon.** member-1's MemberCluster gets a `NoExecute` taint: its replicas move to
  member-2, and at no sample are the Ready pods of both members fewer than the spread's replicas
  (member-1's pods go only once member-2's replacements are Ready).
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator
from typing import Any

import conftest
import hubside
import pytest
from handover_scene import MEMBERS, ReadyWatch, Scene

from federation import sdk
from federation.api import cluster

LOST_SECONDS = 4
REPLICAS = 4
RESTARTED_READY_AFTER = 10
"""Seconds from a pod's start to its Ready in the lost-member test: longer than the returned agent
takes to start and say Hello, so a surplus released on its Hello shows as a dip."""


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[list[str], Any]]:
    """A coordinator on the hub, and the cluster names of its two agents."""
    names = hubside.names("g1", "g2")
    with hubside.running_coordinator(sandbox, clusters, members=names) as process:
        yield names, process


def new_scene(clusters: conftest.Clusters, namespace: str, *, names: list[str], port: int,
              tmp_path: pathlib.Path) -> Scene:
    return Scene(clusters, namespace, names=names, target=f"127.0.0.1:{port}", tmp_path=tmp_path)


def start(scene: Scene, *, ready_after: int | None = None) -> dict[str, set[str]]:
    """Both agents up, the spread running 2 Ready pods in each member; those pods."""
    return scene.start(hubside.spread_body(
        "web", target="web", lost_seconds=LOST_SECONDS, subsets=[
            {"name": "first", "clusters": [scene.names[0]], "maxReplicas": 2},
            {"name": "second", "clusters": [scene.names[1]]}]),
        replicas=REPLICAS, expect={MEMBERS[0]: 2, MEMBERS[1]: 2},
        **({} if ready_after is None else {"ready_after": ready_after}))


def test_a_member_lost_for_real_is_replaced_first_and_keeps_its_pods_when_it_returns(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    names, process = coordinator
    scene = new_scene(clusters, namespace, names=names, port=process.port, tmp_path=tmp_path)
    lost, other = MEMBERS
    try:
        before = start(scene, ready_after=RESTARTED_READY_AFTER)
        with sdk.PlacementClient(scene.target) as placements, ReadyWatch(clusters, namespace) as watch:
            scene.agents[0].kill()
            scene.wait(lambda: placements.placement(scene.key).clusters == {names[0]: 0, names[1]: 4},
                       "the coordinator never failed member-1 over")
            scene.wait(lambda: len(scene.ready(other)) == 4, "member-2 never ran the 2 replacements")
            assert scene.ready(lost) == before[lost], f"the lost member's pods changed; {scene.describe()}"
            assert watch.fewest(members=(other,)) >= REPLICAS - 2, watch.history

            returned = len(watch.history)
            for pod in before[lost]:  # member-1's node came back: its pods restart, not Ready for a while
                clusters.core(lost).delete_namespaced_pod(pod, namespace, grace_period_seconds=0)

            def recreated() -> set[str]:
                fresh = scene.pods(lost) - before[lost]
                return fresh if len(fresh) == 2 else set()

            restarted: set[str] = scene.wait(recreated, "member-1's pods were never recreated")
            assert not scene.ready(lost), f"member-1's restarted pods were Ready at once; {scene.describe()}"
            scene.agents[0].start()
            scene.wait(lambda: placements.placement(scene.key).clusters == {names[0]: 2, names[1]: 2},
                       "the returned member's pods never counted again")
            scene.wait(lambda: len(scene.ready(other)) == 2, "member-2's surplus never went")
            time.sleep(2)  # room for a wrong assignment to reach member-1's ReplicaSet
            assert watch.fewest(since=returned) >= REPLICAS, watch.history[returned:]
            assert scene.ready(lost) == restarted, \
                f"the returned member's pods changed; {scene.describe()}"
        assert watch.sampler.samples > 20, watch.sampler.samples
        for agent in scene.agents:
            assert agent.alive and "Traceback" not in agent.output(), agent.log
    finally:
        scene.stop()


def test_a_noexecute_cordon_moves_replicas_and_starts_the_new_ones_first(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    names, process = coordinator
    scene = new_scene(clusters, namespace, names=names, port=process.port, tmp_path=tmp_path)
    cordoned, other = MEMBERS
    try:
        start(scene)
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
