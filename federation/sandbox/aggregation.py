"""The sandbox's aggregation layer: the front-proxy PKI, the apiserver flags, and APIServices routed
to a server on a loopback port.

Why: aggregated APIs (metrics.k8s.io served by the node simulator in members, the coordinator's
external.metrics.k8s.io on the hub) are reached through the apiserver's aggregator, exactly as in a
real cluster, so clients (kubectl top, the HPA controller, the agents) use the ordinary API paths.
The aggregator proxies with a client certificate of its own (`FRONT_PROXY_CLIENT_CN`), signed by a
CA apart from the cluster's (`FRONT_PROXY_CA_CN`), and names the user in the requestheader headers;
an aggregated server trusts those headers only from that certificate. The apiserver publishes the
CA and the allowed names in `kube-system/extension-apiserver-authentication`.

Routing to loopback: the aggregator resolves an APIService's Service. Endpoints cannot hold
loopback addresses (the apiserver refuses 127.0.0.0/8), but a Service of type `ExternalName`
whose `externalName` is `localhost` makes the 1.20 aggregator (its default, cluster-IP resolver)
dial `https://localhost:<APIService spec.service.port>`; its availability controller checks ports
and Endpoints only for `ClusterIP` Services and then asks the backend's discovery document the same
way. The aggregator verifies the backend's serving certificate for `<service>.<namespace>.svc`
against the APIService's `caBundle`.
"""

from __future__ import annotations

import base64
import dataclasses
import pathlib
import time
from collections.abc import Sequence
from typing import Any

from federation.certs import pki
from federation.sandbox.errors import SandboxError

FRONT_PROXY_CA_CN = "fedspread-sandbox-front-proxy-ca"
FRONT_PROXY_CLIENT_CN = "front-proxy-client"
"""The one name `--requestheader-allowed-names` allows: the aggregator's client certificate."""
USER_HEADER, GROUP_HEADER, EXTRA_HEADER_PREFIX = "X-Remote-User", "X-Remote-Group", "X-Remote-Extra-"
AVAILABLE_SECONDS = 60.0
"""How long `register_api_service` waits for the APIService to be Available (the availability
controller checks every 30 s at worst, at once on a change)."""
LOOPBACK_HOST = "localhost"
Json = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class FrontProxy:
    """The files of the aggregator's PKI in the sandbox's pki directory."""

    ca_file: pathlib.Path
    ca_key_file: pathlib.Path
    client_cert_file: pathlib.Path
    client_key_file: pathlib.Path


def front_proxy_files(directory: pathlib.Path) -> FrontProxy:
    """Where `write_front_proxy` writes into `directory`."""
    return FrontProxy(ca_file=directory / "front-proxy-ca.crt", ca_key_file=directory / "front-proxy-ca.key",
                      client_cert_file=directory / "front-proxy-client.crt",
                      client_key_file=directory / "front-proxy-client.key")


def write_front_proxy(directory: pathlib.Path) -> FrontProxy:
    """A new front-proxy CA and its `front-proxy-client` certificate, written into `directory`."""
    ca = pki.CertificateAuthority.create(FRONT_PROXY_CA_CN)
    ca.pair().write(directory, "front-proxy-ca")
    ca.issue_client(FRONT_PROXY_CLIENT_CN).write(directory, "front-proxy-client")
    return front_proxy_files(directory)


def apiserver_flags(front_proxy: FrontProxy) -> list[str]:
    """The kube-apiserver flags that turn its aggregation layer on with `front_proxy`."""
    return [
        f"--requestheader-client-ca-file={front_proxy.ca_file}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT_CN}",
        f"--requestheader-username-headers={USER_HEADER}",
        f"--requestheader-group-headers={GROUP_HEADER}",
        f"--requestheader-extra-headers-prefix={EXTRA_HEADER_PREFIX}",
        f"--proxy-client-cert-file={front_proxy.client_cert_file}",
        f"--proxy-client-key-file={front_proxy.client_key_file}",
    ]


def serving_name(*, namespace: str, service: str) -> str:
    """The name the aggregator checks the backend's serving certificate for."""
    return f"{service}.{namespace}.svc"


def api_service_name(group: str, version: str) -> str:
    """An APIService's name: `<version>.<group>`."""
    return f"{version}.{group}"


