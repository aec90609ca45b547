"""The external metrics API asks the sandbox hub's real RBAC who may read a metric.

The coordinator's server (`services.metrics_api`) on loopback, with a test front-proxy CA (the
aggregator's side is played by this test: its client certificate and `X-Remote-User` headers),
authorising with the coordinator's `SubjectAccessReviewer` against the shared sandbox's hub
apiserver (`--authorization-mode=RBAC`). A user with no rights gets 403; a user bound in one
namespace to a Role that lets it `list` the metric in `external.metrics.k8s.io` gets the list
there and 403 in another namespace; `system:masters` (the hub's admin) gets the list. The hub's
own `extension-apiserver-authentication` ConfigMap is read with the coordinator's reader. The stock
HPA controller may not list external metrics until deploy/external-metrics' ClusterRole binds it.
And a real `CoordinatorProcess` started with the settings serves it (401 without the front proxy).
"""

from __future__ import annotations

import pathlib
import urllib.parse
import uuid
from collections.abc import Iterator

import hubside
import pytest
import waiting
from conftest import Clusters
from kubernetes import client

from federation.coordinator.hub import access_review
from federation.coordinator.services import external_metrics as api
from federation.coordinator.services import front_proxy, metrics_api
from federation.coordinator.wire import access
from federation.core import usage as usage_rules
from federation.sandbox import state
from tests.support import metrics_api as support
from tests.support.manifests import DEPLOY, render

CPU = usage_rules.CPU_UTILIZATION
Served = tuple[metrics_api.ExternalMetricsServer, support.Certificates]


def path(namespace: str) -> str:
    return f"{api.ROOT}/namespaces/{namespace}/{CPU}?labelSelector=" + \
        urllib.parse.quote(f"{usage_rules.SPREAD_SELECTOR_LABEL}=web")


