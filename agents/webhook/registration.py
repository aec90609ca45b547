"""The MutatingWebhookConfiguration that points a member's apiserver at its agent.

Why produced by code: the objectSelector, failure policy, timeout and the two rules are part of the
design, and the tests must exercise the same registration the agent installs, not a
hand-written copy. Choices:

* `pods.fedspread.io` — pods CREATE and DELETE, only for objects with the `fedspread.io/spread`
  label (objectSelector; for DELETE the apiserver matches the old object), so the webhook never
  sees, and never slows down, other pods.
* `evictions.fedspread.io` — pods/eviction CREATE. No objectSelector: an Eviction carries none of
  the pod's labels; the handler looks the pod up in its own bookkeeping.
* `failurePolicy: Ignore` and `timeoutSeconds: 2` — an unreachable agent must not stop the cluster
  from creating pods; such pods get no subset and go first on scale-down.
* `sideEffects: None` — the bookkeeping is local and skipped for dry-run requests.
* `reinvocationPolicy: Never` — the subset is chosen once; later webhooks' changes to the pod do
  not bear on it (and the injection is idempotent anyway).

`clientConfig` is a `url` (the sandbox, or an agent outside the cluster; Endpoints
reject loopback addresses) or an in-cluster Service.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from kubernetes import client
from kubernetes.client import exceptions

from federation.api import names

LOG = logging.getLogger(__name__)

NAME = "fedspread-agent"
PODS_WEBHOOK = "pods.fedspread.io"
EVICTIONS_WEBHOOK = "evictions.fedspread.io"
TIMEOUT_SECONDS = 2
MUTATE_PATH = "/mutate"

Json = dict[str, Any]


def url_client_config(url: str, *, ca_pem: bytes) -> Json:
    """clientConfig for a webhook reached at `url`, trusted through the CA certificate `ca_pem`."""
    return {"url": url, "caBundle": base64.b64encode(ca_pem).decode("ascii")}


def service_client_config(*, namespace: str, name: str, ca_pem: bytes, port: int = 443,
                          path: str = MUTATE_PATH) -> Json:
    """clientConfig for a webhook behind the in-cluster Service `namespace/name`."""
    return {
        "service": {"namespace": namespace, "name": name, "path": path, "port": port},
        "caBundle": base64.b64encode(ca_pem).decode("ascii"),
    }


def _webhook(name: str, rule: Json, client_config: Json, *, object_selector: Json | None,
             namespace_selector: Json | None) -> Json:
    hook: Json = {
        "name": name,
        "clientConfig": client_config,
        "rules": [rule],
        "failurePolicy": "Ignore",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_SECONDS,
        "admissionReviewVersions": ["v1"],
        "reinvocationPolicy": "Never",
    }
    if object_selector is not None:
        hook["objectSelector"] = object_selector
    if namespace_selector is not None:
        hook["namespaceSelector"] = namespace_selector
    return hook


def configuration(client_config: Json, *, name: str = NAME, namespace_selector: Json | None = None) -> Json:
    """The MutatingWebhookConfiguration for a member's agent.

    `namespace_selector` narrows both webhooks to some namespaces (tests use it to keep one
    test's agent away from another's pods; an installed agent leaves it out).
    """
    pods_rule = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "DELETE"],
                 "resources": ["pods"], "scope": "Namespaced"}
    eviction_rule = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                     "resources": ["pods/eviction"], "scope": "Namespaced"}
    spread_selector = {"matchExpressions": [{"key": names.SPREAD_LABEL, "operator": "Exists"}]}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "fedspread-agent"}},
        "webhooks": [
            _webhook(PODS_WEBHOOK, pods_rule, client_config, object_selector=spread_selector,
                     namespace_selector=namespace_selector),
            _webhook(EVICTIONS_WEBHOOK, eviction_rule, client_config, object_selector=None,
                     namespace_selector=namespace_selector),
        ],
    }


def apply_registration(api_client: client.ApiClient, config: Json) -> None:
    """Create the configuration, or replace the existing one of the same name."""
    api = client.AdmissionregistrationV1Api(api_client)
    name = config["metadata"]["name"]
    body: Any = config  # the client accepts plain dicts as bodies
    try:
        api.create_mutating_webhook_configuration(body)
        LOG.info("webhook configuration %s created", name)
        return
    except exceptions.ApiException as error:
        if error.status != 409:
            raise
    current: Any = api.read_mutating_webhook_configuration(name)
    replacement: Any = {**config, "metadata": {**config["metadata"],
                                               "resourceVersion": current.metadata.resource_version}}
    api.replace_mutating_webhook_configuration(name, replacement)
    LOG.info("webhook configuration %s replaced", name)


def remove_registration(api_client: client.ApiClient, name: str = NAME) -> bool:
    """Delete the configuration; False when it did not exist."""
    api = client.AdmissionregistrationV1Api(api_client)
    try:
        api.delete_mutating_webhook_configuration(name)
    except exceptions.ApiException as error:
        if error.status == 404:
            return False
        raise
    LOG.info("webhook configuration %s deleted", name)
    return True
