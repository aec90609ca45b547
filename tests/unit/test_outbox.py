"""The per-stream outbox (`wire.outbox`): bounded, coalescing per spread, and still correct.

Why these tests: the outbox may drop versions of a spread's assignment that the agent never sees,
so what it leaves must bring the agent to exactly what `deliveries.SentLedger` says it holds —
including across a removal and a re-created spread (generation back to 1), which the agent would
refuse as stale if the removal were coalesced away. The property test drives the real ledger and
outbox with random publishes and partial reads, and applies what comes out with the agent link's
generation rules (agents/link/client.py), modelled here: no refusal, and the agent ends holding
what the ledger says — with assignments delivered as objects or as a shard's bytes
(`assignments.Encoded`, queued serialized), read as objects or as the writer's serialized batches.
"""

from __future__ import annotations

import queue
import threading

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.coordinator.wire import assignments, deliveries, outbox
from federation.rpc import agent_pb2, capabilities, framing

Message = agent_pb2.CoordinatorMessage


def assignment(key: str, *, replicas: int, generation: int = 1) -> Message:
    return Message(assignment=agent_pb2.SpreadAssignment(spread=key, generation=generation,
                                                         replicas=replicas))


def removal(key: str, *, generation: int = 2) -> Message:
    return Message(removal=agent_pb2.SpreadRemoval(spread=key, generation=generation))


def notice(code: str = "BadReport") -> Message:
    return Message(notice=agent_pb2.Notice(code=code))


def drain(box: outbox.Outbox) -> list[object]:
    found = []
    while True:
        try:
            found.append(box.get_nowait())
        except queue.Empty:
            return found


def describe(item: object) -> tuple[str, ...]:
    assert isinstance(item, Message)
    kind = item.WhichOneof("body")
    if kind == "assignment":
        return (kind, item.assignment.spread, str(item.assignment.replicas))
    if kind == "removal":
        return (kind, item.removal.spread)
    if kind == "notice":
        return (kind, item.notice.code)
    return (str(kind),)


def test_a_newer_assignment_replaces_the_queued_one_at_its_place() -> None:
    box = outbox.Outbox()
    box.put(Message(welcome=agent_pb2.Welcome(cluster_name="dc1")))
    box.put(assignment("shop/a", replicas=1))
    box.put(assignment("shop/b", replicas=1))
    box.put(notice(capabilities.RESYNC_COMPLETE_CODE))
    box.put(assignment("shop/a", replicas=2))
    box.put(assignment("shop/a", replicas=3))
    assert len(box) == 4 and box.coalesced == 2
    assert [describe(m) for m in drain(box)] == [
        ("welcome",), ("assignment", "shop/a", "3"), ("assignment", "shop/b", "1"),
        ("notice", capabilities.RESYNC_COMPLETE_CODE)]


def test_a_removal_replaces_a_queued_assignment() -> None:
    box = outbox.Outbox()
    box.put(assignment("shop/a", replicas=0))
    box.put(removal("shop/a"))
    assert [describe(m) for m in drain(box)] == [("removal", "shop/a")]


def test_an_assignment_never_replaces_a_queued_removal() -> None:
    """The removal resets the spread's generations on the stream: a re-created spread starts at 1."""
    box = outbox.Outbox()
    box.put(removal("shop/a", generation=6))
    box.put(assignment("shop/a", replicas=1, generation=1))
    box.put(assignment("shop/a", replicas=2, generation=1))  # replaces the one after the removal
    assert [describe(m) for m in drain(box)] == [("removal", "shop/a"), ("assignment", "shop/a", "2")]


def test_a_removal_after_a_removal_and_an_assignment_leaves_the_first_removal() -> None:
    """Deleted, re-created, deleted again before the agent read any of it: it ends without the
    spread after the first removal, as after the last; so a spread never holds more than two."""
    box = outbox.Outbox()
    box.put(assignment("shop/b", replicas=1))
    for _ in range(5):
        box.put(removal("shop/a", generation=6))
        box.put(assignment("shop/a", replicas=1, generation=1))
    assert len(box) == 3
    box.put(removal("shop/a", generation=2))
    assert [describe(m) for m in drain(box)] == [("assignment", "shop/b", "1"), ("removal", "shop/a")]


