"""The SDK and PlacementService under bad names and oversized requests, over a real gRPC server.

Why: spread keys come from people and scripts (`fedspread get placement "$NS/$NAME"` with an
empty variable, a pasted URL, a 100 kB string). Each must end in a specific status — NOT_FOUND for
a well-formed key the coordinator does not know, INVALID_ARGUMENT for one that cannot be a
Kubernetes namespace/name — and the SDK must raise its typed error (`SpreadNotFound`,
`InvalidRequest`), never UNKNOWN, never a bare protobuf or gRPC exception. The rule a key must
follow is restated here (DNS label "/" DNS subdomain) so the fuzzer does not trust the server's own
check. After every bad call a good one still works. The server is built with the coordinator's own
options (`inbound.SERVER_OPTIONS`), so "oversized" means what it means in production.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import hypothesis
import pytest
from hypothesis import strategies as st

from federation import sdk
from federation.api import cluster
from federation.coordinator.services import aio_server, placement_requests, placement_service
from federation.coordinator.wire import convert, inbound
from federation.core import placement
from federation.rpc import placement_pb2, placement_pb2_grpc
from tests.support import in_memory_source, sdk_clients

SPREAD_YAML = """
metadata: {name: web, namespace: shop}
spec:
  targetRef: {name: web}
  subsets: [{name: onprem, clusters: [dc1], maxReplicas: 2}, {name: rest, clusters: [aws]}]
"""
SETTINGS = hypothesis.settings(max_examples=80, deadline=None,
                               suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
VALID_KEY = re.compile(rf"{LABEL}/{LABEL}(\.{LABEL})*")
MAX_DETAILS = 1000
"""An error's message must stay short whatever the key (status details travel in headers)."""


def well_formed(key: str) -> bool:
    """The rule restated: a namespace (DNS label, <= 63) "/" a name (DNS subdomain, <= 253)."""
    namespace, _, name = key.partition("/")
    return bool(VALID_KEY.fullmatch(key)) and len(namespace) <= 63 and len(name) <= 253


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    source = in_memory_source.InMemorySource(clusters=[
        convert.ClusterRecord(name="dc1"), convert.ClusterRecord(name="aws")])
    spec = placement_requests.parse_spread(SPREAD_YAML)
    snapshot = cluster.CapacitySnapshot(clusters=[c.to_capacity() for c in source.clusters()])
    source.put("shop/web", convert.PlacementRecord(
        key="shop/web", spec=spec, placement=placement.place(spec, replicas=5, snapshot=snapshot)))
    server = aio_server.AioServer(options=inbound.SERVER_OPTIONS, workers=4)
    placement_service.add_to_server(server.server, source)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)


@pytest.fixture(scope="module", params=sdk_clients.FLAVOURS, ids=repr)
def client(target: str, request: pytest.FixtureRequest) -> Iterator[sdk_clients.Client]:
    """Each test runs with PlacementClient and with AsyncPlacementClient: both must answer alike."""
    flavour: sdk_clients.Flavour = request.param
    with flavour.connect(target, timeout=10.0) as connected:
        yield connected


def still_works(client: sdk_clients.Client) -> None:
    assert client.placement("shop/web").replicas == 5
    assert [p.spread for p in client.placements()] == ["shop/web"]


CALLS: dict[str, Callable[[sdk_clients.Client, str], Any]] = {
    "placement": lambda c, key: c.placement(key),
    "explain": lambda c, key: c.explain(key),
    "watch": lambda c, key: next(c.watch(key, timeout=5)),
}

