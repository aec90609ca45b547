"""The agent's webhook called by a real member apiserver over HTTPS (DESIGN §4, issue 4 item 3).

Each test runs the real `WebhookServer` on 127.0.0.1 with a certificate from our CA, registers it in
member-1 with the agent's own `registration.configuration` (a `url` clientConfig, DESIGN §7a;
narrowed to the test's namespace so that tests stay apart), waits until the apiserver really calls
it, and checks what the apiserver stored:

* a Deployment under a spread with two subsets over two node pools: every pod carries the subset's
  affinity, tolerations, patch and annotation, and runs on a node of the subset's zone;
* 50 concurrent pod creations against quotas 30/20: exactly 30 and 20 annotations, and the
  bookkeeping never counted more than a quota at any moment;
* DELETE and eviction of an assigned pod land in deletingPods;
* the registration the apiserver holds is the one DESIGN §4 asks for, and re-applying it works.
"""

from __future__ import annotations

import collections
import itertools
import pathlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Clusters
from kubernetes import client, config
from waiting import wait_for

from agents import bookkeeping, metrics
from agents.webhook import handler, registration, server
from federation.api import names
from federation.certs import pki
from federation.rpc import assignment

MEMBER = "member-1"
ZONE = "topology.kubernetes.io/zone"
WAIT = 90.0  # generous: the sandbox shares 2 cores with other work
PROBE = "probe"
IMAGE = "registry.example/app:1.0"


