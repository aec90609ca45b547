"""Hub objects are not the cluster: deleting a MemberCluster moves nothing; decommission does.

The World is fed through the hub watcher's `apply_to_world`, as the coordinator feeds it. Three
clusters hold a spread 4/4/4 with every pod Ready. Deleting one's MemberCluster while its agent
beats changes no placement and no quota; the shell then recreates the object from what the World
kept (`World.member`), which changes nothing either. With its agent gone too, the cluster fails
over as any silent one: not before clusterLostSeconds, under the brake when most clusters are
silent, within the failover rate limit. `spec.decommission` takes the cluster out of every
spread's selection (a clusterSelector, a `clusters:` list and an empty selector alike); deleting a
decommissioned MemberCluster forgets the cluster once no spread holds anything there.
"""

from __future__ import annotations

import datetime
from typing import Any

from federation.api import names
from federation.coordinator import facade
from federation.coordinator.hub import watcher
from federation.coordinator.model import loop, world
from federation.coordinator.wire import assignments
from federation.core import brake, status
from federation.rpc import agent_pb2
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
KEY = "shop/web"
LOST_SECONDS = 60
EU = {names.REGION_LABEL: "eu"}
REGION = [{"name": "eu", "clusterSpread": "Balance", "clusterSelector": {"matchLabels": EU}}]


def member_event(name: str, *, type_: str = "MODIFIED", decommission: bool = False,
                 labels: dict[str, str] | None = None) -> watcher.HubEvent:
    """A MemberCluster event as the hub watcher delivers it."""
    if type_ == "DELETED":
        return watcher.HubEvent("cluster", "DELETED", name)
    info = watcher.ClusterInfo(name, dict(EU if labels is None else labels), (), decommission=decommission)
    return watcher.HubEvent("cluster", type_, name, cluster=info)  # type: ignore[arg-type]


def report_ready(model: world.World, name: str, count: int, *, key: str = KEY, subset: str = "eu") -> None:
    model.pod_counts(name, {key: {subset: status.ClusterPods(running=count, ready=count)}})


def federation(clock: ManualClock, clusters: tuple[str, ...] = ("aws", "dc1", "gcp"), *,
               per_minute: int | None = None) -> world.World:
    """`clusters` in region eu holding spread shop/web balanced, every pod Ready, every agent heard."""
    model = world.World(clock, failover_per_minute=per_minute)
    for name in clusters:
        watcher.apply_to_world(model, member_event(name, type_="ADDED"))
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    keys = model.upsert_spread(builders.federated_spread(subsets=REGION, lost_seconds=LOST_SECONDS))
    keys |= model.set_target(KEY, replicas=4 * len(clusters), template=builders.deployment(namespace="shop"))
    loop.recompute(model, keys, now=clock())
    assert model.placements[KEY].clusters == dict.fromkeys(clusters, 4)
    for name in clusters:
        report_ready(model, name, 4)
    return model


def quotas(model: world.World, clock: ManualClock, key: str = KEY) -> dict[str, int]:
    """What each cluster's agent would be told to run of spread `key`."""
    entry = model.spread(key)
    assert entry is not None
    sent: dict[str, Any] = assignments.for_clusters(entry, model.placements[key], marks=(), now=clock())
    return {name: sum(rule.quota for rule in message.subsets) for name, message in sent.items()}


def beat(model: world.World, clock: ManualClock, names_: tuple[str, ...], seconds: int) -> None:
    """`seconds` pass, the agents of `names_` beating each second; failover ticks as the timer does."""
    for _ in range(seconds):
        clock.advance(1)
        keys: set[str] = set()
        for name in names_:
            keys |= model.heartbeat(name)
        loop.recompute(model, keys | loop.failover(model).keys, now=clock())


# --- deleted while its agent is connected --------------------------------------------------------


def test_deleting_a_member_cluster_whose_agent_beats_moves_nothing() -> None:
    clock = ManualClock(T0)
    model = federation(clock)
    before, sent = model.placements[KEY], quotas(model, clock)
    assert watcher.apply_to_world(model, member_event("dc1", type_="DELETED")) == set()
    loop.recompute(model, {KEY}, now=clock())  # a full round too: nothing differs
    assert model.placements[KEY] == before and quotas(model, clock) == sent == {"aws": 4, "dc1": 4, "gcp": 4}
    assert "dc1" in model.cluster_names() and model.selected(KEY) == {"aws", "dc1", "gcp"}
    assert model.pods.ready_for(KEY, usable={"dc1"}) == {"eu": {"dc1": 4}}
    beat(model, clock, ("aws", "dc1", "gcp"), LOST_SECONDS * 2)
    assert model.placements[KEY] == before and quotas(model, clock) == sent


