"""Message batches on the agent stream, between the real coordinator service and the real agent link.

Why these tests: a batch changes what travels per gRPC message, never what is said. So an agent that
reads batches must end holding exactly what one that does not holds, every acknowledgement in a
batch must count as if it came alone, and a batch must never carry what would harm: a Welcome that
welcomes a stream twice, or a batch inside a batch. The coordinator side is the real facade behind
the real `AgentServicer` on a real `grpc.aio` server; the agents are the real `Link` (which announces
batches) and a plain gRPC client that announces nothing (an older agent). No Kubernetes, no Ray.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import queue
import threading
from collections.abc import Iterator

import grpc
import pytest

from agents import bookkeeping as bookkeeping_mod
from agents import outbox as outbox_mod
from agents.link import client as link_mod
from agents.link import stream as stream_mod
from federation.coordinator import facade
from federation.coordinator.model import loop, world
from federation.coordinator.services import agent_service, aio_server
from federation.coordinator.wire import assignments
from federation.rpc import agent_pb2, agent_pb2_grpc, capabilities
from tests.support import builders, polling
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
SPREADS = 40
DEADLINE = 15.0


wait = functools.partial(polling.wait, timeout=DEADLINE)
"""`polling.wait` with this file's deadline."""


class Served:
    """The coordinator's facade behind its AgentService on a loopback port, with SPREADS spreads
    each of one replica on cluster dc1; the facade's `receive` records each message's kind."""

    def __init__(self) -> None:
        self.clock = ManualClock(T0)
        self.coordinator = facade.Coordinator(world.World(self.clock), clock=self.clock,
                                              coordinator_id="test", federation_id="test-fed")
        self.received: list[agent_pb2.AgentMessage] = []
        receive = self.coordinator.receive

        def recording(stream: facade.AgentStream, message: agent_pb2.AgentMessage) -> None:
            self.received.append(message)
            receive(stream, message)

        self.coordinator.receive = recording  # type: ignore[method-assign]
        self.removals_checked: list[tuple[str, str]] = []
        check = self.coordinator._delivery.remove_if_empty

        def checking(name: str, key: str) -> None:
            self.removals_checked.append((name, key))
            check(name, key)

        self.coordinator._delivery.remove_if_empty = checking  # type: ignore[method-assign]
        self.servicer = agent_service.AgentServicer(self.coordinator, clock=self.clock, heartbeat_seconds=1,
                                                    require_identity=False)
        self.server = aio_server.AioServer(workers=4)
        agent_service.add_to_server(self.server.server, self.servicer)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        with self.coordinator.lock:
            keys: set[str] = set()
            for number in range(SPREADS):
                name = f"s{number:02d}"
                keys |= self.coordinator.world.upsert_spread(builders.federated_spread(
                    name, [{"name": "home", "clusters": ["dc1"]}], generation=1, uid=f"uid-{name}"))
                template = builders.deployment(name, namespace="shop", cpu=None)
                keys |= self.coordinator.world.set_target(f"shop/{name}", replicas=1, template=template)
            self.coordinator.publish(keys)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.stop(grace=None)
        self.servicer.close()


@pytest.fixture
def served() -> Iterator[Served]:
    found = Served()
    yield found
    found.close()


def test_the_link_is_sent_batches_holds_every_assignment_and_every_ack_applies(served: Served) -> None:
    bookkeeping, reports = bookkeeping_mod.Bookkeeping(), outbox_mod.ReportOutbox()
    reports.put_inventory(outbox_mod.inventory_message([builders.node_pool(2)], sequence=1, observed_at=T0))
    link = link_mod.Link(link_mod.LinkSettings(served.target, "dc1", heartbeat_seconds=0.2),
                         bookkeeping=bookkeeping, outbox=reports)
    batches: list[int] = []
    handle_batch = link._batch

    def counting(batch: agent_pb2.CoordinatorBatch, stream: stream_mod.Outgoing) -> None:
        batches.append(len(batch.messages))
        handle_batch(batch, stream)

    link._batch = counting  # type: ignore[method-assign]
    link.start()
    try:
        assert link.wait_connected(DEADLINE)
        wait(link.synced.is_set, what="ResyncComplete")
        held = {item.spread: item.replicas for item in bookkeeping.assignments()}
        assert held == {f"shop/s{n:02d}": 1 for n in range(SPREADS)}
        # The resync (every assignment and its end) was queued at once: it came in batches.
        assert batches and max(batches) > 1 and sum(batches) >= SPREADS + 1
        wait(lambda: len(served.removals_checked) >= SPREADS, what="every ack applied")
        assert sorted(key for _, key in served.removals_checked) == sorted(held)
        assert {name for name, _ in served.removals_checked} == {"dc1"}
        # Every ack arrived once, alone or in an AckBatch (which of the two depends on how fast gRPC
        # takes them from the link's queue; the gathering itself: the Outgoing test below).
        acks = [m for m in served.received if m.WhichOneof("body") == "acks"]
        assert sum(len(m.acks.acks) for m in acks) + sum(
            1 for m in served.received if m.WhichOneof("body") == "ack") == SPREADS
    finally:
        link.stop()


