"""The sandbox behaves like real Kubernetes where fedspread depends on it.

What is tested, on the session sandbox (hub + member-1 + member-2, 3 simulated nodes each):

* the hub serves fedspread's CRDs, accepts valid FederatedSpreads and MemberClusters, and its
  apiserver (not our code) rejects invalid ones with 422 from the CRD schema; status is a real
  subresource;
* in a member, a Deployment's pods are scheduled onto simulated nodes and become Running and Ready,
  and scaling down really removes pods (the node simulator completes deletions);
* a pod that fits no node stays Pending with PodScheduled=False/Unschedulable — the signal the
  Adaptive strategy's rescheduling relies on;
* a mutating webhook registered by URL is really called by a member apiserver for pod CREATE and
  its JSONPatch is applied — how fedspread's agent injects subset settings;
* clusters are isolated: objects and nodes of one member are invisible to the other and the hub.

Why: every later integration test (agent, coordinator, demo) trusts these behaviours; if the
sandbox fakes any of them, those tests prove nothing.
"""

from __future__ import annotations

import base64
import copy
import http.server
import json
import pathlib
import re
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import Clusters
from kubernetes.client.exceptions import ApiException
from waiting import wait_for

from federation.certs import pki

GROUP, VERSION = "fedspread.io", "v1alpha1"
SPREADS, MEMBER_CLUSTERS = "federatedspreads", "memberclusters"
WAIT = 60.0  # generous: the sandbox shares 2 cores with builds and other tests


def _status_code(call: Callable[[], Any]) -> int:
    """The HTTP status of an API call that is expected to fail (0 if it succeeded)."""
    try:
        call()
    except ApiException as error:
        return int(error.status)
    return 0


def _pod(name: str, *, labels: dict[str, str] | None = None, cpu: str = "100m") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                 "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
    }


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    template = _pod(name)
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": template["metadata"], "spec": template["spec"]}},
    }


# --------------------------------------------------------------------------------------------
# 1. CRDs in the hub
# --------------------------------------------------------------------------------------------


def valid_spread(name: str) -> dict[str, Any]:
    """A realistic FederatedSpread: a pinned cluster first, then a region by label."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "FederatedSpread",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "subsets": [
                {"name": "pinned", "clusters": ["member-1"], "maxReplicas": 3},
                {"name": "region-eu",
                 "clusterSelector": {"matchLabels": {"topology.fedspread.io/region": "eu"}},
                 "clusterSpread": "Balance", "maxReplicas": "50%",
                 "patch": {"metadata": {"labels": {"fedspread.io/tier": "overflow",
                                                   "cost-center": "eu-batch"}}}},
            ],
            "scheduleStrategy": {"type": "Adaptive",
                                 "adaptive": {"rescheduleCriticalSeconds": 30,
                                              "unschedulableSeconds": 300}},
            "failover": {"clusterLostSeconds": 60},
            "deletionPolicy": "Orphan",
            "propagateDependencies": True,
        },
    }


def test_hub_serves_fedspread_resources(clusters: Clusters) -> None:
    resources = clusters.custom("hub").get_api_resources(GROUP, VERSION)
    by_name = {r.name: r for r in resources.resources}
    assert {SPREADS, f"{SPREADS}/status", MEMBER_CLUSTERS, f"{MEMBER_CLUSTERS}/status"} <= set(by_name), \
        f"hub serves {sorted(by_name)} under {GROUP}/{VERSION}"
    assert by_name[SPREADS].namespaced and by_name[SPREADS].kind == "FederatedSpread"
    assert not by_name[MEMBER_CLUSTERS].namespaced and by_name[MEMBER_CLUSTERS].kind == "MemberCluster"


def test_valid_federated_spread_is_accepted_and_reads_back(clusters: Clusters, namespace: str) -> None:
    api = clusters.custom("hub")
    body = valid_spread("web")
    created = api.create_namespaced_custom_object(GROUP, VERSION, namespace, SPREADS, body)
    try:
        assert created["metadata"]["uid"]
        stored = api.get_namespaced_custom_object(GROUP, VERSION, namespace, SPREADS, "web")
        assert stored["spec"] == body["spec"], "the hub must store the spec exactly as sent (no pruning)"
        listed = api.list_namespaced_custom_object(GROUP, VERSION, namespace, SPREADS)
        assert [item["metadata"]["name"] for item in listed["items"]] == ["web"]
    finally:
        # The hub runs no namespace controller, so deleting the test namespace would leave this
        # spread behind for later tests that watch every namespace: delete it explicitly.
        api.delete_namespaced_custom_object(GROUP, VERSION, namespace, SPREADS, "web")


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation of a spread's spec: set the dotted `path` (ints index lists) to `value`."""
    def mutate(spec: dict[str, Any]) -> None:
        keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
        node: Any = spec
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return mutate


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    def mutate(spec: dict[str, Any]) -> None:
        del spec[key]
    return mutate


