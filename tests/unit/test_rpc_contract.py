"""The wire contract: generated code in sync with the protos, messages round-trip, and a real gRPC
server answers through the generated stubs with proper status codes (never UNKNOWN)."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from google.protobuf import message as pb_message
from google.protobuf import timestamp_pb2

from federation.rpc import (
    agent_pb2,
    agent_pb2_grpc,
    common_pb2,
    generate,
    placement_pb2,
    placement_pb2_grpc,
)

TIMEOUT = 10.0


def _ts(seconds: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=0)


# --- generated code -------------------------------------------------------------------------


def test_generated_code_matches_protos() -> None:
    stale = generate.stale_files()
    assert not stale, (
        f"generated gRPC code is out of date ({', '.join(stale)}); run `make protos` and commit"
    )


def test_generated_modules_use_package_absolute_imports() -> None:
    for path in generate.RPC_DIR.iterdir():
        if path.name.endswith(generate.GENERATED_SUFFIXES):
            for line in path.read_text(encoding="utf-8").splitlines():
                if "_pb2" in line and line.lstrip().startswith(("import ", "from . ")):
                    pytest.fail(f"{path.name}: relative or bare import {line.strip()!r}")


def test_absolutize_imports_rewrites_bare_and_relative_imports() -> None:
    text = (
        "import grpc\n"
        "import agent_pb2 as agent__pb2\n"
        "from . import common_pb2 as common__pb2\n"
        "from google.protobuf import timestamp_pb2 as _timestamp_pb2\n"
    )
    out = generate.absolutize_imports(text, {"agent_pb2", "common_pb2"})
    assert out == (
        "import grpc\n"
        "from federation.rpc import agent_pb2 as agent__pb2\n"
        "from federation.rpc import common_pb2 as common__pb2\n"
        "from google.protobuf import timestamp_pb2 as _timestamp_pb2\n"
    )


def test_descriptors_live_in_the_fedspread_v1_package() -> None:
    agent_service = agent_pb2.DESCRIPTOR.services_by_name["AgentService"]
    assert agent_service.full_name == "fedspread.v1.AgentService"
    connect = agent_service.methods_by_name["Connect"]
    assert connect.client_streaming and connect.server_streaming
    placement_service = placement_pb2.DESCRIPTOR.services_by_name["PlacementService"]
    assert set(placement_service.methods_by_name) == {
        "GetPlacement", "ListPlacements", "WatchPlacement", "ListClusters", "Simulate", "Explain",
        "Rebalance",
    }
    assert placement_service.methods_by_name["WatchPlacement"].server_streaming
    # Unique file names in the global descriptor pool (no bare "common.proto").
    assert common_pb2.DESCRIPTOR.name == "federation/rpc/common.proto"


# --- messages round-trip --------------------------------------------------------------------


def _pool() -> common_pb2.NodePool:
    return common_pb2.NodePool(
        name="ecs",
        count=10,
        labels={"type": "ecs"},
        taints=[common_pb2.Taint(key="dedicated", value="batch", effect="NoSchedule")],
        allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"},
        requested={"cpu": "2", "memory": "4Gi", "pods": "10"},
    )


def _placement() -> placement_pb2.Placement:
    return placement_pb2.Placement(
        spread="shop/web",
        replicas=40,
        unplaced=2,
        capacity_exhausted=1,
        clusters={"dc1": 30, "aws-eu": 8},
        ready={"dc1": 29, "aws-eu": 8},
        subsets=[
            placement_pb2.SubsetPlacement(
                name="onprem",
                replicas=30,
                cap="30",
                clusters=[
                    placement_pb2.ClusterReplicas(cluster="dc1", replicas=30, ready_replicas=29),
                ],
            ),
            placement_pb2.SubsetPlacement(
                name="cloud",
                replicas=8,
                cap="",
                waiting=1,
                clusters=[
                    placement_pb2.ClusterReplicas(cluster="gcp-eu", replicas=0),
                    placement_pb2.ClusterReplicas(cluster="aws-eu", replicas=8, ready_replicas=8),
                ],
            ),
        ],
        conditions=[
            common_pb2.Condition(type="Placed", status="True", reason="Placed", message="ok",
                                 last_transition_time=_ts(1_700_000_000)),
        ],
        usage=placement_pb2.FederationUsage(
            metrics={"fedspread-cpu-utilization": "65", "fedspread-ready-replicas": "37"}, ready_pods=37,
            unmeasured_pods=8, without_metrics=["gcp-eu"], stale=["aws-eu"]),
        observed_generation=3,
        computed_at=_ts(1_700_000_100),
    )


AGENT_MESSAGES: list[agent_pb2.AgentMessage] = [
    agent_pb2.AgentMessage(hello=agent_pb2.Hello(
        cluster_name="dc1",
        agent_version="0.1.0",
        topology_labels={"topology.fedspread.io/region": "eu-west"},
        resume_token="tok",
        applied=[agent_pb2.AppliedSpread(spread="shop/web", generation=7, template_revision="abc")],
        capabilities=["inventory-delta"],
        started_at=_ts(1_700_000_000),
    )),
    agent_pb2.AgentMessage(inventory=agent_pb2.InventoryReport(
        full=False, sequence=5, base_sequence=4, node_pools=[_pool()], removed_pools=["old"],
        observed_at=_ts(1_700_000_001),
    )),
    agent_pb2.AgentMessage(pod_counts=agent_pb2.PodCountsReport(
        full=True,
        sequence=2,
        spreads=[agent_pb2.SpreadPodCounts(
            spread="shop/web",
            generation=7,
            template_revision="abc",
            subsets=[agent_pb2.SubsetPodCounts(subset="onprem", counts=agent_pb2.PodCounts(
                running=28, ready=27, pending=2, unschedulable=1, creating=1, deleting=1),
                revisions=[agent_pb2.RevisionPodCount(revision="5d9c7f", pods=20),
                           agent_pb2.RevisionPodCount(revision="7b8f6c", pods=11)])],
            unassigned=agent_pb2.PodCounts(running=1),
            workload=agent_pb2.WorkloadStatus(replicas=30, ready_replicas=27, updated_replicas=30,
                                              available_replicas=27, unavailable_replicas=3,
                                              observed_generation=4),
            dependency_conflicts=["Secret/web-credentials"],
            autoscalers=["shop/web-hpa"],
        ), agent_pb2.SpreadPodCounts(
            spread="shop/batch",
            workload=agent_pb2.WorkloadStatus(job=agent_pb2.JobStatus(
                active=2, succeeded=4, failed=1, start_time=_ts(1_700_000_000), complete=False,
                failed_condition=False, has_completions=True, completions=6)),
        )],
        observed_at=_ts(1_700_000_002),
    )),
    agent_pb2.AgentMessage(unschedulable=agent_pb2.UnschedulableReport(
        spread="shop/web", subset="onprem", since=_ts(1_700_000_003), pod_count=2,
        reason="0/3 nodes are available: 3 Insufficient cpu.", generation=7,
    )),
    agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(sent_at=_ts(1_700_000_004), sequence=9,
                                                         ping_nonce=42)),
    agent_pb2.AgentMessage(ack=agent_pb2.Ack(spread="shop/web", generation=7, error="")),
    agent_pb2.AgentMessage(acks=agent_pb2.AckBatch(acks=[
        agent_pb2.Ack(spread="shop/web", generation=7), agent_pb2.Ack(spread="shop/api", generation=2,
                                                                      error="stale generation 2")])),
    agent_pb2.AgentMessage(usage=agent_pb2.UsageReport(
        interval_seconds=15, metrics_unavailable_reason="", observed_at=_ts(1_700_000_005),
        spreads=[agent_pb2.SpreadUsage(
            spread="shop/web", ready_pods=3, measured_pods=2, cpu_requested_pods=2, memory_requested_pods=1,
            cpu_usage_milli=900, memory_usage_milli=64 * 2**20 * 1000, cpu_utilization_milli=180_000,
            memory_utilization_milli=50_000, sampled_at=_ts(1_700_000_001), window_milliseconds=15_000)])),
    agent_pb2.AgentMessage(usage=agent_pb2.UsageReport(
        interval_seconds=15, metrics_unavailable_reason="MetricsAPINotFound",
        metrics_unavailable_message="metrics.k8s.io/v1beta1 is not served here (404)",
        spreads=[agent_pb2.SpreadUsage(spread="shop/web", ready_pods=3)])),
]

COORDINATOR_MESSAGES: list[agent_pb2.CoordinatorMessage] = [
    agent_pb2.CoordinatorMessage(welcome=agent_pb2.Welcome(
        cluster_name="dc1", coordinator_id="coord-1", heartbeat_interval_seconds=10,
        full_resync=True, resume_token="tok2", capabilities=["inventory-delta"],
        server_time=_ts(1_700_000_000),
    )),
    agent_pb2.CoordinatorMessage(assignment=agent_pb2.SpreadAssignment(
        spread="shop/web",
        generation=8,
        template_json='{"apiVersion":"apps/v1","kind":"Deployment","spec":{"replicas":40}}',
        template_revision="abc",
        replicas=30,
        subsets=[
            agent_pb2.SubsetRule(
                name="onprem",
                index=0,
                required_node_selector_term_json=(
                    '{"matchExpressions":[{"key":"type","operator":"In","values":["ecs"]}]}'
                ),
                preferred_node_selector_terms_json="[]",
                tolerations_json='[{"key":"dedicated","operator":"Exists"}]',
                patch_json='{"metadata":{"labels":{"tier":"base"}}}',
                quota=30,
            ),
            agent_pb2.SubsetRule(name="cloud", index=1, quota=0,
                                 unschedulable_until=_ts(1_700_000_300)),
        ],
        subset_count=2,
        strategy=agent_pb2.StrategySettings(type="Adaptive", reschedule_critical_seconds=30,
                                            unschedulable_seconds=300),
        target=agent_pb2.WorkloadRef(api_version="apps/v1", kind="Deployment", namespace="shop",
                                     name="web"),
        issued_at=_ts(1_700_000_005),
        propagate_dependencies=True,
        dependencies=[
            agent_pb2.Dependency(api_version="v1", kind="ConfigMap", name="web-config",
                                 object_json='{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"1"}}'),
            agent_pb2.Dependency(api_version="v1", kind="Secret", name="absent-on-hub"),
        ],
    )),
    agent_pb2.CoordinatorMessage(removal=agent_pb2.SpreadRemoval(spread="shop/old", generation=3,
                                                                 orphan=False, reason="deleted")),
    agent_pb2.CoordinatorMessage(ping=agent_pb2.Ping(sent_at=_ts(1_700_000_006), nonce=42)),
    agent_pb2.CoordinatorMessage(notice=agent_pb2.Notice(
        severity=agent_pb2.Notice.SEVERITY_WARNING, code="UnknownSpread", message="no such spread",
        spread="shop/gone",
    )),
    agent_pb2.CoordinatorMessage(resync=agent_pb2.ResyncRequest(inventory=True, reason="gap")),
    agent_pb2.CoordinatorMessage(batch=agent_pb2.CoordinatorBatch(messages=[
        agent_pb2.CoordinatorMessage(removal=agent_pb2.SpreadRemoval(spread="shop/web", generation=8)),
        agent_pb2.CoordinatorMessage(resync=agent_pb2.ResyncRequest(pod_counts=True, reason="ask"))])),
]

PLACEMENT_MESSAGES: list[pb_message.Message] = [
    placement_pb2.GetPlacementRequest(spread="shop/web"),
    placement_pb2.ListPlacementsRequest(namespace="shop", page_size=10, page_token="t"),
    placement_pb2.ListPlacementsResponse(placements=[_placement()], next_page_token="n"),
    placement_pb2.WatchPlacementRequest(spread="shop/web"),
    placement_pb2.PlacementEvent(type=placement_pb2.PlacementEvent.TYPE_MODIFIED, spread="shop/web",
                                 placement=_placement(), observed_at=_ts(1_700_000_007)),
    placement_pb2.ListClustersRequest(include_node_pools=True),
    placement_pb2.ListClustersResponse(clusters=[placement_pb2.ClusterInfo(
        name="dc1", labels={"topology.fedspread.io/region": "eu-west"}, ready=True, cordoned=False,
        taints=[common_pb2.Taint(key="maintenance", effect="NoSchedule")],
        last_heartbeat=_ts(1_700_000_008), agent_version="0.1.0", node_count=10,
        allocatable={"cpu": "80"}, requested={"cpu": "20"},
        conditions=[common_pb2.Condition(type="Ready", status="True")], node_pools=[_pool()],
    )]),
    placement_pb2.SimulateRequest(spread_yaml="spec: {}", replicas=0, template_json="{}",
                                  clusters_json='{"clusters": []}'),
    placement_pb2.ExplainRequest(spread="shop/web"),
    placement_pb2.ExplainRequest(simulation=placement_pb2.SimulateRequest(spread_yaml="spec: {}")),
    _placement(),
    placement_pb2.Explanation(
        spread="shop/web",
        placement=_placement(),
        subsets=[placement_pb2.SubsetExplanation(
            name="onprem", cap="30", capacity=-1, replicas=30, reasons=["cap 30"],
            clusters=[placement_pb2.ClusterExplanation(
                cluster="dc1", ready=True, cordoned=False, unschedulable=True,
                unschedulable_until=_ts(1_700_000_300), free_capacity=-1, replicas=30,
                reasons=["marked unschedulable"],
            )],
        )],
        reasons=["2 replicas beyond every cap"],
    ),
    placement_pb2.RebalanceRequest(spread="shop/web", dry_run=True, max_surge=2),
    placement_pb2.RebalancePlan(spread="shop/web", policy="Never", started=True, steps=[
        placement_pb2.RebalanceStep(moves=[placement_pb2.RebalanceMove(
            from_subset="cloud", from_cluster="aws", to_subset="onprem", to_cluster="dc1", replicas=2)])]),
]


def _round_trip(msg: pb_message.Message) -> pb_message.Message:
    parsed = type(msg)()
    parsed.ParseFromString(msg.SerializeToString(deterministic=True))
    return parsed


@pytest.mark.parametrize(
    "msg", AGENT_MESSAGES, ids=[m.WhichOneof("body") or "empty" for m in AGENT_MESSAGES]
)
def test_agent_messages_round_trip(msg: agent_pb2.AgentMessage) -> None:
    parsed = _round_trip(msg)
    assert parsed == msg
    assert parsed.WhichOneof("body") == msg.WhichOneof("body")


@pytest.mark.parametrize(
    "msg", COORDINATOR_MESSAGES, ids=[m.WhichOneof("body") or "empty" for m in COORDINATOR_MESSAGES]
)
def test_coordinator_messages_round_trip(msg: agent_pb2.CoordinatorMessage) -> None:
    parsed = _round_trip(msg)
    assert parsed == msg
    assert parsed.WhichOneof("body") == msg.WhichOneof("body")


@pytest.mark.parametrize(
    "msg",
    PLACEMENT_MESSAGES,
    ids=[f"{i}-{type(m).__name__}" for i, m in enumerate(PLACEMENT_MESSAGES)],
)
def test_placement_messages_round_trip(msg: pb_message.Message) -> None:
    assert _round_trip(msg) == msg


def test_every_top_level_message_is_covered_by_a_round_trip() -> None:
    covered: set[str] = set()

    def visit(m: pb_message.Message) -> None:
        covered.add(m.DESCRIPTOR.full_name)
        for field, value in m.ListFields():
            if field.message_type is None or field.message_type.GetOptions().map_entry:
                continue
            for item in value if field.is_repeated else [value]:
                visit(item)

    for m in [*AGENT_MESSAGES, *COORDINATOR_MESSAGES, *PLACEMENT_MESSAGES]:
        visit(m)
    declared = {
        d.full_name
        for module in (agent_pb2, placement_pb2, common_pb2)
        for d in module.DESCRIPTOR.message_types_by_name.values()
    }
    assert declared - covered == set()


def test_simulate_replicas_has_presence() -> None:
    request = placement_pb2.SimulateRequest(spread_yaml="spec: {}")
    assert not request.HasField("replicas")
    request.replicas = 0
    assert request.HasField("replicas")
    assert _round_trip(request).HasField("replicas")


def test_unknown_fields_survive_an_older_reader() -> None:
    """A newer peer's extra fields are kept, not an error (the compatibility rule relies on it)."""
    field_111 = bytes([0xF8, 0x06, 0x01])  # varint field number 111, value 1
    newer = agent_pb2.Heartbeat(sequence=1).SerializeToString() + field_111
    parsed = agent_pb2.Heartbeat.FromString(newer)
    assert parsed.sequence == 1
    assert parsed.SerializeToString().endswith(field_111)


