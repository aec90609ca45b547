"""What a running sandbox is made of, on disk, so that `down` stops exactly what `up` started.

Why a file: `fedspread sandbox up` returns while the control planes keep running; `down`,
`status`, the demo and the test fixtures are other processes. They all read `state.json` in the
sandbox directory: each component with its pid and the process start time (so a recycled pid is
never killed), each cluster with its port and kubeconfig.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import signal
import time
from collections.abc import Sequence

STATE_FILE = "state.json"


@dataclasses.dataclass
class Component:
    """One process the sandbox started."""

    name: str
    pid: int
    started: int
    log: str
    argv: list[str] = dataclasses.field(default_factory=list)
    """The command line it was started with, so `launcher.start_component` can start it again
    exactly so (same port, etcd prefix, certificates); empty in state files from older versions."""

    def alive(self) -> bool:
        """True if the recorded process still runs (same pid *and* same start time)."""
        return process_start_time(self.pid) == self.started

    def stop(self, *, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds (at once with `grace=0`, as a crash or an
        OOM kill would); a process already gone is fine."""
        if not self.alive():
            return
        if grace > 0:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            _reap(self.pid)
            if not self.alive():
                return
            time.sleep(0.1)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            _reap(self.pid)
            if not self.alive():
                return
            time.sleep(0.05)


def stop_tiers(components: Sequence[Component]) -> list[list[Component]]:
    """`components` in the order `launcher.down` stops them, tier by tier, each tier side by side:
    the apiservers' clients (controller managers, schedulers, node simulators), then the
    apiservers, then etcd — nothing loses what it depends on while it shuts down. Within a tier
    the order given is kept; empty tiers are left out."""
    def tier(component: Component) -> int:
        return 2 if component.name == "etcd" else 1 if component.name.endswith("-apiserver") else 0

    tiers: list[list[Component]] = [[], [], []]
    for component in components:
        tiers[tier(component)].append(component)
    return [found for found in tiers if found]


def _reap(pid: int) -> None:
    """Collect the exit status if the process is our child, so no zombie lingers."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


@dataclasses.dataclass
class ClusterRecord:
    """One apiserver (hub or member) and how to reach it."""

    name: str
    role: str
    port: int
    kubeconfig: str
    metrics_port: int = 0
    """A member's resource metrics API, served by its node simulator (0: none, or an older state file)."""

    @property
    def server(self) -> str:
        """The apiserver's URL."""
        return f"https://127.0.0.1:{self.port}"


@dataclasses.dataclass
class SandboxState:
    """Everything `up` started."""

    directory: str
    etcd_port: int
    clusters: list[ClusterRecord] = dataclasses.field(default_factory=list)
    components: list[Component] = dataclasses.field(default_factory=list)
    token: str = ""
    ca_file: str = ""
    front_proxy_ca_file: str = ""
    """The aggregation layer's front-proxy CA (`--requestheader-client-ca-file` of every apiserver);
    empty in state files from older versions."""

    def cluster(self, name: str) -> ClusterRecord:
        """The cluster called `name`; KeyError if there is none."""
        for record in self.clusters:
            if record.name == name:
                return record
        raise KeyError(f"no cluster {name!r} in the sandbox at {self.directory}")

    @property
    def hub(self) -> ClusterRecord:
        """The hub cluster."""
        return next(c for c in self.clusters if c.role == "hub")

    @property
    def members(self) -> list[ClusterRecord]:
        """The member clusters, in creation order."""
        return [c for c in self.clusters if c.role == "member"]

    def save(self) -> None:
        """Write state.json atomically."""
        path = pathlib.Path(self.directory) / STATE_FILE
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(dataclasses.asdict(self), indent=2))
        partial.replace(path)

    @classmethod
    def load(cls, directory: pathlib.Path) -> SandboxState:
        """Read state.json; FileNotFoundError when no sandbox was started there."""
        data = json.loads((directory / STATE_FILE).read_text())
        return cls(
            directory=data["directory"], etcd_port=data["etcd_port"],
            clusters=[ClusterRecord(**c) for c in data["clusters"]],
            components=[Component(**c) for c in data["components"]],
            token=data.get("token", ""), ca_file=data.get("ca_file", ""),
            front_proxy_ca_file=data.get("front_proxy_ca_file", ""),
        )


def process_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if it does not exist."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name may hold spaces or parentheses: fields start after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":  # a zombie has exited
        return None
    return int(fields[19])
