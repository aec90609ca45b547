"""Who may speak for which cluster: the pure identity rules, without gRPC (issue 8).

The auth contexts below have the shape `grpc.ServicerContext.auth_context()` returns (property
name -> list of bytes); test_mtls.py checks that a real TLS handshake produces that shape from
certificates `fedspread certs` issues.
"""

from __future__ import annotations

import grpc
import pytest

from agents.link import refusals
from federation.certs import names, transport
from federation.coordinator.wire import identity
from federation.rpc import agent_pb2


def tls_context(*, sans: list[str], cn: str = "dc1") -> dict[str, list[bytes]]:
    context = {"transport_security_type": [b"ssl"], "x509_common_name": [cn.encode()],
               "x509_subject": [f"CN={cn}".encode()], "security_level": [b"TSI_PRIVACY_AND_INTEGRITY"]}
    if sans:
        context["x509_subject_alternative_name"] = [s.encode() for s in sans]
    return context


# --- names ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cluster", ["dc1", "aws-eu", "a", "member-1.example", "x" * 253])
def test_agent_uri_round_trips(cluster: str) -> None:
    assert names.cluster_of_uri(names.agent_uri(cluster)) == cluster


@pytest.mark.parametrize("cluster", ["", "DC1", "-dc1", "dc1-", "dc_1", "dc1/../aws", "x" * 254, "dc 1"])
def test_bad_cluster_names_are_refused_with_the_rule(cluster: str) -> None:
    with pytest.raises(ValueError, match="not a valid MemberCluster name"):
        names.agent_uri(cluster)


@pytest.mark.parametrize("uri", [
    "fedspread://user/dc1", "https://cluster/dc1", "fedspread://cluster/", "fedspread://cluster/DC1",
    "fedspread://cluster/dc1/extra", "spiffe://fedspread/cluster/dc1", "dc1",
])
def test_only_agent_uris_name_a_cluster(uri: str) -> None:
    assert names.cluster_of_uri(uri) is None


def test_user_names_are_checked() -> None:
    assert names.user_uri("alice@example.com") == "fedspread://user/alice@example.com"
    with pytest.raises(ValueError, match="client name"):
        names.user_uri("alice/../x")


# --- peer_of --------------------------------------------------------------------------------------


def test_agent_certificate_names_its_cluster() -> None:
    peer = identity.peer_of(tls_context(sans=["fedspread://cluster/dc1"]))
    assert peer == identity.Peer(authenticated=True, clusters=("dc1",), common_name="dc1")


def test_other_sans_are_ignored_and_duplicates_collapse() -> None:
    peer = identity.peer_of(tls_context(sans=["localhost", "fedspread://cluster/dc1", "127.0.0.1",
                                              "fedspread://cluster/dc1"]))
    assert peer.clusters == ("dc1",)


def test_the_common_name_alone_names_no_cluster() -> None:
    """A user certificate with CN dc1 must not pass as the agent of dc1."""
    peer = identity.peer_of(tls_context(sans=[], cn="dc1"))
    assert peer.authenticated and peer.clusters == ()
    refusal = identity.check_hello(peer, "dc1")
    assert refusal is not None and refusal.code == "PERMISSION_DENIED"


def test_plaintext_peer_is_not_authenticated() -> None:
    assert identity.peer_of({}) == identity.Peer(authenticated=False)
    assert identity.peer_of({"transport_security_type": [b"insecure"]}).authenticated is False
    # TLS without a client certificate: no x509 properties at all
    assert identity.peer_of({"transport_security_type": [b"ssl"]}).authenticated is False


# --- check_hello -----------------------------------------------------------------------------------


def test_own_cluster_is_accepted() -> None:
    peer = identity.peer_of(tls_context(sans=["fedspread://cluster/dc1"]))
    assert identity.check_hello(peer, "dc1") is None


def test_hello_for_another_cluster_names_both() -> None:
    refusal = identity.check_hello(identity.peer_of(tls_context(sans=["fedspread://cluster/dc1"])), "aws-eu")
    assert refusal is not None
    assert refusal.code == "PERMISSION_DENIED"
    assert "'aws-eu'" in refusal.message and "'dc1'" in refusal.message


def test_user_certificate_cannot_open_an_agent_stream() -> None:
    peer = identity.peer_of(tls_context(sans=["fedspread://user/alice"], cn="alice"))
    refusal = identity.check_hello(peer, "alice")
    assert refusal is not None and refusal.code == "PERMISSION_DENIED"
    assert "names no cluster" in refusal.message and "fedspread certs agent" in refusal.message


