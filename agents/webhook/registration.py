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

from typing import Any

from kubernetes import client

from federation.api import names
from federation.kube import webhook_registration

NAME = "fedspread-agent"
KIND: webhook_registration.Kind = "MutatingWebhookConfiguration"
PODS_WEBHOOK = names.AGENT_PODS_WEBHOOK
EVICTIONS_WEBHOOK = names.AGENT_EVICTIONS_WEBHOOK
TIMEOUT_SECONDS = 2
MUTATE_PATH = "/mutate"

Json = dict[str, Any]

url_client_config = webhook_registration.url_client_config


def service_client_config(*, namespace: str, name: str, ca_pem: bytes, port: int = 443,
                          path: str = MUTATE_PATH) -> Json:
    """clientConfig for the agent's webhook behind the in-cluster Service `namespace/name`."""
    return webhook_registration.service_client_config(namespace=namespace, name=name, ca_pem=ca_pem,
                                                      port=port, path=path)


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
        "apiVersion": webhook_registration.API_VERSION,
        "kind": KIND,
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
    webhook_registration.apply(api_client, config)


def remove_registration(api_client: client.ApiClient, name: str = NAME) -> bool:
    """Delete the configuration; False when it did not exist."""
    return webhook_registration.remove(api_client, KIND, name)
