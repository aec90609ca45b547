"""A benchmark run never overwrites a kept reference result unless told to (`bench.run.kept_reference`).

Why: the documents cite bench/results/reference-*.json, and the command that reproduces a cited
run names the cited file as its `--output`. Copied as written, it used to put new figures under
the old sentences without a word. Every runner that writes a results document now refuses such an
output before anything runs, unless `--replace` says it is meant.
"""

from __future__ import annotations

import pathlib
import signal
from collections.abc import Callable

import pytest

from bench import placement_compare, placement_crossover, profile_events, round_shipping, run

KEPT = run.RESULTS / "reference-full.json"


def test_an_existing_reference_is_refused_unless_replaced(tmp_path: pathlib.Path) -> None:
    assert KEPT.exists()
    why = run.kept_reference(KEPT, replace=False)
    assert why is not None and "--replace" in why and "latest-full.json" in why
    assert run.kept_reference(KEPT, replace=True) is None
    assert run.kept_reference(run.RESULTS / "latest.json", replace=False) is None
    assert run.kept_reference(run.RESULTS / "reference-never-written.json", replace=False) is None
    elsewhere = tmp_path / "reference-full.json"
    elsewhere.write_text("{}")
    assert run.kept_reference(elsewhere, replace=False) is None  # only the documents' folder is kept
    assert run.kept_reference(None, replace=False) is None


@pytest.mark.parametrize(("main", "argv"), [
    (run.main, ["--quick", "--only", "inventory"]),
    (placement_compare.main, ["--runs", "1"]),
    (profile_events.main, ["--json"]),
    (placement_crossover.main, ["--quick"]),
    (round_shipping.main, ["--quick"]),
], ids=["run", "placement_compare", "profile_events", "placement_crossover", "round_shipping"])
def test_every_runner_refuses_a_kept_reference_before_it_runs(
    main: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str],
) -> None:
    before, handler = KEPT.read_bytes(), signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as ended:
            main([*argv, "--output", str(KEPT)])
    finally:
        signal.signal(signal.SIGTERM, handler)  # `bench.run.main` installs its own
    assert ended.value.code == 2
    assert "is a kept reference result" in capsys.readouterr().err
    assert KEPT.read_bytes() == before
