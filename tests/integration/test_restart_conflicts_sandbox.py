"""A coordinator restart keeps the recorded holder of a Deployment two spreads name (issue 23, case 6).

Why on the sandbox: `tests/unit/test_restart_conflicts.py` drives the rule through the facade with
the statuses the real status pass writes; here the statuses are the hub's, the listing order is
the real watcher's, and the workloads are real pods that must not move.

The scene: spread `a-older` is created first, invalid (two subsets of one name), so it claims
nothing; a second later `b-holder` names the same Deployment, is placed and runs 2 + 2 pods in
member-1 and member-2 through two real agents. Then `a-older` is fixed: it is the senior spread,
but the holder is placed, so it is refused with `TargetConflict`. The coordinator (in-process, on
the session's Ray) is stopped and a new one started on the same address; the agents reconnect and
are resynced. Before the rule, the new coordinator saw nothing placed while listing and gave the
target to the senior `a-older`: `b-holder` was refused, its workloads released or conflicting.
Now, sampled every 0.5 s until the new coordinator has resynced both agents and for 8 s after:
`b-holder` stays valid and placed 2 + 2, its member Deployments and pods (uids) are the same, and
`a-older` stays refused.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import agentside
import conftest
import hubside
import pytest
import waiting

from federation.api import names
from federation.coordinator import process as coordinator_main
from federation.coordinator.model import lifecycle
from tests.support import builders

MEMBERS = ("member-1", "member-2")
TIMEOUT = 120.0
OBSERVE_SECONDS = 8.0


@pytest.fixture
def cluster_names() -> list[str]:
    return hubside.names("restart1", "restart2")


@pytest.fixture
def config(sandbox: Any, clusters: conftest.Clusters, local_ray: str,
           cluster_names: list[str]) -> Iterator[coordinator_main.CoordinatorConfig]:
    """One coordinator configuration (address fixed, so agents find a restarted one), its
    MemberClusters deleted before and after."""
    custom = clusters.custom(hubside.HUB)
    hubside.delete_member_clusters(custom, cluster_names)
    yield coordinator_main.CoordinatorConfig(
        hub_kubeconfig=pathlib.Path(sandbox.hub.kubeconfig), listen=f"127.0.0.1:{hubside.free_port()}",
        heartbeat_seconds=1.0, status_seconds=0.5, tick_seconds=0.25)
    hubside.delete_member_clusters(custom, cluster_names)


def wait(probe: Callable[[], Any], message: str | Callable[[], str]) -> Any:
    return waiting.wait_for(probe, timeout=TIMEOUT, interval=0.5, message=message)


def workloads(clusters: conftest.Clusters, namespace: str) -> dict[str, tuple[Any, ...]]:
    """Per member: the member Deployment `web` (uid, replicas, managing spread) and its Running pods' uids."""
    found = {}
    for member in MEMBERS:
        made = [d for d in clusters.apps(member).list_namespaced_deployment(namespace).items
                if d.metadata.name == "web" and d.metadata.deletion_timestamp is None]
        pods = clusters.core(member).list_namespaced_pod(namespace, label_selector="app=web").items
        found[member] = (
            tuple((d.metadata.uid, d.spec.replicas,
                   (d.metadata.annotations or {}).get(names.SPREAD_KEY_ANNOTATION)) for d in made),
            frozenset(p.metadata.uid for p in pods
                      if p.status.phase == "Running" and p.metadata.deletion_timestamp is None))
    return found


def placed(hub: hubside.Hub, spread: str) -> dict[str, int]:
    total: dict[str, int] = {}
    for subset in hub.spread_status(spread).get("subsetStatuses") or []:
        for entry in subset.get("clusters") or []:
            total[entry["cluster"]] = total.get(entry["cluster"], 0) + entry.get("replicas", 0)
    return total


def valid(hub: hubside.Hub, spread: str) -> tuple[Any, Any]:
    found = hub.condition(spread, "Valid")
    return found.get("status"), found.get("reason")


