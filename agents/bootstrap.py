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

from kubernetes import client, config

from federation.certs import pki


class AgentError(Exception):
    """A startup problem the user can fix (bad kubeconfig, port in use); one line, no traceback."""


@dataclasses.dataclass(frozen=True)
class Serving:
    """The webhook's certificate files and the CA the apiserver must trust for them."""

    cert_file: pathlib.Path
    key_file: pathlib.Path
    ca_pem: bytes


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else type(error).__name__


def api_client(kubeconfig: pathlib.Path | None, *, pool_size: int = 16) -> client.ApiClient:
    """A client for the member cluster, checked to reach the apiserver (AgentError otherwise).

    Without a kubeconfig the pod's in-cluster service account is used.
    """
    settings = client.Configuration()
    try:
        if kubeconfig is None:
            config.load_incluster_config(client_configuration=settings)
        else:
            config.load_kube_config(config_file=str(kubeconfig), client_configuration=settings)
    except Exception as error:  # missing file, YAML error, no context: all the user's to fix
        if kubeconfig is None:
            raise AgentError(f"cannot use the in-cluster service account: {_first_line(error)} "
                             "(outside a pod, give --kubeconfig)") from None
        raise AgentError(f"cannot use kubeconfig {kubeconfig}: {_first_line(error)}") from None
    settings.connection_pool_maxsize = pool_size  # four watches, the loops and the registration
    api = client.ApiClient(settings)
    try:
        client.VersionApi(api).get_code(_request_timeout=10)
    except Exception as error:
        raise AgentError(f"cannot reach the apiserver at {settings.host}: {_first_line(error)}") from None
    return api


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
