"""The admission benchmark's modes — the webhooks it compares and the floor without one — one run at a time.

Why a process of its own per run, on the same sandbox: (a) fedspread — the real agent
(`bench.fedspread_webhook`, `agents.main.Agent`) with this cluster's quotas pushed by a stand-in
coordinator; `fedspread-switch-0.5ms` is the same agent with the interpreter's thread switch
interval a tenth of CPython's default, a candidate change measured against the agent as it ships
in the same run (`admission_report.handler_wait`); (b) baseline —
Kruise's design (`bench.baseline_webhook`) on the same HTTPS server and handler code, its quota in
a custom resource's status, every webhook replica and the controller a process of its own (the
replicas share one port through SO_REUSEPORT): `baseline` with kruise-manager's 2 replicas,
`baseline-1` with the one replica Kruise's manifest ships; (c) floor — no webhook registered for
its namespace at all: the same creates, the physical floor of the admission path, against which
each webhook's *added* latency is measured. Runs of the modes alternate; a webhook that stayed up
through the other modes' runs would spend the shared cores on them (the agent watches every pod of
its cluster), and one that stayed up through its own earlier runs would carry their state (the
baseline's `creatingPods` entries live 30 s). So each run gets fresh processes, and for the
baseline a fresh spread object; each mode has its own namespace, and a run finds the cluster idle
— the other webhooks unregistered and every pod of the previous run gone. The member (`MEMBER`)
has one zone of simulated nodes per subset, and each subset is pinned to its zone.

`Webhooks.serving(mode, tag)` is the context of one run: the webhook registered and answering on
entry (`Session`: its namespace, its name as the apiserver's metrics label it, the timeout its
registration gives the apiserver), stopped on exit, after which `Session.recorded` holds what its
handlers recorded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
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
FEDSPREAD, FEDSPREAD_SHORT_SWITCH, BASELINE, BASELINE_ONE, FLOOR = (
    "fedspread", "fedspread-switch-0.5ms", "baseline", "baseline-1", "floor")
MODES = (FEDSPREAD, FEDSPREAD_SHORT_SWITCH, BASELINE, BASELINE_ONE, FLOOR)
BASELINE_REPLICAS = {BASELINE: 2, BASELINE_ONE: 1}
"""Webhook replica processes per baseline mode: kruise-manager's default, and Kruise's manifest's."""
SHORT_SWITCH_INTERVAL = 0.0005
"""The thread switch interval `fedspread-switch-0.5ms` runs the agent with (CPython's default: 5 ms)."""
FLOOR_TIMEOUT_SECONDS = 2.0
"""The bar the floor's creates are judged by for a collapse: fedspread's registered timeout."""
FEDSPREAD_CONFIGURATION, BASELINE_CONFIGURATION = "fedspread-bench", "bench-baseline"
BASELINE_HOOK = "pods.baseline.bench"
"""The baseline's pod webhook name, distinct from fedspread's in the apiserver's metrics."""
WEBHOOKS_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def zone_term(subset: str) -> Json:
    """The required node-selector term pinning a subset to its zone of the member."""
    return {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [f"{MEMBER}-{subset}"]}]}


def node_groups(limits: dict[str, int]) -> list[nodesim.NodeGroup]:
    """Enough simulated nodes in each subset's zone for its cap, and one to spare."""
    return [nodesim.NodeGroup(prefix=f"{MEMBER}-{name}", count=cap // PODS_PER_NODE + 1,
                              labels={ZONE: f"{MEMBER}-{name}", "type": "worker"})
            for name, cap in limits.items()]


def fedspread_assignment(namespace: str, limits: dict[str, int], *, replicas: int = 0,
                         generation: int = 1) -> assignment.Assignment:
    """This cluster's share of the spread as the coordinator would send it. Its Deployment keeps 0
    replicas while the benchmark's client creates the pods (so that it can time each create); the
    ReplicaSet level scales it with a new assignment (`Session.scale`), as the coordinator would:
    the agent admits pods into subsets only when their owner chain leads to its own Deployment."""
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
        spread=f"{namespace}/{spread}", generation=generation, namespace=namespace, workload=spread,
        replicas=replicas,
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
class Session:
    """One run's webhook: its mode's namespace, the pods webhook's name (the `name` label of the
    apiserver's webhook metrics), its registered timeout, and after the run what it recorded."""

    mode: str
    namespace: str
    webhook: str
    timeout_s: float
    recorded: webhook_samples.Recorded | None = None
    scale: Callable[[int], None] | None = None
    """Scales the spread's own member Deployment (fedspread: a new assignment from the stand-in
    coordinator); None: the ReplicaSet level scales a Deployment of the benchmark's own."""

    def conflicts(self) -> int:
        """The webhook's 409 retries (fedspread's makes no API call to admit)."""
        return (self.recorded.counters.get(baseline_admission.CONFLICTS, 0) if self.recorded else 0)


