"""The inventory benchmark's measurement, run in a fresh interpreter: the agent's cache on a fake lister.

Why a fresh interpreter and a fake lister: the memory number is the process's whole RSS, so
nothing but the agent's imports, the synthesis plan (in arrays, ~2 MB at 100,000 pods) and the fake
server's indices may exist besides what the agent holds; and `agents.cache.store` must run
unchanged, so its four `federation.kube.reflector` threads list, emit, and the cache converts and
stores — the path every watch event takes — with no kube-apiserver involved.
`FakeApi` is shaped like the generated client's listers (`list_node(limit=, _continue=, ...)`,
raw JSON bytes, selectors honoured, a watch that blocks until cut) and builds each page from
`synthetic_cluster`'s plan (`synthetic_objects`) only when asked, as a server streams it.

* **Memory** is the whole process's RSS (`/proc/self/status` VmRSS) once the cache has synced and
  the pools are built, `gc.collect()`ed: what the process really holds, allocator fragmentation
  included, which is what Karmada's number (its agent's RSS) is. It is the interpreter, the agent's
  imports (Kubernetes client, gRPC, pydantic), the synthesis plan and the fake server's indices —
  all present before the cache starts (`rss_baseline_mb`) — and the growth across sync and pool
  build (`rss_growth_mb`). `live_mb` is what the cache's data really occupies (every object
  reachable from its stores, interned requests, the reflectors' key and version maps, and the
  pools, dict keys included; within a few per cent of tracemalloc, which `--tracemalloc` runs but
  which is ten times slower); the gap to the growth is what the allocators keep: pymalloc pools
  and arenas that a few long-lived views hold among each list page's freed JSON, and glibc heap
  (the agent hands that back with `malloc_trim` after its lists and pool builds, so
  `rss_trimmed_mb` is close to `rss_mb`).
* **Pools**: `inventory.pooling` over the cache's nodes and usage with the agent's default budget,
  as `InventoryReporter.pools` calls it on a change (first call cold, then p50 of repeats); how
  many pools exact grouping would make (`pools_exact`, the count before bounding) and how much
  of the nodes' free room the bounded pools state (`kept`).
* **Fit**: how many more pods of one template fit on those pools, p50 and p99 over all of many
  questions, as the coordinator answers it (pools parsed into integer nano-units once per
  inventory report, by `fit.pool_of`; per question `fit.admitting` and `fit.slots`), and as
  `fit.cluster_capacity` (the exact-Fraction reference, used by Explain) for comparison; both must
  give the same answer. The same question on the exact pools gives the time and the answer before
  bounding.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import gc
import json
import pathlib
import statistics
import sys
import threading
import time
import tracemalloc
import types
from collections.abc import Callable, Sequence
from typing import Any

from bench import admission_stats, synthetic_cluster, synthetic_objects
from federation.api import names

Json = dict[str, Any]

# --- the fake apiserver, at the level of the generated client ------------------------------------


class _Page:
    """A list response read with `_preload_content=False`: the raw body."""

    def __init__(self, data: bytes) -> None:
        self.data = data


class _QuietWatch:
    """A watch on which nothing happens until `shutdown()` (the cache stopping) cuts it."""

    def __init__(self) -> None:
        self._cut = threading.Event()

    def stream(self, amt: Any = None, decode_content: bool = False) -> Any:
        self._cut.wait()
        raise ConnectionError("watch cut")
        yield b""  # a generator, as urllib3's stream is

    def shutdown(self) -> None:
        self._cut.set()

    def release_conn(self) -> None:
        """Nothing to release."""


class FakeApi:
    """`CoreV1Api`/`AppsV1Api` listers over a `Plan`, honouring the selectors the agent's cache uses.

    Objects are built and serialized page by page when asked, as a server streams them; the CPU
    time spent doing so is counted in `serve_seconds`, so it can be told apart from the cache's.
    """

    def __init__(self, item: synthetic_cluster.Plan) -> None:
        self.plan = item
        self.serve_seconds = 0.0
        self._lock = threading.Lock()
        self._nodes = range(len(item.nodes))
        self._all_pods = range(len(item.pods))
        # Arrays: this process's whole RSS is the measurement, and 100,000 ints in a list take ~3.5 MB.
        self._bound_active = array.array("i", (i for i, p in enumerate(item.pods)
                                               if p[2] >= 0 and p[3] not in ("Succeeded", "Failed")))
        self._spread_pods = array.array("i", (i for i, p in enumerate(item.pods)
                                              if item.workloads[p[0]].spread))
        self._spread_workloads = [i for i, w in enumerate(item.workloads) if w.spread]

    @property
    def bound_active(self) -> int:
        """How many pods the cache should count as node usage."""
        return len(self._bound_active)

    def list_node(self, **query: Any) -> Any:
        return self._serve(query, self._nodes, synthetic_objects.node_json)

    def list_pod_for_all_namespaces(self, **query: Any) -> Any:
        indices: Sequence[int] = self._all_pods
        if query.get("field_selector"):
            indices = self._bound_active  # the cache's only field selector: bound, unfinished pods
        elif query.get("label_selector") == names.SPREAD_LABEL:
            indices = self._spread_pods
        return self._serve(query, indices, synthetic_objects.pod_json)

    def list_deployment_for_all_namespaces(self, **query: Any) -> Any:
        return self._serve(query, self._spread_workloads, synthetic_objects.deployment_json)

    def list_replica_set_for_all_namespaces(self, **query: Any) -> Any:
        """No ReplicaSets: the measurement is about nodes and pods (a spread has a few)."""
        return self._serve(query, (), synthetic_objects.deployment_json)

    def list_stateful_set_for_all_namespaces(self, **query: Any) -> Any:
        """No StatefulSets, as no ReplicaSets."""
        return self._serve(query, (), synthetic_objects.deployment_json)

    def _serve(
        self, query: Json, indices: Sequence[int], build: Callable[[synthetic_cluster.Plan, int], Json]
    ) -> Any:
        if query.get("watch"):
            return _QuietWatch()
        started = time.thread_time()
        start, limit = int(query.get("_continue") or 0), int(query.get("limit") or len(indices))
        end = min(start + limit, len(indices))
        meta: Json = {"resourceVersion": "999999"}
        if end < len(indices):
            meta["continue"] = str(end)
        body = {"kind": "List", "apiVersion": "v1", "metadata": meta,
                "items": [build(self.plan, i) for i in indices[start:end]]}
        page = _Page(json.dumps(body).encode())
        with self._lock:
            self.serve_seconds += time.thread_time() - started
        return page


# --- the measurement (in the fresh interpreter) ---------------------------------------------------


def _status_mb(field: str) -> float:
    """A /proc/self/status memory field (VmRSS, VmHWM) in MiB."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _deep_mb(*roots: object, seen: set[int] | None = None) -> float:
    """Bytes of every object reachable from `roots` (each counted once; types, modules, functions
    and methods skipped: a bound method leads to its whole object, the fake server included),
    leaving out, and adding to, the ids in `seen`: parts measured with one `seen` add up.

    Dictionaries' keys are followed explicitly: the garbage collector does not report the keys of
    a dict whose keys are all strings as its referents, and the cache's maps are keyed by strings
    (one per object: ~140,000 on the full member)."""
    seen = set() if seen is None else seen
    stack = list(roots)
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType, types.MethodType)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
        if isinstance(obj, dict):
            stack.extend(obj)
    return total / 2**20


