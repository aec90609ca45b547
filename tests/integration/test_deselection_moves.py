"""Deselection is a move: a cluster that leaves a spread's selection keeps its Ready pods until
their replacements are Ready, then its member workload goes (zero quota, then the removal).

Three ordinary edits take member-1 out of the spread (real coordinator on the session's Ray, two
real agents, pods Ready 4 s after they start): the subset that held it removed, the cluster dropped
from its subset's `clusters:`, and its MemberCluster relabelled so the subset's `clusterSelector`
no longer matches. Before this rule each deleted member-1's Deployment at once, and the spread's
Ready pods fell from 4 to 2 while member-2's replacements started. Every sample of both members'
Ready pods is judged, not the end.
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
from kubernetes import client

from federation import sdk

REPLICAS = 4
SELECTOR_LABEL = "pool.fedspread.io/test"


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[list[str], Any]]:
    """A coordinator on the hub, and the cluster names of its two agents."""
    names = hubside.names("d1", "d2")
    with hubside.running_coordinator(sandbox, clusters, members=names) as process:
        yield names, process


def subsets(edit: str, names: list[str]) -> list[dict[str, Any]]:
    """member-1 in the first subset (cap 2), member-2 in the second: 2 and 2."""
    first: dict[str, Any] = {"name": "first", "maxReplicas": 2}
    if edit == "relabelled":
        first["clusterSelector"] = {"matchLabels": {SELECTOR_LABEL: "first"}}
    else:
        first["clusters"] = [names[0]]
    return [first, {"name": "second", "clusters": [names[1]]}]


def deselect(scene: Scene, edit: str) -> None:
    """Take member-1 out of the spread's selection by the ordinary edit `edit`."""
    names = scene.names
    if edit == "subset-removed":
        scene.hub.patch_spread("web", {"spec": {"subsets": [{"name": "second", "clusters": [names[1]]}]}})
    elif edit == "cluster-dropped":
        scene.hub.patch_spread("web", {"spec": {"subsets": [
            {"name": "first", "maxReplicas": 2, "clusters": [names[1]]},
            {"name": "second", "clusters": [names[1]]}]}})
    else:
        scene.patch_member_cluster(names[0], {"metadata": {"labels": {SELECTOR_LABEL: None}}})


def member_deployment(clusters: conftest.Clusters, member: str, namespace: str) -> Any:
    try:
        return clusters.apps(member).read_namespaced_deployment("web", namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


@pytest.mark.parametrize("edit", ["subset-removed", "cluster-dropped", "relabelled"])
def test_a_cluster_leaving_the_selection_keeps_its_ready_pods_until_their_replacements_are_ready(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path, edit: str) -> None:
    names, process = coordinator
    scene = Scene(clusters, namespace, names=names, target=f"127.0.0.1:{process.port}", tmp_path=tmp_path)
    leaving, staying = MEMBERS
    try:
        if edit == "relabelled":
            scene.agents_live()  # their Hellos created the MemberClusters
            scene.patch_member_cluster(names[0], {"metadata": {"labels": {SELECTOR_LABEL: "first"}}})
        scene.start(hubside.spread_body("web", target="web", subsets=subsets(edit, names)),
                    replicas=REPLICAS, expect={leaving: 2, staying: 2})
        with sdk.PlacementClient(scene.target) as placements, ReadyWatch(clusters, namespace) as watch:
            deselect(scene, edit)
            scene.wait(lambda: len(scene.ready(staying)) == REPLICAS and not scene.pods(leaving),
                       "the replicas never moved off the deselected member")
            scene.wait(lambda: member_deployment(clusters, leaving, namespace) is None,
                       "the deselected member's Deployment was never removed once empty")
            scene.wait(lambda: names[0] not in placements.placement(scene.key).clusters
                       or placements.placement(scene.key).clusters[names[0]] == 0,
                       "the placement still gives the deselected member replicas")
            time.sleep(1)
            assert watch.fewest() >= REPLICAS, watch.history
        assert watch.sampler.samples > 20, watch.sampler.samples
        for agent in scene.agents:
            assert agent.alive and "Traceback" not in agent.output(), agent.log
    finally:
        scene.stop()
