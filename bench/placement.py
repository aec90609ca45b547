"""Placement at scale: the real coordinator places every spread, with every agent stream live.

Why measured this way: the claims are per-spread cost at federation scale (≤ 0.5 ms per spread at
1,000 clusters, against Karmada's published P50 of 12 ms per binding) and how long a user waits
after an event until every member cluster holds its new share. So the coordinator side is the real
one — `facade.Coordinator` (World, loop, assignments) behind the real `AgentServicer` on the
coordinator's `grpc.aio` server — in a process of its own, so that its RSS is the coordinator's
memory; and every member cluster has a live stream from the stand-in agents of
bench/placement_swarm.py (coroutines in a second process: Hello, inventory, heartbeats, acks).
Spreads and their hub Deployments are fed to the World directly; one point (`--hub`,
bench/placement_hub.py) runs the whole coordinator process against a hub apiserver instead.

What one run records (`measure`):

- the full round: `Coordinator.publish(every spread)` — placement and the messages queued to every
  agent (`full_s`, `per_spread_ms`, CPU time in this process and in the Ray actors), then
  `delivered_s` from the round's start until the agents hold every message it sent;
- events, each timed from the event to every affected agent holding its new share
  (bench/placement_events.py): one spread's scale-up; a new spread; a cluster's capacity growth
  where replicas wait for room; a capacity shrink with its agent's UnschedulableReports for the
  home subsets of the spreads there (reports over the cluster's own stream); a drain (NoExecute)
  and its end;
- the coordinator's RSS: growth over the run (`rss_mb`) and the whole process (`rss_total_mb`).

The sweep (`run`) moves one dimension at a time away from a base federation of 1,000 clusters
(`FULL_BASE`: 1,000 spreads, 10 clusters per spread, 2 node pools per cluster, one pod template):
spreads 10k/100k, clusters per spread 100/1,000, pools 50/200, templates 16/1,000, on the
in-process backend; then the goal's federation (`GOAL`: 10k spreads x 1,000 clusters, ~100 per
spread) once per backend — `local` places in this process (the default), `ray` on the SpreadShard
actors of a local Ray started for the run as `fedspread coordinator --local-ray` does.
One machine cannot show Ray across nodes; it shows what Ray costs and saves on the cores it has.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import gc
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from bench import (
    placement_backends,
    placement_events,
    placement_hub,
    placement_runs,
    placement_swarm,
    placement_world,
)
from bench.placement_world import Shape
from federation import collector
from federation.coordinator import facade
from federation.coordinator.model import world
from federation.coordinator.services import agent_service, aio_server

FULL_BASE = Shape(spreads=1_000, clusters=1_000, per_spread=10, pools=2, templates=1)
FULL_STEPS: dict[str, tuple[int, ...]] = {
    "spreads": (10_000, 100_000), "per_spread": (100, 1_000), "pools": (50, 200), "templates": (16, 1_000)}
GOAL = Shape(spreads=10_000, clusters=1_000, per_spread=100, pools=2, templates=1)
QUICK_BASE = Shape(spreads=100, clusters=100, per_spread=10, pools=2, templates=1)
QUICK_STEPS: dict[str, tuple[int, ...]] = {"spreads": (1_000,), "per_spread": (100,), "pools": (50,),
                                           "templates": (16,)}
BACKENDS = placement_backends.BACKENDS
RAY_SHARDS, RAY_CPUS = placement_backends.RAY_SHARDS, placement_backends.RAY_CPUS
SCALE_UPS = NEW_SPREADS = CAPACITY_CHANGES = CORDONS = 20
"""Samples per event kind: every event latency over at least 20 (a capacity growth needs a hungry
spread's spill cluster each, so a federation of under 1,000 spreads has fewer: `n` says)."""
RUNS = 3
"""Runs per point, each in a fresh coordinator process; the record gives each figure's median run
with the smallest and largest (`placement_runs.combine`)."""
LEFT_OUT = {
    "tls": "the agent streams are plaintext gRPC (a real federation runs mTLS: a handshake per stream "
           "and encryption of every message)",
    "hub": "spreads and hub Deployments are fed to the World in process (no hub apiserver, no watch, "
           "no admission of the hub objects)",
    "status_pass": "no status is written to the hub (the coordinator's status pass, one write per "
                   "changed spread, does not run)",
}
"""What a point leaves out of the coordinator's real work, recorded in every record (`left_out`).
The base runs twice again: with TLS in (`TLS_POINT`), and with TLS, the hub and the status pass in
(`placement_hub.HUB_POINT`: the whole coordinator process against a hub apiserver)."""
TLS_POINT = "base+tls"
SHRINK_NODES = GROW_NODES = 10
EVENT_TIMEOUT = float(os.environ.get("FEDSPREAD_BENCH_EVENT_TIMEOUT", "900"))
DELIVERY_TIMEOUT = 3600.0
HEARTBEAT_SECONDS = 30.0
"""The heartbeat interval the agents are told (the stand-ins beat at `placement_swarm`'s)."""


def sweep(base: Shape, steps: dict[str, tuple[int, ...]]) -> list[tuple[str, Shape]]:
    """The base, then each dimension's other values with the rest as in the base."""
    found = [("base", base)]
    for dimension, values in steps.items():
        found += [(dimension, dataclasses.replace(base, **{dimension: value})) for value in values]
    return found


def measure(shape: Shape, *, backend: str = "local", tls: bool = False,
            batches: bool = True) -> dict[str, Any]:
    """One point of the sweep, in this process: the coordinator, with the agents in a child process
    (`tls`: every stream over mutual TLS, as a real federation's; `batches`: the agents read and send
    batched messages, as `agents.link` does)."""
    placing = placement_backends.Backend(backend)
    try:
        with tempfile.TemporaryDirectory(prefix="fedspread-bench-tls-") as scratch:
            directory = placement_swarm.certificates(pathlib.Path(scratch)) if tls else None
            found = _measure(shape, placing=placing, tls=directory, batches=batches)
        left_out = {key: why for key, why in LEFT_OUT.items() if not (tls and key == "tls")}
        return {**shape.describe(), **found, **placing.describe(), "tls": tls, "left_out": left_out}
    finally:
        placing.close()


@dataclasses.dataclass(frozen=True)
class Running:
    """A coordinator serving AgentService in this process, and the stand-in agents' process."""

    coordinator: facade.Coordinator
    recorder: placement_events.Recorder
    agents: placement_swarm.Agents
    target: str
    """Where the coordinator's AgentService listens."""
    baseline_rss_mb: float
    """This process's RSS before the agents connected."""


@contextlib.contextmanager
def running(shape: Shape, *, placing: placement_backends.Backend,
            tls: pathlib.Path | None = None, batches: bool = True) -> Iterator[Running]:
    """The coordinator with every stand-in agent's stream open and its inventory applied (`tls`:
    the directory of `placement_swarm.certificates`, every stream over mutual TLS; None: plaintext)."""
    clock = lambda: datetime.datetime.now(datetime.UTC)  # noqa: E731
    model = world.World(clock)
    coordinator = facade.Coordinator(model, clock=clock, backend=placing.backend)
    server = aio_server.AioServer(options=[("grpc.max_send_message_length", 64 << 20)])
    servicer = agent_service.add_to_server(server.server, agent_service.AgentServicer(
        coordinator, clock=clock, heartbeat_seconds=HEARTBEAT_SECONDS, require_identity=False))
    if tls is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials(
            [((tls / "coordinator.key").read_bytes(), (tls / "coordinator.crt").read_bytes())],
            root_certificates=(tls / "ca.crt").read_bytes(), require_client_auth=True))
    server.start()
    baseline = placement_backends.rss_mb()
    recorder = placement_events.Recorder(coordinator)
    agents: placement_swarm.Agents | None = None
    try:
        agents = placement_swarm.Agents(f"127.0.0.1:{port}", shape, tls, batches=batches)

        def reported() -> bool:
            with coordinator.lock:
                return sum(1 for c in model.snapshot_for("").clusters if c.node_pools) == shape.clusters

        placement_hub.wait_until(reported, timeout=600, what="every agent's inventory")
        yield Running(coordinator, recorder, agents, f"127.0.0.1:{port}", baseline)
    finally:
        if agents is not None:
            agents.close()
        recorder.close()
        server.stop(grace=None)
        servicer.close()


