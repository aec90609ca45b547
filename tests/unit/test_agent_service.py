"""The coordinator's AgentService against the real agent link, over real gRPC on loopback.

Why this way: the service is the contract between two packages written apart; only the agent's own
`Link` (with its real bookkeeping and outbox) proves the coordinator speaks what the agent expects —
Welcome, full resync then `ResyncComplete`, deltas, removals, pings — and a real server is the only
way to exercise stream ends, reconnects and status codes. The world clock is injected (failover);
waits poll with deadlines. No Kubernetes, no Ray.
"""

from __future__ import annotations

import datetime
import functools
import queue
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from agents import bookkeeping as bookkeeping_mod
from agents import outbox as outbox_mod
from agents.link import client as link_mod
from federation.coordinator import facade
from federation.coordinator.model import world
from federation.coordinator.services import agent_service, aio_server
from federation.coordinator.wire import inbound
from federation.rpc import agent_pb2, agent_pb2_grpc, keepalive
from federation.rpc import assignment as assignment_mod
from tests.support import builders, polling
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
KEY = "shop/web"
DEADLINE = 10.0
TWO_SUBSETS: list[dict[str, Any]] = [
    {"name": "onprem", "clusters": ["dc1"], "maxReplicas": 3},
    {"name": "cloud", "clusters": ["aws"]},
]


wait = functools.partial(polling.wait, timeout=DEADLINE)
"""`polling.wait` with this file's deadline."""


class Agent:
    """A real link with real bookkeeping and outbox, recording what its callbacks saw."""

    def __init__(self, target: str, name: str) -> None:
        self.name = name
        self.bookkeeping = bookkeeping_mod.Bookkeeping()
        self.outbox = outbox_mod.ReportOutbox()
        self.applied: list[assignment_mod.Assignment] = []
        self.removed: list[str] = []
        self.link = link_mod.Link(
            link_mod.LinkSettings(target, name, heartbeat_seconds=0.2, backoff_initial_seconds=0.05,
                                  backoff_cap_seconds=0.3),
            bookkeeping=self.bookkeeping, outbox=self.outbox, on_assignment=self.applied.append,
            on_removal=lambda spread, orphan: self.removed.append(spread))
        self.outbox.put_inventory(outbox_mod.inventory_message(
            [builders.node_pool(2)],
            sequence=1, observed_at=T0))

    def quotas(self) -> tuple[int, ...] | None:
        current = self.bookkeeping.assignment(KEY)
        return None if current is None else tuple(s.quota for s in current.subsets)


class Federation:
    """A coordinator facade, its servicer on a real gRPC server, and agents connected to it."""

    def __init__(self) -> None:
        self.clock = ManualClock(T0)
        self.coordinator = facade.Coordinator(world.World(self.clock), clock=self.clock,
                                              coordinator_id="test", federation_id="test-fed")
        self.hellos: list[agent_pb2.Hello] = []
        self.servicer = agent_service.AgentServicer(
            self.coordinator, clock=self.clock, heartbeat_seconds=1, on_cluster_hello=self.hellos.append,
            require_identity=False)  # plaintext here; identities over mTLS: test_mtls.py
        self.port = 0
        self.server: aio_server.AioServer | None = None
        self.agents: dict[str, Agent] = {}

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        server = aio_server.AioServer(workers=4)
        agent_service.add_to_server(server.server, self.servicer)
        self.port = server.add_insecure_port(f"127.0.0.1:{self.port}")
        assert self.port, "cannot bind"
        server.start()
        self.server = server

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(grace=None)
            self.server = None

    def connect(self, *names: str) -> None:
        for name in names:
            self.agents[name] = agent = Agent(self.target, name)
            agent.link.start()
        for name in names:
            agent = self.agents[name]
            assert agent.link.wait_connected(DEADLINE), f"{name} not welcomed"
            wait(agent.link.synced.is_set, what=f"ResyncComplete for {name}")
            wait(functools.partial(self._has_inventory, name), what=f"inventory of {name}")

    def _has_inventory(self, name: str) -> bool:
        with self.coordinator.lock:
            snapshot = self.coordinator.world.snapshot_for(KEY)
        return any(c.name == name and c.node_pools for c in snapshot.clusters)

    def place(self, *, replicas: int, lost_seconds: int = 30) -> None:
        with self.coordinator.lock:
            keys = self.coordinator.world.upsert_spread(
                builders.federated_spread("web", TWO_SUBSETS, generation=1, lost_seconds=lost_seconds,
                                          uid="uid-web-1"))
            keys |= self.coordinator.world.set_target(
                KEY, replicas=replicas, template=builders.deployment(namespace="shop"))
            self.coordinator.publish(keys)

    def scale(self, replicas: int) -> None:
        with self.coordinator.lock:
            self.coordinator.publish(
                self.coordinator.world.set_target(
                    KEY, replicas=replicas, template=builders.deployment(namespace="shop")))

    def close(self) -> None:
        for agent in self.agents.values():
            agent.link.stop()
        self.stop()
        self.servicer.close()


