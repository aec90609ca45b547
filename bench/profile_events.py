"""Where a coordinator event's time goes: the placement benchmark's world, profiled event by event.

Why apart from bench/placement.py: that benchmark measures the coordinator end to end (gRPC
streams, stand-in agents in another process), which says *how long* an event takes but not *where*
the time goes. This script builds the same world — the same `placement_world.Shape`, spreads,
node pools, templates and cluster names — straight into a real `facade.Coordinator` with **no
agent streams**, so placement and the World's bookkeeping are all that runs: no agent message is
built, sent or acknowledged, and nothing waits for an agent. With `--streams` every cluster's agent
is attached (`Coordinator.attach`, as a Hello on a live stream does) but nothing reads its outbox,
so each event also builds, compares and queues its agents' messages — what the coordinator does for
them under its lock — and still sends nothing. Its times are therefore not the benchmark's
end-to-end latencies and cannot judge the benchmark's goals; they say where the coordinator's own
CPU goes. Each event is timed on its own under cProfile:

- the full round: `publish(every spread)`; then the same again, every spread now placed and
  stored (what a mass re-placement costs: on Ray the shards then hold every spread's spec);
- one spread's scale-up: `set_target(replicas + 1)`, then `publish([key])`;
- one cluster's capacity shrink, then grow back: `World.inventory` with fewer, then more nodes,
  then `publish(affected)`;
- a cordon: a NoExecute taint on one cluster's MemberCluster (`upsert_cluster`), then
  `publish(affected)` — every spread with replicas there moves them.

With `--backend ray` the coordinator places on a local Ray's shard actors as bench/placement.py
starts them; the profile is still this process's (what the coordinator does while the shards work:
sending the requests, waiting, reading the answers). It prints, per event, the wall seconds, the
spreads placed, and the top functions by cumulative time; `--json` times the same events without the
profiler (whose overhead is about half again) and prints one JSON line (for bench/README.md), with
the placing thread's CPU in the ledgers' folds per event (`bench.fold_time`); with `--round-parts`
also its CPU in each part of a round (`fold_time.ROUND_PARTS`): cProfile's cost per call inflates
small frequent functions and py-spy counts a thread that waits for a core, so these thread-time
sums are the figures to compare.

The process runs with `federation.collector`'s thresholds, as `fedspread coordinator` and the
benchmark's coordinator do (`--interpreter-gc` keeps the interpreter's): with the interpreter's, a
full round at 10k spreads x 1,000 clusters spends about half its time in the cycle collector,
which the coordinator as it ships does not, so its profile would point at the wrong functions.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime
import gc
import io
import json
import pathlib
import pstats
import shlex
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from bench import admission_stats, fold_time, placement_backends, run
from bench.placement_world import (
    Shape,
    cluster_name,
    parse_shape,
    pools,
    region_of,
    replicas_of,
    spread,
    template,
)
from federation import collector
from federation.api import common, names
from federation.coordinator import backends, facade
from federation.coordinator.model import world
from federation.coordinator.wire import inbound
from federation.rpc import agent_pb2, capabilities, common_pb2

HEARTBEAT_SECONDS = 10
"""What an attached stand-in agent is told (`--streams`); nothing here waits for a heartbeat."""


def build(shape: Shape, *, backend: backends.PlacementBackend | None = None, streams: bool = False,
          ) -> tuple[facade.Coordinator, list[str]]:
    """A coordinator (placing on `backend`, in-process by default) with `shape.clusters` reported
    clusters and `shape.spreads` spreads with targets, unplaced; with `streams`, every cluster's
    agent attached, its outbox never read."""
    clock = lambda: datetime.datetime.now(datetime.UTC)  # noqa: E731
    model = world.World(clock)
    coordinator = facade.Coordinator(model, clock=clock, backend=backend)
    with coordinator.lock:
        for index in range(shape.clusters):
            report_pools(coordinator, index, pools(index, shape))
            model.upsert_cluster(cluster_name(index), labels=labels(index, shape))
            model.heartbeat(cluster_name(index))
        keys = []
    for index in range(shape.clusters if streams else 0):
        hello = agent_pb2.Hello(cluster_name=cluster_name(index),
                                capabilities=[capabilities.RESYNC_COMPLETE_CAPABILITY])
        coordinator.attach(hello, heartbeat_seconds=HEARTBEAT_SECONDS)
    with coordinator.lock:
        for index in range(shape.spreads):
            item = spread(index, shape)
            model.upsert_spread(item)
            model.set_target(item.key, replicas=replicas_of(index), template=template(index, shape))
            keys.append(item.key)
    return coordinator, keys


def labels(index: int, shape: Shape) -> dict[str, str]:
    """Cluster `index`'s topology labels, as bench/placement.py's stand-in agents say them."""
    return {names.REGION_LABEL: region_of(index, shape)}


def report_pools(coordinator: facade.Coordinator, index: int, found: list[common_pb2.NodePool]) -> set[str]:
    """Cluster `index`'s agent reports `found` (a full inventory); the spreads it affects."""
    report = agent_pb2.InventoryReport(full=True, node_pools=found)
    latest = list(inbound.node_pools(report).values())
    coordinator.backend.report_inventory(cluster_name(index), latest)
    return coordinator.world.inventory(cluster_name(index), latest)


