"""The whole agent, started as `fedspread agent`, against sandbox member-1 and a stand-in coordinator.

What it proves, end to end through the command line:

* the stand-in pushes an assignment -> the agent creates the member Deployment with this cluster's
  replicas, registers its own webhook (certificate from an in-memory CA), and the apiserver
  places every pod into a subset;
* the stand-in stops -> the agent says it is fail static (metrics) and the webhook keeps placing
  new pods from the last quotas;
* the stand-in comes back on the same port -> the agent reconnects, says in Hello which spread
  generation it enforces, and resends its full inventory and pod counts;
* SIGTERM stops it cleanly and removes its webhook registration; startup errors are one line.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Clusters
from kubernetes.client.exceptions import ApiException
from waiting import wait_for

from bench import standin_coordinator
from federation.api import names
from federation.rpc import assignment
from federation.sandbox import state
from federation.sandbox.ports import free_port

MEMBER = "member-1"
ZONE = "topology.kubernetes.io/zone"
WAIT = 90.0  # generous: the sandbox shares 2 cores with other work
FEDSPREAD = str(pathlib.Path(sys.executable).parent / "fedspread")


def zone_rule(name: str, index: int, quota: int, zone: str) -> assignment.SubsetRule:
    return assignment.SubsetRule(name=name, index=index, quota=quota, required_term={
        "matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]})


def web_assignment(namespace: str, *, generation: int, replicas: int) -> assignment.Assignment:
    """Spread `namespace/web`: 2 pods in zone a, then 1 in zone b, on member-1."""
    labels = {"app": "web"}
    container = {"name": "app", "image": "registry.example/app:1", "resources": {"requests": {"cpu": "10m"}}}
    template = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": namespace, "labels": labels},
                "spec": {"replicas": 99, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}
    rules = (zone_rule("a", 0, 2, f"{MEMBER}-a"), zone_rule("b", 1, 1, f"{MEMBER}-b"))
    return assignment.Assignment(
        spread=f"{namespace}/web", generation=generation, namespace=namespace, workload="web",
        replicas=replicas, template=template, template_revision="t1", subsets=rules, subset_count=2)


class AgentProcess:
    """`fedspread agent` in a subprocess, its stderr in a file shown when a test fails."""

    def __init__(self, kubeconfig: str, coordinator: str, namespace: str, log: pathlib.Path) -> None:
        self.metrics_port = free_port()
        self.webhook_name = f"fedspread-agent-{namespace}"
        self.log = log
        self.args = [
            FEDSPREAD, "agent", "--cluster", MEMBER, "--kubeconfig", kubeconfig,
            "--coordinator", coordinator, "--webhook-port", "0", "--metrics-port", str(self.metrics_port),
            "--webhook-name", self.webhook_name,
            "--webhook-namespace-label", f"fedspread-test/agent={namespace}", "--deregister-on-exit",
            "--heartbeat-seconds", "1", "--label", "topology.fedspread.io/region=test",
            "--insecure",  # the stand-in serves plaintext; mTLS has its own test (test_mtls.py)
        ]
        self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=log.open("w"))

    def metric(self, name: str) -> float | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as page:
                text = page.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
        return None

    def decisions(self) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as page:
                text = page.read().decode()
        except OSError as error:
            return str(error)
        return "\n".join(line for line in text.splitlines() if "decisions_total{" in line)

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(
                    f"the agent did not stop within 30 s of SIGTERM:\n{self.output()}") from None
        return int(self.process.returncode)


def member_kubeconfig(sandbox: state.SandboxState) -> str:
    return next(c.kubeconfig for c in sandbox.clusters if c.name == MEMBER)


@pytest.fixture
def standin() -> Iterator[standin_coordinator.StandinCoordinator]:
    coordinator = standin_coordinator.StandinCoordinator(heartbeat_interval_seconds=1).start()
    yield coordinator
    coordinator.stop()


@pytest.fixture
def agent(sandbox: state.SandboxState, clusters: Clusters, namespace: str, tmp_path: pathlib.Path,
          standin: standin_coordinator.StandinCoordinator) -> Iterator[AgentProcess]:
    clusters.core(MEMBER).patch_namespace(
        namespace, {"metadata": {"labels": {"fedspread-test/agent": namespace}}})
    running = AgentProcess(member_kubeconfig(sandbox), standin.target, namespace, tmp_path / "agent.log")
    try:
        yield running
    finally:
        code = running.stop()
        print(running.output())
        assert code == 0, f"agent exited with {code}"


def web_pods(clusters: Clusters, namespace: str) -> list[Any]:
    pods = clusters.core(MEMBER).list_namespaced_pod(namespace, label_selector="app=web").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def subsets_of(pods: list[Any]) -> dict[str | None, int]:
    return dict(collections.Counter((p.metadata.annotations or {}).get(names.SUBSET_ANNOTATION)
                                    for p in pods))


def webhook_answers(clusters: Clusters, namespace: str) -> bool:
    """A dry-run pod of the spread comes back with a subset: the apiserver calls our webhook."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "probe", "labels": {names.SPREAD_LABEL: "web", "app": "probe"}},
           "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}
    created = clusters.core(MEMBER).create_namespaced_pod(namespace, pod, dry_run="All")
    return names.SUBSET_ANNOTATION in (created.metadata.annotations or {})


