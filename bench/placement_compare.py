"""One placement point, two or more ways, several runs each, in one run: in-process against Ray,
or fed in process against through a hub.

Why apart from the sweep (`bench.run --only placement`): the Ray question is asked at one size
(the goal's, 10k spreads x 1,000 clusters), and its answer needs both backends measured on the
same machine in the same hour, several times each, with the order alternating from run to run
(run 1: local then ray; run 2: ray then local; ...) so that a machine that gets busier or quieter
over the run does not favour one side. The same holds for what the hub and the status pass cost:
`hub` is the point run through a hub apiserver (`bench.placement_hub`), to compare with `local`.
Each run is a fresh coordinator process
(`placement.run_one`), every agent stream live; each backend's runs are combined as the sweep
combines a point's (`placement_runs.combine`: the median run with min-max, every run kept). The
document names its command, commit, machine and load, like `bench.run`'s.

    python -m bench.placement_compare --shape '{"spreads": 10000, "clusters": 1000}' --runs 3 \\
        --output bench/results/reference-placement-ray.json
    python -m bench.placement_compare --shape '{"spreads": 1000, "clusters": 1000, "per_spread": 10}' \\
        --variants local hub --runs 3 --output bench/results/reference-placement-hub.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

from bench import placement, placement_backends, placement_runs, placement_world, run

HUB = "hub"
INTERPRETER_GC = "local-interpreter-gc"
UNBATCHED = "local-unbatched"
VARIANTS = (*placement.BACKENDS, HUB, INTERPRETER_GC, UNBATCHED)
"""Each backend as the sweep runs it; `hub`: the in-process backend through a hub apiserver;
`local-interpreter-gc`: the in-process backend with the interpreter's garbage-collector thresholds
(the before arm of `federation.collector`); `local-unbatched`: the in-process backend with stand-in
agents that neither read nor send message batches (the before arm of batches). Besides these, Ray
with other actor counts: `ray-N`, `ray-NxM` (`placement_backends.ray_actors`)."""


def variant(text: str) -> str:
    """A `--variants` name: one of `VARIANTS`, or a Ray backend with its actor counts."""
    if text in VARIANTS:
        return text
    try:
        placement_backends.ray_actors(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a variant: {', '.join(VARIANTS)}, or ray-N / ray-NxM (N SpreadShard and "
            f"M ClusterShard actors, e.g. ray-8 or ray-8x2)") from None
    return text


def compare(shape: placement_world.Shape, *, runs: int, backends: Sequence[str],
            report: Callable[[str], None] = run.say) -> dict[str, list[dict[str, Any]]]:
    """`runs` runs of `shape` each of the ways `backends` names (`VARIANTS`), the order rotating
    from run to run; per way its runs' records (a failed run is recorded with its error, the
    others still count)."""
    records: dict[str, list[dict[str, Any]]] = {backend: [] for backend in backends}
    for number in range(runs):
        turn = number % len(backends)
        for backend in [*backends[turn:], *backends[:turn]]:
            report(f"{json.dumps(shape.describe())}, {backend}, run {number + 1}/{runs}")
            try:
                placing = "local" if backend in (HUB, INTERPRETER_GC, UNBATCHED) else backend
                found = placement.run_one(shape, backend=placing, hub=backend == HUB,
                                          interpreter_gc=backend == INTERPRETER_GC,
                                          unbatched=backend == UNBATCHED)
                record = {"varied": "compare", **found, "variant": backend}
            except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as error:
                record = {"varied": "compare", **shape.describe(), "variant": backend, "backend": backend,
                          "error": f"{type(error).__name__}: {str(error)[-500:]}"}
            report(json.dumps({k: record.get(k) for k in (
                "variant", "full_s", "delivered_s", "placed_s", "status_s", "round_replaced", "event_p99_ms",
                "error")}))
            records[backend].append(record)
    return records


def document(shape: placement_world.Shape, *, runs: int, backends: Sequence[str],
             argv: Sequence[str]) -> dict[str, Any]:
    """The comparison as a results document: per backend the combined point and every run."""
    found: dict[str, Any] = {"mode": "compare", "machine": run.machine(), "started_at": run.now(),
                             "command": shlex.join(["python", "-m", "bench.placement_compare", *argv]),
                             "commit": run.commit(), "shape": shape.describe(), "runs_per_backend": runs,
                             "order": "rotating: run i starts with backend i mod len(backends)"}
    at_start = run.load()
    records = compare(shape, runs=runs, backends=backends)
    found["points"] = {backend: placement_runs.combine(rows) for backend, rows in records.items()}
    found["finished_at"] = run.now()
    found["load_average"] = {"at_start": at_start, "at_end": run.load()}
    return found


def main(argv: list[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m bench.placement_compare",
        description="Measure one placement point two or more ways (in-process, on a local Ray's "
                    "shard actors, or through a hub apiserver), several runs each with the order "
                    "rotating, and write one results document (each way's median run with min-max, "
                    "every run kept).")
    parser.add_argument("--shape", type=placement_world.parse_shape, default=placement.QUICK_BASE,
                        help="the federation (bench.placement_world.Shape as JSON), e.g. "
                             '\'{"spreads": 10000, "clusters": 1000}\'')
    parser.add_argument("--runs", type=int, default=3, help="runs per backend (default 3)")
    parser.add_argument("--variants", "--backends", dest="backends", nargs="+", type=variant,
                        default=list(placement.BACKENDS), metavar="VARIANT",
                        help="the ways to compare (default: local ray): local, the in-process "
                             "backend; ray, a local Ray's shard actors; hub, the in-process backend with "
                             "the whole coordinator process against a hub apiserver (spreads created "
                             "through its API, statuses written); local-interpreter-gc, the in-process "
                             "backend with the interpreter's garbage-collector thresholds instead of "
                             "federation.collector's (the before arm of that change); local-unbatched, the "
                             "in-process backend with stand-in agents that read and send no message batches; "
                             "ray-N or ray-NxM, Ray with N SpreadShard actors (and M ClusterShard actors, "
                             "1 unless given), for a machine with more cores")
    parser.add_argument("--output", type=pathlib.Path, default=run.RESULTS / "latest-compare.json",
                        help="where to write the document (default: bench/results/latest-compare.json)")
    run.add_replace_option(parser)
    options = parser.parse_args(arguments)
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    if (refused := run.kept_reference(options.output, replace=options.replace)) is not None:
        parser.error(refused)
    found = document(options.shape, runs=options.runs, backends=options.backends, argv=arguments)
    options.output.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    run.say(f"written to {options.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