def test_a_restarted_coordinator_keeps_the_recorded_holder_and_its_pods(
        clusters: conftest.Clusters, namespace: str, config: coordinator_main.CoordinatorConfig,
        cluster_names: list[str], tmp_path: pathlib.Path) -> None:
    hub = hubside.Hub(clusters, namespace)
    both = {"name": "both", "clusters": cluster_names, "clusterSpread": "Balance"}
    first = coordinator_main.CoordinatorProcess(config)
    first.start()
    second: coordinator_main.CoordinatorProcess | None = None
    agents: list[agentside.AgentProcess] = []
    try:
        for name, member in zip(cluster_names, MEMBERS, strict=True):
            agents.append(agentside.AgentProcess(
                clusters, cluster=name, member=member, coordinator=config.listen, namespace=namespace,
                log=tmp_path / f"{member}.log"))
        for agent, member in zip(agents, MEMBERS, strict=True):
            wait(lambda a=agent: a.metric("fedspread_agent_link_connected") == 1.0,
                 f"the agent of {member} never connected")
            wait(lambda a=agent, m=member: agentside.webhook_live(a, clusters, m, namespace),
                 f"the apiserver of {member} never called its webhook")

        # a-older: created first, invalid (a duplicate subset name): it claims nothing yet.
        hub.create(builders.deployment("web", 4, cpu="10m"),
                   hubside.spread_body("a-older", target="web", subsets=[both, both], lost_seconds=600))
        wait(lambda: valid(hub, "a-older") == ("False", "InvalidSpec"),
             lambda: f"a-older never invalid: {hub.condition('a-older', 'Valid')}")
        time.sleep(1.1)  # creationTimestamp has whole seconds: b-holder is strictly younger
        hub.custom.create_namespaced_custom_object(
            hubside.GROUP, hubside.VERSION, namespace, "federatedspreads",
            hubside.spread_body("b-holder", target="web", subsets=[both], lost_seconds=600))
        expected = dict.fromkeys(cluster_names, 2)
        wait(lambda: placed(hub, "b-holder") == expected
             and all(len(w[1]) == 2 for w in workloads(clusters, namespace).values()),
             lambda: f"b-holder never ran 2 + 2: {workloads(clusters, namespace)}")
        hub.patch_spread("a-older", {"spec": {"subsets": [both]}})  # valid now, senior, refused
        wait(lambda: valid(hub, "a-older") == ("False", lifecycle.TARGET_CONFLICT),
             lambda: f"a-older never refused: {hub.condition('a-older', 'Valid')}")
        before = workloads(clusters, namespace)
        for member, (made, pods) in before.items():
            assert [m[1:] for m in made] == [(2, f"{namespace}/b-holder")], (member, before)
            assert len(pods) == 2, (member, before)

        first.stop()
        second = coordinator_main.CoordinatorProcess(config)
        second.start()

        def scene() -> tuple[Any, ...]:
            return (workloads(clusters, namespace), valid(hub, "b-holder"), placed(hub, "b-holder"),
                    valid(hub, "a-older"), placed(hub, "a-older"))

        def resynced() -> bool:  # a stream is resynced as it attaches once the hub is listed
            assert second is not None
            facade = second.coordinator
            return facade.hub_listed() and sorted(facade.connected()) == sorted(cluster_names)

        started, wanted = time.monotonic(), (before, ("True", "SpecValid"), expected,
                                             ("False", lifecycle.TARGET_CONFLICT), {})
        while True:
            now = scene()
            assert now == wanted, f"after the restart: expected {wanted}, found {now}"
            elapsed = time.monotonic() - started
            if elapsed >= OBSERVE_SECONDS and resynced():
                break
            assert elapsed < TIMEOUT, "the agents were never resynced by the new coordinator"
            time.sleep(0.5)
        for agent in agents:
            assert agent.alive and "Traceback" not in agent.output(), agent.log
    finally:
        for agent in agents:
            agent.stop()
        for running in (second, first):
            if running is not None:
                running.stop()
