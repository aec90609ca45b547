"""Inventory benchmark: the agent's pools, memory and capacity fit on a big member.

Why these numbers: at Karmada's estimator scale (5,000 nodes, 100,000 pods) Karmada's agent holds
266 MiB and its estimator answers "how many more replicas fit" in 11.7-14.2 ms per call.
fedspread's agent keeps a compact watch-fed cache instead of client models, folds nodes into at
most 100 pools, and the coordinator fits a template on pools; this measures whether that design
keeps its promise (goals: <= 100 pools, <= 200 MB for the agent's whole process, fit p99 <= 5 ms),
on the real code paths and without a cluster:

* **Objects** (`synthetic_cluster`, `synthetic_objects`): realistic Node, Pod and Deployment JSON,
  synthesized page by page and served by a fake lister shaped like the generated client's, so
  `agents.cache.store` runs unchanged. No kube-apiserver is involved.
* **Pools, memory and fit** (`cache_measurement`, in a fresh interpreter that this module starts
  as `python -m bench.inventory`): the pools reported, and how many exact grouping would make; the
  process's whole RSS after the cache's sync and the pool build; the pool build's time; p50 and
  p99 of the time to answer how many more pods of one template fit on the pools, as the
  coordinator answers it, and that answer against the exact pools' (bounded pools state less room).

`pools`, `rss_mb` and `fit_p99_ms` are reported against the goals, never asserted: a benchmark
records.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

from bench import cache_measurement, synthetic_cluster, synthetic_objects

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOALS = {"pools": 100, "rss_mb": 200.0, "fit_p99_ms": 5.0}
KARMADA = {"agent_rss_mib": 266, "estimator_ms_per_op": [11.7, 14.2]}

Size = synthetic_cluster.Size
plan = synthetic_cluster.plan
node_json = synthetic_objects.node_json
pod_json = synthetic_objects.pod_json
"""The synthesis's names, as callers of this benchmark (and its tests) know them."""

FULL = Size(nodes=5_000, pods=100_000)
QUICK = Size(nodes=1_000, pods=20_000)


def run(*, quick: bool, report: Callable[[str], None]) -> dict[str, Any]:
    """The runner's entry point (bench/run.py): the full or quick size, in fresh interpreters."""
    return measure(QUICK if quick else FULL, report=report)


def measure(
    size: Size, *, report: Callable[[str], None], fit_runs: int = 500, pool_runs: int = 7,
    traced: bool = False,
) -> dict[str, Any]:
    """Measure `size` in a fresh interpreter (and once more under tracemalloc if `traced`: slow)."""
    report(f"{size.nodes} nodes, {size.pods} pods; RSS in a fresh interpreter")
    result = _child(size, report=report, extra=["--fit-runs", str(fit_runs), "--pool-runs", str(pool_runs)])
    if traced:
        report("again under tracemalloc (Python heap only, a cross-check)")
        result["traced_mb"] = _child(size, report=report, extra=["--tracemalloc"])["traced_mb"]
    result["goals"] = dict(GOALS)
    result["karmada"] = dict(KARMADA)
    result["within_goals"] = {k: result[k] <= goal for k, goal in GOALS.items()}
    report(f"{result['pools']} pools (goal <= {GOALS['pools']}; exact grouping: {result['pools_exact']}) "
           f"built in {result['pool_build_ms']} ms; rss {result['rss_mb']} MB "
           f"(goal <= {GOALS['rss_mb']:g}); fit p50 {result['fit_p50_ms']} ms, p99 {result['fit_p99_ms']} ms "
           f"(goal <= {GOALS['fit_p99_ms']:g}; exact pools p99 {result['fit_exact_p99_ms']} ms); the "
           f"template fits {result['fit_pods']} pods, {result['fit_pods_exact']} on exact pools")
    return result


def _child(size: Size, *, report: Callable[[str], None], extra: Sequence[str]) -> dict[str, Any]:
    """Run `python -m bench.inventory` for `size`; pass its progress to `report`, return its result."""
    command = [sys.executable, "-m", "bench.inventory", "--nodes", str(size.nodes), "--pods", str(size.pods),
               *extra]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    result: dict[str, Any] | None = None
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            message = json.loads(line)
            if "report" in message:
                report(message["report"])
            else:
                result = message["result"]
    if child.returncode != 0 or result is None:
        raise RuntimeError(f"inventory measurement failed (exit {child.returncode})")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """The fresh interpreter's side: measure, print progress and the result as JSON lines."""
    parser = argparse.ArgumentParser(prog="python -m bench.inventory", description=__doc__)
    parser.add_argument("--nodes", type=int, default=QUICK.nodes)
    parser.add_argument("--pods", type=int, default=QUICK.pods)
    parser.add_argument("--fit-runs", type=int, default=500)
    parser.add_argument("--pool-runs", type=int, default=7)
    parser.add_argument("--tracemalloc", action="store_true", help="measure the Python heap instead")
    options = parser.parse_args(argv)

    def emit(line: str) -> None:
        print(json.dumps({"report": line}), flush=True)

    result = cache_measurement.child_measure(
        Size(options.nodes, options.pods), emit=emit, fit_runs=options.fit_runs,
        pool_runs=options.pool_runs, traced=options.tracemalloc)
    print(json.dumps({"result": result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
