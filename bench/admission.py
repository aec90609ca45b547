"""Admission under a burst (issue 7): fedspread's local quota table against the seed's design.

The claim (README, "How it compares"): a webhook that decides from a local quota table answers in
well under a millisecond and lets a burst of pods through as fast as the apiserver stores them,
where the seed's webhook — one optimistic-lock update of the spread object per pod, behind a
per-spread mutex (seed 001 §3.1) — serialises every admission on an API write and retries 409s.

How it is measured, on a sandbox of its own (one member, `bench-1`, three zones of simulated nodes
with room for every pod; the hub apiserver the launcher always starts stays idle), twice in the
same run:

* a spread of three subsets capped at 40/30/30 % of N (integers), each pinned to one zone;
* (a) fedspread: the real agent (`bench.fedspread_webhook`, `agents.main.Agent` in its own
  process) with this cluster's quotas pushed by the stand-in coordinator; (b) baseline: the seed's
  design (`bench.baseline_webhook`, 2 replicas as kruise-manager runs) on the same HTTPS server and
  handler code, its quota in a custom resource's status. Each mode has its own namespace and finds
  the cluster idle: the other mode's webhook is unregistered and its pods are gone.
* The burst: N pods created at once by a pool of client threads (50), as a ReplicaSet controller
  does in its slow-start batches, but with the benchmark as the client, so that each create's
  latency is what the client sees (request sent -> pod stored, admission included). Scaling a
  Deployment instead and reading the pods' creationTimestamp would measure nothing useful: the
  apiserver stamps it after mutating admission.

Reported per mode: handler p50/p99 (every CREATE admission during the burst, as the webhook's own
handler timed it: parse -> decision -> encoded answer), create p50/p99 (client side, from the first
request to success; a denied create is retried, up to 5 attempts), burst_s (first request to last
pod stored), conflicts (the webhook's 409 retries; fedspread makes no API call to admit) and
over_cap (stored pods whose subset annotation exceeds that subset's cap). `details` says what the
fixed keys cannot: denials, pods left without a subset, the baseline controller's own 409s and
deletion-cost patches, and what the handler's wall time was made of — its CPU time, and how many
admissions the OS preempted (`webhook_samples`): on 2 cores shared with a whole control plane, a
sub-millisecond handler's tail is the scheduler's, and the report should say so rather than hide it.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

import urllib3

from agents import assignment
from agents.webhook import registration
from bench import baseline_webhook, rawkube, webhook_samples
from federation.certs import pki
from federation.sandbox import launcher, nodesim
from tests.support import standin_coordinator

Report = Callable[[str], None]
Json = dict[str, Any]

REPO = pathlib.Path(__file__).resolve().parent.parent
MEMBER = "bench-1"
ZONE = "topology.kubernetes.io/zone"
SPREAD = "web"
SUBSETS = (("a", 40), ("b", 30), ("c", 30))
"""Subset (and zone) names with their caps in percent of N."""
QUICK_REPLICAS, FULL_REPLICAS = 200, 1000
WORKERS = 50
"""Concurrent creates of the burst's client."""
ATTEMPTS = 5
PODS_PER_NODE = 100
"""Pods planned per simulated node (its allocatable is 110)."""
NAMESPACE_LABEL = "fedspread-bench/admission"
BASELINE_TIMEOUT_SECONDS = 10
"""The baseline's registration as Kruise ships it: failurePolicy Fail, the API's default 10 s."""
WAIT = 120.0
IMAGE = "registry.example/app:1"


# --- the spread ---------------------------------------------------------------------------------


def caps(replicas: int) -> dict[str, int]:
    """Each subset's cap: its share of `replicas`, rounded down, the remainder to the first ones."""
    shares = {name: replicas * percent // 100 for name, percent in SUBSETS}
    for name, _ in SUBSETS[: replicas - sum(shares.values())]:
        shares[name] += 1
    return shares


def zone_term(subset: str) -> Json:
    """The required node-selector term pinning a subset to its zone of the member."""
    return {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [f"{MEMBER}-{subset}"]}]}


def node_groups(limits: dict[str, int]) -> list[nodesim.NodeGroup]:
    """Enough simulated nodes in each subset's zone for its cap, and one to spare."""
    return [nodesim.NodeGroup(prefix=f"{MEMBER}-{name}", count=cap // PODS_PER_NODE + 1,
                              labels={ZONE: f"{MEMBER}-{name}", "type": "worker"})
            for name, cap in limits.items()]


