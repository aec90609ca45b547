"""Every pod and node of the accuracy benchmark's members, followed live: the spread's pod histories.

Why a watch and not polling: a pod placed where it cannot run lives for seconds (the agent
deletes it after `rescheduleCriticalSeconds`), and a poll could miss a pod created and deleted
between two looks; each member's pods and nodes are followed with fedspread's own reflector (list,
then watch from its resourceVersion; every request with a deadline), so every pod of the spread is
seen from its first event to its deletion, stamped with this process's monotonic clock.

Besides the histories, the watch keeps what the room judgement needs: each node's labels, taints
and allocatable, and the requests of every pod bound to it, whatever its namespace (the other
workloads take room too). `check()`, called by the benchmark's wait loop every half second, looks
at each pod of the spread that has just been Pending PENDING_LIMIT seconds and records which other
subsets had room then (`accuracy_pods.subsets_with_room`).
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes import client

from bench import accuracy_pods
from federation.api import names
from federation.kube import clients, reflector

Json = dict[str, Any]


@dataclasses.dataclass
class _Track:
    """A spread pod's history while it is being written."""

    uid: str
    history: accuracy_pods.PodHistory
    judged: bool = False


@dataclasses.dataclass(frozen=True)
class _Pod:
    """What the watch keeps of any pod: where it is bound and what it requests."""

    namespace: str
    node: str | None
    requests: Mapping[str, int]
    phase: str
    deleting: bool
    spread: bool


