"""Messages that are already serialized, put inside an enclosing message without parsing them.

Why: the SpreadShards build and serialize a round's assignments (`coordinator.wire.assignments.encode`);
the coordinator only routes them to the agents' streams. Parsing each one back into an object, to
wrap it in a `CoordinatorMessage` and a `CoordinatorBatch` that gRPC serializes again, was the
largest part of the coordinator's own work per message after a round. In protobuf's wire format a
message field is its tag, its length and the field's bytes, and a repeated message field is that
once per entry; so an enclosing message whose only fields are such fields is the concatenation of
its entries' frames, and parses to the same message as one built from the objects
(`tests/unit/test_framing.py` holds that against the library's own serialization).

The field numbers are read from the generated descriptors, so `agent.proto` stays the only place
they are written.
"""

from __future__ import annotations

from collections.abc import Iterable

from federation.rpc import agent_pb2

_LENGTH_DELIMITED = 2
"""Protobuf's wire type of a message, bytes or string field."""


def _varint(value: int) -> bytes:
    """`value` (not negative) as a base-128 varint, least significant group first."""
    if value < 0:
        raise ValueError(f"a varint here is not negative: {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(message: type[agent_pb2.CoordinatorMessage] | type[agent_pb2.CoordinatorBatch], field: str) -> bytes:
    number: int = message.DESCRIPTOR.fields_by_name[field].number
    return _varint(number << 3 | _LENGTH_DELIMITED)


_ASSIGNMENT = _tag(agent_pb2.CoordinatorMessage, "assignment")
_BATCH = _tag(agent_pb2.CoordinatorMessage, "batch")
_BATCH_ENTRY = _tag(agent_pb2.CoordinatorBatch, "messages")


def framed(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: `tag`, the length of `payload`, `payload`."""
    return b"".join((tag, _varint(len(payload)), payload))


def assignment_message(assignment: bytes) -> bytes:
    """The `CoordinatorMessage` that carries the serialized `SpreadAssignment` `assignment`."""
    return framed(_ASSIGNMENT, assignment)


def batch_message(messages: Iterable[bytes]) -> bytes:
    """The `CoordinatorMessage` whose `CoordinatorBatch` holds the serialized `CoordinatorMessage`s
    `messages`, in their order. Built with one join, so each message's bytes are copied once (a
    batch of a full round is up to `capabilities.BATCH_MAX_BYTES`, written per agent)."""
    parts: list[bytes] = [_BATCH, b""]
    size = 0
    for message in messages:
        length = _varint(len(message))
        parts += (_BATCH_ENTRY, length, message)
        size += len(_BATCH_ENTRY) + len(length) + len(message)
    parts[1] = _varint(size)
    return b"".join(parts)


def serialized(message: agent_pb2.CoordinatorMessage | bytes) -> bytes:
    """What travels for `message`: its serialization, or itself when it is serialized already
    (the agent stream's response serializer: the writer yields either)."""
    return message if isinstance(message, bytes) else message.SerializeToString()
