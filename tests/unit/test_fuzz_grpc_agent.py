"""AgentService under bad input over a real gRPC server: out of order, malformed, oversized, fuzzed.

Why: an agent is a remote process — an old version, a buggy one, or not an agent at all. Whatever
it sends, the coordinator must answer with a specific status (INVALID_ARGUMENT for a stream that
does not open with a usable Hello, RESOURCE_EXHAUSTED for a message over the limit) or a
`BadReport` notice naming the field at fault, keep the stream's reader alive, keep the World free
of impossible facts (a cluster named "Foo Bar", negative pod counts), and keep serving the next
agent. The server uses the coordinator's own options (`inbound.SERVER_OPTIONS`); the coordinator
facade and the servicer are the real ones, with an injected clock. No Kubernetes, no Ray.
"""

from __future__ import annotations

import datetime
import functools
import queue
import re
from collections.abc import Iterator
from typing import Any

import grpc
import hypothesis
import pytest
from hypothesis import strategies as st

from federation.api import spread as spread_api
from federation.coordinator import facade
from federation.coordinator.model import world
from federation.coordinator.services import agent_service, aio_server
from federation.coordinator.wire import inbound
from federation.rpc import agent_pb2, agent_pb2_grpc, common_pb2
from tests.support import polling

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
DEADLINE = 20.0
BIG = inbound.MAX_MESSAGE_BYTES + 1024
LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
CLUSTER_NAME = re.compile(rf"{LABEL}(\.{LABEL})*")
SETTINGS = hypothesis.settings(max_examples=40, deadline=None,
                               suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture,
                                                      hypothesis.HealthCheck.too_slow])


wait = functools.partial(polling.wait, timeout=DEADLINE)
"""`polling.wait` with this file's deadline."""


class Coordinator:
    """The real facade and servicer on a real server built with the coordinator's options."""

    def __init__(self) -> None:
        clock = lambda: T0  # noqa: E731 - the world's clock stands still: nothing here expires
        self.facade = facade.Coordinator(world.World(clock), clock=clock, coordinator_id="fuzz")
        servicer = agent_service.AgentServicer(self.facade, clock=clock, heartbeat_seconds=0.5,
                                                require_identity=False)
        self.server = aio_server.AioServer(options=inbound.SERVER_OPTIONS, workers=4)
        agent_service.add_to_server(self.server.server, servicer)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        # The client may send more than the server accepts: that is the point of some tests.
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}",
                                             options=[("grpc.max_send_message_length", 4 * BIG)])

    def pools(self, cluster: str) -> set[str]:
        """Names of the pools the World holds for `cluster`."""
        with self.facade.lock:
            snapshot = self.facade.world.snapshot_for("none/none")
        return {p.name for c in snapshot.clusters if c.name == cluster for p in c.node_pools}

    def stop(self) -> None:
        self.channel.close()
        self.server.stop(grace=None)


class Stream:
    """One raw agent stream: queue messages in, read the coordinator's replies (pings skipped)."""

    def __init__(self, coordinator: Coordinator, *first: agent_pb2.AgentMessage) -> None:
        self.requests: queue.Queue[agent_pb2.AgentMessage | None] = queue.Queue()
        for message in first:
            self.requests.put(message)
        stub = agent_pb2_grpc.AgentServiceStub(coordinator.channel)
        self.call = stub.Connect(iter(self.requests.get, None), timeout=DEADLINE)
        self.replies = iter(self.call)

    def send(self, **body: Any) -> None:
        self.requests.put(agent_pb2.AgentMessage(**body))

    def next(self) -> agent_pb2.CoordinatorMessage:
        """The next reply that is not a Ping."""
        for reply in self.replies:
            if reply.WhichOneof("body") != "ping":
                return reply
        raise AssertionError("the stream ended")

    def welcomed(self) -> Stream:
        """Read Welcome and ResyncComplete."""
        assert self.next().WhichOneof("body") == "welcome"
        assert self.next().notice.code == "ResyncComplete"
        return self

    def close(self) -> None:
        self.requests.put(None)
        self.call.cancel()


@pytest.fixture
def coordinator() -> Iterator[Coordinator]:
    running = Coordinator()
    yield running
    running.stop()


def hello(name: str = "dc1", **extra: Any) -> agent_pb2.AgentMessage:
    return agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster_name=name, **extra))


def inventory(*pools: common_pb2.NodePool, full: bool = True, base: int = 0) -> dict[str, Any]:
    return {"inventory": agent_pb2.InventoryReport(full=full, sequence=base + 1, base_sequence=base,
                                                   node_pools=list(pools))}


