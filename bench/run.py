"""`python -m bench.run [--quick]`: run every benchmark, write bench/results/latest.json.

Why one runner: the results file is the contract (bench/README.md names its keys), every benchmark runs
in the same process and on the same machine as its baseline, and a reader needs the machine and
the time next to the numbers. Each benchmark module exposes `run(*, quick, report) -> result`;
a benchmark that fails is recorded with its error instead of losing the others' results.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import pathlib
import platform
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
BENCHMARKS = ("inventory", "placement", "failover", "admission", "accuracy")


def machine() -> dict[str, Any]:
    """Cores, memory and software of this machine."""
    pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    return {"cores": os.cpu_count(), "memory_gb": round(pages * page_size / 2**30, 1),
            "python": platform.python_version(), "platform": platform.platform()}


def say(line: str) -> None:
    print(f"[bench] {line}", file=sys.stderr, flush=True)


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def run_all(
    *, quick: bool, only: tuple[str, ...] = BENCHMARKS, report: Callable[[str], None] = say
) -> dict[str, Any]:
    """Every benchmark of `only`, in order; the results document."""
    mode = "quick" if quick else "full"
    results: dict[str, Any] = {"mode": mode, "machine": machine(), "started_at": now()}
    load_at_start = [round(v, 2) for v in os.getloadavg()]  # other work on the machine skews latencies
    for name in only:
        module = importlib.import_module(f"bench.{name}")
        report(f"{name}: starting")
        started = time.monotonic()
        try:
            results[name] = module.run(quick=quick, report=lambda line, n=name: report(f"{n}: {line}"))
        except Exception as error:  # one benchmark failing must not lose the others' numbers
            traceback.print_exc()
            results[name] = {"error": f"{type(error).__name__}: {error}"}
        report(f"{name}: done in {time.monotonic() - started:.0f} s")
    results["finished_at"] = now()
    results["load_average"] = {"at_start": load_at_start, "at_end": [round(v, 2) for v in os.getloadavg()]}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (make bench-quick, < 10 minutes)")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS),
                        help="run only these benchmarks")
    parser.add_argument("--output", type=pathlib.Path, default=RESULTS / "latest.json",
                        help="where to write the results (default: bench/results/latest.json)")
    options = parser.parse_args(argv)
    results = run_all(quick=options.quick, only=tuple(options.only))
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    say(f"wrote {options.output}")
    return 1 if any(isinstance(results.get(n), dict) and "error" in results[n] for n in options.only) else 0


if __name__ == "__main__":
    sys.exit(main())
