"""Properties of placement (DESIGN §3) over random spreads, capacity snapshots and replica counts.

Each test states one rule of §3 (or of the keep/add/wait passes in `federation.core.placement_passes`)
and checks it on inputs drawn by `strategies.py`. The rules are restated here independently of the
implementation: usable clusters, caps and pod slots are recomputed from the inputs rather than read
from the placement's own bookkeeping where that would make a test circular.
"""

from __future__ import annotations

import copy
import dataclasses
import fractions
import math
from collections.abc import Mapping
from typing import Any

import hypothesis

# tests/unit has no __init__.py: pytest's default import mode puts this directory on sys.path.
import strategies as fs
from hypothesis import strategies as st

from federation.api import cluster, spread
from federation.core import apportion, brake, fit, placement, placement_view
from tests.support import builders

PROPERTY = hypothesis.settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow, hypothesis.HealthCheck.data_too_large],
)


@dataclasses.dataclass(frozen=True)
class Scenario:
    spec: spread.FederatedSpreadSpec
    snapshot: cluster.CapacitySnapshot
    shape: fit.PodShape
    replicas: int

    def place(self, **overrides: Any) -> placement.Placement:
        args: dict[str, Any] = {
            "replicas": self.replicas, "snapshot": self.snapshot, "shape": self.shape,
        }
        args.update(overrides)
        return placement.place(self.spec, **args)


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    usable: bool | None = None,
    replicas: st.SearchStrategy[int] = fs.replica_counts,
    **spread_options: Any,
) -> Scenario:
    snapshot = draw(fs.snapshots(usable=usable))
    spec = draw(fs.spreads([c.name for c in snapshot.clusters], **spread_options))
    return Scenario(spec, snapshot, draw(fs.shapes()), draw(replicas))


@st.composite
def currents(draw: st.DrawFn, spec: spread.FederatedSpreadSpec) -> dict[str, dict[str, int]]:
    """An arbitrary `current` placement: any subset (or a stale one), any cluster, 0-10 each."""
    subset_names = [s.name for s in spec.subsets] + ["stale"]
    cluster_names = [*fs.CLUSTER_NAMES, fs.UNKNOWN_CLUSTER]
    return draw(st.dictionaries(
        st.sampled_from(subset_names),
        st.dictionaries(st.sampled_from(cluster_names), st.integers(0, 10), max_size=4),
        max_size=len(subset_names),
    ))


def fill_order(subset: spread.Subset, snapshot: cluster.CapacitySnapshot) -> list[str]:
    """The clusters a subset selects, in its fill order: as listed, else selector matches by name."""
    if subset.clusters is not None:
        return list(subset.clusters)
    assert subset.cluster_selector is not None
    wanted = subset.cluster_selector.match_labels
    return sorted(
        c.name for c in snapshot.clusters if all(c.labels.get(k) == v for k, v in wanted.items())
    )


def usable_members(subset: spread.Subset, snapshot: cluster.CapacitySnapshot) -> list[str]:
    usable = fs.usable_clusters(snapshot)
    return [name for name in fill_order(subset, snapshot) if name in usable]


def cluster_slots(capacity: cluster.ClusterCapacity, shape: fit.PodShape) -> int:
    """Pod slots on every pool of a cluster by resources and pods limit, ignoring labels and taints."""
    return sum(pool.count * fit.pods_per_node(pool, shape) for pool in capacity.node_pools)


def assert_accounts(result: placement.Placement, replicas: int) -> None:
    """Every replica is placed or unplaced, never both, never negative."""
    assert result.replicas == replicas
    assert result.unplaced >= 0, result
    assert result.placed + result.unplaced == replicas, result
    assert sum(result.clusters.values()) == result.placed, result


def assert_le(smaller: Mapping[str, Mapping[str, int]], larger: Mapping[str, Mapping[str, int]]) -> None:
    for subset, clusters in smaller.items():
        for name, count in clusters.items():
            assert count <= larger.get(subset, {}).get(name, 0), (subset, name, smaller, larger)


