"""Loopback ports for the sandbox, the demo and the tests, chosen where nobody else is handed one.

Why not "bind port 0, read the number, close": that hands out a port from the kernel's ephemeral
range, and between the choice and the moment the real server binds it (an apiserver or an agent
process starting, a second or two) any other socket asking for port 0 — a gRPC server, a Ray
worker, a client connection's local end — may be given the same number. Then the server does not
start, or worse, a probe reaches the other listener (an agent's metrics read answered by an
HTTP/2 server). Ports below the ephemeral range are never handed out for port 0, so a port chosen
there stays ours until we bind it, unless another process picks the same number by hand; a
random choice among thousands, checked free and never repeated within this process, makes that
as unlikely as it can be without a lock shared across processes.

Ray's workers take ports 10002 to 19999 by default, so the pool starts above them.
"""

from __future__ import annotations

import pathlib
import random
import socket
import threading

POOL_START = 20_000
"""The lowest port handed out (above Ray's default worker range)."""
EPHEMERAL_RANGE = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_START = 32_768
ATTEMPTS = 200
SMALLEST_POOL = 1_000
"""Below this many ports between POOL_START and the ephemeral range, the kernel chooses."""

_handed: set[int] = set()
_lock = threading.Lock()
_random = random.SystemRandom()


def ephemeral_start(source: pathlib.Path = EPHEMERAL_RANGE) -> int:
    """The first port of the kernel's ephemeral range (Linux's default where it cannot be read)."""
    try:
        return int(source.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_START


def _bindable(port: int) -> bool:
    """Whether a listener could take `port` on loopback and on every address right now."""
    for host in ("127.0.0.1", "0.0.0.0"):
        with socket.socket() as probe:
            try:
                probe.bind((host, port))
            except OSError:
                return False
    return True


def _kernel_choice() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def free_port() -> int:
    """A TCP port free on loopback now, outside the ephemeral range, not handed out before here.

    Falls back to the kernel's choice only where the ephemeral range leaves no pool below it (a
    machine configured so is told nothing worse than before).
    """
    end = ephemeral_start()
    with _lock:
        if end - POOL_START >= SMALLEST_POOL:
            for _ in range(ATTEMPTS):
                port = _random.randrange(POOL_START, end)
                if port not in _handed and _bindable(port):
                    _handed.add(port)
                    return port
        port = _kernel_choice()
        _handed.add(port)
        return port