def web_counts(namespace: str) -> Any:
    """A predicate on PodCountsReports: spread `namespace/web` has pods a:2 and b:1 (running or pending)."""
    def holds(report: Any) -> bool:
        web = [s for s in report.spreads if s.spread == f"{namespace}/web"]
        return bool(web) and {s.subset: s.counts.running + s.counts.pending
                              for s in web[0].subsets} == {"a": 2, "b": 1}
    return holds


def test_agent_enforces_fails_static_and_resyncs(
        agent: AgentProcess, standin: standin_coordinator.StandinCoordinator, clusters: Clusters,
        namespace: str) -> None:
    hello = standin.wait_message(MEMBER, "hello", timeout=WAIT)
    assert dict(hello.topology_labels) == {"topology.fedspread.io/region": "test"}
    # Nothing of this test's namespace yet (another test's Deployments may still be going away).
    assert [a.spread for a in hello.applied if a.spread.startswith(f"{namespace}/")] == []
    standin.wait_message(MEMBER, "inventory", timeout=WAIT, where=lambda r: len(r.node_pools) > 0)

    # Quotas first with 0 replicas, until the apiserver really calls the new webhook (~1 s after
    # registration, DESIGN §7a); then the real share.
    standin.assign(MEMBER, web_assignment(namespace, generation=1, replicas=0))
    standin.wait_message(MEMBER, "ack", timeout=WAIT, where=lambda a: a.generation == 1 and not a.error)
    wait_for(lambda: webhook_answers(clusters, namespace), timeout=WAIT,
             message=lambda: f"the apiserver never called the agent's webhook; agent log:\n{agent.output()}")
    standin.assign(MEMBER, web_assignment(namespace, generation=2, replicas=3))
    wait_for(lambda: subsets_of(web_pods(clusters, namespace)) == {"a": 2, "b": 1}, timeout=WAIT,
             message=lambda: f"pods by subset: {subsets_of(web_pods(clusters, namespace))}")

    deployment = clusters.apps(MEMBER).read_namespaced_deployment("web", namespace)
    assert deployment.spec.replicas == 3
    assert deployment.metadata.labels[names.SPREAD_LABEL] == "web"

    # The agent has seen its pods (its counts say so) before the coordinator goes away.
    standin.wait_message(MEMBER, "pod_counts", timeout=WAIT, where=web_counts(namespace))
    # Each pod was born with its subset's deletion cost (the webhook's patch, in the ReplicaSet
    # controller's create), so the agent's round that counted them (costs are written before counts
    # are sent) patched none: no manager but the creator owns the field (1.20 attributes a
    # webhook's additions to nobody; later versions to the creator).
    cost_field = f"f:{names.DELETION_COST_ANNOTATION}"
    for item in web_pods(clusters, namespace):
        assert item.metadata.annotations[names.DELETION_COST_ANNOTATION] == \
            {"a": "200", "b": "100"}[item.metadata.annotations[names.SUBSET_ANNOTATION]]
        owners = {entry.manager for entry in item.metadata.managed_fields or []
                  if cost_field in json.dumps(entry.fields_v1 or {})}
        assert owners <= {"kube-controller-manager"}, (item.metadata.name, owners)

    # The coordinator goes away: fail static, and the webhook keeps placing new pods.
    standin.stop()
    wait_for(lambda: agent.metric("fedspread_agent_fail_static") == 1.0, timeout=WAIT,
             message=lambda: f"the agent never reported fail static; log:\n{agent.output()}")
    victim = next(p for p in web_pods(clusters, namespace)
                  if p.metadata.annotations.get(names.SUBSET_ANNOTATION) == "b")
    clusters.core(MEMBER).delete_namespaced_pod(victim.metadata.name, namespace, grace_period_seconds=0)

    def replaced() -> bool:
        pods = web_pods(clusters, namespace)
        names = {p.metadata.name for p in pods}
        return victim.metadata.name not in names and subsets_of(pods) == {"a": 2, "b": 1}
    wait_for(replaced, timeout=WAIT, message=lambda: (
        f"no replacement placed while fail static: {subsets_of(web_pods(clusters, namespace))}"
        f"\n{agent.decisions()}"))

    # The coordinator comes back on the same port: reconnect and full resync.
    mark = standin.mark(MEMBER)
    standin.start()
    hello = standin.wait_message(MEMBER, "hello", since=mark, timeout=WAIT)
    assert [(a.spread, a.generation) for a in hello.applied] == [(f"{namespace}/web", 2)]
    inventory = standin.wait_message(MEMBER, "inventory", since=mark, timeout=WAIT)
    assert inventory.full and inventory.sequence == 1 and inventory.node_pools

    standin.wait_message(MEMBER, "pod_counts", since=mark, timeout=WAIT, where=web_counts(namespace))
    wait_for(lambda: agent.metric("fedspread_agent_link_connected") == 1.0, timeout=WAIT,
             message="the agent never reported the link up again")
    assert agent.output().count("coordinator unreachable; enforcing last quotas (fail static)") == 1

    assert agent.stop() == 0
    with pytest.raises(ApiException) as gone:
        clusters.admission(MEMBER).read_mutating_webhook_configuration(agent.webhook_name)
    assert gone.value.status == 404, "--deregister-on-exit removes the registration"
    assert "Traceback" not in agent.output()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FEDSPREAD, "agent", "--insecure", *args], capture_output=True, text=True,
                          timeout=60, check=False)


