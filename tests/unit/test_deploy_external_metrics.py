"""deploy/external-metrics renders the coordinator plus exactly what the external metrics API needs.

Rendered with the build's kustomize (`manifests.render`), compared with its sources of truth: the
APIService names the group and version the server serves (`services.external_metrics`) and the
Service named once in `federation.api.names`; the Service reaches the port the coordinator's flag
opens, on the leader only; the RBAC is the delegated authentication every aggregated API server
has, with the kube-system RoleBinding kept in kube-system; the flags parse as the real command
parses them; and the README's caBundle overlay adds the CA to the APIService and nothing else.
"""

from __future__ import annotations

import base64
import pathlib
from collections.abc import Sequence
from typing import Any

import pytest
import yaml

from federation.api import names
from federation.cli import coordinator as coordinator_cli
from federation.coordinator.services import external_metrics
from federation.core import usage as usage_rules
from tests.support.manifests import DEPLOY, hub_overlay, readme_blocks, render

Doc = dict[str, Any]
NAMESPACE = names.COORDINATOR_NAMESPACE


@pytest.fixture(scope="module")
def docs() -> list[Doc]:
    return render(DEPLOY / "external-metrics")


def one(docs: Sequence[Doc], kind: str, name: str) -> Doc:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def key(doc: Doc) -> tuple[str, str, str | None]:
    return doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace")


def test_it_is_the_coordinator_plus_six_objects(docs: list[Doc]) -> None:
    base = {key(d) for d in render(DEPLOY / "coordinator")}
    added = {key(d) for d in docs} - base
    assert added == {
        ("Service", names.EXTERNAL_METRICS_SERVICE, NAMESPACE),
        ("APIService", f"{external_metrics.VERSION}.{external_metrics.GROUP}", None),
        ("ClusterRoleBinding", "fedspread-coordinator:system:auth-delegator", None),
        ("RoleBinding", "fedspread-coordinator-authentication-reader", "kube-system"),
        ("ClusterRole", "fedspread-external-metrics-reader", None),
        ("ClusterRoleBinding", "fedspread-external-metrics-reader:horizontal-pod-autoscaler", None),
    }
    assert all(d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "fedspread" for d in docs)


def test_the_apiservice_points_at_the_service(docs: list[Doc]) -> None:
    spec = one(docs, "APIService", f"{external_metrics.VERSION}.{external_metrics.GROUP}")["spec"]
    assert (spec["group"], spec["version"]) == (external_metrics.GROUP, external_metrics.VERSION)
    assert spec["service"] == {"name": names.EXTERNAL_METRICS_SERVICE, "namespace": NAMESPACE, "port": 443}
    assert not spec.get("insecureSkipTLSVerify"), "the aggregator checks the coordinator's certificate"
    assert spec["groupPriorityMinimum"] > 0 and spec["versionPriority"] > 0


def test_the_service_reaches_the_flag_port_on_the_leader(docs: list[Doc]) -> None:
    deployment = one(docs, "Deployment", "fedspread-coordinator")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    (main,) = [c for c in containers if c["name"] == "coordinator"]
    context = coordinator_cli.coordinator_command.make_context("coordinator", list(main["args"]))
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    service = one(docs, "Service", names.EXTERNAL_METRICS_SERVICE)
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443 and ports[port["targetPort"]] == context.params["external_metrics_port"] > 0
    assert str(context.params["external_metrics_cert"]) == str(context.params["webhook_cert"])
    selector = dict(service["spec"]["selector"])
    assert selector.pop(names.LEADER_LABEL) == "true", "the leader only: a standby serves nothing"
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_delegated_authentication_rbac(docs: list[Doc]) -> None:
    subject = [{"kind": "ServiceAccount", "name": "fedspread-coordinator", "namespace": NAMESPACE}]
    delegator = one(docs, "ClusterRoleBinding", "fedspread-coordinator:system:auth-delegator")
    assert delegator["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                    "name": "system:auth-delegator"}
    reader = one(docs, "RoleBinding", "fedspread-coordinator-authentication-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                 "name": "extension-apiserver-authentication-reader"}
    assert delegator["subjects"] == reader["subjects"] == subject


def test_the_hpa_controller_may_list_every_served_metric(docs: list[Doc]) -> None:
    role = one(docs, "ClusterRole", "fedspread-external-metrics-reader")
    assert role["rules"] == [{"apiGroups": [external_metrics.GROUP],
                              "resources": list(usage_rules.SERVED_METRICS), "verbs": ["get", "list"]}]
    binding = one(docs, "ClusterRoleBinding", "fedspread-external-metrics-reader:horizontal-pod-autoscaler")
    assert binding["roleRef"]["name"] == "fedspread-external-metrics-reader"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "horizontal-pod-autoscaler",
                                    "namespace": "kube-system"}]


def test_the_readme_overlay_sets_the_apiservice_ca(tmp_path: pathlib.Path) -> None:
    ca = b"-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n"
    bundle = base64.b64encode(ca).decode("ascii")
    blocks = [(name, body.replace("<base64 -w0 ca.crt>", bundle))
              for name, body in readme_blocks("deploy-external-metrics-file")]
    assert [name for name, _ in blocks] == ["kustomization.yaml", "apiservice-ca.yaml"]
    overlay = hub_overlay(tmp_path, blocks)
    (tmp_path / "deploy" / "external-metrics").symlink_to(DEPLOY / "external-metrics")
    rendered = render(overlay)
    name = f"{external_metrics.VERSION}.{external_metrics.GROUP}"
    service = one(rendered, "APIService", name)
    assert base64.b64decode(service["spec"].pop("caBundle")) == ca
    source = (DEPLOY / "external-metrics" / "external-metrics.yaml").read_text()
    shipped = [d for d in yaml.safe_load_all(source) if d["kind"] == "APIService"]
    assert service["spec"] == shipped[0]["spec"], "the patch only adds the caBundle"
