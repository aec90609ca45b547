"""A round's check split over the shards (`federation.coordinator.round_parts`), without Ray: the
actor bodies (`shards.SpreadShard`, `shards.ClusterShard`) called through a stand-in for actor
handles, so the cut, the merge, the check each ClusterShard holds and the coordinator's union are
the code the Ray backend runs. The round they give must be the one the coordinator gives alone."""

from __future__ import annotations

import datetime
import gc
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from federation.coordinator import round_parts, shards
from federation.coordinator.model import loop, world
from federation.core import fit, placement_round, round_check
from tests.support import contended_round

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)


class Handle:
    """What a Ray actor handle offers the code under test: `handle.method.remote(...)`, answered
    at once by the actor's body."""

    def __init__(self, body: object) -> None:
        self._body = body

    def __getattr__(self, name: str) -> Any:
        method: Callable[..., Any] = getattr(self._body, name)

        class Remote:
            @staticmethod
            def remote(*args: Any) -> Any:
                return method(*args)
        return Remote


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()  # the shard bodies tune the collector, as their processes do
    yield
    gc.set_threshold(*before)


def contended_world() -> world.World:
    """Twelve spreads over three clusters, tiny's four one-cpu slots wanted by most of them."""
    return contended_round.contended_world({"tiny": 1, "big": 10, "mid": 2}, now=NOW)


def on_parts(*, spread_shards: int, cluster_shards: int) -> loop.PlaceRound:
    """`RayBackend.place_round` with its actors' bodies called in this process."""
    spreads = [Handle(shards.SpreadShard()) for _ in range(spread_shards)]
    checkers = [Handle(shards.ClusterShard()) for _ in range(cluster_shards)]

    def place_round(requests: Sequence[loop.PlaceRequest], pools: placement_round.Pools) -> loop.RoundAnswers:
        groups = shards.group_by_shard([r.key for r in requests], shards=spread_shards)
        calls = [(indices, spreads[shard].place_round.remote([requests[i] for i in indices], cluster_shards))
                 for shard, indices in enumerate(groups) if indices]
        answers = round_parts.answers_in_order(len(requests), [(i, found[0]) for i, found in calls])
        parts = [[found[1 + j] for _, found in calls] for j in range(cluster_shards)]
        return loop.RoundAnswers(answers, round_parts.RemoteCheck(
            actors=checkers, parts=parts, pools=pools, round_id="r1", wait=lambda found, what: list(found)))
    return place_round


@pytest.mark.parametrize(("spread_shards", "cluster_shards"), [(1, 1), (2, 2), (3, 5)])
def test_a_round_checked_in_parts_is_the_round_checked_here(spread_shards: int, cluster_shards: int) -> None:
    keys = [e.key for e in contended_world().spreads()]
    parted = loop.recompute(contended_world(), keys, now=NOW, parallel_from=2,
                            place_round=on_parts(spread_shards=spread_shards, cluster_shards=cluster_shards))
    here = loop.recompute(contended_world(), keys, now=NOW)
    assert parted.fell_back == ""
    assert parted.placements == here.placements
    assert parted.replaced == here.replaced > 0


def test_the_cut_gives_each_cluster_to_its_shard_in_key_order() -> None:
    model = contended_world()
    keys = sorted(e.key for e in model.spreads())
    pools = model.lift_charges(keys)
    requests = [loop.request_for(model, e, replicas=e.replicas or 0, now=NOW, kept=frozenset(), in_round=True)
                for e in (model.spread(k) for k in keys) if e is not None]
    answers = loop.answer_all(requests)
    parts = round_parts.cut(requests, answers, parts=3)
    for number, part in enumerate(parts):
        for name, rows in part.items():
            assert shards.routing.shard_of(name, shards=3) == number
            assert [row.key for row in rows] == sorted(row.key for row in rows)
    first, second = (round_parts.cut(requests[:6], answers[:6], parts=3),
                     round_parts.cut(requests[6:], answers[6:], parts=3))
    for number in range(3):  # two shards' cuts, merged in any order, are the one cut of all
        assert plain(round_check.merged([second[number], first[number]])) == plain(parts[number])
    assert {name for part in parts for name in part} <= set(pools)


def plain(rows: round_parts.Rows) -> dict[str, list[tuple[Any, ...]]]:
    """Rows as values (a profile compares by identity, and each cut has its own)."""
    def profile(found: fit.Profile) -> tuple[Any, ...]:
        return (found.requests, found.admission)
    return {name: [(r.key, tuple(profile(p) for p in r.profiles), r.takes,
                    tuple((profile(c.profile), c.pods) for c in r.charges)) for r in listed]
            for name, listed in rows.items()}


def test_a_shard_asked_about_a_round_it_does_not_hold_says_so() -> None:
    held = round_parts.HeldCheck()
    with pytest.raises(round_parts.RoundGone, match="round r2 is not held here"):
        held.again("r2", ["shop/s00"])
    held.first("r1", {}, [])
    with pytest.raises(round_parts.RoundGone):
        held.folded("r2")
    assert held.folded("r1") == {}
    with pytest.raises(round_parts.RoundGone):  # a round is over for the shard once its folds are taken
        held.again("r1", [])
