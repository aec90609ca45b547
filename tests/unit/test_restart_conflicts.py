"""A restart decides nothing it could not decide before: target conflicts settle from the status.

Issue 23, case 6. Spread `holder` (created later) holds Deployment web and is placed; spread
`older` (created earlier, but valid only after `holder` was placed) is refused with
`TargetConflict`. A coordinator that restarts lists the hub before it places anything, so "placed"
cannot settle the conflict while listing; before the rule, seniority did, and `older` displaced
the running holder on every restart (whichever order the listing brought them in).

The first coordinator's statuses are written by the real status pass (to a recording writer) and
carried by the spreads the second coordinator lists, as the hub would hold them. The second
coordinator lists in both orders, then is marked synced: the recorded holder keeps the target, its
replicas stay where they were (the agents are sent its assignments and no removal), `older` stays
refused. On a fresh hub, where no status is recorded, seniority still decides.
"""

from __future__ import annotations

import datetime
import queue
from typing import Any

import pytest

from federation.api import spread as spread_api
from federation.coordinator import facade
from federation.coordinator.hub import statuses
from federation.coordinator.hub import watcher as hub
from federation.coordinator.model import lifecycle, settling, world
from federation.rpc import agent_pb2
from tests.support import builders, status_recording
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
HOLDER, OLDER = "shop/holder", "shop/older"
CLUSTERS = ("dc1", "aws")
SUBSETS: list[dict[str, Any]] = [
    {"name": "onprem", "clusters": ["dc1"], "maxReplicas": 3},
    {"name": "cloud", "clusters": ["aws"]},
]
PLACED = {"onprem": {"dc1": 3}, "cloud": {"aws": 2}}


def spread(name: str, *, created: str) -> spread_api.FederatedSpread:
    return spread_api.FederatedSpread.model_validate({
        "metadata": {"name": name, "namespace": "shop", "generation": 1, "creationTimestamp": created},
        "spec": {"targetRef": {"name": "web"}, "subsets": SUBSETS, "deletionPolicy": "Delete"}})


HOLDER_SPREAD = spread("holder", created="2025-01-05T00:00:00Z")
OLDER_SPREAD = spread("older", created="2025-01-01T00:00:00Z")


def event(item: spread_api.FederatedSpread) -> hub.HubEvent:
    body = builders.deployment("web", 5, namespace="shop")
    return hub.HubEvent("spread", "ADDED", item.key, spread=item, generation=1,
                        target=hub.WorkloadInfo(kind="Deployment", namespace="shop", name="web", replicas=5,
                                                template=body))


def coordinator(*, synced: bool, applied: tuple[str, ...] = ()) -> tuple[facade.Coordinator, dict[str, Any]]:
    clock = ManualClock(T0)
    model = world.World(clock)
    for name in CLUSTERS:
        model.upsert_cluster(name, labels={})
        model.inventory(name, [builders.node_pool(4)])
    running = facade.Coordinator(model, clock=clock, coordinator_id="t", hub_synced=synced)
    listed = [agent_pb2.AppliedSpread(spread=key) for key in applied]
    streams = {name: running.attach(agent_pb2.Hello(cluster_name=name, applied=listed), heartbeat_seconds=1)
               for name in CLUSTERS}
    return running, streams


def apply(running: facade.Coordinator, item: spread_api.FederatedSpread) -> None:
    with running.lock:
        running.publish(hub.apply_to_world(running.world, event(item)))


def sent(stream: facade.AgentStream) -> list[agent_pb2.CoordinatorMessage]:
    found: list[agent_pb2.CoordinatorMessage] = []
    while True:
        try:
            item = stream.outgoing.get_nowait()
        except queue.Empty:
            return found
        assert isinstance(item, agent_pb2.CoordinatorMessage)
        found.append(item)


def recorded() -> dict[str, spread_api.FederatedSpread]:
    """The two spreads as the hub holds them after the first coordinator: `holder` placed, then
    `older` refused, each with the status the first coordinator's status pass wrote."""
    first, _ = coordinator(synced=True)
    apply(first, HOLDER_SPREAD)
    apply(first, OLDER_SPREAD)
    assert set(first.world.placements) == {HOLDER}
    writer = status_recording.Recording()
    statuses.StatusPass(first, writer.as_writer(), agent_versions={},
                        member_status_seconds=60).run(T0)
    return {key: item.model_copy(update={"status": writer.spreads[key]})
            for key, item in ((HOLDER, HOLDER_SPREAD), (OLDER, OLDER_SPREAD))}


