"""Only the hub apiserver may post reviews to the coordinator's webhook (`--webhook-client-ca`).

A real `fedspread coordinator` (placing in its own process, `--no-ray`) serves the validating
webhook with `--webhook-client-ca` the sandbox CA and `--webhook-allowed-cn` the certificate every
sandbox apiserver presents to webhooks (`federation/sandbox/admission.py`: the hub's
`--admission-control-config-file`, as the members'). Its own registration calls it for one
namespace (`hubdoor`). Then:

* the hub apiserver's calls are answered: `kubectl apply` of an invalid spread is refused with
  every problem and its field path, nothing stored; a valid spread is stored;
* a review POSTed straight to the port, as curl would, gets 401 without a client certificate and
  403 with one of the sandbox CA but another CN; one of another CA fails the TLS handshake; one
  with the allowed CN is answered (the refusals are about the caller, not the review);
* the coordinator does not log that its webhook is open (it logs so without the flags: unit test
  `test_webhook_client_auth_units.py`).
"""

from __future__ import annotations

import json
import pathlib
import ssl
from collections.abc import Iterator
from typing import Any

import hubdoor
import hubside
import pytest
from conftest import Clusters
from waiting import wait_for

from federation.api import common
from federation.api import spread as spread_api
from federation.certs import pki
from federation.kube import webhook_clients
from federation.sandbox import admission, state

WAIT = 90.0  # generous: the sandbox shares 2 cores with other work


class CallerDoor(hubdoor.Door):
    """The door, with the `fedspread coordinator` command serving its webhook on `port`."""

    def __init__(self, command: hubside.CoordinatorCommand, *, port: int,
                 sandbox_ca: pki.CertificateAuthority, **door: Any) -> None:
        super().__init__(**door)
        self.command = command
        self.port = port
        self.sandbox_ca = sandbox_ca
        """The CA of the sandbox apiservers' webhook client certificate (the one allowed)."""

    def log(self) -> str:
        """The coordinator's output so far."""
        return self.command.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def door(sandbox: state.SandboxState, clusters: Clusters,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[CallerDoor]:
    directory = tmp_path_factory.mktemp("coordinator-webhook-callers")
    ca, cert, key = hubdoor.serving_pair(directory)
    sandbox_pki = pathlib.Path(sandbox.directory) / "pki"
    port = hubside.free_port()
    command = hubside.CoordinatorCommand(
        sandbox.hub.kubeconfig, port=hubside.free_port(), ray_address=None, log=directory / "coordinator.log",
        extra=["--webhook-port", str(port), "--webhook-cert", str(cert), "--webhook-key", str(key),
               "--webhook-client-ca", str(sandbox_pki / "ca.crt"),
               "--webhook-allowed-cn", admission.WEBHOOK_CLIENT_CN])
    with hubdoor.watched_namespace(clusters) as namespace, hubdoor.registered(
            clusters, url=f"https://127.0.0.1:{port}/validate", ca=ca, namespace=namespace):
        command.start()
        try:
            running = CallerDoor(
                command, port=port,
                sandbox_ca=pki.CertificateAuthority.load(sandbox_pki / "ca.crt", sandbox_pki / "ca.key"),
                namespace=namespace, ca=ca, kubeconfig=sandbox.hub.kubeconfig,
                custom=clusters.custom(hubside.HUB))

            def heeded() -> bool:
                assert command.alive, f"the coordinator exited:\n{running.log()[-3000:]}"
                return running.refused_probe()

            wait_for(heeded, timeout=WAIT, interval=0.5,
                     message=lambda: "the hub apiserver's calls were never answered (does it present its "
                                     f"client certificate?):\n{running.log()[-3000:]}")
            yield running
        finally:
            command.stop()


def spread_review(door: CallerDoor, uid: str) -> bytes:
    """A FederatedSpread CREATE review of a valid spread, as anyone could post it."""
    body = door.spread(uid)
    body["metadata"]["namespace"] = door.namespace
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": uid, "operation": "CREATE", "namespace": door.namespace, "name": uid,
                    "kind": {"group": common.API_GROUP, "version": common.API_VERSION,
                             "kind": "FederatedSpread"},
                    "resource": {"group": common.API_GROUP, "version": common.API_VERSION,
                                 "resource": spread_api.PLURAL},
                    "userInfo": {"username": "mallory"}, "object": body}}).encode()


def test_the_hub_apiserver_s_calls_are_answered(door: CallerDoor) -> None:
    result = door.kubectl_apply(door.spread("bad", cap="140%", duplicate_name=True))
    assert result.returncode != 0, result.stdout
    assert f"FederatedSpread {door.namespace}/bad is invalid" in result.stderr
    assert "spec.subsets[0].maxReplicas: maxReplicas percentage must be between 0% and 100%, got 140%" \
        in result.stderr
    assert "spec.subsets[1].name: duplicate subset name 'onprem'" in result.stderr
    assert door.stored("bad") is None

    result = door.kubectl_apply(door.spread("good"))
    assert result.returncode == 0, result.stderr
    assert door.stored("good") is not None


def test_forged_reviews_are_refused_by_who_sends_them(door: CallerDoor, tmp_path: pathlib.Path) -> None:
    status, answer = door.post(door.port, spread_review(door, "anonymous"))
    assert status == 401, answer
    assert "client certificate" in answer["reason"]

    intruder = door.sandbox_ca.issue_client("intruder").write(tmp_path, "intruder")
    status, answer = door.post(door.port, spread_review(door, "intruder"), client_pair=intruder)
    assert status == 403, answer
    assert "'intruder'" in answer["reason"]

    rogue = pki.CertificateAuthority.create("rogue").issue_client(admission.WEBHOOK_CLIENT_CN)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        door.post(door.port, spread_review(door, "rogue"), client_pair=rogue.write(tmp_path, "rogue"))

    allowed = door.sandbox_ca.issue_client(admission.WEBHOOK_CLIENT_CN).write(tmp_path, "allowed")
    status, answer = door.post(door.port, spread_review(door, "allowed"), client_pair=allowed)
    assert status == 200, answer
    assert answer["response"] == {"uid": "allowed", "allowed": True}

    assert door.command.alive, door.log()[-3000:]
    assert door.refused_probe(), "the hub apiserver's calls are still answered"


def test_an_authenticating_webhook_does_not_warn_that_it_is_open(door: CallerDoor) -> None:
    log = door.log()
    assert "webhook serving on" in log, log[-3000:]
    assert webhook_clients.UNAUTHENTICATED not in log
