"""Failover benchmark (issue 7): how long until replicas have left a lost cluster, for many spreads.

Why this shape: failover is the coordinator's promise with the most moving parts — the tick that
declares a cluster lost, the placement of every affected spread, the assignment messages built and
queued per stream, gRPC, and each agent's link decoding and applying them. The goal (<= 2 s for
1,000 spreads over 20 clusters) is about all of it, so everything runs for real in one process:
the real `agent_service.Coordinator` and `AgentServicer` on a gRPC server on loopback, and one real
agent `Link` (with real bookkeeping and outbox, as `tests/support/standin_agent.py`) per cluster,
each reporting a synthesized inventory. Only the hub is left out: spreads, targets and
MemberClusters are fed to the `World` directly, as `tests/unit/test_coordinator_loop.py` does, and
so are the pod counts of the steady state (everything placed is running), which agents would
otherwise report one by one, each report recomputing hundreds of spreads during setup.

Spreads are of four kinds, so that losing a cluster moves replicas in several ways: a region with
`Balance`, a primary pair with a cap then a standby list (`Fill`), an `Adaptive` percentage of one
region then another region by `Capacity`, and an integer-capped single cluster then a region.

Timing: the world's clock is injected and stands still except when the benchmark moves it (as the
unit tests do), so no survivor can look lost while the placement loop holds the lock, and
detection itself is exactly `clusterLostSeconds` of simulated silence (not measured: it is a
setting). The victim's link is stopped, the clock moved past the limit in two steps with every
survivor heard after each (their heartbeats recorded directly, at the production interval the
real ones are rare), and then `Coordinator.tick()` — what `main.py`'s timer calls — declares
the cluster lost. `reconverge_s` runs from just before that tick to the moment the last surviving
agent's bookkeeping holds its new quotas for every affected spread (taken from the link's
`on_assignment` callback, which runs right after the bookkeeping is updated). `tick_s` is the part
inside the tick (placement and queueing, under the coordinator's lock); the rest is delivery.
Agents and coordinator share one interpreter (and its GIL) here, which makes delivery slower than
on separate machines, not faster. `python -m bench.failover --profile` samples every thread during
the tick and the delivery and prints where the time goes.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import datetime
import json
import math
import random
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from agents import assignment as assignment_mod
from agents import bookkeeping as bookkeeping_mod
from agents import outbox as outbox_mod
from agents.link import client as link_mod
from federation.api import cluster, common
from federation.api import spread as spread_api
from federation.coordinator import agent_service, world
from federation.core import status
from federation.rpc import agent_pb2_grpc

GOAL_S = 2.0
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


FULL = Size(spreads=1_000, clusters=20)
QUICK = Size(spreads=200, clusters=10)


def run(*, quick: bool, report: Callable[[str], None]) -> dict[str, Any]:
    """The runner's entry point (bench/run.py)."""
    return measure(QUICK if quick else FULL, report=report)


# --- the federation -------------------------------------------------------------------------------


class Clock:
    """The coordinator's clock: stands still unless moved."""

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
    names = cluster_names(size)
    regions = sorted({region_of(i) for i in range(size.clusters)})

    def region(name: str) -> dict[str, Any]:
        return {"matchLabels": {cluster.REGION_LABEL: name}}

    found = []
    for i in range(size.spreads):
        replicas = rng.randint(3, 30)
        picked = rng.sample(names, min(5, len(names)))
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
        self.outbox = outbox_mod.Outbox()
        self.applied_at: dict[str, float] = {}
        self.link = link_mod.Link(
            target, cluster=name, bookkeeping=self.bookkeeping, outbox=self.outbox,
            labels={cluster.REGION_LABEL: region_of(index)}, heartbeat_seconds=HEARTBEAT_SECONDS,
            on_assignment=self._applied, backoff_initial_seconds=0.05, backoff_cap_seconds=0.5)
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
        self.coordinator = agent_service.Coordinator(self.world, clock=self.clock, coordinator_id="bench")
        servicer = agent_service.AgentServicer(self.coordinator, clock=self.clock,
                                               heartbeat_seconds=HEARTBEAT_SECONDS, require_identity=False)
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2 * size.clusters + 16))
        agent_pb2_grpc.add_AgentServiceServicer_to_server(servicer, self.server)
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
        self.server.stop(grace=None).wait()

    def connect(self) -> None:
        """Register every MemberCluster, start every agent, wait for its Welcome and inventory."""
        names = cluster_names(self.size)
        with self.coordinator.lock:
            for index, name in enumerate(names):
                self.world.upsert_cluster(name, labels={cluster.REGION_LABEL: region_of(index)})
        for index, name in enumerate(names):
            self.agents[name] = Agent(self.target, name=name, index=index)
            self.agents[name].link.start()
        for name, agent in self.agents.items():
            if not agent.link.wait_connected(DEADLINE):
                raise RuntimeError(f"agent {name} was not welcomed")
        _wait(lambda: all(c.node_pools for c in self.world.snapshot_for("").clusters), what="every inventory")

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
        """What each of `clusters` should hold for `keys`, from the world's placements (lock held)."""
        found: Expected = {}
        for key in keys:
            result = self.world.placements[key]
            holders = {name for s in result.subsets for name in s.clusters}
            for name in clusters:
                found[(name, key)] = (tuple(s.clusters.get(name, 0) for s in result.subsets)
                                      if name in holders else None)
        return found

    def settle(self, expected: Expected, *, what: str, poll: float) -> None:
        """Wait until the agents' bookkeeping holds `expected` (checking only what is still missing)."""
        missing = dict(expected)

        def done() -> bool:
            nonlocal missing
            missing = {(name, key): quotas for (name, key), quotas in missing.items()
                       if self.agents[name].quotas(key) != quotas}
            return not missing

        _wait(done, what=what, poll=poll)

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


