"""The coordinator's validating webhook: the review handling, then the HTTPS server around it.

Why here: what the door refuses must be exactly what the Valid condition reports (every problem,
with its field path), plus the rules across spreads decided from a real World fed hub events as
the coordinator's loop feeds them; and an UPDATE must never be refused for problems the stored
object already had. The hub's real apiserver calling it: tests/integration/test_coordinator_webhook.py.
"""

from __future__ import annotations

import copy
import datetime
import http.client
import json
import pathlib
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from click import testing

from federation import cli
from federation.api import common
from federation.certs import pki
from federation.coordinator import facade
from federation.coordinator.hub import admission
from federation.coordinator.hub import watcher as hub
from federation.coordinator.model import world
from federation.kube import admission_review as review
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
GROUP_VERSION = f"{common.API_GROUP}/{common.API_VERSION}"


def spread_doc(name: str = "web", *, target: str = "web", cap: int | str = 3,
               created: str = "2025-01-01T00:00:00Z") -> dict[str, Any]:
    """A FederatedSpread as the apiserver sends it in a review."""
    return {"apiVersion": GROUP_VERSION, "kind": "FederatedSpread",
            "metadata": {"name": name, "namespace": "shop", "generation": 1, "creationTimestamp": created,
                         "uid": f"uid-{name}", "managedFields": [{"manager": "kubectl"}]},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                     "subsets": [{"name": "onprem", "clusters": ["dc1"], "maxReplicas": cap},
                                 {"name": "cloud", "clusters": ["aws"]}]}}


def invalid_spread_doc(name: str = "web") -> dict[str, Any]:
    """Two problems: a percentage over 100% and a duplicate subset name."""
    doc = spread_doc(name, cap="140%")
    doc["spec"]["subsets"][1]["name"] = "onprem"
    return doc


def cluster_doc(name: str = "dc1", *, taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"apiVersion": GROUP_VERSION, "kind": "MemberCluster",
            "metadata": {"name": name, "labels": {"topology.fedspread.io/region": "eu"}},
            "spec": {"taints": taints or []}}


def request(obj: dict[str, Any] | None, *, operation: str = "CREATE", old: dict[str, Any] | None = None,
            resource: str = "federatedspreads", sub_resource: str = "") -> dict[str, Any]:
    kind = "MemberCluster" if resource == "memberclusters" else "FederatedSpread"
    body: dict[str, Any] = {
        "uid": "u-1", "operation": operation, "name": (obj or old or {}).get("metadata", {}).get("name", ""),
        "kind": {"group": common.API_GROUP, "version": common.API_VERSION, "kind": kind},
        "resource": {"group": common.API_GROUP, "version": common.API_VERSION, "resource": resource},
        "object": obj, "oldObject": old}
    if resource == "federatedspreads":
        body["namespace"] = "shop"
    if sub_resource:
        body["subResource"] = sub_resource
    return {"apiVersion": review.API_VERSION, "kind": review.KIND, "request": body}