class PodWatch:
    """Follows pods and nodes of every member (`kubeconfigs` by cluster name) from `start()` to `stop()`."""

    def __init__(self, kubeconfigs: Mapping[str, str], *, namespace: str, spread: str,
                 subsets: Sequence[accuracy_pods.SubsetRoom],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.namespace, self.spread, self.subsets, self.clock = namespace, spread, tuple(subsets), clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pods: dict[tuple[str, str], _Pod] = {}
        self._nodes: dict[tuple[str, str], Json] = {}
        self._tracks: dict[tuple[str, str], _Track] = {}
        """(cluster, namespace/name) of the spread's live pods -> their history."""
        self._done: list[accuracy_pods.PodHistory] = []
        self._finished: set[str] = set()
        """uids of the spread's pods whose history is done (their later events change nothing)."""
        self._streams: list[reflector.Reflector] = []
        for cluster, kubeconfig in kubeconfigs.items():
            core = client.CoreV1Api(clients.api_client(pathlib.Path(kubeconfig)))
            for kind, lister, on in (("pods", core.list_pod_for_all_namespaces, self._on_pod),
                                     ("nodes", core.list_node, self._on_node)):
                self._streams.append(reflector.Reflector(
                    f"{cluster}/{kind}", lister, stop=self._stop, watch_seconds=60,
                    emit=functools.partial(on, cluster)))
        self._threads = [threading.Thread(target=s.run, name=f"watch-{s.kind}", daemon=True)
                         for s in self._streams]

    def start(self, *, timeout: float = 60.0) -> None:
        """Start following; returns once every stream has listed (TimeoutError otherwise)."""
        for thread in self._threads:
            thread.start()
        deadline = time.monotonic() + timeout
        for stream in self._streams:
            if not stream.synced.wait(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"the {stream.kind} watch did not list within {timeout:.0f} s")

    def stop(self) -> None:
        """Stop following (idempotent)."""
        self._stop.set()
        for stream in self._streams:
            stream.close()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=5)

    # --- events (reflector threads) ----------------------------------------------------------

    def _on_node(self, cluster: str, change: reflector.EventType, obj: Json) -> None:
        if change == "SYNCED":
            return
        with self._lock:
            if change == "DELETED":
                self._nodes.pop((cluster, reflector.key(obj)), None)
            else:
                self._nodes[(cluster, reflector.key(obj))] = obj

    def _on_pod(self, cluster: str, change: reflector.EventType, obj: Json) -> None:
        if change == "SYNCED":
            return
        now, key = self.clock(), (cluster, reflector.key(obj))
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        with self._lock:
            if change == "DELETED":
                self._pods.pop(key, None)
                self._finish(key, now)
                return
            mine = (meta.get("namespace") == self.namespace
                    and (meta.get("labels") or {}).get(names.SPREAD_LABEL) == self.spread)
            pod = _Pod(namespace=str(meta.get("namespace")), node=spec.get("nodeName") or None,
                       requests=accuracy_pods.pod_requests(spec), phase=str(status.get("phase") or "Pending"),
                       deleting=meta.get("deletionTimestamp") is not None, spread=mine)
            self._pods[key] = pod
            if mine and str(meta.get("uid")) not in self._finished:
                self._follow(key, pod, (meta.get("annotations") or {}).get(names.SUBSET_ANNOTATION), now,
                             uid=str(meta.get("uid")))

    def _follow(self, key: tuple[str, str], pod: _Pod, subset: str | None, now: float, *, uid: str) -> None:
        track = self._tracks.get(key)
        if track is not None and track.uid != uid:  # a new pod of the same name: the old one is gone
            self._finish(key, now)
            track = None
        if track is None:
            track = self._tracks[key] = _Track(uid, accuracy_pods.PodHistory(
                cluster=key[0], name=key[1], subset=subset, created=now))
        seen = track.history
        if subset is not None and seen.subset is None:  # matched to a subset after admission
            seen = dataclasses.replace(seen, subset=subset)
        if pod.phase == "Running" and seen.running is None and seen.deleted is None:
            seen = dataclasses.replace(seen, running=now)
        track.history = seen
        if pod.deleting or pod.phase in ("Succeeded", "Failed"):
            self._finish(key, now)

    def _finish(self, key: tuple[str, str], now: float) -> None:
        track = self._tracks.pop(key, None)
        if track is not None:
            self._finished.add(track.uid)
            self._done.append(dataclasses.replace(track.history, deleted=now))

    # --- what the benchmark asks -------------------------------------------------------------

    def check(self) -> int:
        """Judge the spread's pods that have just been Pending PENDING_LIMIT seconds: which other
        subsets had room now. Returns how many pods were judged."""
        now = self.clock()
        with self._lock:
            due = [t for t in self._tracks.values() if not t.judged and t.history.running is None
                   and now - t.history.created >= accuracy_pods.PENDING_LIMIT]
            if not due:
                return 0
            rooms = self._rooms()
            placed, unbound = self._subset_counts()
            for track in due:
                track.judged = True
                if track.history.subset is not None:
                    track.history = dataclasses.replace(track.history, room_elsewhere=(
                        accuracy_pods.subsets_with_room(track.history.subset, self.subsets, nodes=rooms,
                                                        placed=placed, unbound=unbound)))
            return len(due)

    def _rooms(self) -> dict[str, list[accuracy_pods.NodeRoom]]:
        bound: dict[tuple[str, str], list[Mapping[str, int]]] = {}
        for (cluster, _), pod in self._pods.items():
            if pod.node is not None and pod.phase not in ("Succeeded", "Failed"):
                bound.setdefault((cluster, pod.node), []).append(pod.requests)
        rooms: dict[str, list[accuracy_pods.NodeRoom]] = {}
        for (cluster, name), node in self._nodes.items():
            room = accuracy_pods.node_room(node, bound.get((cluster, name), ()))
            rooms.setdefault(cluster, []).append(room)
        return rooms

    def _subset_counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """Per subset: the spread's pods not being deleted, and those of them not bound to a node."""
        placed: dict[str, int] = {}
        unbound: dict[str, int] = {}
        for key, track in self._tracks.items():
            subset, pod = track.history.subset, self._pods.get(key)
            if subset is None or pod is None:
                continue
            placed[subset] = placed.get(subset, 0) + 1
            unbound[subset] = unbound.get(subset, 0) + (pod.node is None)
        return placed, unbound

    def room_left(self) -> dict[str, int]:
        """Per subset: how many more of its pods it could take now — room on its cluster's nodes
        beyond its own unbound pods, within its cap. Room left in a subset while a later one took
        replicas is room the coordinator did not promise (a conservative fit), not an inaccuracy."""
        with self._lock:
            rooms = self._rooms()
            placed, unbound = self._subset_counts()
            return {s.name: accuracy_pods.spare(s, nodes=rooms, placed=placed, unbound=unbound)
                    for s in self.subsets}

    def counts(self) -> tuple[int, int, int]:
        """The spread's pods now: Running, Pending, being deleted."""
        with self._lock:
            mine = [p for p in self._pods.values() if p.spread]
            running = sum(p.phase == "Running" and not p.deleting for p in mine)
            pending = sum(p.phase == "Pending" and not p.deleting for p in mine)
            return running, pending, sum(p.deleting for p in mine)

    def running(self, *, cluster: str, namespace: str) -> int:
        """Pods Running (and not being deleted) in one namespace of one member."""
        with self._lock:
            return sum(c == cluster and p.namespace == namespace and p.phase == "Running" and not p.deleting
                       for (c, _), p in self._pods.items())

    def by_subset(self) -> dict[str, int]:
        """The spread's Running pods per `subset@cluster` (`-` for no subset)."""
        with self._lock:
            found: dict[str, int] = {}
            for (cluster, _), track in self._tracks.items():
                if track.history.running is not None:
                    where = f"{track.history.subset or '-'}@{cluster}"
                    found[where] = found.get(where, 0) + 1
            return dict(sorted(found.items()))

    def histories(self) -> list[accuracy_pods.PodHistory]:
        """Every spread pod seen: finished ones (deleted), then the live ones."""
        with self._lock:
            return [*self._done, *(t.history for t in self._tracks.values())]
