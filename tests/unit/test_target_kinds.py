"""Spreads of a hub ReplicaSet or StatefulSet, part by part: every kind `targetRef` accepts is wired
in each part (the kind table, the agent's strategy, the hub watcher, the hub status rule and
writer); a Deployment and a ReplicaSet of one name are two targets; the hub ReplicaSet's and
StatefulSet's status fields; the agent's cache, owner chain (Pod → ReplicaSet or StatefulSet, no
link between) and admission rule (a StatefulSet's pods by ordinal range); the member workloads it
renders; `simulate` reading the target of the spread's kind. The sandbox tests are
tests/integration/test_replicaset_spread.py and test_statefulset_spread.py."""

from __future__ import annotations

import datetime
import json
import pathlib
import typing
from typing import Any

import pytest
import yaml
from click import testing

from agents import bookkeeping, owners
from agents.cache import store, views
from agents.controller import kinds, rendering
from federation import cli
from federation.api import names
from federation.api import spread as spread_api
from federation.coordinator.hub import status_writer
from federation.coordinator.hub import watcher as hub
from federation.coordinator.model import lifecycle, world
from federation.core import status, workload_kinds
from federation.rpc import assignment
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
RS_UID = "22222222-2222-2222-2222-222222222222"
OTHER_RS_UID = "66666666-6666-6666-6666-666666666666"
DEPLOY_UID = "11111111-1111-1111-1111-111111111111"
SIMULATE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "simulate"

VALUE = assignment.Assignment(
    spread="shop/web", generation=1, namespace="shop", workload="web", replicas=4, template={},
    template_revision="r", subsets=(assignment.SubsetRule(name="a", index=0, quota=4),), subset_count=1,
    spread_uid="spread-uid", federation="prod", kind="ReplicaSet")


# --- every accepted kind is wired everywhere -------------------------------------------------------


def test_every_kind_targetref_accepts_is_wired_in_every_part() -> None:
    accepted = set(typing.get_args(spread_api.TargetKind))
    assert accepted == {"Deployment", "ReplicaSet", "StatefulSet", "Job"}
    assert all(workload_kinds.policy_for(spread_api.TARGET_API_VERSIONS[kind], kind).kind == kind
               for kind in accepted), "each is named with the apiVersion the kind table serves it as"
    assert set(typing.get_args(spread_api.TargetApiVersion)) == {
        p.api_version for p in workload_kinds.POLICIES}
    assert {k.policy.kind for k in kinds.SERVED} == accepted, "the agent writes each"
    assert set(hub.WORKLOAD_STREAMS.values()) == accepted, "the hub watcher follows each"
    assert set(status_writer.STATUS_FIELDS) == accepted, "its hub status is written"
    assert set(status.HUB_STATUS) == accepted - {"Job"}, \
        "the replica kinds' hub status rule (a Job's is federation.core.job_status, with its conditions)"


# --- the coordinator -----------------------------------------------------------------------------


def spread(name: str, kind: str, *, created: str = "2025-01-01T00:00:00Z") -> spread_api.FederatedSpread:
    return spread_api.FederatedSpread.model_validate({
        "metadata": {"name": name, "namespace": "shop", "generation": 1, "creationTimestamp": created},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": kind, "name": "web"},
                 "subsets": [{"name": "a", "clusters": ["dc1"]}]}})


def test_a_deployment_and_a_replicaset_of_one_name_are_two_targets() -> None:
    claims = lifecycle.Lifecycle()
    assert claims.claim(spread("deploy", "Deployment"), placed=set()).admitted
    assert claims.claim(spread("rs", "ReplicaSet", created="2025-01-02T00:00:00Z"), placed=set()).admitted
    assert claims.claim(spread("rs-2", "ReplicaSet", created="2025-01-03T00:00:00Z"), placed=set()).admitted \
        is False, "a second spread of the same ReplicaSet is refused"
    message = claims.refusals()["shop/rs-2"].message
    assert message.startswith("ReplicaSet shop/web is already spread by FederatedSpread shop/rs;"), message


