"""A stand-in coordinator for agent tests and benchmarks: the real AgentService on a real gRPC server.

Why not a mock: the agent's link is mostly about the wire (stream lifecycle, status codes, reconnects
after the server goes away), which only a real server exercises. The stand-in speaks agent.proto as
the coordinator will: it validates that a stream starts with Hello (INVALID_ARGUMENT otherwise),
refuses clusters a test denies (PERMISSION_DENIED), answers Welcome, re-sends the assignments whose
generation differs from what Hello says is applied (then, for agents that ask for it, a
`ResyncComplete` notice), and lets the test push assignments, removals,
pings and raw messages. It records every AgentMessage per cluster, and it can be stopped and started
again on the same port to test reconnects.

Waiting is by predicate with a deadline (`wait_for`): a test states what it waits for and, if that
never comes, fails with a summary of what arrived instead of hanging.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from federation.rpc import agent_pb2, agent_pb2_grpc, capabilities
from federation.rpc import assignment as assignment_mod

T = TypeVar("T")
_END = object()
# The agent's end-of-resync convention (agents.link.client), spelled out: the stand-in plays the
# coordinator's side of the contract and must not borrow the agent's constants.


@dataclasses.dataclass
class _Stream:
    """One connected agent's stream: the queue of what to send it."""

    cluster: str
    outgoing: queue.Queue[Any] = dataclasses.field(default_factory=queue.Queue)


