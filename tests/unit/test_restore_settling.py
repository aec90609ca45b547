"""A hub restored without statuses or MemberClusters: the first agent back is not given everything.

Issue 23, case 4 (second half). The hub holds the spread but no status (backup tools drop it) and
no MemberCluster (cluster-scoped, left out of a namespaced backup). Before the rule, the restarted
coordinator placed the spread as soon as the first agent reconnected — on the only cluster it knew
— and the other members' running pods were then handed over to it. Now a spread that agents run
but whose status records no placement waits `settle` after the listing (`model.settling`): both
agents are back by then, and the first placement is the one of the whole federation.

Real facade, World and status rules; the agents are their Hellos and the messages queued to them.
"""

from __future__ import annotations

import datetime
import queue

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
KEY, NEW = "shop/web", "shop/new"


def spread(name: str) -> spread_api.FederatedSpread:
    return spread_api.FederatedSpread.model_validate({
        "metadata": {"name": name, "namespace": "shop", "generation": 1},
        "spec": {"targetRef": {"name": name},
                 "subsets": [{"name": "all", "clusters": ["dc1", "aws"], "clusterSpread": "Balance"}]}})


def listed(running: facade.Coordinator, name: str) -> None:
    body = builders.deployment(name, 4, namespace="shop")
    event = hub.HubEvent("spread", "ADDED", f"shop/{name}", spread=spread(name), generation=1,
                         target=hub.WorkloadInfo(kind="Deployment", namespace="shop", name=name, replicas=4,
                                                 template=body))
    with running.lock:
        running.publish(hub.apply_to_world(running.world, event))


def restored(*, settle: datetime.timedelta) -> tuple[facade.Coordinator, ManualClock]:
    """A coordinator that listed the restored hub: the spread, no status, no MemberCluster."""
    clock = ManualClock(T0)
    running = facade.Coordinator(world.World(clock, grace_from=T0), clock=clock, coordinator_id="t",
                                 hub_synced=False, settle=settle)
    listed(running, "web")
    running.mark_hub_synced()
    return running, clock


def back(running: facade.Coordinator, name: str, *, pods: int = 0) -> facade.AgentStream:
    """The member's agent reconnects; its Hello lists the spread's Deployment and its `pods`."""
    hello = agent_pb2.Hello(cluster_name=name, applied=[
        agent_pb2.AppliedSpread(spread=KEY, spread_uid="", subset_pods={"all": pods} if pods else {})])
    return running.attach(hello, heartbeat_seconds=1)


def sent(stream: facade.AgentStream) -> dict[str, list[agent_pb2.CoordinatorMessage]]:
    found: dict[str, list[agent_pb2.CoordinatorMessage]] = {"assignment": [], "removal": []}
    while True:
        try:
            item = stream.outgoing.get_nowait()
        except queue.Empty:
            return found
        assert isinstance(item, agent_pb2.CoordinatorMessage)
        body = item.WhichOneof("body")
        if body in found:
            found[body].append(item)


def test_the_first_agent_back_is_not_given_every_replica() -> None:
    running, clock = restored(settle=settling.WINDOW)
    dc1 = back(running, "dc1")
    assert running.settling.waiting() == {KEY}  # dc1 alone is not the federation
    aws = back(running, "aws")
    first = {name: sent(stream) for name, stream in (("dc1", dc1), ("aws", aws))}
    assert all(not found["assignment"] and not found["removal"] for found in first.values()), first
    clock.advance(settling.WINDOW.total_seconds() - 1)
    running.tick()
    assert running.settling.waiting() == {KEY}
    assert all(not found["assignment"] and not found["removal"] for found in (sent(dc1), sent(aws)))
    clock.advance(1)
    running.tick()
    assert running.world.placements[KEY].counts() == {"all": {"dc1": 2, "aws": 2}}
    for stream in (dc1, aws):
        found = sent(stream)
        assert [m.assignment.replicas for m in found["assignment"]] == [2] and not found["removal"]
    assert running.settling.waiting() == frozenset()


def test_without_the_wait_the_first_agent_back_took_every_replica() -> None:
    """What the rule prevents (and what this test would see without it)."""
    running, _ = restored(settle=datetime.timedelta(0))
    back(running, "dc1")
    assert running.world.placements[KEY].counts() == {"all": {"dc1": 4, "aws": 0}}


def test_a_spread_no_agent_runs_yet_is_placed_at_once() -> None:
    running, _ = restored(settle=settling.WINDOW)
    back(running, "dc1")
    back(running, "aws")
    listed(running, "new")
    assert running.world.placements[NEW].counts() == {"all": {"dc1": 2, "aws": 2}}
    assert running.settling.waiting() == {KEY}


def test_a_spread_only_a_later_agent_runs_waits_for_it() -> None:
    """The first agent back does not run the spread; the second does. Placed when the first came
    back, the spread took every replica there and the second's pods were handed over to it."""
    running, clock = restored(settle=settling.WINDOW)
    dc1 = running.attach(agent_pb2.Hello(cluster_name="dc1"), heartbeat_seconds=1)
    assert KEY not in running.world.placements and not sent(dc1)["assignment"]
    back(running, "aws")
    clock.advance(settling.WINDOW.total_seconds())
    running.tick()
    assert running.world.placements[KEY].counts() == {"all": {"dc1": 2, "aws": 2}}


