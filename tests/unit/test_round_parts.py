"""A round's check split over the shards (`federation.coordinator.round_parts`), without Ray: the
actor bodies (`shards.SpreadShard`, `shards.ClusterShard`) called through a stand-in for actor
handles, so the cut, the merge, the check each ClusterShard holds and the coordinator's union are
the code the Ray backend runs. The round they give must be the one the coordinator gives alone."""

from __future__ import annotations

import datetime
import gc
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pytest

from federation.coordinator import round_parts, shard_specs, shards
from federation.coordinator.model import loop, routing, world
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


def contended_world(*, patched: bool = False) -> world.World:
    """Twelve spreads over three clusters, tiny's four one-cpu slots wanted by most of them."""
    return contended_round.contended_world({"tiny": 1, "big": 10, "mid": 2}, now=NOW, patched=patched)


def on_parts(*, spread_shards: int, cluster_shards: int, chunk: int = shards.ROUND_CHUNK) -> loop.PlaceRound:
    """`RayBackend.place_round` with its actors' bodies called in this process."""
    spreads = [Handle(shards.SpreadShard()) for _ in range(spread_shards)]
    checkers = [Handle(shards.ClusterShard()) for _ in range(cluster_shards)]
    tokens = shard_specs.tokens()
    specs = [shard_specs.SentSpecs(tokens) for _ in range(spread_shards)]

    def place_round(requests: Iterable[loop.PlaceRequest], pools: placement_round.Pools) -> loop.RoundAnswers:
        for sides in specs:
            sides.start()
        sent = round_parts.send_in_chunks(
            requests, send=lambda shard, some: spreads[shard].place_round.remote(
                round_parts.pack([specs[shard].ship(r) for r in some]), cluster_shards, "r1"),
            shards=spread_shards, chunk=chunk)
        check = round_parts.RemoteCheck(actors=checkers, parts=sent.parts(cluster_shards), pools=pools,
                                        round_id="r1", wait=lambda found, what: list(found))
        return loop.RoundAnswers(sent.in_order(sent.answers()), check)
    return place_round


@pytest.mark.parametrize(("spread_shards", "cluster_shards", "chunk"),
                         [(1, 1, 1000), (2, 2, 1000), (3, 5, 1000), (2, 3, 1), (3, 2, 5)])
def test_a_round_checked_in_parts_is_the_round_checked_here(
    spread_shards: int, cluster_shards: int, chunk: int,
) -> None:
    """Whatever the shards, and however the requests are cut into chunks as they are built."""
    keys = [e.key for e in contended_world().spreads()]
    parted = loop.recompute(contended_world(), keys, now=NOW, parallel_from=2, place_round=on_parts(
        spread_shards=spread_shards, cluster_shards=cluster_shards, chunk=chunk))
    here = loop.recompute(contended_world(), keys, now=NOW)
    assert parted.fell_back == ""
    assert parted.placements == here.placements
    assert parted.replaced == here.replaced > 0


@pytest.mark.parametrize(("spread_shards", "cluster_shards"), [(1, 1), (2, 3)])
def test_a_round_of_patched_subsets_checked_by_the_plans_profiles_is_the_round_checked_here(
    spread_shards: int, cluster_shards: int,
) -> None:
    """The shards are sent each plan's profiles without their pod spec, and no shape: where a
    subset's patch makes its pods differ, the check they run still charges what the coordinator's
    plan charges (a shard that read its pods otherwise would settle another round)."""
    keys = [e.key for e in contended_world(patched=True).spreads()]
    parted = loop.recompute(contended_world(patched=True), keys, now=NOW, parallel_from=2,
                            place_round=on_parts(spread_shards=spread_shards, cluster_shards=cluster_shards))
    here = loop.recompute(contended_world(patched=True), keys, now=NOW)
    assert parted.fell_back == ""
    assert parted.placements == here.placements
    assert parted.replaced == here.replaced > 0
    plain = loop.recompute(contended_world(), keys, now=NOW)
    assert here.placements != plain.placements, "the patch must change the round, or it tests nothing"


def test_the_shards_answers_come_back_without_the_room_they_took_which_their_rows_carry() -> None:
    """What the coordinator unpickles per answer: no `takes` (only the check reads them, on the
    ClusterShards); the rows the check reads still have them."""
    model = contended_world()
    requests = [loop.request_for(model, e, replicas=e.replicas or 0, now=NOW, kept=frozenset(), in_round=True)
                for e in sorted(model.spreads(), key=lambda e: e.key)]
    tokens = shard_specs.tokens()
    shipped = round_parts.pack([shard_specs.SentSpecs(tokens).ship(r) for r in requests])
    answers, *parts = shards.SpreadShard().place_round(shipped, 2, "r1")
    here = loop.answer_all(requests)
    assert answers == here and any(a.takes for a in here)
    assert not any(a.takes for a in answers)
    assert any(row.takes for part in parts for rows in part.values() for row in rows)


