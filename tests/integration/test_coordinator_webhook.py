"""The coordinator's validating webhook, called by the real hub apiserver over HTTPS.

A real `CoordinatorProcess` (in this process, placing without Ray) serves the webhook on
127.0.0.1 with a certificate from a test CA; the hub holds the coordinator's own
`registration.configuration` (a `url` clientConfig, narrowed to this module's namespace and to
objects labelled for it, so that other tests on the shared hub never meet it). Then, with the real
kubectl and the real apiserver:

* a spread with `maxReplicas: "140%"` and a duplicate subset name is refused, both problems with
  their field paths in kubectl's error, and nothing is stored;
* a valid spread is stored; a second spread of its Deployment is refused, naming the first;
* a `spec.propagate` entry of a cluster-scoped kind, and one of `policy/v1`, which the 1.20 hub
  does not serve, are refused with their field paths; `policy/v1beta1` is stored;
* with the webhook server stopped, an invalid spread is stored (failurePolicy Ignore) and its
  Valid condition says what is wrong (the second line of defence);
* a malformed AdmissionReview POSTed to the server gets 400 with the reason: this coordinator
  runs without `--webhook-client-ca`, so anyone may post (only the hub apiserver may in
  `test_coordinator_webhook_callers.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hubdoor
import hubside
import pytest
from conftest import Clusters
from waiting import wait_for

from federation.coordinator import process as coordinator_main
from federation.coordinator.hub import admission, registration
from federation.sandbox import state

WAIT = 90.0  # generous: the sandbox shares 2 cores with other work


class Door(hubdoor.Door):
    """The hub's door, with the in-process coordinator that serves its webhook."""

    def __init__(self, process: coordinator_main.CoordinatorProcess, **door: Any) -> None:
        super().__init__(**door)
        self.process = process


@pytest.fixture(scope="module")
def door(sandbox: state.SandboxState, clusters: Clusters,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    ca, cert, key = hubdoor.serving_pair(tmp_path_factory.mktemp("coordinator-webhook"))
    settings = admission.WebhookSettings(cert_file=cert, key_file=key, host="127.0.0.1",
                                         port=hubside.free_port())
    with hubdoor.watched_namespace(clusters) as namespace, hubside.running_coordinator(
            sandbox, clusters, members=[], use_ray=False, webhook=settings) as process:
        assert process.webhook is not None
        assert process.hub_synced.wait(WAIT), "the coordinator never listed the hub"
        with hubdoor.registered(clusters, url=process.webhook.url(), ca=ca, namespace=namespace):
            running = Door(process, namespace=namespace, ca=ca, kubeconfig=sandbox.hub.kubeconfig,
                           custom=clusters.custom(hubside.HUB))
            wait_for(running.refused_probe, timeout=WAIT, interval=0.5,
                     message="the hub apiserver never called the registered webhook")
            yield running


def test_kubectl_apply_of_an_invalid_spread_is_refused_with_every_problem(door: Door) -> None:
    result = door.kubectl_apply(door.spread("bad", cap="140%", duplicate_name=True))
    assert result.returncode != 0, result.stdout
    assert f'admission webhook "{registration.SPREADS_WEBHOOK}" denied the request' in result.stderr
    assert f"FederatedSpread {door.namespace}/bad is invalid" in result.stderr
    assert "spec.subsets[0].maxReplicas: maxReplicas percentage must be between 0% and 100%, got 140%" \
        in result.stderr
    assert "spec.subsets[1].name: duplicate subset name 'onprem'" in result.stderr
    assert door.stored("bad") is None


def test_propagate_entries_the_hub_cannot_serve_are_refused_with_their_paths(door: Door) -> None:
    """A cluster-scoped kind (the model's rule) and policy/v1, which this 1.20 hub does not serve
    (its discovery, asked by the coordinator); the same spread naming policy/v1beta1 is stored."""
    body = door.spread("propagating", target="propagated")
    body["spec"]["propagate"] = [
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "name": "web"},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "reader"}]
    result = door.kubectl_apply(body)
    assert result.returncode != 0, result.stdout
    assert "spec.propagate[1].kind: ClusterRole is cluster-scoped" in result.stderr
    assert ("spec.propagate[0].apiVersion: the hub does not serve policy/v1 (it serves policy/v1beta1)"
            in result.stderr)
    assert door.stored("propagating") is None
    body["spec"]["propagate"] = [
        {"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "name": "web"}]
    result = door.kubectl_apply(body)
    assert result.returncode == 0, result.stderr
    assert door.stored("propagating") is not None


def test_a_valid_spread_is_stored_and_a_second_one_of_its_deployment_refused(door: Door) -> None:
    result = door.kubectl_apply(door.spread("first", target="shared"))
    assert result.returncode == 0, result.stderr
    assert door.stored("first") is not None
    key = f"{door.namespace}/first"
    wait_for(lambda: door.process.world.spread(key), timeout=WAIT,
             message="the coordinator never took the first spread into its World")
    result = door.kubectl_apply(door.spread("second", target="shared"))
    assert result.returncode != 0, result.stdout
    assert (f"spec.targetRef.name: Deployment {door.namespace}/shared is already spread by "
            f"FederatedSpread {key}") in result.stderr
    assert door.stored("second") is None
    edited = door.spread("first", target="shared", cap=4)
    assert door.kubectl_apply(edited).returncode == 0, "the holder itself may still be edited"


def test_a_malformed_review_posted_to_the_server_is_a_400(door: Door) -> None:
    assert door.process.webhook is not None
    status, answer = door.post(door.process.webhook.port, b'{"apiVersion": "admission.k8s.io/v1", '
                               b'"kind": "AdmissionReview", "request": {"uid": "x", "operation": "CREATE"}}')
    assert status == 400
    assert answer == {"code": 400, "reason": "request.kind is required"}


def test_with_the_webhook_down_the_spread_is_stored_and_its_condition_says_why(door: Door) -> None:
    webhook = door.process.webhook
    assert webhook is not None
    webhook.stop()
    try:
        result = door.kubectl_apply(door.spread("stored-anyway", cap="140%"))
    finally:
        webhook.start()  # same port: the other tests of the module find it serving again
    assert result.returncode == 0, f"failurePolicy Ignore must let it through: {result.stderr}"
    assert door.stored("stored-anyway") is not None

    def valid_condition() -> dict[str, Any] | None:
        stored = door.stored("stored-anyway") or {}
        for condition in (stored.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Valid":
                return dict(condition)
        return None

    condition = wait_for(valid_condition, timeout=WAIT, message="no Valid condition was written")
    assert condition["status"] == "False"
    assert "spec.subsets[0].maxReplicas" in condition["message"]
