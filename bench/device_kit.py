"""A kit that runs the placement comparison on a borrowed machine with more cores, in one command.

Why: whether Ray's shard actors make the full round and its delivery faster as cores are added
(4, 8 and 12 actors against in-process, at 30k spreads x 1,000 clusters or more) cannot be
measured on a 2-core machine. A machine with more cores is lent for minutes at a time, starts
bare, runs Python 3.12 and reaches no network, so everything must travel with the checkout and one
command must do the rest. The kit is that:

- **wheels** of exactly what the coordinator installs (`pyproject.toml`'s dependencies and its
  `coordinator` extra, pinned by `constraints.txt`), for CPython 3.12 on x86-64 Linux;
- **trimmed**: Ray's wheel without the libraries beside Ray core (RLlib, Serve, Tune, the
  dashboard's web client, the Java jars, ...), the Kubernetes client's without its asyncio twin
  (`TRIMMED`), each with its RECORD rewritten so that pip installs it, and the distributions the
  benchmark never imports left out (`LEFT_OUT`): the tree that travels has a size limit (64 MiB
  with the checkout), and the untrimmed wheels alone pass it;
- **run.sh**, which installs the wheels with `pip --target` (no index, no resolver) and runs
  `bench.placement_compare` with the variants asked for, writing the document and its log into the
  folder it is given. The commit the kit was built from is the document's (`FEDSPREAD_BENCH_COMMIT`:
  the copy that travels has no git history).

    python -m bench.device_kit                  # builds .device-kit/ from a clean checkout
    bash .device-kit/run.sh "$OUT"              # there: 30k x 1,000, local ray-4 ray-8 ray-12, 1 run
    bash .device-kit/run.sh "$OUT" '{"spreads": 50000, "clusters": 1000}' 2 local ray-12

The kit is git-ignored: it is built where it is needed, from the commit being measured.
"""

from __future__ import annotations

import argparse
import pathlib
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Sequence

from bench import run

ROOT = pathlib.Path(__file__).resolve().parent.parent
KIT = ROOT / ".device-kit"
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64",
             "manylinux_2_34_x86_64")
"""The x86-64 Linux wheel tags pip may take for the lent machine (glibc 2.34 or newer)."""
TRIMMED: dict[str, tuple[str, ...]] = {
    "ray": ("jars", "dashboard/client", "rllib", "data", "serve", "tune", "train", "llm"),
    "kubernetes": ("aio",),
}
"""Per distribution, folders of its package that nothing the benchmark runs imports: Ray's libraries
beside Ray core, the Kubernetes client's asyncio twin. Their wheels are written again without them,
compressed with LZMA (pip reads it), to fit the tree that travels (64 MiB with the checkout)."""
LEFT_OUT = frozenset({
    "rich", "pygments", "markdown-it-py", "mdurl",  # the CLI's tables: the benchmark prints JSON
    "aiohttp", "aiohttp-retry", "aiosignal", "aiohappyeyeballs", "frozenlist", "multidict", "propcache",
    "yarl",  # kubernetes.aio's, trimmed above (Ray's own agent carries its copies)
})
"""Distributions the coordinator installs that the benchmark never imports: their wheels stay out."""
DEFAULT_SHAPE = '{"spreads": 30000, "clusters": 1000, "per_spread": 10}'
DEFAULT_RUNS = 1
DEFAULT_VARIANTS = ("local", "ray-4", "ray-8", "ray-12")


def requirements(pyproject: pathlib.Path = ROOT / "pyproject.toml") -> list[str]:
    """What the coordinator installs: the project's dependencies and its `coordinator` extra."""
    project = tomllib.loads(pyproject.read_text())["project"]
    found: list[str] = [*project["dependencies"], *project["optional-dependencies"]["coordinator"]]
    return found


def distribution(wheel: pathlib.Path) -> str:
    """The normalized distribution name of a wheel file (`aiohttp_retry-2.9.1-...` -> aiohttp-retry)."""
    return wheel.name.split("-", 1)[0].lower().replace("_", "-")


def trim_wheel(wheel: pathlib.Path, *, package: str, unused: Sequence[str]) -> tuple[int, int]:
    """Rewrite `wheel` in place without `package`'s folders `unused`, LZMA-compressed, its RECORD
    without their lines (pip checks every file a RECORD names); (bytes before, bytes after)."""
    prefixes = tuple(f"{package}/{folder.strip('/')}/" for folder in unused)
    before = wheel.stat().st_size
    trimmed = wheel.with_suffix(".trimmed")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(trimmed, "w") as target:
        for info in source.infolist():
            if info.filename.startswith(prefixes):
                continue
            data = source.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                kept = [line for line in data.decode().splitlines() if not line.startswith(prefixes)]
                data = ("\n".join(kept) + "\n").encode()
            # The same ZipInfo, so file modes (Ray's executables) are kept.
            target.writestr(info, data, compress_type=zipfile.ZIP_LZMA)
    trimmed.replace(wheel)
    return before, wheel.stat().st_size


