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

`tune` is called by the programs that run a coordinator (`fedspread coordinator`, the placement
benchmark's coordinator, which measures it as it ships) and by the Ray shard actors, which
unpickle every round's requests. The agent keeps the interpreter's thresholds: its webhook
answers within milliseconds, and a young collection of `THRESHOLDS[0]` objects is a pause of its
own there; that trade has not been measured. Pure standard library, so every layer may import it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

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


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cycle collection inside (reference counting frees as always); the collector as it was
    afterwards, also on an exception. Inside a pause, or with the collector already off, it stays
    off until that one ends. Process-wide, as the collector is: a thread that allocates meanwhile
    collects nothing either, for as long as the pause lasts."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