# --- a real gRPC server ---------------------------------------------------------------------


class _PlacementServicer(placement_pb2_grpc.PlacementServiceServicer):
    def GetPlacement(
        self, request: placement_pb2.GetPlacementRequest, context: grpc.ServicerContext
    ) -> placement_pb2.Placement:
        if request.spread != "shop/web":
            context.abort(grpc.StatusCode.NOT_FOUND, f"spread {request.spread!r} not found")
        return _placement()


class _AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    def Connect(
        self, request_iterator: Iterator[agent_pb2.AgentMessage], context: grpc.ServicerContext
    ) -> Iterator[agent_pb2.CoordinatorMessage]:
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("body") != "hello":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message must be Hello")
            return
        hello = first.hello
        yield agent_pb2.CoordinatorMessage(welcome=agent_pb2.Welcome(
            cluster_name=hello.cluster_name,
            coordinator_id="test-coordinator",
            heartbeat_interval_seconds=5,
            full_resync=not hello.resume_token,
        ))
        for msg in request_iterator:
            if msg.WhichOneof("body") == "heartbeat":
                ping = agent_pb2.Ping(nonce=msg.heartbeat.sequence)
                yield agent_pb2.CoordinatorMessage(ping=ping)


@pytest.fixture
def channel() -> Iterator[grpc.Channel]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    placement_pb2_grpc.add_PlacementServiceServicer_to_server(_PlacementServicer(), server)
    agent_pb2_grpc.add_AgentServiceServicer_to_server(_AgentServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    assert port > 0
    server.start()
    chan = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield chan
    finally:
        chan.close()
        server.stop(grace=None).wait(TIMEOUT)


def test_get_placement_over_grpc(channel: grpc.Channel) -> None:
    stub = placement_pb2_grpc.PlacementServiceStub(channel)
    placement = stub.GetPlacement(placement_pb2.GetPlacementRequest(spread="shop/web"),
                                  timeout=TIMEOUT)
    assert placement.spread == "shop/web"
    assert placement.replicas == 40
    assert placement.unplaced == 2
    assert dict(placement.clusters) == {"dc1": 30, "aws-eu": 8}
    assert [s.name for s in placement.subsets] == ["onprem", "cloud"]
    assert [(c.cluster, c.replicas) for c in placement.subsets[1].clusters] == [
        ("gcp-eu", 0), ("aws-eu", 8),
    ]
    assert placement.subsets[0].cap == "30"
    assert placement.computed_at.seconds == 1_700_000_100


def test_unknown_spread_is_not_found_not_unknown(channel: grpc.Channel) -> None:
    stub = placement_pb2_grpc.PlacementServiceStub(channel)
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetPlacement(placement_pb2.GetPlacementRequest(spread="shop/nope"), timeout=TIMEOUT)
    error = caught.value
    assert isinstance(error, grpc.Call)
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert "shop/nope" in (error.details() or "")


def test_unimplemented_method_is_unimplemented(channel: grpc.Channel) -> None:
    stub = placement_pb2_grpc.PlacementServiceStub(channel)
    with pytest.raises(grpc.RpcError) as caught:
        stub.ListClusters(placement_pb2.ListClustersRequest(), timeout=TIMEOUT)
    assert isinstance(caught.value, grpc.Call)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_agent_connect_hello_welcome(channel: grpc.Channel) -> None:
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    outbox: queue.Queue[agent_pb2.AgentMessage | None] = queue.Queue()

    def requests() -> Iterator[agent_pb2.AgentMessage]:
        while (msg := outbox.get(timeout=TIMEOUT)) is not None:
            yield msg

    responses = stub.Connect(requests(), timeout=TIMEOUT)
    outbox.put(agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster_name="dc1",
                                                            agent_version="0.1.0")))
    first = next(responses)
    assert first.WhichOneof("body") == "welcome"
    assert first.welcome.cluster_name == "dc1"
    assert first.welcome.coordinator_id == "test-coordinator"
    assert first.welcome.full_resync is True

    outbox.put(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(sequence=7)))
    second = next(responses)
    assert second.WhichOneof("body") == "ping"
    assert second.ping.nonce == 7

    outbox.put(None)  # half-close: the server's loop ends and so does the stream
    assert list(responses) == []
    assert responses.code() == grpc.StatusCode.OK


def test_agent_connect_without_hello_is_invalid_argument(channel: grpc.Channel) -> None:
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    responses = stub.Connect(
        iter([agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(sequence=1))]), timeout=TIMEOUT
    )
    with pytest.raises(grpc.RpcError) as caught:
        list(responses)
    assert isinstance(caught.value, grpc.Call)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