def fedspread_assignment(namespace: str, limits: dict[str, int]) -> assignment.Assignment:
    """This cluster's share of the spread as the coordinator would send it. Its Deployment keeps 0
    replicas: the benchmark's client creates the pods, so that it can time each create."""
    labels = {"app": SPREAD}
    template = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": SPREAD, "namespace": namespace, "labels": labels},
                "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels},
                                      "spec": {"containers": [{"name": "app", "image": IMAGE}]}}}}
    rules = tuple(assignment.SubsetRule(name=name, index=i, quota=cap, required_term=zone_term(name))
                  for i, (name, cap) in enumerate(limits.items()))
    return assignment.Assignment(
        spread=f"{namespace}/{SPREAD}", generation=1, namespace=namespace, workload=SPREAD, replicas=0,
        template=template, template_revision="bench", subsets=rules, subset_count=len(rules))


def pod_body() -> Json:
    """A pod of the spread as its workload would create it (generateName: the webhook names it)."""
    labels = {assignment.SPREAD_LABEL: SPREAD, "app": f"{SPREAD}-bench", assignment.REVISION_LABEL: "bench"}
    container = {"name": "app", "image": IMAGE, "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{SPREAD}-bench-", "labels": labels},
            "spec": {"containers": [container], "terminationGracePeriodSeconds": 0}}


# --- the client's side ---------------------------------------------------------------------------


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
    listing = api.get(pods_path(namespace, labelSelector=assignment.SPREAD_LABEL))
    return collections.Counter((item["metadata"].get("annotations") or {}).get(assignment.SUBSET_ANNOTATION)
                               for item in listing["items"])


def over_cap(counts: collections.Counter[str | None], limits: dict[str, int]) -> int:
    """Pods beyond their subset's cap, summed over subsets."""
    return sum(max(0, counts.get(name, 0) - cap) for name, cap in limits.items())


def admitting(api: rawkube.RawApi, namespace: str) -> bool:
    """A dry-run pod of the spread comes back with a subset: the apiserver calls the webhook."""
    created = api.post(pods_path(namespace, dryRun="All"), pod_body())
    return assignment.SUBSET_ANNOTATION in (created["metadata"].get("annotations") or {})


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
    path = pods_path(namespace, labelSelector=assignment.SPREAD_LABEL)
    api.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    wait_for(lambda: not api.get(path)["items"], what=f"pods of {namespace} deleted")


# --- the webhook processes -----------------------------------------------------------------------


class Child:
    """A webhook process of the benchmark, its stderr in a log file."""

    def __init__(self, module: str, args: Sequence[str], log: pathlib.Path) -> None:
        self.module = module
        self.log = log
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        with log.open("wb") as sink:
            self.process = subprocess.Popen([sys.executable, "-m", module, *args], cwd=REPO, env=env,
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sink)

    def death(self) -> str | None:
        """None while running; otherwise how it ended and its log's tail."""
        code = self.process.poll()
        return None if code is None else f"{self.module} exited with {code}:\n{self.tail()}"

    def tail(self, lines: int = 15) -> str:
        """The end of its log."""
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").strip().splitlines()[-lines:])
        return "(no log)"

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then SIGKILL after `timeout`; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return int(self.process.returncode)


@dataclasses.dataclass
class Mode:
    """One mode's measurements."""

    burst: Burst
    handler: list[webhook_samples.Sample]
    conflicts: int
    subsets: collections.Counter[str | None]
    counters: dict[str, int]


def _recorded(child: Child, samples: pathlib.Path) -> webhook_samples.Recorded:
    """What a stopped webhook process recorded."""
    if not samples.exists():
        raise RuntimeError(f"{child.module} wrote no samples (exit {child.stop()}):\n{child.tail()}")
    return webhook_samples.load(samples)


