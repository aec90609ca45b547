"""The round against one snapshot (DESIGN §5, issue 27): `federation.core.placement_round`.

Tables first (two spreads over one pool, room enough or not; contention that stays in its pool;
`Capacity` splits that no longer depend on names), then properties over random rounds drawn by
`strategies.py`: no room promised twice (checked by sums the code under test never computes, and
as "the answer is the sequential one in the order kept-then-placed-again"), equal to the
sequential rule when no pool is contended and nothing splits by `Capacity`, nothing placed twice
when there is room for every pod, and the same answer whatever shards placed the spreads against
the snapshot.
"""

from __future__ import annotations

import dataclasses
import fractions
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import hypothesis
import pytest

# tests/unit has no __init__.py: pytest's default import mode puts this directory on sys.path.
import strategies as fs
from hypothesis import strategies as st

from federation.api import cluster, names, quantity, spread
from federation.core import fit, placement, placement_round, placement_view, round_check
from federation.core import placement_passes as passes
from tests.support import builders

PROPERTY = hypothesis.settings(
    max_examples=150, deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow, hypothesis.HealthCheck.data_too_large],
)

Counts = Mapping[str, Mapping[str, int]]


@dataclasses.dataclass(frozen=True)
class Item:
    """One spread of a round: what its placement reads besides capacity."""

    spec: spread.FederatedSpreadSpec
    replicas: int
    shape: fit.PodShape
    current: Counts | None = None
    """Held now."""
    running: Counts | None = None
    """Of `current`, what runs; None: all of it (what is pending is the round's own)."""

    def ran(self) -> Counts:
        return self.current or {} if self.running is None else self.running


@dataclasses.dataclass(frozen=True)
class Round:
    """A snapshot and the spreads of a round, placed the way the coordinator places one."""

    snapshot: cluster.CapacitySnapshot
    items: Mapping[str, Item]

    def pools(self) -> placement_round.Pools:
        return {c.name: tuple(fit.pool_of(p) for p in c.node_pools) for c in self.snapshot.clusters}

    def place(self, key: str, room: placement_view.Room) -> placement_round.Placed:
        item = self.items[key]
        view = placement_view.view_of(item.spec, snapshot=self.snapshot, shape=item.shape, room=room)
        view = placement_view.braked(view, heard_from_any=any(c.ready for c in self.snapshot.clusters))
        result = placement.place_view(item.spec, replicas=item.replicas, view=view, current=item.current,
                                      running=item.ran())
        profiles = placement_round.profiles_of(item.spec, item.shape)
        return placement_round.Placed(
            result, placement_round.charges_of(result, running=item.ran(), profiles=profiles), profiles)

    def settle(self) -> placement_round.Settled:
        return placement_round.place_round(self.items, pools=self.pools(), place=self.place)

    def in_order(self, keys: Sequence[str]) -> dict[str, placement_round.Placed]:
        return placement_round.place_in_order(keys, pools=self.pools(), place=self.place)

    def alone(self, key: str) -> placement_round.Placed:
        """Spread `key` placed against the snapshot, nothing else of the round charged."""
        return self.place(key, placement_round.room_of(self.pools()))


def answer(placed: placement_round.Placed) -> tuple[Any, ...]:
    """What a spread's answer is: replicas per subset per cluster, what waits, what is unplaced."""
    result = placed.result
    return (result.counts(), result.unplaced, result.capacity_exhausted,
            tuple(sorted((s.name, tuple(sorted(s.waiting_clusters.items()))) for s in result.subsets)))


def answers(placed: Mapping[str, placement_round.Placed]) -> dict[str, tuple[Any, ...]]:
    return {key: answer(found) for key, found in placed.items()}


def simulates(spec: spread.FederatedSpreadSpec) -> bool:
    strategy = spec.schedule_strategy
    return strategy.type == "Adaptive" and not strategy.adaptive_settings().disable_simulation_schedule


