"""The ValidatingWebhookConfiguration that points the hub's apiserver at the coordinator.

Why produced by code: the rules and policies are part of the design, and deploy/coordinator's
manifest and the tests must carry the same registration (a unit test keeps the manifest equal to
`configuration`). Choices:

* Two webhooks, `federatedspreads.fedspread.io` and `memberclusters.fedspread.io`, CREATE and
  UPDATE of our CRDs only — never their `status` (the coordinator's own writes), never DELETE.
* `failurePolicy: Ignore` — the hub never depends on the coordinator to store an object: a
  coordinator that is down, restarting or slow lets every spec through, and the Valid condition
  (checked on every spec the watcher sees) reports what the door did not stop.
* `timeoutSeconds: 5` — short: the answer takes milliseconds, and a `kubectl apply` must not
  hang on a coordinator that cannot answer.
* `sideEffects: None` — deciding changes nothing, dry-run or not.
* A third, `horizontalpodautoscalers.fedspread.io`, for CREATE and UPDATE of HPAs
  (`autoscaling` v2 and v2beta2: `matchPolicy: Equivalent` sends other versions converted): it
  only ever warns (`core.hpa_advice`), and `failurePolicy: Ignore` like the others, so a
  coordinator that is away never stands between a user and their HPA.
"""

from __future__ import annotations

import copy
from typing import Any

from federation.api import cluster as cluster_api
from federation.api import common
from federation.api import spread as spread_api
from federation.kube import webhook_registration

NAME = "fedspread-coordinator"
KIND: webhook_registration.Kind = "ValidatingWebhookConfiguration"
SPREADS_WEBHOOK = "federatedspreads.fedspread.io"
CLUSTERS_WEBHOOK = "memberclusters.fedspread.io"
HPAS_WEBHOOK = "horizontalpodautoscalers.fedspread.io"
HPA_VERSIONS = ["v2", "v2beta2"]
TIMEOUT_SECONDS = 5
SERVICE_PORT = 443

Json = dict[str, Any]


def _webhook(name: str, *, plural: str, scope: str, client_config: Json,
             namespace_selector: Json | None, object_selector: Json | None,
             group: str = common.API_GROUP, versions: tuple[str, ...] = (common.API_VERSION,)) -> Json:
    hook: Json = {
        "name": name,
        "clientConfig": copy.deepcopy(client_config),  # each hook its own: callers may edit one
        "rules": [{"apiGroups": [group], "apiVersions": list(versions),
                   "operations": ["CREATE", "UPDATE"], "resources": [plural], "scope": scope}],
        "failurePolicy": "Ignore",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_SECONDS,
        "admissionReviewVersions": ["v1"],
    }
    if namespace_selector is not None:
        hook["namespaceSelector"] = namespace_selector
    if object_selector is not None:
        hook["objectSelector"] = object_selector
    return hook


def configuration(client_config: Json, *, name: str = NAME, namespace_selector: Json | None = None,
                  object_selector: Json | None = None) -> Json:
    """The ValidatingWebhookConfiguration for the coordinator.

    `namespace_selector` narrows the spreads' and HPAs' webhooks to some namespaces and `object_selector`
    both webhooks to some objects (tests use them to stay out of each other's way on a shared
    hub; an installed coordinator leaves them out).
    """
    return {
        "apiVersion": webhook_registration.API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "fedspread-coordinator"}},
        "webhooks": [
            _webhook(SPREADS_WEBHOOK, plural=spread_api.PLURAL, scope="Namespaced",
                     client_config=client_config, namespace_selector=namespace_selector,
                     object_selector=object_selector),
            _webhook(CLUSTERS_WEBHOOK, plural=cluster_api.PLURAL, scope="Cluster",
                     client_config=client_config, namespace_selector=None, object_selector=object_selector),
            _webhook(HPAS_WEBHOOK, plural="horizontalpodautoscalers", scope="Namespaced",
                     client_config=client_config, namespace_selector=namespace_selector,
                     object_selector=object_selector, group="autoscaling", versions=tuple(HPA_VERSIONS)),
        ],
    }
