"""Faults: an agent's stream to the coordinator cut again and again, and the agent SIGKILLed.

A real `fedspread agent` process manages sandbox member-1 for a real coordinator (in this
process, placements on the session's Ray). Between them sits `tests/support/tcp_proxy.py`, so
the stream can be cut without killing anybody. A seed orders the faults and draws their moments:

* **stream cut** — the proxy resets the connection and refuses new ones for a random while. The
  agent is then fail static; meanwhile a pod of the spread is deleted (its ReplicaSet's
  replacement must be admitted into the freed subset, from the last quotas), or a bare pod of the
  spread and its revision is created (every quota is in use: it must get no subset), or the hub
  Deployment is scaled up (nobody can tell the agent: it must catch up after the reconnect).
* **agent killed** — SIGKILL, sometimes a scale-up meanwhile, then a fresh process with empty
  bookkeeping, which must rebuild it from its cache and the coordinator's resync. (This found
  the agent placing pods before it had counted the existing ones: agents/bookkeeping.py.) The
  agent keeps its webhook port and certificate across the restart, as in production.

What must hold: at every sample no subset has more admitted pods than its quota allows; in the
end exactly the spread's replicas exist as ReplicaSet pods, one member Deployment, subsets filled
in order; the coordinator's bookkeeping (SDK ready counts, hub status) agrees; the agent never
crashed. (Scale-downs are left out: the 1.20 ReplicaSet controller ignores pod-deletion-cost,
DESIGN §7a, so which subset loses a pod is not the agent's to decide there.)
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
import sampling
import waiting

from federation import sdk
from federation.api import names
from tests.support import builders, soak, tcp_proxy

MEMBER = "member-1"
TIMEOUT = 90.0
CAPS = {"first": 2, "second": 2}


def quotas(replicas: int) -> dict[str | None, int]:
    """Pods per subset once `replicas` are placed: first and second up to 2, the rest after."""
    first = min(2, replicas)
    second = min(2, replicas - first)
    found: dict[str | None, int] = {"first": first, "second": second, "rest": replicas - first - second}
    return {k: v for k, v in found.items() if v}


class PodSampler:
    """Lists the spread's pods every 0.25 s; records any subset holding more pods than it may."""

    def __init__(self, clusters: conftest.Clusters, namespace: str) -> None:
        self.clusters, self.namespace = clusters, namespace
        self.most = 0
        """The largest replica count asked for so far (bounds subset "rest")."""
        self.violations: list[str] = []
        self.sampler = sampling.Sampler(self._observe, name="pod-sampler")

    def __enter__(self) -> PodSampler:
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.sampler.__exit__(*exc_info)

    @property
    def samples(self) -> int:
        return self.sampler.samples

    def _observe(self) -> None:
        counts = agentside.by_subset(agentside.spread_pods(self.clusters, MEMBER, self.namespace, "web"))
        bounds = {**CAPS, "rest": max(0, self.most - 4)}
        for subset, count in counts.items():
            if subset is not None and count > bounds.get(subset, 0):
                self.violations.append(f"{count} pods in subset {subset} (at most {bounds.get(subset)})")


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[str, Any]]:
    """A coordinator on the hub, and the cluster name its agent uses."""
    (name,) = hubside.names("m1")
    with hubside.running_coordinator(sandbox, clusters, members=[name]) as process:
        yield name, process


