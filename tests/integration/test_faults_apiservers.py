"""Faults: a member's apiserver restarted under a running agent, and the hub away for a while.

Both restart a real kube-apiserver of the session's sandbox with its own command line (same
port, flags and etcd prefix: `federation.sandbox.launcher.stop_component/start_component`),
killed (SIGKILL) or stopped (SIGTERM) as a seed decides, down for a random while.

* **Member apiserver.** A real `fedspread agent` manages member-1 for a real coordinator. Its
  watches break; when the apiserver is back, resuming from their old resourceVersions gets
  `410 Gone` (the shared etcd moved on), so the reflector lists again and reports what changed.
  A scale is made just before the stop or while it is down. Afterwards the agent must see it
  all: the scaled Deployment settles with its subsets in order, a new spread's Deployment is
  created and its pods placed, the coordinator's ready counts and the hub statuses agree with
  the pods, the nodes are still reported — and the agent never crashed.
* **Hub apiserver.** A coordinator with two stand-in agents; a scale just before the outage (seen
  or not, by chance). While the hub is away the SDK keeps answering the last placement, the
  agents keep their quotas, and the agents report pods running (a status write the hub cannot
  take yet). When the hub is back the scale is placed, the status written, and later scales
  followed (the coordinator's hub watch came back).
"""

from __future__ import annotations

import pathlib
import random
import time
from collections.abc import Iterator
from typing import Any

import agentside
import conftest
import hubside
import pytest
import waiting

from federation import sdk
from federation.sandbox import launcher, state
from tests.support import builders, soak

MEMBER = "member-1"
TIMEOUT = 90.0
CONTROLLERS_TIMEOUT = 240.0
"""How long the member's kube-controller-manager may take to act again after its apiserver
restarted (seen: 68 s on a loaded 2-core machine); our recovery's TIMEOUT starts after it."""


def restarted(sandbox: state.SandboxState, name: str, rng: random.Random, *, down: Any = None) -> float:
    """Stop component `name` (SIGKILL, or SIGTERM and SIGKILL 3 s later if it still drains, by
    `rng`), call `down()` while it is away, start it again after a random while and wait until it
    is ready; how long it was down."""
    stopped = time.monotonic()
    launcher.stop_component(sandbox, name, crash=rng.random() < 0.5, grace=3.0)
    try:
        if down is not None:
            down()
        time.sleep(rng.uniform(0.0, 3.0))
    finally:  # back up whatever happened: the session's later tests need it
        launcher.start_component(sandbox, name)
    print(f"{name} was down {time.monotonic() - stopped:.1f} s", flush=True)
    return time.monotonic() - stopped


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[str, Any]]:
    """A coordinator on the hub, and the cluster name an agent uses."""
    (name,) = hubside.names("m1")
    with hubside.running_coordinator(sandbox, clusters, members=[name]) as process:
        yield name, process


def subsets(cluster: str) -> list[dict[str, Any]]:
    """Two pods in subset "first", the rest in "rest", both on `cluster`."""
    return [{"name": "first", "clusters": [cluster], "maxReplicas": 2},
            {"name": "rest", "clusters": [cluster]}]


def in_order(replicas: int) -> dict[str | None, int]:
    """The pods per subset of `subsets` for `replicas`."""
    return {k: v for k, v in {"first": min(2, replicas), "rest": max(0, replicas - 2)}.items() if v}


