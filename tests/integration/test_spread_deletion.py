"""Deleting a FederatedSpread on the hub: its member workloads are orphaned, or deleted on request.

A real coordinator (placements on the session's Ray) and a real `fedspread agent` process manage
sandbox member-1. Two spreads run side by side: `web` with the default `deletionPolicy` (Orphan)
and `api` with `deletionPolicy: Delete`. `kubectl delete` of `web` must leave its member
Deployment and its pods running — the same pods, still Ready, after the agent processed the
removal (its Deployment no longer carries the spread's key) — and the hub Deployment's status must
stop claiming replicas. Deleting `api` must delete its member Deployment.
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

from federation.api import names
from tests.support import builders

MEMBER = "member-1"
TIMEOUT = 90.0
OBSERVE_SECONDS = 5.0


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[str, Any]]:
    """A coordinator on the hub, and the cluster name its agent uses."""
    (name,) = hubside.names("m1")
    with hubside.running_coordinator(sandbox, clusters, members=[name]) as process:
        yield name, process


def ready_pods(clusters: conftest.Clusters, namespace: str, app: str) -> dict[str, bool]:
    """Pod name → Ready, for the pods of Deployment `app` in the member (selected by its own label,
    which outlives fedspread's management)."""
    pods = clusters.core(MEMBER).list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return {p.metadata.name: any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
            for p in pods if p.metadata.deletion_timestamp is None}


def member_deployment(clusters: conftest.Clusters, namespace: str, name: str) -> Any:
    """The member Deployment `name`, or None."""
    found = [d for d in clusters.apps(MEMBER).list_namespaced_deployment(namespace).items
             if d.metadata.name == name and d.metadata.deletion_timestamp is None]
    return found[0] if found else None


def test_deleting_a_spread_orphans_its_workloads_by_default_and_deletes_them_on_request(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[str, Any],
        tmp_path: pathlib.Path) -> None:
    name, process = coordinator
    hub = hubside.Hub(clusters, namespace)
    agent = agentside.AgentProcess(clusters, cluster=name, member=MEMBER,
                                   coordinator=f"127.0.0.1:{process.port}", namespace=namespace,
                                   log=tmp_path / "agent.log")

    def wait(probe: Any, what: str) -> Any:
        return waiting.wait_for(probe, timeout=TIMEOUT, message=lambda: (
            f"{what}; web pods {ready_pods(clusters, namespace, 'web')}, api pods "
            f"{ready_pods(clusters, namespace, 'api')}; agent log {agent.log}"))

    try:
        wait(lambda: agentside.webhook_live(agent, clusters, MEMBER, namespace),
             "the apiserver never called the agent's webhook")
        subsets = [{"name": "only", "clusters": [name]}]
        hub.create(builders.deployment("web", 2, cpu="10m"),
                   hubside.spread_body("web", target="web", subsets=subsets, lost_seconds=600))
        api_spread = hubside.spread_body("api", target="api", subsets=subsets, lost_seconds=600)
        api_spread["spec"]["deletionPolicy"] = "Delete"
        hub.create(builders.deployment("api", 1, cpu="10m"), api_spread)
        wait(lambda: list(ready_pods(clusters, namespace, "web").values()) == [True, True],
             "web never ran 2 Ready pods")
        wait(lambda: list(ready_pods(clusters, namespace, "api").values()) == [True],
             "api never ran 1 Ready pod")
        wait(lambda: hub.deployment_status("web").get("ready_replicas") == 2,
             "the hub Deployment web never showed 2 ready replicas")
        before = set(ready_pods(clusters, namespace, "web"))

        hub.delete_spread("web")
        # The removal is processed once the agent has released the Deployment (our key is gone).
        wait(lambda: names.SPREAD_KEY_ANNOTATION not in (
            (member_deployment(clusters, namespace, "web") or _gone()).metadata.annotations or {}),
            "the agent never released the member Deployment web")
        released = member_deployment(clusters, namespace, "web")
        assert names.SPREAD_LABEL not in (released.metadata.labels or {}), released.metadata.labels
        deadline = time.monotonic() + OBSERVE_SECONDS
        while time.monotonic() < deadline:
            assert member_deployment(clusters, namespace, "web") is not None, "web's Deployment was deleted"
            now = ready_pods(clusters, namespace, "web")
            assert now == dict.fromkeys(before, True), f"web's pods changed or stopped: {before} -> {now}"
            time.sleep(0.5)
        wait(lambda: not hub.deployment_status("web").get("ready_replicas")
             and not hub.deployment_status("web").get("replicas"),
             f"the hub Deployment web still claims replicas: {hub.deployment_status('web')}")

        hub.delete_spread("api")
        wait(lambda: member_deployment(clusters, namespace, "api") is None,
             "the member Deployment api (deletionPolicy Delete) was never deleted")
        assert member_deployment(clusters, namespace, "web") is not None
        assert agent.alive, f"the agent exited; log {agent.log}"
        assert "Traceback" not in agent.output(), f"the agent logged a traceback; log {agent.log}"
    finally:
        agent.stop()


def _gone() -> Any:
    raise AssertionError("the member Deployment web was deleted (the default policy orphans it)")
