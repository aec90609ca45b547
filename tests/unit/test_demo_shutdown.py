"""The demo's processes are asked to stop together, each still shutting down gracefully.

Why: `Federation.close` ends `make demo` and the tests' shared federation. It stopped the agents
and the coordinator one after another, each given up to 20 s to exit after its SIGTERM, so the
teardown took the sum of their graceful shutdowns. Now every process gets its SIGTERM first and
is then waited for. Held here on real child processes that each exit gracefully only once every
one of them has been asked: stopped one after another, the first would wait for the others in
vain and exit with an error. Each is asked once: `stop` after `terminate` sent a second SIGTERM,
which could land while a process's interpreter was exiting with the default handler back and kill
it (exit -15, seen once in CI).
"""

from __future__ import annotations

import pathlib
import sys
import textwrap
import time

from federation.demo import environment

CHILD = textwrap.dedent("""
    import pathlib, signal, sys, time
    here, count = pathlib.Path(sys.argv[1]), int(sys.argv[2])
    def asked(*_):
        with (here / f"asked-{sys.argv[3]}").open("a") as record:
            record.write("SIGTERM;")
        deadline = time.monotonic() + 15
        while len(list(here.glob("asked-*"))) < count:
            if time.monotonic() > deadline:
                sys.exit(3)  # the others were not asked while this one shut down
            time.sleep(0.02)
        time.sleep(0.5)  # a graceful shutdown takes a while: long enough for a second signal to land
        sys.exit(0)
    signal.signal(signal.SIGTERM, asked)
    (here / f"ready-{sys.argv[3]}").touch()
    while True:
        time.sleep(1)
""")


def test_close_asks_every_agent_and_the_coordinator_before_waiting_for_any(tmp_path: pathlib.Path) -> None:
    federation = environment.Federation(tmp_path / "federation", members=2)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    names = ["dc1", "aws-eu", "coordinator"]

    def start(name: str) -> environment.Process:
        return environment.Process(name, [sys.executable, str(script), str(tmp_path), str(len(names)), name],
                                   log=tmp_path / f"{name}.log")

    federation.agents = {name: start(name) for name in names[:2]}
    federation.coordinator = start("coordinator")
    deadline = time.monotonic() + 60
    for name in names:  # each has its handler before it is asked
        while not (tmp_path / f"ready-{name}").exists():
            assert federation.failed() == [] and time.monotonic() < deadline, f"{name} did not start"
            time.sleep(0.02)
    federation.close()
    codes = {name: process.popen.returncode
             for name, process in [*federation.agents.items(), ("coordinator", federation.coordinator)]}
    assert codes == dict.fromkeys(names, 0), "each exited gracefully, after all were asked"
    signals = {name: (tmp_path / f"asked-{name}").read_text().count("SIGTERM") for name in names}
    assert signals == dict.fromkeys(names, 1), "each was asked once: a second SIGTERM can kill it mid-exit"


def test_a_process_asked_to_stop_is_not_signalled_again_while_it_shuts_down(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    argv = [sys.executable, str(script), str(tmp_path), "1", "coordinator"]
    process = environment.Process("coordinator", argv, log=tmp_path / "coordinator.log")
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready-coordinator").exists():
        assert process.alive() and time.monotonic() < deadline, process.tail()
        time.sleep(0.02)
    process.terminate()
    while not (tmp_path / "asked-coordinator").exists():  # its handler runs: it is shutting down
        assert time.monotonic() < deadline, process.tail()
        time.sleep(0.02)
    process.stop()
    assert process.popen.returncode == 0, process.tail()
    assert (tmp_path / "asked-coordinator").read_text().count("SIGTERM") == 1
