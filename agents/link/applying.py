"""What the coordinator sends a spread, applied: assignments and removals, each acked on its stream.

Why a module of its own: this is where the quota table changes. An assignment that does not
decode is refused and the previous one kept; one older than a generation applied on the *same*
stream is refused as stale, as is a removal older than an assignment applied after it — only the
stream's own history counts, because a spread deleted and created again starts at generation 1
and a restarted coordinator may number afresh (`agents.link.client`, "Stale generations"). Each
is acked with what went wrong, if anything; the agent's callbacks (the workload sync, the
removal) run after the bookkeeping has changed, and a callback that fails is reported in the
ack while the quotas stay applied.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from agents import bookkeeping as bookkeeping_mod
from agents import ownership
from agents.link import stream as stream_mod
from federation.rpc import agent_pb2
from federation.rpc import assignment as assignment_mod

log = logging.getLogger(__name__)


class Applier:
    """Applies one stream's assignments and removals to the bookkeeping (on the link thread only)."""

    def __init__(
        self, bookkeeping: bookkeeping_mod.Bookkeeping, *, cluster: str,
        federation: ownership.FederationState,
        on_assignment: Callable[[assignment_mod.Assignment], None] | None = None,
        on_removal: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.federation = federation
        self._bookkeeping = bookkeeping
        self._on_assignment = on_assignment
        self._on_removal = on_removal
        self._received: dict[str, int] = {}
        """Per spread: the generation last applied on the current stream."""

    def new_stream(self) -> None:
        """A new stream: its coordinator's Welcome resync decides afresh (no history carried over)."""
        self._received = {}

    def assignment(self, message: agent_pb2.SpreadAssignment, stream: stream_mod.Outgoing) -> None:
        """Apply an assignment unless malformed or older than one applied on this stream; Ack it."""
        error = ""
        try:
            decoded = assignment_mod.Assignment.from_proto(message, federation=self.federation.current)
        except (ValueError, TypeError) as failure:
            error = f"not applied, previous assignment kept: {failure}"
            log.error("bad assignment", extra={"cluster": self.cluster, "spread": message.spread,
                                               "generation": message.generation, "error": str(failure)})
        else:
            # Only this stream's history counts: a generation applied on an earlier stream may
            # belong to a since deleted spread of the same name (module docstring).
            seen = self._received.get(decoded.spread)
            if seen is not None and seen > decoded.generation:
                error = f"stale generation {decoded.generation}; generation {seen} kept"
            else:
                self._bookkeeping.set_assignment(decoded)
                self._received[decoded.spread] = decoded.generation
                log.debug("assignment applied", extra={"cluster": self.cluster, "spread": decoded.spread,
                                                       "generation": decoded.generation})
                error = self._callback(self._on_assignment, decoded, what="workload sync")
        stream.send(agent_pb2.AgentMessage(ack=agent_pb2.Ack(
            spread=message.spread, generation=message.generation, error=error)))

    def removal(self, message: agent_pb2.SpreadRemoval, stream: stream_mod.Outgoing) -> None:
        """Forget a spread unless an assignment newer than the removal was applied on this stream;
        Ack it. Afterwards the spread has no history on this stream: a re-created spread of the
        same name starts again at generation 1."""
        seen = self._received.get(message.spread)
        error = ""
        if seen is not None and seen > message.generation:
            error = f"stale removal generation {message.generation}; generation {seen} kept"
        else:
            self._bookkeeping.remove_assignment(message.spread)
            self._received.pop(message.spread, None)
            log.info("spread removed", extra={"cluster": self.cluster, "spread": message.spread,
                                              "orphan": message.orphan, "reason": message.reason})
            error = self._callback(self._on_removal, message.spread, message.orphan, what="removal")
        stream.send(agent_pb2.AgentMessage(ack=agent_pb2.Ack(
            spread=message.spread, generation=message.generation, error=error)))

    def _callback(self, callback: Callable[..., None] | None, *args: Any, what: str) -> str:
        if callback is None:
            return ""
        try:
            callback(*args)
        except Exception as failure:  # the quotas are applied; report the rest, keep the link up
            log.exception(f"{what} callback failed", extra={"cluster": self.cluster})
            return f"quotas applied; {what} failed: {failure}"
        return ""
