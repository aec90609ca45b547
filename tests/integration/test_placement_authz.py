"""Only those who belong read placements: PlacementService asks the sandbox hub's real RBAC.

The coordinator (`CoordinatorProcess`, mTLS, `--no-ray`) runs on the sandbox hub, whose apiserver
authorises with RBAC (`--authorization-mode=RBAC`, `federation/sandbox/launcher.py`); its
`SubjectAccessReviewer` sends real SubjectAccessReviews there. A user bound in namespace A (a
RoleBinding to the reader ClusterRole that deploy/coordinator/rbac.yaml ships) reads A's placement
and listing, and is refused B's, a listing of B, and the clusters' inventory, with
PERMISSION_DENIED naming the permission; listing every namespace shows A's placements only. An
agent's certificate is refused outright. `fedspread get` shows the refusal as one line, exit 1, no
traceback. The reviewer's cache is checked against the same hub by counting the reviews it sends.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import conftest
import hubside
import pytest
import waiting
from kubernetes import client

from federation import sdk
from federation.certs import bundles, transport
from federation.coordinator import process as coordinator_main
from federation.coordinator.hub import access_review
from federation.coordinator.wire import access
from federation.sandbox import hubsetup
from tests.support import builders

FEDSPREAD = str(pathlib.Path(sys.executable).parent / "fedspread")
WAIT = 60.0
AGENT = "authz-member"


@pytest.fixture
def other_namespace(clusters: conftest.Clusters) -> Iterator[str]:
    """Namespace B: on the hub only, deleted after the test."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    clusters.core(hubside.HUB).create_namespace({"metadata": {"name": name}})
    yield name
    clusters.core(hubside.HUB).delete_namespace(name, propagation_policy="Background")


@pytest.fixture
def pki(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "pki"
    bundles.make_ca(root / "ca")
    bundles.make_coordinator(root / "ca", root / "coordinator")
    bundles.make_agent(root / "ca", root / AGENT, cluster=AGENT)
    return root


def user_certificate(pki: pathlib.Path, name: str) -> transport.TLSFiles:
    bundles.make_client(pki / "ca", pki / name, name=name)
    return transport.TLSFiles.in_directory(pki / name)


def sdk_client(target: str, files: transport.TLSFiles) -> sdk.PlacementClient:
    return sdk.PlacementClient.with_tls(target, ca=files.ca, cert=files.cert, key=files.key, timeout=10.0)


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters,
                pki: pathlib.Path) -> Iterator[coordinator_main.CoordinatorProcess]:
    tls = transport.TLSFiles.in_directory(pki / "coordinator")
    with hubside.running_coordinator(sandbox, clusters, members=[AGENT], tls=tls, use_ray=False) as process:
        yield process


def place(clusters: conftest.Clusters, namespace: str) -> str:
    """A Deployment and its spread in `namespace` of the hub; the spread's key."""
    return hubside.Hub(clusters, namespace).create(
        builders.deployment("web", 2, cpu="100m"),
        hubside.spread_body("web", target="web", subsets=[{"name": "only", "clusters": [AGENT]}]))