def test_startup_errors_are_one_line(sandbox: state.SandboxState, tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("this: [is not a kubeconfig")
    result = run_cli("--cluster", MEMBER, "--kubeconfig", str(bad), "--coordinator", "127.0.0.1:1")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "error: cannot use kubeconfig" in result.stderr

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("--cluster", MEMBER, "--kubeconfig", member_kubeconfig(sandbox),
                         "--coordinator", "127.0.0.1:1", "--webhook-port", str(port), "--metrics-port", "0",
                         "--no-register-webhook")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"error: webhook port {port}:" in result.stderr

    result = run_cli("--cluster", MEMBER, "--kubeconfig", str(bad), "--coordinator", "nowhere")
    assert result.returncode == 2 and "is not HOST:PORT" in result.stderr


def adaptive_assignment(namespace: str, *, replicas: int) -> assignment.Assignment:
    """Spread `namespace/web`, Adaptive: subset "big" asks 64 cpu per pod (fits no node), then "small"."""
    labels = {"app": "web"}
    container = {"name": "app", "image": "registry.example/app:1", "resources": {"requests": {"cpu": "10m"}}}
    template = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": namespace, "labels": labels},
                "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}
    big = assignment.SubsetRule(name="big", index=0, quota=2, patch={"spec": {"containers": [
        {"name": "app", "resources": {"requests": {"cpu": "64"}}}]}})
    small = zone_rule("small", 1, 2, f"{MEMBER}-b")
    return assignment.Assignment(
        spread=f"{namespace}/web", generation=1, namespace=namespace, workload="web",
        replicas=replicas, template=template, template_revision="t1", subsets=(big, small), subset_count=2,
        strategy=assignment.Strategy(type="Adaptive", reschedule_critical_seconds=3,
                                     unschedulable_seconds=12))


def probe_subset(clusters: Clusters, namespace: str) -> str | None:
    """The subset the webhook gives a new pod of the spread right now (dry-run: nothing recorded)."""
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "probe", "labels": {names.SPREAD_LABEL: "web", "app": "probe"}},
           "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}
    created = clusters.core(MEMBER).create_namespaced_pod(namespace, pod, dry_run="All")
    return (created.metadata.annotations or {}).get(names.SUBSET_ANNOTATION)


