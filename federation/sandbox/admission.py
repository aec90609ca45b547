"""The sandbox's apiservers, hub and members, present a client certificate to admission webhooks.

Why: the agent's pod webhook and the coordinator's validating webhook admit reviews only from the
apiserver when started with `--webhook-client-ca` (`federation.kube.webhook_clients`), as
deploy/README.md asks of a real member and hub. So every sandbox apiserver starts with
`--admission-control-config-file`: an AdmissionConfiguration whose MutatingAdmissionWebhook and
ValidatingAdmissionWebhook plugins read a kubeconfig holding a client certificate for every
webhook (user `*`), signed by the sandbox CA with CN `WEBHOOK_CLIENT_CN`. Agents and coordinators
started with the sandbox's CA as `--webhook-client-ca` (and that CN) then take reviews from the
apiserver and refuse anyone else; those started without it never ask for the certificate.
"""

from __future__ import annotations

import pathlib

import yaml

from federation.certs import pki

WEBHOOK_CLIENT_CN = "fedspread-sandbox-apiserver"
"""The common name of the certificate every sandbox apiserver (hub and members) presents to webhooks."""
PLUGINS = ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook")


def webhook_client_config(
    directory: pathlib.Path, *, ca: pki.CertificateAuthority, name: str,
) -> pathlib.Path:
    """Write `name`'s webhook client certificate, the kubeconfig naming it and the
    AdmissionConfiguration under `directory`; the AdmissionConfiguration's path (the value of
    `--admission-control-config-file`)."""
    cert, key = ca.issue_client(WEBHOOK_CLIENT_CN).write(directory, f"{name}-webhook-client")
    kubeconfig = directory / f"{name}-webhook-kubeconfig.yaml"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "users": [{"name": "*", "user": {"client-certificate": str(cert), "client-key": str(key)}}]}))
    admission = directory / f"{name}-admission.yaml"
    admission.write_text(yaml.safe_dump({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": plugin, "configuration": {
            "apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": str(kubeconfig)}} for plugin in PLUGINS]}))
    return admission