def test_the_window_is_pure_bookkeeping() -> None:
    waits = settling.Settling(window=datetime.timedelta(seconds=10))
    live = lambda k: True  # noqa: E731
    # not begun: nothing waits
    assert waits.deferred({KEY}, now=T0, live=live) == set()
    waits.begin(now=T0, candidates={KEY, NEW})
    assert waits.deferred({KEY, NEW}, now=T0, live=live) == {KEY, NEW}
    assert waits.deferred({KEY}, now=T0, live=live) == {KEY}  # waits on
    assert waits.deferred({"shop/other"}, now=T0, live=live) == set()  # no candidate
    assert waits.released(now=T0 + datetime.timedelta(seconds=9)) == set()
    assert waits.released(now=T0 + datetime.timedelta(seconds=10)) == {KEY, NEW}
    assert waits.released(now=T0 + datetime.timedelta(seconds=11)) == set()  # once
    later = T0 + datetime.timedelta(seconds=12)
    assert waits.deferred({KEY}, now=later, live=live) == set()


def test_a_candidate_deleted_while_it_waits_stops_waiting() -> None:
    waits = settling.Settling(window=datetime.timedelta(seconds=10))
    waits.begin(now=T0, candidates={KEY})
    assert waits.deferred({KEY}, now=T0, live=lambda k: True) == {KEY}
    assert waits.deferred({KEY}, now=T0, live=lambda k: False) == set()
    assert waits.waiting() == frozenset()
    # created again within the window: a spread created after the listing never waits
    assert waits.deferred({KEY}, now=T0, live=lambda k: True) == set()


def test_a_restored_spread_deleted_while_it_waits_is_released() -> None:
    """Its deletion is carried out as any other (Orphan: the agents are sent the release)."""
    running, _ = restored(settle=settling.WINDOW)
    dc1 = back(running, "dc1")
    assert running.settling.waiting() == {KEY}
    with running.lock:
        running.publish(hub.apply_to_world(running.world, hub.HubEvent("spread", "DELETED", KEY)))
    assert running.settling.waiting() == frozenset()
    found = sent(dc1)
    assert not found["assignment"] and [m.removal.orphan for m in found["removal"]] == [True], found


def recorded(*, settle: datetime.timedelta = settling.WINDOW) -> facade.Coordinator:
    """A restarted coordinator whose hub status records dc1 2 and aws 2, not listed yet."""
    clock = ManualClock(T0)
    running = facade.Coordinator(world.World(clock, grace_from=T0), clock=clock, coordinator_id="t",
                                 hub_synced=False, settle=settle)
    item = spread("web").model_copy(update={"status": spread_api.FederatedSpreadStatus.model_validate({
        "conditions": [{"type": "Placed", "status": "True", "reason": "Placed"}],
        "subsetStatuses": [{"name": "all", "replicas": 4, "clusters": [
            {"cluster": "dc1", "replicas": 2}, {"cluster": "aws", "replicas": 2}]}]})})
    body = builders.deployment("web", 4, namespace="shop")
    event = hub.HubEvent("spread", "ADDED", KEY, spread=item, generation=1,
                         target=hub.WorkloadInfo(kind="Deployment", namespace="shop", name="web", replicas=4,
                                                 template=body))
    with running.lock:
        running.publish(hub.apply_to_world(running.world, event))
    return running


def test_a_spread_whose_status_records_its_placement_does_not_wait() -> None:
    """The ordinary restart: each cluster holds its recorded share until it reports."""
    running = recorded()
    running.mark_hub_synced()
    back(running, "dc1")
    assert running.settling.waiting() == frozenset()
    assert KEY in running.world.placements


@pytest.mark.parametrize("hello_first", [False, True], ids=["listed-first", "hello-first"])
def test_a_hello_counting_more_pods_than_the_status_records_keeps_them(hello_first: bool) -> None:
    """Unknown is not zero, the status one decision behind: the last coordinator gave dc1 all 4
    (aws was lost) and died before writing it; both agents restarted meanwhile. dc1's Hello counts
    the 4 pods its Deployment runs: the resync must not send it a quota below them while nothing
    is verified (before the Hello carried the count, dc1 was sent 2 and lost 2 Ready pods while
    aws had none). Whether the Hello comes before or after the hub is listed."""
    running = recorded()
    if not hello_first:
        running.mark_hub_synced()
    dc1, aws = back(running, "dc1", pods=4), back(running, "aws", pods=0)
    if hello_first:
        running.mark_hub_synced()
    quotas = [m.assignment.replicas for m in sent(dc1)["assignment"]]
    assert quotas and quotas[-1] >= 4, quotas
    assert running.world.pods.unverified_for(KEY, usable={"dc1", "aws"})["all"]["dc1"] == 4
    assert [m.assignment.replicas for m in sent(aws)["assignment"]][-1:] == [2]


def test_a_waiting_spread_says_so_in_its_status_and_stays_a_candidate() -> None:
    """While it waits, the status says why nothing is placed and until when (a `Settling`
    condition, not `Placed`: a coordinator restarted again meanwhile must still see no recorded
    placement and wait); once placed, the condition is gone."""
    running, clock = restored(settle=settling.WINDOW)
    back(running, "dc1")
    writer = status_recording.Recording()
    status_pass = statuses.StatusPass(running, writer.as_writer(), agent_versions={},
                                      member_status_seconds=60)
    status_pass.run(clock())
    waiting = writer.spreads[KEY]
    said = [(c.type, c.status, c.reason) for c in waiting.conditions]
    assert said == [("Settling", "True", "WaitingForAgents")], said
    assert (T0 + settling.WINDOW).isoformat(timespec="seconds") in (waiting.conditions[0].message or "")
    entry = running.world.spread(KEY)
    assert entry is not None
    assert not lifecycle.recorded_holder(entry.spread.model_copy(update={"status": waiting}))
    clock.advance(settling.WINDOW.total_seconds())
    running.tick()
    status_pass.run(clock())
    placed = writer.spreads[KEY]
    assert "Settling" not in {c.type for c in placed.conditions}
    assert ("Placed", "True") in {(c.type, c.status) for c in placed.conditions}
