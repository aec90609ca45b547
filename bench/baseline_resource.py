"""A Kruise-style spread object in the baseline webhook's member, and the informer that watches it.

Why a custom resource: Kruise's WorkloadSpread design keeps each
subset's quota in an API object's status, and the benchmark measures exactly what that costs. The
spread is a small custom resource in the member (`WorkloadSpread`, `bench.fedspread.io`), its
status per subset `missingReplicas` (-1: no cap), `creatingPods` and `deletingPods`. Both halves of
the baseline read it, and the spread's pods, through `Informer` — watch-fed copies, as
controller-runtime's cache gives Kruise's webhook and controller.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes import client

from federation.api import names
from federation.kube import reflector

GROUP, VERSION, KIND, PLURAL = "bench.fedspread.io", "v1alpha1", "WorkloadSpread", "workloadspreads"

Json = dict[str, Any]


def crd() -> Json:
    """The CustomResourceDefinition of the baseline's spread object (status as a subresource)."""
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": KIND.lower(), "kind": KIND, "listKind": f"{KIND}List"},
            "versions": [{"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                          "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                              "spec": open_object, "status": open_object}}}}],
        },
    }


def spread_object(namespace: str, name: str, subsets: Sequence[tuple[str, int, Json]]) -> Json:
    """A spread with subsets (name, maxReplicas, requiredNodeSelectorTerm), in spec order."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"subsets": [{"name": subset, "maxReplicas": cap, "requiredNodeSelectorTerm": term}
                             for subset, cap, term in subsets]},
    }


def object_path(namespace: str, name: str | None = None, *, status: bool = False) -> str:
    """The API path of the spreads of `namespace`, of one spread, or of its status."""
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    if name is not None:
        path += f"/{name}"
    return path + "/status" if status else path


def stamp(moment: datetime.datetime) -> str:
    """metav1.Time's wire form (RFC 3339, seconds)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(value: str) -> datetime.datetime:
    """A metav1.Time read back."""
    return datetime.datetime.fromisoformat(value)


def resource_version(obj: Mapping[str, Any]) -> int:
    """The object's resourceVersion as a number (0: none)."""
    return int((obj.get("metadata") or {}).get("resourceVersion") or 0)


def subset_statuses(obj: Mapping[str, Any]) -> list[Json]:
    """A copy of the spread's list of subset statuses (empty: none yet)."""
    return list((obj.get("status") or {}).get("subsetStatuses") or [])


# --- the informer (controller-runtime's cache) ---------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PodState:
    """What the controller reads of one pod of a spread."""

    name: str
    spread: str
    subset: str | None
    active: bool
    created: str = ""
    cost: str | None = None


class Informer:
    """The process's watch-fed copies of the spreads and of their pods (one namespace)."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.namespace = namespace
        self._cond = threading.Condition()
        self._spreads: dict[str, Json] = {}
        self._pods: dict[str, PodState] = {}
        self._changes = 0
        self._stop = threading.Event()
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        self._reflectors = [
            reflector.Reflector("spreads", functools.partial(
                custom.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL),
                emit=self._spread_event, stop=self._stop),
            reflector.Reflector("pods", functools.partial(core.list_namespaced_pod, namespace),
                                emit=self._pod_event, stop=self._stop,
                                label_selector=names.SPREAD_LABEL),
        ]
        self._threads: list[threading.Thread] = []

    def start(self, *, timeout: float = 60.0) -> None:
        """Start both watches and wait for their first lists."""
        for item in self._reflectors:
            thread = threading.Thread(target=item.run, name=f"informer-{item.kind}", daemon=True)
            thread.start()
            self._threads.append(thread)
        for item in self._reflectors:
            if not item.synced.wait(timeout):
                raise RuntimeError(f"the {item.kind} informer did not sync within {timeout:.0f} s")

    def stop(self) -> None:
        """Stop both watches."""
        self._stop.set()
        for item in self._reflectors:
            item.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _spread_event(self, kind: str, obj: Json) -> None:
        name = reflector.key(obj)
        with self._cond:
            if kind == "DELETED":
                self._spreads.pop(name, None)
            elif kind != "SYNCED":
                self._spreads[name] = obj
            self._changes += 1
            self._cond.notify_all()

    def _pod_event(self, kind: str, obj: Json) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        with self._cond:
            if kind == "DELETED":
                self._pods.pop(name, None)
            elif kind != "SYNCED":
                phase = (obj.get("status") or {}).get("phase")
                annotations = meta.get("annotations") or {}
                self._pods[name] = PodState(
                    name=name, spread=(meta.get("labels") or {}).get(names.SPREAD_LABEL, ""),
                    subset=annotations.get(names.SUBSET_ANNOTATION),
                    active=meta.get("deletionTimestamp") is None and phase not in ("Succeeded", "Failed"),
                    created=str(meta.get("creationTimestamp") or ""),
                    cost=annotations.get(names.DELETION_COST_ANNOTATION))
            self._changes += 1
            self._cond.notify_all()

    def spread(self, key: str) -> Json | None:
        """The informer's copy of spread `namespace/name` (never mutated: objects are replaced)."""
        with self._cond:
            return self._spreads.get(key)

    def spread_keys(self) -> list[str]:
        """Every known spread."""
        with self._cond:
            return list(self._spreads)

    def pods_of(self, spread: str) -> list[PodState]:
        """The known pods labelled with spread name `spread`."""
        with self._cond:
            return [p for p in self._pods.values() if p.spread == spread]

    def wait_for_change(self, seen: int, *, timeout: float) -> int:
        """Block until something changed after change number `seen` (or `timeout`); the current one."""
        with self._cond:
            self._cond.wait_for(lambda: self._changes != seen, timeout=timeout)
            return self._changes
