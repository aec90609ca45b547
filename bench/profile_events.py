"""Where a coordinator event's time goes: the placement benchmark's world, profiled event by event.

Why apart from bench/placement.py: that benchmark measures the coordinator end to end (gRPC
streams, stand-in agents in another process), which says *how long* an event takes but not *where*
the time goes. This script builds the same world — the same spreads (`placement.spread`), node
pools (`placement.pools`), template and cluster names, imported from it — straight into a real
`facade.Coordinator` with no agent streams (as `placement._report_directly` feeds the clusters
beyond its stream limit), so placement and the World's bookkeeping are all that runs. Each event
is timed on its own under cProfile:

- the full round: `publish(every spread)`;
- one spread's scale-up: `set_target(replicas + 1)`, then `publish([key])`;
- one cluster's capacity shrink, then grow back: `World.inventory` with fewer, then more nodes,
  then `publish(affected)`;
- a cordon: a NoExecute taint on one cluster's MemberCluster (`upsert_cluster`), then
  `publish(affected)` — every spread with replicas there moves them.

It prints, per event, the wall seconds, the spreads placed, and the top functions by cumulative
time; `--json` times the same events without the profiler (whose overhead is about half again)
and prints one JSON line (for bench/README.md).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import json
import pstats
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from bench.placement import REGIONS, TEMPLATE, cluster_name, pools, spread
from federation.api import common, names
from federation.coordinator import facade
from federation.coordinator.model import world
from federation.coordinator.wire import inbound
from federation.rpc import agent_pb2, common_pb2


def build(*, spreads: int, clusters: int) -> tuple[facade.Coordinator, list[str]]:
    """A coordinator with `clusters` reported clusters and `spreads` spreads with targets, unplaced."""
    clock = lambda: datetime.datetime.now(datetime.UTC)  # noqa: E731
    model = world.World(clock)
    coordinator = facade.Coordinator(model, clock=clock)
    with coordinator.lock:
        for index in range(clusters):
            report_pools(coordinator, index, pools(index))
            model.upsert_cluster(cluster_name(index), labels=labels(index))
            model.heartbeat(cluster_name(index))
        keys = []
        for index in range(spreads):
            item = spread(index, clusters=clusters)
            model.upsert_spread(item)
            model.set_target(item.key, replicas=12, template=TEMPLATE)
            keys.append(item.key)
    return coordinator, keys


def labels(index: int) -> dict[str, str]:
    """Cluster `index`'s topology labels, as bench/placement.py's agents say them."""
    return {names.REGION_LABEL: f"r{index % REGIONS}"}


def report_pools(coordinator: facade.Coordinator, index: int, found: list[common_pb2.NodePool]) -> set[str]:
    """Cluster `index`'s agent reports `found` (a full inventory); the spreads it affects."""
    report = agent_pb2.InventoryReport(full=True, node_pools=found)
    latest = list(inbound.node_pools(report).values())
    coordinator.backend.report_inventory(cluster_name(index), latest)
    return coordinator.world.inventory(cluster_name(index), latest)


def shrunk(index: int) -> list[common_pb2.NodePool]:
    """Cluster `index`'s pools with half its general nodes gone (a capacity loss)."""
    found = pools(index)
    found[0].count //= 2
    return found


class Profiled:
    """Runs events under cProfile, keeping each one's wall time and profile."""

    def __init__(self, *, profile: bool = True) -> None:
        self.profile = profile
        self.timings: dict[str, dict[str, Any]] = {}
        self.profiles: dict[str, pstats.Stats] = {}

    def run(self, label: str, event: Callable[[], Iterable[str]], coordinator: facade.Coordinator) -> None:
        """Time `event` (returning the keys to publish) and the publish of its keys."""
        profile = cProfile.Profile()
        with coordinator.lock:
            cpu, started = time.process_time(), time.perf_counter()
            if self.profile:
                profile.enable()
            affected = list(event())
            result = coordinator.publish(affected)
            profile.disable()
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        self.timings[label] = {"s": round(wall, 4), "cpu_s": round(cpu, 4), "affected": len(affected),
                               "placed": len(result.placements)}
        if self.profile:
            self.profiles[label] = pstats.Stats(profile)

    def report(self, *, top: int) -> str:
        """Every event's time and its `top` functions by cumulative time."""
        out = io.StringIO()
        for label, timing in self.timings.items():
            out.write(f"=== {label}: {timing['s']:.3f} s, {timing['affected']} affected, "
                      f"{timing['placed']} placed\n")
            stats = self.profiles[label]
            stats.stream = out  # type: ignore[attr-defined]
            stats.sort_stats("cumulative").print_stats(top)
        return out.getvalue()


def measure(*, spreads: int, clusters: int, profile: bool = True) -> Profiled:
    """Build the world and time each event once, in order (under cProfile with `profile`)."""
    coordinator, keys = build(spreads=spreads, clusters=clusters)
    model = coordinator.world
    found = Profiled(profile=profile)
    found.run("full round", lambda: keys, coordinator)
    key = keys[len(keys) // 2]

    def scale_up() -> set[str]:
        entry = model.spread(key)
        assert entry is not None and entry.replicas is not None
        return model.set_target(key, replicas=entry.replicas + 1, template=TEMPLATE)

    found.run("scale-up of one spread", scale_up, coordinator)
    changed = clusters // 2
    found.run("capacity shrink", lambda: report_pools(coordinator, changed, shrunk(changed)), coordinator)
    found.run("capacity grow", lambda: report_pools(coordinator, changed, pools(changed, grown=True)),
              coordinator)
    taint = common.Taint(key="fedspread.io/maintenance", effect="NoExecute")
    found.run("cordon (NoExecute)", lambda: model.upsert_cluster(
        cluster_name(changed), labels=labels(changed), taints=[taint]), coordinator)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_events",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--spreads", type=int, default=1_000, help="spreads in the world (default 1000)")
    parser.add_argument("--clusters", type=int, default=100, help="member clusters (default 100)")
    parser.add_argument("--top", type=int, default=25, help="functions listed per event (default 25)")
    parser.add_argument("--json", action="store_true",
                        help="time the events without cProfile and print one JSON line of the timings "
                             "(wall and CPU seconds, spreads affected and placed)")
    options = parser.parse_args(argv)
    if options.spreads < 1 or options.clusters < 1:
        parser.error("--spreads and --clusters must be at least 1")
    found = measure(spreads=options.spreads, clusters=options.clusters, profile=not options.json)
    if options.json:
        print(json.dumps({"spreads": options.spreads, "clusters": options.clusters, **found.timings}))
    else:
        print(found.report(top=options.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
