"""What a fedspread certificate says about its holder: the identity scheme, in one place.

Why a scheme at all: the coordinator must tell an agent's certificate from any other certificate
its CA signed (an SDK user's, say), and must read *which* cluster an agent speaks for. The
subject's common name alone cannot do that — every certificate has one, and a user called `dc1`
would pass as the agent of cluster `dc1`. So the identity is a URI subject alternative name, as
SPIFFE does it:

* an agent: `fedspread://cluster/<cluster>` (and CN `<cluster>`, O `fedspread:agents`, for people
  and for tools that only show the subject);
* an SDK or `fedspread get` user: `fedspread://user/<name>` (CN `<name>`, O `fedspread:users`).

Only the URI SAN decides; the CN is informative. Pure functions, no I/O: the certificate tool
(`federation.certs.bundles`) writes these names, the coordinator (`federation.coordinator.wire.identity`)
reads them.
"""

from __future__ import annotations

import re

SCHEME = "fedspread"
AGENT_PREFIX = f"{SCHEME}://cluster/"
USER_PREFIX = f"{SCHEME}://user/"
AGENT_ORGANIZATION = "fedspread:agents"
USER_ORGANIZATION = "fedspread:users"
COORDINATOR_COMMON_NAME = "fedspread-coordinator"

# A MemberCluster is a Kubernetes object: its name is a DNS-1123 subdomain.
_CLUSTER = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_USER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")
MAX_CLUSTER = 253
MAX_USER = 64


def check_cluster(name: str) -> str:
    """`name` if it can name a member cluster (a DNS-1123 subdomain); ValueError saying why not."""
    if not name or len(name) > MAX_CLUSTER or not _CLUSTER.fullmatch(name):
        raise ValueError(f"cluster name {name!r} is not a valid MemberCluster name (lowercase letters, "
                         f"digits, '-' and '.', starting and ending alphanumeric, at most {MAX_CLUSTER})")
    return name


def check_user(name: str) -> str:
    """`name` if it can name an SDK user (letters, digits, `.`, `_`, `@`, `-`); ValueError otherwise."""
    if not name or len(name) > MAX_USER or not _USER.fullmatch(name):
        raise ValueError(f"client name {name!r} must be 1 to {MAX_USER} letters, digits, '.', '_', '@' "
                         "or '-', starting with a letter or digit")
    return name


def agent_uri(cluster: str) -> str:
    """The URI SAN of the agent of `cluster`."""
    return AGENT_PREFIX + check_cluster(cluster)


def user_uri(name: str) -> str:
    """The URI SAN of SDK user `name`."""
    return USER_PREFIX + check_user(name)


def user_of_uri(uri: str) -> str | None:
    """The user a user URI SAN names, or None when `uri` is not a valid user identity."""
    if not uri.startswith(USER_PREFIX):
        return None
    name = uri[len(USER_PREFIX):]
    try:
        return check_user(name)
    except ValueError:
        return None


def cluster_of_uri(uri: str) -> str | None:
    """The cluster an agent URI SAN names, or None when `uri` is not a valid agent identity."""
    if not uri.startswith(AGENT_PREFIX):
        return None
    name = uri[len(AGENT_PREFIX):]
    try:
        return check_cluster(name)
    except ValueError:
        return None
