"""The agents' messages a SpreadShard builds beside its answers (`wire.assignments.encode`) and
the rule that decides when the coordinator may send them (`wire.shard_messages.Encodings`).

A shard's bytes must be the message the coordinator would build from the same placement and inputs
(marks active and expired, clusters kept, dependency copies with a divided PodDisruptionBudget),
and they stand for it only when the placement is the shard's own answer and the inputs read at
delivery are the ones sent; when the shards fail, nothing of theirs is used. The ledger compares an
encoded message by its fingerprint and decodes only what it sends. Ray itself:
tests/integration/test_ray_shard_messages.py.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from federation.api import names, problems
from federation.api import spread as spread_api
from federation.coordinator import backends, delivery, facade
from federation.coordinator.model import loop, world
from federation.coordinator.wire import assignments, deliveries, shard_messages
from federation.core import placement
from federation.rpc import agent_pb2
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
KEY = "shop/web"


def placed_world(replicas: int = 5) -> world.World:
    """dc1 and aws, spread shop/web placed over them, listing a PodDisruptionBudget with an absolute
    minAvailable (each cluster is sent its part) and a Service; both objects on the hub."""
    model = world.World(ManualClock(T0))
    for name in ("dc1", "aws"):
        model.upsert_cluster(name, labels={names.REGION_LABEL: "eu"})
        model.inventory(name, [builders.node_pool(4)])
        model.heartbeat(name)
    doc = {"apiVersion": "fedspread.io/v1alpha1", "kind": "FederatedSpread",
           "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web", "generation": 3},
           "spec": {"targetRef": {"name": "web"}, "propagateDependencies": True,
                    "subsets": [{"name": "onprem", "clusters": ["dc1"], "maxReplicas": 2},
                                {"name": "cloud", "clusters": ["aws"]}],
                    "scheduleStrategy": {"type": "Adaptive"},
                    "propagate": [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "name": "web"},
                                  {"apiVersion": "v1", "kind": "Service", "name": "web"}]}}
    item = problems.validate(spread_api.FederatedSpread, doc, what=KEY)
    keys = model.upsert_spread(item) | model.set_target(
        KEY, replicas=replicas, template=builders.deployment("web", namespace="shop"))
    for kind, body in (("PodDisruptionBudget", {"minAvailable": 3}), ("Service", {"ports": [{"port": 80}]})):
        model.hub_object(kind, KEY, {"apiVersion": "policy/v1" if kind != "Service" else "v1", "kind": kind,
                                     "metadata": {"name": "web", "namespace": "shop"},
                                     "spec": {"selector": {"matchLabels": {"app": "web"}}, **body}})
    loop.recompute(model, keys, now=T0)
    return model


def inputs_for(model: world.World, *, keep: frozenset[str] = frozenset(),
               now: datetime.datetime = T0) -> assignments.MessageInputs:
    entry = model.spread(KEY)
    assert entry is not None
    marks = (placement.UnschedulableMark("cloud", "aws", T0 - datetime.timedelta(seconds=30)),  # active
             placement.UnschedulableMark("onprem", "dc1", T0 - datetime.timedelta(days=1)))  # expired
    return assignments.inputs_of(entry, marks=marks, now=now, keep=keep, objects=model.hub_objects)


@pytest.mark.parametrize("keep", [frozenset(), frozenset({"aws"}), frozenset({"dc1", "aws", "gone"})])
def test_a_shards_encoding_is_the_message_the_coordinator_builds(keep: frozenset[str]) -> None:
    model = placed_world()
    inputs = inputs_for(model, keep=keep)
    result = model.placements[KEY]
    built = assignments.stamped(assignments.build(inputs, result), now=T0)
    encoded = assignments.encode(inputs, result)
    assert sorted(encoded) == sorted(built) == ["aws", "dc1"]
    for name, message in built.items():
        assert encoded[name].data == agent_pb2.CoordinatorMessage(assignment=message).SerializeToString()
        assert encoded[name].print == assignments.comparable(message)
        assert encoded[name].message() == message
    aws = built["aws"]
    assert aws.subsets[1].HasField("unschedulable_until") and not built["dc1"].subsets[0].HasField(
        "unschedulable_until")  # the active mark is sent, the expired one is not
    budgets = {name: [d.object_json for d in m.dependencies if d.kind == "PodDisruptionBudget"]
               for name, m in built.items()}
    assert budgets["aws"] != budgets["dc1"]  # each cluster its part of minAvailable: 3
    assert aws.issued_at.ToDatetime(tzinfo=datetime.UTC) == T0


def test_for_clusters_is_build_on_the_entrys_inputs() -> None:
    model = placed_world()
    entry = model.spread(KEY)
    assert entry is not None
    inputs = inputs_for(model)
    old = assignments.for_clusters(entry, model.placements[KEY], marks=inputs.marks, now=T0,
                                   objects=model.hub_objects, only={"aws"})
    assert old == assignments.build(inputs, model.placements[KEY], only={"aws"})


def test_the_coordinators_messages_from_its_kept_template_json_are_the_shards_bytes() -> None:
    """`Delivery` keeps each spread's template text while its template stands (a drain builds a
    thousand spreads' messages again): what it builds is byte for byte what a shard encodes, the
    first time, the next, and after the template changed; the messages carry the very text the
    revision hashes."""
    model = placed_world()
    sent = delivery.Delivery(model, clock=ManualClock(T0), streams={})
    for template in (None, builders.deployment("web", namespace="shop", cpu="2")):
        if template is not None:  # the template changes: its JSON is dumped again
            loop.recompute(model, model.set_target(KEY, replicas=5, template=template), now=T0)
        for _ in range(2):  # the second build uses the JSON the first one kept
            built = sent.assignments_for(KEY, now=T0)
            inputs = sent.inputs_for_shards(KEY, now=T0)
            assert inputs is not None
            encoded = assignments.encode(inputs, model.placements[KEY])
            assert {name: agent_pb2.CoordinatorMessage(assignment=message).SerializeToString()
                    for name, message in built.items()} == {
                name: item.data for name, item in encoded.items()}
            assert '"cpu":"2"' in built["aws"].template_json or template is None
            assert built["aws"].template_json == inputs.template  # one text, made once per template
            assert built["aws"].template_revision == assignments.revision_of_text(inputs.template)


class Shards:
    """What a RayBackend does with `Encodings` for one call of spreads `keys`, without Ray."""

    def __init__(self, model: world.World, *, fails: bool = False) -> None:
        self.model, self.fails, self.waited = model, fails, 0
        self.encodings = shard_messages.Encodings(lambda key: inputs_for(model) if key == KEY else None)

    def round(self, keys: list[str], answers: list[placement.Placement]) -> None:
        inputs = self.encodings.inputs(keys)
        built = [None if item is None else shard_messages.pack(assignments.encode(item, answer))
                 for item, answer in zip(inputs, answers, strict=True)]
        self.encodings.sent(keys, built)  # the "ref" is the value itself here
        self.encodings.answered(keys, answers, wait=self.wait)

    def wait(self, refs: list[Any], what: str) -> list[Any]:
        self.waited += 1
        if self.fails:
            raise loop.BatchUnavailable(f"Ray did not answer {what} within 1 s")
        return refs


def test_the_shards_bytes_stand_only_for_their_own_answer_and_the_inputs_sent() -> None:
    model = placed_world()
    shards = Shards(model)
    answer = model.placements[KEY]
    shards.round([KEY, "shop/job"], [answer, answer])
    assert shards.encodings.answered_for(KEY) and not shards.encodings.answered_for("shop/other")
    found = shards.encodings.usable(KEY, placed=answer, inputs=inputs_for(model))
    assert found is not None and sorted(found) == ["aws", "dc1"] and shards.waited == 1
    equal_but_another = dataclasses.replace(answer)
    assert equal_but_another == answer
    assert shards.encodings.usable(KEY, placed=equal_but_another, inputs=inputs_for(model)) is None
    later = inputs_for(model, now=T0 + datetime.timedelta(hours=1))  # the mark has expired meanwhile
    assert shards.encodings.usable(KEY, placed=answer, inputs=later) is None
    kept = inputs_for(model, keep=frozenset({"aws"}))  # a cluster holds pods it did not before
    assert kept != inputs_for(model) and shards.encodings.usable(KEY, placed=answer, inputs=kept) is None
    assert shards.encodings.usable("shop/job", placed=answer, inputs=inputs_for(model)) is None  # not sent
    assert shards.waited == 1 and shards.encodings.failed == ""


def test_nothing_of_the_shards_is_used_when_they_fail_or_never_answered() -> None:
    model = placed_world()
    failing = Shards(model, fails=True)
    answer = model.placements[KEY]
    failing.round([KEY], [answer])
    assert failing.encodings.usable(KEY, placed=answer, inputs=inputs_for(model)) is None
    assert "did not answer the round's agent messages" in failing.encodings.failed
    unanswered = Shards(model)
    unanswered.encodings.inputs([KEY])  # sent, but the round's answers never came back
    assert not unanswered.encodings.answered_for(KEY)
    assert unanswered.encodings.usable(KEY, placed=answer, inputs=inputs_for(model)) is None
    assert unanswered.waited == 0


def test_the_ledger_compares_an_encoded_message_by_its_fingerprint() -> None:
    model = placed_world()
    inputs = inputs_for(model)
    first = assignments.encode(inputs, model.placements[KEY])
    ledger = deliveries.SentLedger()
    sent = ledger.deliver("aws", KEY, first["aws"], reason="")
    assert sent is first["aws"]  # kept and sent as the shard made it, never parsed on the way
    message = first["aws"].message()
    assert ledger.last("aws", KEY) == message and ledger.gave_replicas(KEY) == {"aws"}
    assert ledger.replicas_sent("aws", KEY) == message.replicas and ledger.replicas_sent("gcp", KEY) is None
    assert (sent.replicas, sent.generation) == (message.replicas, message.generation) > (0, 0)
    assert dict(sent.quotas) == assignments.quotas(message)
    later = assignments.encode(
        assignments.inputs_of(model.spread(KEY),  # type: ignore[arg-type]
                              marks=inputs.marks, now=T0 + datetime.timedelta(seconds=5),
                              objects=model.hub_objects), model.placements[KEY])
    assert later["aws"].data != first["aws"].data  # issued later ...
    assert ledger.deliver("aws", KEY, later["aws"], reason="") is None  # ... but the same: not sent
    model.set_target(KEY, replicas=7, template=builders.deployment("web", namespace="shop"))
    loop.recompute(model, {KEY}, now=T0)
    grown = assignments.encode(inputs, model.placements[KEY])
    again = ledger.deliver("aws", KEY, grown["aws"], reason="")
    assert isinstance(again, assignments.Encoded) and again.replicas > sent.replicas
    removal = ledger.deliver("aws", KEY, None, reason="cluster no longer selected")
    assert isinstance(removal, agent_pb2.SpreadRemoval) and removal.generation == again.generation + 1


def test_a_jobs_messages_are_never_left_to_the_shards() -> None:
    """A Job's member completions follow the World's reports (`model.job_spreads`), which a shard
    does not have: its messages are always built in the coordinator."""
    model = placed_world()
    job = spread_api.FederatedSpread.model_validate({
        "metadata": {"name": "work", "namespace": "shop", "generation": 1},
        "spec": {"targetRef": {"apiVersion": "batch/v1", "kind": "Job", "name": "work"},
                 "subsets": [{"name": "first", "clusters": ["dc1"]}, {"name": "rest", "clusters": ["aws"]}]}})
    keys = model.upsert_spread(job) | model.set_target("shop/work", replicas=2, template={
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "work", "namespace": "shop"},
        "spec": {"parallelism": 2, "completions": 4, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "app", "image": "x"}]}}}})
    loop.recompute(model, keys, now=T0)
    deliveries_of = delivery.Delivery(model, clock=lambda: T0, streams={})
    assert deliveries_of.inputs_for("shop/work", now=T0) is not None
    assert deliveries_of.inputs_for_shards("shop/work", now=T0) is None
    assert deliveries_of.inputs_for_shards(KEY, now=T0) == deliveries_of.inputs_for(KEY, now=T0)
    assert deliveries_of.inputs_for_shards("shop/gone", now=T0) is None


def test_a_spread_placed_in_the_coordinator_alone_reads_its_inputs_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a parallel backend, a round below the crossover (one spread's scale) never reaches the
    shards: its messages are built here without first asking what the shards would have been given
    (the single-spread event is the hot path)."""
    class Parallel(backends.LocalBackend):
        parallel, parallel_from = True, 1_000_000

    model = placed_world()
    made = facade.Coordinator(model, clock=lambda: T0, backend=Parallel(), coordinator_id="t")
    stream = made.attach(agent_pb2.Hello(cluster_name="aws"), heartbeat_seconds=1)
    read: list[str] = []
    inputs_of_spread = delivery.Delivery.inputs_for

    def counted(self: delivery.Delivery, key: str, **kwargs: Any) -> assignments.MessageInputs | None:
        read.append(key)
        return inputs_of_spread(self, key, **kwargs)

    monkeypatch.setattr(delivery.Delivery, "inputs_for", counted)
    model.set_target(KEY, replicas=7, template=builders.deployment("web", namespace="shop"))
    assert KEY in made.publish({KEY}).placements
    assert read == [KEY]
    sent = [m.assignment for m in iter(stream.outgoing.take, None)
            if isinstance(m, agent_pb2.CoordinatorMessage) and m.WhichOneof("body") == "assignment"]
    assert sent and sent[-1].replicas > 0
