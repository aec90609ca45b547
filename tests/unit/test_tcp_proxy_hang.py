"""The test proxy's hang (`tests.support.tcp_proxy`): the fault the hung-hub test relies on.

A hang must look like a peer that stopped answering without closing: open connections carry
nothing either way and stay open even when the server closes its end, new connections are
accepted and then hear nothing; `release` resets what lived through the hang and forwards again.
Over real loopback sockets to a real echo server; "hears nothing" is a client read deadline.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tests.support import tcp_proxy

QUIET = 0.5
"""A read deadline: long enough for an echo on loopback, the proof that nothing came back."""


@pytest.fixture
def echo() -> Iterator[tuple[socket.socket, list[socket.socket]]]:
    """An echo server on loopback, and the server-side sockets it accepted."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield server, accepted
    server.close()


def _echo(conn: socket.socket) -> None:
    try:
        while data := conn.recv(1024):
            conn.sendall(data)
    except OSError:
        pass


def connect(proxy: tcp_proxy.TcpProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    sock.settimeout(10)
    return sock


def silent(sock: socket.socket) -> bool:
    """Nothing arrives within QUIET, and the connection is not closed."""
    sock.settimeout(QUIET)
    try:
        sock.recv(16)
    except TimeoutError:
        return True
    finally:
        sock.settimeout(10)
    return False


def ended(sock: socket.socket) -> bool:
    """The connection was closed or reset (not merely quiet)."""
    try:
        return sock.recv(16) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_hang_forwards_nothing_closes_nothing_and_release_resets(
        echo: tuple[socket.socket, list[socket.socket]]) -> None:
    server, accepted = echo
    with tcp_proxy.TcpProxy(f"127.0.0.1:{server.getsockname()[1]}") as proxy:
        before = connect(proxy)
        before.sendall(b"hi")
        assert before.recv(16) == b"hi"
        proxy.hang()
        assert proxy.hung
        before.sendall(b"lost")
        assert silent(before), "an open connection carried data during the hang"
        accepted[0].shutdown(socket.SHUT_RDWR)  # the server closes its end: the client hears nothing
        assert silent(before)
        during = connect(proxy)  # accepted...
        during.sendall(b"hello?")
        assert silent(during), "a new connection was answered during the hang"
        assert len(accepted) == 1, "the server heard of a connection made during the hang"
        assert proxy.release() == 2
        assert not proxy.hung
        assert ended(before) and ended(during), "connections that lived through the hang were kept"
        after = connect(proxy)
        after.sendall(b"back")
        assert after.recv(16) == b"back"
        for sock in (before, during, after):
            sock.close()