def _measure(shape: Shape, *, placing: placement_backends.Backend,
             tls: pathlib.Path | None = None, batches: bool = True) -> dict[str, Any]:
    with running(shape, placing=placing, tls=tls, batches=batches) as run:
        coordinator, recorder, agents = run.coordinator, run.recorder, run.agents
        found = _full_round(coordinator, recorder, agents, shape=shape, placing=placing)
        rss = placement_backends.rss_mb()
        found.update(rss_mb=round(rss - run.baseline_rss_mb, 1), rss_total_mb=round(rss, 1),
                     streams=agents.ready["streams"], streams_welcomed_s=agents.ready["seconds"],
                     events=_events(coordinator, recorder, agents, shape=shape), batches=batches)
        found["rss_peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        ended = agents.ask("ended", {})
        found["streams_reopened"], found["streams_ended_examples"] = ended["count"], ended["examples"]
        found["streams_detached"] = recorder.detached
        events = found["events"]
        found["event_p99_ms"] = events["scale_up"].get("p99_ms")
        found["cordon_ms"] = events["cordon"].get("p99_ms")
        return found


def _full_round(coordinator: facade.Coordinator, recorder: placement_events.Recorder,
                agents: placement_swarm.Agents, *, shape: Shape,
                placing: placement_backends.Backend) -> dict[str, Any]:
    """Every spread placed at once and delivered to every agent."""
    model = coordinator.world
    with coordinator.lock:
        keys = placement_world.add_spreads(model, shape)
    recorder.take()
    with placement_backends.CollectorTime() as collecting:
        cpu, actors_cpu, thread_cpu = time.process_time(), placing.actors_cpu_s(), time.thread_time()
        since = time.monotonic()
        result = coordinator.publish(keys)
        full = time.monotonic() - since
        thread_cpu = time.thread_time() - thread_cpu  # the placing thread's own: what no actor takes over
        in_round = collecting.seconds, collecting.collections
        cpu, actors_cpu = time.process_time() - cpu, placing.actors_cpu_s() - actors_cpu
        sent, _ = recorder.take()
        delivered = placement_events.held(agents.ask, recorder, since=since, sent=sent,
                                          timeout=DELIVERY_TIMEOUT)
    return {"full_s": round(full, 3), "per_spread_ms": round(full / shape.spreads * 1000, 3),
            "delivered_s": round(delivered, 3), "messages": len(sent),
            "replicas_placed": sum(p.placed for p in result.placements.values()),
            "round_replaced": result.replaced, "round_fell_back": result.fell_back or None,
            "full_cpu_s": round(cpu, 3), "full_actors_cpu_s": round(actors_cpu, 3),
            "full_thread_cpu_s": round(thread_cpu, 3),
            # the cycle collector in this process: inside the round's publish, and from its start
            # until every message was delivered (a collection the round's end starts counts there)
            "full_collector_s": round(in_round[0], 3), "full_collections": in_round[1],
            "delivered_collector_s": round(collecting.seconds, 3),
            "delivered_collections": collecting.collections}


def _events(coordinator: facade.Coordinator, recorder: placement_events.Recorder,
            agents: placement_swarm.Agents, *, shape: Shape) -> dict[str, dict[str, Any]]:
    """Every kind of event, its samples one after the other, each delivered before the next, each
    with the time the cycle collector took while it ran."""
    ask, timeout, events = agents.ask, EVENT_TIMEOUT, _CollectorTimed(placement_events)
    scaled = [i + 1 if placement_world.hungry(i) else i
              for i in (k * shape.spreads // SCALE_UPS for k in range(SCALE_UPS))]
    samples: dict[str, list[placement_events.Sample]] = {kind: [] for kind in (
        "scale_up", "new_spread", "capacity_shrink", "capacity_grow", "cordon", "uncordon")}
    for index in scaled:
        samples["scale_up"].append(events.scale_up(coordinator, recorder, ask, index=index, shape=shape,
                                                   timeout=timeout))
    for index in range(shape.spreads, shape.spreads + NEW_SPREADS):
        samples["new_spread"].append(events.new_spread(coordinator, recorder, ask, index=index, shape=shape,
                                                       timeout=timeout))
    for spill in placement_world.hungry_spills(shape)[:CAPACITY_CHANGES]:
        samples["capacity_grow"].append(events.capacity(coordinator, recorder, ask, index=spill,
                                                        change=GROW_NODES, timeout=timeout))
    shrunk = ((k * shape.clusters // CAPACITY_CHANGES + 2) % shape.clusters for k in range(CAPACITY_CHANGES))
    for index in shrunk:
        homed = placement_world.homed_at(index, shape)
        stuck = [(placement_world.spread(i, shape).key, "home") for i in homed]
        samples["capacity_shrink"].append(events.capacity(coordinator, recorder, ask, index=index,
                                                          change=-SHRINK_NODES, stuck=stuck, timeout=timeout))
    for index in ((k * shape.clusters // CORDONS + 1) % shape.clusters for k in range(CORDONS)):
        for drained, kind in ((True, "cordon"), (False, "uncordon")):
            samples[kind].append(events.taint(coordinator, recorder, ask, index=index, shape=shape,
                                              drained=drained, timeout=timeout))
    return {kind: placement_events.summary(found) for kind, found in samples.items()}


class _CollectorTimed:
    """`placement_events`' event functions, each Sample returned with the cycle collector's time
    while it ran (`Sample.collector_s`)."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Callable[..., placement_events.Sample]:
        function = getattr(self._module, name)

        def timed(*args: Any, **kwargs: Any) -> placement_events.Sample:
            with placement_backends.CollectorTime() as collecting:
                sample: placement_events.Sample = function(*args, **kwargs)
            return dataclasses.replace(sample, collector_s=collecting.seconds)
        return timed


def run(*, quick: bool, report: Callable[[str], None],
        backends: tuple[str, ...] = BACKENDS, runs: int = RUNS) -> list[dict[str, Any]]:
    """The sweep on the in-process backend, then the goal's federation (the quick run: the base)
    on every backend; each point `runs` times, each run in a fresh coordinator process (clean RSS),
    combined into one record per point (`placement_runs.combine`). A point run on several backends runs them
    run by run, the order rotating (run 1 in-process first, run 2 the next backend first, ...), so
    a ratio between them is not one backend's quiet minutes against the other's busy ones."""
    points = sweep(QUICK_BASE, QUICK_STEPS) if quick else sweep(FULL_BASE, FULL_STEPS)
    points_to_run = [(varied, shape, "local", "") for varied, shape in points]
    goal = ("base", QUICK_BASE) if quick else ("goal", GOAL)
    points_to_run += [(goal[0], goal[1], backend, "") for backend in backends
                      if (goal[0], goal[1], backend, "") not in points_to_run]
    points_to_run.append((TLS_POINT, points[0][1], "local", "tls"))  # the base again, every stream TLS
    points_to_run.append((placement_hub.HUB_POINT, points[0][1], "local", "hub"))  # and through a hub
    found = []
    for group in _by_point(points_to_run):
        records: dict[Planned, list[dict[str, Any]]] = {planned: [] for planned in group}
        for number in range(runs):
            turn = number % len(group)
            for varied, shape, backend, extra in group[turn:] + group[:turn]:
                report(f"placement {varied}: {json.dumps(shape.describe())}, {backend}, "
                       f"run {number + 1}/{runs}")
                try:
                    record = {"varied": varied, **run_one(shape, backend=backend, tls=extra == "tls",
                                                          hub=extra == "hub")}
                except (RuntimeError, subprocess.TimeoutExpired, ValueError) as error:  # others still count
                    record = {"varied": varied, **shape.describe(), "backend": backend,
                              "error": f"{type(error).__name__}: {str(error)[-500:]}"}
                records[(varied, shape, backend, extra)].append(record)
                report(json.dumps(record))
        found += [placement_runs.combine(records[planned]) for planned in group]
    return found


Planned = tuple[str, Shape, str, str]
"""A point as the sweep plans it: what varied, its shape, the backend, and "tls", "hub" or ""."""


def _by_point(planned: list[Planned]) -> list[list[Planned]]:
    """The planned points grouped by point (what varied, shape, extra), each group's backends in
    the order they were planned, the groups in the order of their first point."""
    groups: dict[tuple[str, Shape, str], list[Planned]] = {}
    for varied, shape, backend, extra in planned:
        groups.setdefault((varied, shape, extra), []).append((varied, shape, backend, extra))
    return list(groups.values())


def hub_point(shape: Shape) -> dict[str, Any]:
    """The point through a hub (`placement_hub`), recorded as the other points are."""
    found = placement_hub.measure(shape, report=lambda line: print(line, file=sys.stderr, flush=True))
    return {**shape.describe(), **found, "backend": "local", "tls": True, "hub": True}


def _python_path() -> str:
    """This checkout first, then the caller's PYTHONPATH (packages installed with --target)."""
    return os.pathsep.join(filter(None, (os.getcwd(), os.environ.get("PYTHONPATH"))))


def run_one(shape: Shape, *, backend: str, tls: bool = False, hub: bool = False,
            interpreter_gc: bool = False, unbatched: bool = False) -> dict[str, Any]:
    """One point with one backend in a child process; its record, with the load at its start and end
    (`interpreter_gc`: the interpreter's collector thresholds, not ours; `unbatched`: no batches)."""
    at_start = [round(v, 2) for v in os.getloadavg()]
    child = subprocess.run([sys.executable, "-m", "bench.placement", "--shape",
                            json.dumps(dataclasses.asdict(shape)), "--backend", backend,
                            *(["--tls"] if tls else []), *(["--hub"] if hub else []),
                            *(["--interpreter-gc"] if interpreter_gc else []),
                            *(["--unbatched"] if unbatched else [])],
                           capture_output=True, text=True, timeout=3 * 3600,
                           env={**os.environ, "PYTHONPATH": _python_path()})
    if child.returncode != 0:
        raise RuntimeError(f"{shape} ({backend}) failed: {child.stderr.strip()[-2000:]}")
    record: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    record["load"] = {"at_start": at_start, "at_end": [round(v, 2) for v in os.getloadavg()]}
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.placement",
        description="One point of the placement benchmark; prints its record as one JSON line.")
    parser.add_argument("--shape", type=placement_world.parse_shape, default=QUICK_BASE,
                        help="the federation (bench.placement_world.Shape as JSON), e.g. "
                             '\'{"spreads": 10000, "clusters": 1000, "per_spread": 100}\'')
    parser.add_argument("--backend", type=placement_backends.parse_backend, default="local", help=(
        "place in this process (local) or on a local Ray's shard actors (ray; ray-N, ray-NxM: N "
        "SpreadShards, M ClusterShards)"))
    parser.add_argument("--tls", action="store_true",
                        help="every agent stream over mutual TLS (by default plaintext: see LEFT_OUT)")
    parser.add_argument("--hub", action="store_true",
                        help="the whole coordinator process against a hub apiserver of its own, spreads "
                             "created through the hub's API, statuses written, every stream over mutual "
                             "TLS (bench.placement_hub)")
    parser.add_argument("--interpreter-gc", action="store_true",
                        help="keep the interpreter's garbage-collector thresholds in the coordinator (by "
                             "default it runs with federation.collector's, as `fedspread coordinator` does): "
                             "the before arm of that change")
    parser.add_argument("--no-freeze", action="store_true",
                        help="leave what a large round leaves alive in the collector's generations in the "
                             "coordinator (by default it is frozen for a while, as `fedspread coordinator` "
                             "does: federation.collector): the before arm of that change")
    parser.add_argument("--unbatched", action="store_true",
                        help="stand-in agents that read and send no batches (the before arm of that change)")
    options = parser.parse_args(argv)
    thresholds = gc.get_threshold() if options.interpreter_gc else collector.THRESHOLDS
    if not options.interpreter_gc:
        collector.tune()
    collector.freeze_rounds(not options.no_freeze)
    if options.hub and (options.tls or options.backend != "local"):
        parser.error("--hub runs the in-process backend, its streams always over mutual TLS")
    found = (hub_point(options.shape) if options.hub
             else measure(options.shape, backend=options.backend, tls=options.tls,
                          batches=not options.unbatched))
    print(json.dumps({**found, "gc_thresholds": list(thresholds), "freeze_rounds": not options.no_freeze}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
