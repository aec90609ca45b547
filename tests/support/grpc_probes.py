"""What a kubelet probe, grpc_health_probe or grpcurl asks a gRPC server, for the tests.

Why shared: the unit tests of `coordinator.services.health` and the integration test of the real
coordinator process ask the same two questions — a health Check (or the first answers of a Watch)
and the service list by reflection — over a real channel, plaintext or mTLS.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import proto_reflection_descriptor_database as reflection_db

SECONDS = 5.0
"""Deadline of each call: a probe's timeout."""


def status(channel: grpc.Channel, service: str = "") -> str:
    """The health Check's answer for `service` ("" for the server), as its enum name
    (SERVING, NOT_SERVING, ...), or the gRPC status code's name when the call fails."""
    try:
        answer = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=SECONDS)
    except grpc.RpcError as error:
        code = error.code()
        return str(code.name) if code is not None else "UNKNOWN"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))


def watch(channel: grpc.Channel, service: str = "") -> Iterator[str]:
    """The statuses a health Watch of `service` streams (enum names), as they come; closing the
    generator cancels the call."""
    call = health_pb2_grpc.HealthStub(channel).Watch(
        health_pb2.HealthCheckRequest(service=service), timeout=SECONDS * 4)
    try:
        for answer in call:
            yield str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))
    finally:
        call.cancel()


def services(channel: grpc.Channel) -> set[str]:
    """The services the server lists by reflection (UNIMPLEMENTED raises: no reflection)."""
    return set(reflection_db.ProtoReflectionDescriptorDatabase(channel).get_services())


def file_defining(channel: grpc.Channel, symbol: str) -> str:
    """The name of the .proto file reflection serves for `symbol`."""
    found = reflection_db.ProtoReflectionDescriptorDatabase(channel).FindFileContainingSymbol(symbol)
    return str(found.name)