class StandinCoordinator(agent_pb2_grpc.AgentServiceServicer):
    """In-process AgentService on 127.0.0.1; `target` is what an agent connects to."""

    def __init__(self, *, heartbeat_interval_seconds: int = 1, coordinator_id: str = "standin",
                 server_credentials: grpc.ServerCredentials | None = None,
                 federation_id: str = "standin") -> None:
        """`server_credentials`: serve TLS with them (plaintext without); `federation_id`: the
        federation named in Welcome (agents manage only Deployments marked with it)."""
        self.server_credentials = server_credentials
        self.federation_id = federation_id
        self.heartbeat_interval_seconds = heartbeat_interval_seconds
        self.coordinator_id = coordinator_id
        self.port = 0
        self._server: grpc.Server | None = None
        self._cond = threading.Condition()
        self._messages: dict[str, list[agent_pb2.AgentMessage]] = {}
        self._streams: dict[str, _Stream] = {}
        self._desired: dict[str, dict[str, agent_pb2.SpreadAssignment]] = {}
        self._generations: dict[tuple[str, str], int] = {}
        self._denied: dict[str, str] = {}
        self.peers: dict[str, list[bytes]] = {}
        """Per cluster: the TLS peer identities of its last stream (empty over plaintext)."""
        self.restarts = 0

    # --- server lifecycle ----------------------------------------------------------------------

    @property
    def target(self) -> str:
        """host:port to connect to."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> StandinCoordinator:
        """Serve (again) on the same port as before, or on a free port the first time."""
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=16))
        agent_pb2_grpc.add_AgentServiceServicer_to_server(self, server)
        address = f"127.0.0.1:{self.port}"
        bound = (server.add_insecure_port(address) if self.server_credentials is None
                 else server.add_secure_port(address, self.server_credentials))
        if bound == 0:
            raise RuntimeError(f"stand-in coordinator: cannot bind 127.0.0.1:{self.port}")
        self.port = bound
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        """Stop serving now: every agent stream breaks (the agents see UNAVAILABLE or CANCELLED)."""
        server, self._server = self._server, None
        with self._cond:
            streams = list(self._streams.values())
            self._streams.clear()
            self._cond.notify_all()
        for stream in streams:
            stream.outgoing.put(_END)
        if server is not None:
            server.stop(grace=None).wait()
        self.restarts += 1

    def __enter__(self) -> StandinCoordinator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what the test does to agents ----------------------------------------------------------

    def deny(self, cluster: str, reason: str) -> None:
        """Refuse `cluster`'s streams with PERMISSION_DENIED (as a certificate mismatch would)."""
        with self._cond:
            self._denied[cluster] = reason

    def allow(self, cluster: str) -> None:
        """Stop refusing `cluster`."""
        with self._cond:
            self._denied.pop(cluster, None)

    def connected(self, cluster: str) -> bool:
        """True while `cluster` has a welcomed stream."""
        with self._cond:
            return cluster in self._streams

    def assign(self, cluster: str, value: assignment_mod.Assignment) -> agent_pb2.SpreadAssignment:
        """Make `value` the cluster's assignment and push it if the agent is connected. Without a
        spread uid it gets one derived from its key, as a real coordinator always sends one."""
        message = value.to_proto()
        if not message.spread_uid:
            message.spread_uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"fedspread:{value.spread}"))
        with self._cond:
            self._desired.setdefault(cluster, {})[value.spread] = message
            self._generations[(cluster, value.spread)] = value.generation
        self.send(cluster, agent_pb2.CoordinatorMessage(assignment=message), required=False)
        return message

    def remove(self, cluster: str, spread: str, *, orphan: bool = False) -> int:
        """Withdraw `spread` from `cluster`; returns the removal's generation."""
        with self._cond:
            self._desired.get(cluster, {}).pop(spread, None)
            generation = self._generations.get((cluster, spread), 0) + 1
            self._generations[(cluster, spread)] = generation
        self.send(cluster, agent_pb2.CoordinatorMessage(removal=agent_pb2.SpreadRemoval(
            spread=spread, generation=generation, orphan=orphan, reason="test removal")))
        return generation

    def forget(self, cluster: str) -> None:
        """Drop every assignment of `cluster` without sending a removal, as a coordinator whose hub
        lists no spread would (its next resync sends only Welcome and ResyncComplete)."""
        with self._cond:
            self._desired.pop(cluster, None)

    def ping(self, cluster: str, nonce: int) -> None:
        """Send a Ping; the agent answers with a Heartbeat carrying `nonce`."""
        self.send(cluster, agent_pb2.CoordinatorMessage(ping=agent_pb2.Ping(nonce=nonce)))

    def send(self, cluster: str, message: agent_pb2.CoordinatorMessage, *, required: bool = True) -> None:
        """Push any message onto `cluster`'s stream (AssertionError if none when `required`)."""
        with self._cond:
            stream = self._streams.get(cluster)
        if stream is None:
            if required:
                raise AssertionError(f"stand-in: {cluster} is not connected")
            return
        stream.outgoing.put(message)

    # --- what the agents sent ------------------------------------------------------------------

    def messages(self, cluster: str, kind: str | None = None, *, since: int = 0
                 ) -> list[agent_pb2.AgentMessage]:
        """Everything `cluster` sent (from index `since`), optionally only one oneof `kind`."""
        with self._cond:
            recorded = list(self._messages.get(cluster, [])[since:])
        return [m for m in recorded if kind is None or m.WhichOneof("body") == kind]

    def mark(self, cluster: str) -> int:
        """How many messages `cluster` has sent so far (for `since=`)."""
        with self._cond:
            return len(self._messages.get(cluster, []))

    def wait_for(self, predicate: Callable[[], T | None], *, timeout: float = 10.0,
                 what: str = "condition") -> T:
        """Wait until `predicate()` is truthy (re-checked on every message); fail with a summary."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                result = predicate()
                if result:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"stand-in: no {what} within {timeout:g} s; received: "
                                         f"{self.summary()}")
                self._cond.wait(min(left, 0.2))

    def wait_message(self, cluster: str, kind: str, *, since: int = 0, timeout: float = 10.0,
                     where: Callable[[Any], bool] = lambda body: True) -> Any:
        """The first `kind` message body from `cluster` after index `since` that satisfies `where`."""
        def probe() -> Any:
            for message in self.messages(cluster, kind, since=since):
                body = getattr(message, kind)
                if where(body):
                    return body
            return None
        return self.wait_for(probe, timeout=timeout, what=f"{kind} from {cluster}")

    def summary(self) -> str:
        """Counts of received message kinds per cluster, for failure messages."""
        with self._cond:
            parts = []
            for cluster, messages in self._messages.items():
                kinds: dict[str, int] = {}
                for m in messages:
                    kinds[m.WhichOneof("body") or "?"] = kinds.get(m.WhichOneof("body") or "?", 0) + 1
                parts.append(f"{cluster}: {kinds}")
            return "; ".join(parts) or "nothing"

    # --- the servicer --------------------------------------------------------------------------

    def _record(self, cluster: str, message: agent_pb2.AgentMessage) -> None:
        with self._cond:
            self._messages.setdefault(cluster, []).append(message)
            self._cond.notify_all()

    def Connect(self, request_iterator: Iterator[agent_pb2.AgentMessage],
                context: grpc.ServicerContext) -> Iterator[agent_pb2.CoordinatorMessage]:
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("body") != "hello":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message of a stream must be Hello")
            return
        hello = first.hello
        if not hello.cluster_name:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Hello.cluster_name is empty")
        cluster = hello.cluster_name
        with self._cond:
            self.peers[cluster] = context.peer_identities() or []
        self._record(cluster, first)
        with self._cond:
            denied = self._denied.get(cluster)
        if denied is not None:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, denied)
        stream = _Stream(cluster)
        with self._cond:
            previous = self._streams.get(cluster)
            self._streams[cluster] = stream
            applied: dict[str, int] = {}  # a spread may be listed once per uid: its highest generation
            for item in hello.applied:
                applied[item.spread] = max(applied.get(item.spread, 0), item.generation)
            resend = [m for spread, m in sorted(self._desired.get(cluster, {}).items())
                      if applied.get(spread) != m.generation]
            self._cond.notify_all()
        if previous is not None:
            previous.outgoing.put(_END)
        reader = threading.Thread(target=self._read, args=(cluster, request_iterator, stream), daemon=True)
        reader.start()
        welcome = agent_pb2.Welcome(cluster_name=cluster, coordinator_id=self.coordinator_id,
                                    heartbeat_interval_seconds=self.heartbeat_interval_seconds,
                                    full_resync=True, resume_token=f"{self.coordinator_id}-{self.restarts}",
                                    federation_id=self.federation_id)
        welcome.server_time.GetCurrentTime()
        try:  # gRPC may simply drop this generator when the RPC ends: clean up in `finally`
            yield agent_pb2.CoordinatorMessage(welcome=welcome)
            for message in resend:
                yield agent_pb2.CoordinatorMessage(assignment=message)
            if capabilities.RESYNC_COMPLETE_CAPABILITY in hello.capabilities:
                yield agent_pb2.CoordinatorMessage(notice=agent_pb2.Notice(
                    severity=agent_pb2.Notice.SEVERITY_INFO, code=capabilities.RESYNC_COMPLETE_CODE,
                    message=f"{len(resend)} assignments re-sent"))
            while context.is_active():
                try:
                    item = stream.outgoing.get(timeout=0.2)
                except queue.Empty:
                    continue
                if item is _END:
                    break
                yield item
        finally:
            with self._cond:
                if self._streams.get(cluster) is stream:
                    del self._streams[cluster]
                self._cond.notify_all()

    def _read(self, cluster: str, requests: Iterator[agent_pb2.AgentMessage], stream: _Stream) -> None:
        try:
            for message in requests:
                self._record(cluster, message)
        except grpc.RpcError:
            pass  # the stream broke; the writer side notices through _END or context
        finally:
            stream.outgoing.put(_END)