def test_a_hub_workload_event_reaches_only_the_spread_of_its_kind() -> None:
    model = world.World(ManualClock(T0))
    for item in (spread("deploy", "Deployment"), spread("rs", "ReplicaSet")):
        hub.apply_to_world(model, hub.HubEvent("spread", "ADDED", item.key, spread=item, generation=1))
    body = builders.deployment("web", 7, namespace="shop")
    body["kind"] = "ReplicaSet"
    info = hub.parse_workload("ReplicaSet", body)
    assert (info.kind, info.key, info.replicas, info.template["kind"]) == ("ReplicaSet", "shop/web", 7,
                                                                            "ReplicaSet")
    affected = hub.apply_to_world(model, hub.HubEvent("replicaset", "ADDED", "shop/web", workload=info))
    assert affected == {"shop/rs"}
    rs_entry, deploy_entry = model.spread("shop/rs"), model.spread("shop/deploy")
    assert rs_entry is not None and deploy_entry is not None
    assert (rs_entry.replicas, deploy_entry.replicas) == (7, None)


def test_the_world_finds_a_workloads_spreads_by_its_name_through_edits_and_deletions() -> None:
    """`World.spreads_targeting` (what a hub workload event and the Secret reads use instead of a
    scan of every spread) follows a spread's creation, its targetRef edit and its deletion."""
    model = world.World(ManualClock(T0))
    deploy, rs = spread("deploy", "Deployment"), spread("rs", "ReplicaSet")
    model.upsert_spread(deploy)
    model.upsert_spread(rs)

    def named(kind: str, name: str = "web") -> list[str]:
        return [e.key for e in model.spreads_targeting("shop", kind, name)]

    assert (named("Deployment"), named("ReplicaSet"), named("Deployment", "api")) == (
        ["shop/deploy"], ["shop/rs"], [])
    assert model.spreads_targeting("other", "Deployment", "web") == []
    edited = deploy.model_copy(update={"spec": deploy.spec.model_copy(
        update={"target_ref": spread_api.TargetRef(name="api")})})
    model.upsert_spread(edited)
    assert (named("Deployment"), named("Deployment", "api")) == ([], ["shop/deploy"])
    model.upsert_spread(spread("rs-2", "ReplicaSet"))
    assert named("ReplicaSet") == ["shop/rs", "shop/rs-2"]
    model.delete_spread("shop/rs")
    model.delete_spread("shop/deploy")
    assert (named("ReplicaSet"), named("Deployment", "api")) == (["shop/rs-2"], [])


def test_a_targetref_edit_from_deployment_to_replicaset_says_both_kinds() -> None:
    wanted = spread_api.TargetRef(kind="ReplicaSet", name="web")
    message = lifecycle.target_change_message(current=spread_api.TargetRef(name="web").described,
                                              wanted=wanted.described)
    assert "(from Deployment 'web' to ReplicaSet 'web')" in message


def test_the_hub_replicaset_status_is_its_own_fields_summed_over_the_members() -> None:
    members = {"dc1": status.WorkloadStatus(replicas=3, ready=2, available=1, updated=0),
               "aws": status.WorkloadStatus(replicas=2, ready=2, available=2, updated=0)}
    assert status.workload_status("ReplicaSet", members, replicas=6) == {
        "replicas": 5, "fullyLabeledReplicas": 5, "readyReplicas": 4, "availableReplicas": 3}
    assert status.workload_status("Deployment", members, replicas=6) == status.deployment_status(
        members, replicas=6), "a Deployment's status is as before"
    assert set(status.workload_status("ReplicaSet", {}, replicas=0)) == set(status_writer.REPLICASET_FIELDS)


# --- the agent -----------------------------------------------------------------------------------


