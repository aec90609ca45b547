"""Thousands of minimal agent streams from one process, for the coordinator's scale test.

Why a process of its own: the test measures the coordinator's threads and must not count the
clients'; and thousands of real agent `Link`s (a thread or two each) would measure the agents.
Each stream here is a coroutine on one `grpc.aio` loop, with its own channel and connection (a
local subchannel pool), as each agent has: Hello, a full inventory and a heartbeat, then it reads.

Driven over stdin/stdout, one line each way:

    -> welcomed N SECONDS      every stream had Welcome and ResyncComplete (or `failed REASON`)
    <- publish                 the test is about to give every cluster an assignment
    -> assigned N SECONDS      every stream received one, SECONDS after `publish` was read
    <- close                   close every stream
    -> closed

Run: `python -m tests.support.stream_swarm --target 127.0.0.1:PORT --streams 2000`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import grpc

from federation.rpc import agent_pb2, agent_pb2_grpc, capabilities, common_pb2

DEADLINE = 60.0


def cluster_name(index: int) -> str:
    return f"swarm-{index:05d}"


class Swarm:
    def __init__(self, target: str, streams: int) -> None:
        self.target = target
        self.count = streams
        self.welcomed = 0
        self.assigned = 0
        self.all_welcomed = asyncio.Event()
        self.all_assigned = asyncio.Event()
        self.closing = asyncio.Event()
        self.failures: list[str] = []

    async def stream(self, index: int) -> None:
        try:
            await self._stream(index)
        except grpc.aio.AioRpcError as error:
            self.failures.append(f"{cluster_name(index)}: {error.code().name} {error.details()}")

    async def _stream(self, index: int) -> None:
        name = cluster_name(index)
        options = [("grpc.use_local_subchannel_pool", 1)]  # a connection of its own, as an agent's
        async with grpc.aio.insecure_channel(self.target, options=options) as channel:
            call = agent_pb2_grpc.AgentServiceStub(channel).Connect(timeout=DEADLINE * 3, wait_for_ready=True)
            await call.write(agent_pb2.AgentMessage(hello=agent_pb2.Hello(
                cluster_name=name, agent_version="swarm",
                capabilities=[capabilities.RESYNC_COMPLETE_CAPABILITY])))
            await call.write(agent_pb2.AgentMessage(inventory=agent_pb2.InventoryReport(
                full=True, sequence=1, node_pools=[common_pb2.NodePool(
                    name="std", count=2, allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"})])))
            await call.write(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(sequence=1)))
            reading = asyncio.create_task(self.read(call, name))
            await self.closing.wait()
            reading.cancel()
            call.cancel()

    async def read(self, call: grpc.aio.StreamStreamCall, name: str) -> None:  # type: ignore[type-arg]
        welcomed = assigned = False
        try:
            async for message in call:
                kind = message.WhichOneof("body")
                if kind == "notice" and message.notice.code == capabilities.RESYNC_COMPLETE_CODE \
                        and not welcomed:
                    welcomed = True
                    self.welcomed += 1
                    if self.welcomed == self.count:
                        self.all_welcomed.set()
                elif kind == "assignment" and not assigned:
                    assigned = True
                    self.assigned += 1
                    if self.assigned == self.count:
                        self.all_assigned.set()
        except grpc.aio.AioRpcError as error:
            if not self.closing.is_set():
                self.failures.append(f"{name}: {error.code().name} {error.details()}")

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        tasks = [asyncio.create_task(self.stream(index)) for index in range(self.count)]
        try:
            await asyncio.wait_for(self.all_welcomed.wait(), DEADLINE)
            say(f"welcomed {self.welcomed} {time.monotonic() - started:.2f}")
        except TimeoutError:
            say(f"failed {self.welcomed} welcomed; {len(self.failures)} failures {self.failures[:3]}")
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if line.strip() == "publish":
            published = time.monotonic()
            try:
                await asyncio.wait_for(self.all_assigned.wait(), DEADLINE)
                say(f"assigned {self.assigned} {time.monotonic() - published:.2f}")
            except TimeoutError:
                say(f"failed {self.assigned} assigned; {self.failures[:3]}")
            line = await loop.run_in_executor(None, sys.stdin.readline)
        self.closing.set()
        await asyncio.wait(tasks, timeout=30)
        say("closed")


def say(line: str) -> None:
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--streams", type=int, default=2000)
    options = parser.parse_args()
    asyncio.run(Swarm(options.target, options.streams).run())


if __name__ == "__main__":
    main()