def test_a_user_bound_in_one_namespace_reads_it_and_nothing_else(
        sandbox: Any, clusters: conftest.Clusters, namespace: str, other_namespace: str,
        pki: pathlib.Path, coordinator: coordinator_main.CoordinatorProcess) -> None:
    target = f"127.0.0.1:{coordinator.port}"
    mine, theirs = place(clusters, namespace), place(clusters, other_namespace)
    user = f"reader-{uuid.uuid4().hex[:8]}"  # bound in `namespace` only, never cluster-wide
    hubsetup.grant_placement_reader(sandbox.hub.kubeconfig, user, namespace=namespace)
    reader = user_certificate(pki, user)

    with sdk_client(target, reader) as placements:
        def found() -> sdk.SpreadPlacement | None:
            try:
                return placements.placement(mine)
            except sdk.SpreadNotFound:
                return None

        assert waiting.wait_for(found, timeout=WAIT, message=f"{mine} never placed").spread == mine
        assert [p.spread for p in placements.placements(namespace)] == [mine]
        assert [p.spread for p in placements.placements()] == [mine], "B's placement must not be listed"

        with pytest.raises(sdk.PermissionDenied) as refused:
            placements.placement(theirs)
        assert refused.value.code == "PERMISSION_DENIED"
        assert f"user '{user}' may not get federatedspreads.fedspread.io/web in namespace " \
               f"'{other_namespace}'" in str(refused.value)
        with pytest.raises(sdk.PermissionDenied, match=re.escape(
                f"may not list federatedspreads.fedspread.io in namespace '{other_namespace}'")):
            placements.placements(other_namespace)
        with pytest.raises(sdk.PermissionDenied, match=re.escape("may not list memberclusters.fedspread.io")):
            placements.clusters()
        with pytest.raises(sdk.PermissionDenied):
            next(iter(placements.watch(theirs, timeout=5)))

    stranger = user_certificate(pki, f"stranger-{uuid.uuid4().hex[:8]}")  # bound nowhere
    with sdk_client(target, stranger) as placements, pytest.raises(sdk.PermissionDenied):
        placements.placement(mine)

    files = transport.TLSFiles.in_directory(pki / AGENT)
    with sdk_client(target, files) as placements, \
            pytest.raises(sdk.PermissionDenied, match=re.escape("an agent's certificate may not read")):
        placements.placement(mine)

    result = subprocess.run(
        [FEDSPREAD, "get", "placement", theirs, "--coordinator", target, "--timeout", "10",
         "--ca", str(reader.ca), "--cert", str(reader.cert), "--key", str(reader.key)],
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "may not get federatedspreads.fedspread.io/web" in result.stderr


def settled(clusters: conftest.Clusters, user: access.User, question: access.Access, *,
            allowed: bool) -> None:
    """Wait until the hub itself answers `question` for `user` so (an uncached reviewer asks):
    its RBAC authorizer learns of a binding made or deleted through its own informers."""
    fresh = access_review.SubjectAccessReviewer(clusters.api(hubside.HUB), ttl=0.0, capacity=1)
    waiting.wait_for(lambda: fresh.allowed(user, question) is allowed or None, timeout=WAIT,
                     message=f"the hub never answered {allowed} for {user.name}")


def test_answers_are_cached_briefly_and_per_question(
        sandbox: Any, clusters: conftest.Clusters, namespace: str) -> None:
    user = access.User(f"cached-{uuid.uuid4().hex[:8]}", ("fedspread:users", access.AUTHENTICATED_GROUP))
    binding = hubsetup.grant_placement_reader(sandbox.hub.kubeconfig, user.name, namespace=namespace)
    now = [0.0]
    reviewer = access_review.SubjectAccessReviewer(clusters.api(hubside.HUB), ttl=10.0, capacity=2,
                                                   clock=lambda: now[0])
    own, elsewhere = access.list_spreads(namespace), access.list_spreads("kube-system")
    settled(clusters, user, own, allowed=True)  # the apiserver's RBAC sees a new binding a moment later

    def answers() -> tuple[bool, bool]:
        return reviewer.allowed(user, own), reviewer.allowed(user, elsewhere)

    assert answers() == (True, False) and reviewer.reviews == 2
    assert answers() == (True, False) and reviewer.reviews == 2, "both answers, allow and deny, cached"
    now[0] += 10.5
    assert answers() == (True, False) and reviewer.reviews == 4, "asked again after the TTL"
    assert reviewer.allowed(user, access.list_clusters()) is False and reviewer.reviews == 5
    assert reviewer.allowed(user, own) is True and reviewer.reviews == 6, "capacity 2: the oldest went out"

    rbac = client.RbacAuthorizationV1Api(clusters.api(hubside.HUB))
    rbac.delete_namespaced_role_binding(binding, namespace)
    settled(clusters, user, own, allowed=False)
    assert reviewer.allowed(user, own) is True, "within the TTL the cached answer stands"
    now[0] += 10.5
    assert reviewer.allowed(user, own) is False, "a revoked binding is honoured after the TTL"