def zone_rule(name: str, index: int, quota: int, zone: str, **extra: Any) -> assignment.SubsetRule:
    """A subset pinned to one zone of member-1."""
    return assignment.SubsetRule(
        name=name, index=index, quota=quota,
        required_term={"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}, **extra)


def spread_assignment(namespace: str, name: str, *rules: assignment.SubsetRule) -> assignment.Assignment:
    """This cluster's assignment of spread `namespace/name`."""
    return assignment.Assignment(
        spread=f"{namespace}/{name}", generation=1, namespace=namespace, workload=name,
        replicas=sum(r.quota for r in rules), template={}, template_revision="", subsets=tuple(rules),
        subset_count=len(rules))


def bare_pod(name: str, spread: str) -> dict[str, Any]:
    """A pod of `spread`, requesting nothing."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {names.SPREAD_LABEL: spread, "app": spread}},
            "spec": {"containers": [{"name": "app", "image": IMAGE}]}}


class Agent:
    """The webhook part of an agent for one test namespace, registered in member-1."""

    def __init__(self, clusters: Clusters, namespace: str, directory: pathlib.Path) -> None:
        self.clusters = clusters
        self.namespace = namespace
        self.book = bookkeeping.Bookkeeping()
        self.metrics = metrics.AgentMetrics(cluster=MEMBER)
        self.ca = pki.CertificateAuthority.create("agent-webhook-ca")
        cert, key = self.ca.issue_server("fedspread-agent", ips=("127.0.0.1",)).write(directory, "webhook")
        self.server = server.WebhookServer(handler.AdmissionHandler(self.book, self.metrics),
                                           host="127.0.0.1", port=0, cert_file=cert, key_file=key)
        self.config_name = f"fedspread-agent-{namespace}"
        self.configuration: dict[str, Any] = {}
        probes = zone_rule("any", 0, 10_000, f"{MEMBER}-c")
        self.book.set_assignment(spread_assignment(namespace, PROBE, probes))
        self._probes = itertools.count()

    def start(self) -> None:
        """Serve, register, and wait until the apiserver really calls the webhook."""
        self.server.start()
        selector = {"matchLabels": {"fedspread-test/webhook": self.namespace}}
        self.clusters.core(MEMBER).patch_namespace(self.namespace,
                                                   {"metadata": {"labels": selector["matchLabels"]}})
        self.configuration = registration.configuration(
            registration.url_client_config(self.server.url(), ca_pem=self.ca.cert_pem),
            name=self.config_name, namespace_selector=selector)
        registration.apply_registration(self.clusters.api(MEMBER), self.configuration)
        wait_for(self._probe, timeout=WAIT,
                 message="the member-1 apiserver never called the registered webhook for a probe pod")

    def _probe(self) -> bool:
        # ~1 s passes between registering a webhook and the apiserver calling it (DESIGN §7a).
        core = self.clusters.core(MEMBER)
        name = f"probe-{next(self._probes)}"
        created = core.create_namespaced_pod(self.namespace, bare_pod(name, PROBE))
        core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
        if names.SUBSET_ANNOTATION in (created.metadata.annotations or {}):
            return True
        time.sleep(0.5)
        return False

    def stop(self) -> None:
        """Unregister, then stop serving."""
        try:
            registration.remove_registration(self.clusters.api(MEMBER), self.config_name)
        finally:
            self.server.stop()

    def spread(self, name: str) -> str:
        """The bookkeeping key of spread `name` in the test namespace."""
        return f"{self.namespace}/{name}"


@pytest.fixture
def agent(clusters: Clusters, namespace: str, tmp_path: pathlib.Path) -> Iterator[Agent]:
    """A registered, serving webhook for the test namespace; unregistered afterwards."""
    running = Agent(clusters, namespace, tmp_path)
    try:
        running.start()
        yield running
    finally:
        running.stop()


def _annotation(pod: Any) -> str | None:
    return (pod.metadata.annotations or {}).get(names.SUBSET_ANNOTATION)


def test_deployment_pods_get_their_subset_and_land_in_its_pool(agent: Agent, clusters: Clusters) -> None:
    toleration = {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}
    patch = {"metadata": {"labels": {"pool": "zone-a"}},
             "spec": {"containers": [{"name": "app", "env": [{"name": "POOL", "value": "zone-a"}]}]}}
    agent.book.set_assignment(spread_assignment(
        agent.namespace, "web",
        zone_rule("zone-a", 0, 2, f"{MEMBER}-a", tolerations=(toleration,), patch=patch),
        zone_rule("zone-b", 1, 2, f"{MEMBER}-b")))
    labels = {names.SPREAD_LABEL: "web", "app": "web"}
    clusters.apps(MEMBER).create_namespaced_deployment(agent.namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "app", "image": IMAGE}]}}}})
    core = clusters.core(MEMBER)

    def running() -> list[Any] | None:
        pods = core.list_namespaced_pod(agent.namespace, label_selector="app=web").items
        done = [p for p in pods if p.status.phase == "Running" and p.spec.node_name]
        return done if len(done) == 4 and len(pods) == 4 else None

    pods = wait_for(running, timeout=WAIT, message=lambda: "4 Running pods of the Deployment; saw " + str(
        [(p.metadata.name, p.status.phase, _annotation(p)) for p in
         core.list_namespaced_pod(agent.namespace, label_selector="app=web").items]))
    zones = {n.metadata.name: n.metadata.labels[ZONE] for n in core.list_node().items}
    by_subset = collections.defaultdict(list)
    for pod in pods:
        by_subset[_annotation(pod)].append(pod)
    assert {s: len(p) for s, p in by_subset.items()} == {"zone-a": 2, "zone-b": 2}

    for subset, zone in (("zone-a", f"{MEMBER}-a"), ("zone-b", f"{MEMBER}-b")):
        for pod in by_subset[subset]:
            terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
            expressions = [(e.key, e.operator, e.values) for t in terms.node_selector_terms
                           for e in t.match_expressions]
            assert expressions == [(ZONE, "In", [zone])], pod.metadata.name
            assert zones[pod.spec.node_name] == zone, f"{pod.metadata.name} runs on {pod.spec.node_name}"
            own_tolerations = [t for t in pod.spec.tolerations or [] if t.key == "dedicated"]
            env = pod.spec.containers[0].env or []
            if subset == "zone-a":
                assert [(t.key, t.operator, t.value, t.effect) for t in own_tolerations] == [
                    ("dedicated", "Equal", "web", "NoSchedule")]
                assert pod.metadata.labels["pool"] == "zone-a"
                assert [(e.name, e.value) for e in env] == [("POOL", "zone-a")]
            else:
                assert own_tolerations == [] and "pool" not in pod.metadata.labels and env == []

    creating, _ = agent.book.pending_entries(agent.spread("web"))
    assert {n: e.subset for n, e in creating.items()} == {p.metadata.name: _annotation(p) for p in pods}, \
        "the names the webhook generated are the names the apiserver stored"
    assert agent.metrics.decision_count(spread=agent.spread("web"), subset="zone-a",
                                        outcome=metrics.ASSIGNED) == 2


def _burst_client(clusters: Clusters) -> client.ApiClient:
    """An ApiClient whose connection pool holds a whole burst."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=clusters.sandbox.cluster(MEMBER).kubeconfig,
                            client_configuration=configuration)
    configuration.connection_pool_maxsize = 64
    return client.ApiClient(configuration)


def test_a_burst_of_concurrent_creates_never_exceeds_the_quotas(agent: Agent, clusters: Clusters) -> None:
    agent.book.set_assignment(spread_assignment(
        agent.namespace, "burst", zone_rule("a", 0, 30, f"{MEMBER}-a"), zone_rule("b", 1, 20, f"{MEMBER}-b")))
    key = agent.spread("burst")
    core = client.CoreV1Api(_burst_client(clusters))
    workers, start = 50, threading.Barrier(50)
    created: list[Any] = []
    failures: list[BaseException] = []
    peaks: collections.Counter[str] = collections.Counter()
    finished = threading.Event()
    lock = threading.Lock()

    def create(k: int) -> None:
        try:
            start.wait()
            pod = core.create_namespaced_pod(agent.namespace, bare_pod(f"burst-{k}", "burst"))
            with lock:
                created.append(pod)
        except BaseException as error:  # reported by the assertion below
            with lock:
                failures.append(error)

    def watch_counts() -> None:
        while not finished.is_set():
            creating, _ = agent.book.pending_entries(key)
            for subset, count in collections.Counter(e.subset for e in creating.values()).items():
                peaks[subset] = max(peaks[subset], count)

    monitor = threading.Thread(target=watch_counts, name="quota-monitor")
    monitor.start()
    threads = [threading.Thread(target=create, args=(k,)) for k in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    finished.set()
    monitor.join()

    assert not failures, failures[:3]
    assert collections.Counter(_annotation(p) for p in created) == {"a": 30, "b": 20}
    stored = core.list_namespaced_pod(agent.namespace, label_selector=f"{names.SPREAD_LABEL}=burst")
    assert collections.Counter(_annotation(p) for p in stored.items) == {"a": 30, "b": 20}
    assert peaks["a"] <= 30 and peaks["b"] <= 20, f"bookkeeping counted {dict(peaks)}"
    creating, _ = agent.book.pending_entries(key)
    assert collections.Counter(e.subset for e in creating.values()) == {"a": 30, "b": 20}


def test_delete_and_eviction_of_assigned_pods_land_in_deleting(agent: Agent, clusters: Clusters) -> None:
    agent.book.set_assignment(spread_assignment(
        agent.namespace, "web", zone_rule("a", 0, 1, f"{MEMBER}-a"), zone_rule("b", 1, 5, f"{MEMBER}-b")))
    core = clusters.core(MEMBER)
    first = core.create_namespaced_pod(agent.namespace, bare_pod("web-0", "web"))
    second = core.create_namespaced_pod(agent.namespace, bare_pod("web-1", "web"))
    assert (_annotation(first), _annotation(second)) == ("a", "b")
    key = agent.spread("web")
    assert agent.book.pending_entries(key)[1] == {}

    core.delete_namespaced_pod("web-0", agent.namespace)  # admission runs before the call returns
    assert {n: e.subset for n, e in agent.book.pending_entries(key)[1].items()} == {"web-0": "a"}
    core.create_namespaced_pod_eviction("web-1", agent.namespace, {
        "apiVersion": "policy/v1beta1", "kind": "Eviction",
        "metadata": {"name": "web-1", "namespace": agent.namespace}})
    _, deleting = agent.book.pending_entries(key)
    assert {n: e.subset for n, e in deleting.items()} == {"web-0": "a", "web-1": "b"}
    assert agent.metrics.decision_count(spread=key, subset="b", outcome=metrics.DELETING) >= 1


def test_the_apiserver_holds_the_registration_the_design_asks_for(agent: Agent, clusters: Clusters) -> None:
    registration.apply_registration(clusters.api(MEMBER), agent.configuration)  # again: replaced, not 409
    stored = clusters.admission(MEMBER).read_mutating_webhook_configuration(agent.config_name)
    hooks = {h.name: h for h in stored.webhooks}
    assert set(hooks) == {registration.PODS_WEBHOOK, registration.EVICTIONS_WEBHOOK}
    for hook in hooks.values():
        assert (hook.failure_policy, hook.timeout_seconds, hook.side_effects) == ("Ignore", 2, "None")
        assert hook.admission_review_versions == ["v1"] and hook.reinvocation_policy == "Never"
        assert hook.client_config.url == agent.server.url()
    pods, evictions = hooks[registration.PODS_WEBHOOK], hooks[registration.EVICTIONS_WEBHOOK]
    assert [(r.operations, r.resources) for r in pods.rules] == [(["CREATE", "DELETE"], ["pods"])]
    assert [(e.key, e.operator) for e in pods.object_selector.match_expressions] == [
        (names.SPREAD_LABEL, "Exists")]
    assert [(r.operations, r.resources) for r in evictions.rules] == [(["CREATE"], ["pods/eviction"])]
    assert not evictions.object_selector.match_expressions and not evictions.object_selector.match_labels
