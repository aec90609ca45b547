"""Pure parts of the agent's controller: pod/node JSON to compact views, Deployment rendering, costs.

These are the conversions the integration tests rely on without seeing them: a pod's JSON becomes
the PodRecord the bookkeeping counts (subset, revision, readiness, unschedulable time, current
cost), an assignment becomes the member Deployment (and its hash decides whether anything is
written), and a spread's pods get their deletion costs per template revision.
"""

from __future__ import annotations

import copy
import datetime
import json
from typing import Any

import pytest

from agents import pod_ledger
from agents.cache import views
from agents.controller import reconciler, workload
from federation.api import names
from federation.rpc import assignment

T0 = "2024-05-01T12:00:00Z"
T1 = "2024-05-01T12:00:07Z"
AT0 = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)
AT1 = datetime.datetime(2024, 5, 1, 12, 0, 7, tzinfo=datetime.UTC)


def pod(name: str = "web-1", *, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, node: str = "", phase: str = "Pending",
        conditions: list[dict[str, Any]] | None = None, deleting: bool = False,
        restarts: tuple[int, ...] = ()) -> dict[str, Any]:
    if labels is None:
        labels = {names.SPREAD_LABEL: "web", names.REVISION_LABEL: "rev1"}
    meta: dict[str, Any] = {
        "name": name, "namespace": "shop", "uid": f"uid-{name}", "creationTimestamp": T0,
        "labels": labels,
        "annotations": annotations or {},
    }
    if deleting:
        meta["deletionTimestamp"] = T1
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}]},
        "status": {"phase": phase, "conditions": conditions or [], "containerStatuses": [
            {"name": f"c{i}", "restartCount": n} for i, n in enumerate(restarts)]},
    }


UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "lastTransitionTime": T1}
READY = {"type": "Ready", "status": "True", "lastTransitionTime": T1}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            pod(annotations={"fedspread.io/subset": "a", "controller.kubernetes.io/pod-deletion-cost": "200"},
                node="n1", phase="Running", conditions=[READY], restarts=(1, 4)),
            {"subset": "a", "revision": "rev1", "phase": "Running", "ready": True, "node_name": "n1",
             "current_cost": 200, "restarts": 4, "unschedulable_since": None, "deleting": False},
            id="running, ready, with subset and cost"),
        pytest.param(
            pod(conditions=[UNSCHEDULABLE]),
            {"subset": None, "phase": "Pending", "ready": False, "unschedulable_since": AT1},
            id="unschedulable: timed from lastTransitionTime"),
        pytest.param(
            pod(conditions=[{**UNSCHEDULABLE, "lastTransitionTime": None}]),
            {"unschedulable_since": AT0},
            id="unschedulable without a time: creation time"),
        pytest.param(
            pod(node="n1", conditions=[UNSCHEDULABLE]),
            {"unschedulable_since": None, "node_name": "n1"},
            id="bound since: stale condition ignored"),
        pytest.param(
            pod(conditions=[{**UNSCHEDULABLE, "reason": "SchedulerError"}]),
            {"unschedulable_since": None},
            id="not scheduled for another reason"),
        pytest.param(
            pod(annotations={"controller.kubernetes.io/pod-deletion-cost": "1e3"}, deleting=True),
            {"current_cost": None, "deleting": True},
            id="malformed cost, being deleted"),
        pytest.param(
            pod(labels={names.SPREAD_LABEL: "web"}),
            {"revision": ""},
            id="bare pod: no template revision"),
    ],
)
def test_spread_pod_from_json(source: dict[str, Any], expected: dict[str, Any]) -> None:
    view = views.spread_pod(source)
    assert view is not None
    identity = (view.spread, view.namespace, view.uid, view.record.name)
    assert identity == ("shop/web", "shop", "uid-web-1", "web-1")
    assert view.record.created == AT0
    assert {k: getattr(view.record, k) for k in expected} == expected


def test_spread_pod_ready_since_and_no_label() -> None:
    ready = views.spread_pod(pod(node="n1", phase="Running", conditions=[READY]))
    assert ready is not None and ready.ready_since == AT1
    assert views.spread_pod(pod(labels={"app": "web"})) is None


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        pytest.param(
            {"metadata": {"name": "n1", "labels": {"zone": "a"}},
             "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule", "timeAdded": T0}]},
             "status": {"allocatable": {"cpu": "4", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": "True"}]}},
            {"labels": {"zone": "a"}, "taints": ({"key": "gpu", "value": "", "effect": "NoSchedule"},),
             "allocatable": {"cpu": "4", "pods": "110"}, "unschedulable": False, "ready": True},
            id="ready tainted node"),
        pytest.param(
            {"metadata": {"name": "n2"}, "spec": {"unschedulable": True},
             "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}},
            {"labels": {}, "taints": (), "allocatable": {}, "unschedulable": True, "ready": False},
            id="cordoned, not ready"),
    ],
)
def test_node_view(node: dict[str, Any], expected: dict[str, Any]) -> None:
    view = views.node_view(node)
    assert {k: getattr(view, k) for k in expected} == expected