def replicaset(*, uid: str = RS_UID, deployment: str | None = None, federation: str = "prod",
               status_fields: dict[str, int] | None = None) -> dict[str, Any]:
    """A ReplicaSet `shop/web` labelled for spread web: a member one (marked) or a Deployment's."""
    refs = [{"kind": "Deployment", "name": "web", "uid": deployment, "controller": True}] \
        if deployment else []
    return {"metadata": {"name": "web", "namespace": "shop", "uid": uid, "ownerReferences": refs,
                         "labels": {names.SPREAD_LABEL: "web", names.FEDERATION_LABEL: federation},
                         "annotations": {names.SPREAD_UID_ANNOTATION: "spread-uid",
                                         names.SPREAD_KEY_ANNOTATION: "shop/web", "other.io/x": "y"}},
            "spec": {"replicas": 4}, "status": status_fields or {}}


def empty_cache() -> store.Cache:
    def never(**_: Any) -> Any:
        raise AssertionError("not started")

    return store.Cache(type("Core", (), {"list_node": never, "list_pod_for_all_namespaces": never})(),
                       type("Apps", (), {"list_deployment_for_all_namespaces": never,
                                         "list_replica_set_for_all_namespaces": never,
                                         "list_stateful_set_for_all_namespaces": never})())


def test_a_replicaset_no_deployment_controls_is_a_member_workload_in_the_cache() -> None:
    member = views.replicaset_view(replicaset(status_fields={"replicas": 4, "readyReplicas": 3,
                                                             "availableReplicas": 2}))
    assert member.owner == "" and member.workload is not None
    assert (member.workload.replicas, member.workload.federation, dict(member.workload.annotations)) == (
        4, "prod", {names.SPREAD_UID_ANNOTATION: "spread-uid", names.SPREAD_KEY_ANNOTATION: "shop/web"})
    assert (member.workload.status.replicas, member.workload.status.ready_replicas,
            member.workload.status.available_replicas) == (4, 3, 2)
    assert views.replicaset_view(replicaset(deployment=DEPLOY_UID)).workload is None, \
        "a Deployment's ReplicaSet is a link of its chain, not a workload"

    cache = empty_cache()
    cache._apply(store.REPLICASETS, "ADDED", "shop/web", replicaset())
    found = cache.member_workload("ReplicaSet", "shop", "web")
    assert found is not None and found.uid == RS_UID
    assert cache.member_workload("Deployment", "shop", "web") is None
    assert [w.uid for w in cache.workloads()] == [RS_UID], "the Hello lists it"
    cache._apply(store.REPLICASETS, "MODIFIED", "shop/web", replicaset(deployment=DEPLOY_UID))
    assert cache.member_workload("ReplicaSet", "shop", "web") is None and cache.workloads() == []


def test_a_member_replicasets_pods_are_its_own_with_no_link_between() -> None:
    mine = views.workload_view(replicaset())
    assert owners.controllers(VALUE, mine, lambda _uid: {"never asked"}) == {views.compact_uid(RS_UID)}
    assert owners.controllers(VALUE, views.workload_view(replicaset(federation="staging")),
                              lambda _uid: set()) == frozenset(), "another federation's is not ours"
    assert owners.controllers(VALUE, None, lambda _uid: set()) == frozenset()


@pytest.mark.parametrize(
    ("references", "cached", "verdict"),
    [
        pytest.param([{"kind": "ReplicaSet", "uid": RS_UID}], True, owners.OURS,
                     id="our member ReplicaSet's"),
        pytest.param([{"kind": "ReplicaSet", "uid": OTHER_RS_UID}], True, owners.FOREIGN,
                     id="another ReplicaSet's"),
        pytest.param([{"kind": "Deployment", "uid": DEPLOY_UID}], True, owners.FOREIGN, id="a Deployment's"),
        pytest.param([{"kind": "StatefulSet", "uid": OTHER_RS_UID}], True, owners.FOREIGN,
                     id="a StatefulSet's"),
        pytest.param([{"kind": "ReplicaSet", "uid": RS_UID}], False, owners.UNKNOWN,
                     id="our ReplicaSet not cached yet: by label"),
        pytest.param([], True, owners.UNKNOWN, id="no controller: by label"),
    ],
)
def test_admission_of_a_replicaset_spreads_pod(references: list[dict[str, Any]], cached: bool,
                                              verdict: str) -> None:
    refs = [{**r, "name": "web", "controller": True} for r in references]
    found = owners.admission(VALUE, namespace="shop", owner_references=refs,
                             workload=views.workload_view(replicaset()) if cached else None,
                             replicaset=lambda _n, _m: None)
    assert found == verdict