def test_deleting_and_recreating_a_spread_forever_leaves_no_trace() -> None:
    box = outbox.Outbox()
    box.put(assignment("shop/b", replicas=1))
    for _ in range(10_000):
        box.put(removal("shop/a", generation=6))
        box.put(assignment("shop/a", replicas=1, generation=1))
    assert len(box) == 3
    assert len(box._queue) <= 3 + 65, "emptied slots are compacted away"
    assert [describe(m) for m in drain(box)] == [
        ("assignment", "shop/b", "1"), ("removal", "shop/a"), ("assignment", "shop/a", "1")]


def test_a_key_taken_by_the_writer_is_queued_anew() -> None:
    box = outbox.Outbox()
    box.put(assignment("shop/a", replicas=1))
    assert describe(box.take()) == ("assignment", "shop/a", "1")
    box.put(assignment("shop/a", replicas=2))
    assert [describe(m) for m in drain(box)] == [("assignment", "shop/a", "2")]


def test_resync_requests_merge() -> None:
    box = outbox.Outbox()
    box.put(Message(resync=agent_pb2.ResyncRequest(inventory=True, reason="one")))
    box.put(Message(resync=agent_pb2.ResyncRequest(pod_counts=True, reason="two")))
    [merged] = drain(box)
    assert isinstance(merged, Message)
    assert (merged.resync.inventory, merged.resync.pod_counts, merged.resync.reason) == (True, True, "two")


def test_advisory_notices_are_bounded_but_welcome_and_resync_complete_are_not() -> None:
    box = outbox.Outbox(max_notices=3)
    box.put(Message(welcome=agent_pb2.Welcome(cluster_name="dc1")))
    results = [box.put(notice()) for _ in range(10)]
    assert results == [True] * 3 + [False] * 7 and box.dropped == 7
    assert box.put(notice(capabilities.RESYNC_COMPLETE_CODE))
    assert len(box) == 5
    assert describe(box.take()) == ("welcome",)
    assert describe(box.take()) == ("notice", "BadReport")
    assert box.put(notice()), "a taken notice makes room for another"


def test_memory_is_bounded_by_the_spreads_not_by_the_updates() -> None:
    box = outbox.Outbox()
    for round_ in range(200):
        for index in range(50):
            box.put(assignment(f"shop/s{index}", replicas=round_))
            if round_ % 7 == 0:
                box.put(removal(f"shop/s{index}"))
        assert len(box) <= 2 * 50
    assert len(box) <= 2 * 50
    last = {m.assignment.spread: m.assignment.replicas for m in drain(box)  # type: ignore[attr-defined]
            if m.WhichOneof("body") == "assignment"}  # type: ignore[attr-defined]
    assert last == {f"shop/s{index}": 199 for index in range(50)}


def test_close_at_once_or_after_what_is_queued() -> None:
    ended, superseded = object(), object()
    box = outbox.Outbox()
    box.put(assignment("shop/a", replicas=1))
    box.close(ended, drain=True)
    assert not box.put(assignment("shop/b", replicas=1)), "nothing is queued after a close"
    box.close(ended, drain=True)  # a second close changes nothing
    assert describe(box.take()) == ("assignment", "shop/a", "1")
    assert box.take() is ended and box.take() is ended
    box = outbox.Outbox()
    box.put(assignment("shop/a", replicas=1))
    box.close(ended, drain=True)
    box.close(superseded)  # an immediate close overrides a draining one
    assert box.take() is superseded and box.closed
    box.close(ended, drain=True)
    assert box.take() is superseded, "and is not overridden"