def test_views_share_the_texts_pods_and_nodes_repeat() -> None:
    def parsed(source: dict[str, Any]) -> dict[str, Any]:  # as from the apiserver: every text a new copy
        loaded: dict[str, Any] = json.loads(json.dumps(source))
        return loaded

    subset = {names.SUBSET_ANNOTATION: "a"}
    raw = [parsed(pod(name, node="n1", phase="Running", annotations=subset)) for name in ("web-1", "web-2")]
    assert raw[0]["metadata"]["namespace"] is not raw[1]["metadata"]["namespace"]
    first, second = (views.spread_pod(source) for source in raw)
    assert first is not None and second is not None
    for field in ("namespace", "spread"):
        assert getattr(first, field) is getattr(second, field)
    for field in ("subset", "revision", "phase", "node_name"):
        assert getattr(first.record, field) is getattr(second.record, field)
    nodes = [views.node_view(parsed({"metadata": {"name": name, "labels": {"zone": "eu-a"}},
                                     "status": {"allocatable": {"cpu": "16"}}})) for name in ("n1", "n2")]
    assert nodes[0].name is first.record.node_name
    assert nodes[0].labels["zone"] is nodes[1].labels["zone"]
    assert nodes[0].allocatable["cpu"] is nodes[1].allocatable["cpu"]


@pytest.mark.parametrize(
    ("uid", "compact"),
    [
        ("6f1c2a9e-0b7d-4c1e-9a3f-2d5e8b7c6a10", 0x6F1C2A9E0B7D4C1E9A3F2D5E8B7C6A10),
        ("00000000-0000-4000-8000-000000000000", 0x00000000_0000_4000_8000_000000000000),
        ("6F1C2A9E-0B7D-4C1E-9A3F-2D5E8B7C6A10", "6F1C2A9E-0B7D-4C1E-9A3F-2D5E8B7C6A10"),  # not canonical
        ("6f1c2a9e0b7d4c1e9a3f2d5e8b7c6a10", "6f1c2a9e0b7d4c1e9a3f2d5e8b7c6a10"),
        ("uid-web-1", "uid-web-1"),
        ("", ""),
    ],
)
def test_compact_uid_keeps_canonical_uuids_as_ints_and_anything_else_as_text(uid: str,
                                                                             compact: int | str) -> None:
    assert views.compact_uid(uid) == compact
    if isinstance(compact, int):  # and back: no two uids share a compact form
        text = f"{compact:032x}"
        assert f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}" == uid


def test_pod_requests_and_malformed_spec() -> None:
    assert {k: str(v) for k, v in views.pod_requests(pod()).items()} == {"cpu": "1/4"}
    broken = pod()
    broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    assert views.pod_requests(broken) == {}


# --- workload rendering ------------------------------------------------------------------------------

HUB_DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop", "uid": "hub-uid", "resourceVersion": "77",
                 "generation": 3, "labels": {"app": "web"},
                 "annotations": {"deployment.kubernetes.io/revision": "2"},
                 "creationTimestamp": T0, "managedFields": [{"manager": "kubectl"}]},
    "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
             "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
             "template": {"metadata": {"labels": {"app": "web"}, "creationTimestamp": None},
                          "spec": {"containers": [{"name": "c", "image": "web:1"}]}}},
    "status": {"replicas": 10, "readyReplicas": 10},
}


def assigned(*, replicas: int = 4, generation: int = 3, template: dict[str, Any] | None = None
             ) -> assignment.Assignment:
    return assignment.Assignment(
        spread="shop/web-spread", generation=generation, namespace="shop", workload="web", replicas=replicas,
        template=HUB_DEPLOYMENT if template is None else template, template_revision="r",
        subsets=(assignment.SubsetRule(name="a", index=0, quota=3),
                 assignment.SubsetRule(name="b", index=1, quota=1)),
        subset_count=2, spread_uid="spread-uid-1", federation="prod")


def test_render_keeps_workload_fields_and_drops_hub_state() -> None:
    body = workload.render(assigned())
    meta = body["metadata"]
    assert (meta["name"], meta["namespace"]) == ("web", "shop")
    assert meta["labels"] == {"app": "web", "fedspread.io/spread": "web-spread",
                              "fedspread.io/federation": "prod"}
    assert meta["annotations"] == {
        "fedspread.io/generation": "3", "fedspread.io/spread-key": "shop/web-spread",
        "fedspread.io/spread-uid": "spread-uid-1", "fedspread.io/template-revision": "r",
        names.DESIRED_HASH_ANNOTATION: meta["annotations"][names.DESIRED_HASH_ANNOTATION]}
    assert set(meta) == {"name", "namespace", "labels", "annotations"}
    assert "status" not in body
    spec = body["spec"]
    assert spec["replicas"] == 4
    assert spec["selector"] == {"matchLabels": {"app": "web"}}
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1}
    assert spec["template"]["metadata"] == {"labels": {"app": "web", "fedspread.io/spread": "web-spread"}}
    assert HUB_DEPLOYMENT["spec"]["template"]["metadata"]["labels"] == {"app": "web"}, "template mutated"


