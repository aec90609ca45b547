"""The kubelets of a sandbox member: fake nodes whose pods really become Running and Ready.

Why: the sandbox has real control planes but no kubelet, so nodes would stay NotReady, bound pods
Pending and deletions unfinished (stalling ReplicaSets, garbage collection, namespace deletion).
This process registers nodes from a profile (labels, taints, any allocatable resource), renews
their Leases and status, reports bound pods Running with kubelet-like status and completes graceful
deletions (grace 0). Hundreds of pods must not fall behind: one list+watch (resumed from its
resourceVersion, relisted only on 410 Gone) feeds a de-duplicating work queue and a thread pool
using raw JSON on a connection pool of its size (the generated client's model decoding cost more
CPU than the requests). Apiserver restarts are retried and logged as rate-limited warnings.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
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
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

from federation.sandbox import pod_refs

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
HEARTBEAT_SECONDS = 20.0  # Lease renewal; node status every third beat
WATCH_SECONDS = 300
DEFAULT_ALLOCATABLE = {"cpu": "4", "memory": "16Gi", "pods": "110"}
log = logging.getLogger("fedspread.nodesim")
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


def _stamp(moment: datetime.datetime | None = None, *, micro: bool = False) -> str:
    moment = moment or datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def pod_status(pod: Json, *, now: datetime.datetime, pod_ip: str, host_ip: str) -> tuple[Json, float | None]:
    """What a kubelet reports for a bound pod at `now`, and in how many seconds that next changes:
    init containers completed; from the pod's start, each container started after its startupProbe's
    initialDelaySeconds, ready after its readinessProbe's too; the pod Ready when all containers are
    and all readiness gates' conditions are True. (The apiserver sets qosClass on create.)"""
    spec, status, uid = pod["spec"], pod.get("status") or {}, pod["metadata"]["uid"]
    begun = status.get("startTime") if status.get("phase") == "Running" else None
    start = datetime.datetime.fromisoformat(begun.replace("Z", "+00:00")) if begun else now
    elapsed, at = (now - start).total_seconds(), _stamp(start)
    waits: list[float] = []

    def container(c: Json, init: bool) -> Json:
        image, cid = c.get("image") or "sim", f"sim://{uid}-{c['name']}"
        startup, readiness = (float((c.get(p) or {}).get("initialDelaySeconds") or 0)
                              for p in ("startupProbe", "readinessProbe"))
        if not init:
            waits.extend(d - elapsed for d in (startup, startup + readiness) if d > elapsed)
        state = ({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": at, "finishedAt": at,
                                 "containerID": cid}} if init else {"running": {"startedAt": at}})
        return {"name": c["name"], "image": image, "imageID": f"sim://{image}", "containerID": cid,
                "restartCount": 0, "started": not init and elapsed >= startup,
                "ready": init or elapsed >= startup + readiness, "state": state}

    containers = [container(c, False) for c in spec["containers"]]
    have = {c["type"]: c for c in status.get("conditions") or []}
    ok = all(c["ready"] for c in containers)
    gated = ok and any(have.get(g["conditionType"], {}).get("status") != "True"
                       for g in spec.get("readinessGates") or [])

    def condition(kind: str, value: bool, reason: str = "") -> Json:
        text, old = str(value), have.get(kind, {})
        return {"type": kind, "status": text, "lastProbeTime": None, "reason": None if value else reason,
                "lastTransitionTime": old["lastTransitionTime"] if old.get("status") == text else _stamp(now)}

    return {
        "phase": "Running", "hostIP": host_ip, "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": at,
        "conditions": [condition("Initialized", True), condition("PodScheduled", True),
                       condition("ContainersReady", ok, "ContainersNotReady"),
                       condition("Ready", ok and not gated,
                                 "ReadinessGatesNotReady" if gated else "ContainersNotReady")],
        "containerStatuses": containers,
        "initContainerStatuses": [container(c, True) for c in spec.get("initContainers") or []],
    }, min(waits, default=None)


