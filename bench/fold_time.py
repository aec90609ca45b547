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
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

from federation.core import charge_fold, overcommit

_TIMED: tuple[tuple[Any, str, str], ...] = (
    (overcommit.Ledger, "set_many", "ledger_set_many"),
    (charge_fold, "record", "fold_recorded"),
    (charge_fold, "summed", "fold_summed"),
)


class FoldTime:
    """Per entry point, the calls and the calling thread's CPU seconds while `timing` is open."""

    def __init__(self) -> None:
        self.seconds = {label: 0.0 for _, _, label in _TIMED}
        self.calls = {label: 0 for _, _, label in _TIMED}

    def _wrapped(self, function: Callable[..., Any], label: str) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[label] += time.thread_time() - started
                self.calls[label] += 1
        return timed

    @contextlib.contextmanager
    def timing(self) -> Iterator[FoldTime]:
        """Wrap the entry points while the block runs; put the originals back after it."""
        originals = [(owner, name, getattr(owner, name)) for owner, name, _ in _TIMED]
        try:
            for (owner, name, label), (_, _, function) in zip(_TIMED, originals, strict=True):
                setattr(owner, name, self._wrapped(function, label))
            yield self
        finally:
            for owner, name, function in originals:
                setattr(owner, name, function)

    def report(self) -> dict[str, float | int]:
        """`<label>_cpu_s` and `<label>_calls` per entry point, as the JSON line says them."""
        found: dict[str, float | int] = {}
        for _, _, label in _TIMED:
            found[f"{label}_cpu_s"] = round(self.seconds[label], 4)
            found[f"{label}_calls"] = self.calls[label]
        return found
