"""The two webhooks the admission benchmark compares, each started, registered and put under a burst.

Why each in a process of its own, on the same sandbox, one after the other: (a) fedspread — the
real agent (`bench.fedspread_webhook`, `agents.main.Agent`) with this cluster's quotas pushed by the
stand-in coordinator; (b) baseline — Kruise's design (`bench.baseline_webhook`, 2 replicas as
kruise-manager runs) on the same HTTPS server and handler code, its quota in a custom resource's
status. Each mode has its own namespace and finds the cluster idle: the other mode's webhook is
unregistered and its pods are gone. The member (`MEMBER`) has one zone of simulated nodes per
subset, and each subset is pinned to its zone.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

from agents.webhook import registration
from bench import admission_client as client
from bench import baseline_admission, baseline_resource, rawkube, standin_coordinator, webhook_samples
from federation.certs import pki
from federation.rpc import assignment
from federation.sandbox import nodesim

Report = Callable[[str], None]
Json = dict[str, Any]

REPO = pathlib.Path(__file__).resolve().parent.parent
MEMBER = "bench-1"
ZONE = "topology.kubernetes.io/zone"
PODS_PER_NODE = 100
"""Pods planned per simulated node (its allocatable is 110)."""
BASELINE_TIMEOUT_SECONDS = 10
"""The baseline's registration as Kruise ships it: failurePolicy Fail, the API's default 10 s."""


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
    spread = client.SPREAD
    labels = {"app": spread}
    template = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": spread, "namespace": namespace, "labels": labels},
                "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels},
                                      "spec": {"containers": [{"name": "app", "image": client.IMAGE}]}}}}
    rules = tuple(assignment.SubsetRule(name=name, index=i, quota=cap, required_term=zone_term(name))
                  for i, (name, cap) in enumerate(limits.items()))
    return assignment.Assignment(
        spread=f"{namespace}/{spread}", generation=1, namespace=namespace, workload=spread, replicas=0,
        template=template, template_revision="bench", subsets=rules, subset_count=len(rules))


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

    burst: client.Burst
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
    client.create_namespace(api, namespace)
    samples = scratch / "fedspread-samples.json"
    coordinator = standin_coordinator.StandinCoordinator(heartbeat_interval_seconds=10).start()
    try:
        child = Child("bench.fedspread_webhook", [
            "--cluster", MEMBER, "--kubeconfig", kubeconfig, "--coordinator", coordinator.target,
            "--webhook-name", "fedspread-bench", "--namespace-label", f"{client.NAMESPACE_LABEL}={namespace}",
            "--samples", str(samples)], scratch / "fedspread-agent.log")
        try:
            coordinator.wait_message(MEMBER, "hello", timeout=client.WAIT)
            coordinator.assign(MEMBER, fedspread_assignment(namespace, limits))
            ack = coordinator.wait_message(MEMBER, "ack", timeout=client.WAIT,
                                           where=lambda a: a.generation == 1)
            if ack.error:
                raise RuntimeError(f"the agent refused the assignment: {ack.error}")
            client.wait_for(lambda: client.admitting(api, namespace), what="the agent's webhook answering",
                            alive=child.death)
            report(f"fedspread: agent admitting; {sum(limits.values())} creates from {workers} threads")
            result = client.burst(api, namespace, count=sum(limits.values()), workers=workers)
        finally:
            child.stop()
    finally:
        coordinator.stop()
    recorded = _recorded(child, samples)
    mode = Mode(burst=result, conflicts=0, subsets=client.stored_subsets(api, namespace),
                counters=recorded.counters, handler=recorded.window(operation="CREATE", start=result.started))
    client.delete_pods(api, namespace)
    return mode


def install_crd(api: rawkube.RawApi) -> None:
    """The baseline's CustomResourceDefinition, served before this returns."""
    api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", baseline_resource.crd())
    client.wait_for(lambda: api.get(baseline_resource.object_path("default")) is not None,
                    what="the baseline's custom resource served")


def run_baseline(api: rawkube.RawApi, kubeconfig: str, scratch: pathlib.Path, *, limits: dict[str, int],
                 workers: int, report: Report) -> Mode:
    """The burst against Kruise's design: quota in the spread object's status, one update per pod."""
    namespace = "bench-baseline"
    install_crd(api)
    client.create_namespace(api, namespace)
    api.post(baseline_resource.object_path(namespace), baseline_resource.spread_object(
        namespace, client.SPREAD, [(name, cap, zone_term(name)) for name, cap in limits.items()]))
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
        port = client.wait_for(lambda: ready.exists() and ready.read_text().strip(),
                               what="the baseline webhook serving", alive=child.death)
        config = registration.configuration(
            registration.url_client_config(f"https://127.0.0.1:{port}{registration.MUTATE_PATH}",
                                           ca_pem=authority.cert_pem),
            name=name, namespace_selector={"matchLabels": {client.NAMESPACE_LABEL: namespace}})
        for hook in config["webhooks"]:
            hook.update(failurePolicy="Fail", timeoutSeconds=BASELINE_TIMEOUT_SECONDS)
        api.post("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", config)
        registered = True
        client.wait_for(lambda: client.admitting(api, namespace), what="the baseline webhook answering",
                        alive=child.death)
        report(f"baseline: webhook admitting; {sum(limits.values())} creates from {workers} threads")
        result = client.burst(api, namespace, count=sum(limits.values()), workers=workers)
    finally:
        try:
            if registered:  # first: with failurePolicy Fail, deletes would need the webhook
                api.delete(f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}")
        finally:
            child.stop()
    recorded = _recorded(child, samples)
    mode = Mode(burst=result, conflicts=recorded.counters.get(baseline_admission.CONFLICTS, 0),
                subsets=client.stored_subsets(api, namespace), counters=recorded.counters,
                handler=recorded.window(operation="CREATE", start=result.started))
    client.delete_pods(api, namespace)
    return mode