@pytest.mark.parametrize(
    ("change", "same_hash"),
    [
        pytest.param({}, True, id="same assignment"),
        pytest.param({"replicas": 5}, False, id="replicas"),
        pytest.param({"generation": 4}, False, id="generation"),
        pytest.param({"template": {**HUB_DEPLOYMENT, "status": {"replicas": 3}}}, True, id="hub status only"),
        pytest.param({"template": {**HUB_DEPLOYMENT, "metadata": {**HUB_DEPLOYMENT["metadata"],
                                                                  "resourceVersion": "78"}}},
                     True, id="hub resourceVersion only"),
    ],
)
def test_hash_follows_what_is_written(change: dict[str, Any], same_hash: bool) -> None:
    first = workload.render(assigned())
    second = workload.render(assigned(**change))
    key = names.DESIRED_HASH_ANNOTATION
    assert (first["metadata"]["annotations"][key] == second["metadata"]["annotations"][key]) is same_hash


@pytest.mark.parametrize(
    ("hash_ok", "replicas", "current"),
    [(True, 4, True), (True, 6, False), (False, 4, False)],
)
def test_is_current(hash_ok: bool, replicas: int, current: bool) -> None:
    desired = workload.render(assigned())
    digest = desired["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION] if hash_ok else "other"
    assert workload.is_current(annotations={names.DESIRED_HASH_ANNOTATION: digest}, replicas=replicas,
                               desired=desired) is current


def test_merged_keeps_live_identity_and_foreign_annotations() -> None:
    live = copy.deepcopy(HUB_DEPLOYMENT)
    desired = workload.render(assigned(replicas=2))
    body = workload.merged(live, desired)
    assert body["metadata"]["resourceVersion"] == "77"
    assert body["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert body["metadata"]["annotations"]["fedspread.io/spread-key"] == "shop/web-spread"
    assert body["spec"] == desired["spec"]
    assert "status" not in body and "managedFields" not in body["metadata"]


# --- deletion cost inputs ----------------------------------------------------------------------------


def test_subset_order_fills_missing_indices() -> None:
    value = assignment.Assignment(
        spread="shop/s", generation=1, namespace="shop", workload="w", replicas=1, template={},
        template_revision="", subsets=(assignment.SubsetRule(name="c", index=2, quota=1),), subset_count=3)
    order = reconciler.subset_order(value)
    assert len(order) == 3 and order[2] == "c"
    assert len(set(order)) == 3


def spread_pod(name: str, subset: str | None, *, revision: str = "rev1", created: int = 0) -> views.SpreadPod:
    record = pod_ledger.PodRecord(
        name=name, subset=subset, revision=revision, phase="Running", ready=True, node_name="n1",
        created=AT0 + datetime.timedelta(seconds=created))
    return views.SpreadPod(namespace="shop", spread="shop/web-spread", uid=f"uid-{name}", record=record)


def test_desired_costs_of_one_revision() -> None:
    # Quotas a=3, b=1, n=2. 2 in a and 2 in b: the newer b pod is over quota; n1 has no subset.
    pods = [spread_pod("a1", "a"), spread_pod("a2", "a"), spread_pod("b1", "b"),
            spread_pod("b2", "b", created=5), spread_pod("n1", None)]
    expected = {"a1": 200, "a2": 200, "b1": 100, "b2": -200, "n1": -300}
    assert reconciler.desired_costs(assigned(), pods) == expected
    assert reconciler.desired_costs(assigned(), pods, revisions=["rev9", "rev1"]) == expected


def test_desired_costs_during_a_rollout_put_old_revisions_below_new_ones() -> None:
    # The new revision rev2 holds b's one place: rev1's b pods are beyond what b still needs
    # (replaced: -100·(n-i) = -100), and every rev1 pod is a band (100·(2n+2) = 600) below: b's old
    # pods go first, then a's.
    pods = [spread_pod("a1", "a"), spread_pod("a2", "a"), spread_pod("b1", "b"),
            spread_pod("b2", "b", created=5), spread_pod("n1", None),
            spread_pod("new-b", "b", revision="rev2")]
    assert reconciler.desired_costs(assigned(), pods, revisions=["rev2", "rev1"]) == {
        "a1": -400, "a2": -400, "b1": -700, "b2": -700, "n1": -900, "new-b": 100}
    # Rolled back to rev1 (its ReplicaSet renumbered newest): rev2's pod is the old one now.
    back = reconciler.desired_costs(assigned(), pods, revisions=["rev1", "rev2"])
    assert back["a1"] == 200 and back["b1"] == 100 and back["b2"] == -200 and back["new-b"] < -200


def test_revisions_the_member_does_not_name_rank_by_their_newest_pod() -> None:
    pods = [spread_pod("o1", "a", revision="old", created=0),
            spread_pod("o2", "a", revision="old", created=9),
            spread_pod("n1", "a", revision="new", created=20),
            spread_pod("x1", "a", revision="x", created=1)]
    assert reconciler.revision_order(pods, known=()) == ["new", "old", "x"]
    assert reconciler.revision_order(pods, known=["x", "gone"]) == ["x", "new", "old"]