def _wait(predicate: Callable[[], Any], *, what: str, timeout: float = DEADLINE, poll: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout:g} s")
        time.sleep(poll)


# --- the measurement ------------------------------------------------------------------------------


def measure(
    size: Size, *, report: Callable[[str], None], victim: str | None = None, profile: bool = False,
) -> dict[str, Any]:
    """Place `size`'s spreads, silence one agent, time the failover until every survivor holds its quotas.

    `victim` defaults to the cluster holding the most replicas. With `profile`, every thread is
    sampled during the tick and the delivery, and the heaviest functions of each are reported.
    """
    with Federation(size) as fed:
        started = time.perf_counter()
        fed.connect()
        report(f"{size.clusters} agents connected in {time.perf_counter() - started:.1f} s")
        place_s = fed.place()
        names = cluster_names(size)
        with fed.coordinator.lock:
            keys = sorted(fed.world.placements)
            initial = fed.expected(keys, names)
        began = time.perf_counter()
        fed.settle(initial, what="initial assignments", poll=0.1)
        report(f"{len(keys)} spreads placed in {place_s:.1f} s, delivered to the agents in "
               f"{time.perf_counter() - began:.1f} s")
        with fed.coordinator.lock:
            fed.run_steady_state()
            replicas = {n: sum(p.clusters.get(n, 0) for p in fed.world.placements.values()) for n in names}
            lost_name = victim or max(replicas, key=replicas.__getitem__)
            before = {k: p.clusters.get(lost_name, 0) for k, p in fed.world.placements.items()}
        survivors = [n for n in names if n != lost_name]

        fed.agents[lost_name].link.stop()
        _wait(lambda: lost_name not in fed.coordinator.connected(), what=f"{lost_name}'s stream to end")
        first_step = LOST_SECONDS * 0.6
        fed.clock.advance(first_step)  # survivors never look silent for longer than this
        fed.hear(survivors)
        fed.clock.advance(LOST_SECONDS - first_step + 1)  # the victim now has been: > LOST_SECONDS
        fed.hear(survivors)

        sampler = Sampler() if profile else None
        t0 = time.perf_counter()
        if sampler is not None:
            sampler.start()
        lost = fed.coordinator.tick()
        if sampler is not None:
            sampler.phase = "delivery"
        tick_s = time.perf_counter() - t0
        if lost.clusters != (lost_name,):
            raise RuntimeError(f"the tick lost {lost.clusters}, expected only {lost_name}")
        affected = sorted(lost.keys)
        with fed.coordinator.lock:
            expected = fed.expected(affected, survivors)
        fed.settle(expected, what="survivors' new quotas", poll=0.005)
        done = time.perf_counter()
        applied = [at for name, key in expected if (at := fed.agents[name].applied_at.get(key, 0.0)) >= t0]
        reconverge_s = max([t0 + tick_s, *applied]) - t0
        moved = sum(before.get(key, 0) for key in affected)
        report(f"{lost_name} lost: {len(affected)} spreads, {moved} replicas moved; tick {tick_s:.2f} s, "
               f"survivors hold their quotas after {reconverge_s:.2f} s (goal <= {GOAL_S:g} s)")
        result: dict[str, Any] = {
            "spreads": size.spreads, "clusters": size.clusters, "reconverge_s": round(reconverge_s, 3),
            "tick_s": round(tick_s, 3), "delivery_s": round(reconverge_s - tick_s, 3),
            "affected_spreads": len(affected), "moved_replicas": moved, "assignments_applied": len(applied),
            "lost_cluster": lost_name, "lost_after_s": LOST_SECONDS, "initial_place_s": round(place_s, 2),
            "observed_s": round(done - t0, 3), "goal_s": GOAL_S, "within_goal": reconverge_s <= GOAL_S,
            "method": ("one process: real Coordinator + AgentServicer on gRPC loopback, one real agent Link "
                       "per cluster; injected clock stands still; reconverge_s from just before the "
                       "Coordinator.tick() that declares the cluster lost to the last survivor's "
                       "on_assignment (bookkeeping updated) for an affected spread after it"),
        }
        if sampler is not None:
            sampler.stop()
            result["profile"] = sampler.top()
            for phase, lines in result["profile"].items():
                report(f"profile, {phase} (share of busy-thread samples with the function on the stack):")
                for line in lines:
                    report(f"  {line}")
        return result


