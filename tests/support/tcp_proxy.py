"""A loopback TCP proxy whose connections a test can cut, for network faults without killing anybody.

Why: "the agent's stream to the coordinator breaks" is a different fault from "the agent (or the
coordinator) died" — both processes keep their state and only the connection goes. Putting this
proxy between them lets a test drop every connection at a moment it chooses (`cut`), and keep
the path down for a while (`block`: new connections are accepted and closed at once, as a
flapping load balancer would) before letting traffic through again (`unblock`).

Plain threads, two pumps per connection: the traffic is one gRPC stream per agent, and a test
must be able to read the proxy's counters (`accepted`, `cuts`) from its own thread.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

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
        self._closed = threading.Event()
        self.accepted = 0
        """Connections accepted (refused ones while blocked included)."""
        self.cuts = 0
        """Connections dropped by `cut` (both directions of one connection count once)."""
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
                blocked = self._blocked
            if blocked:
                _abort(client)
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
                sink.sendall(data)
        except OSError:
            pass
        with self._lock:
            if pair not in self._pairs:
                return  # cut: already reset
            self._pairs.remove(pair)
        for sock in pair:  # one side ended cleanly: end the other side too
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