@pytest.mark.parametrize("seed", soak.seeds(1))
def test_member_apiserver_restart_agent_caches_recover(
        seed: int, sandbox: state.SandboxState, clusters: conftest.Clusters, namespace: str,
        coordinator: tuple[str, Any], tmp_path: pathlib.Path) -> None:
    rng = random.Random(seed)
    name, process = coordinator
    target = f"127.0.0.1:{process.port}"
    hub = hubside.Hub(clusters, namespace)
    agent = agentside.AgentProcess(clusters, cluster=name, member=MEMBER, coordinator=target,
                                   namespace=namespace, log=tmp_path / "agent.log")
    replicas = {"web": rng.randint(1, 3), "api": rng.randint(1, 3)}

    def fail(what: str) -> str:
        return f"seed {seed} (replicas {replicas}): {what}; agent log {agent.log}"

    def settled(spread: str) -> bool:
        mine = agentside.owned(agentside.spread_pods(clusters, MEMBER, namespace, spread))
        return len(mine) == replicas[spread] and agentside.by_subset(mine) == in_order(replicas[spread]) \
            and all(p.status.phase == "Running" for p in mine)

    def wait(probe: Any, what: str) -> None:
        waiting.wait_for(probe, timeout=TIMEOUT, message=lambda: fail(what))

    try:
        wait(lambda: agentside.webhook_live(agent, clusters, MEMBER, namespace),
             "the webhook is never called")
        hub.create(builders.deployment("web", replicas["web"], cpu="10m"),
                   hubside.spread_body("web", target="web", subsets=subsets(name), lost_seconds=600))
        wait(lambda: settled("web"), "web never settled before the restart")

        def scale() -> None:
            replicas["web"] += rng.randint(1, 2)
            hub.scale("web", replicas["web"])

        before = rng.random() < 0.5
        if before:  # just before the stop: the agent may or may not have applied it
            scale()
            time.sleep(rng.uniform(0.0, 1.0))
        restarted(sandbox, f"{MEMBER}-apiserver", rng, down=None if before else scale)
        # The member's own controllers first (the sandbox's, not ours): our clock starts once they act.
        probed = time.monotonic()
        waiting.wait_for(lambda: agentside.controllers_acting(clusters, MEMBER, namespace, name="probe"),
                         timeout=CONTROLLERS_TIMEOUT, interval=1.0,
                         message=lambda: fail("the member's controllers never acted after the restart"))
        print(f"member controllers acted {time.monotonic() - probed:.1f} s after it was back", flush=True)
        wait(lambda: settled("web"), "web never settled after the restart (a stale cache?)")
        hub.create(builders.deployment("api", replicas["api"], cpu="10m"),  # a new Deployment, new pods
                   hubside.spread_body("api", target="api", subsets=subsets(name), lost_seconds=600))
        wait(lambda: settled("api"), "the new spread's pods never settled after the restart")
        with sdk.PlacementClient(target) as client:
            for spread in ("web", "api"):
                def counted(spread: str = spread) -> bool:
                    return client.placement(f"{namespace}/{spread}").ready == {name: replicas[spread]}

                wait(counted, f"the coordinator's ready count for {spread} never matched the pods")
            wait(lambda: {c.name: c.node_count for c in client.clusters()}.get(name) == 3,
                 "the agent's inventory lost member-1's three nodes")
        for spread in ("web", "api"):  # the member Deployments' status, from the agent's cache
            def aggregated(spread: str = spread) -> bool:
                return hub.deployment_status(spread).get("ready_replicas") == replicas[spread]

            wait(aggregated, f"the hub Deployment {spread} never showed the member's ready replicas")
        assert agent.alive, fail("the agent exited")
        assert "Traceback" not in agent.output(), fail("the agent logged a traceback")
        assert agent.starts == 1, fail("the agent was restarted")
    finally:
        agent.stop()


@pytest.mark.parametrize("seed", soak.seeds(1))
def test_hub_away_coordinator_serves_last_placements_and_status_catches_up(
        seed: int, sandbox: state.SandboxState, clusters: conftest.Clusters, namespace: str,
        local_ray: str) -> None:
    rng = random.Random(seed)
    capped, elastic = hubside.names("capped", "elastic")
    hub = hubside.Hub(clusters, namespace)
    key = f"{namespace}/web"
    spread = [{"name": "onprem", "clusters": [capped], "maxReplicas": 2},
              {"name": "cloud", "clusters": [elastic]}]

    def placed(replicas: int) -> dict[str, int]:
        return {capped: min(2, replicas), elastic: max(0, replicas - 2)}

    with hubside.running_coordinator(sandbox, clusters, members=[capped, elastic]) as process:
        target = f"127.0.0.1:{process.port}"
        agents = hubside.agents_for(target, {capped: (3, "4"), elastic: (3, "4")})
        try:
            hub.create(builders.deployment("web", 3, cpu="100m"),
                       hubside.spread_body("web", target="web", subsets=spread))
            hubside.wait_replicas(agents, key, placed(3), what=f"seed {seed}: created")
            scaled = rng.randint(4, 8)
            hub.scale("web", scaled)  # just before the outage: seen, or not, by chance
            time.sleep(rng.uniform(0.0, 0.5))
            ready: dict[str, int] = {}

            def meanwhile() -> None:
                """The hub is away: placements served, quotas kept, pods reported running."""
                with sdk.PlacementClient(target) as client:
                    served = client.placement(key).clusters
                assert served in (placed(3), placed(scaled)), f"seed {seed}: the SDK served {served}"
                held = {name: count or 0 for name, count in hubside.replicas_of(agents, key).items()}
                assert held in (placed(3), placed(scaled)), f"seed {seed}: agents hold {held}"
                for cluster_name, agent in agents.items():
                    ready[cluster_name] = held[cluster_name] or 0
                    agent.report_running(key, subset="onprem" if cluster_name == capped else "cloud",
                                         running=ready[cluster_name])

            restarted(sandbox, "hub-apiserver", rng, down=meanwhile)
            assert ready, f"seed {seed}: nothing ran while the hub was away"
            hubside.wait_replicas(agents, key, placed(scaled), timeout=TIMEOUT,
                                  what=f"seed {seed}: the scale made before the outage")

            def caught_up() -> bool:
                status = hub.spread_status("web")
                placement = {p["cluster"]: p["replicas"] for p in status.get("placement") or []}
                return (status.get("replicas"), status.get("readyReplicas"), placement) == \
                    (scaled, sum(ready.values()), placed(scaled))

            waiting.wait_for(caught_up, timeout=TIMEOUT, message=lambda: (
                f"seed {seed}: the status never caught up (ready {ready}, replicas {scaled}): "
                f"{hub.spread_status('web')}"))
            hub.scale("web", 1)  # the hub watch is back: later scales are followed too
            hubside.wait_replicas(agents, key, placed(1), timeout=TIMEOUT,
                                  what=f"seed {seed}: a scale after the outage")
            assert process.watcher.alive, f"seed {seed}: a hub watch thread died"
        finally:
            hubside.stop_all(agents)
