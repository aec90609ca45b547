"""`python -m bench.run [--quick]`: run every benchmark, write bench/results/latest.json.

Why one runner: the results file is the contract (bench/README.md names its keys), every benchmark runs
in the same process and on the same machine as its baseline, and a reader needs the machine and
the time next to the numbers. Each benchmark module exposes `run(*, quick, report) -> result`;
a benchmark that fails is recorded with its error instead of losing the others' results.

Every result states the load average of the machine at its start and end (`load`; per row for a
benchmark that returns rows, unless the benchmark measured each row's own), and the document names
the command and the commit that produced it: a figure without them cannot be reproduced.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import pathlib
import platform
import shlex
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
BENCHMARKS = ("inventory", "placement", "placement_crossover", "failover", "recovery", "admission",
              "accuracy", "autoscaling")


def machine() -> dict[str, Any]:
    """Cores, memory and software of this machine."""
    pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    return {"cores": os.cpu_count(), "memory_gb": round(pages * page_size / 2**30, 1),
            "python": platform.python_version(), "platform": platform.platform()}


def load() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded."""
    return [round(v, 2) for v in os.getloadavg()]


def commit() -> str:
    """The git commit of the working tree (with `+dirty` when it has changes), or "unknown"."""
    root = pathlib.Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):  # a copy without git: the commit it was made from
        return os.environ.get("FEDSPREAD_BENCH_COMMIT", "unknown")  # (`bench.device_kit`), if said
    return head + ("+dirty" if dirty else "")


def with_load(result: Any, *, at_start: list[float], at_end: list[float]) -> Any:
    """`result` with `load` (start and end) on it, or on each of its rows that lacks its own."""
    stamp = {"at_start": at_start, "at_end": at_end}
    rows = result if isinstance(result, list) else [result]
    for row in rows:
        if isinstance(row, dict):
            row.setdefault("load", stamp)
    return result


def add_replace_option(parser: argparse.ArgumentParser) -> None:
    """`--replace`, which lets `--output` overwrite a kept reference result (`kept_reference`)."""
    parser.add_argument("--replace", action="store_true",
                        help="let --output overwrite an existing bench/results/reference-*.json (a kept "
                             "result the documents cite); without it such a run is refused before it starts")


def kept_reference(output: pathlib.Path | str | None, *, replace: bool) -> str | None:
    """Why writing `output` would lose a kept result, or None: an existing
    bench/results/reference-*.json is what the documents cite, and a run that reproduces it by
    its own command would silently put new figures under the old sentences. Asked before a run
    starts, so that a refusal costs nothing."""
    if output is None or replace:
        return None
    path = pathlib.Path(output).resolve()
    if path.parent == RESULTS.resolve() and path.name.startswith("reference-") and path.exists():
        return (f"{output} is a kept reference result the documents cite: write this run elsewhere "
                f"(e.g. bench/results/latest-{path.name.removeprefix('reference-')}) or pass --replace")
    return None


def say(line: str) -> None:
    print(f"[bench] {line}", file=sys.stderr, flush=True)


def record_of(
    module: str, argv: list[str], *, started: str, commit: str, found: dict[str, Any],
) -> dict[str, Any]:
    """A results document: the command that reproduces it (`python -m module argv`), the commit, the
    machine, start and end times, and what the run `found`."""
    return {"command": shlex.join(["python", "-m", module, *argv]), "commit": commit, "machine": machine(),
            "started_at": started, "finished_at": now(), **found}


def publish(record: dict[str, Any], output: str | None) -> None:
    """Print `record` as JSON, and write it to `output` too when given."""
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    if output:
        with open(output, "w") as out:
            out.write(text)
    print(text, end="")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def run_all(
    *, quick: bool, only: tuple[str, ...] = BENCHMARKS, report: Callable[[str], None] = say,
    command: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Every benchmark of `only`, in order; the results document (`command`: the runner's
    arguments, recorded)."""
    mode = "quick" if quick else "full"
    results: dict[str, Any] = {"mode": mode, "machine": machine(), "started_at": now(),
                               "command": " ".join(["python", "-m", "bench.run", *command]),
                               "commit": commit()}
    load_at_start = load()  # other work on the machine skews latencies
    for name in only:
        module = importlib.import_module(f"bench.{name}")
        report(f"{name}: starting")
        started, before = time.monotonic(), load()
        try:
            found = module.run(quick=quick, report=lambda line, n=name: report(f"{n}: {line}"))
        except Exception as error:  # one benchmark failing must not lose the others' numbers
            traceback.print_exc()
            found = {"error": f"{type(error).__name__}: {error}"}
        results[name] = with_load(found, at_start=before, at_end=load())
        report(f"{name}: done in {time.monotonic() - started:.0f} s")
    results["finished_at"] = now()
    results["load_average"] = {"at_start": load_at_start, "at_end": load()}
    return results


def main(argv: list[str] | None = None) -> int:
    # SIGTERM ends the run as Ctrl-C does, through every benchmark's clean-up: the sandboxes and
    # processes they start run in sessions of their own and would outlive a killed interpreter.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (make bench-quick, < 10 minutes)")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS),
                        help="run only these benchmarks")
    parser.add_argument("--output", type=pathlib.Path, default=RESULTS / "latest.json",
                        help="where to write the results (default: bench/results/latest.json)")
    add_replace_option(parser)
    options = parser.parse_args(argv)
    if (refused := kept_reference(options.output, replace=options.replace)) is not None:
        parser.error(refused)
    arguments = tuple(sys.argv[1:] if argv is None else argv)
    results = run_all(quick=options.quick, only=tuple(options.only), command=arguments)
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    say(f"wrote {options.output}")
    return 1 if any(isinstance(results.get(n), dict) and "error" in results[n] for n in options.only) else 0


if __name__ == "__main__":
    sys.exit(main())
