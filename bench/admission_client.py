"""The admission benchmark's client: the pods it creates in a burst, and its calls to the member.

Why the benchmark creates the pods itself: N pods are created at once by a pool of client threads,
as a ReplicaSet controller does in its slow-start batches, but with the benchmark as the client, so
that each create's latency is what the client sees (request sent -> pod stored, admission
included). Scaling a Deployment instead and reading the pods' creationTimestamp would measure
nothing useful: the apiserver stamps it after mutating admission. A denied create is retried, up to
`ATTEMPTS` attempts. The other calls here set up and tear down a mode's namespace, tell when its
webhook answers, and count the stored pods per subset.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import urllib3

from bench import rawkube
from federation.api import names

Json = dict[str, Any]

SPREAD = "web"
IMAGE = "registry.example/app:1"
ATTEMPTS = 5
NAMESPACE_LABEL = "fedspread-bench/admission"
WAIT = 120.0


def pod_body() -> Json:
    """A pod of the spread as its workload would create it (generateName: the webhook names it)."""
    labels = {names.SPREAD_LABEL: SPREAD, "app": f"{SPREAD}-bench", names.REVISION_LABEL: "bench"}
    container = {"name": "app", "image": IMAGE, "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{SPREAD}-bench-", "labels": labels},
            "spec": {"containers": [container], "terminationGracePeriodSeconds": 0}}


def pods_path(namespace: str, **query: str) -> str:
    """The pods collection of `namespace`, with an optional query."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    return f"{path}?{urllib.parse.urlencode(query)}" if query else path


@dataclasses.dataclass
class Burst:
    """What the client saw of one burst."""

    started: float
    """Epoch seconds when the first request went out."""
    seconds: float
    latencies: list[float]
    """Per stored pod: first request to success, seconds."""
    denied: int = 0
    """Create attempts the apiserver refused (retried)."""
    lost: int = 0
    """Pods never stored after ATTEMPTS attempts."""
    load: float = 0.0
    """The machine's 1-minute load average when the burst began (other work on the same cores)."""


def burst(api: rawkube.RawApi, namespace: str, *, count: int, workers: int) -> Burst:
    """Create `count` pods at once from `workers` threads; each worker takes the next pod when done."""
    body, path = pod_body(), pods_path(namespace)
    todo = iter(range(count))
    lock = threading.Lock()
    latencies: list[float] = []
    failures = {"denied": 0, "lost": 0}
    start = threading.Barrier(workers + 1)

    def work() -> None:
        start.wait()
        while True:
            with lock:
                if next(todo, None) is None:
                    return
            began = time.perf_counter()
            for _ in range(ATTEMPTS):
                try:
                    api.post(path, body)
                except (rawkube.RawError, urllib3.exceptions.HTTPError, OSError, ValueError):
                    with lock:
                        failures["denied"] += 1
                    continue
                with lock:
                    latencies.append(time.perf_counter() - began)
                break
            else:
                with lock:
                    failures["lost"] += 1

    threads = [threading.Thread(target=work, name=f"burst-{i}", daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()
    load = os.getloadavg()[0]
    start.wait()
    started, began = time.time(), time.perf_counter()
    for thread in threads:
        thread.join()
    return Burst(started=started, seconds=time.perf_counter() - began, latencies=latencies, load=load,
                 **failures)


def stored_subsets(api: rawkube.RawApi, namespace: str) -> collections.Counter[str | None]:
    """Pods of the spread the apiserver holds, by subset annotation (None: no subset)."""
    listing = api.get(pods_path(namespace, labelSelector=names.SPREAD_LABEL))
    return collections.Counter((item["metadata"].get("annotations") or {}).get(names.SUBSET_ANNOTATION)
                               for item in listing["items"])


def over_cap(counts: collections.Counter[str | None], limits: dict[str, int]) -> int:
    """Pods beyond their subset's cap, summed over subsets."""
    return sum(max(0, counts.get(name, 0) - cap) for name, cap in limits.items())


def admitting(api: rawkube.RawApi, namespace: str) -> bool:
    """A dry-run pod of the spread comes back with a subset: the apiserver calls the webhook."""
    created = api.post(pods_path(namespace, dryRun="All"), pod_body())
    return names.SUBSET_ANNOTATION in (created["metadata"].get("annotations") or {})


def wait_for(probe: Callable[[], Any], *, what: str, alive: Callable[[], str | None] = lambda: None,
             timeout: float = WAIT) -> Any:
    """Poll `probe` until truthy; RuntimeError after `timeout`, or at once if `alive` reports a death."""
    deadline = time.monotonic() + timeout
    while True:
        death = alive()
        if death is not None:
            raise RuntimeError(f"{what}: {death}")
        with contextlib.suppress(rawkube.RawError, OSError):
            result = probe()
            if result:
                return result
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not after {timeout:.0f} s")
        time.sleep(0.25)


def create_namespace(api: rawkube.RawApi, name: str) -> None:
    """A namespace labelled for the mode's webhook registration."""
    api.post("/api/v1/namespaces", {"metadata": {"name": name, "labels": {NAMESPACE_LABEL: name}}})


def delete_pods(api: rawkube.RawApi, namespace: str) -> None:
    """Delete the spread's pods at once and wait until the apiserver holds none."""
    path = pods_path(namespace, labelSelector=names.SPREAD_LABEL)
    api.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    wait_for(lambda: not api.get(path)["items"], what=f"pods of {namespace} deleted")