def _trimmed_mb() -> float:
    """VmRSS after glibc's `malloc_trim(0)` hands freed heap back (what the allocator merely kept)."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return _status_mb("VmRSS")


def _timed(call: Callable[[], object], *, runs: int) -> list[float]:
    """Seconds each of `runs` calls took."""
    return _timed_both(call, runs=runs)[0]


def _timed_both(call: Callable[[], object], *, runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (this thread's) seconds each of `runs` calls took: on a shared machine a wall
    time's tail is mostly time the OS gave other processes, which the CPU time leaves out."""
    wall, cpu = [], []
    for _ in range(runs):
        began, began_cpu = time.perf_counter(), time.thread_time()
        call()
        cpu.append(time.thread_time() - began_cpu)
        wall.append(time.perf_counter() - began)
    return wall, cpu


def _ms(seconds: Sequence[float]) -> float:
    return round(statistics.median(seconds) * 1000, 3)


TEMPLATE: Json = {"spec": {"template": {"spec": {
    "nodeSelector": {"kubernetes.io/arch": "amd64"},
    "tolerations": [{"key": "spot", "operator": "Exists"}],
    "containers": [{"name": "web", "image": "nginx",
                    "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}},
                   {"name": "istio-proxy", "image": "istio/proxyv2",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
}}}}
"""The template fitted on the pools: a web pod with a sidecar, amd64 only, tolerating spot."""


def child_measure(
    size: synthetic_cluster.Size, *, emit: Callable[[str], None], fit_runs: int, pool_runs: int,
    traced: bool = False,
) -> dict[str, Any]:
    """Feed the agent's cache, then measure memory, pool build and fit (call in a fresh interpreter)."""
    import agents.main  # noqa: F401  the agent's whole import graph belongs to its baseline
    from agents import outbox
    from agents.cache import store as cache
    from agents.inventory import reporter
    from federation.api import cluster
    from federation.core import fit, inventory

    item = synthetic_cluster.plan(size)
    api = FakeApi(item)
    gc.collect()
    baseline = _status_mb("VmRSS")
    if traced:
        tracemalloc.start()
    feed = cache.Cache(api, api)
    started = time.perf_counter()
    feed.start()
    try:
        if not feed.wait_synced(timeout=900):
            raise RuntimeError("the cache did not sync within 900 s")
        wall = time.perf_counter() - started
        nodes, usage = feed.nodes(), feed.usage()
        if (len(nodes), len(usage)) != (size.nodes, api.bound_active):
            raise RuntimeError(f"cache holds {len(nodes)} nodes, {len(usage)} usages; expected "
                               f"{size.nodes}, {api.bound_active}")
        emit(f"cache synced: {len(nodes)} nodes, {len(usage)} bound pods, "
             f"{sum(len(feed.spread_pods(s)) for s in feed.spreads())} spread pods, "
             f"{len(feed.deployments())} Deployments in {wall:.1f} s")
        first = time.perf_counter()
        pools = reporter.InventoryReporter(feed, outbox.ReportOutbox()).pools()
        pool_first = time.perf_counter() - first
        del nodes, usage
        gc.collect()
        if traced:
            current, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            return {"traced_mb": round(current / 2**20, 1)}
        rss = _status_mb("VmRSS")
        peak = _status_mb("VmHWM")
        trimmed = _trimmed_mb()
        live = _deep_mb(feed._stores, feed._interned, [r._known for r in feed._reflectors], pools)
        stores, counted = feed._stores, set[int]()  # each object in the first part that reaches it
        parts = {"reflector_maps": _deep_mb([r._known for r in feed._reflectors], seen=counted),
                 "nodes": _deep_mb(stores[cache.NODES].items, seen=counted),
                 "usage": _deep_mb(stores[cache.USAGE].items, feed._interned, seen=counted),
                 "spread_pods": _deep_mb(stores[cache.SPREAD_PODS].items, stores[cache.SPREAD_PODS].by_index,
                                         seen=counted),
                 "deployments": _deep_mb(stores[cache.DEPLOYMENTS].items, seen=counted),
                 "pools": _deep_mb(pools, seen=counted)}
        emit(f"{len(pools)} pools; RSS {baseline:.0f} -> {rss:.0f} MiB (peak {peak:.0f}, "
             f"{trimmed:.0f} after malloc_trim)")
        builds = []
        for _ in range(pool_runs):
            began = time.perf_counter()
            found = inventory.pooling(feed.nodes(), feed.usage())
            builds.append(time.perf_counter() - began)
        shape = fit.shape_from_deployment(TEMPLATE)
        began = time.perf_counter()
        numbers = [fit.pool_of(pool) for pool in pools]  # once per inventory report, as the world does
        prepare = time.perf_counter() - began

        def question(parsed: Sequence[fit.Pool]) -> int:
            """The coordinator's answer: admission, then free pods per pool, in integer nano-units."""
            requests = fit.requests_of(shape)
            return sum(fit.slots(parsed[i], parsed[i].requested, requests)
                       for i in fit.admitting(parsed, shape))

        member = cluster.ClusterCapacity(name="member", node_pools=pools)
        fits = fit.cluster_capacity(member, shape)  # warm: parsed quantities are cached, as in a coordinator
        if question(numbers) != fits:
            raise RuntimeError(f"the two fits disagree: {question(numbers)} != {fits}")
        times, cpu_times = _timed_both(lambda: question(numbers), runs=fit_runs)
        reference = _timed(lambda: fit.cluster_capacity(member, shape), runs=max(1, fit_runs // 5))
        # Before bounding, for comparison (after the memory figures: the agent no longer holds these).
        exact = [fit.pool_of(pool) for pool in inventory.pools(feed.nodes(), feed.usage(), budget=10**9)]
        fits_exact = question(exact)
        times_exact = _timed(lambda: question(exact), runs=max(20, fit_runs // 5))
    finally:
        feed.stop()
    emit(f"{len(pools)} pools (exact: {len(exact)}), the template fits {fits} pods ({fits_exact} exact); "
         f"fit p50 {_ms(times)} ms, p99 {admission_stats.milliseconds(times, 99)} ms (CPU p99 "
         f"{admission_stats.milliseconds(cpu_times, 99)} ms)")
    return {
        "nodes": size.nodes, "pods": size.pods, "bound_pods": api.bound_active,
        "pools": len(pools), "pools_exact": len(exact), "node_classes": found.classes,
        "kept": {name: round(share, 3) for name, share in found.kept.items()},
        "distortion": round(found.distortion, 3),
        "rss_mb": round(rss, 1), "rss_baseline_mb": round(baseline, 1),
        "rss_growth_mb": round(rss - baseline, 1),
        "rss_peak_mb": round(peak, 1), "rss_trimmed_mb": round(trimmed, 1), "live_mb": round(live, 1),
        "live_mb_by_part": {name: round(mb, 1) for name, mb in parts.items()},
        "fit_p50_ms": _ms(times), "fit_p99_ms": admission_stats.milliseconds(times, 99), "fit_runs": fit_runs,
        "fit_ms": _ms(times),  # the key scripts read since round 1: the p50
        "fit_cpu_p50_ms": _ms(cpu_times), "fit_cpu_p99_ms": admission_stats.milliseconds(cpu_times, 99),
        "fit_pods": fits, "fit_pods_exact": fits_exact,
        "fit_kept": round(fits / fits_exact, 3) if fits_exact else 1.0,
        "fit_exact_p50_ms": _ms(times_exact),
        "fit_exact_p99_ms": admission_stats.milliseconds(times_exact, 99),
        "fit_reference_ms": _ms(reference),
        "pool_build_ms": _ms(builds), "pool_first_ms": round(pool_first * 1000, 1),
        "pool_prepare_ms": round(prepare * 1000, 1),
        "sync_s": round(wall, 2), "cache_cpu_s": round(max(0.0, wall - api.serve_seconds), 2),
        "method": ("rss_mb: VmRSS of the whole measuring interpreter after cache sync + pool build, gc'd: "
                   "Python, the agent's imports (agents.main: Kubernetes client, gRPC, pydantic), the "
                   "synthesis plan and fake server's indices (rss_baseline_mb, before the cache starts), "
                   "then the cache's nodes, bound pods' usage, spread pods and Deployments and the pools "
                   "(rss_growth_mb; live_mb: sizeof of every object reachable from them, dict keys included; "
                   "live_mb_by_part: the same split, each object counted once, in the first part that "
                   "reaches it: reflector_maps are the reflectors' object keys (which the stores share) and "
                   "resourceVersions, then each store's views and maps, usage with its shared request sets); "
                   "rss_trimmed_mb: after malloc_trim(0); pools: inventory.pools with the default budget "
                   "(100), pools_exact: the same nodes grouped by exact load (before bounding); kept: per "
                   "resource, free room the pools state over the nodes' real free room; "
                   "pool_build_ms: p50 of inventory.pooling(cache.nodes(), cache.usage()); "
                   "fit_p50_ms/fit_p99_ms: percentiles over fit_runs answers of one template's free pods "
                   "over the pools as the coordinator answers it (fit.requests_of + fit.admitting + "
                   "fit.slots on pools parsed once by fit.pool_of, whose time is pool_prepare_ms); "
                   "fit_cpu_*: the same answers' thread CPU time; fit_exact_*: the same on the exact pools; "
                   "fit_pods vs fit_pods_exact: the template's "
                   "answer on bounded vs exact pools; fit_reference_ms: p50 of fit.cluster_capacity "
                   "(Fractions), same answer; cache_cpu_s: sync wall time minus the fake server's "
                   "synthesis CPU (approximate)"),
    }
