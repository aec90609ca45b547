"""What one agent's stream still has to send: a bounded queue that coalesces updates per spread.

Why not a plain queue: the facade queues an assignment whenever a spread's share for the cluster
changes, and an agent that reads slowly (its connection is congested, its process is stuck) used
to collect every version of every spread in an unbounded `queue.Queue` — memory grew with time,
not with the federation. Only the last version matters: `deliveries.SentLedger` records what the
agent *will* hold, which is the last message queued per spread. So a newer assignment or removal
of spread K replaces the one for K still queued, at that one's place in the queue; the queue then
holds at most two messages per spread it is sending (below), and a slow agent only delays itself.

The rules, each because of what the agent does with the message (agents/link/client.py):

- An assignment replaces a queued assignment, and a removal replaces a queued assignment: the
  agent's state after the last one is the same whether or not it saw the earlier one.
- An assignment never replaces a queued **removal**: it is queued after it. The removal resets
  the spread's generation history on the stream (a spread re-created under the same name starts
  again at generation 1, which the agent would refuse as stale after the old one) and orphans or
  deletes the old workload by its policy.
- A removal after such a pair (removal, assignment) takes the assignment out and is itself not
  queued: the first removal leaves the agent without the spread, which is what the ledger says
  after the second. So a spread has at most two messages queued, a removal then an assignment.
- A `ResyncRequest` is idempotent ("send your full reports again"): a queued one absorbs the next
  (their flags OR-ed).
- Welcome and the `ResyncComplete` notice come once per stream and are never dropped. Other
  notices (`BadReport`) are advice: beyond `MAX_NOTICES` queued, new ones are dropped and counted.
- `close(reason)` ends the stream: the writer is handed `reason` before anything still queued
  (a superseded or refused stream has nothing left worth sending), or after it with `drain=True`
  (the agent half-closed: what it was answered still goes). Messages put after a close are dropped.

Thread-safe: the facade puts from its threads under its own lock, the stream's writer (a coroutine,
`services.agent_service`) takes. The writer is woken through `set_waker`, called only when the
writer found the queue empty and said so (`take` arms it), so a resync of 10,000 assignments costs
one wake-up, not 10,000. For an agent that reads batches (`capabilities.MESSAGE_BATCHES_CAPABILITY`)
the writer takes what is queued at once (`take_batch`, bounded in count and bytes) and sends it as
one `CoordinatorBatch`: after a full round an agent is sent one gRPC message per batch, not one
per spread, and the coalescing above is unchanged (a batch is taken out of the queue, as one
message is). An assignment a SpreadShard serialized and framed as its `CoordinatorMessage` is
queued as those bytes (`put_assignment`) and the writer takes the batch serialized
(`take_serialized`): the bytes go to the agent as the shard made them, put into a batch
(`rpc.framing`), never parsed and serialized again in this process.
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable

from federation.rpc import agent_pb2, capabilities, framing

MAX_NOTICES = 64
"""Advisory notices queued per stream at most; more are dropped (a stalled agent sending bad reports)."""

_SPREAD = "spread"
_RESYNC = "resync"


class _Slot:
    """One place in the queue; a keyed slot's message is replaced in place while it waits, and a
    slot taken out of the middle is left empty (None) for `take` to skip. `kind` is the message's
    body (`CoordinatorMessage.WhichOneof("body")`); `message` is the message, or its serialization
    for one built elsewhere (`Outbox.put_assignment`)."""

    __slots__ = ("key", "kind", "message")

    def __init__(self, key: tuple[str, str] | None, kind: str,
                 message: agent_pb2.CoordinatorMessage | bytes) -> None:
        self.key = key
        self.kind = kind
        self.message: agent_pb2.CoordinatorMessage | bytes | None = message


def _key(kind: str, message: agent_pb2.CoordinatorMessage) -> tuple[str, str] | None:
    if kind == "assignment":
        return (_SPREAD, message.assignment.spread)
    if kind == "removal":
        return (_SPREAD, message.removal.spread)
    if kind == "resync":
        return (_RESYNC, "")
    return None


def _parsed(message: agent_pb2.CoordinatorMessage | bytes) -> agent_pb2.CoordinatorMessage:
    return agent_pb2.CoordinatorMessage.FromString(message) if isinstance(message, bytes) else message


def _size(message: agent_pb2.CoordinatorMessage | bytes) -> int:
    return len(message) if isinstance(message, bytes) else message.ByteSize()


def _advisory(kind: str, message: agent_pb2.CoordinatorMessage | bytes) -> bool:
    return (kind == "notice" and not isinstance(message, bytes)
            and message.notice.code != capabilities.RESYNC_COMPLETE_CODE)


class Outbox:
    """A stream's coalescing queue of CoordinatorMessages, ended by one `close` reason."""

    def __init__(self, *, max_notices: int = MAX_NOTICES) -> None:
        self._lock = threading.Lock()
        self._queue: collections.deque[_Slot] = collections.deque()
        self._pending: dict[tuple[str, str], list[_Slot]] = {}
        """Per key, its slots still queued, in order (at most two: a removal, then an assignment)."""
        self._size = 0
        """Slots queued and not emptied."""
        self._emptied = 0
        """Emptied slots still in the queue; compacted away when they outnumber the live ones."""
        self._max_notices = max_notices
        self._notices = 0
        self._closing: object | None = None
        self._drain = False
        self._waker: Callable[[], None] | None = None
        self._armed = False
        self.coalesced = 0
        """Messages that replaced or merged into a queued one (for logs and tests)."""
        self.dropped = 0
        """Messages dropped: advisory notices over the bound, or anything put after `close`."""

    def __len__(self) -> int:
        with self._lock:
            return self._size

    def qsize(self) -> int:
        """Messages queued (as `queue.Queue.qsize`)."""
        return len(self)

    def empty(self) -> bool:
        """Nothing to hand out: no message and no close reason."""
        with self._lock:
            return not self._size and self._closing is None

    @property
    def closed(self) -> bool:
        """`close` was called."""
        with self._lock:
            return self._closing is not None

    def set_waker(self, waker: Callable[[], None] | None) -> None:
        """`waker()` is called (from the putting thread, outside the lock) when something arrives
        after `take` found nothing; it must be thread-safe and quick. None: nobody listens."""
        with self._lock:
            self._waker, self._armed = waker, False

    def put(self, message: agent_pb2.CoordinatorMessage) -> bool:
        """Queue `message`, replacing or merging into a queued one (module docstring); False when
        it was dropped instead (closed, or an advisory notice over the bound)."""
        kind = message.WhichOneof("body") or ""
        return self._put(_key(kind, message), kind, message)

    def put_assignment(self, *, spread: str, message: bytes) -> bool:
        """`put` for the serialized `CoordinatorMessage` `message` that carries an assignment of
        spread `spread` (built and framed by a SpreadShard, `wire.assignments.Encoded`): queued as
        it is, never parsed nor copied here; the writer sends its bytes (`take_serialized`)."""
        return self._put((_SPREAD, spread), "assignment", message)

    def _put(self, key: tuple[str, str] | None, kind: str,
             message: agent_pb2.CoordinatorMessage | bytes) -> bool:
        with self._lock:
            if self._closing is not None:
                self.dropped += 1
                return False
            if key is not None and key in self._pending and self._coalesce(key, kind, message):
                self.coalesced += 1
                return True
            if _advisory(kind, message):
                if self._notices >= self._max_notices:
                    self.dropped += 1
                    return False
                self._notices += 1
            slot = _Slot(key, kind, message)
            self._queue.append(slot)
            self._size += 1
            if key is not None:
                self._pending.setdefault(key, []).append(slot)
            waker = self._disarm()
        if waker is not None:
            waker()
        return True

    def _coalesce(self, key: tuple[str, str], new: str,
                  message: agent_pb2.CoordinatorMessage | bytes) -> bool:
        """Under the lock: fold `message` (of body `new`) into key's queued slots; False when it
        must be appended."""
        slots = self._pending[key]
        last = slots[-1]
        assert last.message is not None
        queued = last.kind
        if new == "assignment" and queued == "removal":
            return False  # after the removal, never instead of it
        if new == "removal" and queued == "removal":
            return True  # the agent holds nothing of it already (the ledger never sends this)
        if new == "removal" and len(slots) == 2:  # removal, assignment, removal: the first stands
            last.message = None
            slots.pop()
            self._size -= 1
            self._emptied += 1
            if self._emptied > max(self._size, 64):
                self._queue = collections.deque(slot for slot in self._queue if slot.message is not None)
                self._emptied = 0
            return True
        last.message = _merged(queued, last.message, new, message)
        last.kind = new
        return True

    def close(self, reason: object, *, drain: bool = False) -> None:
        """End the stream with `reason` (handed to the writer by `take`): at once, or once what is
        queued went out with `drain`. The first close wins, except that one without `drain`
        overrides a draining one."""
        with self._lock:
            if self._closing is not None and not (self._drain and not drain):
                return
            self._closing, self._drain = reason, drain
            waker = self._disarm()
        if waker is not None:
            waker()

    def take(self) -> agent_pb2.CoordinatorMessage | object | None:
        """The next message, or the close reason when it is due; None when there is nothing, and
        then the waker is called on the next `put` or `close`."""
        item = self.take_batch(max_messages=1)
        return item[0] if isinstance(item, list) else item

    def take_batch(
        self, *, max_messages: int = capabilities.BATCH_MAX_MESSAGES,
        max_bytes: int = capabilities.BATCH_MAX_BYTES,
    ) -> list[agent_pb2.CoordinatorMessage] | object | None:
        """As `take`, but the messages queued now, in order, as one list of up to `max_messages`
        and at most `max_bytes` serialized (a message that would pass it waits for the next list;
        one above it on its own goes alone), for one `CoordinatorBatch`. A Welcome always goes
        alone. A close reason due after them is handed out by the next call."""
        item = self._take(max_messages=max_messages, max_bytes=max_bytes)
        return [_parsed(message) for message in item] if isinstance(item, list) else item

    def take_serialized(self, *, batches: bool) -> bytes | object | None:
        """What the stream's writer sends next, serialized: with `batches`, `take_batch`'s messages
        as one `CoordinatorMessage` (a `CoordinatorBatch` when there are several), else `take`'s
        message; or the close reason, or None (as `take`). A message queued serialized
        (`put_assignment`) is sent as its bytes (`rpc.framing`), never parsed."""
        item = self._take(max_messages=capabilities.BATCH_MAX_MESSAGES if batches else 1,
                          max_bytes=capabilities.BATCH_MAX_BYTES)
        if not isinstance(item, list):
            return item
        if len(item) == 1:
            return framing.serialized(item[0])
        return framing.batch_message(framing.serialized(message) for message in item)

    def _take(
        self, *, max_messages: int, max_bytes: int,
    ) -> list[agent_pb2.CoordinatorMessage | bytes] | object | None:
        """`take_batch`'s messages as they were queued (objects or serialized)."""
        with self._lock:
            if self._closing is not None and (not self._drain or not self._size):
                return self._closing
            first = self._next()
            if first is None:
                self._armed = True
                return None
            kind, message = first
            taken = [message]
            if max_messages <= 1 or kind == "welcome":
                return taken
            size = _size(message)
            while len(taken) < max_messages:
                head = self._peek()
                if head is None or head.kind == "welcome":
                    break
                assert head.message is not None
                head_size = _size(head.message)
                if size + head_size > max_bytes:
                    break
                following = self._next()
                assert following is not None and following[1] is head.message
                taken.append(following[1])
                size += head_size
            return taken

    def _peek(self) -> _Slot | None:
        """Under the lock: the slot `_next` would take from, left in place."""
        while self._queue and self._queue[0].message is None:
            self._queue.popleft()
            self._emptied -= 1
        return self._queue[0] if self._queue else None

    def _next(self) -> tuple[str, agent_pb2.CoordinatorMessage | bytes] | None:
        """Under the lock: the next message out of the queue with its body's kind, or None."""
        while self._queue:
            slot = self._queue.popleft()
            message = slot.message
            if message is None:  # taken out by a later removal
                self._emptied -= 1
                continue
            self._size -= 1
            if slot.key is not None:
                slots = self._pending[slot.key]
                slots.remove(slot)
                if not slots:
                    del self._pending[slot.key]
            elif _advisory(slot.kind, message):
                self._notices -= 1
            return slot.kind, message
        return None

    def get_nowait(self) -> object:
        """`take`, raising `queue.Empty` for nothing (as `queue.Queue.get_nowait`; tests drain so)."""
        item = self.take()
        if item is None:
            raise queue.Empty
        return item

    def _disarm(self) -> Callable[[], None] | None:
        """Under the lock: the waker to call now, if the writer is waiting for it."""
        if not self._armed or self._waker is None:
            return None
        self._armed = False
        return self._waker


def _merged(
    queued: str, message: agent_pb2.CoordinatorMessage | bytes, new: str,
    replacing: agent_pb2.CoordinatorMessage | bytes,
) -> agent_pb2.CoordinatorMessage | bytes:
    """What replaces `message` (of body `queued`) in its slot: `replacing` (of body `new`), or both
    resync requests in one."""
    if new != "resync" or queued != "resync":
        return replacing
    before, after = _parsed(message).resync, _parsed(replacing).resync
    return agent_pb2.CoordinatorMessage(resync=agent_pb2.ResyncRequest(
        inventory=before.inventory or after.inventory, pod_counts=before.pod_counts or after.pod_counts,
        reason=after.reason))
