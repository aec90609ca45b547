"""The sandbox's own lifecycle: `down` leaves nothing behind, crashes are reported, `up` won't clobber.

What is tested, on small sandboxes of our own (a hub and one member "solo", in tmp directories):

* after `launcher.down`, every recorded component has exited and no process on the machine still
  mentions the sandbox directory in its command line (a leaked apiserver costs ~350 MB and a port);
* a component that dies (the member's scheduler, SIGKILLed) is reported by `health.check` and by
  `fedspread sandbox status`, which exits 1 and names it EXITED — so a broken sandbox fails loudly
  instead of surfacing as an unexplained timeout in some later test;
* `up` refuses to start over a directory whose sandbox still runs, and leaves that sandbox intact.

Why separate from test_sandbox.py: these tests kill and stop control planes, so they must not touch
the session sandbox the other integration tests share. Two sandbox starts in total (~15 s each).
"""

from __future__ import annotations

import os
import pathlib
import signal
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from conftest import start_sandbox
from waiting import wait_for

from federation import cli
from federation.sandbox import health, launcher, state

MEMBERS = ("solo",)


def processes_mentioning(directory: pathlib.Path) -> dict[int, str]:
    """pid -> command line of every process whose command line contains `directory`."""
    needle = str(directory).encode()
    found = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # exited meanwhile, or not ours to read
            continue
        if needle in cmdline:
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def test_down_stops_every_process(tmp_path: pathlib.Path) -> None:
    directory = tmp_path / "sandbox"
    started = start_sandbox(directory, members=MEMBERS)
    try:
        names = {c.name for c in started.components}
        assert names == {"etcd", "hub-apiserver", "hub-controller-manager", "solo-apiserver",
                         "solo-controller-manager", "solo-scheduler", "solo-nodesim"}
        assert all(c.alive() for c in started.components)
        running = processes_mentioning(directory)
        assert {c.pid for c in started.components} <= set(running), \
            f"every component's command line names the sandbox directory; found {running}"
    finally:
        stopped = launcher.down(directory, remove=False)

    assert sorted(stopped) == sorted(names), "down stops each running component once"
    still_alive = [c.name for c in started.components if c.alive()]
    assert not still_alive, f"components alive after down: {still_alive}"
    leftovers = processes_mentioning(directory)
    assert not leftovers, f"processes still running from the sandbox directory: {leftovers}"
    assert launcher.down(directory) == [], "a second down has nothing to stop"
    assert not directory.exists(), "down removes the directory by default"


@pytest.fixture(scope="module")
def running_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[state.SandboxState]:
    """One small sandbox shared by the tests below that break or probe it; stopped at the end."""
    directory = tmp_path_factory.mktemp("lifecycle") / "sandbox"
    started = start_sandbox(directory, members=MEMBERS)
    try:
        yield started
    finally:
        launcher.down(directory, remove=False)
        leftovers = processes_mentioning(directory)
        assert not leftovers, f"processes still running after down: {leftovers}"


def test_up_refuses_a_directory_whose_sandbox_runs(running_sandbox: state.SandboxState) -> None:
    directory = pathlib.Path(running_sandbox.directory)
    alive_before = {c.name for c in running_sandbox.components if c.alive()}
    assert alive_before, "the fixture's sandbox should be running"

    with pytest.raises(launcher.SandboxError, match="already running"):
        start_sandbox(directory, members=MEMBERS)

    recorded = state.SandboxState.load(directory)
    assert [c.pid for c in recorded.components] == [c.pid for c in running_sandbox.components], \
        "the refused `up` must leave state.json as it was"
    assert {c.name for c in recorded.components if c.alive()} == alive_before, \
        "the refused `up` must not stop anything"
    assert pathlib.Path(recorded.cluster("solo").kubeconfig).exists()


def test_crashed_component_is_reported(running_sandbox: state.SandboxState) -> None:
    directory = pathlib.Path(running_sandbox.directory)
    runner = CliRunner()
    scheduler = next(c for c in running_sandbox.components if c.name == "solo-scheduler")
    before = health.check(directory)
    assert before is not None and before.healthy, before and before.lines()
    result = runner.invoke(cli.main, ["sandbox", "status", "--dir", str(directory)])
    assert result.exit_code == 0, result.output
    assert "EXITED" not in result.output

    os.kill(scheduler.pid, signal.SIGKILL)
    wait_for(lambda: not scheduler.alive(), timeout=10, message="the SIGKILLed scheduler to exit")

    report = health.check(directory)
    assert report is not None
    assert not report.healthy
    assert [c.name for c in report.failed] == ["solo-scheduler"], report.lines()
    rows = {c.name: c for c in report.components}
    assert rows["solo-scheduler"].alive is False
    assert rows["hub-apiserver"].ready is True and rows["solo-apiserver"].ready is True

    result = runner.invoke(cli.main, ["sandbox", "status", "--dir", str(directory)])
    assert result.exit_code == 1, result.output
    lines = {line.split()[0]: line for line in result.output.splitlines() if line.strip()}
    assert "EXITED" in lines["solo-scheduler"], result.output
    assert scheduler.log in lines["solo-scheduler"], "the report points at the crashed component's log"
    others = [line for name, line in lines.items() if name != "solo-scheduler"]
    assert others and all("running" in line and "EXITED" not in line for line in others), result.output
