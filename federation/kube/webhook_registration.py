"""Registering an admission webhook with an apiserver: where it is reached, and create-or-replace.

Why shared: the agent registers its MutatingWebhookConfiguration in each member, the coordinator's
ValidatingWebhookConfiguration goes to the hub (tests register it with this too); both are
reached the same two ways — a `url` (the sandbox, or a process outside the cluster; Endpoints
reject loopback addresses) or an in-cluster Service — and installed the same way. The
configurations themselves (rules, policies) belong to their owners: `agents.webhook.registration`
and `federation.coordinator.hub.registration`.
"""

from __future__ import annotations

import base64
import logging
from typing import Any, Literal

from kubernetes import client
from kubernetes.client import exceptions

from federation.kube import deadlines

LOG = logging.getLogger(__name__)

API_VERSION = "admissionregistration.k8s.io/v1"

Json = dict[str, Any]
Kind = Literal["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]


def url_client_config(url: str, *, ca_pem: bytes) -> Json:
    """clientConfig for a webhook reached at `url`, trusted through the CA certificate `ca_pem`."""
    return {"url": url, "caBundle": base64.b64encode(ca_pem).decode("ascii")}


def service_client_config(*, namespace: str, name: str, ca_pem: bytes, port: int, path: str) -> Json:
    """clientConfig for a webhook behind the in-cluster Service `namespace/name`."""
    return {
        "service": {"namespace": namespace, "name": name, "path": path, "port": port},
        "caBundle": base64.b64encode(ca_pem).decode("ascii"),
    }


def _calls(api: client.AdmissionregistrationV1Api, kind: Kind) -> tuple[Any, Any, Any, Any]:
    """create, read, replace and delete of `kind`."""
    if kind == "MutatingWebhookConfiguration":
        return (api.create_mutating_webhook_configuration, api.read_mutating_webhook_configuration,
                api.replace_mutating_webhook_configuration, api.delete_mutating_webhook_configuration)
    return (api.create_validating_webhook_configuration, api.read_validating_webhook_configuration,
            api.replace_validating_webhook_configuration, api.delete_validating_webhook_configuration)


def apply(api_client: client.ApiClient, config: Json) -> None:
    """Create the configuration (its `kind` says which), or replace the existing one of that name."""
    create, read, replace, _ = _calls(client.AdmissionregistrationV1Api(api_client), config["kind"])
    name = config["metadata"]["name"]
    try:
        create(config, _request_timeout=deadlines.CALL)  # the client accepts plain dicts as bodies
        LOG.info("%s %s created", config["kind"], name)
        return
    except exceptions.ApiException as error:
        if error.status != 409:
            raise
    current = read(name, _request_timeout=deadlines.CALL)
    replacement = {**config, "metadata": {**config["metadata"],
                                          "resourceVersion": current.metadata.resource_version}}
    replace(name, replacement, _request_timeout=deadlines.CALL)
    LOG.info("%s %s replaced", config["kind"], name)


def remove(api_client: client.ApiClient, kind: Kind, name: str) -> bool:
    """Delete the configuration; False when it did not exist."""
    _, _, _, delete = _calls(client.AdmissionregistrationV1Api(api_client), kind)
    try:
        delete(name, _request_timeout=deadlines.CALL)
    except exceptions.ApiException as error:
        if error.status == 404:
            return False
        raise
    LOG.info("%s %s deleted", kind, name)
    return True
