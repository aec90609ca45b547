"""A stand-in agent of the placement benchmark opens its stream again when the coordinator ends it.

Why: a real agent reconnects and is sent everything again; a stand-in that did not would leave a
benchmark waiting for messages its closed stream could never carry, and the figure would blame
the coordinator for the stand-in. Here a second stream for the same cluster (an agent started
twice) makes the coordinator end the stand-in's stream (ALREADY_EXISTS); the stand-in must record
the end, open again, and hold what the coordinator sends afterwards. No sandbox: the real facade,
AgentServicer and gRPC, with the stand-ins in their own process as in the benchmark.
"""

from __future__ import annotations

import time

import grpc

from bench import placement, placement_backends, placement_events, placement_world
from bench.placement_world import Shape
from federation.rpc import agent_pb2, agent_pb2_grpc

SHAPE = Shape(spreads=20, clusters=3, per_spread=2)
WAIT = 60.0


def test_a_stream_the_coordinator_ends_is_opened_again_and_receives_what_follows() -> None:
    placing = placement_backends.Backend("local")
    try:
        with placement.running(SHAPE, placing=placing) as run:
            placement._full_round(run.coordinator, run.recorder, run.agents, shape=SHAPE, placing=placing)
            name = placement_world.cluster_name(0)
            intrude(run, name)
            resent = resync_of(run, name)
            assert any(isinstance(m, agent_pb2.SpreadAssignment) and m.replicas > 0 for m in resent.values())
            placement_events.held(run.agents.ask, run.recorder, since=time.monotonic(), sent=resent,
                                  timeout=WAIT)
            spread = next(key for (_, key), m in resent.items() if getattr(m, "replicas", 0) > 0)
            index = next(i for i in range(SHAPE.spreads) if placement_world.spread(i, SHAPE).key == spread)
            sample = placement_events.scale_up(run.coordinator, run.recorder, run.agents.ask, index=index,
                                               shape=SHAPE, timeout=WAIT)
            assert sample.messages > 0
            assert run.agents.ask("ended", {})["count"] == 1, "only the intruder ended a stream"
            assert run.recorder.detached >= 2, "the stand-in's and the intruder's streams ended"
    finally:
        placing.close()


def intrude(run: placement.Running, name: str) -> None:
    """Open a second stream for cluster `name` until the coordinator ended the stand-in's."""
    channel = grpc.insecure_channel(run.target)
    hello = agent_pb2.AgentMessage(hello=agent_pb2.Hello(cluster_name=name, agent_version="intruder"))
    intruder = agent_pb2_grpc.AgentServiceStub(channel).Connect(iter([hello]), timeout=WAIT)
    try:
        deadline = time.monotonic() + WAIT
        ended = run.agents.ask("ended", {})
        while ended["count"] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
            ended = run.agents.ask("ended", {})
        assert ended["count"] == 1, "the coordinator never ended the stand-in's stream"
        assert "ALREADY_EXISTS" in ended["examples"][0], ended
    finally:
        intruder.cancel()
        channel.close()


def resync_of(run: placement.Running, name: str) -> placement_events.Sent:
    """What the coordinator sends cluster `name` once its stand-in opened the stream again: the
    latest message per spread once the intruder's stream has ended too (two streams detached) and
    the cluster is connected again. Without the count, the intruder's own resync could be taken
    for the stand-in's (seen once under a loaded `make test`): the stand-in's, sent later with
    another issue time, never matched it."""
    resent: placement_events.Sent = {}
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        sent, _ = run.recorder.take()
        resent.update({pair: message for pair, message in sent.items() if pair[0] == name})
        if resent and run.recorder.detached >= 2 and name in run.coordinator.connected():
            return resent
        time.sleep(0.2)
    raise AssertionError(f"{name}'s stand-in was never sent its spreads again")
