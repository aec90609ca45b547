"""The coordinator's side of dependencies (issue 24 §2): the hub's ConfigMaps, Secrets,
ServiceAccounts and claims in the World, carried by the assignments of the spreads whose template
references them, a hub change re-sending exactly those spreads, `DependencyMissing` and the
member-side conflicts in the status."""

from __future__ import annotations

import copy
import datetime
from typing import Any

from federation.api import names, spread
from federation.coordinator.hub import watcher
from federation.coordinator.model import hub_objects, loop, world
from federation.coordinator.wire import assignments
from federation.core import placement, spread_status
from federation.rpc import assignment
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
SUBSETS: list[dict[str, Any]] = [{"name": "onprem", "clusters": ["dc1"], "maxReplicas": 2},
                                 {"name": "cloud", "clusters": ["aws"]}]


def app_deployment(name: str = "web") -> dict[str, Any]:
    """A Deployment whose pods use a ConfigMap volume, a Secret through envFrom, an image pull
    secret and a ServiceAccount of their own."""
    body = builders.deployment(name, namespace="shop")
    pod = body["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "config", "configMap": {"name": "web-config"}}]
    pod["containers"][0]["envFrom"] = [{"secretRef": {"name": "web-credentials"}}]
    pod["imagePullSecrets"] = [{"name": "registry"}]
    pod["serviceAccountName"] = "web-runner"
    return body


def hub_object(kind: str, name: str, **body: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}", "resourceVersion": "7",
                         "managedFields": [{"manager": "kubectl"}]}, **body}


def placed_world(*, propagate: bool = True) -> tuple[world.World, ManualClock]:
    clock = ManualClock(T0)
    model = world.World(clock)
    for name in ("dc1", "aws"):
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    spread = builders.federated_spread(subsets=SUBSETS)
    if not propagate:
        spread = spread.model_copy(update={"spec": spread.spec.model_copy(
            update={"propagate_dependencies": False})})
    keys = model.upsert_spread(spread) | model.set_target("shop/web", replicas=3, template=app_deployment())
    loop.recompute(model, keys, now=clock())
    return model, clock


def sent(model: world.World, clock: ManualClock) -> dict[str, assignment.Assignment]:
    entry = model.spread("shop/web")
    assert entry is not None
    messages = assignments.for_clusters(entry, model.placements["shop/web"], now=clock(),
                                        objects=model.hub_objects)
    return {name: assignment.Assignment.from_proto(m) for name, m in messages.items()}


def test_each_cluster_with_replicas_is_sent_the_member_copies_and_absent_ones_by_name() -> None:
    model, clock = placed_world()
    model.hub_object("ConfigMap", "shop/web-config", hub_object("ConfigMap", "web-config", data={"a": "1"}))
    model.hub_object("Secret", "shop/web-credentials",
                     hub_object("Secret", "web-credentials", type="Opaque", data={"k": "djE="}))
    model.hub_object("ServiceAccount", "shop/web-runner",
                     hub_object("ServiceAccount", "web-runner", secrets=[{"name": "web-runner-token-x"}]))
    got = sent(model, clock)
    assert sorted(got) == ["aws", "dc1"]
    for share in got.values():
        assert share.propagate_dependencies
        assert [d.ref for d in share.dependencies] == [
            "ConfigMap/web-config", "Secret/registry", "Secret/web-credentials", "ServiceAccount/web-runner"]
        bodies = {d.ref: d.body for d in share.dependencies}
        assert bodies["Secret/registry"] is None  # not on the hub: named, nothing to create
        assert bodies["ConfigMap/web-config"] == {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-config", "namespace": "shop"},
            "data": {"a": "1"}}
        assert bodies["ServiceAccount/web-runner"] == {  # its token secrets are the member's own
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "web-runner", "namespace": "shop"}}
        assert "djE=" not in repr(share)  # a Secret's data is never in a repr (log lines, tracebacks)


def test_a_hub_change_affects_only_the_spreads_that_reference_the_object() -> None:
    model, clock = placed_world()
    config = hub_object("ConfigMap", "web-config", data={"a": "1"})
    assert model.hub_object("ConfigMap", "shop/web-config", config) == {"shop/web"}
    assert model.hub_object("ConfigMap", "shop/web-config", copy.deepcopy(config)) == set()  # unchanged
    assert model.hub_object("ConfigMap", "shop/other", hub_object("ConfigMap", "other")) == set()
    assert model.hub_object("ConfigMap", "elsewhere/web-config",
                            {**config, "metadata": {"name": "web-config", "namespace": "elsewhere"}}) == set()
    before = sent(model, clock)
    edited = {**config, "data": {"a": "2"}, "metadata": {**config["metadata"], "resourceVersion": "8"}}
    assert model.hub_object("ConfigMap", "shop/web-config", edited) == {"shop/web"}
    after = sent(model, clock)
    assert {d.ref: d.body for d in after["dc1"].dependencies}["ConfigMap/web-config"]["data"] == {"a": "2"}
    delta = assignments.changed(
        {n: a.to_proto() for n, a in before.items()}, {n: a.to_proto() for n, a in after.items()})
    assert sorted(delta) == ["aws", "dc1"]  # the edit reaches every cluster the spread runs in
    assert model.hub_object("ConfigMap", "shop/web-config", None) == {"shop/web"}  # deleted on the hub
    assert {d.ref: d.body for d in sent(model, clock)["dc1"].dependencies}["ConfigMap/web-config"] is None


