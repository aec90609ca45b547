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
