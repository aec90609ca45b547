"""The coordinator's metrics (`federation.coordinator.metrics`) say what its parts counted.

A real facade over a real World (three clusters, one spread; `ManualClock`) is driven through the
hub's first listing, a partition (the failover brake holds), a real loss and the failover rate
limit; after each step the registry must show the rounds, spreads, streams and failover counts
the parts kept. The status writer's counts are checked through its own retry loop (a 500 retried
then given up, a 404 not counted), the watchdog's loops through a watchdog on a clock the test
moves, and /metrics is read over real HTTP. A scrape while a thread holds the facade's lock (a
stalled round) must still answer, with the loops, leaving the World out until the lock is free.
"""

from __future__ import annotations

import datetime
import socket
import threading
import urllib.request

import pytest
from kubernetes import client
from kubernetes.client import exceptions

from federation import watchdog
from federation.api import names
from federation.coordinator import facade, metrics
from federation.coordinator.hub import status_writer
from federation.coordinator.model import world
from federation.rpc import agent_pb2
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
KEY = "shop/web"
LOST_SECONDS = 60
CLUSTERS = ("aws", "dc1", "gcp")
REGION = [{"name": "eu", "clusterSpread": "Balance",
           "clusterSelector": {"matchLabels": {names.REGION_LABEL: "eu"}}}]


def federation(clock: ManualClock, *, clusters: tuple[str, ...] = CLUSTERS,
               per_minute: int | None = None) -> facade.Coordinator:
    """A coordinator not yet synced with the hub: `clusters` with capacity, one spread of 12 (placed
    at the listing: no settling window, `model.settling`)."""
    model = world.World(clock, failover_per_minute=per_minute)
    for name in clusters:
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    model.upsert_spread(builders.federated_spread(subsets=REGION, lost_seconds=LOST_SECONDS))
    model.set_target(KEY, replicas=12, template=builders.deployment(namespace="shop"))
    return facade.Coordinator(model, clock=clock, hub_synced=False, coordinator_id="test",
                              settle=datetime.timedelta(0))


def observed(coordinator: facade.Coordinator, writer: status_writer.StatusWriter | None = None,
             ) -> metrics.CoordinatorMetrics:
    found = metrics.CoordinatorMetrics(coordinator, writer=writer)
    coordinator.on_round = found.observe_round
    return found


def test_before_the_hub_is_listed_nothing_is_placed_and_the_metrics_say_so() -> None:
    coordinator = federation(ManualClock(T0))
    seen = observed(coordinator)
    coordinator.publish([KEY])  # nothing is placed before the hub is listed: no round
    assert seen.value("hub_synced") == 0
    assert seen.value("spreads_known") == 1 and seen.value("spreads_placed") == 0
    assert seen.value("placement_rounds_total") == 0
    assert seen.value("placement_round_seconds_count") == 0
    assert seen.value("agents_connected") == 0 and seen.value("outbox_messages") == 0
    assert seen.value("clusters_lost_total") == 0
    assert seen.value("status_writes_total", {"kind": "spread"}) is None, "no writer given"


def test_the_first_listing_is_one_round_and_the_streams_are_counted() -> None:
    clock = ManualClock(T0)
    coordinator = federation(clock)
    seen = observed(coordinator)
    stream = coordinator.attach(agent_pb2.Hello(cluster_name="aws"), heartbeat_seconds=1)
    coordinator.attach(agent_pb2.Hello(cluster_name="dc1"), heartbeat_seconds=1)
    welcomed = seen.value("outbox_messages")
    assert welcomed == 2, "one Welcome each; no resync before the hub is listed"
    coordinator.mark_hub_synced()
    assert seen.value("hub_synced") == 1
    assert seen.value("placement_rounds_total") == 1
    assert seen.value("spread_placements_total") == 1
    assert seen.value("placement_round_seconds_count") == 1
    assert (seen.value("placement_round_seconds_sum") or 0) > 0
    assert seen.value("spreads_placed") == 1
    assert seen.value("agents_connected") == 2
    # Each agent now also holds its assignment and the ResyncComplete notice.
    assert seen.value("outbox_messages") == welcomed + 4
    coordinator.publish([])  # a heartbeat that changed nothing is not a round
    assert seen.value("placement_rounds_total") == 1
    coordinator.detach(stream)
    assert seen.value("agents_connected") == 1
    assert seen.value("outbox_messages") == 3


def test_a_partition_counts_lost_clusters_and_a_suspended_failover() -> None:
    clock = ManualClock(T0)
    coordinator = federation(clock)
    seen = observed(coordinator)
    coordinator.mark_hub_synced()
    clock.advance(LOST_SECONDS + 1)  # every agent silent: the coordinator's own fault, probably
    coordinator.tick()
    assert seen.value("clusters_lost_total") == 3
    assert seen.value("failovers_suspended_total") == 1
    assert seen.value("failover_brakes_holding") == 1
    coordinator.tick()
    assert seen.value("clusters_lost_total") == 3, "each loss is counted once"
    assert seen.value("failovers_suspended_total") == 1, "one suspension, however many ticks"
    for name in CLUSTERS:
        coordinator.world.heartbeat(name)
    coordinator.tick()
    assert seen.value("failover_brakes_holding") == 0