def pool(name: str = "std", *, count: int = 2, **resources: dict[str, str]) -> common_pb2.NodePool:
    return common_pb2.NodePool(name=name, count=count,
                               allocatable=resources.get("allocatable", {"cpu": "4", "pods": "110"}),
                               requested=resources.get("requested", {}))


def refused(stream: Stream) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as failure:
        stream.next()
    stream.close()
    return failure.value


def a_good_agent_still_connects(coordinator: Coordinator, name: str = "good") -> None:
    """A well-behaved agent is welcomed, and its inventory reaches the World."""
    stream = Stream(coordinator, hello(name)).welcomed()
    stream.send(**inventory(pool("proof")))
    wait(lambda: "proof" in coordinator.pools(name), what=f"inventory of {name}")
    stream.close()


# --- the first message ---------------------------------------------------------------------------------

NOT_HELLO = {
    "inventory": agent_pb2.InventoryReport(full=True), "pod_counts": agent_pb2.PodCountsReport(full=True),
    "heartbeat": agent_pb2.Heartbeat(), "unschedulable": agent_pb2.UnschedulableReport(spread="a/b"),
    "ack": agent_pb2.Ack(spread="a/b"),
}


@pytest.mark.parametrize("kind", sorted(NOT_HELLO))
def test_a_report_before_hello_is_invalid_argument(coordinator: Coordinator, kind: str) -> None:
    stream = Stream(coordinator, agent_pb2.AgentMessage(**{kind: NOT_HELLO[kind]}))
    failure = refused(stream)
    assert failure.code() == grpc.StatusCode.INVALID_ARGUMENT and "Hello" in failure.details()
    assert coordinator.facade.connected() == []
    a_good_agent_still_connects(coordinator)


def test_a_stream_closed_before_any_message_is_invalid_argument(coordinator: Coordinator) -> None:
    stream = Stream(coordinator)
    stream.requests.put(None)
    assert refused(stream).code() == grpc.StatusCode.INVALID_ARGUMENT
    a_good_agent_still_connects(coordinator)


BAD_NAMES = ["", "DC1", "dc 1", "dc_1", "a/b", "-dc1", "dc1-", "dc1.", ".dc1", "dc..1", "ünï", "dc1\n",
             "\x00", "x" * 254, "x" * 100_000]


@pytest.mark.parametrize("name", BAD_NAMES, ids=lambda n: repr(n[:12]) + f"({len(n)})")
def test_hello_with_a_name_no_cluster_can_have_is_invalid_argument(coordinator: Coordinator,
                                                                   name: str) -> None:
    failure = refused(Stream(coordinator, hello(name)))
    assert failure.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "cluster_name" in failure.details() and len(failure.details()) < 500
    assert coordinator.facade.world.cluster_names() == []
    a_good_agent_still_connects(coordinator)


@SETTINGS
@hypothesis.given(name=st.text(max_size=80) | st.from_regex(CLUSTER_NAME, fullmatch=True))
def test_hello_names_are_welcomed_exactly_when_they_could_name_a_cluster(coordinator: Coordinator,
                                                                         name: str) -> None:
    valid = bool(CLUSTER_NAME.fullmatch(name)) and len(name) <= 253
    stream = Stream(coordinator, hello(name))
    if valid:
        stream.welcomed().close()
        assert name in coordinator.facade.world.cluster_names()
    else:
        assert refused(stream).code() == grpc.StatusCode.INVALID_ARGUMENT
        assert name not in coordinator.facade.world.cluster_names()


# --- out of order and malformed reports ------------------------------------------------------------------


def bad_report(stream: Stream) -> str:
    notice = stream.next().notice
    assert (notice.code, notice.severity) == ("BadReport", agent_pb2.Notice.SEVERITY_WARNING), notice
    return str(notice.message)


def test_a_second_hello_is_a_bad_report_and_the_stream_lives_on(coordinator: Coordinator) -> None:
    stream = Stream(coordinator, hello("dc1")).welcomed()
    stream.requests.put(hello("dc1"))  # (a Hello naming another cluster is PERMISSION_DENIED: test_mtls)
    assert "only valid as the first message" in bad_report(stream)
    stream.send(**inventory(pool("after")))
    wait(lambda: "after" in coordinator.pools("dc1"), what="the inventory after a second Hello")
    assert coordinator.facade.connected() == ["dc1"], "the second Hello must not rename the stream"
    stream.close()