def test_the_status_pass_records_one_holder_and_one_refusal() -> None:
    hubs = recorded()
    assert lifecycle.recorded_holder(hubs[HOLDER])
    assert not lifecycle.recorded_holder(hubs[OLDER])
    valid = [c for c in hubs[OLDER].status.conditions if c.type == "Valid"]  # type: ignore[union-attr]
    assert [(c.status, c.reason) for c in valid] == [("False", lifecycle.TARGET_CONFLICT)]


@pytest.mark.parametrize("order", [(OLDER, HOLDER), (HOLDER, OLDER)], ids=["refused-first", "holder-first"])
def test_a_restart_keeps_the_recorded_holder_whatever_the_listing_order(order: tuple[str, str]) -> None:
    hubs = recorded()
    second, streams = coordinator(synced=False, applied=(HOLDER,))
    for key in order:
        apply(second, hubs[key])
    second.mark_hub_synced()
    model = second.world
    assert set(model.placements) == {HOLDER}
    assert model.placements[HOLDER].counts() == PLACED
    assert model.lifecycle.refusals()[OLDER].reason == lifecycle.TARGET_CONFLICT
    assert HOLDER not in model.lifecycle.refusals()
    for name, stream in streams.items():
        messages = sent(stream)
        assert not [m for m in messages if m.WhichOneof("body") == "removal"], (name, messages)
        quotas = [m.assignment for m in messages if m.WhichOneof("body") == "assignment"]
        assert [(a.spread, a.replicas) for a in quotas] == [(HOLDER, 3 if name == "dc1" else 2)], name


@pytest.mark.parametrize("order", [(OLDER, HOLDER), (HOLDER, OLDER)], ids=["older-first", "newer-first"])
def test_a_fresh_hub_without_statuses_still_goes_by_seniority(order: tuple[str, str]) -> None:
    fresh = {HOLDER: HOLDER_SPREAD, OLDER: OLDER_SPREAD}
    second, _ = coordinator(synced=False)
    for key in order:
        apply(second, fresh[key])
    second.mark_hub_synced()
    assert not second.world.placements  # no status records a placement: both wait (`model.settling`)
    assert isinstance(second.clock, ManualClock)
    second.clock.advance(settling.WINDOW.total_seconds())
    second.tick()
    assert set(second.world.placements) == {OLDER}
    assert second.world.lifecycle.refusals()[HOLDER].reason == lifecycle.TARGET_CONFLICT


def test_a_holder_displaced_before_it_was_placed_is_refused_not_deleted() -> None:
    """Newer first on a fresh hub: it holds until the older arrives, which ranks first. The newer
    is refused, not remembered as deleted, so a resync removes nothing of it (fail static)."""
    second, _ = coordinator(synced=False)
    apply(second, HOLDER_SPREAD)
    apply(second, OLDER_SPREAD)
    assert second.world.lifecycle.deletion(HOLDER) is None
    assert second.world.lifecycle.leftover(HOLDER, live_uid=None, placed=False, applied_uids=[""]).remove \
        is False


def test_a_refused_target_edit_stays_refused_after_a_restart() -> None:
    """A placed spread's targetRef edited to another Deployment (the hub webhook was down): the
    coordinator refused it, and its status keeps the target in force. A restarted coordinator,
    which has no live spread to compare with, keeps that target too: nothing moves, the edit stays
    refused."""
    hubs = recorded()
    placed = hubs[HOLDER]
    assert placed.status is not None and placed.status.target_ref is not None
    assert placed.status.target_ref.name == "web"
    edited = placed.model_copy(update={"spec": placed.spec.model_copy(
        update={"target_ref": spread_api.TargetRef(name="other")})})
    assert lifecycle.in_force(edited).spec.target_ref.name == "web"
    second, streams = coordinator(synced=False, applied=(HOLDER,))
    apply(second, edited)
    second.mark_hub_synced()
    model = second.world
    assert model.placements[HOLDER].counts() == PLACED
    entry = model.spread(HOLDER)
    assert entry is not None and entry.spec.target_ref.name == "web"
    assert model.lifecycle.refusals()[HOLDER].reason == lifecycle.TARGET_REF_IMMUTABLE
    for name, stream in streams.items():
        messages = sent(stream)
        assert not [m for m in messages if m.WhichOneof("body") == "removal"], (name, messages)
    # a spread never placed has no target in force: its targetRef is its own to change
    fresh = HOLDER_SPREAD.model_copy(update={"spec": HOLDER_SPREAD.spec.model_copy(
        update={"target_ref": spread_api.TargetRef(name="other")})})
    assert lifecycle.in_force(fresh) is fresh
