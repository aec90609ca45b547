"""The external metrics server over real TLS: only the front proxy's certificate is believed.

The server (`services.metrics_api`) on loopback, with a test front-proxy CA published through a
stand-in for the hub's `extension-apiserver-authentication` ConfigMap: a request with the front
proxy's client certificate and remote-user headers gets the list; no certificate, or the CA's
certificate with a CN that is not allowed, gets 401; another CA's certificate fails the handshake;
a denied user gets 403. A rotated CA is picked up without a restart. Random requests over one
connection never get a 500 and never stop the server. (Authorization by the real hub's RBAC:
tests/integration/test_external_metrics_sar.py.)
"""

from __future__ import annotations

import pathlib
import ssl
import string
import time
import urllib.parse
from collections.abc import Iterator

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.certs import pki
from federation.coordinator.services import external_metrics as api
from federation.coordinator.services import front_proxy, metrics_api
from federation.core import usage as usage_rules
from tests.support import metrics_api as support

LABEL = usage_rules.SPREAD_SELECTOR_LABEL
WEB = f"{api.ROOT}/namespaces/demo/{usage_rules.CPU_UTILIZATION}?labelSelector=" + \
    urllib.parse.quote(f"{LABEL}=web")
SOURCE = support.StandInUsage({"demo/web": support.figures()})


@pytest.fixture
def certificates(tmp_path: pathlib.Path) -> support.Certificates:
    return support.Certificates.make(tmp_path)


@pytest.fixture
def configmap(certificates: support.Certificates) -> support.ConfigMapData:
    return certificates.configmap()


@pytest.fixture
def server(certificates: support.Certificates, configmap: support.ConfigMapData
           ) -> Iterator[metrics_api.ExternalMetricsServer]:
    running = support.start(certificates, SOURCE, support.Allow(frozenset({"mallory"})), configmap)
    yield running
    running.stop()


def test_the_front_proxy_gets_the_list(server: metrics_api.ExternalMetricsServer,
                                       certificates: support.Certificates) -> None:
    code, body = support.get(server.port, certificates, WEB, client=certificates.front_proxy_client(),
                             user="alice", groups=("system:authenticated",))
    assert code == 200, body
    assert [item["metricLabels"] for item in body["items"]] == [{LABEL: "web"}]
    code, body = support.get(server.port, certificates, api.ROOT, client=certificates.front_proxy_client())
    assert code == 200 and body["kind"] == "APIResourceList"


def test_without_a_certificate_the_headers_are_not_believed(server: metrics_api.ExternalMetricsServer,
                                                             certificates: support.Certificates) -> None:
    code, body = support.get(server.port, certificates, WEB, client=None, user="system:admin",
                             groups=("system:masters",))
    assert code == 401 and body["kind"] == "Status" and body["reason"] == "Unauthorized"


def test_a_certificate_of_the_ca_with_another_cn_is_401(server: metrics_api.ExternalMetricsServer,
                                                        certificates: support.Certificates) -> None:
    client = certificates.client(certificates.front_proxy_ca, "not-the-front-proxy")
    code, body = support.get(server.port, certificates, WEB, client=client)
    assert code == 401 and "allowed names" in body["message"]


def test_another_ca_fails_the_handshake(server: metrics_api.ExternalMetricsServer,
                                        certificates: support.Certificates) -> None:
    stranger = pki.CertificateAuthority.create("stranger-ca")
    client = certificates.client(stranger, support.FRONT_PROXY_CN)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        support.get(server.port, certificates, WEB, client=client)
    code, _ = support.get(server.port, certificates, WEB, client=certificates.front_proxy_client())
    assert code == 200, "the server keeps serving"


def test_a_denied_user_gets_403(server: metrics_api.ExternalMetricsServer,
                                certificates: support.Certificates) -> None:
    code, body = support.get(server.port, certificates, WEB, client=certificates.front_proxy_client(),
                             user="mallory")
    assert code == 403 and body["reason"] == "Forbidden" and "mallory" in body["message"]


def test_a_rotated_front_proxy_ca_needs_no_restart(server: metrics_api.ExternalMetricsServer,
                                                   certificates: support.Certificates,
                                                   configmap: support.ConfigMapData,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(front_proxy, "MIN_REFRESH_SECONDS", 0.2)
    rotated = pki.CertificateAuthority.create("front-proxy-ca-2")
    configmap.client_ca = rotated.cert_pem.decode()
    new_client = certificates.client(rotated, support.FRONT_PROXY_CN)
    deadline = time.monotonic() + 20
    code = 0
    while time.monotonic() < deadline:  # the old CA still answers until the settings are read again
        try:
            code, _ = support.get(server.port, certificates, WEB, client=new_client)
        except (ssl.SSLError, ConnectionError):
            code = 0  # a failed handshake: the server reads the ConfigMap again soon
        if code == 200:
            break
        time.sleep(0.2)
    assert code == 200
    assert server.trust.refreshes >= 1


SETTINGS = hypothesis.settings(max_examples=80, deadline=None,
                               suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
SAFE = string.ascii_letters + string.digits + "-._~/%?&=,()!:"


@SETTINGS
@hypothesis.given(path=st.text(alphabet=SAFE, max_size=120),
                  selector=st.text(alphabet=string.printable, max_size=60))
def test_random_requests_never_break_it(server: metrics_api.ExternalMetricsServer,
                                        certificates: support.Certificates, path: str, selector: str) -> None:
    target = f"{api.ROOT}/namespaces/demo/{path.lstrip('/')}"
    if "?" not in target:
        target += "?labelSelector=" + urllib.parse.quote(selector)
    code, body = support.get(server.port, certificates, target, client=certificates.front_proxy_client())
    assert code in (200, 400, 404), body
    assert body["kind"] in ("Status", "ExternalMetricValueList", "APIResourceList")
    code, _ = support.get(server.port, certificates, WEB, client=certificates.front_proxy_client())
    assert code == 200


def test_a_hub_without_a_front_proxy_gets_401s_until_it_has_one(certificates: support.Certificates,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """No requestheader CA in the ConfigMap: the server still starts (the coordinator must never
    depend on an optional API), answers 401 saying why, and trusts the CA once the hub has one."""
    monkeypatch.setattr(front_proxy, "MIN_REFRESH_SECONDS", 0.2)
    configmap = certificates.configmap()
    published = configmap.client_ca
    configmap.client_ca = ""
    server = support.start(certificates, SOURCE, support.Allow(), configmap)
    try:
        with pytest.raises((ssl.SSLError, ConnectionError)):  # nobody holds the placeholder CA's key
            support.get(server.port, certificates, WEB, client=certificates.front_proxy_client())
        code, body = support.get(server.port, certificates, WEB, client=None)
        assert code == 401 and "requestheader-client-ca-file" in body["message"]
        configmap.client_ca = published
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and isinstance(server.trust.config, str):
            time.sleep(0.1)
        code, _ = support.get(server.port, certificates, WEB, client=certificates.front_proxy_client())
        assert code == 200
    finally:
        server.stop()
