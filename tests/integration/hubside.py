"""What coordinator tests do on the sandbox hub: Deployments, spreads, statuses, a coordinator.

Why a module: the coordinator's tests all play the user's side of the hub (create a Deployment and
a FederatedSpread, `kubectl scale`, edit, delete, read the status back) and run a coordinator
process — in this process, or as a `fedspread coordinator` command that can be SIGKILLed — next
to stand-in agents; one copy of those steps keeps each test about its scenario.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import conftest
import waiting
from kubernetes import client

from federation import sdk
from federation.api import cluster, common
from federation.api import spread as spread_api
from federation.coordinator import process as coordinator_main
from federation.sandbox import build
from federation.sandbox.ports import free_port
from tests.support import standin_agent

GROUP, VERSION = common.API_GROUP, common.API_VERSION
HUB = "hub"
TIMEOUT = 30.0


def spread_body(name: str, *, target: str, subsets: Sequence[dict[str, Any]], strategy: str = "Fixed",
                lost_seconds: int | None = None, kind: str = "Deployment") -> dict[str, Any]:
    """A FederatedSpread for workload `target` of `kind` (apps/v1; a Job batch/v1)."""
    api_version = spread_api.TARGET_API_VERSIONS.get(kind, "apps/v1")
    spec: dict[str, Any] = {"targetRef": {"apiVersion": api_version, "kind": kind, "name": target},
                            "subsets": list(subsets), "scheduleStrategy": {"type": strategy}}
    if lost_seconds is not None:
        spec["failover"] = {"clusterLostSeconds": lost_seconds}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "FederatedSpread", "metadata": {"name": name},
            "spec": spec}


class Hub:
    """The user's side of the hub, in one namespace."""

    def __init__(self, clusters: conftest.Clusters, namespace: str) -> None:
        self.namespace = namespace
        self.custom = clusters.custom(HUB)
        self.apps = clusters.apps(HUB)
        self.api = clusters.api(HUB)

    def create(self, deployment_body: dict[str, Any], spread: dict[str, Any]) -> str:
        """Create the Deployment and the spread; returns the spread key."""
        self.apps.create_namespaced_deployment(self.namespace, deployment_body)
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, spread_api.PLURAL, spread)
        return f"{self.namespace}/{spread['metadata']['name']}"

    def scale(self, name: str, replicas: int) -> None:
        """`kubectl scale deploy/NAME --replicas=N` on the hub."""
        self.apps.patch_namespaced_deployment_scale(name, self.namespace, {"spec": {"replicas": replicas}})

    def patch_spread(self, name: str, patch: dict[str, Any]) -> None:
        """A JSON merge patch of the spread (an edit)."""
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, spread_api.PLURAL, name, patch,
            _content_type="application/merge-patch+json")

    def delete_spread(self, name: str) -> None:
        """Delete the spread."""
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, spread_api.PLURAL, name)

    def spread_status(self, name: str) -> dict[str, Any]:
        """The spread's status as written ({} before the first write)."""
        obj = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, spread_api.PLURAL, name)
        assert isinstance(obj, dict)
        found: dict[str, Any] = obj.get("status") or {}
        return found

    def condition(self, name: str, kind: str) -> dict[str, Any]:
        """The spread's condition `kind` ({} when absent)."""
        for item in self.spread_status(name).get("conditions") or []:
            if item.get("type") == kind:
                return dict(item)
        return {}

    def rollout_status(self, sandbox: Any, what: str, *,
                       timeout: int = 60) -> subprocess.CompletedProcess[str]:
        """`kubectl rollout status WHAT` on the hub with the sandbox's real kubectl (`deploy/web`,
        `sts/db`): exit 0 once the hub object's status, as the coordinator writes it, says done."""
        return subprocess.run([str(build.kubectl()), "--kubeconfig", str(sandbox.hub.kubeconfig),
                               "--namespace", self.namespace, "rollout", "status", what,
                               f"--timeout={timeout}s"], capture_output=True, text=True, timeout=timeout + 30)

    def events(self, name: str, reason: str) -> list[dict[str, Any]]:
        """The events.k8s.io/v1 Events in the namespace regarding object `name` with `reason`."""
        return events_of(self.api, self.namespace, name=name, reason=reason)

    def deployment_status(self, name: str) -> dict[str, Any]:
        """The hub Deployment's status fields (snake_case, as the client models name them)."""
        read = self.apps.read_namespaced_deployment_status(name, self.namespace)
        found: dict[str, Any] = read.status.to_dict()
        return found


def events_of(api: client.ApiClient, namespace: str, *, name: str, reason: str) -> list[dict[str, Any]]:
    """The events.k8s.io/v1 Events in `namespace` regarding object `name` with `reason`."""
    response = client.EventsV1Api(api).list_namespaced_event(namespace, _preload_content=False)
    listing = json.loads(response.data)
    return [e for e in listing["items"]
            if (e.get("regarding") or {}).get("name") == name and e.get("reason") == reason]


def member_ready(custom: client.CustomObjectsApi, name: str) -> str | None:
    """The MemberCluster's Ready condition status ("True"/"False"), None when absent."""
    try:
        obj = custom.get_cluster_custom_object(GROUP, VERSION, cluster.PLURAL, name)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == "Ready":
            return str(item.get("status"))
    return None


