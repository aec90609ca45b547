"""One sandbox component stopped and started again with its recorded command line.

Why a unit test: the fault tests restart real apiservers with `launcher.start_component`; here the
mechanics (recorded argv, state.json kept current, refusals) are checked on a `sleep` process in
a fraction of a second, without a sandbox. So is the order `launcher.down` stops a sandbox in
(tier by tier, each tier side by side), on processes that take a while to exit as apiservers do.
"""

from __future__ import annotations

import itertools
import pathlib
import sys

import pytest

from federation.sandbox import launcher, state
from tests.support import polling


@pytest.fixture
def sleeper(tmp_path: pathlib.Path) -> state.SandboxState:
    """A sandbox record with one component, `sleep 60`, not running yet."""
    never_started = state.Component("sleeper", pid=2 ** 22 + 1, started=0,  # above any pid_max
                                    log=str(tmp_path / "logs" / "sleeper.log"), argv=["sleep", "60"])
    recorded = state.SandboxState(directory=str(tmp_path), etcd_port=0, components=[never_started])
    recorded.save()
    return recorded


def test_a_stopped_component_starts_again_with_its_command_line(sleeper: state.SandboxState) -> None:
    first = launcher.start_component(sleeper, "sleeper")
    try:
        assert first.alive() and first.argv == ["sleep", "60"]
        assert state.SandboxState.load(pathlib.Path(sleeper.directory)).components == [first]
        with pytest.raises(launcher.SandboxError, match="still running"):
            launcher.start_component(sleeper, "sleeper")

        assert launcher.stop_component(sleeper, "sleeper", crash=True) is first and not first.alive()
        second = launcher.start_component(sleeper, "sleeper")
        assert second.alive() and second.pid != first.pid and second.argv == first.argv
        assert state.SandboxState.load(pathlib.Path(sleeper.directory)).components == [second]
    finally:
        for component in sleeper.components:
            component.stop(grace=0)


def test_unknown_or_unrecorded_components_are_refused(sleeper: state.SandboxState) -> None:
    with pytest.raises(KeyError, match=r"no component 'etcd'.*sleeper"):
        launcher.start_component(sleeper, "etcd")
    sleeper.components[0].argv = []  # a state file written before command lines were recorded
    with pytest.raises(launcher.SandboxError, match="without its command line"):
        launcher.start_component(sleeper, "sleeper")


DRAINING = """
import os, signal, sys, time
name, events = sys.argv[1], sys.argv[2]
def say(what):
    with open(events, "a") as out:
        out.write(f"{what} {name} {time.monotonic()}\\n")
def drain(*_):
    say("asked")
    time.sleep(0.6)  # as an apiserver drains its watches
    say("gone")
    os._exit(0)
signal.signal(signal.SIGTERM, drain)
say("ready")
while True:
    time.sleep(0.05)
"""


def test_down_stops_each_tier_side_by_side_clients_then_apiservers_then_etcd(tmp_path: pathlib.Path) -> None:
    events = tmp_path / "events"
    names = ["etcd", "hub-apiserver", "east-apiserver", "east-controller-manager", "east-scheduler",
             "east-nodesim"]  # in the order `up` starts them
    recorded = state.SandboxState(directory=str(tmp_path), etcd_port=0, components=[
        state.Component(name, pid=2 ** 22 + 1, started=0, log=str(tmp_path / "logs" / f"{name}.log"),
                        argv=[sys.executable, "-c", DRAINING, name, str(events)]) for name in names])
    recorded.save()
    for name in names:
        launcher.start_component(recorded, name)
    polling.wait(lambda: events.exists() and events.read_text().count("ready") == len(names),
                 what="every component's handler installed", timeout=30)

    stopped = launcher.down(tmp_path, remove=False)

    assert stopped == names[::-1], "every running component, newest first"
    assert not any(component.alive() for component in state.SandboxState.load(tmp_path).components)
    lines = (line.split() for line in events.read_text().splitlines())
    seen = {(what, name): float(at) for what, name, at in lines}
    tiers = [["east-controller-manager", "east-scheduler", "east-nodesim"],
             ["hub-apiserver", "east-apiserver"], ["etcd"]]
    for tier in tiers:  # side by side: each was asked before any of its tier had gone
        assert max(seen["asked", name] for name in tier) < min(seen["gone", name] for name in tier), tier
    for before, after in itertools.pairwise(tiers):  # a tier is asked only once the one before has gone
        assert max(seen["gone", name] for name in before) < min(seen["asked", name] for name in after)
