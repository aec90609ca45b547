"""`fedspread demo`: the whole federation on this machine, and the story of one workload on it.

Why a command and not a script: `make demo` is the first thing a newcomer runs, on a fresh
machine; it must build what is missing (the sandbox binaries, with progress), start every part as
its own process, show what happens, and leave nothing behind — also after Ctrl-C or a failure.
A failure is one line naming the logs, exit 1.
"""

from __future__ import annotations

import pathlib
import signal
import threading
from typing import NoReturn

import click

from federation import logs
from federation.cli import options
from federation.demo import environment, story, view
from federation.demo import keep as keep_mod
from federation.kube import clients
from federation.kube import errors as kube_errors
from federation.sandbox import launcher

DEFAULT_DIR = pathlib.Path.home() / ".cache" / "fedspread" / "demo"


@click.command("demo")
@click.option("--members", default=3, show_default=True, type=click.IntRange(2, environment.MAX_MEMBERS),
              help="Member clusters: dc1 (on-premises, small) and the eu clusters aws-eu, gcp-eu, ...")
@click.option("--non-interactive", is_flag=True,
              help="Print each step as one JSON line on stdout (progress on stderr) instead of live tables.")
@click.option("--keep", is_flag=True,
              help="After the story, keep the federation running and print how to look at it (kubectl, "
                   "the spread's Events, the coordinator's metrics URL, the SDK); Ctrl-C tears it down.")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True,
              type=click.Path(file_okay=False, path_type=pathlib.Path),
              help="Where the sandbox state and every process's log go (emptied first).")
def demo_command(*, members: int, non_interactive: bool, keep: bool, directory: pathlib.Path) -> None:
    """Run the whole federation on this machine and show one workload spreading over it.

    \b
    Starts a sandbox hub and member clusters (real kube-apiserver, controller-manager and
    scheduler; simulated nodes), the coordinator with a local Ray, and one agent per member, each
    its own process. Then, with examples/demo/web.yaml:
      1. applies the spread: dc1 first (at most 6 replicas), then the eu region, Adaptive;
      2. scales the hub Deployment to 12: dc1 fills up, the rest overflows to eu;
      3. scales down to 5: the eu replicas go first;
      4. stops one eu agent: after 10 s its replicas fail over to the other eu clusters;
      5. starts that agent again: its pods count again, the surplus goes by scale-down order;
    and tears everything down (unless --keep). The first run builds the sandbox binaries
    (several minutes, with progress).
    """
    logs.configure("warning")
    shown: view.View = view.JsonLinesView() if non_interactive else view.TerminalView()
    signal.signal(signal.SIGTERM, _interrupt)
    launcher.down(directory / "sandbox", remove=True)  # a previous demo's leftovers, if any
    federation = environment.Federation(directory, members=members, report=shown.note)
    failure = ""
    try:
        federation.start()
        shown.note(f"federation up: hub + {', '.join(m.name for m in federation.members)}; "
                   f"coordinator at {federation.coordinator_address}")
        told = story.Story(federation)
        try:
            for done in told.steps(shown.progress):
                shown.step(done)
        finally:
            told.close()
        if keep:
            shown.close()
            shown.note(keep_mod.instructions(federation).text())
            threading.Event().wait()
    except KeyboardInterrupt:
        failure = "interrupted"
    except (environment.DemoError, launcher.SandboxError, TimeoutError, clients.KubeUnavailable,
            kube_errors.KubeError) as error:
        failure = str(error)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave processes behind
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        shown.close()
        shown.note("tearing down (every process is stopped; further Ctrl-C is ignored until then)")
        federation.close()
    if failure:
        options.fail(f"{failure} (everything was stopped; logs in {federation.logs})")
    shown.note("done: every process stopped")


def _interrupt(*_: object) -> NoReturn:
    """SIGTERM behaves as Ctrl-C: tear down, then exit."""
    raise KeyboardInterrupt
