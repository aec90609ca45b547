"""Placement at scale: the coordinator places every spread, with stand-in agents over real gRPC.

Why measured this way: the claim is per-spread cost at federation scale — ≤ 0.5 ms per
spread amortized at 1,000 clusters, ≤ 50 ms to react to one cluster's capacity change — against
Karmada's published scheduling latency (P50 12 ms, P99 32 ms per binding). So the coordinator side
is the real one: `facade.Coordinator` (World, loop, assignments) behind the real
`AgentServicer` on the coordinator's `grpc.aio` server, in a process of its own so its RSS is the
coordinator's memory.
The member clusters are stand-in agents in a second process: one real AgentService stream each
(Hello, a full InventoryReport of synthesized node pools, heartbeats), counting the assignments
they receive. Spreads and their hub Deployments are fed to the World directly (the hub watcher is
measured elsewhere). A full recompute is `Coordinator.publish(every spread)` — placement plus the
assignment deltas queued to every agent; incremental is one cluster's new inventory arriving over
its stream until the recompute it triggers has been published.

Each size runs twice, once per placement backend (`backend`): `local` places in the coordinator's
process (`--no-ray`), `ray` on the `SpreadShard` actors of a local Ray the benchmark starts for
that run (`RAY_SHARDS` shards, the coordinator's default; `RAY_CPUS` CPUs; its own temp dir),
exactly as `fedspread coordinator` does without `--ray-address`. The Ray actors' memory is
recorded apart from the coordinator's (`ray_actors_rss_mb`), so is the CPU time of the full round
in the coordinator's process and in the actors' (`full_cpu_s`, `full_actors_cpu_s`: on a shared
machine wall time follows the load, CPU time less so), and so is how many spreads of the
parallel round the coordinator had to place again itself (`round_replaced`: an earlier spread of
the round changed the pending pods of a cluster it can use). One machine cannot show Ray scaling
across nodes; what it shows is what Ray costs and saves on the cores it has.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from bench import placement_backends
from federation.api import common, names
from federation.api import spread as spread_api
from federation.coordinator import facade
from federation.coordinator.model import world
from federation.coordinator.services import agent_service, aio_server
from federation.coordinator.wire import inbound
from federation.rpc import agent_pb2, agent_pb2_grpc, common_pb2

QUICK_SIZES = ((100, 10), (1_000, 100))
FULL_SIZES = ((100, 10), (1_000, 100), (10_000, 1_000))
BACKENDS = placement_backends.BACKENDS
RAY_SHARDS, RAY_CPUS = placement_backends.RAY_SHARDS, placement_backends.RAY_CPUS
REGIONS = 10
HEARTBEAT_SECONDS = 5.0
LOST_AFTER_SECONDS = 3600
MAX_STREAMS = 200
"""Agents with a live gRPC stream; the other clusters report straight into the coordinator's World.
Placement still covers every cluster. The limit dates from the sync AgentService (two coordinator
threads per stream: a 10k x 1k run with 1,000 streams had not finished its first delivery in 25
minutes); the coordinator now serves streams as coroutines on a fixed pool, but the
stand-in agents below are sync clients with a thread per stream, and the numbers in bench/README.md
were measured with 200. Not re-measured with 1,000 streams yet."""
TEMPLATE = {"spec": {"replicas": 1, "template": {"spec": {"containers": [
    {"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}}}}


def cluster_name(index: int) -> str:
    return f"c{index:04d}"


def pools(index: int, *, grown: bool = False) -> list[common_pb2.NodePool]:
    """Two node pools per cluster; `grown` adds nodes (the incremental change)."""
    general = 20 + index % 7 + (10 if grown else 0)
    return [common_pb2.NodePool(name="general", count=general, labels={"pool": "general"},
                                allocatable={"cpu": "16", "memory": "64Gi", "pods": "110"},
                                requested={"cpu": "4", "memory": "8Gi", "pods": "12"}),
            common_pb2.NodePool(name="highmem", count=4, labels={"pool": "highmem"},
                                allocatable={"cpu": "32", "memory": "256Gi", "pods": "110"})]


def spread(index: int, *, clusters: int) -> spread_api.FederatedSpread:
    """A capped first cluster, then the spread's region by free capacity (Adaptive). Clusters are
    lost only after an hour: a cordon at 10k x 100 holds the coordinator's lock longer than the
    default minute, and heartbeats queued behind it would otherwise make clusters lost and found
    again, placing a thousand spreads anew per cluster (failover is bench/failover.py's)."""
    return spread_api.FederatedSpread.model_validate({
        "metadata": {"name": f"s{index:05d}", "namespace": f"ns{index % 50}", "generation": 1},
        "spec": {"targetRef": {"name": f"s{index:05d}"}, "scheduleStrategy": {"type": "Adaptive"},
                 "failover": {"clusterLostSeconds": LOST_AFTER_SECONDS},
                 "subsets": [{"name": "home", "clusters": [cluster_name(index * 7 % clusters)],
                              "maxReplicas": 4},
                             {"name": "region", "clusterSelector": {"matchLabels": {
                                 names.REGION_LABEL: f"r{index % REGIONS}"}}}]},
    })


# --- the stand-in agents (their own process) ---------------------------------------------------------


def _agent_messages(name: str, index: int, outgoing: queue.Queue[agent_pb2.AgentMessage | None]
                    ) -> Iterator[agent_pb2.AgentMessage]:
    yield agent_pb2.AgentMessage(hello=agent_pb2.Hello(
        cluster_name=name, agent_version="bench", capabilities=["resync-complete"],
        topology_labels={names.REGION_LABEL: f"r{index % REGIONS}"}))
    report = agent_pb2.InventoryReport(full=True, sequence=1, node_pools=pools(index))
    yield agent_pb2.AgentMessage(inventory=report)
    while (message := outgoing.get()) is not None:
        yield message


def run_agents(target: str, *, clusters: int, grow: int) -> None:
    """Open one stream per cluster; print "ready" once all are welcomed, then, on a line "grow" on
    stdin, send cluster `grow`'s grown inventory; exit on EOF."""
    channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", 64 << 20)])
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    outboxes = [queue.Queue[agent_pb2.AgentMessage | None]() for _ in range(clusters)]
    welcomed = threading.Semaphore(0)

    def serve(index: int) -> None:
        for message in stub.Connect(_agent_messages(cluster_name(index), index, outboxes[index])):
            if message.WhichOneof("body") == "welcome":
                welcomed.release()

    def beat() -> None:  # agents are lost without heartbeats (clusterLostSeconds)
        sequence = 0
        while True:
            time.sleep(HEARTBEAT_SECONDS)
            sequence += 1
            for outbox in outboxes:
                outbox.put(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(sequence=sequence)))

    for index in range(clusters):
        threading.Thread(target=serve, args=(index,), daemon=True).start()
    for _ in range(clusters):
        welcomed.acquire()
    threading.Thread(target=beat, daemon=True).start()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "grow":
            outboxes[grow].put(agent_pb2.AgentMessage(inventory=agent_pb2.InventoryReport(
                full=True, sequence=2, node_pools=pools(grow, grown=True))))
    for outbox in outboxes:
        outbox.put(None)


