"""PlacementService authorisation without a hub: who a certificate is, what a call asks, errors.

The SubjectAccessReviews themselves are answered by the sandbox hub's real RBAC in
tests/integration/test_placement_authz.py. Here, over real mTLS with certificates `fedspread certs`
issues and the real SDK:

* a real handshake gives the user and groups its certificate names (`identity.peer_of` reads the
  O from the peer certificate), and an agent's or a nameless certificate is refused;
* a hub that does not answer (the real `SubjectAccessReviewer` dialling a closed port) ends the
  call UNAVAILABLE after its bounded retries, nothing cached, nothing allowed;
* what each call asks, a watch of every namespace filtered by namespace, and a watch ended once
  its permission is revoked, with a table-driven authorizer (a fake of our own protocol, for the
  servicer's part only).
"""

from __future__ import annotations

import pathlib
import re
import socket
import threading
from collections.abc import Callable, Iterator

import grpc
import pytest
from kubernetes import client

from federation import sdk
from federation.certs import bundles, transport
from federation.coordinator.hub import access_review
from federation.coordinator.services import aio_server, placement_requests, placement_service
from federation.coordinator.wire import access, convert, identity
from federation.core import placement
from federation.rpc import placement_pb2, placement_pb2_grpc
from tests.support import in_memory_source

SPREAD = ("{targetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, "
          "subsets: [{name: only, clusters: [dc1]}]}")
DEADLINE = 10.0
Serve = Callable[[access.Authorizer | None], str]
"""Start a PlacementService over mTLS with this authorizer; its address."""


class Table:
    """An authorizer answering from a set of (user, verb, resource, namespace) it allows; records
    every question."""

    def __init__(self, allowed: set[tuple[str, str, str, str]]) -> None:
        self.allowed_set = allowed
        self.asked: list[tuple[access.User, access.Access]] = []
        self._lock = threading.Lock()

    def allowed(self, user: access.User, question: access.Access) -> bool:
        with self._lock:
            self.asked.append((user, question))
        return (user.name, question.verb, question.resource, question.namespace) in self.allowed_set


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("pki")
    bundles.make_ca(root / "ca")
    bundles.make_coordinator(root / "ca", root / "coordinator")
    bundles.make_agent(root / "ca", root / "dc1", cluster="dc1")
    bundles.make_client(root / "ca", root / "alice", name="alice")
    return root


def source() -> in_memory_source.InMemorySource:
    store = in_memory_source.InMemorySource(clusters=[convert.ClusterRecord(name="dc1")])
    spec = placement_requests.parse_spread(SPREAD)
    for key in ("shop/web", "shop/api", "bank/vault"):
        store.put(key, convert.PlacementRecord(key=key, placement=placement.Placement(
            replicas=0, unplaced=0, capacity_exhausted=0, subsets=(), clusters={}), spec=spec))
    return store


@pytest.fixture
def serve(certificates: pathlib.Path) -> Iterator[Serve]:
    servers: list[aio_server.AioServer] = []

    def start(authorizer: access.Authorizer | None) -> str:
        server = aio_server.AioServer(workers=2)
        placement_service.add_to_server(server.server, source(), authorizer=authorizer)
        served = transport.TLSFiles.in_directory(certificates / "coordinator")
        credentials = transport.server_credentials(served)
        port = server.add_secure_port("127.0.0.1:0", credentials)
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(grace=None)


def as_user(certificates: pathlib.Path, target: str, name: str = "alice") -> sdk.PlacementClient:
    files = transport.TLSFiles.in_directory(certificates / name)
    return sdk.PlacementClient.with_tls(target, ca=files.ca, cert=files.cert, key=files.key, timeout=DEADLINE)


def test_a_real_handshake_names_the_user_and_its_groups(certificates: pathlib.Path, serve: Serve) -> None:
    table = Table({("alice", "get", "federatedspreads", "shop")})
    target = serve(table)
    with as_user(certificates, target) as placements:
        assert placements.placement("shop/web").spread == "shop/web"
    (user, question), = table.asked
    assert user == access.User("alice", ("fedspread:users", access.AUTHENTICATED_GROUP))
    assert question == access.read_spread("shop", "web")


def test_user_identity_from_a_peer() -> None:
    user = identity.placement_user(identity.Peer(authenticated=True, common_name="alice", users=("alice",),
                                                 organizations=("fedspread:users",)))
    assert user == access.User("alice", ("fedspread:users", access.AUTHENTICATED_GROUP))
    agent = identity.placement_user(identity.Peer(authenticated=True, clusters=("dc1",), common_name="dc1"))
    assert isinstance(agent, identity.Refusal) and agent.code == "PERMISSION_DENIED"
    assert "an agent's certificate may not read placements" in agent.message
    nameless = identity.placement_user(identity.Peer(authenticated=True, common_name="bob"))
    assert isinstance(nameless, identity.Refusal) and "names no user" in nameless.message
    nobody = identity.placement_user(identity.Peer(authenticated=False))
    assert isinstance(nobody, identity.Refusal) and nobody.code == "UNAUTHENTICATED"


def test_the_organisation_is_read_from_the_peer_certificate(certificates: pathlib.Path) -> None:
    pem = (certificates / "alice" / "tls.crt").read_bytes()
    peer = identity.peer_of({"transport_security_type": [b"ssl"], "x509_common_name": [b"alice"],
                             "x509_subject_alternative_name": [b"fedspread://user/alice"],
                             "x509_pem_cert": [pem]})
    assert peer.users == ("alice",) and peer.organizations == ("fedspread:users",)
    garbled = identity.peer_of({"transport_security_type": [b"ssl"], "x509_common_name": [b"alice"],
                                "x509_pem_cert": [b"not a certificate"]})
    assert garbled.organizations == () and garbled.users == ()