def test_the_recreated_member_cluster_carries_what_the_world_had_and_changes_nothing() -> None:
    clock = ManualClock(T0)
    model = federation(clock)
    before = model.placements[KEY]
    watcher.apply_to_world(model, member_event("dc1", type_="DELETED"))
    kept = model.member("dc1")
    assert kept is not None and kept.labels == EU and not model.decommissioned("dc1")
    recreated = watcher.ClusterInfo("dc1", kept.labels, kept.taints)  # what the shell writes back
    added = watcher.HubEvent("cluster", "ADDED", "dc1", cluster=recreated)
    assert watcher.apply_to_world(model, added) == set()
    loop.recompute(model, {KEY}, now=clock())
    assert model.placements[KEY] == before


# --- deleted with its agent gone: lost, graceful failover ----------------------------------------


def test_a_deleted_member_cluster_whose_agent_is_gone_fails_over_only_when_lost() -> None:
    clock = ManualClock(T0)
    model = federation(clock)
    watcher.apply_to_world(model, member_event("dc1", type_="DELETED"))
    beat(model, clock, ("aws", "gcp"), LOST_SECONDS)  # dc1 silent, not yet past the limit
    assert model.placements[KEY].clusters == {"aws": 4, "dc1": 4, "gcp": 4}
    beat(model, clock, ("aws", "gcp"), 2)
    assert model.placements[KEY].clusters == {"aws": 6, "dc1": 0, "gcp": 6}  # replaced elsewhere
    assert "dc1" in model.cluster_names()  # nobody forgot it: it runs what it held until it returns
    assert model.pods.held_by("dc1", KEY) == {"eu": 4}
    clock.advance(1)
    loop.recompute(model, model.heartbeat("dc1"), now=clock())  # its agent returns
    assert model.current_for(KEY)["eu"]["dc1"] == 4  # its pods count again (surplus by scale-down order)


def test_the_brake_holds_when_most_deleted_member_clusters_are_silent() -> None:
    clock = ManualClock(T0)
    model = federation(clock)
    for name in ("dc1", "gcp"):
        watcher.apply_to_world(model, member_event(name, type_="DELETED"))
    beat(model, clock, ("aws",), LOST_SECONDS + 5)  # two of three silent: probably our fault
    assert model.placements[KEY].clusters == {"aws": 4, "dc1": 4, "gcp": 4}
    state = model.brakes.state(KEY)
    assert state is not None and state.suspended and state.clusters == {"dc1", "gcp"}
    assert brake.CONDITION == "FailoverSuspended"


def test_the_failover_rate_limit_paces_deleted_member_clusters_that_fall_silent() -> None:
    clock = ManualClock(T0)
    model = federation(clock, ("c1", "c2", "c3", "c4", "c5"), per_minute=1)
    for name in ("c4", "c5"):
        watcher.apply_to_world(model, member_event(name, type_="DELETED"))
    beat(model, clock, ("c1", "c2", "c3"), LOST_SECONDS + 2)
    placed = model.placements[KEY].clusters
    assert sum(1 for name in ("c4", "c5") if placed.get(name) == 4) == 1, placed  # one moved, one waits
    beat(model, clock, ("c1", "c2", "c3"), 61)
    placed = model.placements[KEY].clusters
    assert not placed["c4"] and not placed["c5"] and sum(placed.values()) == 20


# --- decommission ------------------------------------------------------------------------------


def test_decommission_takes_the_cluster_out_of_every_spreads_selection() -> None:
    clock = ManualClock(T0)
    model = federation(clock)
    named = builders.federated_spread("api", [{"name": "all", "clusters": ["dc1", "aws"]}])
    anything = builders.federated_spread("db", [{"name": "any", "clusterSelector": {}}])
    for item in (named, anything):
        keys = model.upsert_spread(item)
        keys |= model.set_target(item.key, replicas=2, template=builders.deployment(item.metadata.name))
        loop.recompute(model, keys, now=clock())
    every = {KEY, named.key, anything.key}
    assert all("dc1" in model.selected(key) for key in every)
    affected = watcher.apply_to_world(model, member_event("dc1", decommission=True))
    assert affected == every
    assert model.decommissioned("dc1")
    for key in every:
        assert "dc1" not in model.selected(key), key
        assert "dc1" not in model.ready_selected(key), key
        assert "dc1" not in {name for names_ in model.view_for(key).selected for name in names_}, key
    assert all(not c.decommissioned or c.name == "dc1" for c in model.snapshot_for("").clusters)
    assert {c.name for c in model.snapshot_for("").clusters if c.decommissioned} == {"dc1"}
    assert watcher.apply_to_world(model, member_event("dc1", decommission=False)) == every  # undone
    assert all("dc1" in model.selected(key) for key in every)


