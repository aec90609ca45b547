"""Who may ask PlacementService what: the caller of each call, and its questions to the hub.

Why a `Caller` per call: the servicer's handlers decide *what* a request reads (one spread, a
namespace, the clusters' inventory); whether the caller may is the hub's RBAC's business
(`wire.access`). A handler asks `caller.require(question)` (PERMISSION_DENIED naming the
permission when not) or, to filter a listing, `caller.may(question)`. An authorizer that cannot
answer — the hub away or too slow — ends the call UNAVAILABLE: an error never allows.

What each call needs (deploy/README.md, "Who may read placements"):

* GetPlacement, and WatchPlacement of one spread: `get federatedspreads` on that spread (a watch
  asks again at every change, so a revoked binding ends it);
* ListPlacements and WatchPlacement of a namespace: `list federatedspreads` in it; of every
  namespace: the placements of the namespaces the user may `list` in (all of them with a
  cluster-wide grant), never an error for the others;
* ListClusters, Simulate and Explain (they show the clusters' capacity): `list memberclusters`
  (cluster-wide); Explain of a spread needs its `get` as well.

Without an authorizer (a plaintext coordinator, `--insecure`, or a servicer in a test) every user
may read everything; an agent's certificate is refused either way (`identity.placement_user`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TypeVar

import grpc

from federation.api import problems
from federation.coordinator.wire import access, identity
from federation.rpc import access as rpc_access

R = TypeVar("R")


class AccessRefused(Exception):
    """The call may not proceed; `code` is the gRPC status to end it with."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.problems: list[problems.Problem] = []
        unavailable = code == grpc.StatusCode.UNAVAILABLE
        self.trailers = [(rpc_access.TRAILER, rpc_access.UNAVAILABLE_VALUE)] if unavailable else []


@dataclasses.dataclass(frozen=True)
class Caller:
    """One call's user (None: not checked) and the authorizer that answers for it."""

    user: access.User | None
    authorizer: access.Authorizer | None

    def may(self, question: access.Access) -> bool:
        """Whether the user may; AccessRefused(UNAVAILABLE) when the authorizer cannot tell."""
        if self.authorizer is None or self.user is None:
            return True
        try:
            return self.authorizer.allowed(self.user, question)
        except access.AccessUnavailable as error:
            raise AccessRefused(grpc.StatusCode.UNAVAILABLE,
                                f"cannot check whether {self.user.name!r} may {question.describe()} "
                                f"on the hub: {error}; try again later") from None

    def require(self, *questions: access.Access) -> None:
        """Each of `questions` allowed, else AccessRefused(PERMISSION_DENIED) naming the first refused."""
        for question in questions:
            if not self.may(question):
                name = self.user.name if self.user else "?"
                raise AccessRefused(grpc.StatusCode.PERMISSION_DENIED,
                                    f"user {name!r} may not {question.describe()} on the hub; ask an "
                                    "administrator for a Role/ClusterRole binding that allows it "
                                    "(deploy/README.md, 'Who may read placements')")

    def visible(self, items: Sequence[R], *, namespace_of: Callable[[R], str]) -> list[R]:
        """The `items` of namespaces the user may list spreads in (all with a cluster-wide grant)."""
        if self.may(access.list_spreads()):
            return list(items)
        namespaces = {namespace_of(item) for item in items}
        readable = {ns for ns in sorted(namespaces) if self.may(access.list_spreads(ns))}
        return [item for item in items if namespace_of(item) in readable]


def caller_of(auth: identity.AuthContext, authorizer: access.Authorizer | None) -> Caller:
    """The caller a call's auth context shows; AccessRefused when it may not use PlacementService
    at all (an agent's certificate; with an authorizer, no certificate or one naming no user)."""
    peer = identity.peer_of(auth)
    if authorizer is None:
        refusal = identity.refuse_agent(peer)
        if refusal is not None:
            raise AccessRefused(grpc.StatusCode.PERMISSION_DENIED, refusal.message)
        return Caller(None, None)
    user = identity.placement_user(peer)
    if isinstance(user, identity.Refusal):
        raise AccessRefused(getattr(grpc.StatusCode, user.code), user.message)
    return Caller(user, authorizer)


def namespace_of_key(key: str) -> str:
    """The namespace of a spread key "namespace/name"."""
    return key.partition("/")[0]
