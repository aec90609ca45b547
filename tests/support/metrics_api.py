"""The coordinator's external metrics server on loopback, with a test front-proxy CA, for tests.

Why shared: the unit tests (TLS, authentication, fuzz) and the sandbox test (authorization by the
real hub's SubjectAccessReviews) start the same server the same way; only the authorizer differs.
The front-proxy settings come from a stand-in for the hub's ConfigMap (`ConfigMapData`), so a test
can rotate the CA or change the allowed names as the hub would.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import pathlib
import ssl
from collections.abc import Mapping
from typing import Any

from federation.certs import pki
from federation.coordinator.services import external_metrics, front_proxy, metrics_api
from federation.coordinator.wire import access
from federation.core import usage as usage_rules

FRONT_PROXY_CN = "front-proxy-client"


@dataclasses.dataclass
class ConfigMapData:
    """What the hub's `extension-apiserver-authentication` would hold; edit it to rotate."""

    client_ca: str
    allowed_names: tuple[str, ...] = (FRONT_PROXY_CN,)
    reads: int = 0

    def __call__(self) -> Mapping[str, str]:
        self.reads += 1
        return {"requestheader-client-ca-file": self.client_ca,
                "requestheader-allowed-names": json.dumps(list(self.allowed_names)),
                "requestheader-username-headers": '["X-Remote-User"]',
                "requestheader-group-headers": '["X-Remote-Group"]',
                "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]'}


class StandInUsage:
    """A `UsageSource`: spreads and their figures, as the facade would answer."""

    def __init__(self, spreads: Mapping[str, usage_rules.FederationUsage]) -> None:
        self.spreads = dict(spreads)
        """By `namespace/name`."""

    def usage(self, namespace: str, name: str) -> usage_rules.FederationUsage | None:
        return self.spreads.get(f"{namespace}/{name}")


class Allow:
    """An authorizer that allows everything but what `denied` names (by user)."""

    def __init__(self, denied: frozenset[str] = frozenset()) -> None:
        self.denied = denied
        self.questions: list[tuple[access.User, access.Access]] = []

    def allowed(self, user: access.User, question: access.Access) -> bool:
        self.questions.append((user, question))
        return user.name not in self.denied


def figures(*, cpu_utilization_milli: int = 150_000, ready: int = 3, timestamp: float = 1_800_000_000.0,
            window: float = 30.0) -> usage_rules.FederationUsage:
    """A spread's figures with a CPU utilization and a ready count (the other metrics unmeasured)."""
    values = {
        usage_rules.CPU_UTILIZATION: usage_rules.MetricValue(
            usage_rules.CPU_UTILIZATION, cpu_utilization_milli, timestamp, window),
        usage_rules.READY_REPLICAS: usage_rules.MetricValue(usage_rules.READY_REPLICAS, ready * 1000,
                                                            timestamp, 0.0)}
    return usage_rules.FederationUsage(values=values, ready_pods=ready, unmeasured_pods=0)


@dataclasses.dataclass
class Certificates:
    """The test PKI: the server's CA and pair, the front proxy's CA and client, a stranger's client."""

    directory: pathlib.Path
    serving_ca: pki.CertificateAuthority
    front_proxy_ca: pki.CertificateAuthority
    cert_file: pathlib.Path
    key_file: pathlib.Path

    @classmethod
    def make(cls, directory: pathlib.Path) -> Certificates:
        serving_ca = pki.CertificateAuthority.create("metrics-serving-ca")
        cert, key = serving_ca.issue_server("metrics").write(directory, "serving")
        return cls(directory, serving_ca, pki.CertificateAuthority.create("front-proxy-ca"), cert, key)

    def client(self, authority: pki.CertificateAuthority, cn: str) -> tuple[pathlib.Path, pathlib.Path]:
        """A client pair `authority` signed, for `cn`, written to files."""
        return authority.issue_client(cn).write(self.directory, f"client-{cn}-{id(authority)}")

    def front_proxy_client(self) -> tuple[pathlib.Path, pathlib.Path]:
        return self.client(self.front_proxy_ca, FRONT_PROXY_CN)

    def configmap(self) -> ConfigMapData:
        return ConfigMapData(self.front_proxy_ca.cert_pem.decode())


def start(certificates: Certificates, source: external_metrics.UsageSource, authorizer: access.Authorizer,
          configmap: ConfigMapData) -> metrics_api.ExternalMetricsServer:
    """The server on 127.0.0.1 (any free port), started."""
    trust = front_proxy.FrontProxyTrust(configmap, directory=certificates.directory / "trust")
    handler = metrics_api.Handler(source, trust=trust, authorizer=authorizer)
    settings = metrics_api.ExternalMetricsSettings(cert_file=certificates.cert_file,
                                                   key_file=certificates.key_file, port=0, host="127.0.0.1")
    return metrics_api.ExternalMetricsServer(handler, settings).start()


def connection(port: int, certificates: Certificates,
               client: tuple[pathlib.Path, pathlib.Path] | None) -> http.client.HTTPSConnection:
    """An HTTPS connection trusting the serving CA, presenting `client` (None: no certificate)."""
    context = ssl.create_default_context(cadata=certificates.serving_ca.cert_pem.decode())
    if client is not None:
        context.load_cert_chain(*client)
    return http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)


def get(port: int, certificates: Certificates, path: str, *,
        client: tuple[pathlib.Path, pathlib.Path] | None,
        user: str | None = "alice", groups: tuple[str, ...] = ()) -> tuple[int, Any]:
    """Status and decoded JSON body of one GET on a fresh connection, as the aggregator sends it."""
    headers = [] if user is None else [("X-Remote-User", user)]
    headers += [("X-Remote-Group", group) for group in groups]
    https = connection(port, certificates, client)
    try:
        https.putrequest("GET", path)
        for name, value in headers:
            https.putheader(name, value)
        https.endheaders()
        response = https.getresponse()
        return response.status, json.loads(response.read())
    finally:
        https.close()
