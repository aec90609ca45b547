"""The hub webhook's warnings on HorizontalPodAutoscalers: warned, never refused.

`core.hpa_advice` table by table (a `Value` target on one of our external metrics, a Job as the
scale target, every autoscaling version's shape), then through the coordinator's webhook
(`hub.admission.SpecAdmission`, bytes in, bytes out): allowed, with the warnings, for CREATE and
UPDATE; the sandbox's hub apiserver printing them is tests/integration/test_hpa_warnings.py.
"""

from __future__ import annotations

import datetime
import json
import threading
from typing import Any

import pytest

from federation.coordinator import facade
from federation.coordinator.hub import admission
from federation.coordinator.model import world
from federation.core import hpa_advice
from federation.core import usage as usage_rules
from federation.kube import admission_review as review
from tests.support.clock import ManualClock

CPU = usage_rules.CPU_UTILIZATION
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def external(name: str, target: dict[str, Any]) -> dict[str, Any]:
    return {"type": "External", "external": {"metric": {"name": name, "selector": {
        "matchLabels": {usage_rules.SPREAD_SELECTOR_LABEL: "web"}}}, "target": target}}


def hpa(*metrics: dict[str, Any], target: dict[str, Any] = DEPLOYMENT) -> dict[str, Any]:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "demo"},
            "spec": {"scaleTargetRef": target, "minReplicas": 2, "maxReplicas": 12, "metrics": list(metrics)}}


VALUE_50 = {"type": "Value", "value": "50"}
AVERAGE_50 = {"type": "AverageValue", "averageValue": "50"}


@pytest.mark.parametrize(("obj", "warned"), [
    (hpa(external(CPU, AVERAGE_50)), []),
    (hpa(external(CPU, VALUE_50)), [CPU]),
    (hpa(external(usage_rules.MEMORY_USAGE, {"type": "Value", "value": "1Gi"}),
         external(CPU, AVERAGE_50), external(usage_rules.READY_REPLICAS, VALUE_50)),
     [usage_rules.MEMORY_USAGE, usage_rules.READY_REPLICAS]),
    (hpa(external("queue-length", VALUE_50)), []),                      # not ours: not our business
    (hpa({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                     "averageUtilization": 50}}}), []),
    # autoscaling/v2beta1: metricName and targetValue / targetAverageValue
    (hpa({"type": "External", "external": {"metricName": CPU, "targetValue": "50"}}), [CPU]),
    (hpa({"type": "External", "external": {"metricName": CPU, "targetAverageValue": "50"}}), []),
    # malformed shapes are the apiserver's to refuse, never a crash here
    ({"spec": {"metrics": "x"}}, []), ({"spec": {"metrics": [1, None, {"external": []}]}}, []), ({}, []),
])
def test_value_targets_on_our_metrics_are_warned(obj: dict[str, Any], warned: list[str]) -> None:
    assert hpa_advice.warnings(obj) == [hpa_advice.value_target_warning(name) for name in warned]


def test_the_warning_says_what_to_do() -> None:
    (warning,) = hpa_advice.warnings(hpa(external(CPU, VALUE_50)))
    assert "only AverageValue works on a hub without pods" in warning and "averageValue" in warning


@pytest.mark.parametrize(("target", "warned"), [
    ({"apiVersion": "batch/v1", "kind": "Job", "name": "etl"}, True),
    ({"apiVersion": "batch/v1beta1", "kind": "CronJob", "name": "etl"}, True),
    (DEPLOYMENT, False),
    ({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"}, False),
    ({"apiVersion": "example.com/v1", "kind": "Job", "name": "x"}, False),  # someone else's Job may scale
    ({"kind": "Job"}, False),
])
def test_a_job_has_no_scale_subresource(target: dict[str, Any], warned: bool) -> None:
    found = hpa_advice.warnings(hpa(external(CPU, AVERAGE_50), target=target))
    assert bool(found) is warned
    assert all("no scale subresource" in warning for warning in found)


def review_of(obj: dict[str, Any], *, operation: str = "CREATE", version: str = "v2") -> bytes:
    request = {"uid": "u-1", "operation": operation, "name": "web", "namespace": "demo",
               "kind": {"group": "autoscaling", "version": version, "kind": "HorizontalPodAutoscaler"},
               "resource": {"group": "autoscaling", "version": version,
                            "resource": "horizontalpodautoscalers"},
               "object": obj, "oldObject": obj if operation == "UPDATE" else None}
    return json.dumps({"apiVersion": review.API_VERSION, "kind": review.KIND, "request": request}).encode()


@pytest.fixture
def door() -> admission.SpecAdmission:
    clock = ManualClock(datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))
    coordinator = facade.Coordinator(world.World(clock), clock=clock, coordinator_id="t")
    synced = threading.Event()
    synced.set()
    return admission.SpecAdmission(coordinator, hub_synced=synced.is_set)


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize("version", ["v2", "v2beta2"])
def test_the_webhook_allows_with_the_warnings(door: admission.SpecAdmission, operation: str,
                                              version: str) -> None:
    obj = hpa(external(CPU, VALUE_50), target={"apiVersion": "batch/v1", "kind": "Job", "name": "etl"})
    response = json.loads(door.respond(review_of(obj, operation=operation, version=version)))["response"]
    assert response["allowed"] is True
    assert len(response["warnings"]) == 2


def test_a_good_hpa_gets_no_warning(door: admission.SpecAdmission) -> None:
    response = json.loads(door.respond(review_of(hpa(external(CPU, AVERAGE_50)))))["response"]
    assert response == {"uid": "u-1", "allowed": True}