class Scenario:
    """One seed's run: the agent behind the proxy, the spread, the faults and what is expected."""

    def __init__(self, seed: int, clusters: conftest.Clusters, namespace: str, *, cluster: str,
                 coordinator: str, log: pathlib.Path) -> None:
        self.seed, self.rng = seed, random.Random(seed)
        self.clusters, self.namespace, self.cluster = clusters, namespace, cluster
        self.core = clusters.core(MEMBER)
        self.hub = hubside.Hub(clusters, namespace)
        self.proxy = tcp_proxy.TcpProxy(coordinator)
        self.agent = agentside.AgentProcess(clusters, cluster=cluster, member=MEMBER,
                                            coordinator=self.proxy.target, namespace=namespace, log=log)
        self.replicas = self.rng.randint(3, 5)
        self.faults = self.rng.sample(["cut", "cut", "cut", "kill"], 4)
        self.bare: list[str] = []
        self.sampler = PodSampler(clusters, namespace)
        self.sampler.most = self.replicas

    def pods(self) -> list[Any]:
        """The spread's pods in the member."""
        return agentside.spread_pods(self.clusters, MEMBER, self.namespace, "web")

    def fail(self, what: str) -> str:
        """A failure message with the seed and everything needed to replay and judge it."""
        return (f"seed {self.seed} (faults {self.faults}, replicas {self.replicas}): {what}; pods by "
                f"subset {agentside.by_subset(agentside.owned(self.pods()))}; agent log {self.agent.log}")

    def settled(self) -> bool:
        """Exactly the spread's replicas as ReplicaSet pods, subsets filled in order, all Running."""
        mine = agentside.owned(self.pods())
        return len(mine) == self.replicas and agentside.by_subset(mine) == quotas(self.replicas) and \
            all(p.status.phase == "Running" for p in mine)

    def wait(self, probe: Any, what: str) -> None:
        """Wait for `probe`, failing with `what` and the scene."""
        waiting.wait_for(probe, timeout=TIMEOUT, message=lambda: self.fail(what))

    def link(self, up: bool) -> None:
        """Wait until the agent reports its coordinator link up (or down)."""
        self.wait(lambda: self.agent.metric("fedspread_agent_link_connected") == float(up),
                  f"the agent never reported its link {'up' if up else 'down'}")

    def webhook(self) -> None:
        """Wait until the apiserver calls this agent's webhook."""
        self.wait(lambda: agentside.webhook_live(self.agent, self.clusters, MEMBER, self.namespace),
                  "the apiserver never called the agent's webhook")

    def scale_up(self) -> None:
        """One more replica on the hub (at most 6)."""
        if self.replicas < 6:
            self.replicas += 1
            self.sampler.most = max(self.sampler.most, self.replicas)
            self.hub.scale("web", self.replicas)

    def cut(self) -> None:
        """Reset the stream and keep it down while the cluster goes on without the coordinator."""
        self.proxy.block()
        self.link(False)
        action = self.rng.choice(["delete", "bare", "scale"])
        if action == "delete":  # its ReplicaSet replaces it: admitted from the last quotas
            victim = self.rng.choice(agentside.owned(self.pods())).metadata.name
            self.core.delete_namespaced_pod(victim, self.namespace, grace_period_seconds=0)
            self.wait(lambda: self.settled() and victim not in {p.metadata.name for p in self.pods()},
                      "no replacement admitted while fail static")
        elif action == "bare":  # every quota of its revision is in use: it must get no subset
            revision = agentside.owned(self.pods())[0].metadata.labels[names.REVISION_LABEL]
            self.bare.append(f"bare-{len(self.bare)}")
            made = self.core.create_namespaced_pod(
                self.namespace, agentside.bare_pod(self.bare[-1], "web", revision=revision))
            got = (made.metadata.annotations or {}).get(names.SUBSET_ANNOTATION)
            assert got is None, self.fail(f"a pod beyond every quota was admitted into subset {got}")
        else:  # the agent hears of it only after the reconnect
            self.scale_up()
        time.sleep(self.rng.uniform(0.0, 1.5))  # down a little longer, for a random while
        self.proxy.unblock()
        self.link(True)

    def kill(self) -> None:
        """SIGKILL the agent, maybe scale meanwhile, start a fresh one."""
        self.agent.kill()
        if self.rng.random() < 0.5:
            self.scale_up()
        time.sleep(self.rng.uniform(0.0, 2.0))
        self.agent.start()
        self.link(True)
        self.webhook()


@pytest.mark.parametrize("seed", soak.seeds(1))
def test_agent_survives_stream_cuts_and_a_kill_without_duplicates_or_lost_bookkeeping(
        seed: int, clusters: conftest.Clusters, namespace: str, coordinator: tuple[str, Any],
        tmp_path: pathlib.Path) -> None:
    name, process = coordinator
    scene = Scenario(seed, clusters, namespace, cluster=name, coordinator=f"127.0.0.1:{process.port}",
                     log=tmp_path / "agent.log")
    try:
        scene.link(True)
        scene.webhook()
        scene.hub.create(builders.deployment("web", scene.replicas, cpu="10m"), hubside.spread_body(
            "web", target="web", lost_seconds=600, subsets=[
                {"name": "first", "clusters": [name], "maxReplicas": CAPS["first"]},
                {"name": "second", "clusters": [name], "maxReplicas": CAPS["second"]},
                {"name": "rest", "clusters": [name]}]))
        with scene.sampler:
            scene.wait(scene.settled, "never settled after creation")
            for fault in scene.faults:
                if fault == "cut":
                    scene.cut()
                else:
                    scene.kill()
                scene.wait(scene.settled, f"not settled after {fault}")
        assert scene.sampler.samples > 10, scene.fail(f"the sampler ran only {scene.sampler.samples} times")
        assert scene.sampler.violations == [], scene.fail(f"above quota: {scene.sampler.violations[:5]}")

        found = [(d.metadata.name, d.spec.replicas)
                 for d in clusters.apps(MEMBER).list_namespaced_deployment(namespace).items]
        assert found == [("web", scene.replicas)], scene.fail(f"member Deployments {found}")
        bare = agentside.by_subset([p for p in scene.pods() if p.metadata.name in scene.bare])
        assert bare == ({None: len(scene.bare)} if scene.bare else {}), scene.fail(f"bare pods {bare}")
        with sdk.PlacementClient(f"127.0.0.1:{process.port}") as client:
            scene.wait(lambda: client.placement(f"{namespace}/web").ready == {name: scene.replicas},
                       "the coordinator's ready count never matched the pods")
        scene.wait(lambda: scene.hub.spread_status("web").get("readyReplicas") == scene.replicas,
                   "the hub status never showed every replica ready")
        assert scene.agent.alive, scene.fail("the agent exited")
        assert "Traceback" not in scene.agent.output(), scene.fail("the agent logged a traceback")
        assert scene.proxy.cuts >= scene.faults.count("cut"), scene.fail(f"{scene.proxy.cuts} cuts")
    finally:
        scene.agent.stop()
        scene.proxy.close()
