"""Pods beyond their subset's quota fill a member's Deployment: the agent removes the spare ones,
and the subset that waits gets its pods, with no Ready pod the spread needs gone first.

Two subsets in member-1, `first` then `second`, 8 replicas all in `first`. The hub Deployment is
scaled to 4 and `first` capped at 1 while member-1's kube-controller-manager is stopped (SIGSTOP),
so that both edits are decided before its ReplicaSet acts (as a busy or restarting member's
would): the coordinator gives `first` 1 plus the 3 Ready pods its handover keeps until their
replacements are Ready, `second` 3; member-1's Deployment is set to their sum, 7. Resumed, the
ReplicaSet scales down 8 → 7, removing one pod of `first` (the cheapest), and stops: 7 pods of
`first`, at its target, and `second` waits for 3 pods it never creates (`make soak`'s
`pods-above-a-quota`; before the rule nothing converged). The agent removes the 3 spare pods
(`federation.core.spare_pods`), its ReplicaSet creates 3, the webhook admits them into `second`,
and once they are Ready the kept pods go: `first` 1, `second` 3. Real coordinator, real agents,
pods Ready 4 s after they start; every sample of the Ready pods is judged
(`handover_scene.ReadyWatch`): never fewer than 4.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import time
from collections.abc import Iterator
from typing import Any

import conftest
import hubside
import pytest
from handover_scene import MEMBERS, ReadyWatch, Scene

from federation.api import names as api_names

BEFORE, REPLICAS = 8, 4


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[list[str], Any]]:
    """A coordinator on the hub, and the cluster names of its two agents."""
    names = hubside.names("sp1", "sp2")
    with hubside.running_coordinator(sandbox, clusters, members=names) as process:
        yield names, process


def subsets(member: str, *, cap: int | None) -> list[dict[str, Any]]:
    first: dict[str, Any] = {"name": "first", "clusters": [member]}
    if cap is not None:
        first["maxReplicas"] = cap
    return [first, {"name": "second", "clusters": [member]}]


def by_subset(clusters: conftest.Clusters, member: str, namespace: str) -> dict[str, tuple[int, int]]:
    """Per subset (its annotation; "" for none), the pods of `member` not being deleted and the
    Ready ones among them."""
    found: dict[str, tuple[int, int]] = {}
    for pod in clusters.core(member).list_namespaced_pod(namespace, _request_timeout=10).items:
        if pod.metadata.deletion_timestamp is not None:
            continue
        subset = (pod.metadata.annotations or {}).get(api_names.SUBSET_ANNOTATION, "")
        ready = any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
        pods, ready_pods = found.get(subset, (0, 0))
        found[subset] = (pods + 1, ready_pods + int(ready))
    return found


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """Process `pid` stopped (SIGSTOP) inside the block, and continued after it whatever happens."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def member_replicas(clusters: conftest.Clusters, member: str, namespace: str) -> int | None:
    return clusters.apps(member).read_namespaced_deployment("web", namespace).spec.replicas  # type: ignore[no-any-return]


def test_pods_beyond_a_quota_at_the_member_target_make_room_for_the_waiting_subset_without_a_dip(
        sandbox: Any, clusters: conftest.Clusters, namespace: str, coordinator: tuple[list[str], Any],
        tmp_path: pathlib.Path) -> None:
    names, process = coordinator
    scene = Scene(clusters, namespace, names=names, target=f"127.0.0.1:{process.port}", tmp_path=tmp_path)
    member = MEMBERS[0]
    manager = next(c for c in sandbox.components if c.name == f"{member}-controller-manager")
    try:
        scene.start(hubside.spread_body("web", target="web", subsets=subsets(names[0], cap=None)),
                    replicas=BEFORE, expect={member: BEFORE})
        assert by_subset(clusters, member, namespace) == {"first": (BEFORE, BEFORE)}
        with ReadyWatch(clusters, namespace) as watch:
            with stopped(manager.pid):
                scene.hub.scale("web", REPLICAS)
                scene.hub.patch_spread("web", {"spec": {"subsets": subsets(names[0], cap=1)}})
                # first 1 + 3 kept, second 3: the sum, 7, written (after 4 or 15, by the edits' order)
                scene.wait(lambda: member_replicas(clusters, member, namespace) == 7,
                           "member-1's Deployment never went to the quotas' sum, 7")
                time.sleep(2)
                assert member_replicas(clusters, member, namespace) == 7
                assert by_subset(clusters, member, namespace) == {"first": (BEFORE, BEFORE)}
            scene.wait(lambda: by_subset(clusters, member, namespace) == {"first": (1, 1), "second": (3, 3)},
                       "member-1 never ran first 1, second 3", timeout=180)
            time.sleep(1)
            assert watch.fewest() >= REPLICAS, watch.history
        assert watch.sampler.samples > 20, watch.sampler.samples
        for agent in scene.agents:
            assert agent.alive and "Traceback" not in agent.output(), agent.log
    finally:
        scene.stop()
