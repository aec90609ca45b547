"""AgentService over `grpc.aio`: one bidirectional stream per member cluster's agent, as coroutines.

The servicer only validates and converts wire messages; the state lives behind
`federation.coordinator.facade.Coordinator`. Each stream is two coroutines on the server's event
loop (`aio_server.AioServer`): a reader (agent messages into the facade) and the writer (the
stream's `wire.outbox.Outbox` out, with Pings when idle). Why coroutines: the sync server's two
threads per stream left a coordinator of 1,000 agents with 2,000 threads and streams that did not
open; now threads are a fixed pool however many agents connect.

- **The loop never blocks.** The facade is synchronous and takes a lock, so every call into it
  (attach, receive, detach) runs on the loop's default executor (a few threads). A stream's
  reader awaits each receive before reading the next message: reports apply in order, and an
  agent that floods only fills its own flow-control window.
- **A slow agent only delays itself.** The facade queues into the stream's outbox from its threads
  (bounded and coalescing per spread) and wakes the writer with `call_soon_threadsafe` (the
  wake-ups that arrive before the loop takes them share one: `_Wakes`); a writer whose agent does
  not read waits on HTTP/2 flow control while the other streams go on.
- **Batches to an agent that reads them.** What the outbox holds when the writer wakes goes as
  one `CoordinatorBatch` to an agent whose Hello lists `capabilities.MESSAGE_BATCHES_CAPABILITY`
  (one message each to any other); such an agent answers with `AckBatch`es, one `receive` each.
  A full round's messages then cost each side a gRPC message per batch, not per spread.
- A stream not starting with Hello within `HELLO_SECONDS`, or whose cluster name could not name a
  MemberCluster (`wire.inbound.cluster_name_problem`), ends with INVALID_ARGUMENT
  (DEADLINE_EXCEEDED for no Hello in time).
- With `require_identity` (the coordinator serves mTLS) a Hello must come from the agent
  certificate of its cluster (`wire.identity`), else PERMISSION_DENIED (UNAUTHENTICATED without a
  certificate); a later message naming another cluster ends the stream with PERMISSION_DENIED.
- A message that cannot be applied is logged and answered with a `Notice` (BadReport); it never
  ends the stream or the server. A failure of the coordinator itself ends the stream with
  INTERNAL, never UNKNOWN.
- `on_cluster_hello` (the process registers the MemberCluster on the hub: a network call) runs on
  a pool of its own and is not awaited, so a slow hub never holds a stream or the facade's pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import itertools
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import ParamSpec, TypeVar

import grpc

from federation import clock as clock_mod
from federation.coordinator import facade
from federation.coordinator.wire import identity, inbound
from federation.rpc import agent_pb2, agent_pb2_grpc, capabilities, framing

log = logging.getLogger(__name__)

HELLO_SECONDS = 30.0
"""A stream must open with Hello within this long."""
HOOK_WORKERS = 2

P = ParamSpec("P")
R = TypeVar("R")


class _Wakes:
    """The writers' wake-ups from the facade's threads, handed to the event loop together.

    Why: during a round the facade queues into a thousand outboxes while their writers keep up
    (batches empty an outbox at once), so nearly every queued message finds its writer waiting and
    wakes it. One `call_soon_threadsafe` each is a write to the loop's self-pipe by the placing
    thread and a turn of the loop; here the wake-ups that arrive before the loop takes them share
    one."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._due: list[asyncio.Event] = []

    def wake(self, arrived: asyncio.Event) -> None:
        """Set `arrived` on the loop soon (any thread)."""
        with self._lock:
            self._due.append(arrived)
            if len(self._due) > 1:
                return  # the loop has not taken the earlier ones yet: they go together
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server stopped
            self.loop.call_soon_threadsafe(self._set)

    def _set(self) -> None:
        with self._lock:
            due, self._due = self._due, []
        for arrived in due:
            arrived.set()


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    """AgentService.Connect over a `Coordinator`: validation, a reader and a writer coroutine."""

    def __init__(
        self, coordinator: facade.Coordinator, *, clock: clock_mod.Clock, heartbeat_seconds: float,
        on_cluster_hello: Callable[[agent_pb2.Hello], None] | None = None, require_identity: bool = True,
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        """`require_identity=False` only for a plaintext server (`--insecure`, tests): no certificates.
        `executor` runs the facade's calls; None: the event loop's default executor."""
        self.require_identity = require_identity
        self.coordinator = coordinator
        self.clock = clock
        self.heartbeat_seconds = heartbeat_seconds
        self.on_cluster_hello = on_cluster_hello
        self._executor = executor
        self._hooks: concurrent.futures.ThreadPoolExecutor | None = None
        self._nonces = itertools.count(1)
        self._wakes: _Wakes | None = None

    def close(self) -> None:
        """Stop the hook pool (waiting for hooks already started); the servicer may serve again."""
        hooks, self._hooks = self._hooks, None
        if hooks is not None:
            hooks.shutdown(wait=True, cancel_futures=True)

    async def Connect(
        self, request_iterator: AsyncIterator[agent_pb2.AgentMessage], context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[agent_pb2.CoordinatorMessage | bytes]:
        hello = await self._hello(request_iterator, context)
        self._hook(hello)
        loop = asyncio.get_running_loop()
        attaching = loop.run_in_executor(self._executor, functools.partial(
            self.coordinator.attach, hello, heartbeat_seconds=max(1, round(self.heartbeat_seconds))))
        try:
            stream = await asyncio.shield(attaching)
        except asyncio.CancelledError:  # the call ended while the facade attached: detach after it
            attaching.add_done_callback(self._detach_late)
            raise
        except Exception:  # the coordinator's fault, not the agent's: say so, never UNKNOWN
            log.exception("attaching an agent stream failed", extra={"cluster": hello.cluster_name})
            await context.abort(grpc.StatusCode.INTERNAL, "the coordinator could not attach the stream")
            raise  # unreachable: abort raises
        log.info("agent connected", extra={"cluster": stream.cluster, "agent_version": hello.agent_version,
                                           "applied": len(hello.applied)})
        reader = asyncio.create_task(self._read(stream, request_iterator),
                                     name=f"agent-read-{stream.cluster}")
        try:
            batches = capabilities.MESSAGE_BATCHES_CAPABILITY in hello.capabilities
            async for message in self._write(stream, context, batches=batches):
                yield message
        finally:
            reader.cancel()
            stream.outgoing.set_waker(None)
            # Not awaited: the handler may be ending by cancellation; the pool runs it regardless.
            loop.run_in_executor(self._executor, self._detach, stream)

    async def _hello(
        self, requests: AsyncIterator[agent_pb2.AgentMessage], context: grpc.aio.ServicerContext,
    ) -> agent_pb2.Hello:
        """The stream's Hello, validated; aborts the call otherwise."""
        try:
            first = await asyncio.wait_for(anext(aiter(requests), None), HELLO_SECONDS)
        except TimeoutError:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                f"no Hello within {HELLO_SECONDS:g} s of opening the stream")
            raise  # unreachable: abort raises
        if first is None or first.WhichOneof("body") != "hello":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "the first message of a stream must be Hello")
        assert first is not None
        hello = first.hello
        problem = inbound.cluster_name_problem(hello.cluster_name)
        if problem is not None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Hello.cluster_name {problem}")
        refusal = (identity.check_hello(identity.peer_of(context.auth_context()), hello.cluster_name)
                   if self.require_identity else None)
        if refusal is not None:
            log.warning("agent refused", extra={"cluster": hello.cluster_name, "peer": context.peer(),
                                                "code": refusal.code, "reason": refusal.message})
            await context.abort(grpc.StatusCode[refusal.code], refusal.message)
        return hello

    def _hook(self, hello: agent_pb2.Hello) -> None:
        """Run `on_cluster_hello` on the hook pool; its failure is logged, the stream serves on."""
        if self.on_cluster_hello is not None:
            self.submit(functools.partial(self.on_cluster_hello, hello), cluster=hello.cluster_name)

    def submit(self, work: Callable[[], None], *, cluster: str) -> None:
        """Run `work` (a hub call about `cluster`, e.g. registering its MemberCluster) on the hook
        pool, not awaited; its failure is logged. `close` waits for the one under way."""
        if self._hooks is None:
            self._hooks = concurrent.futures.ThreadPoolExecutor(max_workers=HOOK_WORKERS,
                                                                thread_name_prefix="agent-hello")
        self._hooks.submit(self._run_hook, work, cluster)

    @staticmethod
    def _run_hook(work: Callable[[], None], cluster: str) -> None:
        try:
            work()
        except Exception:  # registering the MemberCluster may fail; the stream still serves
            log.exception("on_cluster_hello failed", extra={"cluster": cluster})

    async def _write(
        self, stream: facade.AgentStream, context: grpc.aio.ServicerContext, *, batches: bool,
    ) -> AsyncIterator[agent_pb2.CoordinatorMessage | bytes]:
        """The outbox's messages, serialized (`Outbox.take_serialized`), a Ping whenever it was idle
        for a heartbeat, until it is closed; to an agent that reads `batches`, what is queued at once
        goes as one CoordinatorBatch."""
        loop = asyncio.get_running_loop()
        arrived = asyncio.Event()
        if self._wakes is None or self._wakes.loop is not loop:  # (a servicer may serve again)
            self._wakes = _Wakes(loop)
        stream.outgoing.set_waker(functools.partial(self._wakes.wake, arrived))
        next_ping = loop.time() + self.heartbeat_seconds
        while True:
            arrived.clear()
            item = stream.outgoing.take_serialized(batches=batches)
            if item is None:
                try:
                    await asyncio.wait_for(arrived.wait(), max(0.0, next_ping - loop.time()))
                except TimeoutError:
                    ping = agent_pb2.Ping(nonce=next(self._nonces))
                    ping.sent_at.FromDatetime(self.clock())
                    next_ping = loop.time() + self.heartbeat_seconds
                    yield agent_pb2.CoordinatorMessage(ping=ping)
                continue
            if item is facade.END:
                return
            if item is facade.SUPERSEDED:
                await context.abort(grpc.StatusCode.ALREADY_EXISTS,
                                    f"a newer stream for cluster {stream.cluster} replaced this one")
            if isinstance(item, identity.Refusal):
                await context.abort(grpc.StatusCode[item.code], item.message)
            assert isinstance(item, bytes)
            yield item

    async def _read(
        self, stream: facade.AgentStream, requests: AsyncIterator[agent_pb2.AgentMessage],
    ) -> None:
        """Apply the agent's messages in order; close the outbox when they end."""
        drain = True
        try:
            async for message in requests:
                refusal = identity.check_message(message, stream.cluster)
                if refusal is not None:  # speaking for another cluster ends the stream
                    log.warning("agent refused", extra={"cluster": stream.cluster, "code": refusal.code,
                                                        "reason": refusal.message})
                    stream.outgoing.close(refusal)
                    return
                try:
                    await self._blocking(self.coordinator.receive, stream, message)
                except Exception as failure:  # one bad report must not end the stream or server
                    log.warning("bad agent message", extra={
                        "cluster": stream.cluster, "kind": message.WhichOneof("body"),
                        "error": str(failure)})
                    stream.send(notice=agent_pb2.Notice(
                        severity=agent_pb2.Notice.SEVERITY_WARNING, code="BadReport",
                        message=str(failure)[:500]))
        except asyncio.CancelledError:
            drain = False
            raise
        except Exception as failure:  # the stream broke under the reader; the writer ends too
            drain = False
            log.debug("agent stream read ended", extra={"cluster": stream.cluster, "error": str(failure)})
        finally:
            stream.outgoing.close(facade.END, drain=drain)

    async def _blocking(self, call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """`call` on the executor, awaited from the loop."""
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, functools.partial(call, *args, **kwargs))

    def _detach_late(self, attaching: asyncio.Future[facade.AgentStream]) -> None:
        if not attaching.cancelled() and attaching.exception() is None:
            asyncio.get_running_loop().run_in_executor(self._executor, self._detach, attaching.result())

    def _detach(self, stream: facade.AgentStream) -> None:
        try:
            self.coordinator.detach(stream)
        except Exception:  # nothing to tell anyone: the stream is gone
            log.exception("detaching an agent stream failed", extra={"cluster": stream.cluster})
        log.info("agent stream ended", extra={"cluster": stream.cluster})


def add_to_server(server: grpc.aio.Server, servicer: AgentServicer) -> AgentServicer:
    """Register `servicer` on an aio `server` (`aio_server.AioServer.server`); returns it.

    As the generated `add_AgentServiceServicer_to_server` registers it, with one difference: the
    stream's responses may be serialized already (`rpc.framing.serialized`), so that the bytes a
    SpreadShard built reach the agent without being parsed and serialized again here."""
    service = agent_pb2.DESCRIPTOR.services_by_name["AgentService"]
    handlers = {"Connect": grpc.stream_stream_rpc_method_handler(
        servicer.Connect, request_deserializer=agent_pb2.AgentMessage.FromString,
        response_serializer=framing.serialized)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)
    return servicer
