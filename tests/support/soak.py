"""How many times a fault test repeats: one to three seeds in `make test`, ten under `make soak`.

Why seeds: a fault (a kill, a cut connection, an apiserver restart) finds different bugs at
different moments, so each fault test draws its moments from `random.Random(seed)` and runs for
several seeds. A failure names its seed in the test id (`test_x[3]`) and in its message, so it
can be replayed alone: `pytest 'tests/integration/test_faults_agent.py::test_x[3]'`.
`FEDSPREAD_SOAK=1` (the `soak` target of the Makefile) runs many more seeds.
"""

from __future__ import annotations

import os

SOAK = os.environ.get("FEDSPREAD_SOAK", "") not in ("", "0")


def seeds(quick: int, *, soak: int = 10) -> list[int]:
    """Seeds 0..quick-1, or 0..soak-1 under FEDSPREAD_SOAK=1."""
    return list(range(soak if SOAK else quick))
