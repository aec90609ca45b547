"""Which cluster an agent stream may speak for, from its TLS peer certificate (pure, no gRPC).

Why: an agent reports capacity and pod counts that move other clusters' replicas, so an agent
that could speak for another cluster could drain it or over-commit it. Over mTLS the
coordinator knows the peer's verified certificate; its identity is the URI subject alternative
name `fedspread://cluster/<name>` (`federation.certs.names`: the common name alone cannot tell an
agent from an SDK user). The rules, each with the status the servicer answers:

* no verified client certificate at all (a plaintext peer on a server that requires identity):
  UNAUTHENTICATED;
* a certificate that names no cluster (an SDK user's), or several: PERMISSION_DENIED;
* a Hello for another cluster than the certificate names: PERMISSION_DENIED naming both;
* any later message that names a cluster other than the stream's (a second Hello, or any field
  called `cluster_name`/`cluster` a future message may carry): PERMISSION_DENIED. This last rule
  holds without TLS too: a stream speaks for the cluster its Hello named.

PlacementService is for people and their scripts, never for agents (`placement_user`): an agent's
certificate is refused there with PERMISSION_DENIED, and so is one that names no user
(`fedspread://user/<name>`, `fedspread certs client`). The user is that name; its groups are the
certificate's organisations (O, `fedspread:users` for `fedspread certs client`) plus
`system:authenticated`, as the apiserver's own x509 authenticator would make them; the hub's RBAC
then decides what the user may read (`wire.access`).

The input is what `grpc.ServicerContext.auth_context()` returns (property name -> list of
bytes), so the rules are tested without a server; the servicer maps `Refusal.code` onto
`grpc.StatusCode`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

from cryptography import x509
from cryptography.x509 import oid
from google.protobuf import descriptor as pb_descriptor
from google.protobuf import message as pb_message

from federation.certs import names
from federation.coordinator.wire import access

AuthContext = Mapping[str, Sequence[bytes]]
SAN_PROPERTY = "x509_subject_alternative_name"
CN_PROPERTY = "x509_common_name"
PEM_PROPERTY = "x509_pem_cert"
SECURITY_PROPERTY = "transport_security_type"
CLUSTER_FIELDS = frozenset({"cluster_name", "cluster"})


@dataclasses.dataclass(frozen=True)
class Peer:
    """What a stream's TLS peer certificate says (empty for a plaintext peer)."""

    authenticated: bool
    """A client certificate was presented and verified against the CA (TLS)."""
    clusters: tuple[str, ...] = ()
    """The clusters its agent URI SANs name (one, for a certificate from `fedspread certs agent`)."""
    common_name: str = ""
    users: tuple[str, ...] = ()
    """The users its user URI SANs name (one, for a certificate from `fedspread certs client`)."""
    organizations: tuple[str, ...] = ()
    """The subject's O values (groups, for a user)."""

    def describe(self) -> str:
        """For error messages: how the certificate identifies itself."""
        if not self.authenticated:
            return "no client certificate"
        shown = f"certificate CN={self.common_name!r}" if self.common_name else "certificate without CN"
        if self.clusters:
            return f"{shown} for cluster{'s' if len(self.clusters) > 1 else ''} {', '.join(self.clusters)}"
        return f"{shown}, which names no cluster ({names.AGENT_PREFIX}<cluster> URI SAN)"


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a stream (or one of its messages) is refused, and the gRPC status to end it with."""

    code: Literal["PERMISSION_DENIED", "UNAUTHENTICATED"]
    message: str


def _texts(auth: AuthContext, key: str) -> list[str]:
    return [value.decode("utf-8", "replace") for value in auth.get(key, ())]


def peer_of(auth: AuthContext) -> Peer:
    """The peer as its auth context describes it; a peer without TLS is not authenticated."""
    if b"ssl" not in auth.get(SECURITY_PROPERTY, ()) or not (auth.get(SAN_PROPERTY) or auth.get(CN_PROPERTY)):
        return Peer(authenticated=False)
    clusters = [names.cluster_of_uri(san) for san in _texts(auth, SAN_PROPERTY)]
    users = [names.user_of_uri(san) for san in _texts(auth, SAN_PROPERTY)]
    common = _texts(auth, CN_PROPERTY)
    return Peer(authenticated=True, clusters=tuple(dict.fromkeys(c for c in clusters if c)),
                common_name=common[0] if common else "", users=tuple(dict.fromkeys(u for u in users if u)),
                organizations=_organizations(auth.get(PEM_PROPERTY, ())))


def _organizations(pems: Sequence[bytes]) -> tuple[str, ...]:
    """The subject's O values of the (first) peer certificate; none when it cannot be read."""
    try:
        certificate = x509.load_pem_x509_certificate(pems[0])
    except (IndexError, ValueError):
        return ()
    values = certificate.subject.get_attributes_for_oid(oid.NameOID.ORGANIZATION_NAME)
    return tuple(dict.fromkeys(str(a.value) for a in values))