def promised(round_: Round, placed: Mapping[str, placement_round.Placed]) -> dict[str, list[tuple[int, int]]]:
    """Per cluster, (pods, cpu in nano-cores) of the new pods each simulating spread was promised
    room for: placed beyond what it held, less what waits (pods held but not running take their
    room first: what is new must fit in what they leave)."""
    found: dict[str, list[tuple[int, int]]] = {}
    for key, answer_ in placed.items():
        item = round_.items[key]
        if not simulates(item.spec):
            continue
        for subset, profile in zip(answer_.result.subsets, answer_.profiles, strict=True):
            held = (item.current or {}).get(subset.name) or {}
            cpu = dict(profile.requests).get("cpu", 0)
            for name, count in subset.clusters.items():
                new = max(0, count - held.get(name, 0)) - subset.waiting_clusters.get(name, 0)
                if new > 0:
                    found.setdefault(name, []).append((new, int(cpu) * new))
    return found


def overcommitted(round_: Round, placed: Mapping[str, placement_round.Placed]) -> list[str]:
    """Clusters where the new pods promised room need more pods slots or cpu than the snapshot has
    free on all its nodes together (a necessary condition of no room promised twice)."""
    found = []
    for name, items in promised(round_, placed).items():
        pods_free = cpu_free = fractions.Fraction(0)
        for pool in round_.snapshot.by_name()[name].node_pools:
            numbers = fit.pool_of(pool)
            pods = numbers.allocatable[fit.PODS] - numbers.requested.get(fit.PODS, 0)
            pods_free += numbers.count * max(0, pods)
            cpu = numbers.allocatable.get("cpu")
            if cpu is not None:
                cpu_free += numbers.count * max(0, cpu - numbers.requested.get("cpu", 0))
        if sum(p for p, _ in items) * quantity.NANO > pods_free or sum(c for _, c in items) > cpu_free:
            found.append(name)
    return found


def adaptive(*subsets: dict[str, Any]) -> spread.FederatedSpreadSpec:
    return builders.spread_spec(*subsets, strategy="Adaptive")