def test_adaptive_reschedule_moves_stuck_pods_to_the_next_subset(
        agent: AgentProcess, standin: standin_coordinator.StandinCoordinator, clusters: Clusters,
        namespace: str) -> None:
    standin.wait_message(MEMBER, "hello", timeout=WAIT)
    standin.assign(MEMBER, adaptive_assignment(namespace, replicas=0))
    standin.wait_message(MEMBER, "ack", timeout=WAIT, where=lambda a: not a.error)
    wait_for(lambda: probe_subset(clusters, namespace) == "big", timeout=WAIT,
             message=lambda: f"the apiserver never called the agent's webhook; agent log:\n{agent.output()}")

    mark = standin.mark(MEMBER)
    standin.assign(MEMBER, dataclasses.replace(adaptive_assignment(namespace, replicas=2), generation=2))

    # Pods first go to "big", stay Pending/Unschedulable, are deleted after rescheduleCriticalSeconds
    # and come back in "small", where they run.
    def settled_in_small() -> bool:
        pods = web_pods(clusters, namespace)
        return subsets_of(pods) == {"small": 2} and all(p.status.phase == "Running" for p in pods)
    wait_for(settled_in_small, timeout=WAIT, message=lambda: (
        f"pods by subset: {subsets_of(web_pods(clusters, namespace))}\n{agent.decisions()}"))
    report = standin.wait_message(MEMBER, "unschedulable", since=mark, timeout=WAIT)
    assert (report.spread, report.subset) == (f"{namespace}/web", "big")
    assert report.pod_count >= 1
    assert probe_subset(clusters, namespace) == "small", "the subset stays marked for unschedulableSeconds"

    # After unschedulableSeconds the mark expires and "big" takes new pods again.
    wait_for(lambda: probe_subset(clusters, namespace) == "big", timeout=WAIT,
             message="subset big never became usable again after unschedulableSeconds")


def web_workload(namespace: str, *, ready: int) -> Any:
    """A predicate on PodCountsReports: spread `namespace/web` reports its member Deployment with
    `ready` ready replicas."""
    def holds(report: Any) -> bool:
        web = [s for s in report.spreads if s.spread == f"{namespace}/web"]
        if not web or not web[0].HasField("workload"):
            return False
        # The Deployment's status and the pod counts come from two watches: wait until both agree.
        workload = web[0].workload
        settled = (workload.replicas, workload.updated_replicas, workload.available_replicas,
                   workload.unavailable_replicas) == (ready, ready, ready, 0)
        return workload.ready_replicas == ready and settled and \
            sum(s.counts.ready for s in web[0].subsets) == ready
    return holds


def test_pod_counts_carry_the_member_deployment_status(
        agent: AgentProcess, standin: standin_coordinator.StandinCoordinator, clusters: Clusters,
        namespace: str) -> None:
    standin.wait_message(MEMBER, "hello", timeout=WAIT)
    standin.assign(MEMBER, web_assignment(namespace, generation=1, replicas=0))
    standin.wait_message(MEMBER, "ack", timeout=WAIT, where=lambda a: a.generation == 1 and not a.error)
    wait_for(lambda: webhook_answers(clusters, namespace), timeout=WAIT,
             message=lambda: f"the apiserver never called the agent's webhook; agent log:\n{agent.output()}")

    mark = standin.mark(MEMBER)
    standin.assign(MEMBER, web_assignment(namespace, generation=2, replicas=3))
    report = standin.wait_message(MEMBER, "pod_counts", since=mark, timeout=WAIT,
                                  where=web_workload(namespace, ready=3))
    web = next(s for s in report.spreads if s.spread == f"{namespace}/web")
    assert web.generation == 2
    assert sum(s.counts.ready for s in web.subsets) == 3, "the member Deployment's pods are the spread's"

    live = clusters.apps(MEMBER).read_namespaced_deployment("web", namespace)
    assert live.status.ready_replicas == 3
    assert (web.workload.replicas, web.workload.updated_replicas, web.workload.available_replicas,
            web.workload.unavailable_replicas) == (3, 3, 3, 0)
    assert web.workload.observed_generation == live.metadata.generation == live.status.observed_generation

    # Every report since the scale carried the Deployment, never more ready replicas than exist.
    # (Whether one arrived before all three were Ready depends on timing, so it is not asserted.)
    earlier = [s.workload.ready_replicas for m in standin.messages(MEMBER, "pod_counts", since=mark)
               for s in m.pod_counts.spreads if s.spread == f"{namespace}/web" and s.HasField("workload")]
    assert earlier and all(0 <= ready <= 3 for ready in earlier), f"ready replicas reported: {earlier}"
