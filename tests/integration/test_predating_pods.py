"""A real `fedspread agent` on sandbox member-1 matches pods that predate its assignment by node.

Pods of a spread that ran before the agent had the spread's assignment (or while its webhook was
down: it fails open) carry no subset. Against the stand-in coordinator: four such pods run in
zones a, a, b and c before the agent starts; the assignment gives subset a (zone a) one pod and
subset b (zone b) two. The agent annotates the older zone-a pod with subset a and the zone-b pod
with b, counts them there in its pod counts report, and reports the other two as unassigned (a is
full; no subset takes zone c). The member Deployment has 0 replicas, so no new pod competes.

A pod is a spread's only while its owner chain leads to the spread's marked member Deployment
(agents/owners.py): the old pods name that Deployment (made before the agent starts, with the
marks the assignment gives it) as their controller, which stands in for its ReplicaSet here, as
no ReplicaSet controller then acts on them.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator
from typing import Any

import agentside
import pytest
from conftest import Clusters
from waiting import wait_for

from agents.controller import workload
from bench import standin_coordinator
from federation.api import names
from federation.rpc import agent_pb2, assignment

MEMBER = "member-1"
FEDERATION = "predating"
ZONE = "topology.kubernetes.io/zone"
WAIT = 90.0  # generous: the sandbox shares 2 cores with other work


def zone_rule(name: str, index: int, quota: int) -> assignment.SubsetRule:
    return assignment.SubsetRule(name=name, index=index, quota=quota, required_term={
        "matchExpressions": [{"key": ZONE, "operator": "In", "values": [f"{MEMBER}-{name}"]}]})


def old_pod(name: str, zone: str, *, owner: dict[str, Any]) -> dict[str, Any]:
    """A pod of spread `web` made before the agent ran by a controller (`owner`, a controller
    ownerReference: only a workload's pods are matched, not stray pods carrying the label): no
    subset, pinned to `zone`."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {names.SPREAD_LABEL: "web", "app": "old-web"},
                         "ownerReferences": [owner]},
            "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {ZONE: f"{MEMBER}-{zone}"},
                     "containers": [{"name": "app", "image": "registry.example/app:1.0",
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}


@pytest.fixture
def standin() -> Iterator[standin_coordinator.StandinCoordinator]:
    coordinator = standin_coordinator.StandinCoordinator(heartbeat_interval_seconds=1,
                                                         federation_id=FEDERATION).start()
    yield coordinator
    coordinator.stop()


def test_pods_running_before_the_assignment_are_matched_by_node_and_counted(
        clusters: Clusters, namespace: str, standin: standin_coordinator.StandinCoordinator,
        tmp_path: pathlib.Path) -> None:
    core = clusters.core(MEMBER)
    template = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                         "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                             {"name": "app", "image": "registry.example/app:1.0"}]}}}}
    value = assignment.Assignment(
        spread=f"{namespace}/web", generation=1, namespace=namespace, workload="web", replicas=0,
        template=template, template_revision="r1", subsets=(zone_rule("a", 0, 1), zone_rule("b", 1, 2)),
        subset_count=2, spread_uid="uid-web", federation=FEDERATION)
    made = clusters.apps(MEMBER).create_namespaced_deployment(namespace, workload.render(value))
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": made.metadata.uid,
             "controller": True}
    for name, zone in (("old-a1", "a"), ("old-a2", "a"), ("old-b", "b"), ("old-c", "c")):
        core.create_namespaced_pod(namespace, old_pod(name, zone, owner=owner))
        time.sleep(1.1)  # creationTimestamps a second apart: old-a1 is the older of zone a's

    def running() -> bool:
        pods = agentside.spread_pods(clusters, MEMBER, namespace, "web")
        return len(pods) == 4 and all(p.status.phase == "Running" for p in pods)

    wait_for(running, timeout=WAIT, message="the four old pods Running")
    standin.assign(MEMBER, value)
    agent = agentside.AgentProcess(clusters, cluster=MEMBER, member=MEMBER, coordinator=standin.target,
                                   namespace=namespace, log=tmp_path / "agent.log")
    try:
        def annotated() -> dict[str, str | None] | None:
            pods = agentside.spread_pods(clusters, MEMBER, namespace, "web")
            found = {p.metadata.name: (p.metadata.annotations or {}).get(names.SUBSET_ANNOTATION)
                     for p in pods}
            return found if found == {"old-a1": "a", "old-a2": None, "old-b": "b", "old-c": None} else None

        wait_for(annotated, timeout=WAIT, message="old-a1 annotated with subset a and old-b with b")

        def counted(report: agent_pb2.PodCountsReport) -> bool:
            for item in report.spreads:
                if item.spread == f"{namespace}/web":
                    running = {s.subset: s.counts.running for s in item.subsets}
                    return running == {"a": 1, "b": 1} and item.unassigned.running == 2
            return False

        standin.wait_message(MEMBER, "pod_counts", timeout=WAIT, where=counted)
        time.sleep(3.0)  # later rounds match nothing more and move nothing
        assert annotated() is not None
    finally:
        code = agent.stop()
        print(agent.output())
    assert code == 0 and "Traceback" not in agent.output()
