"""Prepare the sandbox hub: install fedspread's CRDs, and let SDK users read placements.

Why separate: the hub is a bare apiserver (like Karmada's); everything fedspread-specific it holds
comes from the generated files in `crds/`, applied exactly as a user would apply them. The hub runs
RBAC, and the coordinator asks it who may read placements (`coordinator.hub.access_review`), so the
demo and the tests bind their SDK user to the reader ClusterRole that deploy/coordinator/rbac.yaml
ships (`grant_placement_reader`), as deploy/README.md tells an administrator to. The demo also
points the hub at its coordinator's validating webhook with the registration deploy/coordinator/
webhook.yaml ships, reached by URL instead of a Service (`register_coordinator_webhook`).
"""

from __future__ import annotations

import pathlib
import re
import time
from collections.abc import Sequence
from typing import Any

import yaml

ESTABLISH_TIMEOUT = 30.0


def install_crds(kubeconfig: str, files: Sequence[pathlib.Path]) -> list[str]:
    """Create (or replace) every CRD in `files` and wait until each is Established."""
    from kubernetes import client

    from federation.kube import clients, deadlines, errors

    api = client.ApiextensionsV1Api(clients.api_client(pathlib.Path(kubeconfig)))
    names = []
    for path in files:
        for document in yaml.safe_load_all(path.read_text()):
            if not document:
                continue
            name = document["metadata"]["name"]
            try:
                with errors.translated(f"create CRD {name}"):
                    api.create_custom_resource_definition(document, _request_timeout=deadlines.CALL)
            except errors.Conflict:  # it exists: replace it
                current = api.read_custom_resource_definition(name, _request_timeout=deadlines.CALL)
                version = current.metadata.resource_version if current.metadata else None
                document["metadata"]["resourceVersion"] = version
                api.replace_custom_resource_definition(name, document, _request_timeout=deadlines.CALL)
            names.append(name)
    deadline = time.monotonic() + ESTABLISH_TIMEOUT
    for name in names:
        while True:
            crd = api.read_custom_resource_definition(name, _request_timeout=deadlines.CALL)
            conditions = crd.status.conditions or [] if crd.status else []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not Established after {ESTABLISH_TIMEOUT:.0f} s")
            time.sleep(0.2)
    return names


def bundled_crds() -> list[pathlib.Path]:
    """The CRD files shipped in the repository's crds/ directory."""
    root = pathlib.Path(__file__).resolve().parents[2] / "crds"
    return sorted(root.glob("*.yaml"))


READER_ROLE = "fedspread-placement-reader"


def _repository() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parents[2]


def reader_role() -> Any:
    """The ClusterRole an SDK user is bound to, exactly as deploy/coordinator/rbac.yaml ships it."""
    path = _repository() / "deploy" / "coordinator" / "rbac.yaml"
    for document in yaml.safe_load_all(path.read_text()):
        if document and document.get("kind") == "ClusterRole" and document["metadata"]["name"] == READER_ROLE:
            return document
    raise LookupError(f"no ClusterRole {READER_ROLE} in {path}")


def coordinator_webhook(url: str, *, ca_pem: bytes) -> Any:
    """The ValidatingWebhookConfiguration deploy/coordinator/webhook.yaml ships, every webhook's
    clientConfig the coordinator at `url` (its path the manifest's), trusted through `ca_pem`."""
    from federation.kube import webhook_registration

    path = _repository() / "deploy" / "coordinator" / "webhook.yaml"
    for document in yaml.safe_load_all(path.read_text()):
        if document and document.get("kind") == "ValidatingWebhookConfiguration":
            for hook in document["webhooks"]:
                served = hook["clientConfig"].get("service", {}).get("path", "")
                hook["clientConfig"] = webhook_registration.url_client_config(url + served, ca_pem=ca_pem)
            return document
    raise LookupError(f"no ValidatingWebhookConfiguration in {path}")


def register_coordinator_webhook(kubeconfig: str, url: str, *, ca_pem: bytes) -> str:
    """Point the hub's apiserver at the coordinator's validating webhook served at `url`
    (https://host:port, no path) with a certificate of the CA `ca_pem`; created or replaced.
    Returns the configuration's name."""
    from federation.kube import clients, webhook_registration

    config = coordinator_webhook(url, ca_pem=ca_pem)
    webhook_registration.apply(clients.api_client(pathlib.Path(kubeconfig)), config)
    return str(config["metadata"]["name"])


def grant_placement_reader(kubeconfig: str, user: str, *, namespace: str | None = None) -> str:
    """Let SDK user `user` read placements: a RoleBinding in `namespace` to the reader ClusterRole,
    or (None) a ClusterRoleBinding (every namespace and the clusters); created or left as it is.
    Returns the binding's name."""
    from kubernetes import client

    from federation.kube import clients, deadlines, errors

    rbac = client.RbacAuthorizationV1Api(clients.api_client(pathlib.Path(kubeconfig)))
    try:
        with errors.translated(f"create ClusterRole {READER_ROLE}"):
            rbac.create_cluster_role(reader_role(), _request_timeout=deadlines.CALL)
    except errors.Conflict:
        pass
    name = f"{READER_ROLE}-" + re.sub(r"[^a-z0-9.-]+", "-", user.lower()).strip("-.")
    group = "rbac.authorization.k8s.io"
    binding: Any = {"metadata": {"name": name},
                    "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": READER_ROLE},
                    "subjects": [{"apiGroup": group, "kind": "User", "name": user}]}
    try:
        with errors.translated(f"bind {user} to {READER_ROLE}"):
            if namespace is None:
                rbac.create_cluster_role_binding(binding, _request_timeout=deadlines.CALL)
            else:
                rbac.create_namespaced_role_binding(namespace, binding, _request_timeout=deadlines.CALL)
    except errors.Conflict:
        pass
    _until_allowed(client.AuthorizationV1Api(rbac.api_client), user, namespace=namespace)
    return name


BINDING_SECONDS = 30.0
"""How long a new binding may take to reach the apiserver's RBAC authorizer (it learns of bindings
through its own informers: a review right after the create may still say no)."""


def _until_allowed(api: Any, user: str, *, namespace: str | None) -> None:
    """Wait until the hub answers that `user` may get FederatedSpreads (in `namespace`)."""
    import tenacity
    from kubernetes import client

    from federation.kube import deadlines

    review = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        user=user, resource_attributes=client.V1ResourceAttributes(
            group="fedspread.io", resource="federatedspreads", verb="get", namespace=namespace or "")))

    @tenacity.retry(retry=tenacity.retry_if_result(lambda allowed: not allowed),
                    stop=tenacity.stop_after_delay(BINDING_SECONDS),
                    wait=tenacity.wait_random(0.1, 0.4), retry_error_callback=lambda _: False)
    def allowed() -> bool:
        answer = api.create_subject_access_review(review, _request_timeout=deadlines.CALL)
        return bool(answer.status.allowed)

    if not allowed():
        raise RuntimeError(f"the hub still refuses {user} {BINDING_SECONDS:g} s after binding it "
                           "to the placement reader role")