CPU_1 = fit.shape_from_pod_spec({"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]})


def one_pool(cpu: str, *, clusters: Sequence[str] = ("c0",)) -> cluster.CapacitySnapshot:
    return builders.snapshot(*(builders.member(name, builders.pool(1, cpu=cpu)) for name in clusters))


# --- tables -------------------------------------------------------------------------------------


def test_of_two_spreads_that_do_not_both_fit_the_later_is_placed_again() -> None:
    round_ = Round(one_pool("10"), {
        "shop/b": Item(adaptive({"name": "a", "clusters": ["c0"]}), 6, CPU_1),
        "shop/a": Item(adaptive({"name": "a", "clusters": ["c0"]}), 6, CPU_1),
    })
    naive = {key: round_.alone(key) for key in round_.items}
    assert overcommitted(round_, naive) == ["c0"]  # each alone takes 6 of the 10 cores
    settled = round_.settle()
    assert settled.contended == {("c0", 0)}
    assert settled.replaced == ("shop/b",)  # a's takes fit first in key order: its answer stands
    assert list(settled.placed) == ["shop/a", "shop/b"]
    assert settled.placed["shop/a"].result.counts() == {"a": {"c0": 6}}
    assert settled.placed["shop/b"].result.counts() == {"a": {"c0": 6}}  # 4 placed, 2 waiting there
    assert settled.placed["shop/b"].result.capacity_exhausted == 2
    assert overcommitted(round_, settled.placed) == []
    assert answers(settled.placed) == answers(round_.in_order(["shop/a", "shop/b"]))


def test_with_room_for_both_nothing_is_placed_twice_and_the_answer_is_the_sequential_one() -> None:
    round_ = Round(one_pool("12"), {
        key: Item(adaptive({"name": "a", "clusters": ["c0"]}), 6, CPU_1) for key in ("shop/a", "shop/b")
    })
    settled = round_.settle()
    assert (settled.contended, settled.replaced) == (frozenset(), ())
    assert answers(settled.placed) == answers(round_.in_order(sorted(round_.items)))


def test_only_the_spreads_whose_takes_do_not_fit_are_placed_again() -> None:
    snapshot = builders.snapshot(
        builders.member("c0", builders.pool(1, cpu="4")),
        builders.member("c1", builders.pool(1, cpu="4"), builders.pool(1, cpu="4", labels={"disk": "ssd"})),
    )
    ssd = {"requiredNodeSelectorTerm": {"matchExpressions": [
        {"key": "disk", "operator": "In", "values": ["ssd"]}]}}
    round_ = Round(snapshot, {
        "shop/a": Item(adaptive({"name": "a", "clusters": ["c0"]}), 3, CPU_1),
        "shop/b": Item(adaptive({"name": "a", "clusters": ["c0", "c1"], "clusterSpread": "Fill"}), 3, CPU_1),
        "shop/c": Item(adaptive({"name": "a", "clusters": ["c1"], **ssd}), 4, CPU_1),
        "shop/d": Item(adaptive({"name": "a", "clusters": ["c1"]}), 2, CPU_1),
    })
    settled = round_.settle()
    # a and b both want 3 of c0's 4 cores (a, first in key order, keeps them); c on c1's ssd pool
    # and d on its first pool share nothing.
    assert settled.contended == {("c0", 0)}
    assert settled.replaced == ("shop/b",)
    assert settled.placed["shop/b"].result.counts() == {"a": {"c0": 1, "c1": 2}}
    assert settled.placed["shop/c"].result.counts() == {"a": {"c1": 4}}
    assert answers(settled.placed) == answers(round_.in_order(sorted(round_.items)))


def test_capacity_splits_in_a_round_see_the_snapshot_whatever_the_names() -> None:
    snapshot = one_pool("8", clusters=("c0", "c1"))
    split = adaptive({"name": "a", "clusters": ["c0", "c1"], "clusterSpread": "Capacity"})
    fill = adaptive({"name": "a", "clusters": ["c0"]})
    for first, second in (("shop/a", "shop/z"), ("shop/z", "shop/a")):
        round_ = Round(snapshot, {first: Item(fill, 4, CPU_1), second: Item(split, 4, CPU_1)})
        settled = round_.settle()
        assert not settled.contended
        # The snapshot has 8 free cores on each cluster: the split is even, whoever comes first.
        assert settled.placed[second].result.counts() == {"a": {"c0": 2, "c1": 2}}
    sequential = Round(snapshot, {"shop/a": Item(fill, 4, CPU_1), "shop/z": Item(split, 4, CPU_1)})
    assert sequential.in_order(["shop/a", "shop/z"])["shop/z"].result.counts() == {"a": {"c0": 1, "c1": 3}}


def test_a_take_is_checked_with_the_placements_own_arithmetic() -> None:
    # Two nodes of 4 cores. a's 2 one-core pods are charged as half a pod per node; b's subsets
    # have pods of two kinds (1 and 2 cores), and a placement gives each kind whole nodes.
    snapshot = builders.snapshot(builders.member("c0", builders.pool(2, cpu="4")))
    two_cores = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "2"}}}]}}
    round_ = Round(snapshot, {
        "shop/a": Item(adaptive({"name": "a", "clusters": ["c0"]}), 2, CPU_1),
        "shop/b": Item(adaptive({"name": "a", "clusters": ["c0"], "maxReplicas": 1},
                                {"name": "b", "clusters": ["c0"], "patch": two_cores}), 3, CPU_1),
    })
    # Against the snapshot b has a node for its 1-core pod and one for its two 2-core pods; folded
    # pod by pod, a's and b's charges fit (3 of 8 cores, then 2 two-core slots left on 2.5 free
    # cores per node), but b placed after a finds 3 free cores per node: one 2-core pod per node,
    # one node left for them once its 1-core pod has one. The round checks b's takes as b's
    # placement makes them, finds c0 contended and places both again, in key order.
    assert round_.alone("shop/b").result.capacity_exhausted == 0
    sequential = round_.in_order(["shop/a", "shop/b"])
    assert sequential["shop/b"].result.capacity_exhausted == 1
    settled = round_.settle()
    assert settled.contended == {("c0", 0)}
    assert answers(settled.placed) == answers(sequential)


