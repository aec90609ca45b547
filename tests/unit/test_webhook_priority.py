"""A subset patch that changes `priorityClassName`: the JSONPatch drops the old resolved priority.

The Priority admission plugin runs before mutating webhooks and writes `spec.priority` (and
`spec.preemptionPolicy`) from the pod's class; when a webhook changes the pod, the apiserver runs
the in-tree plugins again, and Priority then refuses a pod whose `priority` differs from what the
new class resolves to ("the integer value of priority (N) must not be provided in pod spec"). So
the webhook's patch must remove the values resolved from the old class (docs/decisions.md).

Reviews go through the real handler and bookkeeping; the returned JSONPatch is applied with the
`jsonpatch` library to get the pod the apiserver would go on with.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest

from agents import bookkeeping, metrics
from agents.webhook import handler
from federation.api import names
from federation.rpc import assignment

NAMESPACE = "shop"


def admitted(patch: dict[str, Any], spec: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the JSONPatch, the pod after it) for a pod with `spec` admitted into a subset with `patch`."""
    book = bookkeeping.Bookkeeping()
    rule = assignment.SubsetRule(name="a", index=0, quota=5, patch=patch)
    book.set_assignment(assignment.Assignment(
        spread=f"{NAMESPACE}/web", generation=1, namespace=NAMESPACE, workload="web", replicas=5,
        template={}, template_revision="r1", subsets=(rule,), subset_count=1))
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p1", "namespace": NAMESPACE, "labels": {names.SPREAD_LABEL: "web"}},
           "spec": {"containers": [{"name": "app", "image": "nginx"}], **spec}}
    request = {"uid": "u1", "operation": "CREATE", "namespace": NAMESPACE, "name": "p1",
               "kind": {"group": "", "version": "v1", "kind": "Pod"},
               "resource": {"group": "", "version": "v1", "resource": "pods"}, "object": pod}
    raw = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    answer = handler.AdmissionHandler(book, metrics.AgentMetrics()).respond(raw.encode())
    response = json.loads(answer)["response"]
    assert response["allowed"] is True
    operations: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return operations, jsonpatch.apply_patch(pod, operations)


RESOLVED_LOW = {"priorityClassName": "low", "priority": 100, "preemptionPolicy": "Never"}
"""A pod as the Priority plugin left it: its class and what that class resolved to."""


def test_a_new_class_drops_the_priority_and_preemption_policy_of_the_old_one() -> None:
    operations, stored = admitted({"spec": {"priorityClassName": "high"}}, RESOLVED_LOW)
    assert {"op": "remove", "path": "/spec/priority"} in operations
    assert {"op": "remove", "path": "/spec/preemptionPolicy"} in operations
    assert {k: v for k, v in stored["spec"].items() if k != "containers"} == {"priorityClassName": "high"}


def test_a_class_given_to_a_pod_of_the_default_priority_drops_it() -> None:
    _, stored = admitted({"spec": {"priorityClassName": "high"}}, {"priority": 0})  # no default class
    assert stored["spec"]["priorityClassName"] == "high" and "priority" not in stored["spec"]


def test_a_class_removed_by_the_patch_drops_its_priority_too() -> None:
    _, stored = admitted({"spec": {"priorityClassName": None}}, RESOLVED_LOW)
    assert not {"priorityClassName", "priority", "preemptionPolicy"} & stored["spec"].keys()


@pytest.mark.parametrize("patch", [
    {"spec": {"priorityClassName": "low"}},  # the same class: what it resolved to still holds
    {"metadata": {"labels": {"pool": "a"}}},  # no class at all
], ids=["same-class", "no-class"])
def test_a_patch_that_keeps_the_class_keeps_the_priority(patch: dict[str, Any]) -> None:
    operations, stored = admitted(patch, RESOLVED_LOW)
    assert not [op for op in operations if op["path"].startswith(("/spec/priority", "/spec/preemption"))]
    assert {k: stored["spec"][k] for k in RESOLVED_LOW} == RESOLVED_LOW


def test_values_the_patch_sets_itself_are_kept() -> None:
    patch = {"spec": {"priorityClassName": "high", "priority": 1000,
                      "preemptionPolicy": "PreemptLowerPriority"}}
    _, stored = admitted(patch, RESOLVED_LOW)
    assert {k: stored["spec"][k] for k in RESOLVED_LOW} == patch["spec"]