def delete_member_clusters(custom: client.CustomObjectsApi, names: Sequence[str]) -> None:
    """Delete MemberClusters a test registered (absent ones are fine)."""
    for name in names:
        try:
            custom.delete_cluster_custom_object(GROUP, VERSION, cluster.PLURAL, name)
        except client.ApiException as error:
            if error.status != 404:
                raise


@contextlib.contextmanager
def running_coordinator(
    sandbox: Any, clusters: conftest.Clusters, *, members: Sequence[str], **settings: Any
) -> Iterator[coordinator_main.CoordinatorProcess]:
    """A CoordinatorProcess (Ray shards on the session's Ray) on the sandbox hub, on a free port;
    the `members` MemberClusters are deleted before and after."""
    custom = clusters.custom(HUB)
    delete_member_clusters(custom, members)
    config = coordinator_main.CoordinatorConfig(
        hub_kubeconfig=pathlib.Path(sandbox.hub.kubeconfig), listen=f"127.0.0.1:{free_port()}",
        **{"heartbeat_seconds": 1.0, "status_seconds": 0.5, "tick_seconds": 0.25, **settings})
    process = coordinator_main.CoordinatorProcess(config)
    try:
        process.start()
        yield process
    finally:
        process.stop()
        delete_member_clusters(custom, members)


class CoordinatorCommand:
    """`fedspread coordinator` as a real process joining the session's Ray (or placing in its own
    process): it can be SIGKILLed."""

    def __init__(self, kubeconfig: str, *, port: int, ray_address: str | None, log: pathlib.Path,
                 extra: Sequence[str] = (), env: dict[str, str] | None = None) -> None:
        """`ray_address`: the session's Ray, None for `--no-ray`; `extra`: more flags (e.g.
        --leader-elect); `env`: added to this process's environment."""
        self.target = f"127.0.0.1:{port}"
        placement = ["--ray-address", ray_address] if ray_address is not None else ["--no-ray"]
        self.args = [str(pathlib.Path(sys.executable).with_name("fedspread")), "coordinator",
                     "--hub-kubeconfig", kubeconfig, "--listen", self.target,
                     *placement, "--heartbeat-seconds", "1",
                     "--metrics-port", "0", "--health-port", "0",  # off: no fixed port on a shared machine
                     "--insecure", *extra]  # its agents are plaintext links; mTLS: test_mtls*.py
        self.env = {**os.environ, **(env or {})}
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it (again), its output appended to the log."""
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True, env=self.env)

    @property
    def alive(self) -> bool:
        """The current process runs."""
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, as a crash or an OOM kill."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not stop within 20 s."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


# --- stand-in agents (the real agent link, no member cluster) -----------------------------------


def names(*bases: str) -> list[str]:
    """Cluster names unique to one test (MemberClusters are cluster-scoped on the shared hub)."""
    suffix = uuid.uuid4().hex[:5]
    return [f"{base}-{suffix}" for base in bases]


def agents_for(target: str, specs: dict[str, tuple[int, str]]) -> dict[str, standin_agent.StandInAgent]:
    """Stand-in agents, by cluster name ((nodes, cpu per node) each), connected and resynced.

    Waiting matters: a spread created before a cluster's first Hello is placed without that
    cluster, and (stability) its replicas stay where they went when the cluster arrives.
    """
    agents = {name: standin_agent.StandInAgent(target, name=name, nodes=nodes, cpu=cpu).start()
              for name, (nodes, cpu) in specs.items()}
    for agent in agents.values():
        waiting.wait_for(agent.link.synced.is_set, timeout=60,
                         message=f"agent {agent.name} never got ResyncComplete")

    def inventories() -> bool:  # a cluster without one has no known capacity (Adaptive skips it)
        with sdk.PlacementClient(target) as placements:
            listed = placements.clusters(include_node_pools=True)
            return {c.name for c in listed if c.node_pools} >= set(specs)

    waiting.wait_for(inventories, timeout=60, message="the coordinator never listed every agent's inventory")
    return agents


def stop_all(agents: dict[str, standin_agent.StandInAgent]) -> None:
    """Stop every stand-in agent."""
    for agent in agents.values():
        agent.stop()


def replicas_of(agents: dict[str, standin_agent.StandInAgent], key: str) -> dict[str, int | None]:
    """Each agent's replicas of spread `key` as last assigned (None: no assignment)."""
    return {name: agent.replicas(key) for name, agent in agents.items()}


def wait_replicas(agents: dict[str, standin_agent.StandInAgent], key: str, expected: dict[str, int], *,
                  what: str, timeout: float = TIMEOUT) -> None:
    """Wait until the agents hold exactly `expected` replicas of spread `key` (an expected 0 is met
    by no assignment too: a cluster is sent a spread only while it has replicas of it)."""

    def met() -> bool:
        found = replicas_of(agents, key)
        return found.keys() == expected.keys() and all(
            found[name] == count or (count == 0 and found[name] is None) for name, count in expected.items())

    waiting.wait_for(met, timeout=timeout,
                     message=lambda: f"{what}: agents have {replicas_of(agents, key)}, expected {expected}")
