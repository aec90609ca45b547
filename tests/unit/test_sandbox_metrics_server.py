"""The node simulator's metrics server takes requests from the aggregator alone, over real TLS.

Why: an aggregated API server that trusts anyone's `X-Remote-User` would let any local process act
as any user; metrics-server refuses callers without the front-proxy client certificate, and so must
the sandbox's. The server runs in this process on 127.0.0.1 (no Kubernetes involved); the sandbox
test (test_sandbox_metrics.py) checks the same through a member's aggregator.
"""

from __future__ import annotations

import http.client
import json
import pathlib
import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from federation.certs import pki
from federation.sandbox import aggregation, metrics_server, pod_metrics

POD = {"metadata": {"name": "web-1", "namespace": "web", "labels": {"app": "web"},
                    "annotations": {pod_metrics.USAGE_ANNOTATION: '{"cpu": "450m", "memory": "64Mi"}'}},
       "spec": {"nodeName": "n-0", "containers": [{"name": "app"}]}, "status": {"phase": "Running"}}


class Pki:
    """A serving CA (the sandbox's) and the front-proxy CA with its client certificate, on disk."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.directory = directory
        self.ca = pki.CertificateAuthority.create("sandbox-ca")
        self.ca_file, _ = self.ca.pair().write(directory, "ca")
        self.front_proxy = aggregation.write_front_proxy(directory)
        serving = self.ca.issue_server("metrics", dns_names=("localhost",))
        self.cert, self.key = serving.write(directory, "serving")

    def client(self, name: str, *, front_proxy: bool) -> tuple[pathlib.Path, pathlib.Path]:
        """A client certificate with CN `name`, of the front-proxy CA or of the sandbox CA."""
        issuer = (pki.CertificateAuthority.load(self.front_proxy.ca_file, self.front_proxy.ca_key_file)
                  if front_proxy else self.ca)
        return issuer.issue_client(name).write(self.directory, f"client-{name}-{front_proxy}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pki, int]]:
    keys = Pki(tmp_path_factory.mktemp("metrics-pki"))
    server = metrics_server.MetricsServer(
        metrics_server.Serving(port=0, cert_file=str(keys.cert), key_file=str(keys.key),
                               client_ca_file=str(keys.front_proxy.ca_file)),
        pods=lambda: [POD], nodes=lambda: {"n-0": {"zone": "a"}})
    server.start()
    try:
        yield keys, server.port
    finally:
        server.shutdown()


def _request(served: tuple[Pki, int], path: str, *, client: tuple[pathlib.Path, pathlib.Path] | None,
             headers: dict[str, str] | None = None, method: str = "GET") -> tuple[int, dict[str, Any]]:
    keys, port = served
    context = ssl.create_default_context(cafile=str(keys.ca_file))
    if client is not None:
        context.load_cert_chain(*client)
    connection = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    try:
        connection.request(method, path, headers=headers or {})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


AGGREGATOR_HEADERS = {aggregation.USER_HEADER: "system:kube-aggregator",
                      aggregation.GROUP_HEADER: "system:masters"}
PODS_PATH = "/apis/metrics.k8s.io/v1beta1/namespaces/web/pods"


def test_the_aggregator_gets_pod_metrics(served: tuple[Pki, int]) -> None:
    client = served[0].client(aggregation.FRONT_PROXY_CLIENT_CN, front_proxy=True)
    code, document = _request(served, PODS_PATH, client=client, headers=AGGREGATOR_HEADERS)
    assert code == 200, document
    assert [(i["metadata"]["name"], i["containers"][0]["usage"]) for i in document["items"]] == [
        ("web-1", {"cpu": "450m", "memory": "64Mi"})]


def test_a_caller_without_a_client_certificate_gets_401(served: tuple[Pki, int]) -> None:
    code, document = _request(served, PODS_PATH, client=None, headers=AGGREGATOR_HEADERS)
    assert (code, document["kind"], document["reason"]) == (401, "Status", "Unauthorized")


def test_a_front_proxy_certificate_with_another_name_gets_401(served: tuple[Pki, int]) -> None:
    client = served[0].client("someone-else", front_proxy=True)
    code, document = _request(served, PODS_PATH, client=client, headers=AGGREGATOR_HEADERS)
    assert (code, document["reason"]) == (401, "Unauthorized")
    assert "someone-else" in document["message"]


def test_the_aggregators_certificate_without_a_user_gets_401(served: tuple[Pki, int]) -> None:
    client = served[0].client(aggregation.FRONT_PROXY_CLIENT_CN, front_proxy=True)
    code, document = _request(served, PODS_PATH, client=client)
    assert (code, document["reason"]) == (401, "Unauthorized")


def test_a_certificate_of_another_ca_is_refused_at_the_handshake(served: tuple[Pki, int]) -> None:
    """Named like the aggregator, but signed by the cluster CA (as an admin's certificate is)."""
    client = served[0].client(aggregation.FRONT_PROXY_CLIENT_CN, front_proxy=False)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _request(served, PODS_PATH, client=client, headers=AGGREGATOR_HEADERS)


def test_the_server_keeps_serving_after_refusals(served: tuple[Pki, int]) -> None:
    keys = served[0]
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _request(served, PODS_PATH, client=keys.client("x", front_proxy=False))
    client = keys.client(aggregation.FRONT_PROXY_CLIENT_CN, front_proxy=True)
    assert _request(served, "/apis/metrics.k8s.io/v1beta1/nodes/n-0", client=client,
                    headers=AGGREGATOR_HEADERS)[0] == 200


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_writes_get_405(served: tuple[Pki, int], method: str) -> None:
    client = served[0].client(aggregation.FRONT_PROXY_CLIENT_CN, front_proxy=True)
    code, document = _request(served, PODS_PATH, client=client, headers=AGGREGATOR_HEADERS, method=method)
    assert (code, document["reason"]) == (405, "MethodNotAllowed")


def test_caller_refusal_reads_the_certificate_subject() -> None:
    aggregator = {"subject": ((("commonName", "front-proxy-client"),),)}
    allowed = (aggregation.FRONT_PROXY_CLIENT_CN,)
    assert metrics_server.caller_refusal(aggregator, "alice", allowed_names=allowed) is None
    assert metrics_server.caller_refusal(aggregator, None, allowed_names=allowed) is not None
    assert metrics_server.caller_refusal({}, "alice", allowed_names=allowed) is not None
    assert metrics_server.caller_refusal({"subject": ((("commonName", "x"),),)}, "alice",
                                         allowed_names=allowed) is not None
