"""The admission benchmark's client: pods created by concurrent clients, and its calls to the member.

Why the benchmark also creates pods itself, beside scaling a Deployment (`replicaset_load`): with
the benchmark as the client, each create's latency is what the client sees (request sent -> pod
stored, admission included), and the concurrency is a number the benchmark sets — 1, 5, 20 or 50
clients, each taking the next pod when its last one is stored. The ReplicaSet controller's creates
cannot be timed one by one (the apiserver stamps creationTimestamp after mutating admission). A
refused create is retried, up to `ATTEMPTS` attempts, after a backoff that doubles from
`RETRY_BACKOFF_SECONDS` with 10 % jitter (as a controller's rate limiter requeues a failed create,
rather than hammering the apiserver); every mode meets this same client. A load stops taking new
pods at its deadline. The other calls here set up and tear down a mode's namespace, tell when its webhook
answers, and count the stored pods per subset.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import random
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
RETRY_BACKOFF_SECONDS, RETRY_BACKOFF_FACTOR, RETRY_JITTER = 0.01, 2.0, 0.1
"""The wait before a refused create's next attempt: 10 ms, then doubling, plus up to 10 % jitter."""
NAMESPACE_LABEL = "fedspread-bench/admission"
WAIT = 120.0
DEADLINE = 300.0
"""Seconds after which a load takes no new pod."""


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
    completed: bool = True
    """False when the deadline came before every pod was stored (the rest count as lost)."""
    stored: int | None = None
    """Pods stored, when it is not len(latencies) (a load whose creates nobody timed)."""

    @property
    def pods(self) -> int:
        """Pods the load stored."""
        return len(self.latencies) if self.stored is None else self.stored


def retry_delay(attempt: int) -> float:
    """Seconds to wait after failed attempt number `attempt` (0 for the first) before the next."""
    base = RETRY_BACKOFF_SECONDS * RETRY_BACKOFF_FACTOR ** attempt
    return base * (1 + random.uniform(0, RETRY_JITTER))


def burst(api: rawkube.RawApi, namespace: str, *, count: int, workers: int,
          deadline: float = DEADLINE) -> Burst:
    """Create `count` pods from `workers` threads at once; each worker takes the next pod when its
    last one is stored, none after `deadline` seconds (the pods not tried then count as lost)."""
    body, path = pod_body(), pods_path(namespace)
    todo = iter(range(count))
    lock = threading.Lock()
    latencies: list[float] = []
    failures = {"denied": 0, "lost": 0}
    start = threading.Barrier(workers + 1)
    late = threading.Event()

    def work() -> None:
        start.wait()
        while True:
            with lock:
                if next(todo, None) is None:
                    return
                if time.perf_counter() - opened > deadline:
                    late.set()
                    failures["lost"] += 1
                    continue
            sent = time.perf_counter()
            for attempt in range(ATTEMPTS):
                try:
                    api.post(path, body)
                except (rawkube.RawError, urllib3.exceptions.HTTPError, OSError, ValueError):
                    with lock:
                        failures["denied"] += 1
                    if attempt + 1 < ATTEMPTS:
                        time.sleep(retry_delay(attempt))
                    continue
                with lock:
                    latencies.append(time.perf_counter() - sent)
                break
            else:
                with lock:
                    failures["lost"] += 1

    threads = [threading.Thread(target=work, name=f"burst-{i}", daemon=True) for i in range(workers)]
    for thread in threads:
        thread.start()
    load = os.getloadavg()[0]
    started, opened = time.time(), time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join()
    return Burst(started=started, seconds=time.perf_counter() - opened, latencies=latencies, load=load,
                 completed=not late.is_set(), **failures)


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
