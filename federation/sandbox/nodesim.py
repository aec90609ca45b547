"""The kubelets of a sandbox member: fake nodes whose pods really become Running and Ready.

Why: the sandbox runs real apiservers, schedulers and controller-managers but no kubelet or
container runtime. Without something playing the kubelet, nodes stay NotReady (and tainted), bound
pods stay Pending forever and deletions never finish, so ReplicaSets, garbage collection and
namespace deletion stall. This process registers nodes from a declarative profile, clears the
not-ready taint, keeps the nodes' Ready heartbeat, marks bound pods Running/Ready with realistic
status fields, and completes graceful deletions (grace 0). It watches pods and works through them
with a small thread pool so that hundreds of pods do not fall behind.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import ipaddress
import itertools
import json
import logging
import signal
import threading
from collections.abc import Sequence
from typing import Any

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
HEARTBEAT_SECONDS = 20.0
log = logging.getLogger("fedspread.nodesim")


@dataclasses.dataclass(frozen=True)
class NodeGroup:
    """`count` identical nodes named `<prefix>-<i>`."""

    prefix: str
    count: int
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    taints: list[dict[str, str]] = dataclasses.field(default_factory=list)
    allocatable: dict[str, str] = dataclasses.field(
        default_factory=lambda: {"cpu": "4", "memory": "16Gi", "pods": "110"}
    )


def default_profile(cluster: str, nodes: int) -> list[NodeGroup]:
    """`nodes` plain worker nodes for `cluster`, zone-labelled round-robin over three zones."""
    per_zone = [nodes // 3 + (1 if i < nodes % 3 else 0) for i in range(3)]
    return [
        NodeGroup(prefix=f"{cluster}-{zone}", count=count,
                  labels={"topology.kubernetes.io/zone": f"{cluster}-{zone}", "type": "worker"})
        for zone, count in zip("abc", per_zone, strict=True) if count
    ]


def dump_profile(groups: Sequence[NodeGroup]) -> str:
    """JSON text of a profile."""
    return json.dumps([dataclasses.asdict(g) for g in groups], indent=2)


def load_profile(text: str) -> list[NodeGroup]:
    """A profile from its JSON text."""
    return [NodeGroup(**item) for item in json.loads(text)]


def count_ready_nodes(node_list_json: bytes) -> int:
    """How many nodes of a NodeList are Ready and carry no not-ready taint."""
    ready = 0
    for node in json.loads(node_list_json).get("items", []):
        conditions = node.get("status", {}).get("conditions", [])
        taints = node.get("spec", {}).get("taints") or []
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and not any(
            t.get("key") == NOT_READY_TAINT for t in taints
        ):
            ready += 1
    return ready


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NodeSimulator:
    """Plays the kubelet for every node of a profile on one member apiserver."""

    def __init__(self, api: Any, groups: Sequence[NodeGroup], *, workers: int = 8) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(api)
        self.groups = list(groups)
        self.nodes = [f"{g.prefix}-{i}" for g in self.groups for i in range(g.count)]
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
        self.stop = threading.Event()
        self._ips = (str(ipaddress.ip_address("10.244.0.0") + i) for i in itertools.count(2))
        self._ip_lock = threading.Lock()
        self._in_flight: set[str] = set()
        self._flight_lock = threading.Lock()

    def _node_status(self, group: NodeGroup) -> dict[str, Any]:
        now = _now()
        return {"status": {
            "capacity": group.allocatable, "allocatable": group.allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "fedspread node simulator", "lastHeartbeatTime": now,
                            "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "nodeInfo": {"kubeletVersion": "v1.20.2-fedspread-sim", "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64",
                         "containerRuntimeVersion": "sim://1", "osImage": "sandbox",
                         "kernelVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
        }}

    def register(self) -> None:
        """Create (or adopt) every node, mark it Ready and drop the not-ready taint."""
        from kubernetes.client import exceptions

        for group in self.groups:
            for index in range(group.count):
                name = f"{group.prefix}-{index}"
                body = {"apiVersion": "v1", "kind": "Node", "metadata": {
                    "name": name, "labels": {**group.labels, "kubernetes.io/hostname": name}},
                    "spec": {"taints": group.taints}}
                try:
                    self.core.create_node(body)
                except exceptions.ApiException as error:
                    if error.status != 409:
                        raise
                self.core.patch_node_status(name, self._node_status(group))
                self._clear_not_ready(name, group)

    def _clear_not_ready(self, name: str, group: NodeGroup) -> None:
        node = self.core.read_node(name)
        taints = [t for t in (node.spec.taints or []) if t.key != NOT_READY_TAINT]
        if len(taints) != len(node.spec.taints or []):
            self.core.patch_node(name, {"spec": {"taints": [
                {"key": t.key, "value": t.value, "effect": t.effect} for t in taints] or None}})

    def heartbeat(self) -> None:
        """Refresh every node's Ready condition until stopped."""
        by_name = {f"{g.prefix}-{i}": g for g in self.groups for i in range(g.count)}
        while not self.stop.wait(HEARTBEAT_SECONDS):
            for name, group in by_name.items():
                try:
                    self.core.patch_node_status(name, self._node_status(group))
                except Exception as error:  # a restart of the apiserver must not end the loop
                    log.warning("heartbeat for %s failed: %s", name, error)

    def _run_pod(self, namespace: str, name: str, pod: Any) -> None:
        now = _now()
        with self._ip_lock:
            ip = next(self._ips)
        containers = [{"name": c.name, "image": c.image or "sim", "imageID": f"sim://{c.image}",
                       "containerID": f"sim://{namespace}-{name}-{c.name}", "ready": True,
                       "started": True, "restartCount": 0, "state": {"running": {"startedAt": now}}}
                      for c in pod.spec.containers]
        conditions = [{"type": t, "status": "True", "lastTransitionTime": now}
                      for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
        self.core.patch_namespaced_pod_status(name, namespace, {"status": {
            "phase": "Running", "conditions": conditions, "hostIP": "127.0.0.1", "podIP": ip,
            "podIPs": [{"ip": ip}], "startTime": now, "containerStatuses": containers}})

    def _finish_deletion(self, namespace: str, name: str) -> None:
        from kubernetes.client import exceptions

        try:
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except exceptions.ApiException as error:
            if error.status != 404:
                raise

    def _handle(self, pod: Any) -> None:
        key = f"{pod.metadata.namespace}/{pod.metadata.name}"
        try:
            if pod.metadata.deletion_timestamp is not None:
                self._finish_deletion(pod.metadata.namespace, pod.metadata.name)
            elif pod.spec.node_name in self._node_set and pod.status.phase == "Pending":
                self._run_pod(pod.metadata.namespace, pod.metadata.name, pod)
        except Exception as error:
            log.warning("pod %s: %s", key, error)
        finally:
            with self._flight_lock:
                self._in_flight.discard(key)

    def _submit(self, pod: Any) -> None:
        key = f"{pod.metadata.namespace}/{pod.metadata.name}"
        needs_work = pod.metadata.deletion_timestamp is not None or (
            pod.spec.node_name in self._node_set and pod.status.phase == "Pending")
        if not needs_work:
            return
        with self._flight_lock:
            if key in self._in_flight:
                return
            self._in_flight.add(key)
        self.pool.submit(self._handle, pod)

    def watch_pods(self) -> None:
        """List, then watch pods, resuming on resourceVersion and relisting on 410 Gone."""
        from kubernetes import watch
        from kubernetes.client import exceptions

        self._node_set = set(self.nodes)
        while not self.stop.is_set():
            try:
                listing = self.core.list_pod_for_all_namespaces()
                for pod in listing.items:
                    self._submit(pod)
                version = listing.metadata.resource_version
                stream = watch.Watch()
                for event in stream.stream(self.core.list_pod_for_all_namespaces,
                                           resource_version=version, timeout_seconds=60):
                    if self.stop.is_set():
                        stream.stop()
                        break
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._submit(event["object"])
            except exceptions.ApiException as error:
                if error.status != 410:
                    log.warning("pod watch failed: %s", error)
                    self.stop.wait(1)
            except Exception as error:
                log.warning("pod watch interrupted: %s", error)
                self.stop.wait(1)

    def run(self) -> None:
        """Register nodes, then heartbeat and simulate pods until `stop` is set."""
        self.register()
        threading.Thread(target=self.heartbeat, name="heartbeat", daemon=True).start()
        self.watch_pods()
        self.pool.shutdown(wait=False, cancel_futures=True)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m federation.sandbox.nodesim --kubeconfig F --profile P`."""
    parser = argparse.ArgumentParser(description="Simulate the kubelets of a sandbox member cluster.")
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig of the member apiserver")
    parser.add_argument("--profile", required=True, help="JSON node profile (list of node groups)")
    parser.add_argument("--workers", type=int, default=8, help="parallel pod updates")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    from kubernetes import config

    with open(args.profile) as source:
        groups = load_profile(source.read())
    api = config.new_client_from_config(config_file=args.kubeconfig)
    simulator = NodeSimulator(api, groups, workers=args.workers)
    signal.signal(signal.SIGTERM, lambda *_: simulator.stop.set())
    signal.signal(signal.SIGINT, lambda *_: simulator.stop.set())
    simulator.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
