"""The recorded charge fold answers "without K" exactly as folding every other charge again.

`charge_fold.without` skips whole stretches of a full cluster's fold (where K's absence changes
no charge's take) and folds only where it may; the reference is the plain fold of every charge
but K's, in key order. Pools here are small and charges many, so clusters fill up, spill to the
next pool and to nothing — the case the shortcut exists for. The ledger built through random
updates (`overcommit.Ledger`, which folds again only from the changed spread's position) must
give the same states as a fold from scratch.
"""

from __future__ import annotations

from typing import Any

import hypothesis
import strategies as fs
from hypothesis import strategies as st

from federation.api import cluster
from federation.core import charge_fold, fit, overcommit

PROPERTY = hypothesis.settings(
    max_examples=300, deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
KEYS = tuple(f"ns/s{index:02d}" for index in range(30))


@st.composite
def profiles(draw: st.DrawFn) -> fit.Profile:
    """A pod of some cpu (maybe memory), maybe restricted to one pool type, maybe tolerating."""
    requests: dict[str, str] = {"cpu": draw(st.sampled_from(("100m", "333m", "500m", "1", "3")))}
    if draw(st.booleans()):
        requests["memory"] = draw(st.sampled_from(("1Gi", "100Mi", "3")))
    spec: dict[str, Any] = {"containers": [{"name": "app", "resources": {"requests": requests}}]}
    if draw(st.integers(0, 3)) == 0:
        spec["nodeSelector"] = {fs.POOL_TYPE_LABEL: draw(st.sampled_from(fs.POOL_TYPES))}
    if draw(st.integers(0, 2)) == 0:
        spec["tolerations"] = [{"key": fs.NODE_TAINT_KEY, "operator": "Exists"}]
    return fit.profile(fit.shape_from_pod_spec(spec))


@st.composite
def small_pools(draw: st.DrawFn) -> list[fit.Pool]:
    """One to three pools of few nodes, on whole nano-units (the recorded fold's domain)."""
    found = []
    for index in range(draw(st.integers(1, 3))):
        data = draw(fs.node_pools(index))
        data["requested"] = {"cpu": draw(st.sampled_from(("0", "1", "500m", "3")))}
        if draw(st.booleans()):
            data["allocatable"]["memory"] = draw(st.sampled_from(("4Gi", "2.5Gi")))
        found.append(fit.pool_of(cluster.NodePool.model_validate(data)))
    return found


@st.composite
def charge_lists(draw: st.DrawFn, choices: list[fit.Profile]) -> tuple[overcommit.Charge, ...]:
    return tuple(overcommit.Charge(draw(st.sampled_from(choices)), draw(st.integers(1, 12)))
                 for _ in range(draw(st.integers(1, 2))))


def fold(pools: list[fit.Pool], charges: list[tuple[overcommit.Charge, ...]], ledger: overcommit.Ledger
         ) -> list[dict[str, Any]]:
    """The plain fold: every charge in order."""
    return charge_fold.record(pools, charges, admitted=ledger.admitted).prefix[-1]


def held(state: Any) -> list[dict[str, Any]]:
    """Per pool, what each node holds, a resource at 0 left out (a ledger that took a spread's
    pods off by subtraction keeps it at 0; every reader takes a missing one as 0)."""
    return [{name: amount for name, amount in node.items() if amount} for node in state]


@PROPERTY
@hypothesis.given(data=st.data(), pools=small_pools(), choices=st.lists(profiles(), min_size=1, max_size=3))
def test_without_one_position_is_the_fold_of_the_others(
    data: st.DataObject, pools: list[fit.Pool], choices: list[fit.Profile]
) -> None:
    charges = data.draw(st.lists(charge_lists(choices), min_size=1, max_size=25))
    admitted = overcommit.Ledger(pools).admitted
    done = charge_fold.record(pools, charges, admitted=admitted)
    requests = {item.profile.requests for items in charges for item in items}
    largest = max(item.pods for items in charges for item in items)
    reference = overcommit.Ledger(pools)
    for position in range(len(charges)):
        others = charges[:position] + charges[position + 1:]
        found = charge_fold.without(pools, done, charges, position=position, admitted=admitted,
                                    requests=requests, largest=largest)
        assert found == fold(pools, others, reference)


@PROPERTY
@hypothesis.given(data=st.data(), pools=small_pools(), choices=st.lists(profiles(), min_size=1, max_size=3))
def test_an_updated_record_is_the_record_of_the_new_charges(
    data: st.DataObject, pools: list[fit.Pool], choices: list[fit.Profile]
) -> None:
    charges = data.draw(st.lists(charge_lists(choices), min_size=1, max_size=25))
    admitted = overcommit.Ledger(pools).admitted
    start = data.draw(st.integers(0, len(charges)))
    shift = data.draw(st.sampled_from((-1, 0, 1) if start < len(charges) else (-1,)))
    changed = list(charges)
    if shift == -1:
        changed.insert(start, data.draw(charge_lists(choices)))
    elif shift == 0:
        changed[start] = data.draw(charge_lists(choices))
    else:
        del changed[start]
    requests = {item.profile.requests for items in changed for item in items}
    largest = max((item.pods for items in changed for item in items), default=0)
    base = charge_fold.record(pools, charges, admitted=admitted)
    found = charge_fold.update(pools, base, changed, start=start, shift=shift, admitted=admitted,
                               requests=requests, largest=largest)
    expected = charge_fold.record(pools, changed, admitted=admitted)
    assert found.prefix == expected.prefix
    assert found.shorts == expected.shorts


@PROPERTY
@hypothesis.given(data=st.data(), pools=small_pools(), choices=st.lists(profiles(), min_size=1, max_size=3))
def test_the_ledger_through_updates_equals_a_fold_from_scratch(
    data: st.DataObject, pools: list[fit.Pool], choices: list[fit.Profile]
) -> None:
    ledger = overcommit.Ledger(pools)
    charges: dict[str, tuple[overcommit.Charge, ...]] = {}
    for _step in range(data.draw(st.integers(1, 30))):
        key = data.draw(st.sampled_from(KEYS))
        items = data.draw(charge_lists(choices)) if data.draw(st.integers(0, 4)) else ()
        ledger.set_charges(key, items)
        if items:
            charges[key] = items
        else:
            charges.pop(key, None)
        asked = data.draw(st.sampled_from(KEYS))
        others = [charges[k] for k in sorted(charges) if k != asked]
        assert held(ledger.requested(asked)) == held(fold(pools, others, ledger))
    for asked in sorted(charges):
        others = [charges[k] for k in sorted(charges) if k != asked]
        assert held(ledger.requested(asked)) == held(fold(pools, others, ledger))


@PROPERTY
@hypothesis.given(data=st.data(), pools=small_pools(), choices=st.lists(profiles(), min_size=1, max_size=3))
def test_a_fold_summed_by_kind_is_the_fold_in_order(
    data: st.DataObject, pools: list[fit.Pool], choices: list[fit.Profile]
) -> None:
    """Where `summed` answers, every charge was whole in the fold in order and the states agree;
    where it does not, the ledger folds in order (any answer is fine then, never a wrong one)."""
    charges = data.draw(st.lists(charge_lists(choices), min_size=0, max_size=25))
    admitted = overcommit.Ledger(pools).admitted
    found = charge_fold.summed(pools, charges, admitted=admitted)
    expected = charge_fold.record(pools, charges, admitted=admitted)
    hypothesis.event("summed" if found is not None else "folded in order")
    if found is not None:
        assert expected.whole()
        assert held(found) == held(expected.prefix[-1])


def test_ample_room_is_summed_and_a_full_pool_is_not() -> None:
    """The sum answers a round on ample pools (its purpose: no step per charge) and declines
    when a charge may have spilled to the next pool."""
    one_cpu = fit.profile(fit.shape_from_pod_spec(
        {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}))
    half_cpu = fit.profile(fit.shape_from_pod_spec(
        {"containers": [{"name": "m", "resources": {"requests": {"cpu": "500m"}}}]}))
    pools = [fit.pool_of(cluster.NodePool(name=name, count=3, allocatable={"cpu": "8", "pods": "110"}))
             for name in ("a", "b")]
    admitted = overcommit.Ledger(pools).admitted
    ample = [(overcommit.Charge(one_cpu, 2),),
             (overcommit.Charge(half_cpu, 3), overcommit.Charge(one_cpu, 2)),
             (overcommit.Charge(one_cpu, 5),)]
    summed = charge_fold.summed(pools, ample, admitted=admitted)
    assert summed is not None
    assert held(summed) == held(charge_fold.record(pools, ample, admitted=admitted).prefix[-1])
    # per node of pool a, each charge over 3 nodes rounded up to a nano-cpu: (2 + 1.5 + 2 + 5) / 3
    assert summed[0]["cpu"] == 666_666_667 + 500_000_000 + 666_666_667 + 1_666_666_667
    assert summed[1] == {}
    full = [*ample, (overcommit.Charge(one_cpu, 20),)]  # 24 cpu on pool a: some spills to b
    assert charge_fold.summed(pools, full, admitted=admitted) is None
    assert not charge_fold.record(pools, full, admitted=admitted).whole()