def run_fedspread(api: rawkube.RawApi, kubeconfig: str, scratch: pathlib.Path, *, limits: dict[str, int],
                  workers: int, report: Report) -> Mode:
    """The burst against the real agent, its quotas pushed by the stand-in coordinator."""
    namespace = "bench-fedspread"
    create_namespace(api, namespace)
    samples = scratch / "fedspread-samples.json"
    coordinator = standin_coordinator.StandinCoordinator(heartbeat_interval_seconds=10).start()
    try:
        child = Child("bench.fedspread_webhook", [
            "--cluster", MEMBER, "--kubeconfig", kubeconfig, "--coordinator", coordinator.target,
            "--webhook-name", "fedspread-bench", "--namespace-label", f"{NAMESPACE_LABEL}={namespace}",
            "--samples", str(samples)], scratch / "fedspread-agent.log")
        try:
            coordinator.wait_message(MEMBER, "hello", timeout=WAIT)
            coordinator.assign(MEMBER, fedspread_assignment(namespace, limits))
            ack = coordinator.wait_message(MEMBER, "ack", timeout=WAIT, where=lambda a: a.generation == 1)
            if ack.error:
                raise RuntimeError(f"the agent refused the assignment: {ack.error}")
            wait_for(lambda: admitting(api, namespace), what="the agent's webhook answering",
                     alive=child.death)
            report(f"fedspread: agent admitting; {sum(limits.values())} creates from {workers} threads")
            result = burst(api, namespace, count=sum(limits.values()), workers=workers)
        finally:
            child.stop()
    finally:
        coordinator.stop()
    recorded = _recorded(child, samples)
    mode = Mode(burst=result, conflicts=0, subsets=stored_subsets(api, namespace), counters=recorded.counters,
                handler=recorded.window(operation="CREATE", start=result.started))
    delete_pods(api, namespace)
    return mode


def install_crd(api: rawkube.RawApi) -> None:
    """The baseline's CustomResourceDefinition, served before this returns."""
    api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", baseline_webhook.crd())
    wait_for(lambda: api.get(baseline_webhook.object_path("default")) is not None,
             what="the baseline's custom resource served")


def run_baseline(api: rawkube.RawApi, kubeconfig: str, scratch: pathlib.Path, *, limits: dict[str, int],
                 workers: int, report: Report) -> Mode:
    """The burst against the seed's design: quota in the spread object's status, one update per pod."""
    namespace = "bench-baseline"
    install_crd(api)
    create_namespace(api, namespace)
    api.post(baseline_webhook.object_path(namespace), baseline_webhook.spread_object(
        namespace, SPREAD, [(name, cap, zone_term(name)) for name, cap in limits.items()]))
    authority = pki.CertificateAuthority.create("bench-baseline-webhook-ca")
    serving = authority.issue_server("bench-baseline-webhook", ips=("127.0.0.1",))
    cert, key = serving.write(scratch, "baseline")
    samples, ready = scratch / "baseline-samples.json", scratch / "baseline.port"
    child = Child("bench.baseline_webhook", [
        "--kubeconfig", kubeconfig, "--namespace", namespace, "--cert", str(cert), "--key", str(key),
        "--samples", str(samples), "--ready", str(ready)], scratch / "baseline-webhook.log")
    name = "bench-baseline"
    registered = False
    try:
        port = wait_for(lambda: ready.exists() and ready.read_text().strip(),
                        what="the baseline webhook serving", alive=child.death)
        config = registration.configuration(
            registration.url_client_config(f"https://127.0.0.1:{port}{registration.MUTATE_PATH}",
                                           ca_pem=authority.cert_pem),
            name=name, namespace_selector={"matchLabels": {NAMESPACE_LABEL: namespace}})
        for hook in config["webhooks"]:
            hook.update(failurePolicy="Fail", timeoutSeconds=BASELINE_TIMEOUT_SECONDS)
        api.post("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", config)
        registered = True
        wait_for(lambda: admitting(api, namespace), what="the baseline webhook answering", alive=child.death)
        report(f"baseline: webhook admitting; {sum(limits.values())} creates from {workers} threads")
        result = burst(api, namespace, count=sum(limits.values()), workers=workers)
    finally:
        try:
            if registered:  # first: with failurePolicy Fail, deletes would need the webhook
                api.delete(f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}")
        finally:
            child.stop()
    recorded = _recorded(child, samples)
    mode = Mode(burst=result, conflicts=recorded.counters.get(baseline_webhook.CONFLICTS, 0),
                subsets=stored_subsets(api, namespace), counters=recorded.counters,
                handler=recorded.window(operation="CREATE", start=result.started))
    delete_pods(api, namespace)
    return mode


# --- results -------------------------------------------------------------------------------------


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def _ms(values: Sequence[float], pct: float) -> float:
    return round(percentile(values, pct) * 1000, 3)