def test_a_spread_that_does_not_propagate_sends_nothing_and_is_not_affected() -> None:
    model, clock = placed_world(propagate=False)
    assert model.hub_object("ConfigMap", "shop/web-config", hub_object("ConfigMap", "web-config")) == set()
    share = sent(model, clock)["dc1"]
    assert not share.propagate_dependencies and share.dependencies == ()


def test_a_service_account_token_secret_is_never_kept_or_copied() -> None:
    model, clock = placed_world()
    token = hub_object("Secret", "web-credentials", type="kubernetes.io/service-account-token",
                       data={"token": "c2VjcmV0"})
    assert model.hub_object("Secret", "shop/web-credentials", token) == set()
    assert model.hub_objects.get("shop", "Secret", "web-credentials") is None
    assert {d.ref: d.body for d in sent(model, clock)["dc1"].dependencies}["Secret/web-credentials"] is None


def test_the_kept_object_has_no_managed_fields_and_no_status() -> None:
    kept = hub_objects.kept_body("PersistentVolumeClaim", {
        "metadata": {"name": "data", "managedFields": [{}]}, "spec": {"resources": {}},
        "status": {"phase": "Bound"}})
    assert kept == {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                    "spec": {"resources": {}}}


def test_a_secret_event_shows_no_data_in_its_repr() -> None:
    event = watcher.HubEvent("secret", "ADDED", "shop/web-credentials",
                             obj=hub_object("Secret", "web-credentials", data={"k": "c2VjcmV0"}))
    assert "c2VjcmV0" not in repr(event)


def status_of(**kwargs: Any) -> dict[str, Any]:
    spec = builders.spread_spec(*SUBSETS)
    result = placement.place(spec, replicas=3, snapshot=builders.snapshot(
        builders.member("dc1", builders.pool(2)), builders.member("aws", builders.pool(2))), now=T0)
    found = spread_status.spread_status(placement=result, spec=spec, generation=1, reports={}, marks=[],
                                        previous=None, now=T0, **kwargs)
    return {c.type: c for c in found.conditions}


def test_dependency_missing_names_the_objects_and_is_left_out_when_not_propagating() -> None:
    missing = status_of(missing_dependencies=["ConfigMap/web-config", "Secret/registry"])["DependencyMissing"]
    assert missing.status == "True" and missing.reason == "NotFoundOnHub"
    assert "ConfigMap/web-config, Secret/registry" in missing.message
    assert status_of(missing_dependencies=[])["DependencyMissing"].status == "False"
    assert "DependencyMissing" not in status_of()


def test_a_member_object_not_ours_is_a_conflict_naming_cluster_and_object() -> None:
    conflict = status_of(dependency_conflicts={"aws": ["Secret/web-credentials"]})["Conflict"]
    assert conflict.status == "True" and conflict.reason == "MemberObjectNotOwned"
    assert "aws: Secret/web-credentials" in conflict.message
    both = status_of(conflicts={"dc1": "Deployment web is not ours"},
                     dependency_conflicts={"aws": ["Secret/web-credentials"]})["Conflict"]
    assert both.reason == "MemberDeploymentNotOwned" and "aws: Secret/web-credentials" in both.message


def test_the_status_lists_where_each_dependency_is_and_nothing_when_there_is_none() -> None:
    spec = builders.spread_spec(*SUBSETS)
    result = placement.place(spec, replicas=3, snapshot=builders.snapshot(
        builders.member("dc1", builders.pool(2)), builders.member("aws", builders.pool(2))), now=T0)
    where = [spread.DependencyStatus(kind="Secret", name="web-credentials", found=True, clusters=["dc1"],
                                     conflicts=["aws"])]

    def made(**kwargs: Any) -> spread.FederatedSpreadStatus:
        return spread_status.spread_status(placement=result, spec=spec, generation=1, reports={}, marks=[],
                                           previous=None, now=T0, **kwargs)

    assert made(dependencies=where).model_dump(by_alias=True)["dependencies"] == [
        {"kind": "Secret", "name": "web-credentials", "found": True, "optional": False, "clusters": ["dc1"],
         "conflicts": ["aws"]}]
    assert made(dependencies=[]).dependencies is None and made().dependencies is None