def test_a_batch_is_what_is_queued_in_order_up_to_its_count() -> None:
    box = outbox.Outbox()
    assert box.take_batch() is None
    for number in range(5):
        box.put(assignment(f"shop/s{number}", replicas=number))
    box.put(assignment("shop/s1", replicas=9))  # coalesced at its place, as for `take`
    box.put(notice())
    first = box.take_batch(max_messages=4)
    assert isinstance(first, list)
    assert [describe(m) for m in first] == [("assignment", f"shop/s{n}", "9" if n == 1 else str(n))
                                            for n in range(4)]
    second = box.take_batch(max_messages=4)
    assert isinstance(second, list)
    assert [describe(m) for m in second] == [("assignment", "shop/s4", "4"), ("notice", "BadReport")]
    assert box.take_batch() is None and len(box) == 0


def test_a_batch_never_passes_its_bytes_and_a_large_message_goes_alone() -> None:
    box = outbox.Outbox()
    big = Message(assignment=agent_pb2.SpreadAssignment(spread="shop/big", template_revision="x" * 5_000))
    small = [assignment(f"shop/s{n}", replicas=1) for n in range(3)]  # the same size each
    size = small[0].ByteSize()
    for message in (*small[:1], big, *small[1:]):
        box.put(message)
    assert box.take_batch(max_bytes=1_000) == small[:1], "the big one would pass the bytes: it waits"
    assert box.take_batch(max_bytes=1_000) == [big], "and then goes alone"
    assert box.take_batch(max_bytes=2 * size) == small[1:], "exactly the bytes"
    for message in small:
        box.put(message)
    assert box.take_batch(max_bytes=2 * size - 1) == small[:1]
    assert box.take_batch(max_bytes=2 * size - 1) == small[1:2]


def test_a_welcome_goes_alone_and_ends_the_batch_before_it() -> None:
    box = outbox.Outbox()
    welcome = Message(welcome=agent_pb2.Welcome(cluster_name="dc1"))
    box.put(welcome)
    box.put(assignment("shop/a", replicas=1))
    assert box.take_batch() == [welcome]
    box.put(welcome)  # (never twice on a stream: here only to show where a batch stops)
    assert box.take_batch() == [assignment("shop/a", replicas=1)]
    assert box.take_batch() == [welcome]


def test_a_close_reason_is_handed_out_after_the_batch_or_at_once() -> None:
    ended, superseded = object(), object()
    box = outbox.Outbox()
    box.put(assignment("shop/a", replicas=1))
    box.put(assignment("shop/b", replicas=1))
    box.close(ended, drain=True)
    taken = box.take_batch()
    assert isinstance(taken, list) and len(taken) == 2
    assert box.take_batch() is ended
    box = outbox.Outbox()
    box.put(assignment("shop/a", replicas=1))
    box.close(superseded)
    assert box.take_batch() is superseded, "a superseded stream sends nothing still queued"


def test_a_writer_that_found_no_batch_is_woken_by_the_next_put() -> None:
    box = outbox.Outbox()
    calls: list[int] = []
    box.set_waker(lambda: calls.append(1))
    assert box.take_batch() is None
    box.put(assignment("shop/a", replicas=1))
    box.put(assignment("shop/b", replicas=1))
    assert calls == [1]


def test_the_waker_is_called_once_when_the_writer_waits() -> None:
    box = outbox.Outbox()
    calls: list[int] = []
    box.set_waker(lambda: calls.append(1))
    box.put(assignment("shop/a", replicas=1))
    assert calls == [], "the writer was not waiting"
    assert box.take() is not None and box.take() is None  # now it waits
    for replicas in range(1000):
        box.put(assignment(f"shop/s{replicas}", replicas=replicas))
    assert calls == [1]
    drain(box)
    assert box.take() is None
    box.close(object())
    assert calls == [1, 1]
    box.set_waker(None)
    box.put(assignment("shop/a", replicas=1))


