"""Member HorizontalPodAutoscalers on a spread's member workload: never fought, shown on the spread.

The pure parts, table-driven: which HPAs scale which workload (`views.autoscaler_view`), the body
the workload sync writes while one does (`rendering.keeping_quantity`: the member's replicas, the
assignment's hash), and the coordinator's path from the pod counts to `AutoscalerConflict`. The
real watch, HPA and workload: tests/integration/test_usage_sandbox.py.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from agents import outbox, pod_ledger
from agents.cache import views
from agents.controller import rendering
from federation.api import names
from federation.coordinator.model import world
from federation.coordinator.wire import convert
from federation.core import placement, spread_conditions, spread_status
from federation.rpc import assignment
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)


def _hpa(kind: str, name: str, *, api_version: str = "apps/v1") -> dict[str, Any]:
    return {"metadata": {"name": "web-hpa", "namespace": "shop"},
            "spec": {"scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": name},
                     "minReplicas": 1, "maxReplicas": 5}}


@pytest.mark.parametrize(("hpa", "target"), [
    pytest.param(_hpa("Deployment", "web"), views.autoscaler_target("Deployment", "shop", "web"),
                 id="Deployment"),
    pytest.param(_hpa("StatefulSet", "db"), views.autoscaler_target("StatefulSet", "shop", "db"),
                 id="StatefulSet"),
    pytest.param(_hpa("Deployment", "web", api_version="extensions/v1beta1"),
                 views.autoscaler_target("Deployment", "shop", "web"), id="any group the HPA names"),
    pytest.param({"metadata": {"name": "broken", "namespace": "shop"}},
                 views.autoscaler_target("", "shop", ""), id="no scaleTargetRef: matches no workload"),
])
def test_an_hpa_is_indexed_by_the_workload_it_scales(hpa: dict[str, Any], target: str) -> None:
    assert views.autoscaler_view(hpa).target == target


def _assignment(replicas: int) -> assignment.Assignment:
    return assignment.Assignment(
        spread="shop/web", generation=2, namespace="shop", workload="web", replicas=replicas,
        template={"spec": {"selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}}}}},
        template_revision="r", subsets=(assignment.SubsetRule(name="a", index=0, quota=replicas),),
        subset_count=1, spread_uid="spread-uid", federation="prod")


@pytest.mark.parametrize(("assigned", "live", "written"), [
    pytest.param(3, 7, 7, id="the HPA's count is kept"),
    pytest.param(3, None, 3, id="unknown live count: the assignment's"),
])
def test_the_sync_keeps_the_member_s_replicas(assigned: int, live: int | None, written: int) -> None:
    desired = rendering.render(_assignment(assigned))
    body = rendering.keeping_quantity(desired, live)
    assert body["spec"]["replicas"] == written
    hash_annotation = names.DESIRED_HASH_ANNOTATION
    wanted = desired["metadata"]["annotations"][hash_annotation]
    assert body["metadata"]["annotations"][hash_annotation] == wanted
    assert desired["spec"]["replicas"] == assigned, "the rendered assignment is not changed"
    if live is not None:  # the live object at the HPA's count, carrying our hash: nothing to write
        live_annotations = {hash_annotation: desired["metadata"]["annotations"][hash_annotation]}
        assert rendering.is_current(annotations=live_annotations, replicas=live, desired=body)
        assert not rendering.is_current(annotations=live_annotations, replicas=live, desired=desired)


def test_the_coordinator_shows_autoscalerconflict_until_the_report_clears() -> None:
    model = world.World(ManualClock(T0))
    sent = outbox.counts_message({"shop/web": {"a": pod_ledger.SubsetCounts(running=3)}}, sequence=1,
                                 generations={}, observed_at=T0, autoscalers={"shop/web": ["shop/web-hpa"]})
    found = convert.counts_from_pb(sent.pod_counts)
    assert found.autoscalers == {"shop/web": ("shop/web-hpa",)}
    model.pod_counts("dc1", found.counts, autoscalers=found.autoscalers)
    model.pod_counts("aws", {}, autoscalers={})
    assert model.pods.autoscalers_for("shop/web") == {"dc1": ("shop/web-hpa",)}

    spec = builders.spread_spec({"name": "a", "clusters": ["dc1"]})
    result = placement.place(spec, replicas=3, snapshot=builders.snapshot(
        builders.member("dc1", builders.pool(4))), now=T0)

    def conditions() -> dict[str, Any]:
        made = spread_status.spread_status(placement=result, spec=spec, generation=1, reports={}, marks=[],
                                           previous=None, now=T0,
                                           autoscalers=model.pods.autoscalers_for("shop/web"))
        return {c.type: c for c in made.conditions}

    shown = conditions()[spread_conditions.AUTOSCALER_CONFLICT]
    assert (shown.status, shown.reason) == ("True", "MemberAutoscaler")
    assert "dc1: shop/web-hpa" in shown.message and "left alone" in shown.message
    model.pod_counts("dc1", found.counts, autoscalers={})
    assert spread_conditions.AUTOSCALER_CONFLICT not in conditions()
