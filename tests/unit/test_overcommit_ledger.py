"""The pending-pod ledger gives exactly `deduct_pending`'s answers, however it got its charges.

`overcommit.Ledger` keeps one cluster's pools with every spread's pending pods charged and answers
"free slots without spread K's own charges" by subtraction when it can. The reference here is the
straightforward one: a fresh `deduct_pending` over the other spreads' pending pods in key order,
then `fit.pods_per_node` on the result. Random pools (odd node counts, nearly full nodes), random
shapes (node terms, tolerations, requests that do not divide evenly) and random sequences of
charge updates, appends and removals in any key order, one spread at a time or several at once.
"""

from __future__ import annotations

from typing import Any

import hypothesis
import strategies as fs
from hypothesis import strategies as st

from federation.api import cluster
from federation.core import fit, overcommit, pending_deduction
from tests.support import builders

PROPERTY = hypothesis.settings(
    max_examples=300, deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow],
)
KEYS = ("ns/a", "ns/b", "ns/c", "ns/d", "ns/e")
CPU = ("0", "100m", "333m", "500m", "1", "3", "1e-10")


@st.composite
def shapes(draw: st.DrawFn) -> fit.PodShape:
    """A pod requesting some cpu (maybe memory), maybe restricted to a pool type, maybe tolerating."""
    requests: dict[str, str] = {"cpu": draw(st.sampled_from(CPU))}
    if draw(st.booleans()):
        requests["memory"] = draw(st.sampled_from(("1Gi", "100Mi", "3")))
    spec: dict[str, Any] = {"containers": [{"name": "app", "resources": {"requests": requests}}]}
    if draw(st.integers(0, 2)) == 0:
        spec["nodeSelector"] = {fs.POOL_TYPE_LABEL: draw(st.sampled_from(fs.POOL_TYPES))}
    if draw(st.integers(0, 2)) == 0:
        spec["tolerations"] = [{"key": fs.NODE_TAINT_KEY, "operator": "Exists"}]
    return fit.shape_from_pod_spec(spec)


@st.composite
def pools(draw: st.DrawFn) -> list[cluster.NodePool]:
    found = []
    for index in range(draw(st.integers(0, 3))):
        data = draw(fs.node_pools(index))
        if draw(st.booleans()):
            data["allocatable"]["memory"] = draw(st.sampled_from(("4Gi", "1000", "2.5Gi")))
        if draw(st.integers(0, 3)) == 0:
            data["requested"]["cpu"] = draw(st.sampled_from(("1e-12", "7n", "0.5")))
        found.append(cluster.NodePool.model_validate(data))
    return found


def reference_slots(
    node_pools: list[cluster.NodePool], charges: dict[str, tuple[overcommit.Charge, ...]], *,
    without: str, shape: fit.PodShape,
) -> tuple[int, ...]:
    """Free slots per pool after `deduct_pending` of every spread's charges but `without`'s."""
    snapshot = cluster.CapacitySnapshot(clusters=[cluster.ClusterCapacity(name="c", node_pools=node_pools)])
    pending = [
        pending_deduction.PendingPods("c", item.profile.shape, item.pods)
        for key in sorted(charges) if key != without for item in charges[key]
    ]
    charged = pending_deduction.deduct_pending(snapshot, pending).clusters[0].node_pools
    return tuple(p.count * fit.pods_per_node(p, shape) for p in charged)


@PROPERTY
@hypothesis.given(data=st.data(), node_pools=pools(), profiles=st.lists(shapes(), min_size=1, max_size=4))
def test_the_ledger_answers_exactly_as_deduct_pending(
    data: st.DataObject, node_pools: list[cluster.NodePool], profiles: list[fit.PodShape]
) -> None:
    prepared = [fit.profile(s) for s in profiles]
    ledger = overcommit.Ledger([fit.pool_of(p) for p in node_pools])
    charges: dict[str, tuple[overcommit.Charge, ...]] = {}
    for _step in range(data.draw(st.integers(1, 12))):
        if data.draw(st.integers(0, 6)) == 0:
            node_pools = data.draw(pools())
            ledger.set_pools([fit.pool_of(p) for p in node_pools])
        keys = data.draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=len(KEYS), unique=True))
        batch = {
            key: tuple(overcommit.Charge(data.draw(st.sampled_from(prepared)), data.draw(st.integers(1, 40)))
                       for _ in range(data.draw(st.integers(0, 3))))
            for key in keys
        }
        differs = any(charges.get(key, ()) != items for key, items in batch.items())
        if len(batch) == 1:  # one spread's change, or several at once (a round's: `set_many`)
            assert ledger.set_charges(*next(iter(batch.items()))) == differs
        else:
            assert ledger.set_many(batch) == differs
        for key, items in batch.items():
            if items:
                charges[key] = items
            else:
                charges.pop(key, None)
        assert ledger.keys() == sorted(charges)
        for asking in (*KEYS, "ns/none"):
            for item in prepared:
                expected = reference_slots(node_pools, charges, without=asking, shape=item.shape)
                assert ledger.slots(asking, item.requests) == expected


def test_a_full_cluster_folds_in_key_order() -> None:
    """Two spreads' pending pods overflow one node: the earlier key is charged first, the later spills."""
    small = builders.node_pool(1, name="small", cpu="2")
    big = builders.node_pool(2, name="big")
    one_cpu = fit.profile(fit.shape_from_pod_spec(
        {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}))
    ledger = overcommit.Ledger([fit.pool_of(small), fit.pool_of(big)])
    ledger.set_charges("ns/b", (overcommit.Charge(one_cpu, 4),))
    assert ledger.slots("ns/a", one_cpu.requests) == (0, 6)  # b: 2 on small, 2 spread over big
    ledger.set_charges("ns/a", (overcommit.Charge(one_cpu, 2),))
    assert ledger.slots("ns/c", one_cpu.requests) == (0, 4)  # a fills small first, b all on big
    assert ledger.slots("ns/b", one_cpu.requests) == (0, 8)
    assert ledger.slots("ns/a", one_cpu.requests) == (0, 6)
