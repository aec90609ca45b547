"""bench.fold_time: the ledgers' folds timed for one event, the originals put back after it."""

from __future__ import annotations

from bench import fold_time
from federation.api import cluster
from federation.core import charge_fold, fit, overcommit


def _pool(nodes: int) -> fit.Pool:
    return fit.pool_of(cluster.NodePool.model_validate(
        {"name": "general", "count": nodes, "allocatable": {"cpu": "4", "pods": "110"}, "requested": {}}))


def _charges(keys: int, *, pods: int) -> dict[str, tuple[overcommit.Charge, ...]]:
    profile = fit.profile(fit.shape_from_pod_spec(
        {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]}))
    return {f"ns/s{index:02d}": (overcommit.Charge(profile, pods),) for index in range(keys)}


def test_a_round_whose_charges_fit_is_summed_and_not_recorded() -> None:
    ledger = overcommit.Ledger([_pool(10)])  # 40 cpus: 8 charges of 2 pods fit whole
    folds = fold_time.FoldTime()
    with folds.timing():
        ledger.set_many(_charges(8, pods=2))
    found = folds.report()
    assert found["ledger_set_many_calls"] == 1
    assert found["fold_summed_calls"] == 1
    assert found["fold_recorded_calls"] == 0
    assert found["ledger_set_many_cpu_s"] >= found["fold_summed_cpu_s"] >= 0


def test_a_full_cluster_records_its_fold_and_the_originals_come_back() -> None:
    originals = overcommit.Ledger.set_many, charge_fold.record, charge_fold.summed
    ledger = overcommit.Ledger([_pool(2)])  # 8 cpus: 8 charges of 2 pods do not fit
    folds = fold_time.FoldTime()
    with folds.timing():
        assert overcommit.Ledger.set_many is not originals[0]
        ledger.set_many(_charges(8, pods=2))
    assert (overcommit.Ledger.set_many, charge_fold.record, charge_fold.summed) == originals
    found = folds.report()
    assert found["fold_recorded_calls"] == 1
    assert found["ledger_set_many_cpu_s"] >= found["fold_recorded_cpu_s"]
    ledger.set_many(_charges(3, pods=1))  # after the block: nothing counted
    assert folds.report() == found


class _Parts:
    """Two parts, one calling the other."""

    def outer(self) -> int:
        return self.inner() + 1

    def inner(self) -> int:
        return sum(range(1000))


def test_outermost_parts_count_only_the_call_not_made_inside_another() -> None:
    timed = ((_Parts, "outer", "outer"), (_Parts, "inner", "inner"))
    originals = _Parts.outer, _Parts.inner
    nested, flat = fold_time.FoldTime(timed), fold_time.FoldTime(timed, outermost=True)
    for folds in (nested, flat):
        with folds.timing():
            _Parts().outer()
            _Parts().inner()
    assert (_Parts.outer, _Parts.inner) == originals
    assert nested.report()["inner_calls"] == 2 and nested.report()["outer_calls"] == 1
    assert flat.report()["inner_calls"] == 1 and flat.report()["outer_calls"] == 1
    assert set(flat.report()) == {"outer_cpu_s", "outer_calls", "inner_cpu_s", "inner_calls"}


def test_every_round_part_names_a_function_the_coordinator_has() -> None:
    """A part renamed in the coordinator fails here, not as a silent zero in the benchmark's JSON."""
    labels = [label for _, _, label in fold_time.ROUND_PARTS]
    assert len(set(labels)) == len(labels)
    for owner, name, _ in fold_time.ROUND_PARTS:
        assert callable(getattr(owner, name)), (owner, name)