@pytest.fixture
def fed() -> Iterator[Federation]:
    federation = Federation()
    federation.start()
    yield federation
    federation.close()


@pytest.fixture
def placed(fed: Federation) -> Federation:
    fed.connect("dc1", "aws", "gcp")
    fed.place(replicas=5)
    wait(lambda: fed.agents["dc1"].quotas() == (3, 0), what="dc1 assignment")
    wait(lambda: fed.agents["aws"].quotas() == (0, 2), what="aws assignment")
    return fed


def test_hello_welcome_then_assignment_with_quotas(placed: Federation) -> None:
    dc1 = placed.agents["dc1"]
    assert dc1.link.connected and dc1.link.synced.is_set()
    assert sorted(h.cluster_name for h in placed.hellos) == ["aws", "dc1", "gcp"]
    assert all("resync-complete" in h.capabilities for h in placed.hellos)
    current = dc1.bookkeeping.assignment(KEY)
    assert current is not None
    assert (current.replicas, current.workload, current.namespace) == (3, "web", "shop")
    assert [s.name for s in current.subsets] == ["onprem", "cloud"]
    assert current.template["metadata"] == {"name": "web", "namespace": "shop"}
    assert placed.coordinator.connected() == ["aws", "dc1", "gcp"]
    # Ownership: the spread's uid travels with the assignment, the federation comes from Welcome.
    assert (current.spread_uid, current.federation) == ("uid-web-1", "test-fed")


def test_scale_sends_only_the_delta(placed: Federation) -> None:
    dc1, aws, gcp = (placed.agents[n] for n in ("dc1", "aws", "gcp"))
    before = len(dc1.applied)
    placed.scale(6)
    wait(lambda: aws.quotas() == (0, 3), what="aws scaled to 3")
    placed.scale(6)  # no change: nothing sent
    time.sleep(0.3)
    assert len(dc1.applied) == before, "dc1's share did not change; it must not be re-sent"
    assert gcp.applied == [] and gcp.bookkeeping.assignments() == []
    assert len(aws.applied) == 2


def forgot(agent: Agent) -> bool:
    return agent.bookkeeping.assignment(KEY) is None


def test_deleting_the_spread_removes_it_from_agents(placed: Federation) -> None:
    with placed.coordinator.lock:
        placed.coordinator.publish(placed.coordinator.world.delete_spread(KEY))
    for name in ("dc1", "aws"):
        agent = placed.agents[name]
        wait(functools.partial(forgot, agent), what=f"removal on {name}")
        assert agent.removed == [KEY]
    assert placed.agents["gcp"].removed == []


@pytest.mark.parametrize("first", [
    pytest.param(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat()), id="not-hello"),
    pytest.param(agent_pb2.AgentMessage(hello=agent_pb2.Hello()), id="empty-cluster-name"),
])
def test_stream_must_start_with_a_named_hello(fed: Federation, first: agent_pb2.AgentMessage) -> None:
    with grpc.insecure_channel(fed.target) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        with pytest.raises(grpc.RpcError) as failure:
            list(stub.Connect(iter([first]), timeout=DEADLINE))
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def raw_stream(fed: Federation, name: str) -> tuple[queue.Queue[Any], Any]:
    requests: queue.Queue[Any] = queue.Queue()
    requests.put(agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster_name=name)))
    channel = grpc.insecure_channel(fed.target)
    call = agent_pb2_grpc.AgentServiceStub(channel).Connect(iter(requests.get, None), timeout=DEADLINE)
    return requests, call


