"""A round's agent messages as the SpreadShards build them (`Encodings`).

Why a module of its own: which bytes a shard built may stand for what the coordinator would send
is a do-no-harm question — an assignment built from a stale placement or stale inputs would scale
a member workload to a share nobody decided — so the rule that decides it (`Encodings.usable`) is
read on its own, apart from the Ray calls that carry the bytes (`shards.RayBackend.place_round`)
and the ledger that compares them (`wire.deliveries`). No Ray import: the backend gives its wait.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from federation.coordinator.model import loop
from federation.coordinator.wire import assignments
from federation.core import placement

Packed = tuple[tuple[str, bytes, bytes, int, int, tuple[tuple[str, int], ...]], ...]
"""A spread's encoded messages as a shard returns them: (cluster, data, print, replicas, generation,
quotas) per cluster (`assignments.Encoded`'s fields after the cluster). Plain tuples unpickle
without a constructor call each: 100,000 of them come back after a full round."""

Wait = Callable[[list[Any], str], list[Any]]
"""The backend's wait for remote calls: their results, within its deadline (`BatchUnavailable`)."""


class Encodings:
    """A round's agent messages as the SpreadShards build them after their answers
    (`wire.assignments.encode`), for the publish that follows the round.

    Why: after a full round the coordinator builds and serializes a message per cluster a spread
    uses — 100,000 at 10,000 spreads —, a large part of the round the coordinator did alone
    (docs/decisions.md, "the shards build the agents' messages"). The shards build them
    while the coordinator settles and stores the round; the coordinator compares fingerprints with
    its ledger and queues the bytes of what it sends as they came (`wire.outbox.Outbox.put_assignment`).

    Nothing is taken on trust: a spread's encoding is used only when its placement is the very
    answer the shard built it from (a spread the round's check placed again is built here) and the
    inputs the coordinator reads when it delivers equal those it sent (`usable`). If the shards fail
    or miss the deadline, every message is built here (`failed` says why).
    """

    def __init__(self, inputs_for: Callable[[str], assignments.MessageInputs | None]) -> None:
        self._inputs_for = inputs_for
        self._sent: dict[str, assignments.MessageInputs] = {}
        self._calls: list[tuple[list[str], Any]] = []
        self._answers: dict[str, placement.Placement] = {}
        self._found: dict[str, Packed] | None = None
        self._wait: Wait | None = None
        self.failed = ""

    def inputs(self, keys: Sequence[str]) -> list[assignments.MessageInputs | None]:
        """What each spread's messages are built from, kept to compare at delivery (None: built here)."""
        found = [self._inputs_for(key) for key in keys]
        for key, inputs in zip(keys, found, strict=True):
            if inputs is not None:
                self._sent[key] = inputs
        return found

    def sent(self, keys: Sequence[str], ref: Any) -> None:
        """A SpreadShard builds the messages of spreads `keys`: `ref` is its list, in their order."""
        self._calls.append((list(keys), ref))

    def answered(self, keys: Sequence[str], answers: Sequence[placement.Placement], *, wait: Wait) -> None:
        """The round's first answers, as the loop will read them; `wait` is the backend's."""
        self._answers = dict(zip(keys, answers, strict=True))
        self._wait = wait

    def answered_for(self, key: str) -> bool:
        """Whether the shards answered spread `key` in this round (only then may `usable` give
        anything: a round of one, or one below the crossover, never reached them)."""
        return key in self._answers

    def usable(self, key: str, *, placed: placement.Placement,
               inputs: assignments.MessageInputs) -> dict[str, assignments.Encoded] | None:
        """Spread `key`'s encoded messages if they were built from `placed` and `inputs`; else None."""
        if self._answers.get(key) is not placed or self._sent.get(key) != inputs:
            return None
        found = self._all().get(key)
        return None if found is None else unpack(found)

    def _all(self) -> dict[str, Packed]:
        if self._found is None:
            self._found = {}
            if self._wait is None or not self._calls:
                return self._found
            try:
                results = self._wait([ref for _, ref in self._calls], "the round's agent messages")
            except loop.BatchUnavailable as error:
                self.failed = str(error) or type(error).__name__
                return self._found
            for (keys, _), encoded in zip(self._calls, results, strict=True):
                self._found.update((key, item) for key, item in zip(keys, encoded, strict=True)
                                   if item is not None)
        return self._found


def pack(encoded: dict[str, assignments.Encoded]) -> Packed:
    """`encoded` as a shard returns it."""
    return tuple((name, *item) for name, item in encoded.items())


def unpack(packed: Packed) -> dict[str, assignments.Encoded]:
    """What `pack` packed."""
    return {name: assignments.Encoded(data, print_, replicas, generation, quotas)
            for name, data, print_, replicas, generation, quotas in packed}
