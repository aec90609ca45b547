"""The coordinator's gRPC server: `grpc.aio` on one event-loop thread, blocking work on a small pool.

Why: grpc's sync server holds a thread per open stream (and the old AgentService a second one to
read), so a federation of 1,000 agents was 2,000 threads, and the coordinator stalled long before
that. On `grpc.aio` a stream is a coroutine: thousands cost memory, not threads. What must block —
the facade's lock, a placement what-if, a hub call — runs on `workers` threads (the loop's default
executor), so the thread count is fixed whatever the number of agents.

The rest of the coordinator is threads and locks, so this class gives it a synchronous face:
`start`, `add_*_port`, `stop(grace)`, each a coroutine run on the loop with a deadline. Servicers
register as on any server (`add_AgentServiceServicer_to_server(servicer, server.server)`); their
handlers are coroutines (`agent_service`, `placement_service`) and reach the pool through
`loop.run_in_executor(None, ...)`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import grpc

log = logging.getLogger(__name__)

WORKERS = 8
"""Threads for blocking calls from handlers: the facade serialises on its lock anyway, so a few
are enough to keep a slow call (a what-if, a long publish) from stalling every stream."""
CALL_SECONDS = 10.0
"""Deadline for starting, binding and the part of stopping that is not the grace period."""

SETTLE_SECONDS = 2.0
"""After stopping, how long the cancelled calls may take to unwind."""

T = TypeVar("T")
Options = Sequence[tuple[str, Any]]


class AioServer:
    """A `grpc.aio.Server` on a dedicated event-loop thread; `start()`, then `stop()` once."""

    def __init__(self, *, options: Options = (), workers: int = WORKERS, name: str = "grpc") -> None:
        self.loop = asyncio.new_event_loop()
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=workers,
                                                              thread_name_prefix=f"{name}-call")
        self.loop.set_default_executor(self.executor)
        self._thread = threading.Thread(target=self._run, name=f"{name}-loop", daemon=True)
        self._thread.start()
        self._stopped = False
        self._halted: bool | None = None
        """None until `halt`; then whether the server stopped within its deadlines."""
        self.server: grpc.aio.Server = self.call(self._create(tuple(options)))

    def call(self, coroutine: Coroutine[Any, Any, T], *, timeout: float = CALL_SECONDS) -> T:
        """Run `coroutine` on the loop from another thread and return its result (within `timeout`)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def add_insecure_port(self, address: str) -> int:
        """Listen in plaintext on `address`; the port bound (0: could not bind)."""
        return self.call(self._bind(address, None))

    def add_secure_port(self, address: str, credentials: grpc.ServerCredentials) -> int:
        """Listen over TLS on `address`; the port bound (0: could not bind)."""
        return self.call(self._bind(address, credentials))

    def start(self) -> None:
        """Serve the ports added."""
        self.call(self.server.start())

    def halt(self, grace: float | None = None) -> bool:
        """Refuse new calls, give open ones `grace` seconds (None: none), cancel the rest; the loop
        and the pool stay for `stop`, which may wait on a blocked call (a facade call queued on a
        lock held by a stalled thread): after `halt` nothing is served. False when the server did
        not stop within its deadlines; safe to call twice."""
        if self._halted is not None:
            return self._halted
        self._halted = False
        try:
            self.call(self.server.stop(grace), timeout=(grace or 0.0) + CALL_SECONDS)
            self.call(self._settle(), timeout=SETTLE_SECONDS + CALL_SECONDS)
        except (TimeoutError, concurrent.futures.TimeoutError):
            log.warning("gRPC server did not stop in time", extra={"grace": grace})
            return False
        self._halted = True
        return True

    def stop(self, grace: float | None = None) -> None:
        """`halt`, then end the loop and the pool (the calls already queued still run, and are
        waited for); safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self.halt(grace)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(CALL_SECONDS)
            # Queued facade calls (a stream's detach) still run; nothing new can be queued.
            self.executor.shutdown(wait=True, cancel_futures=False)
            if not self._thread.is_alive():
                self.loop.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    async def _settle(self) -> None:
        """Let the cancelled calls' tasks finish (their `finally` blocks queue the detaches), so
        none is left pending when the loop closes."""
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        if others:
            await asyncio.wait(others, timeout=SETTLE_SECONDS)

    async def _create(self, options: Options) -> grpc.aio.Server:
        return grpc.aio.server(options=options)

    async def _bind(self, address: str, credentials: grpc.ServerCredentials | None) -> int:
        try:
            port: int = (self.server.add_insecure_port(address) if credentials is None
                         else self.server.add_secure_port(address, credentials))
        except RuntimeError:  # grpc raises when the address cannot be bound
            return 0
        return port