INVALID_SPREADS = [
    pytest.param(_set("scheduleStrategy.type", "Greedy"), "spec.scheduleStrategy.type",
                 id="strategy-type-not-in-enum"),
    pytest.param(_set("subsets.0.maxReplicas", True), "spec.subsets.maxReplicas",
                 id="maxReplicas-boolean"),
    pytest.param(_set("subsets.0.maxReplicas", {"count": 3}), "spec.subsets.maxReplicas",
                 id="maxReplicas-object"),
    pytest.param(_drop("targetRef"), "spec.targetRef", id="targetRef-missing"),
    pytest.param(_set("targetRef.kind", "DaemonSet"), "spec.targetRef.kind",
                 id="targetRef-kind-not-in-enum"),
    pytest.param(_set("failover.clusterLostSeconds", -5), "spec.failover.clusterLostSeconds",
                 id="clusterLostSeconds-negative"),
    pytest.param(_set("scheduleStrategy.adaptive.rescheduleCriticalSeconds", 0),
                 "spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds",
                 id="rescheduleCriticalSeconds-zero"),
    pytest.param(_set("subsets.0.name", "Pinned_EU"), "spec.subsets.name", id="subset-name-pattern"),
    pytest.param(_set("subsets", []), "spec.subsets", id="subsets-empty"),
]


@pytest.mark.parametrize(("mutate", "field"), INVALID_SPREADS)
def test_invalid_federated_spread_is_rejected_by_the_apiserver(
    clusters: Clusters, namespace: str, mutate: Callable[[dict[str, Any]], None], field: str,
) -> None:
    api = clusters.custom("hub")
    body = copy.deepcopy(valid_spread("bad"))
    mutate(body["spec"])
    with pytest.raises(ApiException) as caught:
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, SPREADS, body)
    assert caught.value.status == 422, f"expected 422 Invalid, got {caught.value.status}: {caught.value.body}"
    status = json.loads(caught.value.body)
    # The apiserver names the offending field; list indices are dropped so that both "subsets[0]"
    # and "subsets" spellings match.
    fields = [re.sub(r"\[\d+\]", "", cause.get("field", "")) for cause in status["details"]["causes"]]
    assert field in fields, f"422 should blame {field}; causes: {status['details']['causes']}"
    assert _status_code(lambda: api.get_namespaced_custom_object(
        GROUP, VERSION, namespace, SPREADS, "bad")) == 404, "a rejected spread must not be stored"


@pytest.fixture
def member_cluster_name(clusters: Clusters) -> Iterator[str]:
    """A unique MemberCluster name, deleted afterwards (MemberCluster is cluster-scoped)."""
    name = f"mc-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        clusters.custom("hub").delete_cluster_custom_object(GROUP, VERSION, MEMBER_CLUSTERS, name)
    except ApiException as error:
        if error.status != 404:
            raise


