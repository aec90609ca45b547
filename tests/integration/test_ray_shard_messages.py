"""The agents' messages a real local Ray's SpreadShards build (`wire.shard_messages`): what every
agent is sent after a round on Ray is what the in-process coordinator sends, byte for byte.

A coordinator facade on a `RayBackend` (rounds of two spreads and up go to the shards) and one on
the in-process backend are given the same world, the same agents and the same events; each agent's
outbox must hold the same messages. The shards' bytes are used only for a spread whose placement is
the shard's own answer: a spread the round's check placed again, and every spread when the shards
fail to build them, is built in the coordinator — the messages stay the same.
"""

from __future__ import annotations

import datetime
import queue
from collections.abc import Iterator

import pytest

from federation.coordinator import delivery, facade, shards
from federation.coordinator.model import world
from federation.rpc import agent_pb2
from tests.support import contended_round

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
CLUSTERS = ("tiny", "big")


class Federation:
    """A facade over the contended world (twelve spreads, tiny's four slots contended) with both
    agents attached and resynced, nothing placed yet."""

    def __init__(self, backend: shards.RayBackend | None) -> None:
        model = contended_round.contended_world({"tiny": 1, "big": 10}, now=NOW)
        self.coordinator = facade.Coordinator(model, clock=lambda: NOW, backend=backend, coordinator_id="t")
        self.streams = {name: self.coordinator.attach(agent_pb2.Hello(cluster_name=name), heartbeat_seconds=1)
                        for name in CLUSTERS}
        self.keys = sorted(entry.key for entry in model.spreads())


def assignments_sent(made: Federation) -> dict[str, list[bytes]]:
    """Per agent, every assignment and removal queued for it since the last call, serialized."""
    found: dict[str, list[bytes]] = {}
    for name, stream in made.streams.items():
        items = found.setdefault(name, [])
        while True:
            try:
                item = stream.outgoing.get_nowait()
            except queue.Empty:
                break
            assert isinstance(item, agent_pb2.CoordinatorMessage)
            if item.WhichOneof("body") in ("assignment", "removal"):
                items.append(item.SerializeToString(deterministic=True))
    return found


@pytest.fixture
def ray_backend(local_ray: str) -> Iterator[shards.RayBackend]:
    made = shards.RayBackend(shards=2, cluster_shards=2, parallel_from=2)
    try:
        yield made
    finally:
        made.close()


def events(made: Federation) -> Iterator[tuple[str, dict[str, list[bytes]]]]:
    """A full round, a scale of every third spread, the same round again: each published as one
    round of every spread; what each agent was sent after each."""
    model: world.World = made.coordinator.world
    keys = made.keys
    made.coordinator.publish(keys)
    yield "first round", assignments_sent(made)
    for index, key in enumerate(keys):
        if index % 3 == 0:
            entry = model.spread(key)
            assert entry is not None and entry.replicas is not None
            model.set_target(key, replicas=entry.replicas + 2, template=entry.template)
    made.coordinator.publish(keys)
    yield "scaled", assignments_sent(made)
    made.coordinator.publish(keys)
    yield "nothing changed", assignments_sent(made)


def test_the_messages_the_shards_build_are_the_ones_built_in_process(
    ray_backend: shards.RayBackend, monkeypatch: pytest.MonkeyPatch,
) -> None:
    built_here: list[str] = []
    build = delivery.Delivery.assignments_for

    def counted(self: delivery.Delivery, key: str, **kwargs: object) -> object:
        built_here.append(key)
        return build(self, key, **kwargs)  # type: ignore[arg-type]

    on_ray, in_process = Federation(ray_backend), Federation(None)
    keys = on_ray.keys
    monkeypatch.setattr(delivery.Delivery, "assignments_for", counted)
    rounds = dict(events(on_ray))
    built_on_ray, built_here[:] = list(built_here), []
    expected = dict(events(in_process))
    assert rounds == expected
    assert all(rounds["first round"][name] for name in CLUSTERS)  # both agents were sent assignments
    assert rounds["scaled"]["big"] and rounds["nothing changed"] == {name: [] for name in CLUSTERS}
    assert len(built_here) == 3 * len(keys)  # in-process: every spread built here, every round
    # On Ray, only the spreads the round's check placed again (tiny is contended) were built here.
    assert 0 < len(built_on_ray) < 3 * len(keys), built_on_ray
    # Each spread's message parts and template went to its shard once, and so did its spec and pod
    # shape (a scale that leaves the pods as they were keeps the World's plan, so the shape the
    # shard holds): the rounds after the first sent tokens, and the shards' messages were still
    # the in-process ones.
    sides = ray_backend.specs_sent
    assert sum(s.templates_shipped for s in sides) == len(keys)
    assert sum(s.specs_shipped for s in sides) == len(keys)


def test_messages_the_shards_fail_to_build_are_built_in_the_coordinator(
    ray_backend: shards.RayBackend, caplog: pytest.LogCaptureFixture,
) -> None:
    """SpreadShards whose `encode` fails: every round's placements still come from the shards, its
    messages are built in the coordinator, the same as in-process, and a warning says so."""
    import ray

    class NoMessages(shards.SpreadShard):  # defined here: Ray ships it by value
        """A SpreadShard that places but cannot build messages."""

        def encode(self, inputs: object, answers: object, round_id: str) -> list[None]:
            raise RuntimeError("no messages from this shard")

    real = ray_backend.actors
    ray_backend.actors = [ray.remote(num_cpus=0)(NoMessages).remote() for _ in real]
    try:
        rounds = dict(events(Federation(ray_backend)))
        assert rounds == dict(events(Federation(None)))
        assert rounds["first round"]["big"]
        assert "did not build the round's agent messages" in caplog.text
        # A call that failed may not have reached its shard: each is sent everything again.
        assert [side.holds() for side in ray_backend.specs_sent] == [0] * len(real)
    finally:
        for actor in ray_backend.actors:
            ray.kill(actor, no_restart=True)
        ray_backend.actors = real
