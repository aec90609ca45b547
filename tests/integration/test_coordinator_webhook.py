"""The coordinator's validating webhook, called by the real hub apiserver over HTTPS.

A real `CoordinatorProcess` (in this process, placing without Ray) serves the webhook on
127.0.0.1 with a certificate from a test CA; the hub holds the coordinator's own
`registration.configuration` (a `url` clientConfig, narrowed to this module's namespace and to
objects labelled for it, so that other tests on the shared hub never meet it). Then, with the real
kubectl and the real apiserver:

* a spread with `maxReplicas: "140%"` and a duplicate subset name is refused, both problems with
  their field paths in kubectl's error, and nothing is stored;
* a valid spread is stored; a second spread of its Deployment is refused, naming the first;
* with the webhook server stopped, an invalid spread is stored (failurePolicy Ignore) and its
  Valid condition says what is wrong (the second line of defence);
* a malformed AdmissionReview POSTed to the server gets 400 with the reason.
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import hubside
import pytest
from conftest import Clusters
from kubernetes import client
from waiting import wait_for

from federation.api import spread as spread_api
from federation.certs import pki
from federation.coordinator import process as coordinator_main
from federation.coordinator.hub import admission, registration
from federation.kube import webhook_registration
from federation.sandbox import build, state

GROUP, VERSION = hubside.GROUP, hubside.VERSION
WAIT = 90.0  # generous: the sandbox shares 2 cores with other work
LABEL = "fedspread-test/coordinator-webhook"


class Door:
    """The coordinator with its webhook, registered in the hub for one namespace."""

    def __init__(self, process: coordinator_main.CoordinatorProcess, *, namespace: str,
                 ca: pki.CertificateAuthority, kubeconfig: str, custom: client.CustomObjectsApi) -> None:
        self.process = process
        self.namespace = namespace
        self.ca = ca
        self.kubeconfig = kubeconfig
        self.custom = custom

    def spread(self, name: str, *, target: str = "web", cap: int | str = 3,
               duplicate_name: bool = False) -> dict[str, Any]:
        """A FederatedSpread of this namespace, labelled for this module's webhook."""
        body = hubside.spread_body(name, target=target, subsets=[
            {"name": "onprem", "clusters": ["dc1"], "maxReplicas": cap},
            {"name": "onprem" if duplicate_name else "cloud", "clusters": ["aws"]}])
        body["metadata"].update(namespace=self.namespace, labels={LABEL: self.namespace})
        return body

    def kubectl_apply(self, body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        """`kubectl apply -f -` of `body` on the hub."""
        return subprocess.run([str(build.kubectl()), "--kubeconfig", self.kubeconfig, "apply", "-f", "-"],
                              input=json.dumps(body), capture_output=True, text=True, timeout=60)

    def stored(self, name: str) -> dict[str, Any] | None:
        """The spread as the hub stores it, None when absent."""
        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, spread_api.PLURAL, name)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    def refused_probe(self) -> bool:
        """Whether the apiserver calls the webhook yet (a dry-run create of an invalid spread)."""
        try:
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, spread_api.PLURAL,
                self.spread(f"probe-{uuid.uuid4().hex[:6]}", cap="140%"), dry_run="All")
        except client.ApiException as error:
            if "maxReplicas" in str(error.body):
                return True
            raise
        return False