def test_the_hub_stores_the_defaults_that_decide_what_is_deleted_or_moved(
        clusters: Clusters, namespace: str) -> None:
    """A spread written without deletionPolicy, failover or scheduleStrategy reads back with them
    (the CRD's defaults, `structural.APISERVER_DEFAULTS`): `kubectl get -o yaml` says what deleting
    it does."""
    api = clusters.custom("hub")
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "FederatedSpread", "metadata": {"name": "bare"},
            "spec": {"targetRef": {"name": "web"}, "subsets": [{"name": "a", "clusters": ["member-1"]}]}}
    adaptive = {**body, "metadata": {"name": "adaptive"},
                "spec": {**body["spec"], "scheduleStrategy": {"type": "Adaptive", "adaptive": {}}}}
    try:
        for item in (body, adaptive):
            api.create_namespaced_custom_object(GROUP, VERSION, namespace, SPREADS, item)
        stored = api.get_namespaced_custom_object(GROUP, VERSION, namespace, SPREADS, "bare")["spec"]
        assert stored["deletionPolicy"] == "Orphan"
        assert stored["failover"] == {"clusterLostSeconds": 60}
        assert stored["scheduleStrategy"] == {"type": "Fixed"}
        stored = api.get_namespaced_custom_object(GROUP, VERSION, namespace, SPREADS, "adaptive")["spec"]
        assert stored["scheduleStrategy"] == {
            "type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 30, "unschedulableSeconds": 300}}
        assert stored["deletionPolicy"] == "Orphan"
    finally:
        for item in (body, adaptive):
            api.delete_namespaced_custom_object(GROUP, VERSION, namespace, SPREADS, item["metadata"]["name"])


def test_member_cluster_is_accepted_with_a_writable_status_subresource(
    clusters: Clusters, member_cluster_name: str,
) -> None:
    api = clusters.custom("hub")
    name = member_cluster_name
    body = {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "MemberCluster",
        "metadata": {"name": name, "labels": {"topology.fedspread.io/region": "eu"}},
        "spec": {"taints": [{"key": "fedspread.io/maintenance", "effect": "NoSchedule"}]},
        "status": {"agentVersion": "forged-on-create"},
    }
    created = api.create_cluster_custom_object(GROUP, VERSION, MEMBER_CLUSTERS, body)
    assert "namespace" not in created["metadata"], "MemberCluster is cluster-scoped"
    assert created["spec"] == body["spec"]
    assert "status" not in created, "with a status subresource, create must ignore status"

    status = {
        "agentVersion": "0.1.0",
        "lastHeartbeatTime": "2025-01-02T03:04:05Z",
        "capacity": {"nodes": 3, "allocatable": {"cpu": "12", "memory": "48Gi", "pods": "330"},
                     "requested": {"cpu": "1500m"}},
        "conditions": [{"type": "Ready", "status": "True", "reason": "AgentConnected",
                        "message": "agent heartbeats arrive", "lastTransitionTime": "2025-01-02T03:04:05Z"}],
    }
    # A status write carrying a spec change: the status subresource must keep only the status.
    api.patch_cluster_custom_object_status(GROUP, VERSION, MEMBER_CLUSTERS, name,
                                           {"status": status, "spec": {"taints": []}})
    stored = api.get_cluster_custom_object_status(GROUP, VERSION, MEMBER_CLUSTERS, name)
    assert stored["status"] == status
    assert stored["spec"] == body["spec"], "a status write must not change the spec"

    # The main resource ignores status, and the status subresource validates against the schema.
    api.patch_cluster_custom_object(GROUP, VERSION, MEMBER_CLUSTERS, name,
                                    {"status": {"agentVersion": "forged-on-patch"}})
    assert api.get_cluster_custom_object(GROUP, VERSION, MEMBER_CLUSTERS, name)["status"] == status
    invalid = {"status": {"conditions": [{"type": "Ready", "status": "Maybe"}]}}
    assert _status_code(lambda: api.patch_cluster_custom_object_status(
        GROUP, VERSION, MEMBER_CLUSTERS, name, invalid)) == 422


# --------------------------------------------------------------------------------------------
# 2./3. Pods in a member: Running and Ready on simulated nodes; Unschedulable when nothing fits
# --------------------------------------------------------------------------------------------


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _describe(pods: list[Any]) -> str:
    return "; ".join(
        f"{p.metadata.name} phase={p.status.phase} node={p.spec.node_name} ip={p.status.pod_ip} "
        f"ready={_ready(p)} deleting={p.metadata.deletion_timestamp is not None}" for p in pods
    ) or "no pods"


def test_deployment_pods_run_on_simulated_nodes_and_scale_down(clusters: Clusters, namespace: str) -> None:
    core, apps = clusters.core("member-1"), clusters.apps("member-1")
    nodes = {n.metadata.name for n in core.list_node().items}
    assert len(nodes) == 3, f"member-1 nodes: {sorted(nodes)}"
    apps.create_namespaced_deployment(namespace, _deployment("web", 4))

    def pods() -> list[Any]:
        return list(core.list_namespaced_pod(namespace, label_selector="app=web").items)

    def all_running() -> list[Any] | None:
        current = pods()
        ok = len(current) == 4 and all(
            p.status.phase == "Running" and _ready(p) and p.spec.node_name in nodes and p.status.pod_ip
            and p.metadata.deletion_timestamp is None for p in current)
        return current if ok else None

    running = wait_for(all_running, timeout=WAIT,
                       message=lambda: f"4 Running+Ready pods on member-1 nodes; saw {_describe(pods())}")
    assert len({p.status.pod_ip for p in running}) == 4, "every pod gets its own IP"
    wait_for(lambda: apps.read_namespaced_deployment_status("web", namespace).status.ready_replicas == 4,
             timeout=WAIT, message="Deployment web readyReplicas == 4")

    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 1}})
    wait_for(lambda: len(pods()) == 1, timeout=WAIT,
             message=lambda: f"scale to 1 leaves exactly one pod; saw {_describe(pods())}")
    remaining = pods()
    before = {p.metadata.name for p in running}
    assert remaining[0].metadata.name in before, "scaling down must not create pods"
    for gone in before - {remaining[0].metadata.name}:
        assert _status_code(lambda gone=gone: core.read_namespaced_pod(gone, namespace)) == 404, \
            f"deleted pod {gone} must really disappear"
    wait_for(lambda: (s := apps.read_namespaced_deployment_status("web", namespace).status).replicas == 1
             and s.ready_replicas == 1, timeout=WAIT,
             message="Deployment web reports replicas == readyReplicas == 1")


