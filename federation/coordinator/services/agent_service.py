"""AgentService over gRPC: one bidirectional stream per member cluster's agent.

The servicer only validates and converts wire messages; the state lives behind
`federation.coordinator.facade.Coordinator`. Each stream has a reader thread (agent messages into
the facade) and a writer (the stream's queue out, with Pings between messages).

- A stream not starting with Hello, or whose cluster name could not name a MemberCluster
  (`wire.inbound.cluster_name_problem`), ends with INVALID_ARGUMENT.
- With `require_identity` (the coordinator serves mTLS) a Hello must come from the agent
  certificate of its cluster (`wire.identity`), else PERMISSION_DENIED (UNAUTHENTICATED without a
  certificate); a later message naming another cluster ends the stream with PERMISSION_DENIED.
- A message that cannot be applied is logged and answered with a `Notice` (BadReport); it never
  ends the stream or the server.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator

import grpc

from federation import clock as clock_mod
from federation.coordinator import facade
from federation.coordinator.wire import identity, inbound
from federation.rpc import agent_pb2, agent_pb2_grpc

log = logging.getLogger("fedspread.coordinator.agents")


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    """AgentService.Connect over a `Coordinator`: validation, a reader thread, a writer with Pings."""

    def __init__(
        self, coordinator: facade.Coordinator, *, clock: clock_mod.Clock, heartbeat_seconds: float,
        on_cluster_hello: Callable[[agent_pb2.Hello], None] | None = None, require_identity: bool = True,
    ) -> None:
        """`require_identity=False` only for a plaintext server (`--insecure`, tests): no certificates."""
        self.require_identity = require_identity
        self.coordinator = coordinator
        self.clock = clock
        self.heartbeat_seconds = heartbeat_seconds
        self.on_cluster_hello = on_cluster_hello
        self._nonces = itertools.count(1)

    def Connect(
        self, request_iterator: Iterator[agent_pb2.AgentMessage], context: grpc.ServicerContext
    ) -> Iterator[agent_pb2.CoordinatorMessage]:
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("body") != "hello":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message of a stream must be Hello")
            return
        hello = first.hello
        problem = inbound.cluster_name_problem(hello.cluster_name)
        if problem is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Hello.cluster_name {problem}")
            return
        refusal = (identity.check_hello(identity.peer_of(context.auth_context()), hello.cluster_name)
                   if self.require_identity else None)
        if refusal is not None:
            log.warning("agent refused", extra={"cluster": hello.cluster_name, "peer": context.peer(),
                                                "code": refusal.code, "reason": refusal.message})
            context.abort(grpc.StatusCode[refusal.code], refusal.message)
            return
        if self.on_cluster_hello is not None:
            try:
                self.on_cluster_hello(hello)
            except Exception:  # registering the MemberCluster may fail; the stream still serves
                log.exception("on_cluster_hello failed", extra={"cluster": hello.cluster_name})
        stream = self.coordinator.attach(hello, heartbeat_seconds=max(1, round(self.heartbeat_seconds)))
        context.add_callback(lambda: stream.outgoing.put(facade.END))
        threading.Thread(target=self._read, args=(stream, request_iterator), daemon=True,
                         name=f"agent-read-{stream.cluster}").start()
        log.info("agent connected", extra={"cluster": stream.cluster,
                                           "agent_version": hello.agent_version,
                                           "applied": len(hello.applied)})
        try:
            yield from self._write(stream, context)
        finally:
            self.coordinator.detach(stream)
            log.info("agent stream ended", extra={"cluster": stream.cluster})

    def _write(
        self, stream: facade.AgentStream, context: grpc.ServicerContext
    ) -> Iterator[agent_pb2.CoordinatorMessage]:
        next_ping = time.monotonic() + self.heartbeat_seconds
        while context.is_active():
            try:
                item = stream.outgoing.get(timeout=max(0.0, min(next_ping - time.monotonic(), 0.5)))
            except queue.Empty:
                if time.monotonic() >= next_ping:
                    ping = agent_pb2.Ping(nonce=next(self._nonces))
                    ping.sent_at.FromDatetime(self.clock())
                    next_ping = time.monotonic() + self.heartbeat_seconds
                    yield agent_pb2.CoordinatorMessage(ping=ping)
                continue
            if item is facade.END:
                return
            if item is facade.SUPERSEDED:
                context.abort(grpc.StatusCode.ALREADY_EXISTS,
                              f"a newer stream for cluster {stream.cluster} replaced this one")
            if isinstance(item, identity.Refusal):
                context.abort(grpc.StatusCode[item.code], item.message)
            assert isinstance(item, agent_pb2.CoordinatorMessage)
            yield item

    def _read(self, stream: facade.AgentStream, requests: Iterator[agent_pb2.AgentMessage]) -> None:
        try:
            for message in requests:
                refusal = identity.check_message(message, stream.cluster)
                if refusal is not None:  # speaking for another cluster ends the stream
                    log.warning("agent refused", extra={"cluster": stream.cluster, "code": refusal.code,
                                                        "reason": refusal.message})
                    stream.outgoing.put(refusal)
                    return
                try:
                    self.coordinator.receive(stream, message)
                except Exception as failure:  # one bad report must not end the stream or server
                    log.warning("bad agent message", extra={
                        "cluster": stream.cluster, "kind": message.WhichOneof("body"),
                        "error": str(failure)})
                    stream.send(notice=agent_pb2.Notice(
                        severity=agent_pb2.Notice.SEVERITY_WARNING, code="BadReport",
                        message=str(failure)[:500]))
        except grpc.RpcError:
            pass  # the stream broke; the writer ends through facade.END
        finally:
            stream.outgoing.put(facade.END)