def test_a_shards_serialized_assignments_reach_the_link_as_they_were_built(served: Served) -> None:
    """Assignments a SpreadShard serialized (`assignments.Encoded`) go through the ledger, the outbox
    and the writer as bytes (`rpc.framing`), never parsed in the coordinator: the real link parses
    them, holds them and acknowledges them like any other."""
    bookkeeping, reports = bookkeeping_mod.Bookkeeping(), outbox_mod.ReportOutbox()
    reports.put_inventory(outbox_mod.inventory_message([builders.node_pool(2)], sequence=1, observed_at=T0))
    link = link_mod.Link(link_mod.LinkSettings(served.target, "dc1", heartbeat_seconds=0.2),
                         bookkeeping=bookkeeping, outbox=reports)
    link.start()
    try:
        assert link.wait_connected(DEADLINE)
        wait(link.synced.is_set, what="ResyncComplete")
        wait(lambda: len(served.removals_checked) >= SPREADS, what="the resync's acks applied")
        delivery, model = served.coordinator._delivery, served.coordinator.world
        scaled = [f"shop/s{n:02d}" for n in range(0, SPREADS, 2)]
        with served.coordinator.lock:
            for key in scaled:
                loop.recompute(model, model.set_target(
                    key, replicas=3, template=builders.deployment(key.partition("/")[2], namespace="shop",
                                                                  cpu=None)), now=T0)
                inputs = delivery.inputs_for(key, now=T0)
                assert inputs is not None
                encoded = assignments.encode(inputs, model.placements[key])["dc1"]
                delivery.deliver("dc1", key, encoded)
                assert model.pods._delivered["dc1"][key] == dict(encoded.quotas) == {"home": 3}

        def held() -> dict[str, int]:
            return {item.spread: item.replicas for item in bookkeeping.assignments()}

        wait(lambda: all(held()[key] == 3 for key in scaled), what="the encoded assignments held")
        assert held() == {f"shop/s{n:02d}": 3 if n % 2 == 0 else 1 for n in range(SPREADS)}
        wait(lambda: len(served.removals_checked) >= SPREADS + len(scaled), what="their acks applied")
        assert sorted(key for _, key in served.removals_checked[SPREADS:]) == scaled
    finally:
        link.stop()


def _older_agent(target: str, *, capabilities_said: list[str]) -> list[agent_pb2.CoordinatorMessage]:
    """What a plain client announcing `capabilities_said` receives until ResyncComplete, as it came."""
    requests: queue.Queue[agent_pb2.AgentMessage | None] = queue.Queue()
    hello = agent_pb2.Hello(cluster_name="dc1", capabilities=capabilities_said)
    requests.put(agent_pb2.AgentMessage(hello=hello))
    received: list[agent_pb2.CoordinatorMessage] = []
    with grpc.insecure_channel(target) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect(iter(requests.get, None), timeout=DEADLINE)
        for message in call:
            received.append(message)
            flat = message.batch.messages if message.WhichOneof("body") == "batch" else [message]
            if any(m.notice.code == capabilities.RESYNC_COMPLETE_CODE for m in flat):
                break
        requests.put(None)
        call.cancel()
    return received


def _flat(received: list[agent_pb2.CoordinatorMessage]) -> list[tuple[str, str, int]]:
    found = []
    for message in received:
        for item in message.batch.messages if message.WhichOneof("body") == "batch" else [message]:
            kind = item.WhichOneof("body") or ""
            body = getattr(item, kind)
            found.append((kind, getattr(body, "spread", ""), getattr(body, "replicas", 0)))
    return found


def test_an_agent_that_does_not_say_batches_is_sent_the_same_one_message_each(served: Served) -> None:
    older = _older_agent(served.target, capabilities_said=[capabilities.RESYNC_COMPLETE_CAPABILITY])
    assert all(m.WhichOneof("body") != "batch" for m in older)
    newer = _older_agent(served.target, capabilities_said=[capabilities.RESYNC_COMPLETE_CAPABILITY,
                                                            capabilities.MESSAGE_BATCHES_CAPABILITY])
    assert any(m.WhichOneof("body") == "batch" for m in newer)
    assert newer[0].WhichOneof("body") == "welcome", "the Welcome goes alone, first"
    assert _flat(newer) == _flat(older)
    assert len(newer) < len(older)