def _signature(status: Json) -> tuple[Any, ...]:
    """The part of a pod status whose change needs a write."""
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    containers = [(c["name"], c.get("started"), c.get("ready")) for c in status.get("containerStatuses", [])]
    return status.get("phase"), conditions.get("Ready"), conditions.get("ContainersReady"), *containers


class ApiError(Exception):
    """A non-2xx answer from the apiserver (or a watch's ERROR event)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message[:300]}")
        self.status = status


class _Api:
    """Raw-JSON requests on the kubernetes client's authenticated connection pool."""

    def __init__(self, api: Any, pool_size: int) -> None:
        from kubernetes import client

        configuration = copy.deepcopy(api.configuration)
        configuration.connection_pool_maxsize = pool_size
        self.client, self.host = client.ApiClient(configuration), configuration.host

    def call(self, method: str, path: str, body: Json | None = None, *, stream: bool = False,
             ok: tuple[int, ...] = (), decode: bool = True, **query: Any) -> Any:
        """One request's JSON answer (`stream`: the unread response); None if its error is in `ok`
        or if not `decode` (a pod's JSON costs more CPU to decode than its request)."""
        headers = {"User-Agent": "fedspread-nodesim", "Accept": "application/json", "Content-Type":
                   "application/strategic-merge-patch+json" if method == "PATCH" else "application/json"}
        self.client.update_params_for_auth(headers, [], ["BearerToken"], path, method, body)
        url = f"{self.host}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        answer = self.client.rest_client.request(  # type: ignore[no-untyped-call]
            method, url, headers=headers, body=body,
            _request_timeout=(5, WATCH_SECONDS + 30 if stream else 30))
        if stream and 200 <= answer.status <= 299:
            return answer.response
        data = answer.read()  # all of it, or the connection does not go back to the pool
        if answer.status not in ok and not 200 <= answer.status <= 299:
            raise ApiError(answer.status, data.decode(errors="replace"))
        return json.loads(data or b"{}") if decode and answer.status not in ok else None