# --- the coordinator (its own process) ------------------------------------------------------------


def _wait(predicate: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def _grow(coordinator: facade.Coordinator, stdin: Any, *, name: str) -> tuple[float, float, int]:
    """One cluster's capacity change. Returns the coordinator's time from receiving the grown
    inventory to having published what it affects (the incremental recompute), the wall time
    from telling the stand-in agent to send it (adds the agents' process, which at 10k x 1k is
    still decoding the full round's assignments), and how many spreads were placed again
    (settled spreads keep their counts: none of them)."""
    applied, replaced, inside = threading.Event(), [0], [0.0]
    receive, publish = coordinator.receive, coordinator.publish

    def timed_publish(affected: Any) -> Any:
        answer = publish(affected)
        replaced[0] = len(answer.placements)
        return answer

    def timed_receive(stream: Any, message: Any) -> None:
        mine = stream.cluster == name and message.WhichOneof("body") == "inventory"
        entered = time.perf_counter()
        receive(stream, message)
        if mine:
            inside[0] = time.perf_counter() - entered
            applied.set()

    coordinator.publish, coordinator.receive = timed_publish, timed_receive  # type: ignore[method-assign]
    started = time.perf_counter()
    stdin.write("grow\n")
    stdin.flush()
    if not applied.wait(900):
        raise TimeoutError("the grown inventory was never applied")
    wall = time.perf_counter() - started
    coordinator.publish, coordinator.receive = publish, receive  # type: ignore[method-assign]
    return inside[0], wall, replaced[0]


def _cordon(coordinator: facade.Coordinator, *, name: str, region: str) -> tuple[float, int]:
    """The worst single-cluster event: a NoExecute taint on its MemberCluster (a drain), which every
    spread that can select it must answer (its replicas there move; a NoSchedule cordon would keep
    them); the seconds and the spreads placed."""
    taint = common.Taint(key="fedspread.io/maintenance", effect="NoExecute")
    with coordinator.lock:
        started = time.perf_counter()
        labels = {names.REGION_LABEL: region}
        affected = coordinator.world.upsert_cluster(name, labels=labels, taints=[taint])
        answer = coordinator.publish(affected)
        return time.perf_counter() - started, len(answer.placements)


def _report_directly(
    coordinator: facade.Coordinator, indices: range, *, stop: threading.Event
) -> None:
    """Clusters beyond MAX_STREAMS: their labels and inventory go straight into the World, and a
    thread keeps them heard (they are placed like the others; only delivery skips them)."""
    direct = [cluster_name(i) for i in indices]
    with coordinator.lock:
        for index, name in zip(indices, direct, strict=True):
            report = agent_pb2.InventoryReport(full=True, node_pools=pools(index))
            found = list(inbound.node_pools(report).values())
            region = {names.REGION_LABEL: f"r{index % REGIONS}"}
            coordinator.world.upsert_cluster(name, labels=region)
            coordinator.backend.report_inventory(name, found)
            coordinator.world.inventory(name, found)
            coordinator.world.heartbeat(name)

    def beat() -> None:
        while not stop.wait(HEARTBEAT_SECONDS):
            with coordinator.lock:
                for name in direct:
                    coordinator.world.heartbeat(name)

    threading.Thread(target=beat, daemon=True, name="direct-heartbeats").start()


def measure(*, spreads: int, clusters: int, backend: str = "local") -> dict[str, Any]:
    """One size, in this process: the coordinator, with the agents in a child process."""
    placing = placement_backends.Backend(backend)
    try:
        return _measure(spreads=spreads, clusters=clusters, placing=placing)
    finally:
        placing.close()


def _measure(*, spreads: int, clusters: int, placing: placement_backends.Backend) -> dict[str, Any]:
    clock = lambda: datetime.datetime.now(datetime.UTC)  # noqa: E731
    model = world.World(clock)
    coordinator = facade.Coordinator(model, clock=clock, backend=placing.backend)
    server = aio_server.AioServer(options=[("grpc.max_send_message_length", 64 << 20)])
    servicer = agent_service.add_to_server(server.server, agent_service.AgentServicer(
        coordinator, clock=clock, heartbeat_seconds=30.0, require_identity=False))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    baseline = placement_backends.rss_mb()
    streams = min(clusters, MAX_STREAMS)
    grow = streams // 2
    beating = threading.Event()
    _report_directly(coordinator, range(streams, clusters), stop=beating)
    agents = subprocess.Popen([sys.executable, "-m", "bench.placement", "--agents", f"127.0.0.1:{port}",
                               "--clusters", str(streams), "--grow", str(grow)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert agents.stdout is not None and agents.stdin is not None
        if agents.stdout.readline().strip() != "ready":
            raise RuntimeError("the stand-in agents did not start")
        def reported() -> bool:
            with coordinator.lock:
                return sum(1 for c in model.snapshot_for("").clusters if c.node_pools) == clusters

        _wait(reported, timeout=300, what="every agent's inventory")
        with coordinator.lock:
            keys = []
            for index in range(spreads):
                item = spread(index, clusters=clusters)
                model.upsert_spread(item)
                model.set_target(item.key, replicas=12, template=TEMPLATE)
                keys.append(item.key)
        cpu, actors_cpu = time.process_time(), placing.actors_cpu_s()
        started = time.perf_counter()
        result = coordinator.publish(keys)
        full = time.perf_counter() - started
        cpu, actors_cpu = time.process_time() - cpu, placing.actors_cpu_s() - actors_cpu
        placed = sum(p.placed for p in result.placements.values())
        rss = placement_backends.rss_mb()

        _wait(lambda: coordinator.backlog() == 0, timeout=1800, what="the full round's delivery")
        delivered = time.perf_counter() - started
        with coordinator.lock:
            before = model.snapshot_for("").clusters[grow].node_pools[0].count
        incremental, incremental_wall, regrown = _grow(coordinator, agents.stdin, name=cluster_name(grow))
        with coordinator.lock:
            grown = model.snapshot_for("").clusters[grow].node_pools[0].count
        cordon_s, cordoned = _cordon(coordinator, name=cluster_name(grow), region=f"r{grow % REGIONS}")
        return {"spreads": spreads, "clusters": clusters, "full_s": round(full, 3),
                "delivered_s": round(delivered, 3),
                "per_spread_ms": round(full / spreads * 1000, 3),
                "incremental_ms": round(incremental * 1000, 1), "incremental_replaced": regrown,
                "incremental_wall_ms": round(incremental_wall * 1000, 1),
                "cordon_ms": round(cordon_s * 1000, 1), "cordon_replaced": cordoned,
                "rss_mb": round(rss - baseline, 1), "replicas_placed": placed,
                "incremental_pools": f"{before}->{grown} nodes", "round_replaced": result.replaced,
                "full_cpu_s": round(cpu, 3), "full_actors_cpu_s": round(actors_cpu, 3),
                "agent_streams": streams, **placing.describe()}
    finally:
        beating.set()
        if agents.stdin is not None:
            agents.stdin.close()
        agents.wait(30)
        server.stop(grace=None)
        servicer.close()


def run(*, quick: bool, report: Callable[[str], None],
        backends: tuple[str, ...] = BACKENDS) -> list[dict[str, Any]]:
    """Every size with every backend, each in a fresh coordinator process (clean RSS)."""
    found = []
    for spreads, clusters in QUICK_SIZES if quick else FULL_SIZES:
        for backend in backends:
            report(f"{spreads} spreads x {clusters} clusters, {backend}")
            found.append(run_one(spreads=spreads, clusters=clusters, backend=backend))
            report(json.dumps(found[-1]))
    return found


def run_one(*, spreads: int, clusters: int, backend: str) -> dict[str, Any]:
    """One size with one backend in a child process; its record, with the load at its start and end."""
    at_start = [round(v, 2) for v in os.getloadavg()]
    child = subprocess.run([sys.executable, "-m", "bench.placement", "--spreads", str(spreads),
                            "--clusters", str(clusters), "--backend", backend],
                           capture_output=True, text=True, timeout=3600,
                           env={**os.environ, "PYTHONPATH": os.getcwd()})
    if child.returncode != 0:
        raise RuntimeError(f"{spreads}x{clusters} ({backend}) failed: {child.stderr.strip()[-2000:]}")
    record: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    record["load"] = {"at_start": at_start, "at_end": [round(v, 2) for v in os.getloadavg()]}
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.placement")
    parser.add_argument("--spreads", type=int, default=100)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--agents", metavar="TARGET", help="run the stand-in agents against TARGET")
    parser.add_argument("--grow", type=int, default=0)
    parser.add_argument("--backend", choices=BACKENDS, default="local",
                        help="place in this process (local) or on a local Ray's shard actors (ray)")
    options = parser.parse_args(argv)
    if options.agents:
        run_agents(options.agents, clusters=options.clusters, grow=options.grow)
        return 0
    print(json.dumps(measure(spreads=options.spreads, clusters=options.clusters,
                             backend=options.backend)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