@pytest.fixture(scope="module")
def door(sandbox: state.SandboxState, clusters: Clusters,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    core = clusters.core(hubside.HUB)
    core.create_namespace({"metadata": {"name": namespace, "labels": {LABEL: namespace}}})
    ca = pki.CertificateAuthority.create("coordinator-webhook-ca")
    cert, key = ca.issue_server("fedspread-coordinator", ips=("127.0.0.1",)).write(
        tmp_path_factory.mktemp("coordinator-webhook"), "webhook")
    settings = admission.WebhookSettings(cert_file=cert, key_file=key, host="127.0.0.1",
                                         port=hubside.free_port())
    config_name = f"fedspread-coordinator-{namespace}"
    api = clusters.api(hubside.HUB)
    try:
        with hubside.running_coordinator(sandbox, clusters, members=[], use_ray=False,
                                         webhook=settings) as process:
            assert process.webhook is not None
            assert process.hub_synced.wait(WAIT), "the coordinator never listed the hub"
            selector = {"matchLabels": {LABEL: namespace}}
            webhook_registration.apply(api, registration.configuration(
                webhook_registration.url_client_config(process.webhook.url(), ca_pem=ca.cert_pem),
                name=config_name, namespace_selector=selector, object_selector=selector))
            running = Door(process, namespace=namespace, ca=ca, kubeconfig=sandbox.hub.kubeconfig,
                           custom=clusters.custom(hubside.HUB))
            wait_for(running.refused_probe, timeout=WAIT, interval=0.5,
                     message="the hub apiserver never called the registered webhook")
            yield running
    finally:
        webhook_registration.remove(api, registration.KIND, config_name)
        core.delete_namespace(namespace, propagation_policy="Background")


def test_kubectl_apply_of_an_invalid_spread_is_refused_with_every_problem(door: Door) -> None:
    result = door.kubectl_apply(door.spread("bad", cap="140%", duplicate_name=True))
    assert result.returncode != 0, result.stdout
    assert f'admission webhook "{registration.SPREADS_WEBHOOK}" denied the request' in result.stderr
    assert f"FederatedSpread {door.namespace}/bad is invalid" in result.stderr
    assert "spec.subsets[0].maxReplicas: maxReplicas percentage must be between 0% and 100%, got 140%" \
        in result.stderr
    assert "spec.subsets[1].name: duplicate subset name 'onprem'" in result.stderr
    assert door.stored("bad") is None


def test_a_valid_spread_is_stored_and_a_second_one_of_its_deployment_refused(door: Door) -> None:
    result = door.kubectl_apply(door.spread("first", target="shared"))
    assert result.returncode == 0, result.stderr
    assert door.stored("first") is not None
    key = f"{door.namespace}/first"
    wait_for(lambda: door.process.world.spread(key), timeout=WAIT,
             message="the coordinator never took the first spread into its World")
    result = door.kubectl_apply(door.spread("second", target="shared"))
    assert result.returncode != 0, result.stdout
    assert (f"spec.targetRef.name: Deployment {door.namespace}/shared is already spread by "
            f"FederatedSpread {key}") in result.stderr
    assert door.stored("second") is None
    edited = door.spread("first", target="shared", cap=4)
    assert door.kubectl_apply(edited).returncode == 0, "the holder itself may still be edited"


def test_a_malformed_review_posted_to_the_server_is_a_400(door: Door) -> None:
    assert door.process.webhook is not None
    context = ssl.create_default_context(cadata=door.ca.cert_pem.decode())
    connection = http.client.HTTPSConnection("127.0.0.1", door.process.webhook.port, context=context,
                                             timeout=30)
    try:
        connection.request("POST", admission.VALIDATE_PATH, body=b'{"apiVersion": "admission.k8s.io/v1", '
                           b'"kind": "AdmissionReview", "request": {"uid": "x", "operation": "CREATE"}}',
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
    finally:
        connection.close()
    assert response.status == 400
    assert answer == {"code": 400, "reason": "request.kind is required"}


def test_with_the_webhook_down_the_spread_is_stored_and_its_condition_says_why(door: Door) -> None:
    webhook = door.process.webhook
    assert webhook is not None
    webhook.stop()
    try:
        result = door.kubectl_apply(door.spread("stored-anyway", cap="140%"))
    finally:
        webhook.start()  # same port: the other tests of the module find it serving again
    assert result.returncode == 0, f"failurePolicy Ignore must let it through: {result.stderr}"
    assert door.stored("stored-anyway") is not None

    def valid_condition() -> dict[str, Any] | None:
        stored = door.stored("stored-anyway") or {}
        for condition in (stored.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Valid":
                return dict(condition)
        return None

    condition = wait_for(valid_condition, timeout=WAIT, message="no Valid condition was written")
    assert condition["status"] == "False"
    assert "spec.subsets[0].maxReplicas" in condition["message"]
