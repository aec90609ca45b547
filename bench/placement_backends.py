"""The placement benchmark's two backends, and the memory and CPU of the processes they use.

Why apart from bench/placement.py: the Ray side has to be started, warmed, described and torn
down like the coordinator does it (`shards.RayBackend` on a local Ray, `--spread-shards` actors),
and its cost is in other processes — the actors' — whose memory and CPU time are read from
/proc, so that the Ray runs are compared on what they really use, not on the coordinator's
process alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import re
import shutil
import tempfile
import time
from typing import Any

from federation.coordinator import backends, shards

BACKENDS = ("local", "ray")
RAY_SHARDS = 2
"""SpreadShard actors in the Ray runs: `fedspread coordinator`'s default `--spread-shards`."""
RAY_CPUS = os.cpu_count() or 2
"""CPUs the benchmark's local Ray is given: this machine's cores."""
SIZED_RAY = re.compile(r"ray-(?P<spread>[1-9][0-9]*)(?:x(?P<cluster>[1-9][0-9]*))?")
"""`ray-N`: the Ray backend with N SpreadShard actors; `ray-NxM`: and M ClusterShard actors (1 when
not said) — how Ray's round is measured as actors are added on a machine with more cores."""


@dataclasses.dataclass(frozen=True)
class Actors:
    """The shard actors of a Ray run: SpreadShards and ClusterShards."""

    spread_shards: int = RAY_SHARDS
    cluster_shards: int = 1


def ray_actors(kind: str) -> Actors | None:
    """The actors a backend name asks for (`ray`: the coordinator's defaults; `ray-N`, `ray-NxM`);
    None for the in-process backend. ValueError for any other name."""
    if kind == "local":
        return None
    if kind == "ray":
        return Actors()
    sized = SIZED_RAY.fullmatch(kind)
    if sized is None:
        raise ValueError(f"{kind!r} is not a backend: local, ray, ray-N or ray-NxM (N spread shards, "
                         f"M cluster shards), e.g. ray-8 or ray-8x2")
    return Actors(int(sized["spread"]), int(sized["cluster"] or 1))


def parse_backend(text: str) -> str:
    """`ray_actors`'s names, for argparse: the name itself, or a usage error that lists them."""
    try:
        ray_actors(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def rss_mb(pid: int | str = "self") -> float:
    """Resident memory of process `pid` (this one by default), MB; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class CollectorTime:
    """Seconds this process's cycle collector ran, and how many collections, while it is entered
    (`gc.callbacks`, every thread): how much of a round the collector takes, read apart from the
    noise of the round's own time."""

    def __init__(self) -> None:
        self.seconds, self.collections = 0.0, 0
        self._began = 0.0

    def __enter__(self) -> CollectorTime:
        gc.callbacks.append(self._seen)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._seen)

    def _seen(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._began
            self.collections += 1


class Backend:
    """The placement backend of one run: in this process, or on a local Ray started for it."""

    def __init__(self, kind: str) -> None:
        """`kind`: a name `ray_actors` takes (local, ray, ray-N, ray-NxM)."""
        self.kind = kind
        self.temp_dir: str | None = None
        self.ready_s = 0.0
        self.ray: shards.RayBackend | None = None
        self.backend: backends.PlacementBackend = backends.LocalBackend()
        actors = ray_actors(kind)
        if actors is not None:
            self.temp_dir = tempfile.mkdtemp(prefix="fsbench-ray-", dir="/tmp")  # short: unix sockets
            started = time.perf_counter()
            self.ray = shards.RayBackend(
                shards=actors.spread_shards, cluster_shards=actors.cluster_shards, init_options={
                "num_cpus": RAY_CPUS, "_temp_dir": self.temp_dir, "log_to_driver": False,
                "configure_logging": False})
            self.ray.footprint()  # every actor started, its modules imported: not in the round's time
            self.ready_s = time.perf_counter() - started
            self.backend = self.ray

    def actors_cpu_s(self) -> float:
        """CPU seconds the Ray actors' processes have used (user and system; 0 in-process)."""
        if self.ray is None:
            return 0.0
        total = 0
        for pid in self.ray.footprint().actor_pids:
            try:
                with open(f"/proc/{pid}/stat") as stat:  # fields after the ")" of the command
                    fields = stat.read().rpartition(")")[2].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
            except OSError:
                pass
        return total / os.sysconf("SC_CLK_TCK")

    def describe(self) -> dict[str, Any]:
        """What the run's placement ran on, and the Ray actors' memory now."""
        if self.ray is None:
            return {"backend": "local"}
        found = self.ray.footprint()
        return {"backend": "ray", "ray_shards": self.ray.shards,
                "ray_cluster_shards": self.ray.cluster_shards, "ray_nodes": found.nodes,
                "ray_cpus": found.cpus, "ray_ready_s": round(self.ready_s, 1),
                "ray_actors_rss_mb": round(sum(rss_mb(pid) for pid in found.actor_pids), 1)}

    def close(self) -> None:
        self.backend.close()
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
