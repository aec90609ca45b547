"""A loopback TCP proxy whose connections a test can cut, for network faults without killing anybody.

Why: "the agent's stream to the coordinator breaks" is a different fault from "the agent (or the
coordinator) died" — both processes keep their state and only the connection goes. Putting this
proxy between them lets a test drop every connection at a moment it chooses (`cut`), and keep
the path down for a while (`block`: new connections are accepted and closed at once, as a
flapping load balancer would) before letting traffic through again (`unblock`). `hang` is the
nastier fault: every connection, open or new, stays open and nothing is forwarded either way, as
a peer that stopped answering without closing (a frozen process, a blackholed route) looks; only
a client's own deadline gets it out. `release` resets the connections that lived through the hang
(what they carried meanwhile was dropped, so they could never resume) and forwards again.

Plain threads, two pumps per connection: the traffic is one gRPC stream per agent, and a test
must be able to read the proxy's counters (`accepted`, `cuts`) from its own thread.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

CHUNK = 64 * 1024


def _abort(sock: socket.socket) -> None:
    """Drop a connection abruptly (SO_LINGER 0: a reset, as a crashed peer looks). The shutdown
    wakes a pump blocked in recv on it, which a close from another thread would not."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


def _swallow(sock: socket.socket) -> None:
    """Read and drop whatever `sock` sends until it closes (a connection held during a hang)."""
    with contextlib.suppress(OSError):
        while sock.recv(CHUNK):
            pass


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `target` ("host:port") until `close()`."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._blocked = False
        self._hung = False
        self._tainted: list[tuple[socket.socket, socket.socket]] = []
        self._held: list[socket.socket] = []  # clients accepted during a hang: never connected on
        self._closed = threading.Event()
        self.accepted = 0
        """Connections accepted (refused ones while blocked included)."""
        self.cuts = 0
        """Connections dropped by `cut` (both directions of one connection count once)."""
        self.delay = 0.0
        """Seconds every chunk waits before it is forwarded (either way): a slow path, on which a
        message and its answer cross later events (set it at any time)."""
        self._thread = threading.Thread(target=self._accept, name=f"tcp-proxy-{self.port}", daemon=True)
        self._thread.start()

    @property
    def target(self) -> str:
        """Where clients should connect instead of the real address."""
        return f"127.0.0.1:{self.port}"

    def cut(self) -> int:
        """Reset every open connection now; how many there were."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
            self.cuts += len(pairs)
        for client, upstream in pairs:
            _abort(client)
            _abort(upstream)
        return len(pairs)

    def block(self) -> int:
        """Cut every connection and refuse new ones (accepted, then reset) until `unblock()`."""
        with self._lock:
            self._blocked = True
        return self.cut()

    def unblock(self) -> None:
        """Let new connections through again."""
        with self._lock:
            self._blocked = False

    def hang(self) -> None:
        """Forward nothing, on open and new connections alike, and close none, until `release()`."""
        with self._lock:
            self._hung = True
            self._tainted = list(self._pairs)

    def release(self) -> int:
        """End a hang: reset the connections that lived through it, forward new ones again; how
        many were reset."""
        with self._lock:
            tainted, self._tainted = self._tainted, []
            held, self._held = self._held, []
            self._pairs = [pair for pair in self._pairs if pair not in tainted]
            self.cuts += len(tainted) + len(held)
        for client, upstream in tainted:
            _abort(client)
            _abort(upstream)
        for client in held:
            _abort(client)
        with self._lock:
            self._hung = False
        return len(tainted) + len(held)

    @property
    def hung(self) -> bool:
        """Whether a hang is in force."""
        with self._lock:
            return self._hung

    @property
    def open_connections(self) -> int:
        """Connections currently forwarded."""
        with self._lock:
            return len(self._pairs)

    def close(self) -> None:
        """Stop listening and cut everything."""
        self._closed.set()
        _abort(self._listener)
        self.block()
        self._thread.join(5)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- internals -------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed
            with self._lock:
                self.accepted += 1
                blocked, hung = self._blocked, self._hung
                if hung:
                    self._held.append(client)
            if blocked:
                _abort(client)
                continue
            if hung:  # accepted, and then nothing: not even the server hears of it
                threading.Thread(target=_swallow, args=(client,), daemon=True,
                                 name=f"tcp-proxy-held-{self.port}").start()
                continue
            try:
                upstream = socket.create_connection(self._upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _abort(client)  # the real server is away: the client sees a reset, as it would
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._pairs.append((client, upstream))
                if self._hung:
                    self._tainted.append((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink, (client, upstream)),
                                 name=f"tcp-proxy-pump-{self.port}", daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket,
              pair: tuple[socket.socket, socket.socket]) -> None:
        try:
            while True:
                data = source.recv(CHUNK)
                if not data:
                    break
                if self.hung:  # swallowed: the peer hears nothing, and the connection stays open
                    continue
                if self.delay:
                    time.sleep(self.delay)
                sink.sendall(data)
        except OSError:
            pass
        with self._lock:
            if pair not in self._pairs:
                return  # cut: already reset
            if pair in self._tainted:
                return  # hung: the other side hears nothing of this end either, until `release`
            self._pairs.remove(pair)
        for sock in pair:  # one side ended cleanly: end the other side too
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
