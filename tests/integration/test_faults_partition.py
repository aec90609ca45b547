"""Faults: the coordinator cut off from every agent (a partition on its side) moves nothing.

Two real `fedspread agent` processes manage sandbox member-1 and member-2 for a real coordinator
(in this process, on the session's Ray), each behind its own `tests/support/tcp_proxy.py`. A
spread of one subset over both members (Balance: either member could take every replica) puts 2
replicas in each and fails clusters over after 8 s of silence. Both proxies
then refuse the agents for about 15 s — longer than clusterLostSeconds, so both clusters are lost — and
let them back one after the other, as agents return after a network fault on the coordinator's
side.

What must hold (the failover brake): the spread reports `FailoverSuspended` while both are
silent; no pod of the spread is deleted or replaced in either member at any sample; the member
Deployments keep 2 replicas each; afterwards the coordinator's placement is what it was.
Before the brake, the first agent back received all 4 replicas and the other member's healthy
pods were deleted.
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

from federation import sdk
from tests.support import builders, tcp_proxy

MEMBERS = ("member-1", "member-2")
TIMEOUT = 90.0
LOST_SECONDS = 8
"""Longer than the agents' reconnect backoff (at most 5 s) plus the pause between them: once the
first agent is back, one of two clusters lost no longer holds the brake, and failover of the other
resumes a clusterLostSeconds later; the second agent must be back before (under load, 4 s was not
always enough, and a real failover replaced a pod)."""


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[list[str], Any]]:
    """A coordinator on the hub, and the cluster names of its two agents."""
    names = hubside.names("p1", "p2")
    with hubside.running_coordinator(sandbox, clusters, members=names) as process:
        yield names, process


class PodWatch:
    """Every name ever seen and the fewest Running pods, per member, sampled every 0.25 s."""

    def __init__(self, clusters: conftest.Clusters, namespace: str) -> None:
        self.clusters, self.namespace = clusters, namespace
        self.seen: dict[str, set[str]] = {member: set() for member in MEMBERS}
        self.fewest_running: dict[str, int] = {}
        self.sampler = sampling.Sampler(self._observe, name="pod-watch")

    def __enter__(self) -> PodWatch:
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.sampler.__exit__(*exc_info)

    @property
    def samples(self) -> int:
        return self.sampler.samples

    def _observe(self) -> None:
        for member in MEMBERS:
            self.seen[member] |= sampling.pods_where(self.clusters, member, self.namespace, lambda _: True)
            running = len(running_pods(self.clusters, member, self.namespace))
            self.fewest_running[member] = min(self.fewest_running.get(member, running), running)


def running_pods(clusters: conftest.Clusters, member: str, namespace: str) -> set[str]:
    """Names of the spread's Running, not deleting pods in `member`."""
    return sampling.pods_where(clusters, member, namespace, sampling.is_running)


def test_a_partition_on_the_coordinators_side_deletes_no_pod_and_moves_no_replica(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    names, process = coordinator
    proxies = [tcp_proxy.TcpProxy(f"127.0.0.1:{process.port}") for _ in MEMBERS]
    agents = [agentside.AgentProcess(clusters, cluster=name, member=member, coordinator=proxy.target,
                                     namespace=namespace, log=tmp_path / f"{member}.log")
              for name, member, proxy in zip(names, MEMBERS, proxies, strict=True)]
    hub = hubside.Hub(clusters, namespace)

    def link(agent: agentside.AgentProcess, up: bool) -> None:
        waiting.wait_for(lambda: agent.metric("fedspread_agent_link_connected") == float(up),
                         timeout=TIMEOUT, message=f"{agent.cluster}: link never {'up' if up else 'down'}")

    try:
        for agent, member in zip(agents, MEMBERS, strict=True):
            link(agent, True)
            waiting.wait_for(lambda a=agent, m=member: agentside.webhook_live(a, clusters, m, namespace),
                             timeout=TIMEOUT, message=f"{member}: the webhook was never called")
        # One subset over both members: either could take every replica, so only the brake keeps
        # them where they are (with a subset per member, the caps alone would).
        hub.create(builders.deployment("web", 4, cpu="10m"), hubside.spread_body(
            "web", target="web", lost_seconds=LOST_SECONDS, subsets=[
                {"name": "both", "clusters": names, "clusterSpread": "Balance"}]))
        waiting.wait_for(lambda: all(len(running_pods(clusters, m, namespace)) == 2 for m in MEMBERS),
                         timeout=TIMEOUT, message="the spread never ran 2 pods in each member")
        before = {member: running_pods(clusters, member, namespace) for member in MEMBERS}

        with PodWatch(clusters, namespace) as watch:
            for proxy in proxies:
                proxy.block()
            for agent in agents:
                link(agent, False)
            def suspended_naming_both() -> bool:
                shown = hub.condition("web", "FailoverSuspended")
                return shown.get("status") == "True" and all(n in shown.get("message", "") for n in names)

            # The first cluster declared lost is named first; the other joins a tick later.
            waiting.wait_for(suspended_naming_both, timeout=TIMEOUT, message=lambda: (
                f"FailoverSuspended never named both clusters: {hub.condition('web', 'FailoverSuspended')}"))
            suspended = waiting.wait_for(lambda: hub.events("web", "FailoverSuspended"), timeout=TIMEOUT,
                                         message="no FailoverSuspended Event regarding the spread")
            assert suspended[0]["type"] == "Warning", suspended
            time.sleep(LOST_SECONDS + 6)  # both lost for a good while
            for agent, proxy in zip(agents, proxies, strict=True):
                proxy.unblock()
                link(agent, True)
                time.sleep(1.0)  # one by one
            time.sleep(LOST_SECONDS)  # what a wrong failover would do, it has done by now

        with sdk.PlacementClient(f"127.0.0.1:{process.port}") as client:
            assert client.placement(f"{namespace}/web").clusters == {names[0]: 2, names[1]: 2}
        after = {member: running_pods(clusters, member, namespace) for member in MEMBERS}
        assert after == before, f"pods before {before}, after {after}"
        assert watch.seen == before, f"pods seen during the partition: {watch.seen}, before {before}"
        assert watch.fewest_running == {m: 2 for m in MEMBERS}, watch.fewest_running
        assert watch.samples > 20, watch.samples
        for member in MEMBERS:
            found = [(d.metadata.name, d.spec.replicas)
                     for d in clusters.apps(member).list_namespaced_deployment(namespace).items]
            assert found == [("web", 2)], (member, found)
        for agent in agents:
            assert agent.alive and "Traceback" not in agent.output(), agent.log
    finally:
        for agent in agents:
            agent.stop()
        for proxy in proxies:
            proxy.close()
