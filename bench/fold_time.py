"""The CPU a coordinator event spends folding the clusters' ledgers, timed without a profiler.

Why: at 60,000 spreads x 1,000 clusters the clusters' pools fill, a ledger's fold stops being a
sum, and `overcommit.Ledger` records it charge by charge (`charge_fold.record`). A cProfile run put
that at about 10 s of a full round; cProfile's cost per call is large beside these small, frequent
functions, so that figure said where the time went but not how much of it there is. This wraps the
three entry points for the length of one event and adds up the placing thread's own CPU
(`time.thread_time`) in each: `Ledger.set_many` (a round's charges set, folds included),
`charge_fold.record` (the fold recorded charge by charge) and `charge_fold.summed` (the fold as a
sum by kind). A call inside another is counted in both (a record inside `set_many`). The wrappers
cost a function call per call, a few thousand per full round. `bench.profile_events --json`
reports them per event.

The same wrapping times the parts of a round (`ROUND_PARTS`, `bench.profile_events --json
--round-parts`): what the coordinator's thread does per spread in a round — the requests built,
packed for the shards and their answers read, the charges settled and the placements stored, the
agents' message inputs read and their messages delivered. Each wrapper skips the calls made inside
another wrapped call of the same set, so the parts do not overlap; about 100,000 wrapped calls a
full round at 10,000 spreads, a few percent of it.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

from federation.coordinator import delivery, round_parts, shards
from federation.coordinator.model import loop, world, world_state
from federation.coordinator.wire import shard_messages
from federation.core import charge_fold, overcommit

Timed = tuple[tuple[Any, str, str], ...]
"""(owner, attribute, label) per function wrapped: a module's function or a class's method."""

FOLDS: Timed = (
    (overcommit.Ledger, "set_many", "ledger_set_many"),
    (charge_fold, "record", "fold_recorded"),
    (charge_fold, "summed", "fold_summed"),
)

ROUND_PARTS: Timed = (
    (loop, "brake_for", "round_brakes"),
    (world_state.WorldState, "plan_for", "round_plans"),
    (loop, "request_for", "round_requests_built"),
    (round_parts, "pack", "round_requests_packed"),
    (shards.RayBackend, "_wait", "round_answers_read"),
    (loop, "_store", "round_stored"),
    (world.World, "settle_charges", "round_charges_settled"),
    (delivery.Delivery, "inputs_for", "round_message_inputs"),
    (shard_messages, "unpack", "round_encodings_unpacked"),
    (delivery.Delivery, "deliver", "round_delivered"),
)
"""A round's parts, in the order a Ray round meets them (`round_answers_read`: every wait for the
shards' answers, deserializing them included; on the in-process backend, nothing)."""


class FoldTime:
    """Per entry point of `timed` (`FOLDS` by default), the calls and the calling thread's CPU
    seconds while `timing` is open. With `outermost`, a call made inside another wrapped call is
    neither timed nor counted (the parts do not overlap); without it, it counts in both."""

    def __init__(self, timed: Timed = FOLDS, *, outermost: bool = False) -> None:
        self._timed = timed
        self._outermost = outermost
        self._inside = 0
        self.seconds = {label: 0.0 for _, _, label in timed}
        self.calls = {label: 0 for _, _, label in timed}

    def _wrapped(self, function: Callable[..., Any], label: str) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._outermost and self._inside:
                return function(*args, **kwargs)
            self._inside += 1
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[label] += time.thread_time() - started
                self.calls[label] += 1
                self._inside -= 1
        return timed

    @contextlib.contextmanager
    def timing(self) -> Iterator[FoldTime]:
        """Wrap the entry points while the block runs; put the originals back after it."""
        originals = [(owner, name, getattr(owner, name)) for owner, name, _ in self._timed]
        try:
            for (owner, name, label), (_, _, function) in zip(self._timed, originals, strict=True):
                setattr(owner, name, self._wrapped(function, label))
            yield self
        finally:
            for owner, name, function in originals:
                setattr(owner, name, function)

    def report(self) -> dict[str, float | int]:
        """`<label>_cpu_s` and `<label>_calls` per entry point, as the JSON line says them."""
        found: dict[str, float | int] = {}
        for _, _, label in self._timed:
            found[f"{label}_cpu_s"] = round(self.seconds[label], 4)
            found[f"{label}_calls"] = self.calls[label]
        return found