def test_pod_that_fits_no_node_stays_pending_unschedulable(clusters: Clusters, namespace: str) -> None:
    core = clusters.core("member-1")
    core.create_namespaced_pod(namespace, _pod("huge", cpu="64"))

    def unschedulable() -> Any:
        pod = core.read_namespaced_pod("huge", namespace)
        for condition in pod.status.conditions or []:
            if condition.type == "PodScheduled" and condition.status == "False" \
                    and condition.reason == "Unschedulable":
                return condition
        return None

    condition = wait_for(unschedulable, timeout=WAIT,
                         message=lambda: "PodScheduled=False/Unschedulable on pod huge; conditions: "
                                         f"{core.read_namespaced_pod('huge', namespace).status.conditions}")
    assert "Insufficient cpu" in (condition.message or ""), condition.message
    time.sleep(2)  # not a timing assertion: nothing may bind it in the meantime
    pod = core.read_namespaced_pod("huge", namespace)
    assert pod.status.phase == "Pending" and pod.spec.node_name is None, _describe([pod])


# --------------------------------------------------------------------------------------------
# 4. A mutating webhook registered by URL
# --------------------------------------------------------------------------------------------

MUTATED_LABEL = "fedspread.io/mutated-by"


class _AdmissionServer:
    """An HTTPS admission webhook on 127.0.0.1 that adds a label to every pod it is asked about."""

    def __init__(self, cert: pathlib.Path, key: pathlib.Path) -> None:
        self.reviews: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = review["request"]
                with outer.lock:
                    outer.reviews.append(request)
                labels = (request.get("object") or {}).get("metadata", {}).get("labels")
                if labels:  # JSON Pointer escapes "/" in a key as "~1"
                    patch = [{"op": "add", "value": "test-webhook",
                              "path": "/metadata/labels/" + MUTATED_LABEL.replace("/", "~1")}]
                else:
                    patch = [{"op": "add", "path": "/metadata/labels",
                              "value": {MUTATED_LABEL: "test-webhook"}}]
                answer = json.dumps({
                    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": request["uid"], "allowed": True, "patchType": "JSONPatch",
                                 "patch": base64.b64encode(json.dumps(patch).encode()).decode()},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        # Handshake in the request thread, not in the accept loop.
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True,
                                                 do_handshake_on_connect=False)
        self.port: int = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="admission", daemon=True)

    def __enter__(self) -> _AdmissionServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def seen(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.reviews)


