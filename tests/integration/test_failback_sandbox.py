"""Failback on real members (issue 28): replicas move back to dc1 surge first once a node is added.

The session's demo federation (`conftest.federation`: dc1 with two 2-CPU nodes, aws-eu, gcp-eu, the
coordinator and an agent per member) runs a spread of one-CPU pods, `onprem` (dc1) first, then `eu`
(aws-eu), Adaptive: dc1 takes 4, the overflow runs in aws-eu. A node is added to dc1 by a node
simulator played in this test (as `test_nodesim_scale.py` plays one), and removed at the end.

- `policy: Never` (6 replicas): the new node changes nothing; `fedspread rebalance --dry-run`
  prints the two steps and moves nothing; `fedspread rebalance` (the demo user granted `patch` on
  the spread, which the coordinator asks the hub's RBAC) moves both back;
- `policy: WhenRoom`, cooldownSeconds 5 (scaled to 8: the two new replicas overflow again): a
  second node is added, and the coordinator moves them back by itself, one step per cooldown — the
  second new pod in dc1 is created no sooner than the cooldown after the first.

Through both moves a sampler counts the spread's Ready pods in the members every 0.25 s: never
below `replicas` (surge first: a pod leaves aws-eu only once its replacement is Ready in dc1).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import demo_scene
import hubside
import pytest
import sampling
import waiting
from click import testing
from demo_scene import TIMEOUT, Apis
from kubernetes import client

from federation import cli
from federation.api import common, names
from federation.api import spread as spread_api
from federation.demo import environment
from federation.sandbox import nodesim
from tests.support import builders

LABEL = f"{names.SPREAD_LABEL}=web"
COOLDOWN = 5
SUBSETS: list[dict[str, Any]] = [{"name": "onprem", "clusters": ["dc1"]},
                                 {"name": "eu", "clusters": ["aws-eu"]}]
NODE = {"cpu": "2", "memory": "16Gi", "pods": "110"}
"""A node like dc1's own two."""


@pytest.fixture(scope="module")
def apis(federation: environment.Federation) -> Iterator[Apis]:
    with demo_scene.connect(federation) as connected:
        yield connected


class Nodes:
    """Nodes added to dc1 for the test, each played by a node simulator of its own."""

    def __init__(self, apis: Apis) -> None:
        self.apis = apis
        self.running: list[tuple[nodesim.NodeSimulator, threading.Thread]] = []

    def add(self, prefix: str) -> None:
        """One 2-CPU worker node in dc1, like its own two; until the coordinator counts it."""
        before = self.dc1_nodes()
        group = nodesim.NodeGroup(prefix=prefix, count=1, allocatable=dict(NODE),
                                  labels={"type": "worker", "topology.kubernetes.io/region": "onprem"})
        simulator = nodesim.NodeSimulator(self.apis.api["dc1"], [group], workers=4)
        thread = threading.Thread(target=simulator.run, name=f"{prefix}-nodesim", daemon=True)
        thread.start()
        self.running.append((simulator, thread))
        waiting.wait_for(lambda: self.dc1_nodes() == before + 1, timeout=TIMEOUT,
                         message=f"the coordinator never counted {prefix} in dc1")

    def dc1_nodes(self) -> int:
        return sum(c.node_count for c in self.apis.placements.clusters() if c.name == "dc1")

    def remove(self) -> None:
        for simulator, thread in self.running:
            simulator.shutdown()
            thread.join(timeout=10)
            for name in simulator.nodes:
                demo_scene.delete_quietly(lambda name=name: self.apis.core("dc1").delete_node(name))


class ReadyFloor:
    """The fewest Ready pods of the spread in the members at any sample (every 0.25 s)."""

    def __init__(self, apis: Apis, namespace: str) -> None:
        self.apis, self.namespace = apis, namespace
        self.lowest: int | None = None
        self.sampler = sampling.Sampler(self.sample, name="ready-floor")

    def count(self) -> int:
        return sum(sampling.is_ready(p) for member in ("dc1", "aws-eu") for p in self.apis.core(member)
                   .list_namespaced_pod(self.namespace, label_selector=LABEL).items)

    def sample(self) -> None:
        found = self.count()
        self.lowest = found if self.lowest is None else min(self.lowest, found)


def spread_body(policy: str) -> dict[str, Any]:
    return {"apiVersion": f"{common.API_GROUP}/{common.API_VERSION}", "kind": spread_api.KIND,
            "metadata": {"name": "web"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "subsets": SUBSETS, "scheduleStrategy": {"type": "Adaptive"},
                     "rebalance": {"policy": policy, "maxSurge": 1, "cooldownSeconds": COOLDOWN}}}


def reach(apis: Apis, key: str, want: demo_scene.Placement, *, what: str) -> demo_scene.Seen:
    """Until the coordinator places `want`, the members run exactly those pods, all Ready."""
    last: list[demo_scene.Seen] = []

    def probe() -> demo_scene.Seen | None:
        last[:] = [demo_scene.observe(apis, key, LABEL)]
        seen = last[0]
        ready = all(sampling.is_ready(p) for pods in seen.pods.values() for p in pods)
        return seen if demo_scene.reached(seen, want, set()) and ready else None

    found: demo_scene.Seen = waiting.wait_for(probe, timeout=TIMEOUT, interval=0.5, message=lambda: (
        f"{what}: wanted {want}; last seen {last[0].describe() if last else 'nothing'}"))
    return found


