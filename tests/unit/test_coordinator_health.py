"""gRPC health and reflection on the coordinator's servers (`coordinator.services.health`).

Real `grpc.aio` servers (`aio_server.AioServer`) and real clients, as a kubelet probe or grpcurl
would ask: NOT_SERVING for the server and each service until the hub is listed, SERVING after
(a Watch sees the change), NOT_SERVING while a critical loop is stalled, `liveness` SERVING
throughout, NOT_SERVING once stopping; the health-only port serves health and nothing else;
reflection on the main server lists the coordinator's services with their descriptors.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import grpc
import pytest

from federation.coordinator.services import aio_server, health
from federation.rpc import agent_pb2
from tests.support import grpc_probes

AGENT, PLACEMENT = health.SERVICES


@pytest.fixture
def main() -> Iterator[tuple[health.HealthReporter, grpc.Channel]]:
    """A server like the coordinator's main one (health + reflection), plaintext here."""
    reporter = health.HealthReporter()
    server = aio_server.AioServer(workers=2)
    reporter.add_to(server, reflect=health.SERVICES)
    port = server.add_insecure_port("127.0.0.1:0")
    assert port
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield reporter, channel
    finally:
        channel.close()
        reporter.stop()
        server.stop(grace=None)


def test_not_serving_until_the_hub_is_listed_then_serving(
        main: tuple[health.HealthReporter, grpc.Channel]) -> None:
    reporter, channel = main
    assert {name: grpc_probes.status(channel, name) for name in health.READINESS} == dict.fromkeys(
        health.READINESS, "NOT_SERVING")
    assert grpc_probes.status(channel, health.LIVENESS) == "SERVING"
    assert grpc_probes.status(channel, "no.such.Service") == "NOT_FOUND"
    watched = grpc_probes.watch(channel)
    assert next(watched) == "NOT_SERVING"
    reporter.serving()
    assert next(watched) == "SERVING", "a Watch is told when the hub has been listed"
    watched.close()
    assert {name: grpc_probes.status(channel, name) for name in health.READINESS} == dict.fromkeys(
        health.READINESS, "SERVING")
    reporter.stop()
    assert grpc_probes.status(channel) == "NOT_SERVING", "a stopping coordinator takes no new agents"
    assert grpc_probes.status(channel, health.LIVENESS) == "NOT_SERVING"


def test_reflection_lists_the_coordinators_services(main: tuple[health.HealthReporter, grpc.Channel]) -> None:
    _, channel = main
    assert grpc_probes.services(channel) == {AGENT, PLACEMENT, health.HEALTH_SERVICE,
                                             "grpc.reflection.v1alpha.ServerReflection"}
    assert grpc_probes.file_defining(channel, AGENT) == agent_pb2.DESCRIPTOR.name


def test_the_health_port_serves_health_only() -> None:
    reporter = health.HealthReporter()
    port = reporter.listen("127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        assert grpc_probes.status(channel) == "NOT_SERVING"
        reporter.serving()
        assert grpc_probes.status(channel) == "SERVING"
        assert grpc_probes.status(channel, AGENT) == "SERVING"
        with pytest.raises(grpc.RpcError) as refused:
            grpc_probes.services(channel)
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED, "no reflection on the plaintext port"
    finally:
        channel.close()
        reporter.stop()
    reporter.stop()  # twice is fine


def test_a_taken_health_port_is_an_error_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        reporter = health.HealthReporter()
        with pytest.raises(OSError, match=f"health port 127.0.0.1:{port}"):
            reporter.listen(f"127.0.0.1:{port}")
        reporter.stop()


def test_a_second_coordinator_cannot_share_a_health_port() -> None:
    """gRPC binds with SO_REUSEPORT by default; two health servers on one port must not share it."""
    first, second = health.HealthReporter(), health.HealthReporter()
    try:
        port = first.listen("127.0.0.1:0")
        with pytest.raises(OSError, match=f"health port 127.0.0.1:{port}"):
            second.listen(f"127.0.0.1:{port}")
    finally:
        first.stop()
        second.stop()


def test_a_stalled_critical_loop_makes_readiness_not_serving_until_it_turns(
        main: tuple[health.HealthReporter, grpc.Channel]) -> None:
    reporter, channel = main
    reporter.stalled(True)  # before the hub is listed: NOT_SERVING either way
    reporter.serving()
    assert grpc_probes.status(channel) == "NOT_SERVING", "listed, but a loop is stalled"
    reporter.stalled(False)
    assert {name: grpc_probes.status(channel, name) for name in health.READINESS} == dict.fromkeys(
        health.READINESS, "SERVING")
    reporter.stalled(True)
    assert {name: grpc_probes.status(channel, name) for name in health.READINESS} == dict.fromkeys(
        health.READINESS, "NOT_SERVING")
    assert grpc_probes.status(channel, health.LIVENESS) == "SERVING", "a stall is no reason to restart"
    reporter.stalled(False)
    assert grpc_probes.status(channel) == "SERVING"
