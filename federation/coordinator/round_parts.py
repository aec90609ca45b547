"""A round on the Ray shards: its requests sent a chunk at a time as they are built
(`send_in_chunks`), and its check split over the shards: each SpreadShard cuts its answers into the
rows of each ClusterShard's clusters, and each ClusterShard checks its clusters.

Why: after the first answers, the largest part of a full round the coordinator did alone was the
check of every node pool (bench/README.md, "Ray or in-process"). Each cluster's check reads only
the spreads that charge or take room there (`core.round_check`), so the ClusterShards that own the
clusters run it: a SpreadShard returns, beside its answers, one part of rows per ClusterShard
(`cut`), the rows go from actor to actor through Ray's object store, and the coordinator only
unions what the checks find and takes back the folds of the kept spreads' charges (`RemoteCheck`,
a `placement_round.Checker`). The answer is the one the coordinator's own check gives: the test
`test_a_check_split_over_parts_of_the_clusters_settles_the_same` holds it for any partition.

No Ray import: the calls are made on the actor handles the backend gives, and waited for with its
deadline (`Wait`); a check that fails or misses it raises `loop.BatchUnavailable`, and the round
is answered and checked in the coordinator instead.

The answers go back to the coordinator without the room each took (`Placement.takes`,
`returned`): only the check reads it, and the rows carry it to the ClusterShards. It was most of
what the coordinator unpickled per answer; a coordinator that must check the round itself
after all answers it again (`loop.RoundAnswers`).

What a round sends a SpreadShard — its requests, and later its message inputs — goes as bytes the
standard library pickled (`pack`, `unpack`): Ray pickles arguments with cloudpickle, whose hook
runs in Python for every object, where the standard pickler is C throughout; everything in them is
an importable class, which is all it needs. The round's time did not show the difference on
2 cores (docs/decisions.md, "the shards keep their specs between rounds").
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, TypeVar

from federation.coordinator.model import loop, routing
from federation.core import fit, placement, placement_round, round_check

Item = TypeVar("Item")

Rows = dict[str, list[round_check.Row]]
"""Per cluster, rows in key order."""

Wait = Callable[[list[Any], str], list[Any]]
"""The backend's wait for remote calls: their results, within its deadline (`BatchUnavailable`)."""

Send = Callable[[int, list[loop.PlaceRequest]], Sequence[Any]]
"""The backend's call of one SpreadShard's `place_round` on some requests: the refs of its answers,
then of its rows for each ClusterShard."""


@dataclasses.dataclass(frozen=True)
class Sent:
    """A round's requests as sent: how many, and each call with the indices of its requests."""

    count: int
    calls: list[tuple[list[int], Sequence[Any]]]

    def answers(self) -> list[Any]:
        """The ref of each call's answers, in call order."""
        return [refs[0] for _, refs in self.calls]

    def parts(self, count: int) -> list[list[Any]]:
        """For each of `count` ClusterShards, the refs of the rows every call cut for it."""
        return [[refs[1 + j] for _, refs in self.calls] for j in range(count)]

    def in_order(self, found: Sequence[Sequence[Item]]) -> list[Item]:
        """The calls' answers (`found`, in call order; or anything given per request) put back in
        request order."""
        return answers_in_order(self.count, [(indices, answers) for (indices, _), answers
                                             in zip(self.calls, found, strict=True)])


def send_in_chunks(requests: Iterable[loop.PlaceRequest], *, send: Send, shards: int, chunk: int) -> Sent:
    """Send the requests as they come, `chunk` at a time, each chunk's requests to the shards owning
    their spreads (`routing.shard_of`): the shards place the first chunks while the coordinator
    still builds the next, instead of waiting for the last request to be built."""
    if chunk < 1:
        raise ValueError(f"a chunk holds at least one request, got {chunk}")
    calls: list[tuple[list[int], Sequence[Any]]] = []
    pending: list[loop.PlaceRequest] = []
    count = 0

    def flush() -> None:
        start = count - len(pending)
        for shard, offsets in enumerate(routing.group_by_shard([r.key for r in pending], shards=shards)):
            if offsets:
                calls.append(([start + o for o in offsets], send(shard, [pending[o] for o in offsets])))
        pending.clear()

    for request in requests:
        pending.append(request)
        count += 1
        if len(pending) >= chunk:
            flush()
    if pending:
        flush()
    return Sent(count=count, calls=calls)


def pack(items: Sequence[Any]) -> bytes:
    """`items` as the standard library pickles them (the module docstring says why)."""
    return pickle.dumps(list(items), protocol=pickle.HIGHEST_PROTOCOL)


def unpack(payload: bytes) -> list[Any]:
    """What `pack` packed (from the coordinator itself: as trusted as Ray's own pickles)."""
    found = pickle.loads(payload)
    if not isinstance(found, list):
        raise TypeError(f"a packed list was expected, not {type(found).__name__}")
    return found


