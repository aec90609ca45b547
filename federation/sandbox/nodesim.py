"""The kubelets of a sandbox member: fake nodes whose pods really become Running and Ready, or finish.

Why: the sandbox has real control planes but no kubelet, so nodes would stay NotReady, bound pods
Pending and deletions unfinished (stalling ReplicaSets, Jobs, garbage collection, namespace deletion).
This process registers nodes from a profile (labels, taints, any allocatable resource), renews
their Leases and status, reports bound pods' status as a kubelet would (`kubelet_status`: Running
and Ready, or Succeeded/Failed for pods that run to completion) and completes graceful deletions
(grace 0). It also runs the member's volume provisioner (`provisioner`). Hundreds of pods must not
fall behind: one list+watch (`simapi.ListWatch`) feeds a de-duplicating work queue and a thread pool
using raw JSON (`simapi.Api`). Apiserver restarts are retried and logged as rate-limited warnings.
Given `--metrics-port`, it also serves the member's resource metrics API (`metrics.k8s.io`, as
metrics-server would) from the pods it watches (`metrics_server`, `pod_metrics`).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime
import heapq
import itertools
import json
import logging
import pathlib
import queue
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

from federation.sandbox import kubelet_status, metrics_server, pod_refs, provisioner, simapi
from federation.sandbox.simapi import ApiError

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
HEARTBEAT_SECONDS = 20.0  # Lease renewal; node status every third beat
DEFAULT_ALLOCATABLE = {"cpu": "4", "memory": "16Gi", "pods": "110"}
log = logging.getLogger("federation.sandbox.nodesim")  # by module: it runs as __main__
Json = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class NodeGroup:
    """`count` identical nodes `<prefix>-<i>`; allocatable extends the defaults (e.g. nvidia.com/gpu)."""

    prefix: str
    count: int
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    taints: list[dict[str, str]] = dataclasses.field(default_factory=list)
    allocatable: dict[str, str] = dataclasses.field(default_factory=lambda: dict(DEFAULT_ALLOCATABLE))


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
    return sum(
        any(c["type"] == "Ready" and c["status"] == "True"
            for c in node.get("status", {}).get("conditions", []))
        and not any(t.get("key") == NOT_READY_TAINT for t in node.get("spec", {}).get("taints") or [])
        for node in json.loads(node_list_json).get("items", []))


class NodeSimulator:
    """Plays the kubelet for every node of a profile on one member apiserver."""

    def __init__(self, api: Any, groups: Sequence[NodeGroup], *, workers: int = 16,
                 metrics: metrics_server.Serving | None = None) -> None:
        self.api = simapi.Api(api, pool_size=workers + 6)  # + watches, heartbeat and slack
        self.groups, self.workers = list(groups), workers
        self._group = {f"{g.prefix}-{i}": g for g in self.groups for i in range(g.count)}
        self.nodes = list(self._group)
        self._index = {name: i for i, name in enumerate(self.nodes)}
        self._ips = {name: itertools.count() for name in self.nodes}  # next() is atomic
        self.stop = threading.Event()
        self.queue: queue.Queue[str | None] = queue.Queue()
        self._queued: set[str] = set()  # queued or being worked on: never twice
        self._later: list[tuple[float, str]] = []  # (due, key): retries and probe delays
        self._lock = threading.Lock()
        self._pods: dict[str, Json] = {}  # newest object seen of each pod bound to our nodes
        self._written: dict[str, Any] = {}  # pod uid -> signature last written, or "deleted"
        self._uids: dict[str, str] = {}  # registered nodes
        self._warned: dict[str, float] = {}
        self.pod_watch = simapi.ListWatch(
            self.api, "/api/v1/pods", on_event=self._observe, on_list=self._forget_unlisted,
            warn=lambda text: self._warn("watch", text), stop=self.stop, fieldSelector="spec.nodeName!=")
        self.provisioner = provisioner.Provisioner(
            self.api, warn=lambda text: self._warn("volumes", text), stop=self.stop)
        self.metrics = None if metrics is None else metrics_server.MetricsServer(
            metrics, pods=lambda: list(self._pods.values()),
            nodes=lambda: {name: self.node_labels(name) for name in self.nodes})

    def _warn(self, kind: str, message: str) -> None:
        """A warning, at most one per kind every 10 s: an apiserver restart is not 300 warnings."""
        if time.monotonic() - self._warned.get(kind, -10.0) >= 10:
            self._warned[kind] = time.monotonic()
            log.warning("%s", message)

    def _address(self, node: str, host: int | None = None) -> str:
        i = self._index[node]
        return f"127.1.{i // 250}.{i % 250 + 1}" if host is None else f"10.{244 + i // 256}.{i % 256}.{host}"

    def _enqueue(self, key: str, delay: float = 0.0) -> None:
        with self._lock:
            if delay > 0:
                heapq.heappush(self._later, (time.monotonic() + delay, key))
            elif key not in self._queued:
                self._queued.add(key)
                self.queue.put(key)

    def _node_status(self, name: str) -> Json:
        resources, now = {**DEFAULT_ALLOCATABLE, **self._group[name].allocatable}, kubelet_status.stamp()
        return {"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message":
                            "fedspread node simulator", "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": self._address(name)}], "nodeInfo": {
                "kubeletVersion": "v1.20.2-fedspread-sim", "containerRuntimeVersion": "sim://1",
                "operatingSystem": "linux", "architecture": "amd64", "osImage": "sandbox"}}}

    def node_labels(self, name: str) -> dict[str, str]:
        """The labels node `name` is registered with."""
        return {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", **self._group[name].labels,
                "kubernetes.io/hostname": name}

    def register_node(self, name: str) -> None:
        """Create (or adopt) one node, report it Ready and drop the not-ready taint."""
        group, cidr, labels = self._group[name], self._address(name, 0) + "/24", self.node_labels(name)
        self.api.call("POST", "/api/v1/nodes", {"metadata": {"name": name, "labels": labels}, "spec": {
            "taints": group.taints, "podCIDR": cidr, "podCIDRs": [cidr]}}, ok=(409,))  # 409: adopt it
        node = self.api.call("PATCH", f"/api/v1/nodes/{name}/status", self._node_status(name))
        taints = node["spec"].get("taints") or []
        if (kept := [t for t in taints if t.get("key") != NOT_READY_TAINT]) != taints:
            self.api.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": kept or None}})
        self._uids[name] = node["metadata"]["uid"]

    def renew_lease(self, name: str) -> None:
        """Renew the node's Lease in kube-node-lease (creating it if missing), as a kubelet does."""
        spec = {"holderIdentity": name, "leaseDurationSeconds": 40,
                "renewTime": kubelet_status.stamp(micro=True)}
        if self.api.call("PATCH", f"{LEASES}/{name}", {"spec": spec}, ok=(404,)) is None:
            owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": self._uids[name]}
            self.api.call("POST", LEASES, {"metadata": {"name": name, "ownerReferences": [owner]},
                                           "spec": spec})

    def heartbeat(self) -> None:
        """(Re-)register nodes, then every 20 s renew their Leases, every third time their status."""
        for beat in itertools.count():
            alive = {p["metadata"]["uid"] for p in list(self._pods.values())}  # forget what a worker
            self._written = {u: w for u, w in list(self._written.items()) if u in alive}  # wrote late
            for name in self.nodes:
                try:
                    if name not in self._uids:
                        self.register_node(name)
                    elif beat % 3 == 0:
                        self.api.call("PATCH", f"/api/v1/nodes/{name}/status", self._node_status(name))
                    self.renew_lease(name)
                except Exception as error:
                    if isinstance(error, ApiError) and error.status == 404:
                        self._uids.pop(name, None)
                    self._warn("heartbeat", f"heartbeat of node {name} failed: {error}")
            if self.stop.wait(1.0 if len(self._uids) < len(self.nodes) else HEARTBEAT_SECONDS):
                return

    def sync_pod(self, key: str) -> None:
        """Bring one pod's status, or its deletion, to what a kubelet would have made of it."""
        if (pod := self._pods.get(key)) is None:
            return
        meta, status, node = pod["metadata"], pod.get("status") or {}, pod["spec"]["nodeName"]
        path, uid = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", meta["uid"]
        if meta.get("deletionTimestamp"):
            if self._written.get(uid) != "deleted":
                self.api.call("DELETE", path, {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}},
                              ok=(404, 409), decode=False)  # 404: gone already; 409: a new pod
                self._written[uid] = "deleted"
            return
        if status.get("phase") not in (None, "Pending", "Running"):
            return
        if status.get("phase") != "Running":  # a kubelet checks what the pod needs before it starts
            blocked = pod_refs.blocking(pod, exists=self._exists)
            if blocked is not None:
                waiting = pod_refs.waiting_status(pod, reason=blocked[0], message=blocked[1],
                                                  host_ip=self._address(node))
                if kubelet_status.signature(waiting) not in (kubelet_status.signature(status),
                                                             self._written.get(uid)):
                    self.api.call("PATCH", f"{path}/status", {"status": waiting}, decode=False)
                    self._written[uid] = kubelet_status.signature(waiting)
                self._enqueue(key, pod_refs.RECHECK_SECONDS)
                return
        ip = status.get("podIP") or self._address(node, next(self._ips[node]) % 253 + 2)
        desired, wake = kubelet_status.pod_status(pod, now=datetime.datetime.now(datetime.UTC), pod_ip=ip,
                                   host_ip=self._address(node))
        for item in desired["containerStatuses"] if status.get("phase") == "Pending" else ():
            item["state"]["waiting"] = None  # a strategic merge would keep a waiting state beside it
        if (signed := kubelet_status.signature(desired)) not in (kubelet_status.signature(status),
                                                                   self._written.get(uid)):
            self.api.call("PATCH", f"{path}/status", {"status": desired}, decode=False)
            self._written[uid] = signed
        if wake:
            self._enqueue(key, wake + 0.05)

    def _exists(self, path: str) -> bool:
        return self.api.call("GET", path, ok=(404,)) is not None

    def _work(self) -> None:
        failures: collections.Counter[str] = collections.Counter()
        while (key := self.queue.get()) is not None and not self.stop.is_set():
            pod = self._pods.get(key)
            try:
                self.sync_pod(key)
                failures.pop(key, None)
            except Exception as error:
                failures[key] += 1
                self._warn("pod", f"pod {key}: {error}; retrying")
                self._enqueue(key, min(30.0, 0.25 * 2 ** failures[key]))
            finally:  # a key stays queued while a worker has it; newer news of it queue it again
                with self._lock:
                    self._queued.discard(key)
                if self._pods.get(key) is not pod:
                    self._enqueue(key)

    def _forget_unlisted(self, keys: set[str]) -> None:
        """After a fresh list: pods not in it were deleted while the watch was down."""
        self._pods = {key: pod for key, pod in self._pods.items() if key in keys}

    def _observe(self, kind: str, pod: Json) -> None:
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        if kind != "DELETED" and pod["spec"].get("nodeName") in self._group:
            self._pods[key] = pod
            self._enqueue(key)
        elif self._pods.pop(key, None) is not None:  # gone, or (never) moved off our nodes
            self._written.pop(pod["metadata"]["uid"], None)

    def shutdown(self) -> None:
        """Stop workers, heartbeat and the watches (whose connections are cut)."""
        self.stop.set()
        for _ in range(self.workers):
            self.queue.put(None)
        for cut_watch in (self.pod_watch.cut, self.provisioner.cut):
            with contextlib.suppress(Exception):
                cut_watch()
        if self.metrics is not None:
            with contextlib.suppress(Exception):
                self.metrics.shutdown()

    def run(self) -> None:
        """Register nodes, simulate their pods and keep them alive until `shutdown`."""
        targets = [self.heartbeat, self.pod_watch.run] + [self._work] * self.workers
        threads = [threading.Thread(target=target, daemon=True) for target in targets]
        threads += self.provisioner.threads()
        for thread in threads:
            thread.start()
        if self.metrics is not None:
            self.metrics.start()
        log.info("simulating %d nodes at %s with %d workers", len(self.nodes), self.api.host, self.workers)
        while not self.stop.wait(0.2):  # a timed wait, so that signals reach the main thread
            now = time.monotonic()
            with self._lock:  # the heap pops the due keys first
                due = [heapq.heappop(self._later)[1] for _ in range(sum(t <= now for t, _ in self._later))]
            for key in due:
                self._enqueue(key)
        self.shutdown()
        for thread in threads:
            thread.join(timeout=5)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m federation.sandbox.nodesim --kubeconfig F --profile P`."""
    parser = argparse.ArgumentParser(description="Simulate the kubelets of a sandbox member cluster.")
    parser.add_argument("--kubeconfig", required=True, help="kubeconfig of the member apiserver")
    parser.add_argument("--profile", required=True, help="JSON node profile (list of node groups)")
    parser.add_argument("--workers", type=int, default=16, help="parallel pod updates")
    parser.add_argument("--metrics-port", type=int, help="serve metrics.k8s.io over HTTPS on this port")
    parser.add_argument("--metrics-cert", help="its serving certificate (PEM)")
    parser.add_argument("--metrics-key", help="its serving key (PEM)")
    parser.add_argument("--metrics-client-ca", help="the front-proxy CA (only its clients)")
    args = parser.parse_args(argv)
    metrics = None
    if args.metrics_port is not None:
        if not (args.metrics_cert and args.metrics_key and args.metrics_client_ca):
            parser.error("--metrics-port needs --metrics-cert, --metrics-key and --metrics-client-ca")
        metrics = metrics_server.Serving(port=args.metrics_port, cert_file=args.metrics_cert,
                                         key_file=args.metrics_key, client_ca_file=args.metrics_client_ca)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # its retries are ours to report
    from federation.kube import clients

    groups = load_profile(pathlib.Path(args.profile).read_text())
    simulator = NodeSimulator(clients.api_client(pathlib.Path(args.kubeconfig)), groups,
                              workers=args.workers, metrics=metrics)
    signal.signal(signal.SIGTERM, lambda *_: simulator.shutdown())
    signal.signal(signal.SIGINT, lambda *_: simulator.shutdown())
    simulator.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
