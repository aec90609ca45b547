"""What a coordinator's resync removes from an agent, and what it leaves alone: nothing by absence.

Why here: the rule is "do no harm". An agent's Hello lists the spreads it applies (with the uids
its Deployments carry); for each one the resync sends no assignment for, the coordinator sends a
removal only when it knows why: the live spread no longer selects the cluster (after the cluster's
first report says what runs there: its Ready pods are kept until their replacements are, as for any
cluster leaving the selection; orphaned when the agent's Deployment was made for an earlier spread
of the name), or it saw the spread deleted (its policy decides). A spread it never knew — a fresh,
empty, restored or wrong hub — is left to the agent as it is. Driven through the real facade
(`Coordinator.attach`, the hub events as the coordinator applies them); what each stream is sent
is read from its queue.
"""

from __future__ import annotations

import datetime
import queue
from typing import Any

import pytest

from federation.api import spread as spread_api
from federation.coordinator import facade
from federation.coordinator.hub import watcher as hub
from federation.coordinator.model import lifecycle, loop, world
from federation.rpc import agent_pb2
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
KEY = "shop/web"
UID = "uid-live"
ONLY_DC1: list[dict[str, Any]] = [{"name": "onprem", "clusters": ["dc1"]}]
DESELECTED = "cluster no longer selected"


def spread(*, policy: str | None = None) -> spread_api.FederatedSpread:
    spec: dict[str, Any] = {"targetRef": {"name": "web"}, "subsets": ONLY_DC1}
    if policy is not None:
        spec["deletionPolicy"] = policy
    return spread_api.FederatedSpread.model_validate({
        "metadata": {"name": "web", "namespace": "shop", "generation": 1, "uid": UID,
                     "creationTimestamp": "2025-01-01T00:00:00Z"},
        "spec": spec})


def upsert(item: spread_api.FederatedSpread, *, with_target: bool = True) -> hub.HubEvent:
    target = None
    if with_target:
        body = builders.deployment("web", 3, namespace="shop")
        target = hub.WorkloadInfo(kind="Deployment", namespace="shop", name="web", replicas=3, template=body)
    return hub.HubEvent("spread", "MODIFIED", item.key, spread=item, generation=1, target=target)


class Hub:
    """A coordinator facade over clusters dc1 and aws, fed hub events as the coordinator's loop does."""

    def __init__(self) -> None:
        clock = self.clock = ManualClock(T0)
        self.coordinator = facade.Coordinator(world.World(clock), clock=clock, coordinator_id="t")
        self.streams: dict[str, facade.AgentStream] = {}
        for name in ("dc1", "aws"):
            self.coordinator.world.upsert_cluster(name, labels={})
            self.coordinator.world.inventory(name, [builders.node_pool(4)])
        self.resync("dc1")  # dc1's agent is heard: the spread is placed there

    def apply(self, event: hub.HubEvent) -> None:
        with self.coordinator.lock:
            self.coordinator.publish(hub.apply_to_world(self.coordinator.world, event))

    def resync(self, name: str, *applied: tuple[str, str]) -> list[agent_pb2.CoordinatorMessage]:
        """Connect cluster `name` with a Hello listing (spread, uid) pairs; everything it is sent."""
        hello = agent_pb2.Hello(cluster_name=name, applied=[
            agent_pb2.AppliedSpread(spread=key, spread_uid=uid) for key, uid in applied])
        self.streams[name] = self.coordinator.attach(hello, heartbeat_seconds=1)
        return self.drain(name)

    def report(self, name: str, *, ready: int) -> list[agent_pb2.CoordinatorMessage]:
        """Cluster `name`'s agent reports `ready` Ready pods of the spread (in subset onprem), as
        an agent that holds its assignment; everything it is sent then."""
        report = agent_pb2.PodCountsReport(full=True, sequence=1, lists_assigned=True, assigned=[KEY])
        item = report.spreads.add(spread=KEY, generation=1)
        item.subsets.add(subset="onprem", counts=agent_pb2.PodCounts(running=ready, ready=ready))
        self.coordinator.receive(self.streams[name], agent_pb2.AgentMessage(pod_counts=report))
        return self.drain(name)

    def drain(self, name: str) -> list[agent_pb2.CoordinatorMessage]:
        stream = self.streams[name]
        sent: list[agent_pb2.CoordinatorMessage] = []
        while True:
            try:
                item = stream.outgoing.get_nowait()
            except queue.Empty:
                return sent
            assert isinstance(item, agent_pb2.CoordinatorMessage)
            sent.append(item)


def removals(sent: list[agent_pb2.CoordinatorMessage]) -> list[tuple[str, bool, str]]:
    return [(m.removal.spread, m.removal.orphan, m.removal.reason) for m in sent
            if m.WhichOneof("body") == "removal"]


def notice(sent: list[agent_pb2.CoordinatorMessage]) -> str:
    [found] = [m.notice for m in sent if m.WhichOneof("body") == "notice"]
    assert found.code == "ResyncComplete"
    return found.message


def placed() -> Hub:
    fed = Hub()
    fed.apply(upsert(spread()))
    assert fed.coordinator.world.placements[KEY].counts() == {"onprem": {"dc1": 3}}
    return fed


# --- the spread is live --------------------------------------------------------------------------


@pytest.mark.parametrize("uid", [UID, ""], ids=["the live uid", "no uid (an older agent)"])
def test_a_live_spread_that_no_longer_selects_the_cluster_is_removed_once_it_runs_nothing(uid: str) -> None:
    fed = placed()
    sent = fed.resync("aws", (KEY, uid))
    assert removals(sent) == []  # unknown is not zero: what runs there is not known yet
    assert notice(sent) == "0 assignments, 0 removals, 0 unknown, kept"
    assert removals(fed.report("aws", ready=0)) == [(KEY, False, "cluster no longer selected")]


