"""Both SDK clients behind one synchronous face, so one test asserts the same of each.

Why: `AsyncPlacementClient` must answer exactly what `PlacementClient` answers — results, errors,
watch endings. Writing every SDK test twice would let the copies drift; instead a test takes a
`Flavour` and calls `flavour.connect(...)`. The "aio" flavour drives the real asyncio client on an
event loop of its own (`asyncio.Runner`), one coroutine per call, and turns its async watch into a
plain iterator; nothing about the client is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Protocol, TypeVar

import grpc

from federation import sdk
from federation.sdk import calls

T = TypeVar("T")
Path = str | os.PathLike[str]


class Client(Protocol):
    """What the tests call: PlacementClient's methods."""

    def placement(self, key: str) -> sdk.SpreadPlacement: ...

    def placements(self, namespace: str | None = None) -> list[sdk.SpreadPlacement]: ...

    def watch(self, key: str, *, timeout: float | None = None) -> Iterator[sdk.SpreadPlacement]: ...

    def clusters(self, *, include_node_pools: bool = False) -> list[sdk.ClusterInfo]: ...

    def simulate(self, spread_input: calls.SpreadInput, *, replicas: int | None = None,
                 template: calls.TemplateInput = None,
                 clusters: calls.ClustersInput = None) -> sdk.SpreadPlacement: ...

    def explain(self, key: str) -> sdk.Explanation: ...

    def rebalance(self, key: str, *, dry_run: bool = False, max_surge: int | None = None,
                  ) -> sdk.RebalancePlan: ...

    def close(self) -> None: ...


class BlockingAio:
    """An AsyncPlacementClient on its own event loop, called synchronously."""

    def __init__(self, make: Callable[[], sdk.AsyncPlacementClient]) -> None:
        self._runner = asyncio.Runner()

        async def build() -> sdk.AsyncPlacementClient:  # grpc.aio binds the channel to this loop
            return make()

        try:
            self.client = self._runner.run(build())
        except BaseException:
            self._runner.close()
            raise

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coroutine)

    def close(self) -> None:
        self._run(self.client.close())

    def shutdown(self) -> None:
        """Close the client (again: closing twice is harmless) and end the event loop."""
        try:
            self.close()
        finally:
            self._runner.close()

    def placement(self, key: str) -> sdk.SpreadPlacement:
        return self._run(self.client.placement(key))

    def placements(self, namespace: str | None = None) -> list[sdk.SpreadPlacement]:
        return self._run(self.client.placements(namespace))

    def watch(self, key: str, *, timeout: float | None = None) -> Iterator[sdk.SpreadPlacement]:
        stream: AsyncIterator[sdk.SpreadPlacement] = self.client.watch(key, timeout=timeout)

        async def step() -> sdk.SpreadPlacement:
            return await anext(stream)

        try:
            while True:
                try:
                    item = self._run(step())
                except StopAsyncIteration:
                    return
                yield item
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                self._run(close())

    def clusters(self, *, include_node_pools: bool = False) -> list[sdk.ClusterInfo]:
        return self._run(self.client.clusters(include_node_pools=include_node_pools))

    def simulate(self, spread_input: calls.SpreadInput, *, replicas: int | None = None,
                 template: calls.TemplateInput = None,
                 clusters: calls.ClustersInput = None) -> sdk.SpreadPlacement:
        return self._run(self.client.simulate(spread_input, replicas=replicas, template=template,
                                              clusters=clusters))

    def explain(self, key: str) -> sdk.Explanation:
        return self._run(self.client.explain(key))

    def rebalance(self, key: str, *, dry_run: bool = False, max_surge: int | None = None,
                  ) -> sdk.RebalancePlan:
        return self._run(self.client.rebalance(key, dry_run=dry_run, max_surge=max_surge))


class Flavour:
    """One of the two clients: `connect` opens it as a context manager yielding a `Client`."""

    def __init__(self, name: str) -> None:
        assert name in ("sync", "aio"), name
        self.name = name

    def __repr__(self) -> str:
        return self.name

    @contextlib.contextmanager
    def connect(self, target: str, *, timeout: float = calls.DEFAULT_TIMEOUT,
                credentials: grpc.ChannelCredentials | None = None) -> Iterator[Client]:
        if self.name == "sync":
            with sdk.PlacementClient(target, credentials=credentials, timeout=timeout) as client:
                yield client
            return
        bridged = BlockingAio(lambda: sdk.AsyncPlacementClient(target, credentials=credentials,
                                                               timeout=timeout))
        try:
            yield bridged
        finally:
            bridged.shutdown()

    @contextlib.contextmanager
    def with_tls(self, target: str, *, ca: Path, cert: Path, key: Path,
                 timeout: float = calls.DEFAULT_TIMEOUT) -> Iterator[Client]:
        if self.name == "sync":
            with sdk.PlacementClient.with_tls(target, ca=ca, cert=cert, key=key, timeout=timeout) as client:
                yield client
            return
        bridged = BlockingAio(lambda: sdk.AsyncPlacementClient.with_tls(
            target, ca=ca, cert=cert, key=key, timeout=timeout))
        try:
            yield bridged
        finally:
            bridged.shutdown()


FLAVOURS = [Flavour("sync"), Flavour("aio")]