def shrunk(index: int, shape: Shape) -> list[common_pb2.NodePool]:
    """Cluster `index`'s pools with half its first general pool's nodes gone (a capacity loss)."""
    found = pools(index, shape)
    found[0].count //= 2
    return found


class Profiled:
    """Runs events under cProfile, keeping each one's wall time and profile."""

    def __init__(self, *, profile: bool = True, round_parts: bool = False) -> None:
        self.profile = profile
        self.round_parts = round_parts
        self.timings: dict[str, dict[str, Any]] = {}
        self.profiles: dict[str, pstats.Stats] = {}

    def run(self, label: str, event: Callable[[], Iterable[str]], coordinator: facade.Coordinator) -> None:
        """Time `event` (returning the keys to publish) and the publish of its keys."""
        profile = cProfile.Profile()
        folds = fold_time.FoldTime()
        parts = fold_time.FoldTime(fold_time.ROUND_PARTS, outermost=True)
        with (coordinator.lock, placement_backends.CollectorTime() as collecting,
              contextlib.nullcontext() if self.profile else folds.timing(),
              parts.timing() if self.round_parts and not self.profile else contextlib.nullcontext()):
            cpu, started = time.process_time(), time.perf_counter()
            if self.profile:
                profile.enable()
            affected = list(event())
            result = coordinator.publish(affected)
            profile.disable()
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        self.timings[label] = {"s": round(wall, 4), "cpu_s": round(cpu, 4), "affected": len(affected),
                               "placed": len(result.placements),
                               # the cycle collector's share of it (publish pauses it: what survived
                               # the round is collected once, as the round ends)
                               "collector_s": round(collecting.seconds, 4),
                               "collections": collecting.collections,
                               # the ledgers' folds, timed without the profiler (bench.fold_time)
                               **({} if self.profile else folds.report()),
                               **(parts.report() if self.round_parts and not self.profile else {})}
        if self.profile:
            self.profiles[label] = pstats.Stats(profile)

    def report(self, *, top: int) -> str:
        """Every event's time and its `top` functions by cumulative time."""
        out = io.StringIO()
        for label, timing in self.timings.items():
            if label not in self.profiles:  # the single-spread scales: percentiles, not profiled
                out.write(f"=== {label}: " + ", ".join(f"{k} {v}" for k, v in timing.items()) + "\n")
                continue
            out.write(f"=== {label}: {timing['s']:.3f} s, {timing['affected']} affected, "
                      f"{timing['placed']} placed\n")
            stats = self.profiles[label]
            stats.stream = out  # type: ignore[attr-defined]
            stats.sort_stats("cumulative").print_stats(top)
        return out.getvalue()


def measure(shape: Shape, *, profile: bool = True, backend: backends.PlacementBackend | None = None,
            streams: bool = False, scale_samples: int = 0, round_parts: bool = False) -> Profiled:
    """Build the world (with `streams`, every agent attached) and time each event once, in order
    (under cProfile with `profile`); the profile is this process's: on Ray, the shard actors' own
    work is not in it. Then, with `scale_samples`, that many scale events of single spreads
    (`scale_latencies`). `round_parts` (without `profile`): each event's CPU per part of a round
    (`fold_time.ROUND_PARTS`)."""
    coordinator, keys = build(shape, backend=backend, streams=streams)
    model = coordinator.world
    found = Profiled(profile=profile, round_parts=round_parts)
    found.run("full round", lambda: keys, coordinator)
    found.run("full round, again", lambda: keys, coordinator)  # every spread placed and stored before
    chosen = len(keys) // 2
    key = keys[chosen]

    def scale_up() -> set[str]:
        entry = model.spread(key)
        assert entry is not None and entry.replicas is not None
        return model.set_target(key, replicas=entry.replicas + 1, template=template(chosen, shape))

    found.run("scale-up of one spread", scale_up, coordinator)
    changed = shape.clusters // 2
    found.run("capacity shrink", lambda: report_pools(coordinator, changed, shrunk(changed, shape)),
              coordinator)
    found.run("capacity grow", lambda: report_pools(coordinator, changed, pools(changed, shape, change=10)),
              coordinator)
    taint = common.Taint(key="fedspread.io/maintenance", effect="NoExecute")
    found.run("cordon (NoExecute)", lambda: model.upsert_cluster(
        cluster_name(changed), labels=labels(changed, shape), taints=[taint]), coordinator)
    if scale_samples:
        found.timings["single-spread scales"] = scale_latencies(coordinator, keys, shape, count=scale_samples)
    return found