class RoundGone(Exception):
    """A ClusterShard asked to go on with a round it does not hold (it was restarted meanwhile)."""


def cut(requests: Sequence[loop.PlaceRequest], answers: Sequence[placement.Placement], *,
        parts: int) -> list[Rows]:
    """The rows of each answer, per part of the clusters (`routing.shard_of` among `parts`): each
    spread's pods per subset are the profiles the coordinator's plan gave (`inputs.profiles`, or
    `profiles_of` its shape where a request has none), one object per distinct profile so that a
    part pickles each once."""
    found: list[Rows] = [{} for _ in range(parts)]
    interned: dict[tuple[object, object], fit.Profile] = {}
    for request, result in zip(requests, answers, strict=True):
        given = request.inputs.profiles
        if given is None:
            shape = request.inputs.shape if request.inputs.shape is not None else fit.empty_shape()
            given = placement_round.profiles_of(request.spec, shape)
        profiles = tuple(interned.setdefault((p.requests, p.admission), p) for p in given)
        charges = placement_round.charges_of(result, running=request.inputs.running, profiles=profiles)
        for name, row in round_check.rows_of(request.key, result, charges=charges, profiles=profiles).items():
            found[routing.shard_of(name, shards=parts)].setdefault(name, []).append(row)
    return found


def returned(answers: Sequence[placement.Placement]) -> list[placement.Placement]:
    """`answers` as the coordinator is sent them once `cut` has made their rows: without `takes`
    (not part of an answer: equal placements may differ there)."""
    return [dataclasses.replace(a, takes=()) if a.takes else a for a in answers]


class HeldCheck:
    """The check a ClusterShard holds for the round in flight (one at a time: a new round's first
    check replaces it)."""

    def __init__(self) -> None:
        self._round = ""
        self._check: round_check.ClusterCheck | None = None

    def first(self, round_id: str, pools: round_check.Pools, parts: Sequence[Rows]) -> round_check.Found:
        self._round, self._check = round_id, round_check.ClusterCheck(pools, round_check.merged(parts))
        return self._check.first()

    def again(self, round_id: str, taken_out: Collection[str]) -> round_check.Found:
        return self._held(round_id).again(taken_out)

    def folded(self, round_id: str) -> dict[str, tuple[round_check.Node, ...]]:
        """The kept spreads' charges folded on its clusters; the round is over for this shard."""
        found = self._held(round_id).folded()
        self._round, self._check = "", None
        return found

    def _held(self, round_id: str) -> round_check.ClusterCheck:
        if self._check is None or self._round != round_id:
            raise RoundGone(f"round {round_id} is not held here (the shard was restarted)")
        return self._check


class RemoteCheck:
    """A round's check on the ClusterShards (`placement_round.Checker`): `parts[j]` are the refs of
    the rows every SpreadShard cut for ClusterShard `j`, `pools` the round's snapshot.

    The first check is asked for at once: each ClusterShard runs it as soon as its rows are cut,
    while the coordinator still reads the first answers; `first()` only waits for it."""

    def __init__(self, *, actors: Sequence[Any], parts: Sequence[Sequence[Any]], pools: round_check.Pools,
                 round_id: str, wait: Wait) -> None:
        self._actors, self._pools = actors, pools
        self._round, self._wait = round_id, wait
        mine: list[dict[str, tuple[fit.Pool, ...]]] = [{} for _ in actors]
        for name in pools:  # each shard gets the snapshot of its own clusters
            mine[routing.shard_of(name, shards=len(actors))][name] = tuple(pools[name])
        self._first = [actor.check_first.remote(round_id, mine[j], *parts[j])
                       for j, actor in enumerate(actors)]

    def first(self) -> round_check.Found:
        return _union(self._wait(self._first, "the round's check"))

    def again(self, taken_out: Collection[str]) -> round_check.Found:
        out = sorted(taken_out)
        return _union(self._wait([actor.check_again.remote(self._round, out) for actor in self._actors],
                                 "the round's check, again"))

    def kept(self) -> round_check.Fold:
        states: dict[str, tuple[round_check.Node, ...]] = {}
        for found in self._wait([actor.check_folded.remote(self._round) for actor in self._actors],
                                "the round's folded charges"):
            states.update(found)
        return round_check.Fold.seeded(self._pools, states)


def _union(found: Sequence[round_check.Found]) -> round_check.Found:
    return (frozenset().union(*(f[0] for f in found)), frozenset().union(*(f[1] for f in found)))


def answers_in_order(count: int, calls: Sequence[tuple[Sequence[int], Sequence[Item]]]) -> list[Item]:
    """The answers of every shard's call put back in request order (`count` requests)."""
    results: list[Item | None] = [None] * count
    for indices, answers in calls:
        for index, result in zip(indices, answers, strict=True):
            results[index] = result
    missing = [i for i, r in enumerate(results) if r is None]
    if missing:
        raise RuntimeError(f"shards answered no placement for requests {missing}")
    return [r for r in results if r is not None]