def summary(mode: Mode, limits: dict[str, int]) -> Json:
    """The keys issue 7 fixes for one mode."""
    wall = [s.seconds for s in mode.handler]
    return {
        "handler_p50_ms": _ms(wall, 50),
        "handler_p99_ms": _ms(wall, 99),
        "create_p50_ms": round(percentile(mode.burst.latencies, 50) * 1000, 1),
        "create_p99_ms": round(percentile(mode.burst.latencies, 99) * 1000, 1),
        "burst_s": round(mode.burst.seconds, 2),
        "conflicts": mode.conflicts,
        "over_cap": over_cap(mode.subsets, limits),
    }


def details(mode: Mode) -> Json:
    """What the fixed keys leave out: counts behind the percentiles, denials, pods without a subset,
    and what the handler's wall time consisted of (its CPU time; admissions the OS preempted)."""
    calm = [s.seconds for s in mode.handler if not s.preempted]
    return {
        "admissions": len(mode.handler), "pods_stored": len(mode.burst.latencies),
        "create_denied": mode.burst.denied, "pods_lost": mode.burst.lost,
        "without_subset": mode.subsets.get(None, 0),
        "by_subset": {str(k): v for k, v in sorted(mode.subsets.items(), key=lambda kv: str(kv[0])) if k},
        "handler_max_ms": round(max((s.seconds for s in mode.handler), default=0.0) * 1000, 3),
        "handler_cpu_p50_ms": _ms([s.cpu_seconds for s in mode.handler], 50),
        "handler_cpu_p99_ms": _ms([s.cpu_seconds for s in mode.handler], 99),
        "handler_preempted": sum(s.preempted for s in mode.handler),
        "handler_p99_not_preempted_ms": _ms(calm, 99),
        "load_average_at_start": round(mode.burst.load, 2),
        **{k: v for k, v in sorted(mode.counters.items())},
    }


def _ratio(baseline: float, fedspread: float) -> float | None:
    return round(baseline / fedspread, 1) if fedspread > 0 else None


def measure(*, size: int, report: Report, directory: pathlib.Path | None = None,
            workers: int = WORKERS) -> Json:
    """The benchmark at `size` pods on a sandbox of its own (in `directory`, or a temporary one),
    stopped before this returns."""
    limits = caps(size)
    with tempfile.TemporaryDirectory(prefix="fedspread-bench-admission-") as temporary:
        scratch = pathlib.Path(temporary)
        where = directory or scratch / "sandbox"
        sandbox = launcher.up(where, members=[MEMBER], profiles={MEMBER: node_groups(limits)}, report=report)
        try:
            kubeconfig = sandbox.cluster(MEMBER).kubeconfig
            api = rawkube.RawApi(rawkube.api_client(kubeconfig, pool_size=workers + 8))
            fed = run_fedspread(api, kubeconfig, scratch, limits=limits, workers=workers, report=report)
            report(f"fedspread: {_line(fed)}")
            base = run_baseline(api, kubeconfig, scratch, limits=limits, workers=workers, report=report)
            report(f"baseline: {_line(base)}")
        finally:
            launcher.down(where, remove=False)
    fed_summary, base_summary = summary(fed, limits), summary(base, limits)
    return {
        "replicas": size,
        "fedspread": fed_summary,
        "baseline": base_summary,
        "ratios": {"handler_p99": _ratio(base_summary["handler_p99_ms"], fed_summary["handler_p99_ms"]),
                   "burst": _ratio(base_summary["burst_s"], fed_summary["burst_s"])},
        "details": {
            "method": {"caps": limits, "client_threads": workers,
                       "baseline_replicas": baseline_webhook.REPLICAS,
                       "create_latency": "client side: first request to pod stored, denied attempts retried",
                       "handler_latency": "inside the webhook's handler: parse to encoded answer"},
            "fedspread": details(fed), "baseline": details(base)},
    }


def _line(mode: Mode) -> str:
    return (f"{len(mode.burst.latencies)} pods in {mode.burst.seconds:.2f} s, handler p99 "
            f"{_ms([s.seconds for s in mode.handler], 99):.3f} ms, create p99 "
            f"{percentile(mode.burst.latencies, 99) * 1000:.0f} ms, conflicts {mode.conflicts}, "
            f"subsets {dict(mode.subsets)}")


def run(*, quick: bool, report: Callable[[str], None]) -> dict[str, Any]:
    """The admission benchmark: N = 200 (quick) or 1,000 pods, fedspread then the baseline."""
    return measure(size=QUICK_REPLICAS if quick else FULL_REPLICAS, report=report)
