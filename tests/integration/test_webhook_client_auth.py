"""Only the member apiserver may post reviews to the agent's webhook (`--webhook-client-ca`).

A real `fedspread agent` on sandbox member-1, started with the sandbox CA as `--webhook-client-ca`
and `--webhook-allowed-cn` the certificate the sandbox's member apiservers present to webhooks
(`federation/sandbox/admission.py`: their `--admission-control-config-file`). Pods created through
the apiserver are still admitted by the webhook (its decision counter moves). The forged-review
attack — pod CREATE reviews POSTed straight to the webhook, as curl would — fails: without a client
certificate 401, with one of the right CA but another CN 403, with one of another CA the TLS
handshake fails; none of them is counted, and the webhook keeps serving the apiserver.
"""

from __future__ import annotations

import http.client
import json
import pathlib
import ssl
from collections.abc import Iterator
from typing import Any

import agentside
import conftest
import hubside
import pytest
from waiting import wait_for

from federation.api import names
from federation.certs import pki
from federation.sandbox import admission

MEMBER = "member-1"
WAIT = 90.0


@pytest.fixture
def agent(clusters: conftest.Clusters, namespace: str,
          tmp_path: pathlib.Path) -> Iterator[agentside.AgentProcess]:
    sandbox_pki = pathlib.Path(clusters.sandbox.directory) / "pki"
    running = agentside.AgentProcess(
        clusters, cluster=MEMBER, member=MEMBER, coordinator=f"127.0.0.1:{hubside.free_port()}",
        namespace=namespace, log=tmp_path / "agent.log",
        args=["--webhook-client-ca", str(sandbox_pki / "ca.crt"),
              "--webhook-allowed-cn", admission.WEBHOOK_CLIENT_CN])
    try:
        wait_for(lambda: agentside.webhook_live(running, clusters, MEMBER, namespace), timeout=WAIT,
                 message=lambda: f"the apiserver never reached the webhook:\n{running.output()[-3000:]}")
        yield running
    finally:
        running.stop()


def forged_review(uid: str, namespace: str) -> bytes:
    """A pod CREATE review for spread `x`, as an attacker would post it."""
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": uid, "operation": "CREATE", "namespace": namespace, "name": uid,
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "userInfo": {"username": "mallory"},
                    "object": {"metadata": {"name": uid, "labels": {names.SPREAD_LABEL: "x"}},
                               "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}}).encode()


def post(port: int, body: bytes, *, ca_file: pathlib.Path,
         client_pair: tuple[pathlib.Path, pathlib.Path] | None = None) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(ca_file))
    if client_pair is not None:
        context.load_cert_chain(*client_pair)
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    try:
        connection.request("POST", "/mutate?timeout=2s", body=body,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def webhook_port(agent: agentside.AgentProcess) -> int:
    return int(agent.args[agent.args.index("--webhook-port") + 1])


def test_forged_reviews_are_refused_and_the_apiserver_s_admitted(
        agent: agentside.AgentProcess, clusters: conftest.Clusters, namespace: str,
        tmp_path: pathlib.Path) -> None:
    sandbox_pki = pathlib.Path(clusters.sandbox.directory) / "pki"
    ca_file, port = sandbox_pki / "ca.crt", webhook_port(agent)
    before = agent.decisions()

    for attempt in range(3):  # the attack as reported: three pod CREATEs for spread x, no certificate
        status, answer = post(port, forged_review(f"forged-{attempt}", namespace), ca_file=ca_file)
        assert status == 401, answer
        assert "client certificate" in answer["reason"]

    sandbox_ca = pki.CertificateAuthority.load(sandbox_pki / "ca.crt", sandbox_pki / "ca.key")
    intruder = sandbox_ca.issue_client("intruder").write(tmp_path, "intruder")
    status, answer = post(port, forged_review("forged-cn", namespace), ca_file=ca_file, client_pair=intruder)
    assert status == 403 and "'intruder'" in answer["reason"], answer

    rogue = pki.CertificateAuthority.create("rogue").issue_client(admission.WEBHOOK_CLIENT_CN)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        post(port, forged_review("forged-ca", namespace), ca_file=ca_file,
             client_pair=rogue.write(tmp_path, "rogue"))

    assert agent.decisions() == before, "no forged review was counted"
    assert agent.alive, agent.output()[-3000:]
    wait_for(lambda: agentside.webhook_live(agent, clusters, MEMBER, namespace), timeout=WAIT,
             message="the apiserver's reviews are still admitted")
    assert agent.decisions() > before