def api_service_manifests(
    group: str, version: str, *, namespace: str, service: str, port: int, ca_pem: bytes,
) -> list[Json]:
    """The Service (ExternalName `localhost`) and the APIService that route `group`/`version` to a
    server on loopback port `port`, whose serving certificate (of the CA `ca_pem`) names
    `<service>.<namespace>.svc`."""
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": service, "namespace": namespace},
         "spec": {"type": "ExternalName", "externalName": LOOPBACK_HOST,
                  "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": {"name": api_service_name(group, version)},
         "spec": {"group": group, "version": version,
                  "service": {"namespace": namespace, "name": service, "port": port},
                  "caBundle": base64.b64encode(ca_pem).decode(),
                  "groupPriorityMinimum": 100, "versionPriority": 100}},
    ]


def available_condition(api_service: Json) -> Json | None:
    """The APIService's `Available` condition, or None when it has none yet."""
    for condition in (api_service.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Available":
            return dict(condition)
    return None


def register_api_service(
    kubeconfig: str | pathlib.Path, manifests: Sequence[Json], *, timeout: float = AVAILABLE_SECONDS,
) -> str:
    """Create (or replace) `manifests` (from `api_service_manifests`; the namespace is created when
    missing) on the apiserver of `kubeconfig`, and wait until the APIService is Available; returns
    its name. SandboxError with the condition's reason and message when it is not within `timeout`."""
    from kubernetes import client

    from federation.kube import clients

    api_client = clients.api_client(pathlib.Path(kubeconfig))
    core, registration = client.CoreV1Api(api_client), client.ApiregistrationV1Api(api_client)
    name = ""
    for manifest in manifests:
        if manifest["kind"] == "Service":
            _apply_service(core, manifest)
        elif manifest["kind"] == "APIService":
            name = manifest["metadata"]["name"]
            _create_or_replace(manifest, create=registration.create_api_service,
                               read=registration.read_api_service, replace=registration.replace_api_service)
        else:
            raise ValueError(f"a Service or an APIService, not a {manifest['kind']}")
    if not name:
        raise ValueError("register_api_service was given no APIService")
    wait_available(api_client, name, timeout=timeout)
    return name


def wait_available(api_client: Any, name: str, *, timeout: float = AVAILABLE_SECONDS) -> None:
    """Wait until APIService `name` is Available; SandboxError with its condition if not in time."""
    from kubernetes import client

    from federation.kube import deadlines

    registration = client.ApiregistrationV1Api(api_client)
    deadline, condition = time.monotonic() + timeout, None
    while True:
        found = registration.read_api_service(name, _request_timeout=deadlines.CALL)
        condition = available_condition(api_client.sanitize_for_serialization(found))
        if condition is not None and condition.get("status") == "True":
            return
        if time.monotonic() > deadline:
            said = (f"{condition.get('reason')}: {condition.get('message')}" if condition
                    else "it has no Available condition yet")
            raise SandboxError(f"APIService {name} is not Available after {timeout:.0f} s ({said})")
        time.sleep(0.5)


def _apply_service(core: Any, manifest: Json) -> None:
    """Create the Service's namespace when missing, and create or replace the Service."""
    from federation.kube import deadlines, errors

    namespace = manifest["metadata"]["namespace"]
    try:
        with errors.translated(f"create namespace {namespace}"):
            core.create_namespace({"metadata": {"name": namespace}}, _request_timeout=deadlines.CALL)
    except errors.Conflict:
        pass
    _create_or_replace(
        manifest, create=lambda body, **kw: core.create_namespaced_service(namespace, body, **kw),
        read=lambda name, **kw: core.read_namespaced_service(name, namespace, **kw),
        replace=lambda name, body, **kw: core.replace_namespaced_service(name, namespace, body, **kw))


def _create_or_replace(manifest: Json, *, create: Any, read: Any, replace: Any) -> None:
    """Create the object, or replace the one of that name (keeping its resourceVersion)."""
    from federation.kube import deadlines, errors

    name = manifest["metadata"]["name"]
    try:
        with errors.translated(f"create {manifest['kind']} {name}"):
            create(manifest, _request_timeout=deadlines.CALL)
            return
    except errors.Conflict:
        pass
    current = read(name, _request_timeout=deadlines.CALL)
    body = {**manifest, "metadata": {**manifest["metadata"],
                                     "resourceVersion": current.metadata.resource_version}}
    replace(name, body, _request_timeout=deadlines.CALL)
