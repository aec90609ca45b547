"""A spread of a hub ReplicaSet, end to end on the sandbox: the kind wired as a Deployment is.

A real coordinator (placements on the session's Ray) and a real `fedspread agent` process manage
sandbox member-1, whose three nodes are in three zones. The spread targets a hub ReplicaSet with two
ordered subsets in that one cluster, by zone: `a` (capped at 2) and `b`. The hub runs no
ReplicaSet controller, so the hub object is a template and a count; the member runs it as its own
ReplicaSet, whose real controller (the sandbox's, patched to honour pod-deletion-cost as 1.22+
does) creates and deletes the pods:

- placed: the member ReplicaSet exists with the cluster's share, marked as the spread's, and its
  pods are admitted into subset `a` first (`fedspread.io/subset`, on `a`'s zone);
- `kubectl scale rs` on the hub up to 5 fills `b` with the rest, down to 3 removes `b`'s pods and
  keeps `a`'s (deletion cost orders the real controller's choice);
- the hub ReplicaSet's status is the members' (`replicas`, `readyReplicas`, `availableReplicas`,
  `fullyLabeledReplicas`), so `kubectl get rs` on the hub tells the truth;
- deleting the spread (default `deletionPolicy: Orphan`) releases the member ReplicaSet: the same
  pods run on, and the hub ReplicaSet's status stops claiming replicas. A second ReplicaSet,
  `brief`, spread alongside under `deletionPolicy: Delete`, has its member ReplicaSet and pods
  deleted with it.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator
from typing import Any

import agentside
import conftest
import hubside
import pytest
import waiting

from federation.api import names
from tests.support import builders

MEMBER = "member-1"
TIMEOUT = 90.0
OBSERVE_SECONDS = 5.0
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def coordinator(sandbox: Any, clusters: conftest.Clusters, local_ray: str) -> Iterator[tuple[str, Any]]:
    """A coordinator on the hub, and the cluster name its agent uses."""
    (name,) = hubside.names("rs")
    with hubside.running_coordinator(sandbox, clusters, members=[name]) as process:
        yield name, process


def replicaset(name: str, replicas: int) -> dict[str, Any]:
    """A ReplicaSet of one small container, its pods labelled and selected by `app: name`."""
    body = builders.deployment(name, replicas, cpu="10m")
    body["kind"] = "ReplicaSet"
    return body


def zone_subset(name: str, cluster: str, *, cap: int | None = None) -> dict[str, Any]:
    subset: dict[str, Any] = {"name": name, "clusters": [cluster], "requiredNodeSelectorTerm": {
        "matchExpressions": [{"key": ZONE, "operator": "In", "values": [f"{MEMBER}-{name}"]}]}}
    if cap is not None:
        subset["maxReplicas"] = cap
    return subset


def pods(clusters: conftest.Clusters, namespace: str) -> dict[str, tuple[str, bool]]:
    """Pod name → (subset annotation, Ready), for the live pods of `app=web` in the member."""
    found = clusters.core(MEMBER).list_namespaced_pod(namespace, label_selector="app=web").items
    def ready(pod: Any) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])

    return {p.metadata.name: ((p.metadata.annotations or {}).get(names.SUBSET_ANNOTATION, ""), ready(p))
            for p in found if p.metadata.deletion_timestamp is None}


def ready_by_subset(clusters: conftest.Clusters, namespace: str) -> dict[str, int]:
    counted: dict[str, int] = {}
    for subset, ready in pods(clusters, namespace).values():
        counted[subset] = counted.get(subset, 0) + int(ready)
    return counted


def member_replicaset(clusters: conftest.Clusters, namespace: str, name: str = "web") -> Any:
    """The member ReplicaSet `name`, or None."""
    found = [r for r in clusters.apps(MEMBER).list_namespaced_replica_set(namespace).items
             if r.metadata.name == name and r.metadata.deletion_timestamp is None]
    return found[0] if found else None


def hub_status(hub: hubside.Hub, name: str = "web") -> dict[str, Any]:
    """The hub ReplicaSet's status fields (snake_case, as the client models name them)."""
    found: dict[str, Any] = hub.apps.read_namespaced_replica_set_status(name, hub.namespace).status.to_dict()
    return found


def live_pods(clusters: conftest.Clusters, namespace: str, app: str) -> list[str]:
    """The names of the member's pods labelled `app`, being deleted or not."""
    return [p.metadata.name for p in clusters.core(MEMBER).list_namespaced_pod(
        namespace, label_selector=f"app={app}").items]


