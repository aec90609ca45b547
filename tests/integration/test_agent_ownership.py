"""A real `fedspread agent` on sandbox member-1 never touches Deployments it does not own.

Against the stand-in coordinator (a real gRPC AgentService):

* a user's own Deployment with the target's name stays exactly as it was (image, replicas, labels)
  over several sync periods, and the agent reports a conflict for that spread;
* connected to a coordinator of another federation with no assignments (it sends ResyncComplete
  at once), the agent deletes nothing: neither another federation's Deployment nor one an earlier
  agent version made;
* restarted against a coordinator of its OWN federation that has no spreads (an empty or restored
  hub, a wrong kubeconfig: it sends ResyncComplete at once), the agent deletes nothing either: the
  Deployment it made keeps its marks, replicas and pods over several sync periods (nothing is
  deleted by absence), and its Hello lists that Deployment's spread and uid;
* a Deployment of its federation made for an earlier spread of the same key (another uid: a
  restored hub gives its spreads new uids) is adopted by the assignment of the new one.
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import agentside
import pytest
from conftest import Clusters
from waiting import wait_for

from bench import standin_coordinator
from federation.api import names
from federation.rpc import assignment

MEMBER = "member-1"
WAIT = 90.0  # generous: the sandbox shares 2 cores with other work
SYNC_PERIODS = 8.0  # the workload sync runs every second; a conflict is read again every 5 s


def deployment(namespace: str, name: str, *, labels: dict[str, str],
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    selector = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": {**selector, **labels},
                         "annotations": annotations or {}},
            "spec": {"replicas": 1, "selector": {"matchLabels": selector},
                     "template": {"metadata": {"labels": selector}, "spec": {"containers": [
                         {"name": "app", "image": "busybox:own", "command": ["sleep", "3600"]}]}}}}


def observed(clusters: Clusters, namespace: str, name: str) -> tuple[Any, ...]:
    """What must not change: image, replicas, labels, annotations (but the Deployment controller's
    own `deployment.kubernetes.io/revision`), and that it exists at all (a 404 raises)."""
    found = clusters.apps(MEMBER).read_namespaced_deployment(name, namespace)
    annotations = {k: v for k, v in (found.metadata.annotations or {}).items()
                   if not k.startswith("deployment.kubernetes.io/")}
    return (found.spec.template.spec.containers[0].image, found.spec.replicas, found.metadata.labels,
            annotations)


def own_assignment(namespace: str) -> assignment.Assignment:
    template = deployment(namespace, "own", labels={})
    template["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example/hub:1"
    return assignment.Assignment(
        spread=f"{namespace}/own", generation=1, namespace=namespace, workload="own", replicas=3,
        template=template, template_revision="t1",
        subsets=(assignment.SubsetRule(name="a", index=0, quota=3),), subset_count=1)


def start_agent(clusters: Clusters, standin: standin_coordinator.StandinCoordinator, namespace: str,
                log: pathlib.Path) -> agentside.AgentProcess:
    return agentside.AgentProcess(clusters, cluster=MEMBER, member=MEMBER, coordinator=standin.target,
                                  namespace=namespace, log=log)


@pytest.fixture
def standin() -> Iterator[standin_coordinator.StandinCoordinator]:
    coordinator = standin_coordinator.StandinCoordinator(heartbeat_interval_seconds=1,
                                                         federation_id="other-federation").start()
    yield coordinator
    coordinator.stop()


def test_a_users_deployment_of_the_targets_name_is_untouched_and_a_conflict(
        clusters: Clusters, namespace: str, standin: standin_coordinator.StandinCoordinator,
        tmp_path: pathlib.Path) -> None:
    clusters.apps(MEMBER).create_namespaced_deployment(namespace, deployment(namespace, "own", labels={}))
    before = observed(clusters, namespace, "own")
    standin.assign(MEMBER, own_assignment(namespace))
    agent = start_agent(clusters, standin, namespace, tmp_path / "agent.log")
    try:
        def conflict(report: Any) -> bool:
            return any(s.spread == f"{namespace}/own" and "not created by fedspread" in s.conflict
                       for s in report.spreads)
        standin.wait_message(MEMBER, "pod_counts", timeout=WAIT, where=conflict)
        time.sleep(SYNC_PERIODS)
        assert observed(clusters, namespace, "own") == before, "the user's Deployment was changed"
        mark = standin.mark(MEMBER)
        standin.wait_message(MEMBER, "pod_counts", since=mark, timeout=WAIT, where=conflict)
        assert observed(clusters, namespace, "own") == before
    finally:
        code = agent.stop()
        print(agent.output())
    assert code == 0 and "Traceback" not in agent.output()


def test_an_agent_of_another_federations_coordinator_deletes_nothing(
        clusters: Clusters, namespace: str, standin: standin_coordinator.StandinCoordinator,
        tmp_path: pathlib.Path) -> None:
    apps = clusters.apps(MEMBER)
    theirs = deployment(namespace, "web", labels={names.SPREAD_LABEL: "web", names.FEDERATION_LABEL: "prod"},
                        annotations={names.SPREAD_KEY_ANNOTATION: f"{namespace}/web",
                                     names.SPREAD_UID_ANNOTATION: "uid-web",
                                     names.DESIRED_HASH_ANNOTATION: "h"})
    legacy = deployment(namespace, "old", labels={names.SPREAD_LABEL: "old"},
                        annotations={names.SPREAD_KEY_ANNOTATION: f"{namespace}/old",
                                     names.DESIRED_HASH_ANNOTATION: "h"})
    for body in (theirs, legacy):
        apps.create_namespaced_deployment(namespace, body)
    before = {name: observed(clusters, namespace, name) for name in ("web", "old")}
    agent = start_agent(clusters, standin, namespace, tmp_path / "agent.log")
    try:
        standin.wait_message(MEMBER, "pod_counts", timeout=WAIT)  # welcomed and resynced: no spreads
        wait_for(lambda: agent.metric("fedspread_agent_link_connected") == 1.0, timeout=WAIT,
                 message=lambda: f"the agent never connected; log:\n{agent.output()}")
        time.sleep(SYNC_PERIODS)
        assert {name: observed(clusters, namespace, name) for name in ("web", "old")} == before
    finally:
        code = agent.stop()
        print(agent.output())
    assert code == 0 and "Traceback" not in agent.output()


FEDERATION = "prod-eu"


def ours_standin() -> standin_coordinator.StandinCoordinator:
    """A stand-in coordinator of the agent's own federation (not started; use it in `with`)."""
    return standin_coordinator.StandinCoordinator(heartbeat_interval_seconds=1, federation_id=FEDERATION)