class _CheckFails:
    """A round's check on the shards that fails at once (an actor gone), as `RemoteCheck` raises."""

    def first(self) -> round_check.Found:
        raise loop.BatchUnavailable("a cluster shard died")

    def again(self, taken_out: Iterable[str]) -> round_check.Found:
        raise AssertionError("never reached")

    def kept(self) -> round_check.Fold:
        raise AssertionError("never reached")


def test_a_round_whose_check_fails_is_answered_again_here_not_checked_on_answers_without_takes() -> None:
    """The shards answered (without `takes`), then their check failed: checked here on those
    answers, no take would be refused and the contended pools would be promised twice. The round
    is answered here again and checked here: the round the coordinator gives alone."""
    placing = on_parts(spread_shards=2, cluster_shards=2)

    def check_fails(requests: Iterable[loop.PlaceRequest], pools: placement_round.Pools) -> loop.RoundAnswers:
        return loop.RoundAnswers(placing(requests, pools).placements, _CheckFails())

    keys = [e.key for e in contended_world().spreads()]
    fell = loop.recompute(contended_world(), keys, now=NOW, parallel_from=2, place_round=check_fails)
    here = loop.recompute(contended_world(), keys, now=NOW)
    assert fell.fell_back == "the round's check: a cluster shard died"
    assert fell.placements == here.placements and fell.replaced == here.replaced > 0


def test_requests_sent_in_chunks_are_sent_as_they_are_built_and_answered_in_order() -> None:
    """`send_in_chunks` sends each full chunk before the next request is built; each call holds the
    chunk's requests of one shard, and the answers come back in request order."""
    model = contended_world()
    entries = [e for e in (model.spread(k) for k in sorted(e.key for e in model.spreads())) if e is not None]
    built: list[str] = []
    sends: list[tuple[int, list[str], int]] = []

    def building() -> Iterator[loop.PlaceRequest]:
        for entry in entries:
            built.append(entry.key)
            yield loop.request_for(model, entry, replicas=entry.replicas or 0, now=NOW, kept=frozenset())

    def send(shard: int, some: list[loop.PlaceRequest]) -> Sequence[Any]:
        sends.append((shard, [r.key for r in some], len(built)))
        return (loop.answer_all(some),)

    sent = round_parts.send_in_chunks(building(), send=send, shards=2, chunk=5)
    assert sent.count == len(entries) == 12
    assert [seen for _, _, seen in sends if seen < 12] and max(seen for _, _, seen in sends) == 12
    for shard, keys, seen in sends:
        assert all(routing.shard_of(k, shards=2) == shard for k in keys)
        assert seen == min(12, 5 * -(-(built.index(keys[-1]) + 1) // 5))  # sent once its chunk was full
    assert sorted(k for _, keys, _ in sends for k in keys) == built
    assert sent.in_order([refs[0] for _, refs in sent.calls]) == loop.answer_all(
        [loop.request_for(model, e, replicas=e.replicas or 0, now=NOW, kept=frozenset()) for e in entries])
    with pytest.raises(ValueError, match="at least one request"):
        round_parts.send_in_chunks([], send=send, shards=2, chunk=0)


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
            assert routing.shard_of(name, shards=3) == number
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


def test_a_round_whose_shards_fail_after_taking_some_requests_is_built_whole_and_placed_here() -> None:
    """The shards took five requests, then failed: the rest are built all the same and the whole
    round is answered here, the same round (`fell_back` says why)."""
    taken: list[str] = []

    def failing(requests: Iterable[loop.PlaceRequest], pools: placement_round.Pools) -> loop.RoundAnswers:
        for request in requests:
            taken.append(request.key)
            if len(taken) == 5:
                raise loop.BatchUnavailable("a shard died mid-round")
        raise AssertionError("never reached")

    keys = [e.key for e in contended_world().spreads()]
    fell = loop.recompute(contended_world(), keys, now=NOW, parallel_from=2, place_round=failing)
    here = loop.recompute(contended_world(), keys, now=NOW)
    assert len(taken) == 5 and fell.fell_back == "a shard died mid-round"
    assert fell.placements == here.placements and fell.replaced == here.replaced > 0


def test_what_a_round_sends_a_shard_goes_as_the_standard_librarys_pickle() -> None:
    """Requests built on a world (a pydantic spec, a view, frozen inputs) come back equal; anything
    but a packed list is refused."""
    model = contended_world()
    requests = [loop.request_for(model, entry, replicas=entry.replicas or 0, now=NOW, in_round=True)
                for entry in model.spreads()]
    assert round_parts.unpack(round_parts.pack(requests)) == requests
    with pytest.raises(TypeError, match="a packed list"):
        round_parts.unpack(pickle.dumps({"not": "a list"}))