def test_the_member_replicaset_keeps_the_hubs_selector_template_and_min_ready_seconds() -> None:
    hub_rs = builders.deployment("web", 9, namespace="shop")
    hub_rs["kind"] = "ReplicaSet"
    hub_rs["spec"].update(minReadySeconds=5, strategy={"type": "Recreate"})  # a Deployment's field: dropped
    value = assignment.Assignment(**{**VALUE.__dict__, "template": hub_rs})
    body = rendering.render(value)
    assert (body["apiVersion"], body["kind"], body["metadata"]["name"]) == ("apps/v1", "ReplicaSet", "web")
    assert set(body["spec"]) == {"replicas", "selector", "template", "minReadySeconds"}
    assert body["spec"]["replicas"] == 4 and body["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    assert body["spec"]["template"]["metadata"]["labels"] == {"app": "web", names.SPREAD_LABEL: "web"}
    assert body["metadata"]["labels"][names.FEDERATION_LABEL] == "prod"
    strategy = kinds.strategy_for("apps/v1", "ReplicaSet")
    assert strategy.quantity(body) == 4 and rendering.is_current(
        annotations=body["metadata"]["annotations"], replicas=4, desired=body)
    assert not rendering.is_current(annotations=body["metadata"]["annotations"], replicas=3, desired=body)


# --- simulate ------------------------------------------------------------------------------------


def simulate(tmp_path: pathlib.Path, documents: list[dict[str, Any]], *args: str) -> testing.Result:
    path = tmp_path / "spread.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return testing.CliRunner().invoke(cli.main, ["simulate", "-f", str(path), "--clusters",
                                                 str(SIMULATE / "clusters.yaml"), "-o", "json", *args],
                                      catch_exceptions=False)


def replicaset_spread_documents() -> list[dict[str, Any]]:
    workload, spread_doc = yaml.safe_load_all((SIMULATE / "prefer-onprem.yaml").read_text())
    workload["kind"] = "ReplicaSet"
    spread_doc["spec"]["targetRef"]["kind"] = "ReplicaSet"
    return [workload, spread_doc]


def test_simulate_reads_the_target_of_the_spreads_kind(tmp_path: pathlib.Path) -> None:
    deployment_answer = testing.CliRunner().invoke(cli.main, [
        "simulate", "-f", str(SIMULATE / "prefer-onprem.yaml"), "--clusters", str(SIMULATE / "clusters.yaml"),
        "-o", "json"], catch_exceptions=False)
    result = simulate(tmp_path, replicaset_spread_documents())
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads(deployment_answer.stdout), \
        "the same pod template and replicas, as a ReplicaSet: the same placement"

    template = tmp_path / "deployment.yaml"
    template.write_text(yaml.safe_dump(builders.deployment("web", 3)))
    refused = simulate(tmp_path, replicaset_spread_documents()[1:], "--template", str(template))
    assert refused.exit_code == 2, refused.output
    assert "expected a ReplicaSet document (the spread's targetRef kind)" in refused.output


def test_simulate_refuses_a_kind_targetref_does_not_accept(tmp_path: pathlib.Path) -> None:
    documents = replicaset_spread_documents()
    documents[1]["spec"]["targetRef"]["kind"] = "DaemonSet"
    result = simulate(tmp_path, documents)
    assert result.exit_code == 2, result.output
    assert "spec.targetRef.kind" in result.output


