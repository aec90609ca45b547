"""A spread deleted and created again (`kubectl replace --force`) adopts its workload: no Ready pod
is lost, no Conflict stays, and a hub scale reaches the member afterwards.

A real coordinator (placements on the session's Ray) and a real `fedspread agent` process manage
sandbox member-1. The spread runs 2 pods that are Ready only 4 s after they start (the node
simulator honours the readiness probe's delay), so a workload deleted and made again shows as Ready
pods lost. The test deletes the spread and creates it again at once, as `kubectl replace --force`
does, while a sampler counts the member's Ready pods of the Deployment every quarter second:

- `deletionPolicy: Orphan` — the release leaves a `released-from` mark and the new spread's agent
  adopts the Deployment (before the rule it met the released Deployment as a user's and stayed
  `Conflict` for good: the hub scale never reached the member);
- `deletionPolicy: Delete` — the coordinator holds the delete for a re-creation (`RECREATE_GRACE`)
  and the new spread adopts instead (before the rule the member Deployment was deleted and made
  again: every Ready pod lost). The test waits past the hold: nothing deletes it later either.

At every sample the member runs the spread's 2 Ready pods — the same pods (no rollout) — until the
hub scale to 3, which must reach the member.
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

from federation.api import names
from federation.api import spread as spread_api
from federation.coordinator.model import lifecycle
from tests.support import builders

MEMBER = "member-1"
TIMEOUT = 90.0
READY_AFTER = 4
OBSERVE_SECONDS = 4.0
"""After adoption, how long nothing may change (four of the agent's workload rounds)."""


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[str, Any]]:
    """A coordinator on the hub, and the cluster name its agent uses."""
    (name,) = hubside.names("rc1")
    with hubside.running_coordinator(sandbox, clusters, members=[name]) as process:
        yield name, process


class ReadyWatch:
    """The member's Ready pods of Deployment `web` (by its own `app` label, which outlives any
    fedspread mark) every quarter second."""

    def __init__(self, clusters: conftest.Clusters, namespace: str) -> None:
        self.clusters, self.namespace = clusters, namespace
        self.history: list[frozenset[str]] = []
        self.sampler = sampling.Sampler(self._observe, period=0.25, name="ready-watch")

    def ready(self) -> frozenset[str]:
        pods = self.clusters.core(MEMBER).list_namespaced_pod(self.namespace, label_selector="app=web").items
        return frozenset(p.metadata.name for p in pods if sampling.is_ready(p))

    def _observe(self) -> None:
        self.history.append(self.ready())


def member_deployment(clusters: conftest.Clusters, namespace: str) -> Any:
    """The member Deployment `web`, or None."""
    found = [d for d in clusters.apps(MEMBER).list_namespaced_deployment(namespace).items
             if d.metadata.name == "web" and d.metadata.deletion_timestamp is None]
    return found[0] if found else None


def adopted_by(clusters: conftest.Clusters, namespace: str, uid: str) -> bool:
    """The member Deployment carries the marks of the spread with `uid` (and no released mark)."""
    found = member_deployment(clusters, namespace)
    if found is None:
        return False
    labels, annotations = found.metadata.labels or {}, found.metadata.annotations or {}
    return (annotations.get(names.SPREAD_UID_ANNOTATION) == uid and names.FEDERATION_LABEL in labels
            and names.RELEASED_FROM_ANNOTATION not in annotations)


@pytest.mark.parametrize("policy", ["Orphan", "Delete"])
def test_a_spread_deleted_and_created_again_adopts_its_workload_without_losing_a_ready_pod(
        policy: str, clusters: conftest.Clusters, namespace: str, coordinator: tuple[str, Any],
        tmp_path: pathlib.Path) -> None:
    name, process = coordinator
    hub = hubside.Hub(clusters, namespace)
    agent = agentside.AgentProcess(clusters, cluster=name, member=MEMBER,
                                   coordinator=f"127.0.0.1:{process.port}", namespace=namespace,
                                   log=tmp_path / "agent.log")
    watch = ReadyWatch(clusters, namespace)

    def wait(probe: Any, what: str) -> Any:
        return waiting.wait_for(probe, timeout=TIMEOUT, message=lambda: (
            f"{what}; Ready pods {sorted(watch.ready())}, spread status {hub.spread_status('web')}; "
            f"agent log {agent.log}"))

    try:
        wait(lambda: agentside.webhook_live(agent, clusters, MEMBER, namespace),
             "the apiserver never called the agent's webhook")
        template = builders.deployment("web", 2, cpu="10m")
        template["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] = {
            "exec": {"command": ["true"]}, "initialDelaySeconds": READY_AFTER}
        body = hubside.spread_body("web", target="web", subsets=[{"name": "only", "clusters": [name]}],
                                   lost_seconds=600)
        body["spec"]["deletionPolicy"] = policy
        hub.create(template, body)
        wait(lambda: len(watch.ready()) == 2, "the spread never ran 2 Ready pods")
        wait(lambda: hub.spread_status("web").get("readyReplicas") == 2,
             "the coordinator never heard of 2 Ready pods")
        before = watch.ready()

        with watch.sampler:
            # kubectl replace --force: delete, then create the same object again at once.
            hub.delete_spread("web")
            created = hub.custom.create_namespaced_custom_object(
                hubside.GROUP, hubside.VERSION, namespace, spread_api.PLURAL, body)
            uid = created["metadata"]["uid"]
            wait(lambda: adopted_by(clusters, namespace, uid),
                 "the new spread's agent never adopted the member Deployment")
            wait(lambda: hub.condition("web", "Valid").get("status") == "True"
                 and hub.spread_status("web").get("readyReplicas") == 2,
                 "the new spread never counted the 2 Ready pods")
            if policy == "Delete":  # past the hold: a held delete would go now
                time.sleep(lifecycle.RECREATE_GRACE.total_seconds() + 1)
            time.sleep(OBSERVE_SECONDS)
            assert hub.condition("web", "Conflict").get("status") != "True", hub.spread_status("web")
            assert adopted_by(clusters, namespace, uid), member_deployment(clusters, namespace)
            assert watch.ready() == before, f"the pods changed: {sorted(before)} -> {sorted(watch.ready())}"
            recreated = len(watch.history)

            hub.scale("web", 3)
            wait(lambda: (member_deployment(clusters, namespace) or _gone()).spec.replicas == 3,
                 "the hub scale never reached the member Deployment")
            wait(lambda: len(watch.ready()) == 3, "the member never ran 3 Ready pods")
        assert recreated > 8, f"too few samples: {recreated}"
        lost = [sorted(sample) for sample in watch.history[:recreated] if sample != before]
        assert not lost, f"Ready pods changed while the spread was created again: {lost[:5]}"
        assert before <= watch.history[-1], watch.history[-1]
        assert agent.alive and "Traceback" not in agent.output(), f"agent log {agent.log}"
    finally:
        agent.stop()


def _gone() -> Any:
    raise AssertionError("the member Deployment web is gone")
