"""The hub workload's observedGeneration waits until every member's controller observed the template.

Why: `kubectl rollout status` on the hub trusts the counts once `observedGeneration` reaches the
hub's generation. Written at once, it let the command succeed on the members' counts of the *old*
template. Each layer is checked: the agent reports the revision its member workload was rendered
from once observed (`member_status`, the wire), and the rule (`observed_everywhere`).
"""

from __future__ import annotations

from typing import Any

import pytest

from agents import outbox
from agents.cache import views
from agents.controller import reconciler, rendering
from federation.api import names
from federation.coordinator.wire import convert
from federation.core import status
from federation.rpc import agent_pb2, assignment

W = status.WorkloadStatus


@pytest.mark.parametrize(("reports", "shares", "expected"), [
    pytest.param({"a": W(template_revision="r2"), "b": W(template_revision="r2")}, {"a": 2, "b": 1}, True,
                 id="every member observed the revision"),
    pytest.param({"a": W(template_revision="r2"), "b": W(template_revision="r1")}, {"a": 2, "b": 1}, False,
                 id="one member still on the old revision"),
    pytest.param({"a": W(template_revision="r2"), "b": W(template_revision="")}, {"a": 2, "b": 1}, False,
                 id="one member's controller has not observed its spec yet"),
    pytest.param({"a": W(template_revision="r2")}, {"a": 2, "b": 1}, False,
                 id="a member with a share that has not reported a workload"),
    pytest.param({"a": W(template_revision="r2"), "b": W(template_revision="r1")}, {"a": 3, "b": 0}, True,
                 id="a member without a share does not hold it back"),
    pytest.param({"a": W(), "b": W(template_revision="r2")}, {"a": 1, "b": 1}, True,
                 id="an older agent's report (no revision) counts as observed"),
])
def test_observed_everywhere(reports: dict[str, W], shares: dict[str, int], expected: bool) -> None:
    assert status.observed_everywhere(reports, revision="r2", shares=shares) is expected


def _member(*, generation: int, observed: int, revision: str) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "shop", "uid": "u1", "generation": generation,
                         "labels": {names.SPREAD_LABEL: "web"},
                         "annotations": {names.TEMPLATE_REVISION_ANNOTATION: revision}},
            "spec": {"replicas": 2}, "status": {"observedGeneration": observed, "replicas": 2}}


def test_views_read_whether_the_controller_observed_the_spec() -> None:
    assert views.workload_view(_member(generation=3, observed=3, revision="r")).status.generation_observed
    assert not views.workload_view(_member(generation=4, observed=3, revision="r")).status.generation_observed


def test_the_rendered_workload_names_its_template_revision() -> None:
    value = assignment.Assignment(
        spread="shop/web", generation=2, namespace="shop", workload="web", replicas=2,
        template={"spec": {"selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}}}}},
        template_revision="r9", subsets=(assignment.SubsetRule(name="a", index=0, quota=2),),
        subset_count=1, spread_uid="spread-uid", federation="prod")
    body = rendering.render(value)
    assert body["metadata"]["annotations"][names.TEMPLATE_REVISION_ANNOTATION] == "r9"


@pytest.mark.parametrize(("generation", "observed", "reported"), [(3, 3, "r7"), (4, 3, "")])
def test_the_report_carries_the_observed_revision_over_the_wire(generation: int, observed: int,
                                                                reported: str) -> None:
    found = reconciler.observed_status(views.workload_view(
        _member(generation=generation, observed=observed, revision="r7")))
    assert found.template_revision == reported
    message = outbox.workload_status(found)
    back = convert.workload_from_pb(agent_pb2.WorkloadStatus.FromString(message.SerializeToString()))
    assert back.template_revision == reported


def test_an_older_agent_reports_no_revision() -> None:
    assert convert.workload_from_pb(agent_pb2.WorkloadStatus(replicas=2)).template_revision is None
