"""The coordinator's validating webhook seen from the hub's side: a namespace it is registered for,
`kubectl apply` through the real apiserver, reviews posted straight to its port.

Why a module: the webhook's tests (`test_coordinator_webhook.py`, an in-process coordinator, and
`test_coordinator_webhook_callers.py`, the `fedspread coordinator` command with
`--webhook-client-ca`) play the same user against the same registration; one copy keeps each test
about what it checks. The registration is the coordinator's own (`registration.configuration`),
narrowed to one namespace and to objects labelled for it, so other tests on the shared hub never
meet the webhook.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import pathlib
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import hubside
from conftest import Clusters
from kubernetes import client

from federation.api import spread as spread_api
from federation.certs import pki
from federation.coordinator.hub import admission, registration
from federation.kube import webhook_registration
from federation.sandbox import build

GROUP, VERSION = hubside.GROUP, hubside.VERSION
LABEL = "fedspread-test/coordinator-webhook"


class Door:
    """The hub's door for one namespace: what a user applies and what the hub stores."""

    def __init__(self, *, namespace: str, ca: pki.CertificateAuthority, kubeconfig: str,
                 custom: client.CustomObjectsApi) -> None:
        """`ca`: the CA of the webhook's serving certificate."""
        self.namespace = namespace
        self.ca = ca
        self.kubeconfig = kubeconfig
        self.custom = custom

    def spread(self, name: str, *, target: str = "web", cap: int | str = 3,
               duplicate_name: bool = False) -> dict[str, Any]:
        """A FederatedSpread of this namespace, labelled for the registered webhook."""
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
        """Whether the apiserver calls the webhook and heeds it yet (a dry-run create of an invalid
        spread is refused); False while the call fails and failurePolicy Ignore lets it through."""
        try:
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, spread_api.PLURAL,
                self.spread(f"probe-{uuid.uuid4().hex[:6]}", cap="140%"), dry_run="All")
        except client.ApiException as error:
            if "maxReplicas" in str(error.body):
                return True
            raise
        return False

    def post(self, port: int, body: bytes, *,
             client_pair: tuple[pathlib.Path, pathlib.Path] | None = None) -> tuple[int, Any]:
        """POST `body` to the webhook's review path on 127.0.0.1:`port`, as curl would (with
        `client_pair` as the client certificate, if given); the status and the decoded answer."""
        context = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        if client_pair is not None:
            context.load_cert_chain(*client_pair)
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
        try:
            connection.request("POST", f"{admission.VALIDATE_PATH}?timeout=5s", body=body,
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()


def serving_pair(directory: pathlib.Path) -> tuple[pki.CertificateAuthority, pathlib.Path, pathlib.Path]:
    """A test CA and, signed by it, a serving certificate and key for 127.0.0.1 (the webhook's)."""
    ca = pki.CertificateAuthority.create("coordinator-webhook-ca")
    cert, key = ca.issue_server("fedspread-coordinator", ips=("127.0.0.1",)).write(directory, "webhook")
    return ca, cert, key


@contextlib.contextmanager
def watched_namespace(clusters: Clusters) -> Iterator[str]:
    """A fresh hub namespace labelled for the webhook (deleted afterwards)."""
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    core = clusters.core(hubside.HUB)
    core.create_namespace({"metadata": {"name": namespace, "labels": {LABEL: namespace}}})
    try:
        yield namespace
    finally:
        core.delete_namespace(namespace, propagation_policy="Background")


@contextlib.contextmanager
def registered(clusters: Clusters, *, url: str, ca: pki.CertificateAuthority,
               namespace: str) -> Iterator[None]:
    """The coordinator's ValidatingWebhookConfiguration in the hub, calling `url` for `namespace`'s
    labelled objects only (removed afterwards)."""
    api = clusters.api(hubside.HUB)
    name = f"fedspread-coordinator-{namespace}"
    selector = {"matchLabels": {LABEL: namespace}}
    try:
        webhook_registration.apply(api, registration.configuration(
            webhook_registration.url_client_config(url, ca_pem=ca.cert_pem),
            name=name, namespace_selector=selector, object_selector=selector))
        yield
    finally:
        webhook_registration.remove(api, registration.KIND, name)
