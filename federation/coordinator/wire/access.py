"""The question PlacementService asks before it answers: may this user do this, on the hub's terms?

Why the hub decides: who may read a namespace's spreads is already written down in the hub's RBAC
(`kubectl create rolebinding ...`); a second permission system inside the coordinator would drift
from it. So a caller of PlacementService is a Kubernetes user (`identity.placement_user`: the name
its `fedspread://user/<name>` certificate names, its organisations as groups, like the apiserver's
own x509 authenticator), and each call becomes one or more `Access` questions — "may `alice` `get`
`federatedspreads` `web` in `shop`?" — that an `Authorizer` answers, on the hub with a
SubjectAccessReview (`coordinator.hub.access_review`).

This module holds only the shapes both sides share (no gRPC, no Kubernetes): the servicer
(`services.authorization`) asks, the hub side answers.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from federation.api import cluster, common, spread

AUTHENTICATED_GROUP = "system:authenticated"
"""Added to every user's groups, as the apiserver does for any authenticated request."""


@dataclasses.dataclass(frozen=True)
class User:
    """A PlacementService caller as the hub's RBAC knows it."""

    name: str
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """The authenticator's other attributes (e.g. a service account token's pod name), sorted by
    key, as the hub's SubjectAccessReview carries them (`spec.extra`): an authorizer may decide on
    them. Only the metrics API's front proxy passes any (`X-Remote-Extra-*`)."""


@dataclasses.dataclass(frozen=True)
class Access:
    """One question: may a user `verb` the `resource` (of group fedspread.io) `name` in `namespace`?

    An empty `namespace` asks cluster-wide (a ClusterRole bound by a ClusterRoleBinding)."""

    verb: str
    resource: str
    namespace: str = ""
    name: str = ""
    group: str = common.API_GROUP

    def describe(self) -> str:
        """For error messages, as `kubectl auth can-i` spells it."""
        target = f"{self.resource}.{self.group}" + (f"/{self.name}" if self.name else "")
        where = f" in namespace {self.namespace!r}" if self.namespace else " (cluster-wide)"
        return f"{self.verb} {target}{where}"


def read_spread(namespace: str, name: str) -> Access:
    """Reading one spread's placement (GetPlacement, Explain, a watch of one spread)."""
    return Access("get", spread.PLURAL, namespace=namespace, name=name)


def patch_spread(namespace: str, name: str) -> Access:
    """Changing what a spread runs (Rebalance: a failback on demand moves its replicas)."""
    return Access("patch", spread.PLURAL, namespace=namespace, name=name)


def list_spreads(namespace: str = "") -> Access:
    """Reading every placement of a namespace ("" every namespace: ListPlacements, a watch of many)."""
    return Access("list", spread.PLURAL, namespace=namespace)


def list_clusters() -> Access:
    """Reading the member clusters' inventory (ListClusters; Simulate and Explain use it too)."""
    return Access("list", cluster.PLURAL)


class AccessUnavailable(Exception):
    """The authorizer could not answer (the hub unreachable, too slow, or refusing us): never allow."""


class Authorizer(Protocol):
    """Answers access questions; must be thread-safe (PlacementService asks from its pool)."""

    def allowed(self, user: User, access: Access) -> bool:
        """True if `user` may; False if not; AccessUnavailable if that cannot be known now."""