def rebalance(federation: environment.Federation, key: str, *args: str) -> testing.Result:
    files = federation.tls(environment.CLIENT)
    return testing.CliRunner().invoke(cli.main, [
        "rebalance", key, *args, "--coordinator", federation.coordinator_address, "--timeout", "10",
        "--ca", str(files.ca), "--cert", str(files.cert), "--key", str(files.key)])


def grant_patch(apis: Apis, namespace: str) -> None:
    """The demo user may `patch` the namespace's spreads (what `fedspread rebalance` needs)."""
    rbac = apis.api["hub"]
    client.RbacAuthorizationV1Api(rbac).create_namespaced_role(namespace, {
        "metadata": {"name": "rebalance"},
        "rules": [{"apiGroups": [common.API_GROUP], "resources": [spread_api.PLURAL], "verbs": ["patch"]}]})
    client.RbacAuthorizationV1Api(rbac).create_namespaced_role_binding(namespace, {
        "metadata": {"name": "rebalance"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "rebalance"},
        "subjects": [{"kind": "User", "name": environment.CLIENT_USER,
                      "apiGroup": "rbac.authorization.k8s.io"}]})


def test_replicas_fail_back_to_dc1_surge_first_on_demand_and_by_themselves(
        apis: Apis, federation: environment.Federation) -> None:
    namespace = f"failback-{uuid.uuid4().hex[:6]}"
    key = f"{namespace}/web"
    workload = builders.deployment("web", 6, cpu="1")
    nodes = Nodes(apis)
    waiting.wait_for(lambda: demo_scene.idle(apis), timeout=TIMEOUT, message="the federation is not idle")
    apis.core("hub").create_namespace({"metadata": {"name": namespace}})
    try:
        apis.apps("hub").create_namespaced_deployment(namespace, workload)
        apis.custom().create_namespaced_custom_object(
            common.API_GROUP, common.API_VERSION, namespace, spread_api.PLURAL, spread_body("Never"))
        overflow = {"onprem": {"dc1": 4}, "eu": {"aws-eu": 2}}
        reach(apis, key, overflow, what="dc1 full, the overflow in aws-eu")

        # Never: the room that came back changes nothing until asked.
        nodes.add(f"dc1-extra-{namespace}")
        waiting.wait_for(lambda: apis.placements.explain(key).placement.rebalance is not None,
                         timeout=TIMEOUT, message="Explain never showed the failback")
        assert demo_scene.observe(apis, key, LABEL).placement == overflow
        planned = rebalance(federation, key, "--dry-run")
        assert planned.exit_code == 0, planned.output
        assert planned.output.splitlines()[1:] == [
            "  step 1: 1 from eu/aws-eu to onprem/dc1", "  step 2: 1 from eu/aws-eu to onprem/dc1",
            "dry run: nothing was started"]
        assert demo_scene.observe(apis, key, LABEL).placement == overflow
        grant_patch(apis, namespace)
        floor = ReadyFloor(apis, namespace)
        with floor.sampler:
            started = rebalance(federation, key)
            assert started.exit_code == 0, started.output
            reach(apis, key, {"onprem": {"dc1": 6}, "eu": {"aws-eu": 0}}, what="failed back on demand")
        assert floor.sampler.samples > 0 and floor.lowest is not None and floor.lowest >= 6, floor.lowest

        # WhenRoom: two more replicas overflow; a second node brings them back, one step per cooldown.
        apis.custom().patch_namespaced_custom_object(
            common.API_GROUP, common.API_VERSION, namespace, spread_api.PLURAL, "web",
            {"spec": {"rebalance": {"policy": "WhenRoom"}}}, _content_type="application/merge-patch+json")
        apis.apps("hub").patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 8}})
        seen = reach(apis, key, {"onprem": {"dc1": 6}, "eu": {"aws-eu": 2}}, what="the new two in aws-eu")
        before = {p.metadata.name for p in seen.pods["dc1"]}
        floor = ReadyFloor(apis, namespace)
        with floor.sampler:
            nodes.add(f"dc1-more-{namespace}")
            seen = reach(apis, key, {"onprem": {"dc1": 8}, "eu": {"aws-eu": 0}}, what="failed back by itself")
        assert floor.sampler.samples > 0 and floor.lowest is not None and floor.lowest >= 8, floor.lowest
        created = sorted(p.metadata.creation_timestamp for p in seen.pods["dc1"]
                         if p.metadata.name not in before)
        assert len(created) == 2
        assert (created[1] - created[0]).total_seconds() >= COOLDOWN - 1, created  # (seconds' precision)
        waiting.wait_for(lambda: [(c.status, c.reason) for c in apis.placements.placement(key).conditions
                                  if c.type == "Rebalancing"] == [("False", "NothingToMove")],
                         timeout=TIMEOUT, message="the Rebalancing condition never said NothingToMove")

        def told() -> set[str]:
            return {e["reason"] for reason in ("RebalanceStarted", "Rebalanced")
                    for e in hubside.events_of(apis.api["hub"], namespace, name="web", reason=reason)}

        waiting.wait_for(lambda: told() == {"RebalanceStarted", "Rebalanced"}, timeout=TIMEOUT,
                         message=lambda: f"the failback's Events: {told()}")  # (recorded after the write)
    finally:
        try:
            demo_scene.clean_up(apis, namespace, workload, "web")
        finally:
            nodes.remove()