def test_a_delta_inventory_before_any_full_one_asks_for_a_resync(coordinator: Coordinator) -> None:
    stream = Stream(coordinator, hello("dc1")).welcomed()
    stream.send(**inventory(pool("delta"), full=False, base=7))
    resync = stream.next().resync
    assert resync.inventory and "delta on 7" in resync.reason
    assert "delta" not in coordinator.pools("dc1")
    stream.close()


@pytest.mark.parametrize(("report", "fragment"), [
    pytest.param(inventory(pool(count=-3)), "node_pools[0].count", id="negative-node-count"),
    pytest.param(inventory(pool(allocatable={"cpu": "lots"})), "node_pools[0].allocatable.cpu",
                 id="malformed-quantity"),
    pytest.param(inventory(pool(), pool("x", allocatable={"pods": "1e999999999"})),
                 "exponent is out of range", id="absurd-exponent"),
    pytest.param(inventory(pool(requested={"memory": "4 Gi"})), "node_pools[0].requested.memory",
                 id="quantity-with-a-space"),
    pytest.param({"pod_counts": agent_pb2.PodCountsReport(full=True, spreads=[agent_pb2.SpreadPodCounts(
        spread="shop/web", subsets=[agent_pb2.SubsetPodCounts(subset="a", counts=agent_pb2.PodCounts(
            running=-4))])])}, "subsets[0].counts.running is negative", id="negative-running"),
    pytest.param({"pod_counts": agent_pb2.PodCountsReport(full=True, spreads=[agent_pb2.SpreadPodCounts(
        spread="shop/web", workload=agent_pb2.WorkloadStatus(ready_replicas=-1))])},
        "workload.ready_replicas is negative", id="negative-workload-status"),
    pytest.param({"unschedulable": agent_pb2.UnschedulableReport(spread="shop/web")},
                 "needs spread and subset", id="unschedulable-without-subset"),
])
def test_a_malformed_report_is_a_bad_report_naming_the_field(coordinator: Coordinator, report: dict[str, Any],
                                                             fragment: str) -> None:
    stream = Stream(coordinator, hello("dc1")).welcomed()
    stream.send(**inventory(pool("before")))
    wait(lambda: "before" in coordinator.pools("dc1"), what="the first inventory")
    stream.send(**report)
    message = bad_report(stream)
    assert fragment in message, message
    assert "errors.pydantic.dev" not in message and "Traceback" not in message
    assert coordinator.pools("dc1") == {"before"}, "a refused report changes nothing"
    stream.send(**inventory(pool("after")))
    wait(lambda: coordinator.pools("dc1") == {"after"}, what="the inventory after the bad report")
    stream.close()


def test_reports_about_unknown_spreads_are_kept_and_place_nothing(coordinator: Coordinator) -> None:
    stream = Stream(coordinator, hello("dc1")).welcomed()
    stream.send(pod_counts=agent_pb2.PodCountsReport(full=True, spreads=[agent_pb2.SpreadPodCounts(
        spread="nowhere/nothing", subsets=[agent_pb2.SubsetPodCounts(subset="a", counts=agent_pb2.PodCounts(
            running=3))])]))
    stream.send(unschedulable=agent_pb2.UnschedulableReport(spread="nowhere/nothing", subset="a"))
    stream.send(ack=agent_pb2.Ack(spread="nowhere/nothing", generation=9, error="x" * 10_000))
    stream.send(**inventory(pool("marker")))
    wait(lambda: "marker" in coordinator.pools("dc1"), what="the marker inventory")
    assert dict(coordinator.facade.world.placements) == {}
    stream.close()


def test_huge_but_well_formed_capacities_are_placed(coordinator: Coordinator) -> None:
    stream = Stream(coordinator, hello("dc1")).welcomed()
    stream.send(**inventory(pool("vast", count=2**31 - 1, allocatable={"pods": "1e300", "cpu": "9Ei"},
                                 requested={"cpu": "1e-300"})))
    wait(lambda: "vast" in coordinator.pools("dc1"), what="the vast inventory")
    item = spread_api.FederatedSpread.model_validate({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"targetRef": {"name": "web"}, "scheduleStrategy": {"type": "Adaptive"},
                 "subsets": [{"name": "all", "clusters": ["dc1"], "clusterSpread": "Capacity"}]}})
    with coordinator.facade.lock:
        keys = coordinator.facade.world.upsert_spread(item)
        keys |= coordinator.facade.world.set_target("shop/web", replicas=2**31 - 1, template=None)
        coordinator.facade.publish(keys)
        result = coordinator.facade.world.placements["shop/web"]
    assert result.placed + result.unplaced == 2**31 - 1 and result.clusters == {"dc1": 2**31 - 1}
    assert stream.next().assignment.replicas == 2**31 - 1
    stream.close()