def test_a_stream_without_hello_ends_after_the_hello_deadline(
    fed: Federation, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(agent_service, "HELLO_SECONDS", 0.3)
    requests: queue.Queue[Any] = queue.Queue()
    with grpc.insecure_channel(fed.target) as channel:
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect(iter(requests.get, None), timeout=DEADLINE)
        with pytest.raises(grpc.RpcError) as failure:
            list(call)
        requests.put(None)
    assert failure.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "no Hello within" in (failure.value.details() or "")


def test_keepalive_settings_of_both_ends_agree() -> None:
    """The server must accept the agent's PINGs (else GOAWAY too_many_pings after two strikes)."""
    server, client = dict(inbound.SERVER_OPTIONS), dict(keepalive.CHANNEL_OPTIONS)
    assert server["grpc.http2.min_ping_interval_without_data_ms"] < client["grpc.keepalive_time_ms"]
    assert server["grpc.keepalive_permit_without_calls"] == client["grpc.keepalive_permit_without_calls"] == 1
    assert server["grpc.http2.max_pings_without_data"] == client["grpc.http2.max_pings_without_data"] == 0
    assert server["grpc.keepalive_time_ms"] and server["grpc.keepalive_timeout_ms"]


def test_bad_report_is_a_notice_and_the_stream_lives_on(fed: Federation) -> None:
    requests, call = raw_stream(fed, "raw")
    replies = iter(call)
    assert next(replies).WhichOneof("body") == "welcome"
    assert next(replies).notice.code == "ResyncComplete"
    requests.put(agent_pb2.AgentMessage(unschedulable=agent_pb2.UnschedulableReport()))
    notice = next(replies).notice
    assert (notice.code, notice.severity) == ("BadReport", agent_pb2.Notice.SEVERITY_WARNING)
    assert next(replies).WhichOneof("body") == "ping"  # still served
    requests.put(None)
    call.cancel()


def test_second_stream_for_a_cluster_replaces_the_first(fed: Federation) -> None:
    old_requests, old = raw_stream(fed, "dup")
    old_replies = iter(old)
    assert next(old_replies).WhichOneof("body") == "welcome"
    new_requests, new = raw_stream(fed, "dup")
    assert next(iter(new)).WhichOneof("body") == "welcome"
    with pytest.raises(grpc.RpcError) as failure:
        list(old_replies)
    assert failure.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert fed.coordinator.connected() == ["dup"]
    for requests, call in ((old_requests, old), (new_requests, new)):
        requests.put(None)
        call.cancel()


def test_a_stream_that_ends_while_it_is_being_attached_is_detached_afterwards(fed: Federation) -> None:
    with fed.coordinator.lock:  # the facade is busy: attach waits on its pool
        requests, call = raw_stream(fed, "late")
        wait(lambda: [h for h in fed.hellos if h.cluster_name == "late"], what="the Hello")
        call.cancel()
        time.sleep(0.2)  # the servicer sees the call end before attach returns
    wait(lambda: "late" in fed.coordinator.world.cluster_names(), what="the attach")
    wait(lambda: fed.coordinator.connected() == [], what="the late detach")
    requests.put(None)


def test_silent_agent_fails_over_after_cluster_lost_seconds(placed: Federation) -> None:
    dc1, aws = placed.agents["dc1"], placed.agents["aws"]
    dc1.link.stop()
    wait(lambda: "dc1" not in placed.coordinator.connected(), what="dc1 stream gone")
    placed.clock.advance(29)
    wait(lambda: placed.coordinator.world.tracker.last("aws") == placed.clock(), what="aws heartbeat")
    assert placed.coordinator.tick().clusters == ()
    placed.clock.advance(2)
    wait(lambda: placed.coordinator.world.tracker.last("aws") == placed.clock(), what="aws heartbeat")
    lost = placed.coordinator.tick()
    assert lost.clusters == ("dc1",) and lost.keys == {KEY}
    wait(lambda: aws.quotas() == (0, 5), what="replicas moved to aws")
    assert dc1.quotas() == (3, 0), "the silent agent keeps its last quotas (fail static)"


def test_reconnect_gets_a_full_resync(placed: Federation) -> None:
    dc1 = placed.agents["dc1"]
    applied_before = len(dc1.applied)
    placed.stop()
    wait(lambda: not dc1.link.connected, what="dc1 disconnected")
    dc1.link.synced.clear()
    placed.start()
    assert dc1.link.wait_connected(DEADLINE)
    wait(dc1.link.synced.is_set, what="ResyncComplete after reconnect")
    assert dc1.link.connects == 2
    hello = [h for h in placed.hellos if h.cluster_name == "dc1"][-1]
    assert [(a.spread, a.generation) for a in hello.applied] == [(KEY, 1)]
    assert len(dc1.applied) == applied_before + 1, "the unchanged assignment is re-sent in full"
    assert dc1.quotas() == (3, 0)


def test_resync_waits_for_the_hub_and_removes_nothing_it_does_not_know() -> None:
    clock = ManualClock(T0)
    coordinator = facade.Coordinator(world.World(clock), clock=clock, hub_synced=False)
    hello = agent_pb2.Hello(cluster_name="dc1", applied=[agent_pb2.AppliedSpread(spread="shop/gone")])
    stream = coordinator.attach(hello, heartbeat_seconds=1)
    kinds = [stream.outgoing.get_nowait().WhichOneof("body")]  # type: ignore[attr-defined]
    assert kinds == ["welcome"] and stream.outgoing.empty()
    assert coordinator.publish(["shop/anything"]).placements == {}  # nothing is placed before the hub
    coordinator.mark_hub_synced()
    notice = stream.outgoing.get_nowait().notice  # type: ignore[attr-defined]
    assert notice.code == "ResyncComplete" and "1 unknown, kept" in notice.message, "no removal first"
    assert stream.outgoing.empty()
    coordinator.detach(stream)
    assert coordinator.connected() == []
