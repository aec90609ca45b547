"""The demo's federation as a test sees it: clients for its clusters, what its coordinator and members
show for one spread, and the clean-up that leaves it as it was found.

Why a module: the session's demo federation (`conftest.federation`: hub, dc1, aws-eu, gcp-eu, the
coordinator, an agent per member) is shared by every test that needs three real members —
`test_examples.py` (each example as documented) and `test_topology_spread_sandbox.py` (skew and
floors on real pods) — and each must observe a spread the same way and leave the federation idle.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import waiting
from kubernetes import client, config

from federation import sdk
from federation.api import common, names, quantity
from federation.api import spread as spread_api
from federation.demo import environment

TIMEOUT = 60.0

Placement = dict[str, dict[str, int]]
"""Replicas per subset, per cluster (every cluster the subset selects, zeros included)."""


# --- what the federation shows -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Seen:
    """One observation: the coordinator's placement and readiness, the spread's pods per member."""

    placement: Placement | None
    unplaced: int
    ready: dict[str, bool]
    pods: dict[str, list[client.V1Pod]]
    """Live (not deleting) pods of the spread, per member whose agent runs."""
    nodes: dict[str, dict[str, dict[str, str]]]
    """Node labels per member, per node name."""

    def counts(self, member: str) -> dict[str, int]:
        """Running pods per subset annotation in `member` ("-" for pods without a subset)."""
        found: dict[str, int] = {}
        for pod in self.pods.get(member, []):
            subset = (pod.metadata.annotations or {}).get(names.SUBSET_ANNOTATION, "-")
            found[subset] = found.get(subset, 0) + 1
        return found

    def pending(self) -> list[str]:
        """Pods not Running, as "member/pod"."""
        return [f"{member}/{pod.metadata.name}" for member, pods in self.pods.items() for pod in pods
                if (pod.status.phase if pod.status else None) != "Running"]

    def describe(self) -> str:
        return (f"placement {self.placement} (unplaced {self.unplaced}), ready {self.ready}, running pods "
                f"per member and subset { {m: self.counts(m) for m in self.pods} }, "
                f"not running {self.pending()}")


# --- clients, and what they show ------------------------------------------------------------------


@dataclasses.dataclass
class Apis:
    """Clients for the hub and every member of the federation."""

    federation: environment.Federation
    placements: sdk.PlacementClient
    api: dict[str, client.ApiClient]

    @property
    def members(self) -> list[str]:
        return [m.name for m in self.federation.members]

    def core(self, name: str) -> client.CoreV1Api:
        return client.CoreV1Api(self.api[name])

    def apps(self, name: str) -> client.AppsV1Api:
        return client.AppsV1Api(self.api[name])

    def batch(self, name: str) -> client.BatchV1Api:
        return client.BatchV1Api(self.api[name])

    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api["hub"])


@contextlib.contextmanager
def connect(federation: environment.Federation) -> Iterator[Apis]:
    """Clients for the hub, every member and the coordinator (mTLS, the demo's client certificate)."""
    cluster_names = ["hub", *(m.name for m in federation.members)]
    api = {n: config.new_client_from_config(config_file=federation.kubeconfig(n)) for n in cluster_names}
    with federation.placement_client(timeout=5.0) as placements:
        yield Apis(federation, placements, api)


WORKLOADS = {
    "Deployment": ("create_namespaced_deployment", "patch_namespaced_deployment_scale",
                   "delete_namespaced_deployment"),
    "ReplicaSet": ("create_namespaced_replica_set", "patch_namespaced_replica_set_scale",
                   "delete_namespaced_replica_set"),
    "StatefulSet": ("create_namespaced_stateful_set", "patch_namespaced_stateful_set_scale",
                    "delete_namespaced_stateful_set"),
    "Job": ("create_namespaced_job", "patch_namespaced_job", "delete_namespaced_job"),
}
"""Per example workload kind, the hub calls that create, scale (a Job: a patch of parallelism, it
has no /scale) and delete it."""
QUANTITY = {"Job": "parallelism"}
"""The spec field a scale step sets, where it is not `replicas`."""


def hub_call(apis: Apis, kind: str, action: int) -> Callable[..., Any]:
    """The hub's AppsV1Api (BatchV1Api for a Job) call of `WORKLOADS[kind][action]` (0 create,
    1 scale, 2 delete)."""
    found: Callable[..., Any] = getattr(apis.batch("hub") if kind == "Job" else apis.apps("hub"),
                                        WORKLOADS[kind][action])
    return found


def idle(apis: Apis) -> bool:
    """Every member ready, its inventory reported, and no CPU or memory requested on any node."""
    found = apis.placements.clusters(include_node_pools=True)
    return {c.name for c in found if c.ready and c.node_pools} == set(apis.members) and all(
        quantity.parse_quantity(pool.requested.get(resource, "0")) == 0
        for c in found for pool in c.node_pools for resource in ("cpu", "memory"))


def observe(apis: Apis, key: str, label: str) -> Seen:
    namespace = key.partition("/")[0]
    try:
        placed = apis.placements.placement(key)
        placement: Placement | None = {s.name: dict(s.clusters) for s in placed.subsets}
        unplaced = placed.unplaced
    except sdk.SpreadNotFound:
        placement, unplaced = None, 0
    pods: dict[str, list[client.V1Pod]] = {}
    nodes: dict[str, dict[str, dict[str, str]]] = {}
    for member in apis.members:
        if member in apis.federation.stopped:
            continue
        found = apis.core(member).list_namespaced_pod(namespace, label_selector=label).items
        pods[member] = [p for p in found if p.metadata.deletion_timestamp is None]
        listed = apis.core(member).list_node().items
        nodes[member] = {n.metadata.name: n.metadata.labels or {} for n in listed}
    ready = {c.name: c.ready for c in apis.placements.clusters()}
    return Seen(placement, unplaced, ready, pods, nodes)


def reached(seen: Seen, want: Placement, stopped: set[str]) -> bool:
    """The placement is `want`, every pod runs where it says, readiness matches the agents."""
    if seen.placement != want or seen.unplaced or seen.pending():
        return False
    if any(seen.ready.get(member) != (member not in stopped) for member in seen.ready):
        return False
    return all(seen.counts(member) == {s: n for s, where in want.items() if (n := where.get(member, 0))}
               for member in seen.pods)


def delete_quietly(call: Callable[[], object]) -> None:
    try:
        call()
    except client.ApiException as error:
        if error.status != 404:
            raise


def clean_up(apis: Apis, namespace: str, workload: dict[str, Any], spread: str) -> None:
    """Every agent back, the example's objects deleted, its member pods and Deployments gone, the
    namespaces deleted (the hub has no namespace controller: its namespace stays Terminating)."""
    start_clean_up(apis, namespace, workload, spread)

    def leftovers() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for m in apis.members:
            pods = apis.core(m).list_namespaced_pod(namespace).items
            deployments = apis.apps(m).list_namespaced_deployment(namespace).items
            replicasets = apis.apps(m).list_namespaced_replica_set(namespace).items
            statefulsets = apis.apps(m).list_namespaced_stateful_set(namespace).items
            jobs = apis.batch(m).list_namespaced_job(namespace).items
            if items := [f"pod/{p.metadata.name}" for p in pods] + [
                    f"deployment/{d.metadata.name}" for d in deployments] + [
                    f"replicaset/{r.metadata.name}" for r in replicasets] + [
                    f"statefulset/{s.metadata.name}" for s in statefulsets] + [
                    f"job/{j.metadata.name}" for j in jobs]:
                found[m] = items
        return found

    waiting.wait_for(lambda: not leftovers() and idle(apis), timeout=TIMEOUT,
                     message=lambda: f"left in {namespace}: {leftovers()}; clusters idle: {idle(apis)}")
    for name in ["hub", *apis.members]:
        delete_quietly(lambda name=name: apis.core(name).delete_namespace(namespace))


def start_clean_up(apis: Apis, namespace: str, workload: dict[str, Any], spread: str) -> None:
    """`clean_up`'s deletions without its wait: examples side by side drain together (each
    `clean_up` waits for every cluster to be idle, so one at a time would wait for the others)."""
    for name in sorted(apis.federation.stopped):
        apis.federation.start_agent(name)
    path = (common.API_GROUP, common.API_VERSION, namespace, spread_api.PLURAL, spread)
    # The default deletionPolicy (Orphan) would leave the member workloads running: ask for Delete.
    delete_quietly(lambda: apis.custom().patch_namespaced_custom_object(
        *path, {"spec": {"deletionPolicy": "Delete"}}, _content_type="application/merge-patch+json"))
    delete_quietly(lambda: apis.custom().delete_namespaced_custom_object(*path))
    delete_quietly(lambda: hub_call(apis, workload["kind"], 2)(workload["metadata"]["name"], namespace))