def test_certificate_naming_two_clusters_is_refused() -> None:
    peer = identity.peer_of(tls_context(sans=["fedspread://cluster/dc1", "fedspread://cluster/aws-eu"]))
    refusal = identity.check_hello(peer, "dc1")
    assert refusal is not None and refusal.code == "PERMISSION_DENIED" and "exactly one" in refusal.message


def test_no_certificate_is_unauthenticated() -> None:
    refusal = identity.check_hello(identity.Peer(authenticated=False), "dc1")
    assert refusal is not None and refusal.code == "UNAUTHENTICATED"


def test_refusal_codes_are_grpc_status_names() -> None:
    for code in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
        assert grpc.StatusCode[code].name == code


# --- later messages --------------------------------------------------------------------------------


def test_reports_name_no_cluster() -> None:
    report = agent_pb2.AgentMessage(pod_counts=agent_pb2.PodCountsReport(full=True, spreads=[
        agent_pb2.SpreadPodCounts(spread="shop/web")]))
    assert list(identity.clusters_named(report)) == []
    assert identity.check_message(report, "dc1") is None


def _names_a_cluster_somewhere(descriptor: object, path: tuple[str, ...] = ()) -> bool:
    """The rule written the other way: a depth-first walk of the type, each type once per path."""
    for field in descriptor.fields:  # type: ignore[attr-defined]
        kind = field.message_type
        if kind is None:
            if field.name in identity.CLUSTER_FIELDS:
                return True
        elif not kind.GetOptions().map_entry and kind.full_name not in path \
                and _names_a_cluster_somewhere(kind, (*path, kind.full_name)):
            return True
    return False


def test_the_walk_is_skipped_only_for_types_that_cannot_name_a_cluster() -> None:
    types = [*agent_pb2.DESCRIPTOR.message_types_by_name.values()]
    assert {t.name for t in types if identity.may_name_a_cluster(t)} == {
        t.name for t in types if _names_a_cluster_somewhere(t, (t.full_name,))}
    assert not identity.may_name_a_cluster(agent_pb2.AckBatch.DESCRIPTOR)
    assert identity.may_name_a_cluster(agent_pb2.CoordinatorBatch.DESCRIPTOR), "a batch holds a Welcome"
    acks = agent_pb2.AgentMessage(acks=agent_pb2.AckBatch(acks=[agent_pb2.Ack(spread="shop/web")] * 3))
    assert identity.check_message(acks, "dc1") is None


def test_a_second_hello_for_another_cluster_is_refused() -> None:
    hello = agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster_name="aws-eu", topology_labels={"a": "b"}))
    assert list(identity.clusters_named(hello)) == ["aws-eu"]
    refusal = identity.check_message(hello, "dc1")
    assert refusal is not None and refusal.code == "PERMISSION_DENIED"
    assert "'dc1'" in refusal.message and "'aws-eu'" in refusal.message


def test_a_second_hello_for_the_same_cluster_is_not_an_identity_matter() -> None:
    hello = agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster_name="dc1"))
    assert identity.check_message(hello, "dc1") is None  # the servicer answers it as a BadReport


# --- what the agent makes of refusals ---------------------------------------------------------------


@pytest.mark.parametrize(("code", "details", "refused"), [
    (grpc.StatusCode.PERMISSION_DENIED, "Hello for cluster 'b' refused", True),
    (grpc.StatusCode.UNAUTHENTICATED, "needs a client certificate", True),
    (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; last error: UNAVAILABLE: "
                                  "ipv4:127.0.0.1:1: Connection refused", False),
    (grpc.StatusCode.UNAVAILABLE, "ipv4:127.0.0.1:1: Socket closed", False),
    (grpc.StatusCode.UNAVAILABLE, "Tls handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: "
                                  "error:1000007d:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED", True),
    (grpc.StatusCode.UNAVAILABLE, "Custom verification check failed with error: UNAUTHENTICATED: "
                                  "Hostname Verification Check failed.", True),
    (None, "coordinator closed the stream", False),
])
def test_which_stream_ends_are_refusals(code: grpc.StatusCode | None, details: str, refused: bool) -> None:
    assert refusals.StreamEnded(code, details, welcomed=False).refused is refused


def test_hints_for_tls_trouble() -> None:
    assert "CA" in transport.hint("CERTIFICATE_VERIFY_FAILED: unable to get local issuer", secure=True)
    assert "--host" in transport.hint("Hostname Verification Check failed.", secure=True)
    assert "--insecure" in transport.hint("WRONG_VERSION_NUMBER", secure=True)
    assert "mTLS" in transport.hint("Socket closed", secure=False)
    assert "client certificate" in transport.hint("Socket closed", secure=True)
    assert transport.hint("Connection refused", secure=True) == ""