# 1 -------------------------------------------------------------------------------------------------


@PROPERTY
@hypothesis.given(data=st.data(), scenario=scenarios())
def test_every_replica_is_placed_or_unplaced_and_the_totals_agree(
    data: st.DataObject, scenario: Scenario
) -> None:
    current = data.draw(st.just({}) | currents(scenario.spec), label="current")
    result = scenario.place(current=current)
    hypothesis.event("some replicas unplaced" if result.unplaced else "all replicas placed")

    assert result.replicas == scenario.replicas
    assert result.unplaced >= 0
    assert result.placed + result.unplaced == scenario.replicas
    assert result.placed == sum(s.replicas for s in result.subsets)
    snapshot_names = [c.name for c in scenario.snapshot.clusters]
    assert list(result.clusters) == snapshot_names
    assert sum(result.clusters.values()) == result.placed
    assert [s.name for s in result.subsets] == [s.name for s in scenario.spec.subsets]
    for subset, got in zip(scenario.spec.subsets, result.subsets, strict=True):
        assert list(got.clusters) == fill_order(subset, scenario.snapshot)
        assert all(n >= 0 for n in got.clusters.values())
        assert got.replicas == sum(got.clusters.values())
        for name, count in got.clusters.items():
            if name not in snapshot_names:
                assert count == 0, (subset.name, name)
    for name in snapshot_names:
        assert result.clusters[name] == sum(s.clusters.get(name, 0) for s in result.subsets)


# 2 -------------------------------------------------------------------------------------------------


@PROPERTY
@hypothesis.given(data=st.data(), scenario=scenarios())
def test_no_subset_exceeds_its_cap(data: st.DataObject, scenario: Scenario) -> None:
    current = data.draw(st.just({}) | currents(scenario.spec), label="current")
    caps = apportion.subset_caps(scenario.spec.subsets, scenario.replicas)
    result = scenario.place(current=current)

    for subset, cap, got in zip(scenario.spec.subsets, caps, result.subsets, strict=True):
        assert got.cap == cap
        if subset.max_replicas is None:
            assert cap is None
        if isinstance(subset.max_replicas, int):
            assert cap == subset.max_replicas
        if cap is not None:
            assert got.replicas <= cap, (subset.name, got)

    percents = [s.percent for s in scenario.spec.subsets]
    if any(p is not None for p in percents):
        pct_sum = sum(p for p in percents if p is not None)
        exact = fractions.Fraction(pct_sum * scenario.replicas, 100)
        total = math.floor(exact + fractions.Fraction(1, 2))  # round half up
        pct_caps = [c for c, p in zip(caps, percents, strict=True) if p is not None]
        assert all(c is not None for c in pct_caps)
        assert sum(c for c in pct_caps if c is not None) == total
        # Largest remainder: every cap is its exact share rounded down or up.
        for cap, pct in zip(caps, percents, strict=True):
            if pct is None:
                continue
            share = fractions.Fraction(total * pct, pct_sum) if pct_sum else fractions.Fraction(0)
            assert cap is not None
            assert math.floor(share) <= cap <= math.ceil(share), (pct, cap, share)


# 3 -------------------------------------------------------------------------------------------------