def test_mutating_webhook_by_url_is_called_for_pod_create(
    clusters: Clusters, namespace: str, tmp_path: pathlib.Path,
) -> None:
    ca = pki.CertificateAuthority.create("webhook-test-ca")
    serving = ca.issue_server("webhook", dns_names=("localhost",), ips=("127.0.0.1",))
    cert, key = serving.write(tmp_path, "webhook")
    core, admission = clusters.core("member-1"), clusters.admission("member-1")
    core.patch_namespace(namespace, {"metadata": {"labels": {"fedspread-test/webhook": namespace}}})
    config_name = f"{namespace}-label-pods"

    with _AdmissionServer(cert, key) as server:
        admission.create_mutating_webhook_configuration({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": config_name},
            "webhooks": [{
                "name": "label-pods.test.fedspread.io",
                "clientConfig": {"url": f"https://127.0.0.1:{server.port}/mutate",
                                 "caBundle": base64.b64encode(ca.cert_pem).decode()},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["pods"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"fedspread-test/webhook": namespace}},
                "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail", "timeoutSeconds": 5,
            }],
        })
        try:
            attempts = iter(range(1000))

            def create_labelled_pod() -> Any:
                # The apiserver starts calling a new webhook ~1 s after it is registered (DESIGN
                # §7a); pods created before that are not mutated, so delete them and try again.
                name = f"probe-{next(attempts)}"
                pod = core.create_namespaced_pod(namespace, _pod(name))
                if (pod.metadata.labels or {}).get(MUTATED_LABEL) == "test-webhook":
                    return pod
                core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
                time.sleep(0.5)
                return None

            pod = wait_for(create_labelled_pod, timeout=30,
                           message=lambda: f"a pod labelled by the webhook; webhook saw {len(server.seen())} "
                                           "requests")
        finally:
            admission.delete_mutating_webhook_configuration(config_name)

        stored = core.read_namespaced_pod(pod.metadata.name, namespace)
        assert stored.metadata.labels[MUTATED_LABEL] == "test-webhook"
        assert stored.metadata.labels["app"] == pod.metadata.name, "the patch adds, it does not replace"
        matching = [r for r in server.seen() if r["object"]["metadata"]["name"] == pod.metadata.name]
        assert matching, f"the webhook never saw {pod.metadata.name}: {server.seen()}"
        request = matching[-1]
        assert request["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
        assert request["operation"] == "CREATE"
        assert request["namespace"] == namespace
        assert all(r["namespace"] == namespace for r in server.seen()), \
            "the namespaceSelector must keep other namespaces' pods away from the webhook"


# --------------------------------------------------------------------------------------------
# 5. Isolation between clusters
# --------------------------------------------------------------------------------------------


def test_members_and_hub_are_isolated(clusters: Clusters, namespace: str) -> None:
    clusters.core("member-1").create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}, "data": {"owner": "member-1"}})
    clusters.apps("member-1").create_namespaced_deployment(namespace, _deployment("only-in-m1", 1))
    stored = clusters.core("member-1").read_namespaced_config_map("settings", namespace)
    assert stored.data == {"owner": "member-1"}
    for other in ("member-2", "hub"):
        assert _status_code(lambda o=other: clusters.core(o).read_namespaced_config_map(
            "settings", namespace)) == 404, f"ConfigMap from member-1 visible in {other}"
        assert _status_code(lambda o=other: clusters.apps(o).read_namespaced_deployment(
            "only-in-m1", namespace)) == 404, f"Deployment from member-1 visible in {other}"

    wait_for(lambda: clusters.core("member-1").list_namespaced_pod(namespace).items, timeout=WAIT,
             message="the member-1 Deployment creates its pod in member-1")
    assert clusters.core("member-2").list_namespaced_pod(namespace).items == []

    node_names = {m: sorted(n.metadata.name for n in clusters.core(m).list_node().items)
                  for m in ("member-1", "member-2")}
    for member, names in node_names.items():
        assert len(names) == 3 and all(n.startswith(f"{member}-") for n in names), \
            f"{member} nodes: {names}"
    assert not set(node_names["member-1"]) & set(node_names["member-2"])
    assert clusters.core("hub").list_node().items == [], "the hub is an apiserver only: no nodes"