def scale_latencies(coordinator: facade.Coordinator, keys: list[str], shape: Shape, *,
                    count: int) -> dict[str, Any]:
    """`count` scale events of one spread each (spreads spaced through the keys, one replica more,
    then one less), each timed from before the coordinator's lock is taken until `publish` returns,
    10 ms apart: the coordinator's own share of a single-spread event, percentiles over all."""
    taken: list[float] = []
    for sample in range(count):
        index = sample * 37 % len(keys)
        entry = coordinator.world.spread(keys[index])
        assert entry is not None and entry.replicas is not None
        step = 1 if sample % 2 == 0 else -1
        started = time.perf_counter()
        with coordinator.lock:
            affected = coordinator.world.set_target(keys[index], replicas=max(0, entry.replicas + step),
                                                    template=template(index, shape))
            coordinator.publish(affected)
        taken.append(time.perf_counter() - started)
        time.sleep(0.01)
    return {"n": count, **{f"{name}_ms": admission_stats.milliseconds(taken, pct)
                           for name, pct in (("p50", 50), ("p99", 99), ("max", 100))}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_events",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--shape", type=parse_shape,
                        default=Shape(spreads=1_000, clusters=100, per_spread=10),
                        help="the federation, as bench.placement takes it (bench.placement_world.Shape as "
                             "JSON), e.g. '{\"spreads\": 10000, \"clusters\": 100, \"per_spread\": 10}' "
                             "(default 1,000 spreads x 100 clusters, 10 per spread)")
    parser.add_argument("--top", type=int, default=25, help="functions listed per event (default 25)")
    parser.add_argument("--json", action="store_true",
                        help="time the events without cProfile and print one JSON line of the timings "
                             "(wall and CPU seconds, spreads affected and placed, and the placing "
                             "thread's CPU in the clusters' ledger folds)")
    parser.add_argument("--backend", choices=placement_backends.BACKENDS, default="local",
                        help="place in this process (local, the default) or on a local Ray's shard "
                             "actors as bench.placement does (ray; only rounds of at least "
                             "shards.RAY_ROUND_MIN_SPREADS spreads go to them)")
    parser.add_argument("--output", type=pathlib.Path,
                        help="with --json, also write the JSON line to this file (e.g. under bench/results)")
    parser.add_argument("--streams", action="store_true",
                        help="attach every cluster's agent (nothing reads its messages), so that each event "
                             "also builds, compares and queues the agents' messages")
    parser.add_argument("--scale-samples", type=int, default=0, metavar="N",
                        help="after the events, time N scale events of single spreads (one replica more, "
                             "then less) and report their p50, p99 and max (default 0: none)")
    parser.add_argument("--interpreter-gc", action="store_true",
                        help="keep the interpreter's garbage-collector thresholds (by default this process "
                             "runs with federation.collector's, as `fedspread coordinator` does)")
    parser.add_argument("--no-freeze", action="store_true",
                        help="leave what a large round leaves alive in the collector's generations (by "
                             "default it is frozen for a while, as `fedspread coordinator` does: "
                             "federation.collector): the before arm of that change")
    parser.add_argument("--round-parts", action="store_true",
                        help="with --json, also report the placing thread's CPU in each part of a round "
                             "(requests built and packed, answers read, placements stored, charges "
                             "settled, message inputs read, messages delivered: bench.fold_time.ROUND_PARTS)")
    run.add_replace_option(parser)
    arguments = list(sys.argv[1:] if argv is None else argv)
    options = parser.parse_args(arguments)
    if (refused := run.kept_reference(options.output, replace=options.replace)) is not None:
        parser.error(refused)
    at_start = run.load()
    shape: Shape = options.shape
    if shape.spreads < 1 or shape.clusters < 1:
        parser.error("the shape needs at least 1 spread and 1 cluster")
    if options.scale_samples < 0:
        parser.error("--scale-samples is a count: 0 or more")
    if options.output is not None and not options.json:
        parser.error("--output writes the --json line: give --json too")
    if options.round_parts and not options.json:
        parser.error("--round-parts times the parts without the profiler: give --json too")
    before = gc.get_threshold()
    if not options.interpreter_gc:
        collector.tune()
    used = gc.get_threshold()
    freezing = collector.freeze_rounds(not options.no_freeze)
    placing = placement_backends.Backend(options.backend)
    try:
        found = measure(shape, profile=not options.json, backend=placing.backend, streams=options.streams,
                        scale_samples=options.scale_samples, round_parts=options.round_parts)
    finally:
        placing.close()
        gc.set_threshold(*before)  # as it was: main() also runs inside the tests' process
        collector.freeze_rounds(freezing)
    if options.json:
        line = json.dumps({"command": shlex.join(["python", "-m", "bench.profile_events", *arguments]),
                           "commit": run.commit(),
                           "load_average": {"at_start": at_start, "at_end": run.load()},
                           **shape.describe(), "backend": options.backend, "streams": options.streams,
                           "gc_thresholds": list(used), "freeze_rounds": not options.no_freeze,
                           **found.timings})
        print(line)
        if options.output is not None:
            options.output.write_text(line + "\n")
    else:
        print(found.report(top=options.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