@PROPERTY
@hypothesis.given(scenario=scenarios(strategy_types=("Adaptive",), simulation=True))
def test_adaptive_places_no_more_than_fits_except_what_waits(scenario: Scenario) -> None:
    result = scenario.place()
    waiting = sum(s.waiting for s in result.subsets)
    hypothesis.event("some replicas wait" if waiting else "nothing waits")

    assert result.capacity_exhausted == waiting
    assert result.unplaced == 0 or all(
        got.cap is not None and got.replicas >= got.cap
        for subset, got in zip(scenario.spec.subsets, result.subsets, strict=True)
        if usable_members(subset, scenario.snapshot)
    )
    for capacity in scenario.snapshot.clusters:
        placed_here = sum(s.clusters.get(capacity.name, 0) for s in result.subsets)
        assert placed_here <= cluster_slots(capacity, scenario.shape) + waiting, capacity.name
        # Tighter: only pools that some subset placing here admits (node term, taints) count.
        admitted = sum(
            pool.count * fit.pods_per_node(pool, scenario.shape)
            for pool in capacity.node_pools
            if any(
                got.clusters.get(capacity.name, 0)
                and fit.pool_admits(pool, fit.with_subset(scenario.shape, subset))
                for subset, got in zip(scenario.spec.subsets, result.subsets, strict=True)
            )
        )
        assert placed_here <= admitted + waiting, capacity.name
    for subset, got in zip(scenario.spec.subsets, result.subsets, strict=True):
        assert got.capacity is not None
        assert got.replicas - got.waiting <= got.capacity, got
        subset_shape = fit.with_subset(scenario.shape, subset)
        slots = sum(
            fit.pool_capacity(pool, subset_shape)
            for c in scenario.snapshot.clusters if c.name in usable_members(subset, scenario.snapshot)
            for pool in c.node_pools
        )
        assert got.replicas - got.waiting <= slots, (got, slots)

    # What fits nowhere waits in the highest-priority subset whose cap allows it (DESIGN §3), so
    # every usable subset before one that has waiting replicas is at its cap — in particular at
    # its cap or its capacity.
    for i, got in enumerate(result.subsets):
        if not got.waiting:
            continue
        assert usable_members(scenario.spec.subsets[i], scenario.snapshot), got
        for j in range(i):
            earlier = result.subsets[j]
            if not usable_members(scenario.spec.subsets[j], scenario.snapshot):
                continue
            at_cap = earlier.cap is not None and earlier.replicas >= earlier.cap
            assert earlier.capacity is not None
            at_capacity = earlier.replicas - earlier.waiting >= earlier.capacity
            assert at_cap or at_capacity, (j, earlier, i, got)
            assert at_cap, (j, earlier, i, got)


# 4 -------------------------------------------------------------------------------------------------


def _assert_only_usable_clusters_hold(scenario: Scenario, result: placement.Placement) -> None:
    usable = fs.usable_clusters(scenario.snapshot)
    for got in result.subsets:
        for name, count in got.clusters.items():
            if name not in usable:
                assert count == 0, (got.name, name, count)
    for name, count in result.clusters.items():
        if name not in usable:
            assert count == 0, (name, count)


@PROPERTY
@hypothesis.given(scenario=scenarios())
def test_unready_cordoned_and_unknown_clusters_take_nothing(scenario: Scenario) -> None:
    _assert_only_usable_clusters_hold(scenario, scenario.place())


def _taint(scenario: Scenario, data: st.DataObject, changes: list[str]) -> tuple[Scenario, set[str]]:
    """The scenario with each cluster changed as drawn from `changes`; the NoSchedule-cordoned ones."""
    snapshot = scenario.snapshot.model_dump(by_alias=True, mode="json")
    cordoned: set[str] = set()
    for entry in snapshot["clusters"]:
        change = data.draw(st.sampled_from(changes), label=entry["name"])
        if change == "unready":
            entry["ready"] = False
        elif change in ("NoSchedule", "NoExecute"):
            entry["taints"].append({"key": builders.CORDON_TAINT_KEY, "effect": change})
            if change == "NoSchedule":
                cordoned.add(entry["name"])
    later = dataclasses.replace(scenario, snapshot=cluster.CapacitySnapshot.model_validate(snapshot))
    return later, cordoned


def braked(scenario: Scenario) -> set[str]:
    """The unready clusters the failover brake keeps: more than half of the selectable ones are
    unready, or no cluster of the snapshot is ready (then they keep their replicas, take none new)."""
    view = placement_view.view_of(scenario.spec, snapshot=scenario.snapshot, shape=scenario.shape)
    selectable = {name for names in view.selected for name in names if name in view.members}
    lost = {name for name in selectable if not view.members[name].ready}
    heard = any(c.ready for c in scenario.snapshot.clusters)
    return lost if brake.suspends(selectable=len(selectable), lost=len(lost), heard_from_any=heard) else set()


