"""`rpc.framing`: serialized messages put inside an enclosing one are what protobuf itself makes.

Why: the agent stream sends a SpreadShard's serialized assignments inside a `CoordinatorMessage`
and a `CoordinatorBatch` built by concatenating frames, not by the library. Whatever the agent
parses must be exactly what it would parse had the coordinator built the objects: these tests hold
the frames against the library's own serialization, at lengths whose varints take one, two and
three bytes.
"""

from __future__ import annotations

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.rpc import agent_pb2, framing

Message = agent_pb2.CoordinatorMessage


def _assignment(key: str, *, replicas: int, template: str) -> agent_pb2.SpreadAssignment:
    return agent_pb2.SpreadAssignment(spread=key, generation=replicas + 1, replicas=replicas,
                                      template_json=template)


@pytest.mark.parametrize("size", [0, 1, 100, 127, 128, 16_383, 16_384, 300_000])
def test_an_assignment_framed_is_the_message_protobuf_serializes(size: int) -> None:
    item = _assignment("shop/web", replicas=3, template="x" * size)
    framed = framing.assignment_message(item.SerializeToString())
    assert framed == Message(assignment=item).SerializeToString()
    assert Message.FromString(framed).assignment == item


@hypothesis.settings(max_examples=100, deadline=None)
@hypothesis.given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2_000), st.booleans()),
                           min_size=1, max_size=12))
def test_a_batch_of_framed_and_serialized_messages_parses_as_the_batch_of_objects(
    entries: list[tuple[int, int, bool]],
) -> None:
    objects: list[agent_pb2.CoordinatorMessage] = []
    serialized: list[bytes] = []
    for replicas, size, as_bytes in entries:
        item = _assignment(f"shop/s{replicas}", replicas=replicas, template="y" * size)
        message = Message(assignment=item) if replicas % 2 else Message(
            notice=agent_pb2.Notice(code="BadReport", message="z" * size))
        objects.append(message)
        serialized.append(framing.assignment_message(item.SerializeToString())
                          if as_bytes and message.WhichOneof("body") == "assignment"
                          else framing.serialized(message))
    batch = framing.batch_message(serialized)
    expected = Message(batch=agent_pb2.CoordinatorBatch(messages=objects))
    assert Message.FromString(batch) == expected
    assert batch == expected.SerializeToString()


def test_serialized_passes_bytes_through_and_serializes_a_message() -> None:
    ping = Message(ping=agent_pb2.Ping(nonce=7))
    assert framing.serialized(ping) == ping.SerializeToString()
    assert framing.serialized(b"as it is") == b"as it is"