def test_the_link_ignores_a_welcome_or_a_batch_inside_a_batch(caplog: pytest.LogCaptureFixture) -> None:
    bookkeeping, reports = bookkeeping_mod.Bookkeeping(), outbox_mod.ReportOutbox()
    link = link_mod.Link(link_mod.LinkSettings("127.0.0.1:1", "dc1"), bookkeeping=bookkeeping, outbox=reports)
    stream = stream_mod.Outgoing(link.hello, outbox=reports, heartbeat_seconds=30, clock=lambda: T0,
                                 name="dc1")
    assignment = agent_pb2.CoordinatorMessage(assignment=agent_pb2.SpreadAssignment(
        spread="shop/web", generation=1, replicas=2, template_json="{}"))
    nested = agent_pb2.CoordinatorMessage(batch=agent_pb2.CoordinatorBatch(messages=[assignment]))
    batch = agent_pb2.CoordinatorMessage(batch=agent_pb2.CoordinatorBatch(messages=[
        agent_pb2.CoordinatorMessage(welcome=agent_pb2.Welcome(cluster_name="dc1")), nested]))
    with caplog.at_level(logging.WARNING):
        link._handle(batch, stream)
    assert not stream.welcomed, "a Welcome inside a batch welcomes nothing"
    assert bookkeeping.assignments() == [], "a batch inside a batch is not read"
    assert [r.message for r in caplog.records].count("coordinator batch entry ignored") == 2
    alone = agent_pb2.CoordinatorMessage(batch=agent_pb2.CoordinatorBatch(messages=[assignment]))
    link._handle(alone, stream)
    assert [item.replicas for item in bookkeeping.assignments()] == [2], "the same entry, not nested, applies"
    stream.close()


def _taken(stream: stream_mod.Outgoing, count: int) -> list[agent_pb2.AgentMessage]:
    messages = stream.messages()
    next(messages)  # the Hello
    return [next(messages) for _ in range(count)]


@pytest.mark.parametrize("batches", [True, False])
def test_the_agent_gathers_consecutive_acks_only_for_a_coordinator_that_reads_them(batches: bool) -> None:
    reports = outbox_mod.ReportOutbox()
    stream = stream_mod.Outgoing(lambda: agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster_name="dc1")),
                                 outbox=reports, heartbeat_seconds=30, clock=lambda: T0, name="dc1")
    stream.welcomed_now(heartbeat_seconds=30, batches=batches)

    def ack(spread: str) -> agent_pb2.AgentMessage:
        return agent_pb2.AgentMessage(ack=agent_pb2.Ack(spread=spread, generation=1))

    unschedulable = agent_pb2.AgentMessage(unschedulable=agent_pb2.UnschedulableReport(spread="shop/x",
                                                                                       subset="home"))
    for message in (ack("shop/a"), ack("shop/b"), unschedulable, ack("shop/c")):
        stream.send(message)
    try:
        if batches:
            first, second, third = _taken(stream, 3)
            assert [a.spread for a in first.acks.acks] == ["shop/a", "shop/b"]
            assert second == unschedulable, "what follows the acks is sent next: nothing overtakes"
            assert third == ack("shop/c"), "an ack alone goes as an Ack"
        else:
            assert _taken(stream, 4) == [ack("shop/a"), ack("shop/b"), unschedulable, ack("shop/c")]
    finally:
        stream.close()


def test_wake_ups_that_arrive_before_the_loop_takes_them_share_one_turn() -> None:
    loop = asyncio.new_event_loop()
    running = threading.Thread(target=loop.run_forever, daemon=True)
    running.start()
    try:
        wakes = agent_service._Wakes(loop)
        gate = threading.Event()
        loop.call_soon_threadsafe(gate.wait)  # the loop is busy until the gate opens
        events = [asyncio.Event() for _ in range(100)]
        for event in events:
            wakes.wake(event)
        assert len(wakes._due) == 100, "queued together behind one scheduled turn"
        gate.set()
        wait(lambda: all(event.is_set() for event in events), what="every writer woken")
        assert wakes._due == []
        later = asyncio.Event()
        wakes.wake(later)  # the next one schedules a turn of its own
        wait(later.is_set, what="a later wake-up")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        running.join(5)
        loop.close()