class Sampler(threading.Thread):
    """A sampling profiler of every thread: cheap enough to leave the timing meaningful.

    Every `interval` seconds it records the functions on the stack of each thread that is not
    waiting (its innermost frame is not in `threading`, `queue` or gRPC's channel waits). `phase`
    names what is being sampled: during "tick" only the thread calling the tick (the others are
    mostly waiting for the coordinator's lock, which a Python frame cannot tell from work), then
    every thread during "delivery". `top` gives per phase the functions present in the largest
    share of samples (inclusive time, as cProfile's cumulative).
    """

    IDLE = ("threading.py", "queue.py", "selectors.py", "_channel.py", "_server.py", "failover.py")
    GENERIC = ("threading.py:", "thread.py:_worker", "<frozen runpy>", "bench/failover.py:")
    """Frames every thread or the benchmark itself has on its stack: left out of `top`."""

    def __init__(self, interval: float = 0.005) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.interval = interval
        self.phase = "tick"
        self.ticking = threading.get_ident()
        self._stop_event = threading.Event()
        self._counts: dict[str, collections.Counter[str]] = {}
        self._samples: collections.Counter[str] = collections.Counter()

    def run(self) -> None:
        me = threading.get_ident()
        while not self._stop_event.wait(self.interval):
            phase = self.phase
            counts = self._counts.setdefault(phase, collections.Counter())
            for ident, frame in sys._current_frames().items():
                if ident == me or frame.f_code.co_filename.endswith(self.IDLE):
                    continue
                if phase == "tick" and ident != self.ticking:
                    continue
                self._samples[phase] += 1
                seen = set()
                walk: Any = frame
                while walk is not None:
                    code = walk.f_code
                    seen.add(f"{_short(code.co_filename)}:{code.co_name}")
                    walk = walk.f_back
                counts.update(seen)

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop_event.set()
        self.join()

    def _specific(self, counts: collections.Counter[str]) -> list[tuple[str, int]]:
        return [(name, n) for name, n in counts.most_common() if not any(g in name for g in self.GENERIC)]

    def top(self, limit: int = 20) -> dict[str, list[str]]:
        """Per phase, the `limit` functions on the most busy samples, with their share."""
        return {
            phase: [f"{100 * n / self._samples[phase]:5.1f}%  {name}"
                    for name, n in self._specific(counts)[:limit]]
            for phase, counts in self._counts.items() if self._samples[phase]
        }


def _short(filename: str) -> str:
    """A file name from the repository or a library, without the machine's prefix."""
    for marker in ("/site-packages/", "/work/main/", "/lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.failover [--quick] [--profile]`: one measurement, printed as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--spreads", type=int)
    parser.add_argument("--clusters", type=int)
    parser.add_argument("--profile", action="store_true", help="sample every thread during tick and delivery")
    options = parser.parse_args(argv)
    base = QUICK if options.quick else FULL
    size = Size(options.spreads or base.spreads, options.clusters or base.clusters)
    result = measure(size, report=lambda line: print(line, file=sys.stderr, flush=True),
                     profile=options.profile)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
