"""Two real agents, a spread whose pods take seconds to become Ready, and a watch of its Ready pods.

Why a module of its own: every "do no harm" test on the sandbox asks the same question — at no
moment while something moves (a cordon, a lost member, an edit, a restart) may the spread's Ready
pods across the members fall below what the rules allow — and answers it the same way: pods that
are Ready only `READY_AFTER` seconds after they start (the node simulator honours the readiness
probe's delay), so a removal that does not wait for its replacement shows as a dip, and a sampler
that counts the Ready pods of both members every 50 ms and keeps every sample.

`Scene` starts the two `fedspread agent` processes (sandbox member-1 and member-2) against a
coordinator at `target` and creates the spread; what the spread looks like is the test's. It also
reads, labels and edits the two clusters' MemberClusters on the hub, as an operator would.
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

import agentside
import conftest
import hubside
import sampling
import waiting
from kubernetes import client

from federation import sdk
from federation.api import cluster
from tests.support import builders

MEMBERS = ("member-1", "member-2")
TIMEOUT = 120.0
READY_AFTER = 4
"""Seconds from a pod's start to its Ready (the readiness probe's initialDelaySeconds)."""


class ReadyWatch:
    """The Ready pods of both members every 50 ms (a move in the sandbox takes about a second)."""

    def __init__(self, clusters: conftest.Clusters, namespace: str, *, period: float = 0.05) -> None:
        self.clusters, self.namespace = clusters, namespace
        self.history: list[dict[str, int]] = []
        self.sampler = sampling.Sampler(self._observe, period=period, name="ready-watch")

    def __enter__(self) -> ReadyWatch:
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.sampler.__exit__(*exc_info)

    def _observe(self) -> None:
        self.history.append({m: len(sampling.pods_where(self.clusters, m, self.namespace, sampling.is_ready))
                             for m in MEMBERS})

    def fewest(self, *, members: tuple[str, ...] = MEMBERS, since: int = 0) -> int:
        """The fewest Ready pods of `members` together at any sample from number `since` on."""
        return min(sum(sample[m] for m in members) for sample in self.history[since:])


def slow_ready_template(name: str, replicas: int, *, ready_after: int = READY_AFTER) -> dict[str, Any]:
    """A hub Deployment whose pods are Ready `ready_after` seconds after they start."""
    template = builders.deployment(name, replicas, cpu="10m")
    template["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] = {
        "exec": {"command": ["true"]}, "initialDelaySeconds": ready_after}
    return template


class Scene:
    """The two agents, the hub and the spread `web` of one test."""

    def __init__(self, clusters: conftest.Clusters, namespace: str, *, names: Sequence[str], target: str,
                 tmp_path: pathlib.Path, agent_args: Sequence[str] = ()) -> None:
        self.clusters, self.namespace, self.names = clusters, namespace, list(names)
        self.target = target
        self.agents = [agentside.AgentProcess(clusters, cluster=name, member=member, coordinator=target,
                                              namespace=namespace, log=tmp_path / f"{member}.log",
                                              args=agent_args)
                       for name, member in zip(names, MEMBERS, strict=True)]
        self.hub = hubside.Hub(clusters, namespace)
        self.custom = clusters.custom(hubside.HUB)
        self.key = f"{namespace}/web"

    def ready(self, member: str) -> set[str]:
        return sampling.pods_where(self.clusters, member, self.namespace, sampling.is_ready)

    def pods(self, member: str) -> set[str]:
        return sampling.pods_where(self.clusters, member, self.namespace, lambda pod: True)

    def describe(self) -> str:
        return (f"ready pods {({m: sorted(self.ready(m)) for m in MEMBERS})}; "
                f"agent logs {[str(a.log) for a in self.agents]}")

    def wait(self, probe: Any, what: str, *, timeout: float = TIMEOUT) -> Any:
        return waiting.wait_for(probe, timeout=timeout, message=lambda: f"{what}; {self.describe()}")

    def agents_live(self) -> None:
        """Both agents connected and called by their apiservers."""
        for agent, member in zip(self.agents, MEMBERS, strict=True):
            self.wait(lambda a=agent: a.metric("fedspread_agent_link_connected") == 1.0,
                      f"the agent of {member} never connected")
            self.wait(lambda a=agent, m=member: agentside.webhook_live(a, self.clusters, m, self.namespace),
                      f"the apiserver of {member} never called its agent's webhook")

    def member_cluster(self, name: str) -> dict[str, Any] | None:
        """MemberCluster `name` as the hub holds it, None when there is none."""
        try:
            found = self.custom.get_cluster_custom_object(
                hubside.GROUP, hubside.VERSION, cluster.PLURAL, name)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        assert isinstance(found, dict)
        return found

    def member_condition(self, name: str, kind: str) -> dict[str, Any]:
        """MemberCluster `name`'s condition `kind` ({} when it or the condition is absent)."""
        found = self.member_cluster(name) or {}
        return next((dict(c) for c in (found.get("status") or {}).get("conditions") or []
                     if c.get("type") == kind), {})

    def patch_member_cluster(self, name: str, patch: dict[str, Any]) -> None:
        self.custom.patch_cluster_custom_object(hubside.GROUP, hubside.VERSION, cluster.PLURAL, name, patch)

    def delete_member_cluster(self, name: str) -> None:
        self.custom.delete_cluster_custom_object(hubside.GROUP, hubside.VERSION, cluster.PLURAL, name)

    def label_member_clusters(self, labels: dict[str, str]) -> None:
        """Both clusters' MemberClusters (registered by their agents' Hellos) given `labels`, as an
        operator would, and the coordinator seeing them so."""
        for name in self.names:
            self.wait(lambda n=name: self.member_cluster(n) is not None, f"{name} was never registered")
            self.patch_member_cluster(name, {"metadata": {"labels": labels}})
        with sdk.PlacementClient(self.target) as placements:
            self.wait(lambda: sum(1 for c in placements.clusters()
                                  if c.name in self.names and labels.items() <= c.labels.items())
                      == len(self.names), f"the coordinator never saw every cluster labelled {labels}")

    def start(self, spread: dict[str, Any], *, replicas: int, expect: dict[str, int],
              ready_after: int = READY_AFTER) -> dict[str, set[str]]:
        """Both agents up, the spread `spread` created and running `expect` Ready pods per
        member (Ready `ready_after` seconds after they start), the coordinator knowing them all
        Ready; those pods per member."""
        self.agents_live()
        return self.create_spread(spread, replicas=replicas, expect=expect, ready_after=ready_after)

    def create_spread(self, spread: dict[str, Any], *, replicas: int, expect: dict[str, int],
                      ready_after: int = READY_AFTER) -> dict[str, set[str]]:
        """`start` once the agents are live (a test that labels its MemberClusters first)."""
        self.hub.create(slow_ready_template("web", replicas, ready_after=ready_after), spread)
        self.wait(lambda: all(len(self.ready(m)) == expect.get(m, 0) for m in MEMBERS),
                  f"the spread never ran {expect} Ready pods")
        # The coordinator must know them Ready too (agents report changes, not instantly): a move
        # decided on older reports has no Ready pod to protect.
        self.wait(lambda: self.hub.spread_status("web").get("readyReplicas") == replicas,
                  f"the coordinator never heard of {replicas} Ready pods")
        return {m: self.ready(m) for m in MEMBERS}

    def stop(self) -> None:
        for agent in self.agents:
            agent.stop()