def test_a_replicaset_is_placed_scaled_in_the_spread_order_reported_and_orphaned(
        clusters: conftest.Clusters, namespace: str, coordinator: tuple[str, Any],
        tmp_path: pathlib.Path) -> None:
    name, process = coordinator
    hub = hubside.Hub(clusters, namespace)
    agent = agentside.AgentProcess(clusters, cluster=name, member=MEMBER,
                                   coordinator=f"127.0.0.1:{process.port}", namespace=namespace,
                                   log=tmp_path / "agent.log")

    def wait(probe: Any, what: str) -> Any:
        return waiting.wait_for(probe, timeout=TIMEOUT, message=lambda: (
            f"{what}; pods {pods(clusters, namespace)}; hub status {hub_status(hub)}; "
            f"spread status {hub.spread_status('web')}; agent log {agent.log}"))

    try:
        wait(lambda: agentside.webhook_live(agent, clusters, MEMBER, namespace),
             "the apiserver never called the agent's webhook")
        hub.apps.create_namespaced_replica_set(namespace, replicaset("web", 2))
        hub.custom.create_namespaced_custom_object(
            hubside.GROUP, hubside.VERSION, namespace, "federatedspreads",
            hubside.spread_body("web", target="web", kind="ReplicaSet", lost_seconds=600,
                                subsets=[zone_subset("a", name, cap=2), zone_subset("b", name)]))
        hub.apps.create_namespaced_replica_set(namespace, replicaset("brief", 1))
        brief = hubside.spread_body("brief", target="brief", kind="ReplicaSet", lost_seconds=600,
                                    subsets=[zone_subset("a", name), zone_subset("b", name)])
        brief["spec"]["deletionPolicy"] = "Delete"
        hub.custom.create_namespaced_custom_object(hubside.GROUP, hubside.VERSION, namespace,
                                                   "federatedspreads", brief)

        # Placed: the member ReplicaSet is the spread's, its 2 pods in `a`.
        wait(lambda: ready_by_subset(clusters, namespace) == {"a": 2}, "web never ran 2 Ready pods in a")
        member = member_replicaset(clusters, namespace)
        assert member.metadata.annotations[names.SPREAD_KEY_ANNOTATION] == f"{namespace}/web"
        assert member.spec.replicas == 2
        assert not member.metadata.owner_references, "a member ReplicaSet is its pods' only controller"
        assert not clusters.core(hubside.HUB).list_namespaced_pod(namespace).items, \
            "the hub runs no ReplicaSet controller: no pod on the hub"

        # `kubectl scale rs/web --replicas=5` on the hub: b takes what a's cap leaves.
        hub.apps.patch_namespaced_replica_set_scale("web", namespace, {"spec": {"replicas": 5}})
        wait(lambda: ready_by_subset(clusters, namespace) == {"a": 2, "b": 3}, "never 2 Ready in a, 3 in b")
        wait(lambda: (hub_status(hub)["replicas"], hub_status(hub)["ready_replicas"],
                      hub_status(hub)["available_replicas"], hub_status(hub)["fully_labeled_replicas"])
             == (5, 5, 5, 5), "the hub ReplicaSet never showed the members' 5 ready replicas")
        in_a = {pod for pod, (subset, _) in pods(clusters, namespace).items() if subset == "a"}

        # Down to 3: the real ReplicaSet controller removes b's pods (lower deletion cost), a's stay.
        hub.apps.patch_namespaced_replica_set_scale("web", namespace, {"spec": {"replicas": 3}})
        wait(lambda: ready_by_subset(clusters, namespace) == {"a": 2, "b": 1}, "never 2 Ready in a, 1 in b")
        assert {pod for pod, (subset, _) in pods(clusters, namespace).items() if subset == "a"} == in_a, \
            "a scale-down removed a pod of the first subset"
        wait(lambda: (hub_status(hub)["replicas"], hub_status(hub)["ready_replicas"]) == (3, 3),
             "the hub ReplicaSet never showed 3 ready replicas")
        placed = hub.spread_status("web")
        assert placed["targetRef"] == {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web"}
        assert placed["readyReplicas"] == 3

        # Deleted with the default policy: released, the same pods run on, the hub stops counting.
        # `brief`'s spread, deleted under Delete at the same time: its member ReplicaSet goes.
        wait(lambda: hub_status(hub, "brief").get("ready_replicas") == 1, "brief never ran its pod")
        before = set(pods(clusters, namespace))
        hub.delete_spread("brief")
        hub.delete_spread("web")
        wait(lambda: names.SPREAD_KEY_ANNOTATION not in (
            (member_replicaset(clusters, namespace) or _gone()).metadata.annotations or {}),
            "the agent never released the member ReplicaSet")
        deadline = time.monotonic() + OBSERVE_SECONDS
        while time.monotonic() < deadline:
            now = pods(clusters, namespace)
            assert set(now) == before and all(ready for _, ready in now.values()), \
                f"the orphaned pods changed or stopped: {before} -> {now}"
            time.sleep(0.5)
        wait(lambda: not hub_status(hub).get("replicas") and not hub_status(hub).get("ready_replicas"),
             "the hub ReplicaSet still claims replicas")
        wait(lambda: member_replicaset(clusters, namespace, "brief") is None
             and not live_pods(clusters, namespace, "brief"),
             "the Delete spread's member ReplicaSet or its pod was not deleted")
        wait(lambda: not hub_status(hub, "brief").get("replicas"),
             "the hub ReplicaSet brief still claims replicas")
        assert agent.alive, f"the agent exited; log {agent.log}"
        assert "Traceback" not in agent.output(), f"the agent logged a traceback; log {agent.log}"
    finally:
        agent.stop()


def _gone() -> Any:
    raise AssertionError("the member ReplicaSet was deleted (the default policy orphans it)")