def test_a_cluster_no_longer_selected_keeps_its_ready_pods_until_their_replacements_are() -> None:
    """A coordinator restarted from a status written before the cluster's pods were kept (or a
    status lost) must not delete them at the resync: the cluster is handled as any cluster leaving
    the selection once it reports (deselection is a move)."""
    fed = placed()
    assert removals(fed.resync("aws", (KEY, UID))) == []
    sent = fed.report("aws", ready=2)  # dc1's replacements are not Ready: aws keeps its 2
    assert removals(sent) == []
    [kept] = [m.assignment for m in sent if m.WhichOneof("body") == "assignment"]
    assert (kept.spread, kept.replicas) == (KEY, 2)
    assert fed.coordinator.world.placements[KEY].counts() == {"onprem": {"dc1": 3, "aws": 2}}


@pytest.mark.parametrize("uids", [("uid-earlier",), (UID, "uid-earlier")], ids=["earlier", "mixed"])
def test_a_deployment_of_an_earlier_spread_of_the_name_is_orphaned_not_deleted(uids: tuple[str, ...]) -> None:
    sent = placed().resync("aws", *((KEY, uid) for uid in uids))
    assert removals(sent) == [(KEY, True, "an earlier spread of this name")]


def test_a_selected_cluster_gets_its_assignment_and_no_removal_whatever_the_uid() -> None:
    sent = placed().resync("dc1", (KEY, "uid-earlier"))
    assert removals(sent) == []
    [assignment] = [m.assignment for m in sent if m.WhichOneof("body") == "assignment"]
    assert (assignment.spread, assignment.spread_uid, assignment.replicas) == (KEY, UID, 3)


def test_a_known_spread_not_placed_yet_is_left_alone() -> None:
    fed = Hub()
    fed.apply(upsert(spread(), with_target=False))  # its Deployment is not seen yet
    assert KEY not in fed.coordinator.world.placements and fed.coordinator.world.spread(KEY) is not None
    sent = fed.resync("aws", (KEY, UID))
    assert removals(sent) == [] and notice(sent) == "0 assignments, 0 removals, 0 unknown, kept"


# --- the spread is not live ----------------------------------------------------------------------


def test_a_spread_the_coordinator_never_knew_is_left_to_the_agent() -> None:
    sent = Hub().resync("dc1", ("shop/a", "uid-a"), ("shop/b", ""))  # an empty (or wrong) hub
    assert removals(sent) == []
    assert [m.WhichOneof("body") for m in sent] == ["welcome", "notice"]
    assert notice(sent) == "0 assignments, 0 removals, 2 unknown, kept"


@pytest.mark.parametrize(("policy", "orphan"), [("Orphan", True), ("Delete", False), (None, True)])
def test_a_deletion_the_coordinator_saw_is_sent_with_its_policy(policy: str | None, orphan: bool) -> None:
    fed = placed() if policy is None else Hub()
    if policy is not None:
        fed.apply(upsert(spread(policy=policy)))
    fed.apply(hub.HubEvent("spread", "DELETED", KEY))
    if policy == "Delete":  # held for a re-creation first (test_spread_lifecycle.py): nothing yet
        assert removals(fed.resync("aws", (KEY, UID))) == []
        fed.clock.advance(lifecycle.RECREATE_GRACE.total_seconds())
        with fed.coordinator.lock:
            fed.coordinator.publish(loop.due(fed.coordinator.world, since=T0, now=fed.clock()))
    sent = fed.resync("aws", (KEY, UID))  # aws was away when it was deleted
    assert removals(sent) == [(KEY, orphan, "spread deleted")]
    assert notice(sent) == "0 assignments, 1 removals, 0 unknown, kept"


def test_deletions_are_remembered_with_their_policy_and_bounded() -> None:
    memory = lifecycle.Lifecycle()
    assert memory.deletion("shop/a") is None and memory.orphans("shop/a")
    memory.deleted("shop/a", "Orphan")
    memory.deleted("shop/b", "Delete")
    assert (memory.deletion("shop/a"), memory.deletion("shop/b")) == ("Orphan", "Delete")
    assert memory.orphans("shop/a") and not memory.orphans("shop/b")
    for index in range(lifecycle.REMEMBERED_DELETIONS):
        memory.deleted(f"other/{index}", "Orphan")
    assert memory.deletion("shop/a") is None and memory.deletion("shop/b") is None, "the oldest are forgotten"


@pytest.mark.parametrize(
    ("live_uid", "placed_", "applied_uids", "deletion", "expected"),
    [
        (UID, True, {UID}, None, lifecycle.Leftover(False, False, DESELECTED, deselected=True)),
        (UID, True, {""}, None, lifecycle.Leftover(False, False, DESELECTED, deselected=True)),
        (UID, True, {"old"}, None, lifecycle.Leftover(True, True, "an earlier spread of this name")),
        (UID, False, {"old"}, None, lifecycle.Leftover(False)),
        (None, False, {UID}, None, lifecycle.Leftover(False)),
        (None, False, {UID}, "Orphan", lifecycle.Leftover(True, True, "spread deleted")),
        (None, False, {UID}, "Delete", lifecycle.Leftover(True, False, "spread deleted")),
    ],
)
def test_leftover(live_uid: str | None, placed_: bool, applied_uids: set[str],
                  deletion: spread_api.DeletionPolicy | None, expected: lifecycle.Leftover) -> None:
    memory = lifecycle.Lifecycle()
    if deletion is not None:
        memory.deleted(KEY, deletion)
    assert memory.leftover(KEY, live_uid=live_uid, placed=placed_, applied_uids=applied_uids) == expected