# --- StatefulSet ---------------------------------------------------------------------------------


STS = assignment.Assignment(
    spread="shop/db", generation=1, namespace="shop", workload="db", replicas=4, template={},
    template_revision="r", subsets=(assignment.SubsetRule(name="b", index=1, quota=2),
                                    assignment.SubsetRule(name="a", index=0, quota=2)),
    subset_count=2, spread_uid="spread-uid", federation="prod", kind="StatefulSet")


def test_a_statefulset_pod_is_admitted_by_its_ordinals_range_without_waiting_for_a_count() -> None:
    books = bookkeeping.Bookkeeping(clock=ManualClock(T0), count_wait=30.0)  # never counted: no wait
    books.set_assignment(STS)
    chosen = {name: books.admit("shop/db", name, revision="") for name in
              ("db-0", "db-1", "db-2", "db-3", "db-4", "db-01", "web-0")}
    assert {name: rule.name if rule else None for name, rule in chosen.items()} == {
        "db-0": "a", "db-1": "a", "db-2": "b", "db-3": "b", "db-4": None, "db-01": None, "web-0": None}
    again = books.admit("shop/db", "db-3", revision="")
    assert again is not None and again.name == "b", "a retried admission gets the same subset"
    creating, _ = books.pending_entries("shop/db")
    assert set(creating) == {"db-0", "db-1", "db-2", "db-3"}


def test_the_member_statefulset_keeps_its_claims_and_identity_fields() -> None:
    hub_sts = builders.deployment("db", 3, namespace="shop")
    hub_sts["kind"] = "StatefulSet"
    claim = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                    "resources": {"requests": {"storage": "1Gi"}}}}
    hub_sts["spec"].update(serviceName="db", volumeClaimTemplates=[claim], podManagementPolicy="Parallel",
                           strategy={"type": "Recreate"})  # a Deployment's field: dropped
    body = rendering.render(assignment.Assignment(**{**STS.__dict__, "template": hub_sts}))
    assert (body["kind"], body["spec"]["replicas"]) == ("StatefulSet", 4)
    assert set(body["spec"]) == {"replicas", "selector", "template", "serviceName", "volumeClaimTemplates",
                                 "podManagementPolicy"}
    assert body["spec"]["volumeClaimTemplates"] == [claim]


def test_the_hub_statefulset_status_is_its_own_fields_summed_over_the_members() -> None:
    members = {"dc1": status.WorkloadStatus(replicas=3, ready=2, updated=3),
               "aws": status.WorkloadStatus(replicas=1, ready=1, updated=0)}
    assert status.workload_status("StatefulSet", members, replicas=4) == {
        "replicas": 4, "readyReplicas": 3, "updatedReplicas": 3}


def test_the_member_statefulset_is_cached_and_its_pods_are_its_own() -> None:
    cache = empty_cache()
    body = replicaset(uid=RS_UID)
    body["metadata"]["name"] = "db"
    body["metadata"]["labels"][names.SPREAD_LABEL] = "db"
    cache._apply(store.STATEFULSETS, "ADDED", "shop/db", body)
    found = cache.member_workload("StatefulSet", "shop", "db")
    assert found is not None and found.uid == RS_UID and [w.uid for w in cache.workloads()] == [RS_UID]
    assert owners.controllers(STS, found, lambda _uid: {"never asked"}) == {views.compact_uid(RS_UID)}
    refs = [{"kind": "StatefulSet", "name": "db", "uid": RS_UID, "controller": True}]
    assert owners.admission(STS, namespace="shop", owner_references=refs, workload=found,
                            replicaset=lambda _n, _m: None) == owners.OURS
    refs[0]["kind"] = "ReplicaSet"
    assert owners.admission(STS, namespace="shop", owner_references=refs, workload=found,
                            replicaset=lambda _n, _m: None) == owners.FOREIGN