def running_pods(clusters: Clusters, namespace: str, spread: str) -> dict[str, str]:
    """Pod name -> uid of the spread's pods that are Running and not being deleted."""
    pods = agentside.spread_pods(clusters, MEMBER, namespace, spread)
    return {p.metadata.name: p.metadata.uid for p in pods if p.status.phase == "Running"}


def test_an_agent_restarted_against_an_empty_coordinator_of_its_federation_deletes_nothing(
        clusters: Clusters, namespace: str, tmp_path: pathlib.Path) -> None:
    with ours_standin() as standin:
        sent = standin.assign(MEMBER, dataclasses.replace(own_assignment(namespace), replicas=2, subsets=(
            assignment.SubsetRule(name="a", index=0, quota=2),)))
        agent = agentside.AgentProcess(clusters, cluster=MEMBER, member=MEMBER, coordinator=standin.target,
                                       namespace=namespace, log=tmp_path / "agent.log",
                                       args=("--federation-id", FEDERATION))
        try:
            pods = wait_for(lambda: (found := running_pods(clusters, namespace, "own")) and len(found) == 2
                            and found, timeout=WAIT,
                            message=lambda: f"the spread's 2 pods never ran; log:\n{agent.output()}")
            before = observed(clusters, namespace, "own")
            labels, annotations = before[2], before[3]
            assert labels[names.FEDERATION_LABEL] == FEDERATION
            assert annotations[names.SPREAD_UID_ANNOTATION] == sent.spread_uid

            # The hub is empty now (restored, wrong, or a fresh coordinator) and the agent restarts:
            # its bookkeeping is gone, the coordinator knows no spread and completes its resync at once.
            assert agent.stop() == 0
            standin.forget(MEMBER)
            mark = standin.mark(MEMBER)
            agent.start()
            hello = standin.wait_message(MEMBER, "hello", since=mark, timeout=WAIT)
            assert [(a.spread, a.generation, a.spread_uid) for a in hello.applied] == [
                (f"{namespace}/own", 0, sent.spread_uid)], "the Hello lists the Deployment it marked"
            standin.wait_message(MEMBER, "pod_counts", since=mark, timeout=WAIT)  # welcomed and resynced
            wait_for(lambda: agent.metric("fedspread_agent_link_connected") == 1.0, timeout=WAIT,
                     message=lambda: f"the agent never connected; log:\n{agent.output()}")
            time.sleep(SYNC_PERIODS)
            assert observed(clusters, namespace, "own") == before, "the Deployment was changed or released"
            assert running_pods(clusters, namespace, "own") == pods, "its pods were deleted or replaced"
            assert "deployment deleted" not in agent.output() and "deployment released" not in agent.output()
        finally:
            code = agent.stop()
            print(agent.output())
    assert code == 0 and "Traceback" not in agent.output()


def test_a_deployment_of_an_earlier_spread_of_the_same_key_is_adopted(
        clusters: Clusters, namespace: str, tmp_path: pathlib.Path) -> None:
    earlier = deployment(namespace, "own",
                         labels={names.SPREAD_LABEL: "own", names.FEDERATION_LABEL: FEDERATION},
                         annotations={names.SPREAD_KEY_ANNOTATION: f"{namespace}/own",
                                      names.SPREAD_UID_ANNOTATION: "uid-before-the-restore",
                                      names.DESIRED_HASH_ANNOTATION: "h"})
    clusters.apps(MEMBER).create_namespaced_deployment(namespace, earlier)
    with ours_standin() as standin:
        sent = standin.assign(MEMBER, own_assignment(namespace))  # the same key, a new uid, 3 replicas
        agent = agentside.AgentProcess(clusters, cluster=MEMBER, member=MEMBER, coordinator=standin.target,
                                       namespace=namespace, log=tmp_path / "agent.log",
                                       args=("--federation-id", FEDERATION))
        try:
            def adopted() -> bool:
                image, replicas, labels, annotations = observed(clusters, namespace, "own")
                return (annotations.get(names.SPREAD_UID_ANNOTATION) == sent.spread_uid and replicas == 3
                        and image == "registry.example/hub:1"
                        and labels[names.FEDERATION_LABEL] == FEDERATION)
            wait_for(adopted, timeout=WAIT, message=lambda: (
                f"not adopted: {observed(clusters, namespace, 'own')}; log:\n{agent.output()}"))
            standin.wait_message(MEMBER, "pod_counts", timeout=WAIT, where=lambda report: any(
                s.spread == f"{namespace}/own" and not s.conflict for s in report.spreads))
            assert "adopting deployment" in agent.output()
        finally:
            code = agent.stop()
            print(agent.output())
    assert code == 0 and "Traceback" not in agent.output()