def download(wheels: pathlib.Path, *, constraints: pathlib.Path = ROOT / "constraints.txt") -> None:
    """The wheels of `requirements()` and everything they need, at our pins, for the lent machine."""
    platforms = [argument for tag in PLATFORMS for argument in ("--platform", tag)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                    "--implementation", "cp", "--python-version", PYTHON_VERSION, *platforms,
                    "--constraint", str(constraints), "--dest", str(wheels), *requirements()],
                   check=True, timeout=1800)


def script(*, commit: str) -> str:
    """run.sh: install the wheels, run the comparison, keep its document and log in the folder given."""
    return f"""#!/usr/bin/env bash
# Made by `python -m bench.device_kit` at {commit}: do not edit; build the kit again instead.
# usage: bash .device-kit/run.sh OUT_DIR [SHAPE_JSON [RUNS [VARIANT...]]]
set -euo pipefail
out="${{1:?usage: run.sh OUT_DIR [SHAPE_JSON [RUNS [VARIANT...]]]}}"
default_shape={shlex.quote(DEFAULT_SHAPE)}
shape="${{2:-$default_shape}}"
runs="${{3:-{DEFAULT_RUNS}}}"
if [ "$#" -gt 3 ]; then variants=("${{@:4}}"); else variants=({' '.join(DEFAULT_VARIANTS)}); fi
kit="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
python="${{PYTHON:-python3}}"
version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ "$version" != {PYTHON_VERSION} ]; then
  echo "the kit's wheels are for Python {PYTHON_VERSION}, $python is $version: set PYTHON" >&2; exit 2
fi
site="${{TMPDIR:-/tmp}}/fedspread-kit-site"
rm -rf "$site"
"$python" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-index \\
  --no-deps --target "$site" "$kit"/wheels/*.whl
cd "$kit/.."
mkdir -p "$out"
export PYTHONPATH="$site" PYTHONUNBUFFERED=1 FEDSPREAD_BENCH_COMMIT={shlex.quote(commit)}
echo "cores: $(nproc); shape: $shape; runs: $runs; variants: ${{variants[*]}}"
"$python" -m bench.placement_compare --shape "$shape" --runs "$runs" --variants "${{variants[@]}}" \\
  --output "$out/placement-scaling.json" 2>&1 | tee "$out/placement-scaling.log"
"""


def build(kit: pathlib.Path = KIT) -> pathlib.Path:
    """The kit under `kit` (made again from nothing): the wheels, Ray's trimmed, and run.sh."""
    commit = run.commit()
    if commit == "unknown" or commit.endswith("+dirty"):
        raise SystemExit(f"the kit is built from a clean checkout (commit: {commit}): commit first")
    shutil.rmtree(kit, ignore_errors=True)
    wheels = kit / "wheels"
    wheels.mkdir(parents=True)
    run.say(f"downloading the coordinator's wheels for CPython {PYTHON_VERSION} into {wheels}")
    download(wheels)
    for wheel in sorted(wheels.glob("*.whl")):
        name = distribution(wheel)
        if name in LEFT_OUT:
            wheel.unlink()
        elif name in TRIMMED:
            run.say(f"trimming {wheel.name} (a minute for Ray's)")
            before, after = trim_wheel(wheel, package=name.replace("-", "_"), unused=TRIMMED[name])
            run.say(f"{wheel.name}: {before / 2**20:.0f} MB -> {after / 2**20:.0f} MB")
    (kit / "run.sh").write_text(script(commit=commit))
    total = sum(path.stat().st_size for path in kit.rglob("*") if path.is_file())
    run.say(f"kit ready: {total / 2**20:.0f} MB in {kit}; there: bash {kit.name}/run.sh \"$OUT\"")
    return kit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.device_kit",
        description="Build .device-kit/: the wheels the coordinator needs for CPython 3.12 (Ray's "
                    "trimmed) and run.sh, which installs them on a bare machine with more cores and "
                    "runs bench.placement_compare there (default: 30k spreads x 1,000 clusters, "
                    "local against ray-4, ray-8 and ray-12, one run each). Needs a clean checkout "
                    "and PyPI.")
    parser.add_argument("--output", type=pathlib.Path, default=KIT,
                        help="where to build the kit (default: .device-kit in the checkout, git-ignored)")
    options = parser.parse_args(argv)
    try:
        build(options.output)
    except subprocess.CalledProcessError as error:  # pip said why above; no traceback on top of it
        run.say(f"pip could not download the wheels (exit {error.returncode}): is PyPI reachable?")
        return 1
    except subprocess.TimeoutExpired:
        run.say("pip did not finish downloading the wheels within 30 minutes")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