class Hub:
    """A World fed spread events through `hub.apply_to_world`, and the webhook over it."""

    def __init__(self, *, synced: bool = True) -> None:
        clock = ManualClock(T0)
        self.coordinator = facade.Coordinator(world.World(clock), clock=clock, coordinator_id="t")
        self.synced = threading.Event()
        if synced:
            self.synced.set()
        self.door = admission.SpecAdmission(self.coordinator, hub_synced=self.synced.is_set)

    def seen(self, doc: dict[str, Any]) -> None:
        """The hub watcher saw `doc` (and the World took it)."""
        item, found = hub.parse_spread(doc)
        assert item is not None, found
        event = hub.HubEvent("spread", "ADDED", item.key, spread=item, generation=1)
        with self.coordinator.lock:
            self.coordinator.publish(hub.apply_to_world(self.coordinator.world, event))

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The decoded response of the review `body`, through the bytes entry point."""
        decoded: dict[str, Any] = json.loads(self.door.respond(json.dumps(body).encode()))
        assert decoded["apiVersion"] == review.API_VERSION and decoded["kind"] == review.KIND
        response: dict[str, Any] = decoded["response"]
        assert response["uid"] == "u-1"
        return response


def refusal(response: dict[str, Any]) -> str:
    assert response["allowed"] is False, response
    assert response["status"]["code"] == admission.INVALID
    message: str = response["status"]["message"]
    return message


# --- one object at a time: the Valid condition's checks ----------------------------------------


def test_an_invalid_spread_is_refused_with_every_problem_and_its_path() -> None:
    message = refusal(Hub().answer(request(invalid_spread_doc())))
    assert message.startswith("FederatedSpread shop/web is invalid:")
    assert ("spec.subsets[0].maxReplicas: maxReplicas percentage must be between 0% and 100%, got 140%"
            in message)
    assert "spec.subsets[1].name: duplicate subset name 'onprem'" in message


def test_the_refusal_lists_what_the_valid_condition_lists() -> None:
    doc = invalid_spread_doc()
    _, found = hub.parse_spread(doc)
    message = refusal(Hub().answer(request(doc)))
    assert len(found) == 2 and all(f"  - {problem}" in message.splitlines() for problem in found)


def test_schema_and_cross_field_problems_come_in_one_answer() -> None:
    doc = spread_doc(cap="140%")
    doc["spec"]["subsets"][1]["clusters"] = "aws"  # a schema problem beside the percentage rule
    message = refusal(Hub().answer(request(doc)))
    assert "spec.subsets[1].clusters" in message and "spec.subsets[0].maxReplicas" in message


@pytest.mark.parametrize(("api_version", "kind", "said"), [
    ("apps/v1", "Job", "spec.targetRef.kind: Job is served as batch/v1, not apps/v1"),
    ("batch/v1", "Deployment", "spec.targetRef.kind: Deployment is served as apps/v1, not batch/v1"),
])
def test_a_targetref_naming_a_kind_with_another_api_version_is_refused(api_version: str, kind: str,
                                                                       said: str) -> None:
    doc = spread_doc()
    doc["spec"]["targetRef"].update(apiVersion=api_version, kind=kind)
    assert said in refusal(Hub().answer(request(doc)))
    doc["spec"]["targetRef"].update(apiVersion="batch/v1", kind="Job")
    assert Hub().answer(request(doc))["allowed"] is True, "a batch/v1 Job is a target"


def test_a_valid_spread_is_allowed() -> None:
    response = Hub().answer(request(spread_doc()))
    assert response["allowed"] is True and "warnings" not in response


def test_a_member_cluster_with_bad_taints_is_refused_with_paths() -> None:
    doc = cluster_doc(taints=[{"key": "", "effect": "Sometimes"}])
    message = refusal(Hub().answer(request(doc, resource="memberclusters")))
    assert message.startswith("MemberCluster dc1 is invalid:")
    assert "spec.taints[0].key" in message and "spec.taints[0].effect" in message


def test_a_valid_member_cluster_is_allowed() -> None:
    taints = [{"key": "maintenance", "effect": "NoSchedule"}]
    assert Hub().answer(request(cluster_doc(taints=taints), resource="memberclusters"))["allowed"] is True


@pytest.mark.parametrize(("operation", "sub_resource", "resource"), [
    ("DELETE", "", "federatedspreads"),
    ("UPDATE", "status", "federatedspreads"),
    ("CREATE", "", "deployments"),
])
def test_what_is_not_a_spec_write_of_ours_is_allowed_unread(operation: str, sub_resource: str,
                                                            resource: str) -> None:
    body = request(invalid_spread_doc(), operation=operation, sub_resource=sub_resource, resource=resource,
                   old=invalid_spread_doc())
    assert Hub().answer(body)["allowed"] is True


# --- updates: refused only for what they add ---------------------------------------------------


def test_an_update_keeping_the_stored_problems_is_allowed_with_them_as_warnings() -> None:
    stored = invalid_spread_doc()
    edited = copy.deepcopy(stored)
    edited["metadata"]["labels"] = {"team": "shop"}
    edited["metadata"]["finalizers"] = []
    response = Hub().answer(request(edited, operation="UPDATE", old=stored))
    assert response["allowed"] is True
    assert len(response["warnings"]) == 2
    assert any("spec.subsets[0].maxReplicas" in warning for warning in response["warnings"])


def test_an_update_adding_a_problem_is_refused_with_all_of_them() -> None:
    stored = spread_doc(cap="140%")
    edited = invalid_spread_doc()
    message = refusal(Hub().answer(request(edited, operation="UPDATE", old=stored)))
    assert "spec.subsets[1].name" in message and "spec.subsets[0].maxReplicas" in message


def test_an_update_that_fixes_the_spread_is_allowed() -> None:
    response = Hub().answer(request(spread_doc(), operation="UPDATE", old=invalid_spread_doc()))
    assert response["allowed"] is True and "warnings" not in response


# --- rules across spreads, from the World ------------------------------------------------------


def test_a_second_spread_of_a_deployment_is_refused_naming_the_holder() -> None:
    cluster = Hub()
    cluster.seen(spread_doc("web"))
    message = refusal(cluster.answer(request(spread_doc("web-again", created="2025-01-02T00:00:00Z"))))
    assert "spec.targetRef.name: Deployment shop/web is already spread by FederatedSpread shop/web" in message


def test_a_spread_of_another_deployment_is_allowed_beside_it() -> None:
    cluster = Hub()
    cluster.seen(spread_doc("web"))
    assert cluster.answer(request(spread_doc("api", target="api")))["allowed"] is True


def test_the_holder_itself_may_be_updated() -> None:
    cluster = Hub()
    cluster.seen(spread_doc("web"))
    assert cluster.answer(request(spread_doc("web", cap=4), operation="UPDATE",
                                  old=spread_doc("web")))["allowed"] is True


def test_a_live_spread_may_not_change_its_target() -> None:
    cluster = Hub()
    cluster.seen(spread_doc("web"))
    message = refusal(cluster.answer(request(spread_doc("web", target="api"), operation="UPDATE",
                                             old=spread_doc("web"))))
    assert ("spec.targetRef: targetRef cannot change on a live spread "
            "(from Deployment 'web' to Deployment 'api')" in message)


def test_before_the_hub_is_listed_the_rules_across_spreads_are_left_to_the_condition() -> None:
    cluster = Hub(synced=False)
    cluster.seen(spread_doc("web"))
    assert cluster.answer(request(spread_doc("web-again")))["allowed"] is True
    assert refusal(cluster.answer(request(invalid_spread_doc("web-again")))), "one object is still checked"


def test_a_busy_world_leaves_the_rules_across_spreads_to_the_condition(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = Hub()
    cluster.seen(spread_doc("web"))
    monkeypatch.setattr(admission, "WORLD_WAIT", 0.01)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with cluster.coordinator.lock:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        held.wait()
        assert cluster.answer(request(spread_doc("web-again")))["allowed"] is True
    finally:
        release.set()
        holder.join()
    assert refusal(cluster.answer(request(spread_doc("web-again")))), "decided again once the lock is free"


# --- malformed reviews ---------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "reason"), [
    (b"", "empty body"),
    (b"{not json", "not JSON"),
    (json.dumps(request(None)).encode(), "request.object is required for CREATE"),
    (json.dumps(request(spread_doc(), operation="UPDATE")).encode(), "request.oldObject is required"),
    (json.dumps({"apiVersion": review.API_VERSION, "kind": review.KIND, "request": {"uid": "u"}}).encode(),
     "request.operation is required"),
])
def test_a_malformed_review_is_a_review_error_with_its_reason(body: bytes, reason: str) -> None:
    with pytest.raises(review.ReviewError, match=reason):
        Hub().door.respond(body)


# --- the HTTPS server ----------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: pathlib.Path) -> Iterator[tuple[Hub, http.client.HTTPSConnection]]:
    ca = pki.CertificateAuthority.create("admission-test-ca")
    cert, key = ca.issue_server("fedspread-coordinator", ips=("127.0.0.1",)).write(tmp_path, "webhook")
    cluster = Hub(synced=False)
    server = admission.server(cluster.door, admission.WebhookSettings(cert_file=cert, key_file=key, port=0,
                                                                      host="127.0.0.1")).start()
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=30)
    try:
        yield cluster, connection
    finally:
        connection.close()
        server.stop()


def post(connection: http.client.HTTPSConnection, body: bytes, *,
         path: str = admission.VALIDATE_PATH + "?timeout=5s") -> tuple[int, Any]:
    connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def test_the_server_answers_a_review_and_a_malformed_one_is_a_400(
        served: tuple[Hub, http.client.HTTPSConnection]) -> None:
    _, connection = served
    status, answer = post(connection, b'{"apiVersion": "admission.k8s.io/v1"')
    assert status == 400 and "not JSON" in answer["reason"], answer
    status, answer = post(connection, json.dumps(request(None)).encode())
    assert status == 400 and answer["reason"] == "request.object is required for CREATE", answer
    status, answer = post(connection, json.dumps(request(invalid_spread_doc())).encode())
    assert status == 200 and answer["response"]["allowed"] is False, "still serving after bad requests"
    status, answer = post(connection, b"{}", path="/mutate")
    assert status == 404 and "/validate" in answer["reason"]


def test_readyz_waits_for_the_hub_list(served: tuple[Hub, http.client.HTTPSConnection]) -> None:
    cluster, connection = served
    connection.request("GET", "/readyz")
    response = connection.getresponse()
    assert (response.status, response.read()) == (503, b"not ready: the hub is not listed yet\n")
    cluster.synced.set()
    connection.request("GET", "/readyz")
    assert connection.getresponse().status == 200


# --- the flags ------------------------------------------------------------------------------------


def test_a_webhook_certificate_without_its_key_is_a_usage_error(tmp_path: pathlib.Path) -> None:
    cert = tmp_path / "tls.crt"
    cert.write_text("x")
    result = testing.CliRunner().invoke(cli.main, ["coordinator", "--no-ray", "--insecure",
                                                   "--webhook-cert", str(cert)])
    assert result.exit_code == 2, result.output
    assert "--webhook-cert and --webhook-key go together" in result.output


def test_an_unloadable_webhook_certificate_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_text("not a certificate")
    key.write_text("not a key")
    with pytest.raises(ssl.SSLError):
        admission.server(Hub().door, admission.WebhookSettings(cert_file=cert, key_file=key, port=0))


def test_an_object_without_a_namespace_is_judged_in_the_requests() -> None:
    cluster = Hub()
    cluster.seen(spread_doc("web"))
    doc = spread_doc("web-again")
    del doc["metadata"]["namespace"]  # the request's namespace is the spread's
    assert "already spread by FederatedSpread shop/web" in refusal(cluster.answer(request(doc)))
