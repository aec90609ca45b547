"""The sandbox's ports come from below the ephemeral range, free, and never twice in one process.

Why: a port chosen by binding port 0 lies in the range the kernel hands to every other port-0
bind, and in the interval before the real server binds it another listener took it once (an
agent's metrics read answered by an HTTP/2 server).
"""

from __future__ import annotations

import pathlib
import socket

import pytest

from federation.sandbox import ports


def test_ports_lie_below_the_ephemeral_range_and_are_distinct_and_free() -> None:
    end = ports.ephemeral_start()
    handed = [ports.free_port() for _ in range(200)]
    assert len(set(handed)) == len(handed)
    assert all(ports.POOL_START <= port < end for port in handed)
    for port in handed[:20]:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        # A pool of two ports, the busy one drawn about half of the 200 attempts of each call.
        monkeypatch.setattr(ports, "POOL_START", busy)
        monkeypatch.setattr(ports, "SMALLEST_POOL", 1)
        monkeypatch.setattr(ports, "ephemeral_start", lambda: busy + 2)
        chosen = [ports.free_port() for _ in range(5)]
    assert busy not in chosen
    assert len(set(chosen)) == len(chosen)


def test_the_ephemeral_start_is_read_from_the_kernel_or_defaults(tmp_path: pathlib.Path) -> None:
    source = tmp_path / "range"
    source.write_text("40000\t60999\n")
    assert ports.ephemeral_start(source) == 40_000
    assert ports.ephemeral_start(tmp_path / "absent") == ports.DEFAULT_EPHEMERAL_START
    source.write_text("garbage")
    assert ports.ephemeral_start(source) == ports.DEFAULT_EPHEMERAL_START
