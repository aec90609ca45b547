"""What fault tests do on a member cluster: run a real `fedspread agent`, look at its pods.

Why a module: the agent fault tests (stream cut, agent killed, member apiserver restarted) all
run the agent as a process of its own against a sandbox member — it can only be SIGKILLed if it
is one — and all judge the outcome the same way: the spread's pods in the member, by subset, and
what the agent says about itself (metrics, log). Each agent registers its own webhook, limited
to the test's namespace, so agents of different tests never see each other's pods.
"""

from __future__ import annotations

import collections
import os
import pathlib
import signal
import subprocess
import urllib.request
from collections.abc import Sequence
from typing import Any

import conftest
import hubside

from federation.api import names
from federation.demo import environment

NAMESPACE_LABEL = "fedspread-test/agent"


class AgentProcess:
    """`fedspread agent --cluster CLUSTER` against sandbox member `member`, until `stop()`."""

    def __init__(self, clusters: conftest.Clusters, *, cluster: str, member: str, coordinator: str,
                 namespace: str, log: pathlib.Path, args: Sequence[str] = ()) -> None:
        clusters.core(member).patch_namespace(
            namespace, {"metadata": {"labels": {NAMESPACE_LABEL: namespace}}})
        self.cluster = cluster
        self.log = log
        self.metrics_port = hubside.free_port()
        self.webhook_name = f"fedspread-agent-{namespace}"
        # As in production (a fixed port behind a Service, a certificate from cert-manager), a
        # restarted agent serves the webhook at the same URL with the same CA, so the apiserver's
        # cached registration reaches it at once. The sandbox's certificate for its apiservers
        # (SAN 127.0.0.1, signed by the sandbox CA) serves.
        pki = pathlib.Path(clusters.sandbox.directory) / "pki"
        self.args = environment.fedspread_command(
            "agent", "--cluster", cluster, "--kubeconfig", clusters.sandbox.cluster(member).kubeconfig,
            "--coordinator", coordinator, "--insecure", "--webhook-port", str(hubside.free_port()),
            "--tls-cert", str(pki / f"{member}-apiserver.crt"),
            "--tls-key", str(pki / f"{member}-apiserver.key"), "--tls-ca", str(pki / "ca.crt"),
            "--metrics-port", str(self.metrics_port), "--webhook-name", self.webhook_name,
            "--webhook-namespace-label", f"{NAMESPACE_LABEL}={namespace}", "--heartbeat-seconds", "1",
            "--label", "topology.fedspread.io/region=test", "--deregister-on-exit", *args)
        self.starts = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        """Start (again): a fresh process, its output appended to the same log."""
        with self.log.open("ab") as out:
            out.write(f"--- start {self.starts + 1}\n".encode())
            out.flush()
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        self.starts += 1

    @property
    def alive(self) -> bool:
        """The current process is running."""
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no clean shutdown (its webhook registration stays; until it is back the
        apiserver's calls fail and, failurePolicy Ignore, pods are created without a subset)."""
        if self.alive:
            assert self.process is not None
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> int | None:
        """SIGTERM and wait; the exit code (None if it was not running)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def metric(self, name: str) -> float | None:
        """One unlabelled metric from /metrics (None when the agent does not answer)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as page:
                text = page.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
        return None

    def decisions(self, *, outcome: str | None = None) -> float:
        """Admission decisions so far, of every outcome or of `outcome` only (`passthrough`,
        `assigned`, ...: agents.metrics); -1 when the agent does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as page:
                text = page.read().decode()
        except OSError:
            return -1.0
        wanted = f'outcome="{outcome}"'
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("fedspread_agent_admission_decisions_total{")
                   and (outcome is None or wanted in line.partition("}")[0]))

    def output(self) -> str:
        """Everything it logged, over every start."""
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


def spread_pods(clusters: conftest.Clusters, member: str, namespace: str, name: str) -> list[Any]:
    """The spread's pods in `member` that are not being deleted."""
    pods = clusters.core(member).list_namespaced_pod(
        namespace, label_selector=f"{names.SPREAD_LABEL}={name}").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def by_subset(pods: list[Any]) -> dict[str | None, int]:
    """How many of `pods` carry each subset annotation (None: admitted without a subset)."""
    return dict(collections.Counter((p.metadata.annotations or {}).get(names.SUBSET_ANNOTATION)
                                    for p in pods))


def owned(pods: list[Any]) -> list[Any]:
    """The pods a ReplicaSet owns (not ones a test created by hand)."""
    return [p for p in pods if any(o.kind == "ReplicaSet" for o in p.metadata.owner_references or [])]


def bare_pod(name: str, spread: str, *, revision: str | None = None) -> dict[str, Any]:
    """A pod of spread `spread` that no ReplicaSet adopts (its labels match no selector). Quotas
    are counted per pod-template revision (kruise#834): give the ReplicaSet pods' `revision` for a
    pod that competes with them."""
    labels = {names.SPREAD_LABEL: spread, "app": f"bare-{spread}"}
    if revision is not None:
        labels[names.REVISION_LABEL] = revision
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}],
                     "terminationGracePeriodSeconds": 0}}


def webhook_live(agent: AgentProcess, clusters: conftest.Clusters, member: str, namespace: str) -> bool:
    """Whether the apiserver calls this agent's webhook now: a dry-run pod of an unknown spread
    is answered (and counted) by it. The apiserver picks up a new registration ~1 s late."""
    before = agent.decisions()
    clusters.core(member).create_namespaced_pod(namespace, bare_pod("probe", "probe"), dry_run="All")
    return agent.decisions() > before >= 0


def controllers_acting(clusters: conftest.Clusters, member: str, namespace: str, *, name: str) -> bool:
    """Whether `member`'s kube-controller-manager acts on what changes now: a probe Deployment
    `name` of 0 replicas (no pod, so no webhook and no scheduler) is created if missing, and this
    is true once its Deployment controller made its ReplicaSet and the ReplicaSet controller
    observed it; the probe is then deleted. After an apiserver restart the controllers' watches
    come back late on a loaded machine (once 68 s): a test of our own recovery starts its clock
    after this."""
    apps = clusters.apps(member)
    labels = {"app": name}
    found = apps.list_namespaced_deployment(namespace, field_selector=f"metadata.name={name}").items
    if not found:
        apps.create_namespaced_deployment(namespace, {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}}})
        return False
    deployment = found[0]
    owned_sets = [r for r in apps.list_namespaced_replica_set(namespace, label_selector=f"app={name}").items
                  if any(o.uid == deployment.metadata.uid for o in r.metadata.owner_references or [])]
    acted = ((deployment.status.observed_generation or 0) >= 1 and bool(owned_sets)
             and all((r.status.observed_generation or 0) >= 1 for r in owned_sets))
    if acted:
        apps.delete_namespaced_deployment(name, namespace, propagation_policy="Background")
    return acted
