"""Where Ray starts to pay: rounds of N spreads placed in-process and on the Ray shards, timed.

Why this benchmark: a round's first answers can be computed in the coordinator's process or by the
`SpreadShard` actors (`loop.recompute`'s `place_batch`); both give the same answer, but a Ray round
trip (pickling every request, one remote call per shard, pickling the answers back) has a fixed
cost that only a round of enough spreads earns back. `shards.RAY_ROUND_MIN_SPREADS` is the round
size from which the coordinator asks the shards; this benchmark measures it.

How: two identical worlds (bench/placement_world.py's federation: clusters in regions, Adaptive
spreads with a capped home cluster and their region; by default 200 clusters, 20 per spread) with
every spread placed once. Then for each round size N (2 … 2,048), each repetition scales the same
N spreads (spaced over the federation) one replica up or back down, alternately, in both worlds and
times `loop.recompute(world, keys)` in each: in-process (`place_batch=None`) in one, on a local Ray's
`RayBackend` with the coordinator's default 2 shard actors (`parallel_from=2`: every round goes to
Ray) in the other; the order of the two alternates between repetitions, and both answers must be
equal (`answers_equal`). Per N: every sample, the median with min-max, the spreads the round's
contended pass placed again (`replaced`, in-process; the same on Ray), the load average before and
after, Ray's median over in-process's (`ray_over_local`). The crossover is the smallest N from
which Ray's median is below in-process's at that N and at every larger N measured (null when Ray
is never faster).

One machine cannot show Ray across nodes, and this machine's cores are shared: the record says
the load and the command, and a figure from a loaded machine is provisional.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench import placement_backends, placement_world, profile_events
from bench.placement_world import Shape
from federation import collector
from federation.coordinator import shards
from federation.coordinator.model import loop, world
from federation.coordinator.wire import inbound
from federation.rpc import agent_pb2

SIZES = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
QUICK_SIZES = (2, 4, 8, 16, 32)
REPETITIONS, QUICK_REPETITIONS = 7, 3
SHAPE = Shape(spreads=max(SIZES), clusters=200, per_spread=20, pools=2)
QUICK_SHAPE = Shape(spreads=max(QUICK_SIZES), clusters=50, per_spread=25, pools=2)
NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
"""The worlds' fixed clock: no cluster is ever lost, no mark or cooldown expires mid-run."""


def build(shape: Shape) -> world.World:
    """A world with every cluster reported and every spread placed once, in-process."""
    model = world.World(lambda: NOW)
    for index in range(shape.clusters):
        name = placement_world.cluster_name(index)
        model.upsert_cluster(name, labels=profile_events.labels(index, shape))
        report = agent_pb2.InventoryReport(full=True, node_pools=placement_world.pools(index, shape))
        model.inventory(name, list(inbound.node_pools(report).values()))
        model.heartbeat(name)
    loop.recompute(model, placement_world.add_spreads(model, shape), now=NOW)
    return model