BAD_KEYS = [
    pytest.param("", id="empty"), pytest.param("no-slash", id="no-slash"), pytest.param("a/b/c", id="a-b-c"),
    pytest.param("/web", id="no-namespace"), pytest.param("shop/", id="no-name"),
    pytest.param("Shop/web", id="uppercase-namespace"), pytest.param("shop/Web", id="uppercase-name"),
    pytest.param("shop/we b", id="space"), pytest.param("shop/web\n", id="newline"),
    pytest.param("sh.op/web", id="dot-in-namespace"), pytest.param("shop/-web", id="leading-dash"),
    pytest.param("ünï/web", id="unicode-namespace"), pytest.param("shop/wéb", id="unicode-name"),
    pytest.param("shop/🙂", id="emoji"), pytest.param("\x00/\x00", id="nul"),
    pytest.param("n" * 64 + "/web", id="namespace-64"), pytest.param("shop/" + "w" * 254, id="name-254"),
    pytest.param("shop/" + "w" * 100_000, id="name-100k"), pytest.param("ns/" * 5000, id="many-slashes"),
]


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("key", BAD_KEYS)
def test_a_malformed_key_is_invalid_request(client: sdk_clients.Client, call: str, key: str) -> None:
    with pytest.raises(sdk.InvalidRequest) as caught:
        CALLS[call](client, key)
    assert caught.value.code == "INVALID_ARGUMENT"
    assert "namespace/name" in str(caught.value)
    assert len(str(caught.value)) < MAX_DETAILS
    still_works(client)


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("key", ["shop/gone", "gone/web", "a/b.c-d", "n" * 63 + "/" + "w" * 253])
def test_a_well_formed_unknown_key_is_spread_not_found(client: sdk_clients.Client, call: str,
                                                        key: str) -> None:
    with pytest.raises(sdk.SpreadNotFound) as caught:
        CALLS[call](client, key)
    assert caught.value.code == "NOT_FOUND"
    still_works(client)


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_key_protobuf_cannot_encode_is_invalid_request(client: sdk_clients.Client, call: str) -> None:
    with pytest.raises(sdk.InvalidRequest, match="cannot encode"):
        CALLS[call](client, "shop/\ud800")
    still_works(client)


def test_the_raw_service_answers_a_huge_key_invalid_argument(target: str) -> None:
    """Before the fix: the key was echoed into the status details, over the client's 16 kB
    header limit, and the caller saw RESOURCE_EXHAUSTED instead."""
    with grpc.insecure_channel(target) as channel:
        stub = placement_pb2_grpc.PlacementServiceStub(channel)
        for method, request in (
            (stub.GetPlacement, placement_pb2.GetPlacementRequest(spread="shop/" + "w" * 100_000)),
            (stub.Explain, placement_pb2.ExplainRequest(spread="w" * 100_000)),
        ):
            with pytest.raises(grpc.RpcError) as caught:
                method(request, timeout=10)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert len(caught.value.details()) < MAX_DETAILS


@SETTINGS
@hypothesis.given(key=st.text(max_size=300) | st.from_regex(VALID_KEY, fullmatch=True))
def test_any_key_gets_a_typed_answer(client: sdk_clients.Client, key: str) -> None:
    try:
        found = client.placement(key)
    except sdk.SpreadNotFound as error:
        assert well_formed(key), key
        assert error.code == "NOT_FOUND"
    except sdk.InvalidRequest as error:
        assert not well_formed(key), key
        assert error.code in ("INVALID_ARGUMENT", "")  # "": refused before sending (unencodable)
        assert len(str(error)) < MAX_DETAILS
    else:
        assert key == "shop/web" and found.replicas == 5
    still_works(client)


def test_an_oversized_request_is_resource_exhausted_and_the_server_lives(client: sdk_clients.Client) -> None:
    with pytest.raises(sdk.FedspreadError) as caught:
        client.simulate("#" * (inbound.MAX_MESSAGE_BYTES + 1), replicas=1)
    assert caught.value.code == "RESOURCE_EXHAUSTED"
    still_works(client)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"replicas": 2**40}, "cannot encode"),
    ({"replicas": 1, "clusters": {"clusters": [{"name": "dc1", "nodePools": [
        {"count": 1, "allocatable": {"pods": "1e999999999"}}]}]}}, "exponent is out of range"),
    ({"replicas": 1, "template": {"spec": {"template": {"spec": {"containers": [
        {"name": "a", "resources": {"requests": {"cpu": "1e999999999"}}}]}}}}}, "exponent is out of range"),
])
def test_simulate_with_absurd_numbers_is_invalid_request(client: sdk_clients.Client, kwargs: dict[str, Any],
                                                         fragment: str) -> None:
    with pytest.raises(sdk.InvalidRequest) as caught:
        client.simulate(SPREAD_YAML, **kwargs)
    assert fragment in str(caught.value) + "".join(str(p) for p in caught.value.problems)
    still_works(client)


def test_list_with_a_strange_namespace_is_empty(client: sdk_clients.Client) -> None:
    assert client.placements("ünï") == []
    assert client.placements("n" * 10_000) == []
    still_works(client)