def test_the_failover_rate_limit_counts_the_clusters_it_makes_wait() -> None:
    clock = ManualClock(T0)
    six = ("c1", "c2", "c3", "c4", "c5", "c6")
    coordinator = federation(clock, clusters=six, per_minute=1)
    seen = observed(coordinator)
    coordinator.mark_hub_synced()
    clock.advance(LOST_SECONDS + 1)
    for name in six[2:]:  # c1 and c2 lost: a third, a real loss; one a minute may fail over
        coordinator.world.heartbeat(name)
    coordinator.tick()
    assert seen.value("clusters_lost_total") == 2
    assert seen.value("failovers_suspended_total") == 0
    assert seen.value("failovers_deferred_total") == 1
    coordinator.tick()
    assert seen.value("failovers_deferred_total") == 1, "a waiting cluster is counted once"


def writer_with(attempts: int = 2) -> status_writer.StatusWriter:
    return status_writer.StatusWriter(client.ApiClient(), attempts=attempts, max_wait=0.01)


def test_status_writes_retries_and_failures_are_counted_by_kind() -> None:
    writer = writer_with()
    seen = observed(federation(ManualClock(T0)), writer)
    assert {kind: seen.value("status_writes_total", {"kind": kind})
            for kind in metrics.STATUS_KINDS} == dict.fromkeys(metrics.STATUS_KINDS, 0)

    def busy() -> bool:
        raise exceptions.ApiException(status=500, reason="busy")

    def gone() -> bool:
        raise exceptions.ApiException(status=404, reason="gone")

    with pytest.raises(exceptions.ApiException):
        writer._retrying("spread", KEY, busy)
    with pytest.raises(exceptions.ApiException):
        writer._retrying("cluster", "dc1", gone)
    assert writer._retrying("deployment", "shop/web", lambda: True) is True
    assert seen.value("status_write_retries_total", {"kind": "spread"}) == 1
    assert seen.value("status_write_failures_total", {"kind": "spread"}) == 1
    assert seen.value("status_write_failures_total", {"kind": "cluster"}) == 0, "404: the object is gone"
    writer.writes["deployment"] += 1  # what a successful patch counts (`write_deployment_status`)
    assert seen.value("status_writes_total", {"kind": "deployment"}) == 1


def test_metrics_are_served_over_http_and_a_taken_port_is_named() -> None:
    coordinator = federation(ManualClock(T0))
    seen = observed(coordinator)
    coordinator.mark_hub_synced()
    port = seen.serve(0, addr="127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
        assert "fedspread_coordinator_placement_rounds_total 1.0" in text
        assert "fedspread_coordinator_spreads_placed 1.0" in text
        assert 'fedspread_coordinator_placement_round_seconds_bucket{le="30.0"} 1.0' in text
        with pytest.raises(RuntimeError, match="already served"):
            seen.serve(0, addr="127.0.0.1")
        other = observed(coordinator)
        with pytest.raises(OSError, match=f"metrics port 127.0.0.1:{port}"):
            other.serve(port, addr="127.0.0.1")
    finally:
        seen.stop()
    seen.stop()  # twice is fine
    with socket.socket() as probe:  # the port is free again (for a server: TIME_WAIT is allowed)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))


def test_the_exposition_is_the_registry() -> None:
    seen = observed(federation(ManualClock(T0)))
    text = seen.exposition().decode()
    for name in ("spreads_known", "agents_connected", "outbox_messages", "hub_synced",
                 "failover_brakes_holding"):
        assert f"# TYPE fedspread_coordinator_{name} gauge" in text
    for name in ("placement_rounds", "clusters_lost", "failovers_suspended", "failovers_deferred"):
        assert f"# TYPE fedspread_coordinator_{name}_total counter" in text


def test_the_watchdogs_loops_are_metrics() -> None:
    ticks = [0.0]
    dog = watchdog.Watchdog("coordinator", clock=lambda: ticks[0], factor=3.0, floor=0.0)
    timer = dog.register("timer", period=1.0)
    dog.register("status", period=2.0, critical=False)
    found = metrics.CoordinatorMetrics(federation(ManualClock(T0)), watchdog=dog)
    ticks[0] = 4.0
    timer()
    ticks[0] = 7.0
    dog.check()
    assert found.value("loop_stalled", {"loop": "status"}) == 1
    assert found.value("loop_stalled", {"loop": "timer"}) == 0
    assert found.value("loop_seconds_since_turn", {"loop": "status"}) == 7.0
    assert found.value("loop_seconds_since_turn", {"loop": "timer"}) == 3.0
    assert metrics.CoordinatorMetrics(federation(ManualClock(T0))).value(
        "loop_stalled", {"loop": "timer"}) is None  # no watchdog, no loop metrics


def test_a_scrape_while_a_stalled_loop_holds_the_lock_still_says_what_stalls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "LOCK_SECONDS", 0.2)
    ticks = [0.0]
    dog = watchdog.Watchdog("coordinator", clock=lambda: ticks[0], factor=3.0, floor=0.0)
    dog.register("timer", period=1.0)
    coordinator = federation(ManualClock(T0))
    found = metrics.CoordinatorMetrics(coordinator, watchdog=dog)
    found.stall_stepdowns.inc()
    held, release = threading.Event(), threading.Event()

    def stalled_round() -> None:  # a round that does not end, as under a hung placement shard
        with coordinator.lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=stalled_round, daemon=True)
    holder.start()
    try:
        assert held.wait(10)
        ticks[0] = 20.0
        dog.check()
        assert found.value("loop_stalled", {"loop": "timer"}) == 1
        assert found.value("leader_stall_stepdowns_total") == 1
        assert found.value("spreads_known") is None, "the World is left out while its lock is held"
    finally:
        release.set()
        holder.join(10)
    assert found.value("spreads_known") == 1