def test_puts_from_threads_keep_the_last_per_spread() -> None:
    box = outbox.Outbox()
    taken: list[object] = []
    done = threading.Event()

    def writer() -> None:
        while not done.is_set() or not box.empty():
            item = box.take()
            if item is not None:
                taken.append(item)

    reader = threading.Thread(target=writer)
    reader.start()

    def publisher(index: int) -> None:
        for replicas in range(300):
            box.put(assignment(f"shop/s{index}", replicas=replicas))

    threads = [threading.Thread(target=publisher, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    reader.join(10)
    last: dict[str, int] = {}
    for item in taken:
        assert isinstance(item, Message)
        key = item.assignment.spread
        assert item.assignment.replicas >= last.get(key, -1), "a spread's versions never go back"
        last[key] = item.assignment.replicas
    assert last == {f"shop/s{i}": 299 for i in range(4)}


# --- the ledger, the outbox and the agent's generation rules together ------------------------------

KEYS = ("shop/a", "shop/b")
steps = st.lists(st.one_of(
    st.tuples(st.just("assign"), st.sampled_from(KEYS), st.integers(0, 3)),
    st.tuples(st.just("assign_encoded"), st.sampled_from(KEYS), st.integers(0, 3)),  # a shard's bytes
    st.tuples(st.just("spec"), st.sampled_from(KEYS), st.integers(0, 3)),  # a new generation
    st.tuples(st.just("unassign"), st.sampled_from(KEYS), st.booleans()),
    st.tuples(st.just("recreate"), st.sampled_from(KEYS), st.integers(0, 3)),
    st.tuples(st.just("read"), st.integers(1, 3), st.just(0)),
    st.tuples(st.just("read_batch"), st.integers(1, 3), st.just(0)),  # a writer's batch of at most N
    st.tuples(st.just("read_serialized"), st.booleans(), st.just(0)),  # the writer's bytes (batches?)
), max_size=40)


class AgentModel:
    """What agents/link/client.py does with assignments and removals on one stream."""

    def __init__(self) -> None:
        self.held: dict[str, agent_pb2.SpreadAssignment] = {}
        self.seen: dict[str, int] = {}

    def apply(self, message: Message) -> None:
        if message.WhichOneof("body") == "assignment":
            item = message.assignment
            assert self.seen.get(item.spread, 0) <= item.generation, f"stale assignment of {item.spread}"
            self.held[item.spread] = item
            self.seen[item.spread] = item.generation
        elif message.WhichOneof("body") == "removal":
            item = message.removal
            assert self.seen.get(item.spread, 0) <= item.generation, f"stale removal of {item.spread}"
            self.held.pop(item.spread, None)
            self.seen.pop(item.spread, None)


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(steps)
def test_what_the_agent_ends_with_is_what_the_ledger_says_it_holds(
    script: list[tuple[str, object, object]],
) -> None:
    ledger, box, agent = deliveries.SentLedger(), outbox.Outbox(), AgentModel()
    generation = dict.fromkeys(KEYS, 1)

    def deliver(key: str, replicas: int | None, *, encoded: bool = False) -> None:
        message = None if replicas is None else agent_pb2.SpreadAssignment(
            spread=key, generation=generation[key], replicas=replicas)
        new: agent_pb2.SpreadAssignment | assignments.Encoded | None = message
        if message is not None and encoded:
            new = assignments.Encoded(framing.assignment_message(message.SerializeToString()),
                                      assignments.comparable(message),
                                      replicas=message.replicas, generation=message.generation, quotas=())
        sent = ledger.deliver("dc1", key, new, reason="test")
        if isinstance(sent, assignments.Encoded):
            box.put_assignment(spread=key, message=sent.data)
        elif isinstance(sent, agent_pb2.SpreadAssignment):
            box.put(Message(assignment=sent))
        elif sent is not None:
            box.put(Message(removal=sent))

    for action, first, second in script:
        if action == "read":
            for _ in range(int(first)):  # type: ignore[call-overload]
                item = box.take()
                if isinstance(item, Message):
                    agent.apply(item)
            continue
        if action == "read_batch":
            taken = box.take_batch(max_messages=int(first))  # type: ignore[call-overload]
            for message in taken if isinstance(taken, list) else []:
                agent.apply(message)
            continue
        if action == "read_serialized":
            data = box.take_serialized(batches=bool(first))
            if isinstance(data, bytes):
                read = Message.FromString(data)
                for message in read.batch.messages if read.WhichOneof("body") == "batch" else [read]:
                    agent.apply(message)
            continue
        key = str(first)
        if action == "spec":
            generation[key] += 1
            deliver(key, int(second))  # type: ignore[call-overload]
        elif action in ("assign", "assign_encoded"):
            deliver(key, int(second), encoded=action == "assign_encoded")  # type: ignore[call-overload]
        elif action == "unassign":
            deliver(key, None)
        else:  # deleted (the removal) and created again under the same name
            deliver(key, None)
            generation[key] = 1
            deliver(key, int(second))  # type: ignore[call-overload]
        assert len(box) <= 2 * len(KEYS)
    for item in drain(box):
        assert isinstance(item, Message)
        agent.apply(item)
    for key in KEYS:
        expected = ledger.last("dc1", key)
        held = agent.held.get(key)
        assert (held is None) == (expected is None), key
        if held is not None and expected is not None:
            assert (held.replicas, held.generation) == (expected.replicas, expected.generation)


@pytest.mark.parametrize("kind", ["welcome", "ping"])
def test_messages_without_a_spread_are_never_coalesced(kind: str) -> None:
    box = outbox.Outbox()
    message = Message(welcome=agent_pb2.Welcome()) if kind == "welcome" else Message(ping=agent_pb2.Ping())
    box.put(message)
    box.put(message)
    assert len(box) == 2


def test_the_writer_sends_a_shards_bytes_as_they_came_and_the_rest_as_before() -> None:
    """`take_serialized` is what `take_batch` and `take` hand out, serialized: an assignment queued
    as bytes (`put_assignment`, framed by the shard) goes out as those very bytes, inside the batch."""
    assigned = agent_pb2.SpreadAssignment(spread="shop/b", generation=4, replicas=2)
    shard = framing.assignment_message(assigned.SerializeToString())
    objects, serialized = outbox.Outbox(), outbox.Outbox()
    for box in (objects, serialized):
        box.put(assignment("shop/a", replicas=1))
        box.put(notice())
    objects.put(Message(assignment=assigned))
    serialized.put_assignment(spread="shop/b", message=shard)
    sent = serialized.take_serialized(batches=True)
    assert isinstance(sent, bytes) and shard in sent
    taken = objects.take_batch()
    assert isinstance(taken, list)
    assert Message.FromString(sent) == Message(batch=agent_pb2.CoordinatorBatch(messages=taken))
    serialized.put_assignment(spread="shop/b", message=shard)
    one = serialized.take_serialized(batches=False)
    assert one == shard == Message(assignment=assigned).SerializeToString()
    assert serialized.take_serialized(batches=True) is None


def test_an_assignment_queued_as_bytes_is_coalesced_as_one_queued_as_an_object() -> None:
    box = outbox.Outbox()
    box.put(removal("shop/a"))
    box.put_assignment(spread="shop/a", message=framing.assignment_message(agent_pb2.SpreadAssignment(
        spread="shop/a", generation=1, replicas=3).SerializeToString()))
    box.put(assignment("shop/a", replicas=5))  # replaces the bytes, after the removal
    box.put_assignment(spread="shop/b", message=framing.assignment_message(agent_pb2.SpreadAssignment(
        spread="shop/b", generation=1, replicas=1).SerializeToString()))
    box.put(removal("shop/b"))  # replaces the bytes
    assert [describe(item) for item in drain(box)] == [
        ("removal", "shop/a"), ("assignment", "shop/a", "5"), ("removal", "shop/b")]
