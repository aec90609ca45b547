"""The failover benchmark's federation: a coordinator and one agent per member, in one process.

Why everything real but the hub: failover's promise involves the coordinator's tick, placement,
the assignment messages queued per stream, gRPC, and each agent's link decoding and applying them,
so `Federation` runs the real `facade.Coordinator` and `AgentServicer` on the coordinator's
`grpc.aio` server (`aio_server.AioServer`) on loopback, and one real agent `Link` (with real
bookkeeping and outbox, as `tests/support/standin_agent.py`) per cluster, each reporting a
synthesized inventory. Spreads, targets and MemberClusters are fed to the `World` directly, as
`tests/unit/test_coordinator_loop.py` does, and so are the pod counts of the steady state
(everything placed is running), which agents would otherwise report one by one, each report
recomputing hundreds of spreads during setup.

Spreads are of four kinds, so that losing a cluster moves replicas in several ways: a region with
`Balance`, a primary pair with a cap then a standby list (`Fill`), an `Adaptive` percentage of one
region then another region by `Capacity`, and an integer-capped single cluster then a region. The
world's clock (`Clock`) is injected and stands still except when the benchmark moves it.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from agents import bookkeeping as bookkeeping_mod
from agents import outbox as outbox_mod
from agents.link import client as link_mod
from federation.api import cluster, common, names
from federation.api import spread as spread_api
from federation.coordinator import facade
from federation.coordinator.model import world
from federation.coordinator.services import agent_service, aio_server
from federation.core import status
from federation.rpc import assignment as assignment_mod

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
LOST_SECONDS = 30
REGION_SIZE = 5
HEARTBEAT_SECONDS = 10.0
"""Agents' heartbeats and the coordinator's pings: the production default (a faster beat would queue
hundreds of heartbeats behind a long tick, each taking the coordinator's lock, and slow delivery)."""
SEED = 11
DEADLINE = 600.0


@dataclasses.dataclass(frozen=True)
class Size:
    """How many spreads over how many member clusters."""

    spreads: int
    clusters: int


class Clock:
    """The coordinator's clock (a `federation.clock.Clock`): stands still unless the benchmark moves
    it, so that heartbeats never expire while a large federation is being set up. The benchmark's
    own, because bench imports nothing of the test suite."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


def cluster_names(size: Size) -> list[str]:
    """c00, c01, ..."""
    return [f"c{i:02d}" for i in range(size.clusters)]


def region_of(index: int) -> str:
    """Clusters are grouped into regions of REGION_SIZE by position."""
    return f"r{index // REGION_SIZE}"


def pools_for(index: int) -> list[cluster.NodePool]:
    """A member's node pools: general purpose, compute and a few tainted GPU nodes, partly used."""
    rng = random.Random(f"{SEED}-pools-{index}")
    zone = f"zone-{index % 3}"
    return [
        cluster.NodePool(name="general", count=rng.randint(60, 140),
                         labels={"kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": zone},
                         allocatable={"cpu": "15890m", "memory": "63946588Ki", "pods": "110"},
                         requested={"cpu": f"{rng.randint(2, 8)}", "memory": "8Gi", "pods": "12"}),
        cluster.NodePool(name="compute", count=rng.randint(20, 60),
                         labels={"kubernetes.io/arch": "arm64", "topology.kubernetes.io/zone": zone},
                         allocatable={"cpu": "31850m", "memory": "63946588Ki", "pods": "234"},
                         requested={"cpu": "6", "memory": "12Gi", "pods": "20"}),
        cluster.NodePool(name="gpu", count=rng.randint(0, 8), labels={"kubernetes.io/arch": "amd64"},
                         taints=[common.Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")],
                         allocatable={"cpu": "7910m", "memory": "31391952Ki", "pods": "58",
                                      "nvidia.com/gpu": "1"}),
    ]


def spreads_for(size: Size) -> list[tuple[spread_api.FederatedSpread, int, dict[str, Any]]]:
    """(spread, replicas, hub Deployment) for `size`: four kinds, each spanning several clusters."""
    rng = random.Random(SEED)
    clusters = cluster_names(size)
    regions = sorted({region_of(i) for i in range(size.clusters)})

    def region(name: str) -> dict[str, Any]:
        return {"matchLabels": {names.REGION_LABEL: name}}

    found = []
    for i in range(size.spreads):
        replicas = rng.randint(3, 30)
        picked = rng.sample(clusters, min(5, len(clusters)))
        near, far = rng.choice(regions), rng.choice(regions)
        kind = i % 4
        strategy = "Fixed"
        if kind == 0:
            subsets: list[dict[str, Any]] = [
                {"name": "region", "clusterSelector": region(near), "clusterSpread": "Balance"}]
        elif kind == 1:
            subsets = [
                {"name": "primary", "clusters": picked[:2], "clusterSpread": "Balance",
                 "maxReplicas": math.ceil(replicas / 2)},
                {"name": "standby", "clusters": picked[2:], "clusterSpread": "Fill"},
            ]
        elif kind == 2:
            strategy = "Adaptive"
            subsets = [
                {"name": "near", "clusterSelector": region(near), "maxReplicas": "60%"},
                {"name": "far", "clusterSelector": region(far), "clusterSpread": "Capacity",
                 "maxReplicas": "40%"},
            ]
        else:
            strategy = "Adaptive"
            subsets = [
                {"name": "onprem", "clusters": picked[:1], "maxReplicas": 3},
                {"name": "cloud", "clusterSelector": region(near), "clusterSpread": "Capacity"},
            ]
        namespace, name = f"team-{i % 10}", f"app-{i:04d}"
        item = spread_api.FederatedSpread.model_validate({
            "metadata": {"name": name, "namespace": namespace, "generation": 1},
            "spec": {"targetRef": {"name": name}, "subsets": subsets, "scheduleStrategy": {"type": strategy},
                     "failover": {"clusterLostSeconds": LOST_SECONDS}},
        })
        cpu = rng.choice(["100m", "250m", "500m", "1"])
        memory = rng.choice(["128Mi", "256Mi", "512Mi", "1Gi"])
        deployment = {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": f"registry.example/{name}:v1",
                                         "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}},
        }
        found.append((item, replicas, deployment))
    return found


class Agent:
    """One member's agent: the real link, bookkeeping and outbox; when each spread was last applied."""

    def __init__(self, target: str, *, name: str, index: int) -> None:
        self.name = name
        self.bookkeeping = bookkeeping_mod.Bookkeeping()
        self.outbox = outbox_mod.ReportOutbox()
        self.applied_at: dict[str, float] = {}
        self.link = link_mod.Link(
            link_mod.LinkSettings(target, name, labels={names.REGION_LABEL: region_of(index)},
                                  heartbeat_seconds=HEARTBEAT_SECONDS, backoff_initial_seconds=0.05,
                                  backoff_cap_seconds=0.5),
            bookkeeping=self.bookkeeping, outbox=self.outbox, on_assignment=self._applied)
        self.outbox.put_inventory(outbox_mod.inventory_message(
            pools_for(index), sequence=1, observed_at=datetime.datetime.now(datetime.UTC)))

    def _applied(self, value: assignment_mod.Assignment) -> None:
        self.applied_at[value.spread] = time.perf_counter()  # after the bookkeeping holds it

    def quotas(self, key: str) -> tuple[int, ...] | None:
        """This cluster's quota per subset of spread `key`, as its bookkeeping holds it."""
        current = self.bookkeeping.assignment(key)
        return None if current is None else tuple(s.quota for s in current.subsets)


Expected = dict[tuple[str, str], tuple[int, ...] | None]
"""(cluster, spread) -> the quotas its agent should hold (None: no assignment)."""


class Federation:
    """A coordinator on a real gRPC server, and one agent per member cluster connected to it."""

    def __init__(self, size: Size) -> None:
        self.size = size
        self.clock = Clock()
        self.world = world.World(self.clock)
        self.coordinator = facade.Coordinator(self.world, clock=self.clock, coordinator_id="bench")
        servicer = agent_service.AgentServicer(self.coordinator, clock=self.clock,
                                               heartbeat_seconds=HEARTBEAT_SECONDS, require_identity=False)
        self.servicer = servicer
        self.server = aio_server.AioServer()
        agent_service.add_to_server(self.server.server, servicer)
        port = self.server.add_insecure_port("127.0.0.1:0")
        if not port:
            raise RuntimeError("cannot bind a loopback port")
        self.target = f"127.0.0.1:{port}"
        self.agents: dict[str, Agent] = {}

    def __enter__(self) -> Federation:
        self.server.start()
        return self

    def __exit__(self, *_: object) -> None:
        for agent in self.agents.values():
            agent.link.stop()
        self.server.stop(grace=None)
        self.servicer.close()

    def connect(self) -> None:
        """Register every MemberCluster, start every agent, wait for its Welcome and inventory."""
        clusters = cluster_names(self.size)
        with self.coordinator.lock:
            for index, name in enumerate(clusters):
                self.world.upsert_cluster(name, labels={names.REGION_LABEL: region_of(index)})
        for index, name in enumerate(clusters):
            self.agents[name] = Agent(self.target, name=name, index=index)
            self.agents[name].link.start()
        for name, agent in self.agents.items():
            if not agent.link.wait_connected(DEADLINE):
                raise RuntimeError(f"agent {name} was not welcomed")
        wait(lambda: all(c.node_pools for c in self.world.snapshot_for("").clusters), what="every inventory")

    def place(self) -> float:
        """Feed every spread and its hub Deployment to the world, place them all; seconds taken."""
        with self.coordinator.lock:
            keys: set[str] = set()
            for item, replicas, deployment in spreads_for(self.size):
                keys |= self.world.upsert_spread(item)
                keys |= self.world.set_target(item.key, replicas=replicas, template=deployment)
            started = time.perf_counter()
            self.coordinator.publish(keys)
            return time.perf_counter() - started

    def expected(self, keys: Sequence[str], clusters: Sequence[str]) -> Expected:
        """What each of `clusters` given replicas of `keys` should hold, from the world's placements
        (lock held). A cluster with none is not checked: it is sent nothing unless it held some
        before (then its zero quotas, then a removal once its pods are gone)."""
        found: Expected = {}
        for key in keys:
            result = self.world.placements[key]
            for name in clusters:
                quotas = tuple(s.clusters.get(name, 0) for s in result.subsets)
                if any(quotas):
                    found[(name, key)] = quotas
        return found

    def settle(self, expected: Expected, *, what: str, poll: float) -> None:
        """Wait until the agents' bookkeeping holds `expected` (checking only what is still missing)."""
        missing = dict(expected)

        def done() -> bool:
            nonlocal missing
            missing = {(name, key): quotas for (name, key), quotas in missing.items()
                       if self.agents[name].quotas(key) != quotas}
            return not missing

        wait(done, what=what, poll=poll)

    def run_steady_state(self) -> None:
        """Everything placed is running: record the pod counts agents would report (lock held)."""
        per_cluster: dict[str, dict[str, dict[str, status.ClusterPods]]] = {}
        for key, result in self.world.placements.items():
            for subset in result.subsets:
                for name, count in subset.clusters.items():
                    if count:
                        pods = status.ClusterPods(running=count, ready=count)
                        per_cluster.setdefault(name, {}).setdefault(key, {})[subset.name] = pods
        for name in cluster_names(self.size):
            self.world.pod_counts(name, per_cluster.get(name, {}))

    def hear(self, names: Sequence[str]) -> None:
        """Heartbeats from `names` at the clock's current time, as if their agents had just beaten."""
        with self.coordinator.lock:
            for name in names:
                self.coordinator.publish(self.world.heartbeat(name))


def wait(predicate: Callable[[], Any], *, what: str, timeout: float = DEADLINE, poll: float = 0.02) -> None:
    """Poll `predicate` every `poll` seconds until truthy; TimeoutError after `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout:g} s")
        time.sleep(poll)
