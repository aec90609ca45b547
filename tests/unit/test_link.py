"""The agent's link against a real gRPC server (the stand-in coordinator), no Kubernetes.

Everything crosses a real HTTP/2 connection on loopback: Hello and Welcome, assignments and acks,
pings, heartbeats, outbox reports, a coordinator that goes away and comes back on the same port,
and one that refuses the agent. Waits have deadlines and fail with what the stand-in received.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from agents import bookkeeping as bookkeeping_mod
from agents import metrics as metrics_mod
from agents import outbox as outbox_mod
from agents.link import client as link_mod
from agents.link import hello as hello_mod
from bench import standin_coordinator
from federation.api import cluster as cluster_api
from federation.rpc import agent_pb2, agent_pb2_grpc
from federation.rpc import assignment as assignment_mod

CLUSTER = "member-1"
LABELS = {"topology.fedspread.io/region": "eu-west", "topology.fedspread.io/zone": "eu-west-1a"}
DEADLINE = 10.0
NOW = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)


def make_assignment(spread: str = "shop/web", *, generation: int = 1, quotas: tuple[int, ...] = (3, 2)
                    ) -> assignment_mod.Assignment:
    namespace, name = spread.split("/")
    rules = tuple(
        assignment_mod.SubsetRule(name=f"s{i}", index=i, quota=q,
                                  required_term={"matchExpressions": [
                                      {"key": "pool", "operator": "In", "values": [f"p{i}"]}]})
        for i, q in enumerate(quotas))
    return assignment_mod.Assignment(
        spread=spread, generation=generation, namespace=namespace, workload=name,
        replicas=sum(quotas), template={"apiVersion": "apps/v1", "kind": "Deployment",
                                        "metadata": {"name": name, "namespace": namespace}},
        template_revision=f"rev-{generation}", subsets=rules, subset_count=len(rules))


class Agent:
    """A link with its real bookkeeping, outbox and metrics, plus what its callbacks saw."""

    def __init__(self, target: str, **options: Any) -> None:
        self.bookkeeping = bookkeeping_mod.Bookkeeping()
        self.outbox = outbox_mod.ReportOutbox()
        self.metrics = metrics_mod.AgentMetrics(cluster=CLUSTER)
        self.synced: list[assignment_mod.Assignment] = []
        self.removed: list[tuple[str, bool]] = []
        self.link = link_mod.Link(
            link_mod.LinkSettings(target, CLUSTER, labels=LABELS, heartbeat_seconds=0.2,
                                  backoff_initial_seconds=0.05, backoff_cap_seconds=0.5, **options),
            bookkeeping=self.bookkeeping, outbox=self.outbox, metrics=self.metrics,
            on_assignment=self.synced.append,
            on_removal=lambda spread, orphan: self.removed.append((spread, orphan)))

    def gauge(self, name: str) -> float | None:
        return self.metrics.registry.get_sample_value(name)

    def inventory(self, pools: int) -> None:
        self.outbox.put_inventory(outbox_mod.inventory_message(
            [cluster_api.NodePool(name=f"pool-{i}", count=2, allocatable={"cpu": "4"}) for i in range(pools)],
            sequence=1, observed_at=NOW))


@pytest.fixture
def standin() -> Iterator[standin_coordinator.StandinCoordinator]:
    coordinator = standin_coordinator.StandinCoordinator().start()
    yield coordinator
    coordinator.stop()


@pytest.fixture
def agent(standin: standin_coordinator.StandinCoordinator) -> Iterator[Agent]:
    started = Agent(standin.target)
    started.link.start()
    assert started.link.wait_connected(DEADLINE), f"no Welcome; stand-in saw {standin.summary()}"
    yield started
    started.link.stop()


def wait_until(standin: standin_coordinator.StandinCoordinator, probe: object, what: str) -> None:
    standin.wait_for(probe, timeout=DEADLINE, what=what)  # type: ignore[arg-type]


def test_hello_identifies_the_cluster(standin: standin_coordinator.StandinCoordinator, agent: Agent) -> None:
    hello = standin.wait_message(CLUSTER, "hello")
    assert hello.cluster_name == CLUSTER
    assert dict(hello.topology_labels) == LABELS
    assert hello.agent_version == hello_mod.agent_version()
    assert hello.started_at.seconds > 0
    assert list(hello.applied) == []
    assert agent.gauge("fedspread_agent_link_connected") == 1
    assert agent.gauge("fedspread_agent_fail_static") == 0


def test_assignment_is_applied_synced_and_acked(standin: standin_coordinator.StandinCoordinator,
                                                 agent: Agent) -> None:
    standin.assign(CLUSTER, make_assignment(quotas=(3, 2)))
    ack = standin.wait_message(CLUSTER, "ack", where=lambda a: a.spread == "shop/web")
    assert (ack.generation, ack.error) == (1, "")
    applied = agent.bookkeeping.assignment("shop/web")
    assert applied is not None and applied.quotas() == {"s0": 3, "s1": 2}
    assert applied.rule("s0") is not None and applied.rule("s0").required_term is not None  # type: ignore[union-attr]
    assert [a.spread for a in agent.synced] == ["shop/web"]


def test_stale_generation_is_refused_and_the_newer_kept(standin: standin_coordinator.StandinCoordinator,
                                                        agent: Agent) -> None:
    standin.assign(CLUSTER, make_assignment(generation=5))
    standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 5)
    standin.send(CLUSTER, agent_pb2.CoordinatorMessage(
        assignment=make_assignment(generation=4, quotas=(9,)).to_proto()))
    stale = standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 4)
    assert "stale" in stale.error
    assert agent.bookkeeping.assignment("shop/web").generation == 5  # type: ignore[union-attr]


def test_stale_removal_on_the_same_stream_is_refused(standin: standin_coordinator.StandinCoordinator,
                                                     agent: Agent) -> None:
    standin.assign(CLUSTER, make_assignment(generation=5))
    standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 5)
    standin.send(CLUSTER, agent_pb2.CoordinatorMessage(removal=agent_pb2.SpreadRemoval(
        spread="shop/web", generation=3)))
    stale = standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 3)
    assert stale.error == "stale removal generation 3; generation 5 kept"
    assert agent.bookkeeping.assignment("shop/web").generation == 5  # type: ignore[union-attr]
    assert agent.removed == []


def test_spread_recreated_on_the_same_stream_after_its_removal_is_accepted(
        standin: standin_coordinator.StandinCoordinator, agent: Agent) -> None:
    standin.assign(CLUSTER, make_assignment(generation=5))
    standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 5)
    removal = standin.remove(CLUSTER, "shop/web")
    assert standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == removal).error == ""
    standin.assign(CLUSTER, make_assignment(generation=1, quotas=(4,)))  # a new object, same name
    assert standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 1).error == ""
    assert agent.bookkeeping.assignment("shop/web").quotas() == {"s0": 4}  # type: ignore[union-attr]


def reconnect(standin: standin_coordinator.StandinCoordinator, agent: Agent) -> int:
    """Stop the stand-in until the link notices, start it again; the mark before the new stream."""
    standin.stop()
    wait_until(standin, lambda: not agent.link.connected, "the link to notice the coordinator is gone")
    return standin.mark(CLUSTER)


def wait_acks(standin: standin_coordinator.StandinCoordinator, since: int, *, generation: int,
              count: int) -> list[Any]:
    """The first `count` Acks of `generation` after message index `since`."""
    def probe() -> list[Any] | None:
        acks = [m.ack for m in standin.messages(CLUSTER, "ack", since=since)
                if m.ack.generation == generation]
        return acks[:count] if len(acks) >= count else None
    return standin.wait_for(probe, timeout=DEADLINE, what=f"{count} acks of generation {generation}")


def test_spread_recreated_while_away_is_accepted_at_a_lower_generation(
        standin: standin_coordinator.StandinCoordinator, agent: Agent) -> None:
    standin.assign(CLUSTER, make_assignment(generation=5))
    standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 5)
    mark = reconnect(standin, agent)
    # Deleted and re-created under the same name while the agent was away: generation 1 again.
    standin.assign(CLUSTER, make_assignment(generation=1, quotas=(1,)))
    standin.start()
    hello = standin.wait_message(CLUSTER, "hello", since=mark)
    assert [(a.spread, a.generation) for a in hello.applied] == [("shop/web", 5)]
    ack = standin.wait_message(CLUSTER, "ack", since=mark, where=lambda a: a.spread == "shop/web")
    assert (ack.generation, ack.error) == (1, "")
    applied = agent.bookkeeping.assignment("shop/web")
    assert applied is not None and (applied.generation, applied.quotas()) == (1, {"s0": 1})
    assert [a.generation for a in agent.synced] == [5, 1]

    # Within the new stream the guard holds again: 2 applied, then 1 is stale.
    standin.assign(CLUSTER, make_assignment(generation=2, quotas=(2,)))
    assert standin.wait_message(CLUSTER, "ack", since=mark, where=lambda a: a.generation == 2).error == ""
    standin.send(CLUSTER, agent_pb2.CoordinatorMessage(
        assignment=make_assignment(generation=1, quotas=(9,)).to_proto()))
    acks = wait_acks(standin, mark, generation=1, count=2)
    assert acks[1].error == "stale generation 1; generation 2 kept"
    assert agent.bookkeeping.assignment("shop/web").quotas() == {"s0": 2}  # type: ignore[union-attr]


def test_removal_at_a_lower_generation_after_reconnect_is_accepted(
        standin: standin_coordinator.StandinCoordinator, agent: Agent) -> None:
    standin.assign(CLUSTER, make_assignment(generation=5))
    standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 5)
    mark = reconnect(standin, agent)
    agent.link.synced.clear()
    standin.start()
    wait_until(standin, agent.link.synced.is_set, "ResyncComplete after the reconnect")
    # A restarted coordinator that no longer knows the spread numbers its removal from 0 + 1.
    standin.send(CLUSTER, agent_pb2.CoordinatorMessage(removal=agent_pb2.SpreadRemoval(
        spread="shop/web", generation=1, reason="spread deleted")))
    ack = standin.wait_message(CLUSTER, "ack", since=mark, where=lambda a: a.spread == "shop/web")
    assert (ack.generation, ack.error) == (1, "")
    assert agent.bookkeeping.assignment("shop/web") is None
    assert agent.removed == [("shop/web", False)]


def test_removal_forgets_the_spread(standin: standin_coordinator.StandinCoordinator, agent: Agent) -> None:
    standin.assign(CLUSTER, make_assignment())
    standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 1)
    generation = standin.remove(CLUSTER, "shop/web", orphan=True)
    ack = standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == generation)
    assert ack.error == ""
    assert agent.bookkeeping.assignment("shop/web") is None
    assert agent.removed == [("shop/web", True)]


def test_assignments_changed_while_away_arrive_before_resync_complete(
        standin: standin_coordinator.StandinCoordinator, agent: Agent) -> None:
    wait_until(standin, agent.link.synced.is_set, "the first ResyncComplete")
    standin.assign(CLUSTER, make_assignment(generation=1))
    standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 1)
    standin.stop()
    wait_until(standin, lambda: not agent.link.connected, "the link to notice the coordinator is gone")
    agent.link.synced.clear()
    standin.assign(CLUSTER, make_assignment(generation=2, quotas=(1, 1)))  # kept for the reconnect
    standin.start()
    wait_until(standin, agent.link.synced.is_set, "ResyncComplete after the reconnect")
    assert agent.bookkeeping.assignment("shop/web").quotas() == {"s0": 1, "s1": 1}  # type: ignore[union-attr]


def test_local_marks_the_resync_does_not_echo_are_reported_again(
        standin: standin_coordinator.StandinCoordinator, agent: Agent) -> None:
    """A restarted coordinator has lost its unschedulable marks, and the agent reported each once:
    once the new stream's resync is complete, the agent reports again the local marks no
    assignment echoes (here s1), under the generation it holds; an echoed one (s0) is not."""
    wait_until(standin, agent.link.synced.is_set, "the first ResyncComplete")
    until = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=300)
    value = make_assignment(generation=3)
    echoed = dataclasses.replace(value.subsets[0], unschedulable_until=until)
    value = dataclasses.replace(value, subsets=(echoed, value.subsets[1]))
    standin.assign(CLUSTER, value)
    standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 3)
    agent.bookkeeping.mark_unschedulable("shop/web", "s0", until=until)
    agent.bookkeeping.mark_unschedulable("shop/web", "s1", until=until)
    mark = reconnect(standin, agent)
    standin.start()
    report = standin.wait_message(CLUSTER, "unschedulable", since=mark)
    assert (report.spread, report.subset, report.generation) == ("shop/web", "s1", 3)
    assert report.since.ToDatetime(tzinfo=datetime.UTC) == until - datetime.timedelta(
        seconds=value.strategy.unschedulable_seconds)
    assert [m.unschedulable.subset for m in standin.messages(CLUSTER, "unschedulable", since=mark)] == ["s1"]


def test_heartbeats_flow_with_increasing_sequence(standin: standin_coordinator.StandinCoordinator,
                                                  agent: Agent) -> None:
    wait_until(standin, lambda: len(standin.messages(CLUSTER, "heartbeat")) >= 3, "three heartbeats")
    sequences = [m.heartbeat.sequence for m in standin.messages(CLUSTER, "heartbeat")]
    assert sequences[:3] == [1, 2, 3]


def test_ping_is_answered_with_its_nonce(standin: standin_coordinator.StandinCoordinator,
                                         agent: Agent) -> None:
    standin.ping(CLUSTER, 424242)
    beat = standin.wait_message(CLUSTER, "heartbeat", where=lambda h: h.ping_nonce == 424242)
    assert beat.sent_at.seconds > 0


def test_outbox_reports_and_events_reach_the_coordinator(standin: standin_coordinator.StandinCoordinator,
                                                         agent: Agent) -> None:
    agent.outbox.unschedulable(spread="shop/web", subset="s0", since=NOW, pods=2,
                               reason="0/3 nodes are available", generation=1)
    report = standin.wait_message(CLUSTER, "unschedulable")
    assert (report.spread, report.subset, report.pod_count) == ("shop/web", "s0", 2)
    agent.inventory(pools=2)
    inventory = standin.wait_message(CLUSTER, "inventory")
    assert [p.name for p in inventory.node_pools] == ["pool-0", "pool-1"]
    assert inventory.sequence == 1 and inventory.full


def test_resync_request_resends_the_latest_reports(standin: standin_coordinator.StandinCoordinator,
                                                   agent: Agent) -> None:
    agent.inventory(pools=1)
    standin.wait_message(CLUSTER, "inventory")
    mark = standin.mark(CLUSTER)
    standin.send(CLUSTER, agent_pb2.CoordinatorMessage(resync=agent_pb2.ResyncRequest(inventory=True)))
    again = standin.wait_message(CLUSTER, "inventory", since=mark)
    assert again.sequence == 2  # numbered per stream, whatever the reporter's own count


def test_malformed_assignment_is_acked_with_an_error_and_the_link_stays_up(
        standin: standin_coordinator.StandinCoordinator, agent: Agent) -> None:
    bad = make_assignment(spread="shop/broken", generation=7).to_proto()
    bad.template_json = "{not json"
    standin.send(CLUSTER, agent_pb2.CoordinatorMessage(assignment=bad))
    ack = standin.wait_message(CLUSTER, "ack", where=lambda a: a.spread == "shop/broken")
    assert ack.generation == 7 and "malformed JSON" in ack.error
    assert agent.bookkeeping.assignment("shop/broken") is None
    standin.assign(CLUSTER, make_assignment(spread="shop/fine"))
    assert standin.wait_message(CLUSTER, "ack", where=lambda a: a.spread == "shop/fine").error == ""
    assert agent.link.connected and agent.link.connects == 1


def test_fail_static_while_away_then_reconnect_and_full_resync(
        standin: standin_coordinator.StandinCoordinator, agent: Agent,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agents.link")
    standin.assign(CLUSTER, make_assignment(generation=3))
    standin.wait_message(CLUSTER, "ack", where=lambda a: a.generation == 3)
    agent.inventory(pools=3)
    standin.wait_message(CLUSTER, "inventory")

    standin.stop()
    wait_until(standin, lambda: not agent.link.connected, "the link to notice the coordinator is gone")
    assert agent.gauge("fedspread_agent_link_connected") == 0
    assert agent.gauge("fedspread_agent_fail_static") == 1
    assert agent.bookkeeping.assignment("shop/web").generation == 3  # type: ignore[union-attr]
    agent.outbox.unschedulable(spread="shop/web", subset="s1", since=NOW, pods=1, reason="full",
                               generation=3)  # while away: delivered after the reconnect

    mark = standin.mark(CLUSTER)
    standin.start()
    hello = standin.wait_message(CLUSTER, "hello", since=mark)
    assert [(a.spread, a.generation, a.template_revision) for a in hello.applied] == [
        ("shop/web", 3, "rev-3")]
    assert hello.resume_token == "standin-0"
    inventory = standin.wait_message(CLUSTER, "inventory", since=mark)
    assert len(inventory.node_pools) == 3 and inventory.sequence == 1
    assert standin.wait_message(CLUSTER, "unschedulable", since=mark).subset == "s1"
    assert agent.link.wait_connected(DEADLINE)
    assert agent.gauge("fedspread_agent_fail_static") == 0
    # The stand-in resends nothing (generation 3 is applied), so no second ack for it.
    assert [m for m in standin.messages(CLUSTER, "ack", since=mark) if m.ack.generation == 3] == []
    warnings = [r for r in caplog.records if link_mod.FAIL_STATIC_MESSAGE in r.getMessage()]
    assert len(warnings) == 1, "the fail-static warning is logged once per outage"


def test_refused_agent_logs_the_reason_and_heals_when_allowed(
        standin: standin_coordinator.StandinCoordinator, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="agents.link")
    standin.deny(CLUSTER, "certificate names member-9")
    refused = Agent(standin.target, misconfigured_backoff_seconds=0.1)
    refused.link.start()
    try:
        wait_until(standin, lambda: len(standin.messages(CLUSTER, "hello")) >= 2, "two refused Hellos")
        assert not refused.link.connected
        errors = [r for r in caplog.records if getattr(r, "reason", "").startswith("PERMISSION_DENIED")]
        assert len(errors) == 1 and "member-9" in errors[0].reason  # type: ignore[attr-defined]
        standin.allow(CLUSTER)
        assert refused.link.wait_connected(DEADLINE), f"never welcomed; {standin.summary()}"
    finally:
        refused.link.stop()


def test_stop_ends_the_link_thread(standin: standin_coordinator.StandinCoordinator, agent: Agent) -> None:
    agent.link.stop()
    assert not agent.link.running
    wait_until(standin, lambda: not standin.connected(CLUSTER), "the stream to end")


def test_standin_rejects_a_stream_that_does_not_start_with_hello(
        standin: standin_coordinator.StandinCoordinator) -> None:
    with grpc.insecure_channel(standin.target) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        beat = agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(sequence=1))
        with pytest.raises(grpc.RpcError) as failure:
            list(stub.Connect(iter([beat]), timeout=DEADLINE))
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