@pytest.mark.parametrize(("running", "expected"), [
    (None, {"c0": [2], "c2": [1, 3]}),
    ({"a": {"c0": 1, "c1": 5}, "b": {"c2": 3}}, {"c0": [1], "c2": [1]}),
    ({"a": {"c1": -1}}, {"c0": [2], "c1": [1], "c2": [1, 3]}),  # (a count no report gives: kept exact)
])
def test_a_placements_charges_are_its_pending_pods_per_cluster(
    running: Counts | None, expected: Mapping[str, list[int]],
) -> None:
    """`charges_of`: placed minus running where positive, per subset in placement order; a cluster
    a subset gives nothing charges nothing there (the wide subsets' members are mostly such)."""
    def subset(name: str, clusters: dict[str, int]) -> placement.SubsetPlacement:
        return placement.SubsetPlacement(name, sum(clusters.values()), clusters, None, None, 0, ())

    result = placement.Placement(6, 0, 0, (subset("a", {"c0": 2, "c1": 0, "c2": 1}),
                                           subset("b", {"c1": 0, "c2": 3, "c3": 0})), {})
    profiles = (fit.profile(CPU_1), fit.profile(CPU_1))
    found = placement_round.charges_of(result, running=running, profiles=profiles)
    assert {name: [charge.pods for charge in charges] for name, charges in found.items()} == expected


