"""One sandbox component stopped and started again with its recorded command line.

Why a unit test: the fault tests restart real apiservers with `launcher.start_component`; here the
mechanics (recorded argv, state.json kept current, refusals) are checked on a `sleep` process in
a fraction of a second, without a sandbox.
"""

from __future__ import annotations

import pathlib

import pytest

from federation.sandbox import launcher, state


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