def chosen(size: int, shape: Shape) -> list[int]:
    """The indices of a round's `size` spreads, spaced evenly over the federation."""
    return sorted({k * shape.spreads // size for k in range(size)})


def scale(models: list[world.World], indices: list[int], shape: Shape, *, more: int) -> list[str]:
    """Spreads `indices` scaled to their replicas plus `more` in every world; their keys."""
    keys = []
    for index in indices:
        key = placement_world.spread(index, shape).key
        for model in models:
            model.set_target(key, replicas=placement_world.replicas_of(index) + more,
                             template=placement_world.template(index, shape))
        keys.append(key)
    return keys


def timed(
    model: world.World, keys: list[str], *, place_batch: loop.PlaceBatch | None,
) -> tuple[float, loop.Round]:
    """One round of `keys` (every round of two or more on `place_batch` when given), in ms."""
    started = time.perf_counter()
    found = loop.recompute(model, keys, now=NOW, place_batch=place_batch, parallel_from=2)
    return (time.perf_counter() - started) * 1000, found


def summary(samples: list[float]) -> dict[str, Any]:
    return {"median_ms": round(statistics.median(samples), 3), "min_ms": round(min(samples), 3),
            "max_ms": round(max(samples), 3), "samples_ms": [round(s, 3) for s in samples]}


def crossover(rows: list[dict[str, Any]]) -> int | None:
    """The smallest round size from which Ray's median is below in-process's at every size measured."""
    found: int | None = None
    for row in reversed(rows):
        if row["ray"]["median_ms"] < row["local"]["median_ms"]:
            found = row["spreads"]
        else:
            break
    return found


def load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def measure(*, sizes: tuple[int, ...], repetitions: int, shape: Shape,
            report: Callable[[str], None]) -> dict[str, Any]:
    """Every round size, both backends, `repetitions` times each; the record (see the module)."""
    at_start = load()
    report(f"building two worlds of {shape.spreads} spreads x {shape.clusters} clusters")
    models = [build(shape), build(shape)]
    placing = placement_backends.Backend("ray")
    try:
        batch = placing.backend.place_batch
        warm = scale(models, chosen(2, shape), shape, more=1)  # first calls import and pickle: not timed
        timed(models[0], warm, place_batch=None)
        timed(models[1], warm, place_batch=batch)
        rows = []
        for size in sizes:
            indices, before = chosen(size, shape), load()
            local: list[float] = []
            ray: list[float] = []
            equal = True
            replaced: list[int] = []
            for number in range(repetitions):
                keys = scale(models, indices, shape, more=number % 2)
                order = [(0, None), (1, batch)] if number % 2 == 0 else [(1, batch), (0, None)]
                rounds: dict[int, loop.Round] = {}
                for which, place_batch in order:
                    elapsed, rounds[which] = timed(models[which], keys, place_batch=place_batch)
                    (local if which == 0 else ray).append(elapsed)
                equal = equal and rounds[0].placements == rounds[1].placements
                replaced.append(rounds[0].replaced)
                if rounds[1].fell_back:
                    raise RuntimeError(f"the Ray round of {size} fell back: {rounds[1].fell_back}")
            row: dict[str, Any] = {"spreads": len(indices), "local": summary(local), "ray": summary(ray),
                                   "ray_over_local": round(statistics.median(ray) / statistics.median(local),
                                                           2),
                                   "answers_equal": equal, "replaced": replaced,
                                   "load": {"at_start": before, "at_end": load()}}
            report(f"{len(indices)} spreads: in-process {row['local']['median_ms']} ms, "
                   f"Ray {row['ray']['median_ms']} ms (medians of {repetitions}; placed again {replaced})")
            rows.append(row)
        described = placing.describe()
    finally:
        placing.close()
    return {"shape": shape.describe(), "repetitions": repetitions, "rows": rows,
            "crossover_spreads": crossover(rows), "ray": described,
            "ray_round_min_spreads": shards.RAY_ROUND_MIN_SPREADS,
            "load": {"at_start": at_start, "at_end": load()}}


def run(*, quick: bool, report: Callable[[str], None]) -> dict[str, Any]:
    """bench/run.py's entry: the default or the quick size."""
    if quick:
        return measure(sizes=QUICK_SIZES, repetitions=QUICK_REPETITIONS, shape=QUICK_SHAPE, report=report)
    return measure(sizes=SIZES, repetitions=REPETITIONS, shape=SHAPE, report=report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.placement_crossover",
        description="Time rounds of N spreads placed in the coordinator's process and on a local Ray's "
                    "shard actors (2, the coordinator's default), and report the smallest N from which "
                    "Ray is faster: the figure behind shards.RAY_ROUND_MIN_SPREADS. Prints the "
                    "record as JSON (and writes it with --output); progress goes to stderr.")
    parser.add_argument("--quick", action="store_true",
                        help=f"small: rounds of {', '.join(map(str, QUICK_SIZES))} spreads on "
                             f"{QUICK_SHAPE.clusters} clusters, {QUICK_REPETITIONS} repetitions (about a "
                             f"minute); default: rounds of {', '.join(map(str, SIZES))} on {SHAPE.clusters} "
                             f"clusters, {REPETITIONS} repetitions (a few minutes)")
    parser.add_argument("--repetitions", type=int, default=None,
                        help="repetitions per round size and backend (default 7, quick 3)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="round sizes (spreads per round) to time, instead of the default's or --quick's")
    parser.add_argument("--output", default=None, help="also write the record to this JSON file")
    parser.add_argument("--note", default="", help="a sentence stored with the record (e.g. why it ran)")
    from bench import run as runner

    runner.add_replace_option(parser)
    options = parser.parse_args(argv)
    if (refused := runner.kept_reference(options.output, replace=options.replace)) is not None:
        parser.error(refused)
    collector.tune()  # the coordinator's thresholds, as `fedspread coordinator` runs (the actors set theirs)
    shape, sizes = (QUICK_SHAPE, QUICK_SIZES) if options.quick else (SHAPE, SIZES)
    if options.sizes:
        sizes = tuple(sorted(set(options.sizes)))
        shape = dataclasses.replace(shape, spreads=max(shape.spreads, *sizes))
    repetitions = options.repetitions or (QUICK_REPETITIONS if options.quick else REPETITIONS)
    started, commit = runner.now(), runner.commit()  # the code that runs: edits during the run do not count
    found = measure(sizes=sizes, repetitions=repetitions, shape=shape,
                    report=lambda line: print(f"[crossover] {line}", file=sys.stderr, flush=True))
    record = runner.record_of("bench.placement_crossover", argv or sys.argv[1:], started=started,
                              commit=commit, found={"note": options.note, **found})
    runner.publish(record, options.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