def _recorded(child: Child, samples: pathlib.Path) -> webhook_samples.Recorded:
    """What a stopped webhook process recorded."""
    if not samples.exists():
        raise RuntimeError(f"{child.module} wrote no samples (exit {child.stop()}):\n{child.tail()}")
    return webhook_samples.load(samples)


def registered_timeout(api: rawkube.RawApi, configuration: str, hook: str) -> float:
    """The timeoutSeconds the apiserver holds for webhook `hook` of `configuration`."""
    stored = api.get(f"{WEBHOOKS_PATH}/{configuration}")
    for item in stored["webhooks"]:
        if item["name"] == hook:
            return float(item.get("timeoutSeconds", 10))
    raise RuntimeError(f"{configuration} registers no webhook {hook}")


class Webhooks:
    """Both modes' webhooks on one member: namespaces, CRD and certificate once, a process per run."""

    def __init__(self, api: rawkube.RawApi, kubeconfig: str, scratch: pathlib.Path, *,
                 limits: dict[str, int]) -> None:
        self.api = api
        self.kubeconfig = kubeconfig
        self.scratch = scratch
        self.limits = limits
        self.namespaces = {mode: f"bench-{mode.replace('.', '')}" for mode in MODES}
        self._authority = pki.CertificateAuthority.create("bench-baseline-webhook-ca")
        serving = self._authority.issue_server("bench-baseline-webhook", ips=("127.0.0.1",))
        self._cert, self._key = serving.write(scratch, "baseline")

    def prepare(self) -> None:
        """Both modes' namespaces, and the baseline's CustomResourceDefinition served."""
        for namespace in self.namespaces.values():
            client.create_namespace(self.api, namespace)
        self.api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", baseline_resource.crd())
        client.wait_for(lambda: self.api.get(baseline_resource.object_path("default")) is not None,
                        what="the baseline's custom resource served")

    def serving(self, mode: str, tag: str) -> contextlib.AbstractContextManager[Session]:
        """The context of one run of `mode` (`tag` names its files)."""
        if mode == FLOOR:
            return self._floor()
        if mode in BASELINE_REPLICAS:
            return self._baseline(mode, tag)
        if mode in (FEDSPREAD, FEDSPREAD_SHORT_SWITCH):
            return self._fedspread(mode, tag)
        raise ValueError(f"no admission mode {mode!r}: one of {', '.join(MODES)}")

    @contextlib.contextmanager
    def _floor(self) -> Iterator[Session]:
        """No webhook for the floor's namespace: the creates meet the apiserver alone."""
        session = Session(mode=FLOOR, namespace=self.namespaces[FLOOR], webhook="",
                          timeout_s=FLOOR_TIMEOUT_SECONDS)
        yield session
        session.recorded = webhook_samples.Recorded(samples=(), counters={})

    @contextlib.contextmanager
    def _fedspread(self, mode: str, tag: str) -> Iterator[Session]:
        """The real agent, its quotas pushed by a stand-in coordinator of its own."""
        namespace = self.namespaces[mode]
        samples = self.scratch / f"{mode}-{tag}-samples.json"
        short = mode == FEDSPREAD_SHORT_SWITCH
        switch = ["--switch-interval", str(SHORT_SWITCH_INTERVAL)] if short else []
        coordinator = standin_coordinator.StandinCoordinator(heartbeat_interval_seconds=10).start()
        try:
            child = Child("bench.fedspread_webhook", [
                "--cluster", MEMBER, "--kubeconfig", self.kubeconfig, "--coordinator", coordinator.target,
                "--webhook-name", FEDSPREAD_CONFIGURATION,
                "--namespace-label", f"{client.NAMESPACE_LABEL}={namespace}",
                "--samples", str(samples), *switch], self.scratch / f"{mode}-{tag}-agent.log")
            try:
                coordinator.wait_message(MEMBER, "hello", timeout=client.WAIT)
                coordinator.assign(MEMBER, fedspread_assignment(namespace, self.limits))
                ack = coordinator.wait_message(MEMBER, "ack", timeout=client.WAIT,
                                               where=lambda a: a.generation == 1)
                if ack.error:
                    raise RuntimeError(f"the agent refused the assignment: {ack.error}")
                client.wait_for(lambda: client.admitting(self.api, namespace),
                                what="the agent's webhook answering", alive=child.death)
                timeout = registered_timeout(self.api, FEDSPREAD_CONFIGURATION, registration.PODS_WEBHOOK)
                generations = itertools.count(2)

                def scale(replicas: int) -> None:
                    coordinator.assign(MEMBER, fedspread_assignment(
                        namespace, self.limits, replicas=replicas, generation=next(generations)))

                session = Session(mode=mode, namespace=namespace, webhook=registration.PODS_WEBHOOK,
                                  timeout_s=timeout, scale=scale)
                yield session
            finally:
                child.stop()
        finally:
            coordinator.stop()
        session.recorded = _recorded(child, samples)

    @contextlib.contextmanager
    def _baseline(self, mode: str, tag: str) -> Iterator[Session]:
        """Kruise's design on a fresh spread object: quota in its status, one update per pod; each
        webhook replica and the controller a process of its own."""
        namespace = self.namespaces[mode]
        path = baseline_resource.object_path(namespace, client.SPREAD)
        with contextlib.suppress(rawkube.RawError):
            self.api.delete(path)
        client.wait_for(lambda: _absent(self.api, path), what="the previous spread object deleted")
        self.api.post(baseline_resource.object_path(namespace), baseline_resource.spread_object(
            namespace, client.SPREAD, [(name, cap, zone_term(name)) for name, cap in self.limits.items()]))
        children: list[tuple[Child, pathlib.Path]] = []
        registered = False
        try:
            port = 0
            roles = ["webhook"] * BASELINE_REPLICAS[mode] + ["controller"]
            for number, role in enumerate(roles):
                part = f"{mode}-{tag}-{role}-{number}"
                samples, ready = self.scratch / f"{part}-samples.json", self.scratch / f"{part}.port"
                serving = ["--cert", str(self._cert), "--key", str(self._key), "--port", str(port)]
                child = Child("bench.baseline_webhook", [
                    "--kubeconfig", self.kubeconfig, "--namespace", namespace, "--role", role,
                    *(serving if role == "webhook" else []), "--samples", str(samples),
                    "--ready", str(ready)], self.scratch / f"{part}.log")
                children.append((child, samples))
                bound = client.wait_for(functools.partial(_port_written, ready),
                                        what=f"the baseline's {role} {number} running", alive=child.death)
                port = port or int(bound)
            config = registration.configuration(
                registration.url_client_config(f"https://127.0.0.1:{port}{registration.MUTATE_PATH}",
                                               ca_pem=self._authority.cert_pem),
                name=BASELINE_CONFIGURATION,
                namespace_selector={"matchLabels": {client.NAMESPACE_LABEL: namespace}})
            for hook in config["webhooks"]:
                hook.update(failurePolicy="Fail", timeoutSeconds=BASELINE_TIMEOUT_SECONDS)
                hook["name"] = hook["name"].replace(".fedspread.io", ".baseline.bench")
            self.api.post(WEBHOOKS_PATH, config)
            registered = True
            client.wait_for(lambda: client.admitting(self.api, namespace),
                            what="the baseline webhook answering", alive=_first_death(children))
            timeout = registered_timeout(self.api, BASELINE_CONFIGURATION, BASELINE_HOOK)
            session = Session(mode=mode, namespace=namespace, webhook=BASELINE_HOOK, timeout_s=timeout)
            yield session
        finally:
            try:
                if registered:  # first: with failurePolicy Fail, deletes would need the webhook
                    self.api.delete(f"{WEBHOOKS_PATH}/{BASELINE_CONFIGURATION}")
            finally:
                for child, _ in children:
                    child.stop()
        session.recorded = webhook_samples.merged([_recorded(child, samples) for child, samples in children])


def _port_written(ready: pathlib.Path) -> str:
    """What a baseline process wrote to its `--ready` file ("" before it did)."""
    return ready.read_text().strip() if ready.exists() else ""


def _first_death(children: Sequence[tuple[Child, pathlib.Path]]) -> Callable[[], str | None]:
    """How the first of `children` to have ended ended, None while all run."""
    def death() -> str | None:
        return next((found for child, _ in children if (found := child.death()) is not None), None)
    return death


def _absent(api: rawkube.RawApi, path: str) -> bool:
    """True once GET `path` answers 404."""
    try:
        api.get(path)
    except rawkube.RawError as error:
        if error.status == 404:
            return True
        raise
    return False