# --- oversized messages ------------------------------------------------------------------------------------


def test_an_oversized_hello_is_resource_exhausted(coordinator: Coordinator) -> None:
    failure = refused(Stream(coordinator, hello("dc1", agent_version="v" * BIG)))
    assert failure.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert coordinator.facade.connected() == []
    a_good_agent_still_connects(coordinator)


def test_an_oversized_report_ends_only_its_stream(coordinator: Coordinator) -> None:
    other = Stream(coordinator, hello("aws")).welcomed()
    stream = Stream(coordinator, hello("dc1")).welcomed()
    stream.send(**inventory(pool("p" * BIG)))
    assert refused(stream).code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    wait(lambda: coordinator.facade.connected() == ["aws"], what="dc1's stream to be dropped")
    other.send(**inventory(pool("aws-after")))
    wait(lambda: "aws-after" in coordinator.pools("aws"), what="aws still served")
    a_good_agent_still_connects(coordinator, "dc1")
    other.close()


# --- fuzzing ---------------------------------------------------------------------------------------------

_TEXT = st.text(max_size=12)
_INT32 = st.integers(-(2**31), 2**31 - 1)
_QUANTITY = st.sampled_from(["1", "-5", "500m", "4Gi", "lots", "1e999999999", "1e300", "", "0.5n"]) | _TEXT
_POOL = st.builds(common_pb2.NodePool, name=_TEXT, count=_INT32,
                  labels=st.dictionaries(_TEXT, _TEXT, max_size=2),
                  allocatable=st.dictionaries(st.sampled_from(["cpu", "pods", "memory"]), _QUANTITY,
                                              max_size=3),
                  requested=st.dictionaries(st.sampled_from(["cpu", "pods"]), _QUANTITY, max_size=2))
_COUNTS = st.builds(agent_pb2.PodCounts, running=_INT32, ready=_INT32, pending=_INT32)
_MESSAGES = st.one_of(
    st.builds(agent_pb2.AgentMessage, inventory=st.builds(
        agent_pb2.InventoryReport, full=st.booleans(), sequence=st.integers(0, 5),
        base_sequence=st.integers(0, 5), node_pools=st.lists(_POOL, max_size=3),
        removed_pools=st.lists(_TEXT, max_size=2))),
    st.builds(agent_pb2.AgentMessage, pod_counts=st.builds(
        agent_pb2.PodCountsReport, full=st.booleans(), spreads=st.lists(st.builds(
            agent_pb2.SpreadPodCounts, spread=_TEXT | st.just("shop/web"), subsets=st.lists(st.builds(
                agent_pb2.SubsetPodCounts, subset=_TEXT, counts=_COUNTS), max_size=2)), max_size=2))),
    st.builds(agent_pb2.AgentMessage, unschedulable=st.builds(
        agent_pb2.UnschedulableReport, spread=_TEXT, subset=_TEXT, pod_count=_INT32)),
    st.builds(agent_pb2.AgentMessage, heartbeat=st.builds(agent_pb2.Heartbeat,
                                                          sequence=st.integers(0, 2**64 - 1))),
    st.builds(agent_pb2.AgentMessage, ack=st.builds(
        agent_pb2.Ack, spread=_TEXT, generation=st.integers(-(2**63), 2**63 - 1), error=_TEXT)),
    # A later Hello for its own cluster (another cluster's name ends the stream: test_mtls).
    st.builds(agent_pb2.AgentMessage, hello=st.builds(agent_pb2.Hello, cluster_name=st.just("fuzz"))),
    st.just(agent_pb2.AgentMessage()),
)


@SETTINGS
@hypothesis.given(messages=st.lists(_MESSAGES, max_size=8))
def test_any_sequence_of_reports_leaves_the_stream_serving(coordinator: Coordinator,
                                                           messages: list[agent_pb2.AgentMessage]) -> None:
    stream = Stream(coordinator, hello("fuzz")).welcomed()
    for message in messages:
        stream.requests.put(message)
    stream.send(**inventory(pool("marker")))
    # The reader applies messages in order: the marker arriving proves it survived all before it.
    wait(lambda: "marker" in coordinator.pools("fuzz"), what="the marker inventory")
    assert coordinator.facade.connected() == ["fuzz"]
    stream.requests.put(None)  # the agent ends its side; the coordinator ends the call cleanly
    kinds = {reply.WhichOneof("body") for reply in stream.replies}
    assert kinds <= {"notice", "resync", "assignment", "removal", "ping"}, kinds
    assert stream.call.code() == grpc.StatusCode.OK
    wait(lambda: coordinator.facade.connected() == [], what="the stream to end")
