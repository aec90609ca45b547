"""The placement benchmark's stand-in agents: one live AgentService stream per member cluster.

Why coroutines in a process of their own: the goal is stated with every agent stream live (1,000
clusters), and the figures are the coordinator's — its memory, its threads — so the agents must
neither share its process nor cost a thread each. Each stream is a coroutine on one `grpc.aio`
loop with its own channel and connection, as an agent has: Hello, a full InventoryReport of the
cluster's node pools (`placement_world.pools`), a Heartbeat every `HEARTBEAT_SECONDS`; it
acknowledges each assignment as an agent does once applied (the coordinator sends a removal only
after an acknowledged share of 0), in batches as the agent's link does (`--unbatched`: one message
each way); and it remembers, per spread, the `fingerprint` of the last few assignments or removals
it got and when (CLOCK_MONOTONIC, which every process of the machine shares).

What an "event" costs is then measured end to end: the coordinator's process notes what it sent for
the event (the same fingerprints), and asks this process when every one of those arrived — from the
event to every affected agent holding its new quotas. Decoding on this side is part of that time.

Driven over stdin/stdout, one line each way (JSON after the word):

    -> ready {"streams": N, "seconds": S}        every stream welcomed and resynced
    <- expect {"since": T, "pairs": [[cluster, spread, fingerprint, newer...], ...], "timeout": S}
    -> held {"count": N, "latency_s": S}          the last of them arrived S after T (a pair is held
                                                  once its fingerprint or a newer one arrived)
       (or {"count": N, "missing": M, "example": ..., "streams_ended": E, "ended": [...]} when the
       timeout passed first: E streams had ended before `close` and were opened again)
    <- ended {}
    -> ended {"count": E, "examples": [...]}      streams that ended before `close` so far, and how
    <- capacity {"cluster": I, "change": D, "stuck": [[spread, subset], ...]}
                                                  send cluster I's pools with D nodes more, then
                                                  an UnschedulableReport per stuck subset
    -> sent {"at": T}                             T: when the report was written
    <- close                                      close every stream; -> closed

Run by bench/placement.py: `python -m bench.placement_swarm --target HOST:PORT SHAPE...`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import pathlib
import random
import subprocess
import sys
import time
from typing import IO, Any

import grpc
from google.protobuf import timestamp_pb2

from bench import placement_world
from federation.api import names
from federation.certs import pki
from federation.rpc import agent_pb2, agent_pb2_grpc, capabilities

HEARTBEAT_SECONDS = 30.0
CONNECT_DEADLINE = 600.0
SCAN_SECONDS = 0.05
RECONNECT_SECONDS = 0.5
"""A stream that ended is opened again after this long (to twice it, jittered), as an agent does."""
KEPT = 4
Message = agent_pb2.SpreadAssignment | agent_pb2.SpreadRemoval


class Agents:
    """This program run as a child process, driven over its line protocol (the module's docstring):
    what the coordinator's side of a benchmark holds."""

    def __init__(self, target: str, shape: placement_world.Shape, tls: pathlib.Path | None = None, *,
                 batches: bool = True) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.placement_swarm", "--target", target,
             "--shape", json.dumps(dataclasses.asdict(shape)), *(["--tls", str(tls)] if tls else []),
             *([] if batches else ["--unbatched"])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        word, self.ready = self._read()
        if word != "ready":
            raise RuntimeError(f"the stand-in agents did not start: {self.ready}")

    def _read(self) -> tuple[str, dict[str, Any]]:
        stdout: IO[str] | None = self.process.stdout
        line = stdout.readline() if stdout is not None else ""
        if not line:
            raise RuntimeError(f"the stand-in agents exited ({self.process.poll()})")
        word, _, body = line.strip().partition(" ")
        return word, json.loads(body or "{}")

    def ask(self, word: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{word} {json.dumps(body)}\n")
        self.process.stdin.flush()
        return self._read()[1]

    def close(self) -> None:
        if self.process.stdin is not None and self.process.poll() is None:
            try:
                self.process.stdin.write("close\n")
                self.process.stdin.close()
            except OSError:
                pass
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def certificates(directory: pathlib.Path) -> pathlib.Path:
    """A CA, the coordinator's serving certificate and one client certificate every stand-in agent
    presents, written into `directory` (ca.crt, coordinator.crt/.key, agents.crt/.key)."""
    authority = pki.CertificateAuthority.create("bench-placement-ca")
    (directory / "ca.crt").write_bytes(authority.cert_pem)
    authority.issue_server("fedspread-coordinator", ips=("127.0.0.1",)).write(directory, "coordinator")
    authority.issue_client("bench-agents").write(directory, "agents")
    return directory


def fingerprint(message: Message | bytes) -> str:
    """What identifies one assignment or removal on both sides of the wire (bytes: the serialized
    `CoordinatorMessage` of an assignment, as the coordinator queues a SpreadShard's)."""
    if isinstance(message, bytes):
        message = agent_pb2.CoordinatorMessage.FromString(message).assignment
    kind = "a" if isinstance(message, agent_pb2.SpreadAssignment) else "r"
    return kind + hashlib.blake2b(message.SerializeToString(deterministic=True), digest_size=8).hexdigest()


class Swarm:
    """Every cluster's stream, and what each holds."""

    def __init__(self, target: str, shape: placement_world.Shape,
                 credentials: grpc.ChannelCredentials | None = None, *, batches: bool = True) -> None:
        self.target = target
        self.shape = shape
        self.credentials = credentials
        self.batches = batches
        """Announce `capabilities.MESSAGE_BATCHES_CAPABILITY` and send acks in batches to a
        coordinator that reads them, as the agent's link does (False: one message each way)."""
        self.ack_batches = [False] * shape.clusters
        """Per cluster: its coordinator's Welcome said it reads AckBatches."""
        """TLS for every stream (the coordinator's CA, one client certificate); None: plaintext."""
        self.held: dict[tuple[str, str], dict[str, float]] = {}
        """(cluster, spread) -> fingerprint -> arrival of its last `KEPT` assignments or removals
        (an acknowledged share of 0 is followed by a removal: the share still arrived)."""
        self.welcomed = 0
        self.all_welcomed = asyncio.Event()
        self.closing = asyncio.Event()
        self.outboxes = [asyncio.Queue[agent_pb2.AgentMessage]() for _ in range(shape.clusters)]
        self.failures: list[str] = []
        """How each stream that ended before `close` ended (it was opened again)."""
        self.resynced: set[int] = set()
        self.sequences = [1] * shape.clusters

    async def stream(self, index: int) -> None:
        """Cluster `index`'s stream until `close`, opened again whenever it ends before (as an agent
        reconnects: the coordinator then sends it everything again); each end is recorded."""
        name = placement_world.cluster_name(index)
        while not self.closing.is_set():
            try:
                ended = await self._stream(index, name)
            except grpc.aio.AioRpcError as error:
                ended = f"{error.code().name} {error.details()}"
            if self.closing.is_set():
                return
            self.failures.append(f"{name}: {ended}")
            await asyncio.sleep(RECONNECT_SECONDS * (1 + random.random()))

    async def _stream(self, index: int, name: str) -> str:
        """One stream, until `close` (then "") or until it ends: how it ended."""
        options = [("grpc.use_local_subchannel_pool", 1), ("grpc.max_receive_message_length", 64 << 20)]
        channel_of = (grpc.aio.insecure_channel(self.target, options=options) if self.credentials is None
                      else grpc.aio.secure_channel(self.target, self.credentials, options=options))
        async with channel_of as channel:
            call = agent_pb2_grpc.AgentServiceStub(channel).Connect(wait_for_ready=True)
            await call.write(agent_pb2.AgentMessage(hello=agent_pb2.Hello(
                cluster_name=name, agent_version="bench",
                capabilities=[capabilities.RESYNC_COMPLETE_CAPABILITY,
                              *([capabilities.MESSAGE_BATCHES_CAPABILITY] if self.batches else [])],
                topology_labels={names.REGION_LABEL: placement_world.region_of(index, self.shape)})))
            self.sequences[index] += 1
            pools = placement_world.pools(index, self.shape)
            await call.write(agent_pb2.AgentMessage(inventory=agent_pb2.InventoryReport(
                full=True, sequence=self.sequences[index], node_pools=pools)))
            reading = asyncio.create_task(self.read(call, name, index))
            writing = asyncio.create_task(self._write(call, index))
            try:
                await asyncio.wait([reading, writing], return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (reading, writing):
                    task.cancel()
                call.cancel()
            if reading.done() and not reading.cancelled():
                return reading.result()
            error = writing.exception() if writing.done() and not writing.cancelled() else None
            return f"writing failed: {error}" if error is not None else ""

    async def _write(self, call: Any, index: int) -> None:
        """The cluster's queued messages (acks, reports), a Heartbeat when there were none for a while;
        acks queued together go as one AckBatch to a coordinator that reads them, as the link's do."""
        outbox, held = self.outboxes[index], None
        while not self.closing.is_set():
            try:
                message = (held if held is not None
                           else await asyncio.wait_for(outbox.get(), HEARTBEAT_SECONDS))
            except TimeoutError:
                message = agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(sequence=1))
            held, acks = None, [message.ack]
            while (message.WhichOneof("body") == "ack" and self.ack_batches[index] and held is None
                   and not outbox.empty() and len(acks) < capabilities.BATCH_MAX_MESSAGES):
                following = outbox.get_nowait()
                if following.WhichOneof("body") == "ack":
                    acks.append(following.ack)
                else:
                    held = following  # sent next: nothing overtakes anything
            await call.write(message if len(acks) == 1 else agent_pb2.AgentMessage(
                acks=agent_pb2.AckBatch(acks=acks)))

    async def read(self, call: Any, name: str, index: int) -> str:
        """Take the coordinator's messages until the stream ends; how it ended ("" on `close`)."""
        try:
            await self._read(call, name, index)
        except grpc.aio.AioRpcError as error:
            return "" if self.closing.is_set() else f"{error.code().name} {error.details()}"
        return "" if self.closing.is_set() else "the coordinator ended the stream"

    async def _read(self, call: Any, name: str, index: int) -> None:
        async for received in call:
            for reply in received.batch.messages if received.WhichOneof("body") == "batch" else [received]:
                self._take(reply, name, index)

    def _take(self, reply: agent_pb2.CoordinatorMessage, name: str, index: int) -> None:
        """One message (alone, or out of a batch): an assignment or removal held (an assignment
        acked), the Welcome's capabilities noted, the first resync's end counted."""
        kind = reply.WhichOneof("body")
        if kind == "welcome":
            self.ack_batches[index] = (self.batches and capabilities.MESSAGE_BATCHES_CAPABILITY
                                       in reply.welcome.capabilities)
        elif kind == "assignment" or kind == "removal":
            message = getattr(reply, kind)
            kept = self.held.setdefault((name, message.spread), {})
            print_ = fingerprint(message)
            # One sent again (a resync) keeps its first arrival and counts as the newest.
            kept[print_] = kept.pop(print_, None) or time.monotonic()
            if len(kept) > KEPT:
                del kept[next(iter(kept))]
            if kind == "assignment":
                self.outboxes[index].put_nowait(agent_pb2.AgentMessage(ack=agent_pb2.Ack(
                    spread=message.spread, generation=message.generation)))
        elif kind == "notice" and reply.notice.code == capabilities.RESYNC_COMPLETE_CODE \
                and index not in self.resynced:
            self.resynced.add(index)  # the first stream's resync; a reopened one is not counted
            self.welcomed += 1
            if self.welcomed == self.shape.clusters:
                self.all_welcomed.set()

    async def expect(self, since: float, pairs: list[list[str]], timeout: float) -> dict[str, Any]:
        """Wait until every (cluster, spread) holds its fingerprint; when the last one arrived."""
        deadline = time.monotonic() + timeout
        waiting = [(cluster, spread, set(prints)) for cluster, spread, *prints in pairs]
        while True:
            waiting = [p for p in waiting if not p[2] & self.held.get((p[0], p[1]), {}).keys()]
            if not waiting:
                break
            if time.monotonic() > deadline:
                first = waiting[0]
                example = [first[0], first[1], sorted(first[2])]
                return {"count": len(pairs), "missing": len(waiting), "example": example,
                        "streams_ended": len(self.failures), "ended": self.failures[:3]}
            await asyncio.sleep(SCAN_SECONDS)  # arrival times are stamped on receipt, not here
        last = max((min(t for f, t in self.held[(c, s)].items() if f in prints) for c, s, *prints in pairs),
                   default=since)
        return {"count": len(pairs), "latency_s": round(max(0.0, last - since), 6)}

    def capacity(self, index: int, change: int, stuck: list[list[str]]) -> dict[str, float]:
        """Queue cluster `index`'s full inventory with `change` nodes, then an UnschedulableReport for
        each (spread, subset) of `stuck` (pods that no longer fit, Pending); when it was queued."""
        self.sequences[index] += 1
        report = agent_pb2.InventoryReport(full=True, sequence=self.sequences[index],
                                           node_pools=placement_world.pools(index, self.shape, change=change))
        at = time.monotonic()
        outbox = self.outboxes[index]
        outbox.put_nowait(agent_pb2.AgentMessage(inventory=report))
        since = timestamp_pb2.Timestamp()
        since.GetCurrentTime()
        for spread, subset in stuck:
            outbox.put_nowait(agent_pb2.AgentMessage(unschedulable=agent_pb2.UnschedulableReport(
                spread=spread, subset=subset, since=since, pod_count=1,
                reason="0/20 nodes are available: 20 Insufficient cpu.")))
        return {"at": at}

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        tasks = [asyncio.create_task(self.stream(index)) for index in range(self.shape.clusters)]
        try:
            await asyncio.wait_for(self.all_welcomed.wait(), CONNECT_DEADLINE)
        except TimeoutError:
            say("failed", {"welcomed": self.welcomed, "failures": self.failures[:3]})
            return
        say("ready", {"streams": self.welcomed, "seconds": round(time.monotonic() - started, 2)})
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            word, _, rest = line.strip().partition(" ")
            if word == "expect":
                asked = json.loads(rest)
                say("held", await self.expect(asked["since"], asked["pairs"], asked["timeout"]))
            elif word == "capacity":
                asked = json.loads(rest)
                say("sent", self.capacity(asked["cluster"], asked["change"], asked.get("stuck", [])))
            elif word == "ended":
                say("ended", {"count": len(self.failures), "examples": self.failures[:3]})
            elif word == "close":
                break
        self.closing.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        say("closed", {"failures": self.failures[:3]})


def say(word: str, body: dict[str, Any]) -> None:
    print(word, json.dumps(body), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.placement_swarm",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="the coordinator's AgentService, HOST:PORT")
    parser.add_argument("--shape", required=True, help="the federation's placement_world.Shape, as JSON")
    parser.add_argument("--tls", type=pathlib.Path, metavar="DIRECTORY",
                        help="connect over mutual TLS with ca.crt, agents.crt and agents.key from here")
    parser.add_argument("--unbatched", action="store_true",
                        help="announce no message batches: one gRPC message per assignment and per ack")
    options = parser.parse_args(argv)
    shape = placement_world.Shape(**json.loads(options.shape))
    credentials = None
    if options.tls is not None:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=(options.tls / "ca.crt").read_bytes(),
            private_key=(options.tls / "agents.key").read_bytes(),
            certificate_chain=(options.tls / "agents.crt").read_bytes())
    asyncio.run(Swarm(options.target, shape, credentials, batches=not options.unbatched).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
