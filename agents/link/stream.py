"""The request side of one AgentService.Connect stream: one writer for everything the agent sends.

Why one writer: reports, events, acks, ping answers and heartbeats come from different threads,
but agent.proto numbers inventory reports, pod-count reports and heartbeats per stream, and wants
the full reports before anything else after Welcome. So everything goes through one queue consumed
by the request generator gRPC reads from; only the generator numbers and stamps messages.

Why a pump thread: `ReportOutbox.drain` blocks until something new arrives; the pump moves what it
returns into the queue, so an ack never waits behind the drain timeout. When the stream dies,
unschedulable reports drained but never sent go back to the outbox for the next stream (the
latest inventory and counts are re-sent anyway; acks and heartbeats belong to the dead stream).

Why acks go in batches: after a coordinator's full round an agent applies a batch of hundreds of
assignments at once and acks each; to a coordinator whose Welcome lists
`capabilities.MESSAGE_BATCHES_CAPABILITY` the acks queued together go as one `AckBatch` (in their
order, bounded by `capabilities.BATCH_MAX_MESSAGES`), which the coordinator applies under one
lock. Only consecutive acks are gathered: nothing overtakes anything.
"""

from __future__ import annotations

import datetime
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from agents import outbox as outbox_mod
from federation.rpc import agent_pb2, capabilities

PUMP_POLL_SECONDS = 0.5
NUMBERED = ("inventory", "pod_counts", "heartbeat")
REPORTS = ("inventory", "pod_counts", "usage")
_END = object()  # ends the request generator
_WAKE = object()  # wakes it (after Welcome: start the heartbeat clock)


class Outgoing:
    """What one stream sends: Hello, then (after Welcome) reports, events, acks and heartbeats."""

    def __init__(self, hello: Callable[[], agent_pb2.AgentMessage], *, outbox: outbox_mod.ReportOutbox,
                 heartbeat_seconds: float, clock: Callable[[], datetime.datetime], name: str) -> None:
        self._hello = hello
        self._outbox = outbox
        self._clock = clock
        self._name = name
        self.heartbeat_seconds = heartbeat_seconds
        self._queue: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self.done = threading.Event()
        self.welcomed = False
        self.batches = False
        """The coordinator reads AckBatches (its Welcome said so)."""
        self._held: Any = None
        """What gathering acks took from the queue after them: the generator's next item."""
        self.timed_out = False  # set by the link's Welcome watchdog before it cancels the call

    def messages(self) -> Iterator[agent_pb2.AgentMessage]:
        """The request iterator handed to gRPC."""
        yield self._hello()
        sequences = dict.fromkeys(NUMBERED, 0)
        next_beat = float("inf")  # heartbeats start once the coordinator has welcomed us
        while not self.done.is_set():
            if self.welcomed and next_beat == float("inf"):
                next_beat = time.monotonic() + self.heartbeat_seconds
            now = time.monotonic()
            if now >= next_beat:
                item: Any = agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat())
            elif self._held is not None:
                item, self._held = self._held, None
            else:
                try:
                    item = self._queue.get(timeout=min(next_beat - now, 1.0))
                except queue.Empty:
                    continue
            if item is _END:
                return
            if item is _WAKE:
                continue
            kind = item.WhichOneof("body")
            if kind == "ack" and self.batches:
                item = self._gather_acks(item)
            if kind in sequences:
                sequences[kind] += 1
                numbered = agent_pb2.AgentMessage()
                numbered.CopyFrom(item)
                getattr(numbered, kind).sequence = sequences[kind]
                if kind == "heartbeat":
                    numbered.heartbeat.sent_at.FromDatetime(self._clock())
                    next_beat = time.monotonic() + self.heartbeat_seconds
                item = numbered
            yield item

    def _gather_acks(self, first: agent_pb2.AgentMessage) -> agent_pb2.AgentMessage:
        """`first` (an Ack) and the acks queued right behind it, as one AckBatch (alone: as is); the
        first other item met is held for the generator's next turn."""
        acks = [first.ack]
        while len(acks) < capabilities.BATCH_MAX_MESSAGES:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, agent_pb2.AgentMessage) and item.WhichOneof("body") == "ack":
                acks.append(item.ack)
                continue
            self._held = item
            break
        if len(acks) == 1:
            return first
        return agent_pb2.AgentMessage(acks=agent_pb2.AckBatch(acks=acks))

    def send(self, message: agent_pb2.AgentMessage) -> None:
        """Queue a message for this stream."""
        self._queue.put(message)

    def welcomed_now(self, *, heartbeat_seconds: float, batches: bool = False) -> None:
        """Welcome arrived: full reports first, then events queued meanwhile; start heartbeats.
        `batches`: the coordinator reads AckBatches."""
        self.heartbeat_seconds = heartbeat_seconds
        self.batches = batches
        backlog = self._outbox.drain(timeout=0)
        for report in self._outbox.latest():
            self.send(report)
        for event in backlog:
            if event.WhichOneof("body") not in REPORTS:
                self.send(event)
        self.welcomed = True
        self._queue.put(_WAKE)
        threading.Thread(target=self._pump, daemon=True, name=f"link-pump-{self._name}").start()

    def resend(self, *, inventory: bool, pod_counts: bool) -> None:
        """A ResyncRequest: the latest full reports asked for."""
        wanted = {"inventory": inventory, "pod_counts": pod_counts}
        for report in self._outbox.latest():
            if wanted.get(report.WhichOneof("body") or "", False):
                self.send(report)

    def close(self) -> None:
        """The stream is over: end the generator and the pump, hand unsent events back."""
        with self._lock:  # from here on the pump hands what it drains back to the outbox
            self.done.set()
        leftovers = [] if self._held is None else [self._held]
        while True:
            try:
                leftovers.append(self._queue.get_nowait())
            except queue.Empty:
                break
        self._queue.put(_END)
        self._requeue(leftovers)

    def _pump(self) -> None:
        while True:
            drained = self._outbox.drain(timeout=PUMP_POLL_SECONDS)
            with self._lock:
                if self.done.is_set():
                    self._requeue(drained)
                    return
                for message in drained:
                    self._queue.put(message)

    def _requeue(self, messages: list[Any]) -> None:
        for item in messages:
            if isinstance(item, agent_pb2.AgentMessage) and item.WhichOneof("body") == "unschedulable":
                self._outbox.put_event(item)
