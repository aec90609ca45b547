"""Health of a running sandbox: which processes live and which apiservers answer /readyz.

Why separate from the launcher: `status`, the test fixtures and the demo all need to know whether
the sandbox they were given still works, and a crashed component must be reported by name with the
end of its log, not hidden behind a timeout somewhere else.
"""

from __future__ import annotations

import dataclasses
import pathlib
import ssl
import urllib.error
import urllib.request

from federation.sandbox import state


@dataclasses.dataclass(frozen=True)
class ComponentHealth:
    """One process and, for apiservers, whether /readyz answered ok."""

    name: str
    pid: int
    alive: bool
    ready: bool | None
    log: str


@dataclasses.dataclass(frozen=True)
class HealthReport:
    """The health of every component of a sandbox."""

    directory: str
    components: tuple[ComponentHealth, ...]

    @property
    def healthy(self) -> bool:
        """Every process alive and every apiserver ready."""
        return all(c.alive and c.ready is not False for c in self.components)

    @property
    def failed(self) -> list[ComponentHealth]:
        """Components that are down or not ready."""
        return [c for c in self.components if not c.alive or c.ready is False]

    def lines(self) -> list[str]:
        """One human-readable line per component."""
        rows = []
        for c in self.components:
            status = "running" if c.alive else "EXITED"
            if c.ready is not None:
                status += ", ready" if c.ready else ", NOT READY"
            rows.append(f"{c.name:<32} pid {c.pid:<8} {status}" + ("" if c.alive else f"  (log: {c.log})"))
        return rows


def _ready(record: state.ClusterRecord, sandbox: state.SandboxState) -> bool:
    context = ssl.create_default_context(cafile=sandbox.ca_file)
    request = urllib.request.Request(f"{record.server}/readyz",
                                     headers={"Authorization": f"Bearer {sandbox.token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=3) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def check(directory: pathlib.Path) -> HealthReport | None:
    """The health of the sandbox in `directory`, or None when there is none."""
    try:
        sandbox = state.SandboxState.load(directory)
    except FileNotFoundError:
        return None
    servers = {f"{c.name}-apiserver": c for c in sandbox.clusters}
    rows = []
    for component in sandbox.components:
        alive = component.alive()
        record = servers.get(component.name)
        ready = (_ready(record, sandbox) if alive else False) if record is not None else None
        rows.append(ComponentHealth(component.name, component.pid, alive, ready, component.log))
    return HealthReport(directory=str(directory), components=tuple(rows))