class NodeSimulator:
    """Plays the kubelet for every node of a profile on one member apiserver."""

    def __init__(self, api: Any, groups: Sequence[NodeGroup], *, workers: int = 16) -> None:
        self.api = _Api(api, pool_size=workers + 4)  # + watch, heartbeat and slack
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
        self._version: str | None = None  # of the pod watch
        self._stream: Any = None
        self._warned: dict[str, float] = {}

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
        resources, now = {**DEFAULT_ALLOCATABLE, **self._group[name].allocatable}, _stamp()
        return {"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message":
                            "fedspread node simulator", "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": self._address(name)}], "nodeInfo": {
                "kubeletVersion": "v1.20.2-fedspread-sim", "containerRuntimeVersion": "sim://1",
                "operatingSystem": "linux", "architecture": "amd64", "osImage": "sandbox"}}}

    def register_node(self, name: str) -> None:
        """Create (or adopt) one node, report it Ready and drop the not-ready taint."""
        group, cidr = self._group[name], self._address(name, 0) + "/24"
        labels = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", **group.labels,
                  "kubernetes.io/hostname": name}
        self.api.call("POST", "/api/v1/nodes", {"metadata": {"name": name, "labels": labels}, "spec": {
            "taints": group.taints, "podCIDR": cidr, "podCIDRs": [cidr]}}, ok=(409,))  # 409: adopt it
        node = self.api.call("PATCH", f"/api/v1/nodes/{name}/status", self._node_status(name))
        taints = node["spec"].get("taints") or []
        if (kept := [t for t in taints if t.get("key") != NOT_READY_TAINT]) != taints:
            self.api.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": kept or None}})
        self._uids[name] = node["metadata"]["uid"]

    def renew_lease(self, name: str) -> None:
        """Renew the node's Lease in kube-node-lease (creating it if missing), as a kubelet does."""
        spec = {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": _stamp(micro=True)}
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
                if _signature(waiting) not in (_signature(status), self._written.get(uid)):
                    self.api.call("PATCH", f"{path}/status", {"status": waiting}, decode=False)
                    self._written[uid] = _signature(waiting)
                self._enqueue(key, pod_refs.RECHECK_SECONDS)
                return
        ip = status.get("podIP") or self._address(node, next(self._ips[node]) % 253 + 2)
        desired, wake = pod_status(pod, now=datetime.datetime.now(datetime.UTC), pod_ip=ip,
                                   host_ip=self._address(node))
        for item in desired["containerStatuses"] if status.get("phase") == "Pending" else ():
            item["state"]["waiting"] = None  # a strategic merge would keep a waiting state beside it
        if _signature(desired) not in (_signature(status), self._written.get(uid)):
            self.api.call("PATCH", f"{path}/status", {"status": desired}, decode=False)
            self._written[uid] = _signature(desired)
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

    def _observe(self, kind: str, pod: Json) -> None:
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        if kind != "DELETED" and pod["spec"].get("nodeName") in self._group:
            self._pods[key] = pod
            self._enqueue(key)
        elif self._pods.pop(key, None) is not None:  # gone, or (never) moved off our nodes
            self._written.pop(pod["metadata"]["uid"], None)

    def _events(self) -> Iterator[Json]:
        """With no resourceVersion to resume from, a fresh list (as ADDED events); then a watch."""
        selector = "spec.nodeName!="
        if self._version is None:
            listing = self.api.call("GET", "/api/v1/pods", fieldSelector=selector)
            keys = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in listing["items"]}
            self._pods = {key: pod for key, pod in self._pods.items() if key in keys}
            yield from ({"type": "ADDED", "object": p} for p in listing["items"])
            self._version = listing["metadata"]["resourceVersion"]
        self._stream = self.api.call("GET", "/api/v1/pods", stream=True, watch="true",
                                     allowWatchBookmarks="true", resourceVersion=self._version,
                                     timeoutSeconds=WATCH_SECONDS, fieldSelector=selector)
        buffer = b""
        try:
            for chunk in self._stream.stream(amt=None, decode_content=False):
                *lines, buffer = (buffer + chunk).split(b"\n")
                for event in (json.loads(line) for line in lines if line.strip()):
                    yield event
                    self._version = event["object"]["metadata"]["resourceVersion"]
        finally:
            self._stream.close()
            self._stream.release_conn()

    def watch_pods(self) -> None:
        """List, then watch pods: resume from the last resourceVersion, relist only on 410 Gone."""
        while not self.stop.is_set():
            try:
                for event in self._events():
                    if event["type"] == "ERROR":
                        raise ApiError(event["object"].get("code") or 500, event["object"].get("message", ""))
                    if event["type"] != "BOOKMARK":
                        self._observe(event["type"], event["object"])
            except Exception as error:
                if isinstance(error, ApiError) and error.status == 410:
                    self._version = None  # too old to resume from: relist
                elif not self.stop.is_set():
                    self._warn("watch", f"pod watch interrupted ({error}); resuming")
                    self.stop.wait(1.0)

    def shutdown(self) -> None:
        """Stop workers, heartbeat and the watch (whose connection is cut)."""
        self.stop.set()
        for _ in range(self.workers):
            self.queue.put(None)
        with contextlib.suppress(Exception):
            self._stream.shutdown()

    def run(self) -> None:
        """Register nodes, simulate their pods and keep them alive until `shutdown`."""
        targets = [self.heartbeat, self.watch_pods] + [self._work] * self.workers
        threads = [threading.Thread(target=target, daemon=True) for target in targets]
        for thread in threads:
            thread.start()
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # its retries are ours to report
    from federation.kube import clients

    groups = load_profile(pathlib.Path(args.profile).read_text())
    simulator = NodeSimulator(clients.api_client(pathlib.Path(args.kubeconfig)), groups,
                              workers=args.workers)
    signal.signal(signal.SIGTERM, lambda *_: simulator.shutdown())
    signal.signal(signal.SIGINT, lambda *_: simulator.shutdown())
    simulator.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
