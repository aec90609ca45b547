"""What the agent needs before it can start its parts: a Kubernetes client and a serving certificate.

Why separate from agents.main: these are the steps that fail on user input (a bad kubeconfig, an
unreachable apiserver, unreadable certificate files), so each turns its failure into a one-line
`AgentError` the command line prints without a traceback; agents.main stays pure wiring.

Without --tls-cert/--tls-key the agent makes its own serving certificate from a CA held only in
memory (federation.certs.pki) and registers that CA as the webhook's caBundle: each start uses a
new CA, and the key is written only into a private temporary directory removed on exit.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import pathlib

from kubernetes import client

from federation.certs import pki
from federation.kube import clients


class AgentError(Exception):
    """A startup problem the user can fix (bad kubeconfig, port in use); one line, no traceback."""


@dataclasses.dataclass(frozen=True)
class Serving:
    """The webhook's certificate files and the CA the apiserver must trust for them."""

    cert_file: pathlib.Path
    key_file: pathlib.Path
    ca_pem: bytes


def api_client(kubeconfig: pathlib.Path | None, *, context: str | None = None,
               pool_size: int = 16) -> client.ApiClient:
    """A client for the member cluster, checked to reach the apiserver (AgentError otherwise).

    `federation.kube.clients` picks the configuration: `kubeconfig`, else KUBECONFIG, else the
    pod's in-cluster service account; `context` one of the kubeconfig's contexts.
    """
    try:  # a pool for four watches, the loops and the registration
        return clients.api_client(kubeconfig, context=context, pool_size=pool_size, probe=True)
    except clients.KubeConfigInvalid as error:  # missing file, YAML error, no context: the user's to fix
        if error.in_cluster:
            raise AgentError(f"{error} (outside a pod, give --kubeconfig)") from error
        raise AgentError(str(error)) from error
    except clients.KubeUnavailable as error:
        raise AgentError(str(error)) from error


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def serving_certificate(directory: pathlib.Path, *, cluster: str, url_host: str,
                        service: tuple[str, str] | None = None, cert: pathlib.Path | None = None,
                        key: pathlib.Path | None = None, ca: pathlib.Path | None = None) -> Serving:
    """The given certificate files, or a new certificate for `url_host` (or the Service's DNS names)."""
    if cert is not None and key is not None:
        try:
            return Serving(cert, key, (ca or cert).read_bytes())
        except OSError as error:
            raise AgentError(f"webhook CA certificate: {error}") from None
    authority = pki.CertificateAuthority.create(f"fedspread-agent {cluster}")
    if service is not None:
        namespace, name = service
        pair = authority.issue_server("fedspread-agent", ips=(), dns_names=(
            f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"))
    elif _is_ip(url_host):
        pair = authority.issue_server("fedspread-agent", ips=(url_host,))
    else:
        pair = authority.issue_server("fedspread-agent", dns_names=(url_host, "localhost"))
    cert_file, key_file = pair.write(directory, "webhook")
    return Serving(cert_file, key_file, authority.cert_pem)
