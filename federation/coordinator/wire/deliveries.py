"""What each connected agent was last sent, per spread: so a publish sends only what changed.

Why a module of its own: a publish used to ask every connected stream about every
re-placed spread — 10,000 spreads times 1,000 agents is ten million questions whose answer is
almost always "nothing for you". The ledger keeps, besides what each cluster holds, which
clusters hold each spread, so a publish visits the clusters a spread is assigned to now or was
sent before (for the removal), and nothing else.

It knows nothing of gRPC streams: `deliver` returns what to send (an assignment, a removal, or
nothing) and the facade (`facade.Coordinator`) queues it, under its lock. An assignment a
SpreadShard serialized (`assignments.Encoded`) is kept and returned as it came, never parsed: the
stream sends its bytes, and the ledger reads what it needs of it from the fields beside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from federation.coordinator.wire import assignments
from federation.rpc import agent_pb2


class SentLedger:
    """Per cluster and spread, the last assignment sent; per spread, the clusters holding one."""

    def __init__(self) -> None:
        self._sent: dict[str, dict[str, agent_pb2.SpreadAssignment | assignments.Encoded]] = {}
        self._prints: dict[str, dict[str, bytes]] = {}
        """Per cluster and spread, `assignments.comparable` of what `_sent` holds (when known)."""
        self._holders: dict[str, set[str]] = {}

    def last(self, cluster: str, key: str) -> agent_pb2.SpreadAssignment | None:
        """The assignment of spread `key` that `cluster` was last sent (None: none, or a removal)."""
        found = self._sent.get(cluster, {}).get(key)
        return found.message() if isinstance(found, assignments.Encoded) else found

    def replicas_sent(self, cluster: str, key: str) -> int | None:
        """The replicas in the assignment of spread `key` that `cluster` was last sent (None: none,
        or a removal); read without parsing a shard's bytes (`last` parses them: every ack asks this)."""
        found = self._sent.get(cluster, {}).get(key)
        return None if found is None else found.replicas

    def gave_replicas(self, key: str) -> frozenset[str]:
        """The clusters last sent spread `key` with a quota above 0: they are sent its zero quotas
        before it is removed from them (`assignments` module docstring)."""
        return frozenset(cluster for cluster in self._holders.get(key, ())
                         if self._sent[cluster][key].replicas > 0)

    def holders(self, key: str) -> frozenset[str]:
        """The clusters that were sent spread `key` and not a removal since."""
        return frozenset(self._holders.get(key, ()))

    def reset(self, cluster: str, sent: Mapping[str, agent_pb2.SpreadAssignment]) -> None:
        """Cluster `cluster` was just sent exactly `sent` (a full resync)."""
        self.forget(cluster)
        self._sent[cluster] = dict(sent)
        self._prints[cluster] = {}
        for key in sent:
            self._holders.setdefault(key, set()).add(cluster)

    def holding_unknown(self, cluster: str, key: str, *, generation: int) -> None:
        """Cluster `cluster` holds an assignment of spread `key` (of at most `generation`) that
        this ledger did not send (found at a resync): the next publish visits it, sending the
        new assignment or the removal (a generation above it)."""
        unknown = agent_pb2.SpreadAssignment(spread=key, generation=generation)
        self._sent.setdefault(cluster, {})[key] = unknown
        self._prints.setdefault(cluster, {}).pop(key, None)
        self._holders.setdefault(key, set()).add(cluster)

    def forget(self, cluster: str) -> None:
        """Cluster `cluster`'s stream ended: its next stream starts with a full resync."""
        self._prints.pop(cluster, None)
        for key in self._sent.pop(cluster, {}):
            self._drop_holder(key, cluster)

    def deliver(
        self, cluster: str, key: str, new: agent_pb2.SpreadAssignment | assignments.Encoded | None, *,
        reason: str, orphan: bool = False,
    ) -> agent_pb2.SpreadAssignment | assignments.Encoded | agent_pb2.SpreadRemoval | None:
        """What to send `cluster` so it holds `new` for spread `key` (None: a removal, if it holds
        one, leaving the member workload running when `orphan`), or None when it holds the same
        already (`assignments.comparable` equal). An encoded `new` (built by a SpreadShard) is
        compared by its fingerprint, kept and returned as it is."""
        sent = self._sent.setdefault(cluster, {})
        prints = self._prints.setdefault(cluster, {})
        old = sent.get(key)
        if new is None:
            if old is None:
                return None
            del sent[key]
            prints.pop(key, None)
            self._drop_holder(key, cluster)
            return assignments.removal(key, generation=old.generation + 1, orphan=orphan, reason=reason)
        after = new.print if isinstance(new, assignments.Encoded) else assignments.comparable(new)
        if old is not None:
            before = prints.get(key)
            if before is None:  # sent by a resync: fingerprinted when first compared
                before = old.print if isinstance(old, assignments.Encoded) else assignments.comparable(old)
            if before == after:
                prints[key] = before
                return None
        sent[key] = new
        prints[key] = after
        self._holders.setdefault(key, set()).add(cluster)
        return new

    def clusters_for(self, key: str, new: Iterable[str]) -> list[str]:
        """The clusters a publish of spread `key` must visit: assigned now or holding it, by name."""
        return sorted(self._holders.get(key, set()).union(new))

    def _drop_holder(self, key: str, cluster: str) -> None:
        holders = self._holders.get(key)
        if holders is not None:
            holders.discard(cluster)
            if not holders:
                del self._holders[key]