def test_an_agent_certificate_is_refused_even_without_an_authorizer(certificates: pathlib.Path,
                                                                   serve: Serve) -> None:
    target = serve(None)
    with as_user(certificates, target, "dc1") as placements, \
            pytest.raises(sdk.PermissionDenied, match="agent's certificate"):
        placements.placements()
    with as_user(certificates, target) as placements:  # anyone else reads everything
        assert len(placements.placements()) == 3


def test_what_each_call_asks_and_a_listing_is_filtered(certificates: pathlib.Path, serve: Serve) -> None:
    table = Table({("alice", "list", "federatedspreads", "shop"),
                   ("alice", "get", "federatedspreads", "shop")})
    target = serve(table)
    with as_user(certificates, target) as placements:
        assert [p.spread for p in placements.placements()] == ["shop/api", "shop/web"]
        with pytest.raises(sdk.PermissionDenied, match=re.escape("may not list memberclusters.fedspread.io")):
            placements.explain("shop/web")
        with pytest.raises(sdk.PermissionDenied, match=re.escape("may not list memberclusters.fedspread.io")):
            placements.simulate(SPREAD, replicas=1)
        with pytest.raises(sdk.PermissionDenied, match="in namespace 'bank'"):
            placements.placement("bank/vault")
    asked = {question for _, question in table.asked}
    assert access.list_spreads() in asked and access.list_spreads("bank") in asked
    assert access.list_clusters() in asked


def test_a_watch_of_every_namespace_shows_only_readable_ones(certificates: pathlib.Path,
                                                             serve: Serve) -> None:
    table = Table({("alice", "list", "federatedspreads", "bank")})
    target = serve(table)
    files = transport.TLSFiles.in_directory(certificates / "alice")
    with grpc.secure_channel(target, transport.channel_credentials(files)) as channel:
        stream = placement_pb2_grpc.PlacementServiceStub(channel).WatchPlacement(
            placement_pb2.WatchPlacementRequest(), timeout=DEADLINE)
        first = next(stream)
        stream.cancel()
    assert first.spread == "bank/vault" and first.type == placement_pb2.PlacementEvent.TYPE_INITIAL


def test_an_unreachable_hub_answers_unavailable_and_never_allows(certificates: pathlib.Path,
                                                                  serve: Serve) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    configuration = client.Configuration()
    configuration.host = f"https://127.0.0.1:{closed}"
    reviewer = access_review.SubjectAccessReviewer(client.ApiClient(configuration), timeout=1.0,
                                                   attempts=3, budget=5.0)
    alice = access.User("alice", ("fedspread:users",))
    with pytest.raises(access.AccessUnavailable, match="the hub did not answer"):
        reviewer.allowed(alice, access.list_clusters())
    assert reviewer.reviews == 3, "connection errors are retried, within the attempts"
    target = serve(reviewer)
    with as_user(certificates, target) as placements, pytest.raises(sdk.CoordinatorUnavailable) as error:
        placements.placement("shop/web")
    assert error.value.code == "UNAVAILABLE"
    assert "could not check this client's access: cannot check whether 'alice' may get " \
           "federatedspreads.fedspread.io/web" in str(error.value)
    assert "hint" not in str(error.value), "no TLS advice: the coordinator answered"
    assert reviewer.reviews == 6, "an error is never cached: the call asked again"


def test_a_revoked_permission_ends_a_watch_at_the_next_change(certificates: pathlib.Path) -> None:
    table = Table({("alice", "get", "federatedspreads", "shop")})
    store = source()
    server = aio_server.AioServer(workers=2)
    placement_service.add_to_server(server.server, store, authorizer=table)
    served = transport.TLSFiles.in_directory(certificates / "coordinator")
    port = server.add_secure_port("127.0.0.1:0", transport.server_credentials(served))
    server.start()
    try:
        files = transport.TLSFiles.in_directory(certificates / "alice")
        with grpc.secure_channel(f"127.0.0.1:{port}", transport.channel_credentials(files)) as channel:
            stream = placement_pb2_grpc.PlacementServiceStub(channel).WatchPlacement(
                placement_pb2.WatchPlacementRequest(spread="shop/web"), timeout=DEADLINE)
            assert next(stream).type == placement_pb2.PlacementEvent.TYPE_INITIAL
            table.allowed_set.clear()  # the binding is gone (the hub's answer, once the cache expires)
            store.put("shop/web", convert.PlacementRecord(
                key="shop/web", placement=placement.Placement(
                    replicas=1, unplaced=1, capacity_exhausted=0, subsets=(), clusters={}),
                spec=placement_requests.parse_spread(SPREAD)))
            with pytest.raises(grpc.RpcError) as ended:
                next(stream)
            assert ended.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        server.stop(grace=None)


def test_rebalance_needs_patch_on_the_spread_and_a_dry_run_only_get(
        certificates: pathlib.Path, serve: Serve) -> None:
    table = Table({("alice", "get", "federatedspreads", "shop")})
    target = serve(table)
    with as_user(certificates, target) as placements:
        assert placements.rebalance("shop/web", dry_run=True).steps == []
        assert [q for _, q in table.asked] == [access.read_spread("shop", "web")]
        refused = re.escape("may not patch federatedspreads.fedspread.io/web")
        with pytest.raises(sdk.PermissionDenied, match=refused):
            placements.rebalance("shop/web")
    table.allowed_set.add(("alice", "patch", "federatedspreads", "shop"))
    with as_user(certificates, target) as placements:
        assert placements.rebalance("shop/web").spread == "shop/web"
    assert table.asked[-1][1] == access.patch_spread("shop", "web")
