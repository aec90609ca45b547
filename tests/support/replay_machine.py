"""Replay a `make soak` state-machine failure from its printed steps, and shrink it.

Why a tool: hypothesis shrinks a long stateful failure slowly (minutes, and it may give up), and
the shrunk steps are what a regression test replays (`tests/unit/test_invariants_regressions.py`).
This reads the failure as pytest printed it (the `state.rule(...)` lines, with `Draw N (...)`
values for the rules that draw), replays it on `FederationMachine` with every invariant after
each step, and removes steps by delta debugging while the same assertion (same line) still fails.
It prints the shrunk steps in the regression file's format.

    python -m tests.support.replay_machine FAILURE.txt [--no-shrink]

Run from the repository root. A failure that no longer happens prints "passes".
"""

from __future__ import annotations

import argparse
import ast
import logging
import pathlib
import pprint
import re
import sys
import traceback
from typing import Any

Step = tuple[str, dict[str, Any]]
INVARIANTS = ("status_pass_follows", "connected_agents_enforce_exactly_the_placement",
              "no_admission_put_a_subset_above_its_quota",
              "no_ready_pod_is_removed_while_the_spread_needs_it",
              "placement_accounts_for_every_replica_within_caps")


class Drawn:
    """Stands in for the `data` a rule draws from: the recorded values, in order."""

    def __init__(self, values: list[Any]) -> None:
        self.values = list(values)

    def draw(self, strategy: Any, label: str | None = None) -> Any:
        return self.values.pop(0)


def parse(text: str) -> list[Step]:
    """The steps of a printed failure (pytest's `E   ` or hypothesis' `    | ` prefixes removed)."""
    lines = [re.sub(r"^(E\s+|\s*\| )", "", line) for line in text.splitlines()]
    steps: list[Step] = []
    draws: list[Any] = []
    pending = ""
    for line in lines:
        if pending:
            pending += "\n" + line
        elif line.startswith("Draw "):
            draws.append(ast.literal_eval(line.split(": ", 1)[1]))
            continue
        elif line.startswith("state.") and not line.startswith("state = "):
            pending = line
        else:
            continue
        try:
            tree = ast.parse(pending.replace("data=data(...)", "data=None"))
        except SyntaxError:
            continue  # a call printed over several lines: read on
        pending = ""
        statement = tree.body[0]
        assert isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
        call = statement.value
        assert isinstance(call.func, ast.Attribute)
        arguments = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg is not None}
        if "data" in arguments:
            arguments["data"] = draws.pop(0) if draws else None
        if call.func.attr not in INVARIANTS:
            steps.append((call.func.attr, arguments))
    return steps


def _machine() -> Any:
    """The state machine's module, imported as pytest imports it (tests/unit on the path); its
    hypothesis events (recorded only inside a test) are dropped."""
    unit = str(pathlib.Path(__file__).resolve().parents[1] / "unit")
    if unit not in sys.path:
        sys.path.insert(0, unit)
    import hypothesis

    hypothesis.event = lambda *args, **kwargs: None  # type: ignore[assignment]
    import test_invariants_state_machine as machine  # type: ignore[import-not-found]

    return machine


def replay(steps: list[Step]) -> tuple[str, str, int] | None:
    """How replaying `steps` fails (the error's type, and the file and line that raised it), or
    None. A step whose recorded draw no longer fits (a shrunk list) fails differently: it is not
    the same failure."""
    state = _machine().FederationMachine()
    try:
        for name, arguments in steps:
            given = {k: Drawn([v]) if k == "data" else v for k, v in arguments.items()}
            getattr(state, name)(**given)
            if name != "teardown":
                for invariant in INVARIANTS:
                    getattr(state, invariant)()
    except Exception as error:
        frame = traceback.extract_tb(error.__traceback__)[-1]
        return type(error).__name__, frame.filename, frame.lineno or 0
    return None


def shrink(steps: list[Step], failure: tuple[str, str, int]) -> list[Step]:
    """The smallest list of steps (delta debugging) that still fails at `failure`."""
    def fails(candidate: list[Step]) -> bool:
        return bool(candidate) and candidate[0][0] == "start" and replay(candidate) == failure

    parts = 2
    while len(steps) >= 2:
        size = max(1, len(steps) // parts)
        for start in range(0, len(steps), size):
            candidate = steps[:start] + steps[start + size:]
            if fails(candidate):
                steps, parts = candidate, max(parts - 1, 2)
                break
        else:
            if parts >= len(steps):
                break
            parts = min(len(steps), parts * 2)
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Replay a printed `make soak` state-machine failure and shrink its steps.")
    parser.add_argument("failure", type=pathlib.Path, help="a file holding the failure as pytest printed it")
    parser.add_argument("--no-shrink", action="store_true", help="only replay: say where it fails")
    options = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)
    steps = parse(options.failure.read_text())
    if not steps or steps[-1][0] != "teardown":
        steps.append(("teardown", {}))
    failure = replay(steps)
    if failure is None:
        print(f"passes: {len(steps)} steps replayed, every invariant held")
        return 0
    print(f"fails ({failure[0]}) at {failure[1]}:{failure[2]} after {len(steps)} steps")
    if not options.no_shrink:
        steps = shrink(steps, failure)
        print(f"shrunk to {len(steps)} steps:")
    print(pprint.pformat(steps, width=100, sort_dicts=False))
    return 1


if __name__ == "__main__":
    sys.exit(main())