def test_a_decommissioned_member_cluster_is_forgotten_on_deletion_only_once_nothing_is_held() -> None:
    clock = ManualClock(T0)
    model = federation(clock)
    watcher.apply_to_world(model, member_event("dc1", decommission=True))
    assert model.held_at("dc1") == {KEY}  # its pods are still reported (a move is under way)
    watcher.apply_to_world(model, member_event("dc1", type_="DELETED"))
    assert "dc1" in model.cluster_names() and model.decommissioned("dc1")  # kept, still deselected
    loop.recompute(model, {KEY}, now=clock())
    model.pod_counts("dc1", {})  # its pods are gone
    loop.recompute(model, {KEY}, now=clock())  # the move ends: dc1 is no longer kept in the placement
    assert model.held_at("dc1") == frozenset()
    watcher.apply_to_world(model, member_event("dc1", type_="DELETED"))  # e.g. a relist
    assert "dc1" not in model.cluster_names()
    assert model.decommissioned("dc1")  # its agent's next Hello registers nothing (the shell asks this)
    model.inventory("dc1", [builders.node_pool(4)])  # a still-connected agent reports on
    assert "dc1" not in model.selected(KEY)
    watcher.apply_to_world(model, member_event("dc1", type_="ADDED"))  # a person adds it back
    assert not model.decommissioned("dc1") and "dc1" in model.selected(KEY)


def test_the_decommissioned_condition_says_what_is_left() -> None:
    now = T0
    moving = status.decommission_condition(holding=["shop/web", "shop/api"], previous=[], now=now)
    assert (moving.type, moving.status, moving.reason) == ("Decommissioned", "False", "SpreadsMoving")
    assert "shop/api, shop/web" in moving.message
    done = status.decommission_condition(holding=[], previous=[moving], now=now)
    assert (done.status, done.reason) == ("True", "NothingHeld") and "may be deleted" in done.message


def test_the_watcher_reads_decommission_from_the_member_cluster() -> None:
    body = {"apiVersion": "fedspread.io/v1alpha1", "kind": "MemberCluster",
            "metadata": {"name": "dc1", "labels": EU}, "spec": {"decommission": True}}
    info, found = watcher.parse_cluster(body)
    assert not found and info is not None and info.decommission and info.labels == EU
    plain, _ = watcher.parse_cluster({**body, "spec": {}})
    assert plain is not None and not plain.decommission


def test_the_agent_of_a_decommissioned_and_deleted_cluster_reconnecting_joins_nothing() -> None:
    clock = ManualClock(T0)
    coordinator = facade.Coordinator(federation(clock), clock=clock, coordinator_id="t")
    model = coordinator.world
    watcher.apply_to_world(model, member_event("dc1", decommission=True))
    model.pod_counts("dc1", {})
    loop.recompute(model, {KEY}, now=clock())
    watcher.apply_to_world(model, member_event("dc1", type_="DELETED"))
    assert "dc1" not in model.cluster_names()  # forgotten: nothing held there
    coordinator.attach(agent_pb2.Hello(cluster_name="dc1", topology_labels=EU), heartbeat_seconds=1)
    assert model.decommissioned("dc1") and "dc1" not in model.selected(KEY)
    assert not model.placements[KEY].clusters.get("dc1")


def test_a_released_workload_of_a_deleted_spread_does_not_hold_a_decommission() -> None:
    """A spread deleted with `Orphan` releases its workloads; their pods run on, no longer the
    federation's, and their counts stand for a re-creation to adopt (`PodReports.released`). They
    must not keep a decommissioned cluster held for good."""
    clock = ManualClock(T0)
    model = federation(clock)
    watcher.apply_to_world(model, member_event("dc1", decommission=True))
    assert model.held_at("dc1") == {KEY}
    model.delete_spread(KEY)
    model.release_pods("dc1", KEY)  # the orphaning removal the facade sends
    assert model.pods.holding(KEY) and "dc1" in model.pods.holding(KEY)  # counts kept for adoption
    assert model.held_at("dc1") == frozenset()
