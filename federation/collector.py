"""The garbage collector for the coordinator's processes: fewer, later collections, none in a round.

Why: CPython's cycle collector runs a young collection every 700 net new container objects and an
older one every 10 of those, and each older collection walks every object of its generations. The
coordinator holds hundreds of thousands of long-lived objects (specs, views, placements, ledgers)
and a placement round allocates millions more, so with the interpreter's thresholds a large
round spends about a quarter of its time collecting. Measured (bench/README.md, "Ray or
in-process, measured again": 10,000 spreads on 1,000 clusters, every agent stream live, three
runs each, 2 cores): the full round took 10.3 s with the interpreter's thresholds and 7.4 s with
`THRESHOLDS`, delivery to every agent 28.2 s and 20.7 s, the coordinator's memory 570 MB both.
Almost all of the coordinator's objects are freed by reference counting; the cycle collector only
finds cycles, which stay rare, so collecting later costs little memory.

A placement round runs with the collector paused (`paused`, around `facade.Coordinator.publish`):
a round allocates millions of objects, most of which die when it ends (requests, views, answers,
message inputs), and a collection during the round walks them while they are still alive — about
thirty young collections, one or two of the middle generation and now and then a full one in a
full round at 10,000 spreads. Paused, only what survives the round is walked, once, by the young
collection that the first allocation after it starts; cycles made during a round wait for its end
(bench/README.md, "The collector paused during a round"; docs/decisions.md, "the collector
paused during a placement round").

What a large round leaves alive is frozen (`freeze_rounds`, `Pause.keep`: `gc.freeze()`, the
objects moved out of every generation) when the coordinator runs as a program: that one young
collection after a full round at 10,000 spreads walked its survivors (the placements, views,
ledgers) for 0.24 to 0.76 s of the placing thread, and every middle and full collection after it
walked them again, though almost none of them is ever cyclic garbage (bench/README.md, "What a
large round leaves alive, frozen for a while"). Frozen objects are never collected, so the
freezing is bounded: `THAW_SECONDS` after the first freeze they are given back to the oldest
generation (`gc.unfreeze()`), and no round freezes again until a full collection has walked them,
so a cycle made in or before a round waits at most that long plus the collector's own schedule.

`tune` is called by the programs that run a coordinator (`fedspread coordinator`, the placement
benchmark's coordinator, which measures it as it ships) and by the Ray shard actors, which
unpickle every round's requests. The agent keeps the interpreter's thresholds: its webhook
answers within milliseconds, and a young collection of `THRESHOLDS[0]` objects is a pause of its
own there; that trade has not been measured. Pure standard library, so every layer may import it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from collections.abc import Callable, Iterator

THRESHOLDS = (50_000, 20, 10)
"""Young collection every 50,000 net new container objects (the interpreter: 700), the middle
generation every 20 of those (10), the oldest every 10 of those (10; the interpreter also waits
until a quarter of the long-lived objects are new): a full collection stays within reach of a
long-running process."""


def tune(thresholds: tuple[int, int, int] = THRESHOLDS) -> tuple[int, int, int]:
    """Set the collector's thresholds for this process; the ones it had (to restore in tests)."""
    before = gc.get_threshold()
    gc.set_threshold(*thresholds)
    return before


FREEZE_FROM = 1_000
"""A round that placed at least this many spreads keeps its survivors out of the collections
(`Pause.keep`): below it, the young collection after the round walks little (a judgment, not a
measured crossover: a tenth of the federation the 0.24 to 0.76 s were measured on)."""

THAW_SECONDS = 600.0
"""How long objects stay frozen, from the first freeze: then they are collectable again."""


class Pause:
    """A pause of the collector in progress (`paused`)."""

    def __init__(self) -> None:
        self.kept = False

    def keep(self) -> None:
        """Freeze what is alive when the pause ends (a large round's survivors), where this
        process freezes rounds (`freeze_rounds`); otherwise nothing."""
        self.kept = True


@dataclasses.dataclass
class _Freezing:
    on: bool = False
    since: float | None = None
    """When the first freeze since the last thaw was made (`clock`)."""
    thawed_at: int | None = None
    """The count of full collections at the last thaw: no freeze until it grows."""
    clock: Callable[[], float] = time.monotonic


_freezing = _Freezing()


def freeze_rounds(on: bool = True, *, clock: Callable[[], float] = time.monotonic) -> bool:
    """Freeze what a large round leaves alive (`Pause.keep`) in this process, or stop (everything
    frozen is thawed); whether it was on before. A coordinator's program turns it on; the tests'
    process does not, unless a test does (and turns it off again)."""
    before = _freezing.on
    _thaw()
    _freezing.on, _freezing.clock, _freezing.thawed_at = on, clock, None
    return before


@contextlib.contextmanager
def paused() -> Iterator[Pause]:
    """No cycle collection inside (reference counting frees as always); the collector as it was
    afterwards, also on an exception. Inside a pause, or with the collector already off, it stays
    off until that one ends. Process-wide, as the collector is: a thread that allocates meanwhile
    collects nothing either, for as long as the pause lasts. At the end, what is alive is frozen
    where the pause was `kept` (`freeze_rounds`), and what was frozen long enough thawed."""
    pause = Pause()
    if not gc.isenabled():
        yield pause
        return
    gc.disable()
    try:
        yield pause
    finally:
        try:
            _end(pause)
        finally:
            gc.enable()


def _end(pause: Pause) -> None:
    if not _freezing.on:
        return
    now = _freezing.clock()
    if _freezing.since is not None and now - _freezing.since >= THAW_SECONDS:
        _thaw()
        _freezing.thawed_at = _full_collections()
        return
    if not pause.kept or (_freezing.thawed_at is not None and _full_collections() <= _freezing.thawed_at):
        return  # thawed, and no full collection has walked what was frozen yet
    gc.freeze()
    _freezing.thawed_at = None
    if _freezing.since is None:
        _freezing.since = now


def _thaw() -> None:
    if gc.get_freeze_count():
        gc.unfreeze()
    _freezing.since = None


def _full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])
