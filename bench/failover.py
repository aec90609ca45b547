"""Quota re-convergence after a failover: how long until every survivor holds its new quotas.

Named for what it measures: from the tick that declares a cluster lost to the surviving agents'
in-memory quotas. Detection (`clusterLostSeconds`, a setting) is not in it, and neither are the
replacement pods starting (the members' controllers act after the quotas arrive).

Why this shape: failover is the coordinator's promise with the most moving parts — the tick that
declares a cluster lost, the placement of every affected spread, the assignment messages built and
queued per stream, gRPC, and each agent's link decoding and applying them. The goal (<= 2 s for
1,000 spreads over 20 clusters) is about all of it, so everything but the hub runs for real in one
process (`loopback_federation`: the coordinator on a gRPC server on loopback, one real agent link
per cluster, spreads of four kinds); this module times the failover and profiles it.

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
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench import loopback_federation

GOAL_S = 2.0
Size = loopback_federation.Size
"""How many spreads over how many member clusters (as callers of this benchmark know it)."""

FULL = Size(spreads=1_000, clusters=20)
QUICK = Size(spreads=200, clusters=10)


def run(*, quick: bool, report: Callable[[str], None]) -> dict[str, Any]:
    """The runner's entry point (bench/run.py)."""
    return measure(QUICK if quick else FULL, report=report)


def measure(
    size: Size, *, report: Callable[[str], None], victim: str | None = None, profile: bool = False,
) -> dict[str, Any]:
    """Place `size`'s spreads, silence one agent, time the failover until every survivor holds its quotas.

    `victim` defaults to the cluster holding the most replicas. With `profile`, every thread is
    sampled during the tick and the delivery, and the heaviest functions of each are reported.
    """
    with loopback_federation.Federation(size) as fed:
        started = time.perf_counter()
        fed.connect()
        report(f"{size.clusters} agents connected in {time.perf_counter() - started:.1f} s")
        place_s = fed.place()
        names = loopback_federation.cluster_names(size)
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
        loopback_federation.wait(lambda: lost_name not in fed.coordinator.connected(),
                                 what=f"{lost_name}'s stream to end")
        lost_seconds = loopback_federation.LOST_SECONDS
        first_step = lost_seconds * 0.6
        fed.clock.advance(first_step)  # survivors never look silent for longer than this
        fed.hear(survivors)
        fed.clock.advance(lost_seconds - first_step + 1)  # the victim now has been: > LOST_SECONDS
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
            "lost_cluster": lost_name, "lost_after_s": lost_seconds, "initial_place_s": round(place_s, 2),
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

    IDLE = ("threading.py", "queue.py", "selectors.py", "_channel.py", "_server.py", "failover.py",
            "loopback_federation.py")
    GENERIC = ("threading.py:", "thread.py:_worker", "<frozen runpy>", "bench/failover.py:",
               "bench/loopback_federation.py:")
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