@PROPERTY
@hypothesis.given(data=st.data(), scenario=scenarios(usable=True))
def test_unready_and_noexecute_clusters_lose_their_replicas_noschedule_ones_keep_them(
    data: st.DataObject, scenario: Scenario
) -> None:
    before = scenario.place()
    later, cordoned = _taint(scenario, data, ["keep", "keep", "unready", "NoExecute", "NoSchedule"])
    held = braked(later)  # unready, but the brake keeps them: exactly as a NoSchedule cordon
    hypothesis.event("the failover brake holds" if held else "no brake")
    cordoned |= held
    after = later.place(current=before.counts())
    kept = sum(got.clusters.get(name, 0) for got in before.subsets for name in cordoned)
    hypothesis.event("a cordoned cluster keeps replicas" if kept else "nothing on a cordoned cluster")

    allowed = fs.usable_clusters(later.snapshot) | cordoned
    for got in after.subsets:
        for name, count in got.clusters.items():
            if name not in allowed:
                assert count == 0, (got.name, name, count)
    # Same replicas, same caps: a NoSchedule cordon keeps exactly what ran there, and adds nothing.
    for was, now in zip(before.subsets, after.subsets, strict=True):
        for name in cordoned:
            assert now.clusters.get(name, 0) == was.clusters.get(name, 0), (now.name, name, was, now)
    assert_accounts(after, scenario.replicas)


@PROPERTY
@hypothesis.given(data=st.data(), scenario=scenarios(usable=True, replicas=st.integers(0, 60)))
def test_a_noschedule_cordon_never_grows_and_keeps_what_scale_down_order_keeps(
    data: st.DataObject, scenario: Scenario
) -> None:
    """Against the same change of replicas without the cordon: a cordoned cluster never gets more
    than it had, and keeps at least min(what it had, what it would hold uncordoned) — no new
    replicas, no extra protection on scale-down."""
    before = scenario.place()
    replicas = data.draw(st.integers(0, 60), label="new replicas")
    later, cordoned = _taint(scenario, data, ["keep", "NoSchedule"])
    uncordoned = scenario.place(replicas=replicas, current=before.counts())
    after = later.place(replicas=replicas, current=before.counts())
    hypothesis.event("scale down" if replicas < scenario.replicas else "scale up or same")

    assert_accounts(after, replicas)
    for was, free, now in zip(before.subsets, uncordoned.subsets, after.subsets, strict=True):
        for name in cordoned:
            had, would, got = (s.clusters.get(name, 0) for s in (was, free, now))
            assert got <= had, (now.name, name, had, got)
            assert got >= min(had, would), (now.name, name, had, would, got)


# 5 -------------------------------------------------------------------------------------------------


@PROPERTY
@hypothesis.given(data=st.data(), scenario=scenarios())
def test_placement_is_deterministic(data: st.DataObject, scenario: Scenario) -> None:
    current = data.draw(st.just({}) | currents(scenario.spec), label="current")
    first = scenario.place(current=current)
    again = scenario.place(current=copy.deepcopy(current))
    copied = placement.place(
        scenario.spec.model_copy(deep=True), replicas=scenario.replicas,
        snapshot=copy.deepcopy(scenario.snapshot), shape=copy.deepcopy(scenario.shape),
        current=copy.deepcopy(current),
    )
    assert first == again
    assert first == copied
    assert first.to_json() == copied.to_json()


# 6 -------------------------------------------------------------------------------------------------