@pytest.mark.parametrize("running", [None, {"a": {"c0": 1, "c1": 5}, "b": {"c2": 3}}, {"a": {"c1": -1}}])
def test_deferred_charges_are_the_charges_computed_when_first_read(running: Counts | None) -> None:
    """`DeferredCharges` computes nothing until read (a running count that cannot be read proves
    it), then equals `charges_of` as a mapping, read any way."""
    def subset(name: str, clusters: dict[str, int]) -> placement.SubsetPlacement:
        return placement.SubsetPlacement(name, sum(clusters.values()), clusters, None, None, 0, ())

    class Unread(dict[str, dict[str, int]]):
        def get(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("read before the charges were asked for")

    result = placement.Placement(6, 0, 0, (subset("a", {"c0": 2, "c1": 0, "c2": 1}),
                                           subset("b", {"c1": 0, "c2": 3, "c3": 0})), {})
    profiles = (fit.profile(CPU_1), fit.profile(CPU_1))
    placement_round.DeferredCharges(result, running=Unread(running or {}), profiles=profiles)
    deferred = placement_round.DeferredCharges(result, running=running, profiles=profiles)
    assert not deferred.computed
    found = placement_round.charges_of(result, running=running, profiles=profiles)
    assert deferred == found and found == deferred
    assert deferred.computed
    assert dict(deferred.items()) == found and sorted(deferred) == sorted(found)
    assert len(deferred) == len(found)
    assert all(name in deferred and deferred[name] == found[name] for name in found)
    assert "c9" not in deferred and deferred.get("c9") is None


def test_pods_in_flight_beyond_the_room_contend_with_no_one_alone() -> None:
    # a's 4 pods do not run yet and c0 has room for 2 only (its nodes filled meanwhile): a's own
    # placement finds room for 2 of them, and so does the check; only a spread that needs some of
    # that room makes c0 contended.
    spec = adaptive({"name": "a", "clusters": ["c0"]})
    a = Item(spec, 4, CPU_1, current={"a": {"c0": 4}}, running={})
    alone = Round(one_pool("2", clusters=("c0", "c1")), {
        "shop/a": a, "shop/b": Item(adaptive({"name": "a", "clusters": ["c1"]}), 1, CPU_1)})
    assert alone.alone("shop/a").result.takes == (passes.Take("c0", 0, 2),)
    settled = alone.settle()
    assert (settled.contended, settled.replaced) == (frozenset(), ())
    shared = Round(alone.snapshot, {"shop/a": a, "shop/b": Item(spec, 1, CPU_1)})
    settled = shared.settle()
    assert (settled.contended, settled.replaced) == ({("c0", 0)}, ("shop/b",))
    assert settled.placed["shop/b"].result.capacity_exhausted == 1
    assert answers(settled.placed) == answers(shared.in_order(["shop/a", "shop/b"]))


def test_first_answers_must_be_the_rounds() -> None:
    round_ = Round(one_pool("4"), {"shop/a": Item(adaptive({"name": "a", "clusters": ["c0"]}), 1, CPU_1)})
    with pytest.raises(ValueError, match="not the round's"):
        placement_round.place_round(["shop/a", "shop/b"], pools=round_.pools(), place=round_.place,
                                    first={"shop/a": round_.alone("shop/a")})


def test_fixed_spreads_take_no_room_they_are_promised_but_charge_what_they_place() -> None:
    round_ = Round(one_pool("4"), {
        "shop/a": Item(builders.spread_spec({"name": "a", "clusters": ["c0"]}), 3, CPU_1),
        "shop/b": Item(adaptive({"name": "a", "clusters": ["c0"]}), 3, CPU_1),
    })
    assert round_.alone("shop/a").result.takes == ()
    settled = round_.settle()
    assert settled.replaced == ("shop/b",)  # b's 3 do not fit on a's 3: c0 is contended
    assert settled.placed["shop/b"].result.capacity_exhausted == 2
    assert answers(settled.placed) == answers(round_.in_order(sorted(round_.items)))


# --- properties ---------------------------------------------------------------------------------


KEYS = ("ns/a", "ns/b", "ns/c", "ns/d", "ns/e")


@st.composite
def tight_snapshots(draw: st.DrawFn) -> cluster.CapacitySnapshot:
    """Up to three ready clusters of one or two small pools (1-3 nodes of 1-8 cores and 1-10 pods):
    a few spreads fill them, so rounds are often contended."""
    clusters = []
    for name in fs.CLUSTER_NAMES[:draw(st.integers(1, 3))]:
        pools = []
        for index in range(draw(st.integers(1, 2))):
            cpu = draw(st.integers(1, 8))
            pool: dict[str, Any] = {
                "name": f"pool{index}", "count": draw(st.integers(1, 3)),
                "labels": {fs.POOL_TYPE_LABEL: draw(st.sampled_from(fs.POOL_TYPES))},
                "allocatable": {"cpu": str(cpu), "pods": str(draw(st.integers(1, 10)))},
                "requested": {"cpu": f"{draw(st.integers(0, cpu)) * 500}m", "pods": "0"},
            }
            if draw(st.integers(0, 3)) == 0:
                pool["taints"] = [{"key": fs.NODE_TAINT_KEY, "value": "x", "effect": "NoSchedule"}]
            pools.append(pool)
        clusters.append({"name": name, "labels": {names.REGION_LABEL: draw(st.sampled_from(fs.REGIONS))},
                         "ready": True, "nodePools": pools})
    return cluster.CapacitySnapshot.model_validate({"clusters": clusters})


@st.composite
def rounds(draw: st.DrawFn, *, cluster_spreads: Sequence[spread.ClusterSpread] = fs.CLUSTER_SPREADS,
           ) -> Round:
    snapshot = draw(tight_snapshots() | fs.snapshots(max_clusters=3))
    names = [c.name for c in snapshot.clusters]
    count = draw(st.integers(2, len(KEYS)))
    items: dict[str, Item] = {}
    for key in draw(st.permutations(KEYS))[:count]:
        # Mostly spreads bounded by capacity (Adaptive, simulating): the ones a round can contend.
        bounded = draw(st.integers(0, 3)) > 0
        spec = draw(fs.spreads(
            names, max_subsets=3, cluster_spreads=cluster_spreads, patches=draw(st.booleans()),
            strategy_types=("Adaptive",) if bounded else fs.STRATEGY_TYPES,
            simulation=True if bounded else None))
        item = Item(spec, draw(st.integers(0, 16)), draw(fs.shapes()))
        if draw(st.booleans()):  # it holds an earlier placement, all of it running or not
            before = Round(snapshot, {key: dataclasses.replace(item, replicas=draw(st.integers(0, 12)))})
            current = before.alone(key).result.rule_counts()
            running = None
            if draw(st.booleans()):
                running = {subset: {name: count - draw(st.integers(0, count))
                                    for name, count in counts.items()} for subset, counts in current.items()}
            item = dataclasses.replace(item, current=current, running=running)
        items[key] = item
    return Round(snapshot, items)


@PROPERTY
@hypothesis.given(round_=rounds())
def test_no_room_is_promised_twice(round_: Round) -> None:
    settled = round_.settle()
    assert overcommitted(round_, settled.placed) == []
    assert set(settled.placed) == set(round_.items)
    assert list(settled.placed) == sorted(round_.items)


@PROPERTY
@hypothesis.given(round_=rounds(cluster_spreads=("Fill", "Balance")))
def test_the_answer_is_sequential_uncontended_spreads_first(round_: Round) -> None:
    settled = round_.settle()
    kept = [key for key in sorted(round_.items) if key not in settled.replaced]
    assert answers(settled.placed) == answers(round_.in_order([*kept, *settled.replaced]))
    for key in kept:  # the uncontended keep their answers against the snapshot
        assert answer(settled.placed[key]) == answer(round_.alone(key))


@PROPERTY
@hypothesis.given(round_=rounds(cluster_spreads=("Fill", "Balance")))
def test_without_contention_the_round_is_the_sequential_rule(round_: Round) -> None:
    settled = round_.settle()
    hypothesis.assume(not settled.contended)
    assert settled.replaced == ()
    assert answers(settled.placed) == answers(round_.in_order(sorted(round_.items)))


@PROPERTY
@hypothesis.given(round_=rounds())
def test_with_room_for_every_pod_nothing_is_placed_twice(round_: Round) -> None:
    data = round_.snapshot.model_dump(by_alias=True, mode="json")
    for entry in data["clusters"]:
        for pool in entry["nodePools"]:
            pool["allocatable"], pool["requested"] = {"cpu": "1000", "pods": "1000"}, {}
    ample = Round(cluster.CapacitySnapshot.model_validate(data), round_.items)
    settled = ample.settle()
    assert (settled.contended, settled.replaced) == (frozenset(), ())
    for key in ample.items:
        assert answer(settled.placed[key]) == answer(ample.alone(key))


@PROPERTY
@hypothesis.given(round_=rounds())
def test_a_round_of_one_is_never_contended(round_: Round) -> None:
    for key, item in round_.items.items():
        settled = Round(round_.snapshot, {key: item}).settle()
        assert (settled.contended, settled.replaced) == (frozenset(), ())


@PROPERTY
@hypothesis.given(round_=rounds(), data=st.data())
def test_any_partition_into_shards_gives_the_same_answer(round_: Round, data: st.DataObject) -> None:
    whole = round_.settle()
    shards = data.draw(st.integers(1, 4))
    owner = {key: data.draw(st.integers(0, shards - 1)) for key in round_.items}
    room = placement_round.room_of(round_.pools())
    first: dict[str, placement_round.Placed] = {}
    for shard in reversed(range(shards)):  # each shard answers its own spreads, last shard first
        mine = [key for key in reversed(list(round_.items)) if owner[key] == shard]
        first.update({key: round_.place(key, room) for key in mine})
    split = placement_round.place_round(round_.items, pools=round_.pools(), place=round_.place, first=first)
    assert answers(split.placed) == answers(whole.placed)
    assert (split.contended, split.replaced) == (whole.contended, whole.replaced)


@PROPERTY
@hypothesis.given(round_=rounds(), data=st.data())
def test_uncontended_spreads_answer_whatever_the_names_of_the_others(
        round_: Round, data: st.DataObject) -> None:
    settled = round_.settle()
    renamed = dict(zip(round_.items, data.draw(st.permutations(KEYS)), strict=False))
    other = Round(round_.snapshot, {renamed[key]: item for key, item in round_.items.items()})
    again = other.settle()
    for key in round_.items:
        if key not in settled.replaced and renamed[key] not in again.replaced:
            assert answer(settled.placed[key]) == answer(again.placed[renamed[key]])


def rows(first: Mapping[str, placement_round.Placed],
         keys: Sequence[str]) -> dict[str, list[round_check.Row]]:
    return round_check.by_cluster(
        round_check.rows_of(key, first[key].result, charges=first[key].charges, profiles=first[key].profiles)
        for key in keys)


@PROPERTY
@hypothesis.given(round_=rounds(), forget=st.integers(0, 5))
def test_a_folds_rooms_are_what_it_held_when_each_was_asked(round_: Round, forget: int) -> None:
    """`Fold.room` freezes only the clusters charged since the last room: every room still says
    what the fold held when it was asked (copied by value then), charges and forgets after it."""
    pools, room = round_.pools(), placement_round.room_of(round_.pools())
    first = {key: round_.place(key, room) for key in sorted(round_.items)}
    fold = round_check.Fold(pools)
    Values = dict[str, list[dict[str, quantity.Nanos]]]
    asked: list[tuple[round_check.FoldedRoom, Values, dict[str, int]]] = []
    for step, key in enumerate(sorted(first)):
        for name, items in first[key].charges.items():
            fold.charge(name, items)
        if step == forget:
            fold.forget(sorted(fold.folded())[:1])
        taken, folded = fold.room(), fold.folded()
        asked.append((taken, {name: [dict(node) for node in taken[name]] for name in pools},
                      {name: taken.stamp(name) for name in pools}))
        assert {name for name in pools if taken.stamp(name)} == set(folded)
        assert {name: tuple(taken[name]) for name in folded} == folded
        assert all([dict(node) for node in taken[name]] == [dict(p.requested) for p in pools[name]]
                   for name in pools if name not in folded), "a cluster not charged: the snapshot's"
    for taken, values, stamps in asked:
        assert {name: [dict(node) for node in taken[name]] for name in pools} == values
        assert {name: taken.stamp(name) for name in pools} == stamps


def settled_by_the_rule(round_: Round) -> placement_round.Settled:
    """`settle` as the module docstring states the rule, without its shortcuts: every check from a
    fresh fold over every cluster, until none fails; then a fresh fold of the kept spreads' charges
    for the spreads placed again."""
    pools, room = round_.pools(), placement_round.room_of(round_.pools())
    first = {key: round_.place(key, room) for key in sorted(round_.items)}
    keys = sorted(first)
    again: set[str] = set()
    contended: set[tuple[str, int]] = set()
    while True:
        kept = [k for k in keys if k not in again]
        failed, found = round_check.ClusterCheck(pools, rows(first, kept)).first()
        if not failed:
            break
        contended |= found
        again |= failed
    fold = round_check.Fold(pools)
    for key in keys:
        if key not in again:
            for name, items in first[key].charges.items():
                fold.charge(name, items)
    placed = dict(first)
    for key in sorted(again):
        placed[key] = answer_ = round_.place(key, fold.room())
        for name, items in answer_.charges.items():
            fold.charge(name, items)
    return placement_round.Settled(placed=placed, contended=frozenset(contended),
                                   replaced=tuple(sorted(again)))


@PROPERTY
@hypothesis.given(round_=rounds())
def test_checking_again_only_where_the_spreads_taken_out_were_is_the_rule(round_: Round) -> None:
    settled, rule = round_.settle(), settled_by_the_rule(round_)
    assert answers(settled.placed) == answers(rule.placed)
    assert (settled.contended, settled.replaced) == (rule.contended, rule.replaced)


class Parts:
    """A round's check split over `owner`'s parts of the clusters, each a `ClusterCheck` of its own
    (what shards of clusters run), the kept fold seeded from what each part folded."""

    def __init__(self, pools: placement_round.Pools, first: Mapping[str, placement_round.Placed],
                 owner: Mapping[str, int], parts: int) -> None:
        self.pools = pools
        every = rows(first, sorted(first))
        self.checks = [
            round_check.ClusterCheck(pools, {n: r for n, r in every.items() if owner.get(n, 0) == part})
            for part in range(parts)]

    def first(self) -> round_check.Found:
        return self._union([check.first() for check in self.checks])

    def again(self, taken_out: Collection[str]) -> round_check.Found:
        return self._union([check.again(taken_out) for check in self.checks])

    def kept(self) -> round_check.Fold:
        states: dict[str, tuple[round_check.Node, ...]] = {}
        for check in self.checks:
            states.update(check.folded())
        return round_check.Fold.seeded(self.pools, states)

    @staticmethod
    def _union(found: Sequence[round_check.Found]) -> round_check.Found:
        return (frozenset().union(*(f[0] for f in found)), frozenset().union(*(f[1] for f in found)))


@PROPERTY
@hypothesis.given(round_=rounds(), data=st.data())
def test_a_check_split_over_parts_of_the_clusters_settles_the_same(
        round_: Round, data: st.DataObject) -> None:
    """What lets the check run on shards of clusters: each cluster's fold is its own, and the room
    the spreads placed again start from is the parts' folds put together."""
    whole = round_.settle()
    pools, room = round_.pools(), placement_round.room_of(round_.pools())
    first = {key: round_.place(key, room) for key in sorted(round_.items)}
    parts = data.draw(st.integers(1, 4))
    owner = {name: data.draw(st.integers(0, parts - 1)) for name in sorted(pools)}
    checker = Parts(pools, first, owner, parts)
    split = placement_round.settle(pools, first, place=round_.place, checker=checker)
    assert answers(split.placed) == answers(whole.placed)
    assert (split.contended, split.replaced) == (whole.contended, whole.replaced)


@PROPERTY
@hypothesis.given(round_=rounds(), data=st.data())
def test_a_round_checked_elsewhere_reads_only_the_charges_of_the_spreads_placed_again(
        round_: Round, data: st.DataObject) -> None:
    """With its check given (the shards of clusters run it), `settle` never reads what the spreads
    it keeps charge: the coordinator gives them as `DeferredCharges`, computed for none of them,
    and the round's answer is the same."""
    whole = round_.settle()
    pools, room = round_.pools(), placement_round.room_of(round_.pools())
    first = {key: round_.place(key, room) for key in sorted(round_.items)}
    parts = data.draw(st.integers(1, 3))
    owner = {name: data.draw(st.integers(0, parts - 1)) for name in sorted(pools)}
    checker = Parts(pools, first, owner, parts)
    deferred = {key: dataclasses.replace(found, charges=placement_round.DeferredCharges(
        found.result, running=round_.items[key].ran(), profiles=found.profiles))
        for key, found in first.items()}
    split = placement_round.settle(pools, deferred, place=round_.place, checker=checker)
    assert answers(split.placed) == answers(whole.placed)
    assert (split.contended, split.replaced) == (whole.contended, whole.replaced)
    read = {key for key, found in deferred.items()
            if isinstance(found.charges, placement_round.DeferredCharges) and found.charges.computed}
    assert read == set()
    for key in split.replaced:  # what a spread placed again charges is its new answer's
        assert split.placed[key] is not deferred[key]