@pytest.fixture(scope="module")
def reader(clusters: Clusters) -> Iterator[tuple[str, str]]:
    """A user allowed to list the metric in a fresh hub namespace only: (user, namespace)."""
    namespace, user = f"t-{uuid.uuid4().hex[:10]}", f"hpa-reader-{uuid.uuid4().hex[:6]}"
    core, rbac = clusters.core(hubside.HUB), client.RbacAuthorizationV1Api(clusters.api(hubside.HUB))
    core.create_namespace({"metadata": {"name": namespace}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "metrics-reader"}, "rules": [
        {"apiGroups": [api.GROUP], "resources": [CPU], "verbs": ["list"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "metrics-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "metrics-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})
    yield user, namespace
    core.delete_namespace(namespace, propagation_policy="Background")


@pytest.fixture(scope="module")
def served(sandbox: state.SandboxState, clusters: Clusters, reader: tuple[str, str],
           tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Served]:
    certificates = support.Certificates.make(tmp_path_factory.mktemp("metrics-sar"))
    namespace = reader[1]
    source = support.StandInUsage({f"{namespace}/web": support.figures(), "other/web": support.figures()})
    authorizer = access_review.SubjectAccessReviewer(clusters.api(hubside.HUB),
                                                     ttl=metrics_api.SAR_TTL_SECONDS)
    running = support.start(certificates, source, authorizer, certificates.configmap())
    yield running, certificates
    running.stop()


def test_a_user_with_no_rights_gets_403(served: Served,
                                        reader: tuple[str, str]) -> None:
    server, certificates = served
    code, body = support.get(server.port, certificates, path(reader[1]),
                             client=certificates.front_proxy_client(),
                             user=f"nobody-{uuid.uuid4().hex[:6]}", groups=("system:authenticated",))
    assert code == 403, body
    assert body["reason"] == "Forbidden" and CPU in body["message"]


def test_a_bound_user_reads_its_namespace_only(
        served: Served, reader: tuple[str, str]) -> None:
    server, certificates = served
    user, namespace = reader
    proxy = certificates.front_proxy_client()
    code, body = support.get(server.port, certificates, path(namespace), client=proxy,
                             user=user, groups=("system:authenticated",))
    assert code == 200, body
    assert [item["metricLabels"] for item in body["items"]] == [{usage_rules.SPREAD_SELECTOR_LABEL: "web"}]
    code, body = support.get(server.port, certificates, path("other"), client=proxy,
                             user=user, groups=("system:authenticated",))
    assert code == 403, body


def test_the_hubs_admin_reads_everything(
        served: Served) -> None:
    server, certificates = served
    proxy = certificates.front_proxy_client()
    code, body = support.get(server.port, certificates, path("other"), client=proxy,
                             user="admin", groups=("system:masters", "system:authenticated"))
    assert code == 200, body
    assert len(body["items"]) == 1


def test_the_hubs_front_proxy_configmap_is_read(clusters: Clusters) -> None:
    data = front_proxy.configmap_reader(clusters.api(hubside.HUB))()
    assert "client-ca-file" in data, "the hub publishes its client CA in the ConfigMap"
    if data.get("requestheader-client-ca-file"):  # a hub with its aggregation layer configured
        assert front_proxy.parse(data).client_ca.startswith("-----BEGIN CERTIFICATE-----")
    else:
        with pytest.raises(front_proxy.TrustUnavailable, match="--requestheader-client-ca-file"):
            front_proxy.parse(data)


def test_the_hpa_controller_may_list_our_metrics_with_the_shipped_role(clusters: Clusters) -> None:
    """The hub's bootstrap ClusterRole system:controller:horizontal-pod-autoscaler does not let the
    HPA controller's service account list external.metrics.k8s.io; deploy/external-metrics'
    ClusterRole and its binding (applied here under unique names, removed after) do."""
    api_client = clusters.api(hubside.HUB)
    controller = access.User("system:serviceaccount:kube-system:horizontal-pod-autoscaler",
                             groups=("system:serviceaccounts", "system:serviceaccounts:kube-system",
                                     "system:authenticated"))
    question = access.Access(verb="list", resource=CPU, namespace="demo", group=api.GROUP)
    assert not access_review.SubjectAccessReviewer(api_client).allowed(controller, question), \
        "the stock role grants it: deploy/external-metrics' reader role is no longer needed"
    shipped = {doc["kind"]: doc for doc in render(DEPLOY / "external-metrics")
               if doc["metadata"]["name"].startswith("fedspread-external-metrics-reader")}
    suffix = uuid.uuid4().hex[:6]
    role, binding = shipped["ClusterRole"], shipped["ClusterRoleBinding"]
    role["metadata"] = {"name": f"{role['metadata']['name']}-{suffix}"}
    binding["metadata"] = {"name": f"{binding['metadata']['name']}-{suffix}"}
    binding["roleRef"]["name"] = role["metadata"]["name"]
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_cluster_role(role)
    try:
        rbac.create_cluster_role_binding(binding)
        try:
            fresh = access_review.SubjectAccessReviewer(api_client, ttl=0)
            assert waiting.wait_for(
                lambda: fresh.allowed(controller, question) or None, timeout=30,
                message="the shipped role never let the HPA controller list our metrics")
        finally:
            rbac.delete_cluster_role_binding(binding["metadata"]["name"])
    finally:
        rbac.delete_cluster_role(role["metadata"]["name"])


def test_the_users_extra_attributes_reach_the_hubs_access_review(clusters: Clusters) -> None:
    """A user the front proxy vouches for with extra attributes (`X-Remote-Extra-*`, e.g. a bound
    service account token's pod name): the real apiserver accepts the review and keeps them in
    its spec, and RBAC, which ignores them, answers as for the user without them."""
    api_client = clusters.api(hubside.HUB)
    user = access.User("admin", groups=("system:masters", "system:authenticated"),
                       extra=(("authentication.kubernetes.io/pod-name", ("hpa-0",)), ("scopes", ("a", "b"))))
    question = access.Access(verb="list", resource=CPU, namespace="demo", group=api.GROUP)
    review = client.AuthorizationV1Api(api_client).create_subject_access_review(
        access_review.review_body(user, question), _request_timeout=10)
    assert review.spec.extra == {"authentication.kubernetes.io/pod-name": ["hpa-0"], "scopes": ["a", "b"]}
    assert review.status.allowed is True
    stranger = access.User("nobody-" + uuid.uuid4().hex[:6], extra=(("scopes", ("a",)),))
    assert not access_review.SubjectAccessReviewer(api_client, ttl=0).allowed(stranger, question)


def test_the_coordinator_process_serves_it(sandbox: state.SandboxState, clusters: Clusters,
                                           tmp_path: pathlib.Path) -> None:
    """`CoordinatorProcess` with `external_metrics` settings (the `--external-metrics-port` flag)
    serves the API on the hub's front-proxy settings: a direct call without the front proxy's
    certificate gets 401, counted in its metrics; probes answer; it stops with the process."""
    certificates = support.Certificates.make(tmp_path)
    settings = metrics_api.ExternalMetricsSettings(cert_file=certificates.cert_file,
                                                   key_file=certificates.key_file, port=0, host="127.0.0.1")
    with hubside.running_coordinator(sandbox, clusters, members=[], use_ray=False,
                                     external_metrics=settings) as process:
        served = process.external_metrics
        assert served is not None
        code, body = support.get(served.port, certificates, path("default"), client=None,
                                 user="admin", groups=("system:masters",))
        assert code == 401 and body["kind"] == "Status", body
        assert process.metrics.value("external_metrics_requests_total", {"code": "401"}) == 1
        https = support.connection(served.port, certificates, None)
        try:
            https.request("GET", "/healthz")
            assert https.getresponse().status == 200
        finally:
            https.close()
    assert process.external_metrics is None