@PROPERTY
@hypothesis.given(data=st.data(), scenario=scenarios())
def test_a_capacity_change_alone_moves_no_replica(data: st.DataObject, scenario: Scenario) -> None:
    first = scenario.place()
    changed = data.draw(fs.capacity_changes(scenario.snapshot), label="changed snapshot")
    second = scenario.place(snapshot=changed, current=first.counts())
    fresh = scenario.place(snapshot=changed)
    hypothesis.event("fresh placement differs" if fresh.counts() != first.counts() else "same either way")
    assert second.counts() == first.counts()
    assert_accounts(second, scenario.replicas)
    assert second.unplaced == first.unplaced


# 7 -------------------------------------------------------------------------------------------------


@PROPERTY
@hypothesis.given(
    data=st.data(),
    scenario=scenarios(replicas=st.integers(1, 60), cap_kinds=("none", "integer")),
)
def test_scale_down_removes_from_the_lowest_priority_subset_first(
    data: st.DataObject, scenario: Scenario
) -> None:
    first = scenario.place()
    # Often a deep cut, so that several subsets shrink.
    deep = st.integers(0, scenario.replicas // 3)
    fewer = data.draw(deep | st.integers(0, scenario.replicas - 1), label="fewer replicas")
    second = scenario.place(replicas=fewer, current=first.counts())
    shrunk = sum(was.replicas > now.replicas for was, now in zip(first.subsets, second.subsets, strict=True))
    hypothesis.event(f"{min(shrunk, 2)} subsets shrank")

    assert_accounts(second, fewer)
    assert_le(second.counts(), first.counts())
    for i, (was, now) in enumerate(zip(first.subsets, second.subsets, strict=True)):
        if now.replicas < was.replicas:
            for later in second.subsets[i + 1:]:
                assert later.replicas == 0, (was.name, later)


# 8 -------------------------------------------------------------------------------------------------


@PROPERTY
@hypothesis.given(
    data=st.data(),
    scenario=scenarios(replicas=st.integers(0, 59), cap_kinds=("none", "integer")),
)
def test_scale_up_keeps_what_is_placed(data: st.DataObject, scenario: Scenario) -> None:
    first = scenario.place()
    more = data.draw(st.integers(scenario.replicas + 1, 60), label="more replicas")
    second = scenario.place(replicas=more, current=first.counts())
    hypothesis.event("grew" if second.placed > first.placed else "did not grow")

    assert_accounts(second, more)
    assert_le(first.counts(), second.counts())


# 9 -------------------------------------------------------------------------------------------------


@PROPERTY
@hypothesis.given(scenario=scenarios(strategy_types=("Fixed",), cap_kinds=("none",)))
def test_fixed_without_caps_puts_everything_in_the_first_usable_subset(scenario: Scenario) -> None:
    result = scenario.place()
    first_usable = next(
        (i for i, s in enumerate(scenario.spec.subsets) if usable_members(s, scenario.snapshot)), None
    )
    if first_usable is None:
        assert result.unplaced == scenario.replicas
        assert result.placed == 0
        return
    assert result.unplaced == 0
    for i, got in enumerate(result.subsets):
        assert got.replicas == (scenario.replicas if i == first_usable else 0), (i, got)


# 10 ------------------------------------------------------------------------------------------------


@PROPERTY
@hypothesis.given(scenario=scenarios(
    usable=True, min_subsets=1, max_subsets=1, strategy_types=("Fixed",),
    cluster_spreads=("Balance",), cap_kinds=("none",), unknown=False,
))
def test_balance_splits_evenly_with_the_larger_shares_first(scenario: Scenario) -> None:
    result = scenario.place()
    (subset,) = scenario.spec.subsets
    order = fill_order(subset, scenario.snapshot)
    hypothesis.assume(order)
    counts = [result.subsets[0].clusters[name] for name in order]
    hypothesis.event(f"{min(len(order), 3)} clusters, uneven" if len(set(counts)) > 1 else "even")

    assert sum(counts) == scenario.replicas
    assert max(counts) - min(counts) <= 1, counts
    assert counts == sorted(counts, reverse=True), counts