def refuse_agent(peer: Peer) -> Refusal | None:
    """Why an agent's certificate may not use PlacementService; None for any other peer."""
    if not peer.clusters:
        return None
    return Refusal("PERMISSION_DENIED", f"PlacementService refused: {peer.describe()}; an agent's "
                                        "certificate may not read placements, use a user's "
                                        "(`fedspread certs client NAME`)")


def placement_user(peer: Peer) -> access.User | Refusal:
    """The user a PlacementService caller is, or why it may not call at all."""
    if not peer.authenticated:
        return Refusal("UNAUTHENTICATED", "PlacementService needs a client certificate "
                                          "(`fedspread certs client`)")
    refused = refuse_agent(peer)
    if refused is not None:
        return refused
    if len(peer.users) != 1:
        which = "names no user" if not peer.users else f"names {len(peer.users)} users"
        return Refusal("PERMISSION_DENIED", f"PlacementService refused: the client certificate "
                                            f"(CN={peer.common_name!r}) {which} ({names.USER_PREFIX}<name> "
                                            "URI SAN); use one from `fedspread certs client NAME`")
    groups = (*peer.organizations, access.AUTHENTICATED_GROUP)
    return access.User(peer.users[0], tuple(dict.fromkeys(groups)))


def check_hello(peer: Peer, cluster: str) -> Refusal | None:
    """None when `peer` may open a stream for `cluster`; otherwise why not."""
    if not peer.authenticated:
        return Refusal("UNAUTHENTICATED", f"a Hello for cluster {cluster!r} needs a client certificate "
                                          "that names the cluster (`fedspread certs agent`)")
    if not peer.clusters:
        return Refusal("PERMISSION_DENIED", f"Hello for cluster {cluster!r} refused: {peer.describe()}; "
                                            "only an agent certificate (`fedspread certs agent`) may "
                                            "open an agent stream")
    if len(peer.clusters) > 1:
        return Refusal("PERMISSION_DENIED", f"Hello for cluster {cluster!r} refused: {peer.describe()}; "
                                            "an agent certificate must name exactly one cluster")
    if peer.clusters[0] != cluster:
        return Refusal("PERMISSION_DENIED", f"Hello for cluster {cluster!r} refused: the client "
                                            f"certificate is the agent's of cluster {peer.clusters[0]!r}")
    return None


@functools.cache
def may_name_a_cluster(descriptor: pb_descriptor.Descriptor) -> bool:
    """Whether a message of this type can carry a field of CLUSTER_FIELDS at any depth: the types
    reachable from it through message fields (not maps), cycles included, and their scalar fields.
    Why: every agent message is checked, and most (acks, heartbeats, an AckBatch of 256 acks)
    cannot name a cluster at all, so their walk is skipped by type, once per type."""
    seen, todo = {descriptor.full_name}, [descriptor]
    while todo:
        current = todo.pop()
        for field in current.fields:
            if field.message_type is None:
                if field.name in CLUSTER_FIELDS:
                    return True
            elif not field.message_type.GetOptions().map_entry and field.message_type.full_name not in seen:
                seen.add(field.message_type.full_name)
                todo.append(field.message_type)
    return False


def clusters_named(message: pb_message.Message) -> Iterator[str]:
    """Every non-empty cluster name `message` carries, at any depth (fields in CLUSTER_FIELDS)."""
    if not may_name_a_cluster(message.DESCRIPTOR):
        return
    for field, value in message.ListFields():
        if field.message_type is not None:
            if field.message_type.GetOptions().map_entry or not may_name_a_cluster(field.message_type):
                continue  # maps here are labels and resources, never cluster names
            items = value if field.is_repeated else [value]
            for item in items:
                yield from clusters_named(item)
        elif field.name in CLUSTER_FIELDS and isinstance(value, str) and value:
            yield value


def check_message(message: pb_message.Message, cluster: str) -> Refusal | None:
    """None unless a message on `cluster`'s stream names another cluster."""
    others = sorted({name for name in clusters_named(message) if name != cluster})
    if others:
        return Refusal("PERMISSION_DENIED", f"the stream of cluster {cluster!r} may not speak for "
                                            f"{', '.join(repr(o) for o in others)}")
    return None
