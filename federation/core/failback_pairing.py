"""Failback's pairing: which replicas move where, and in which order, toward the from-scratch placement.

Why a module of its own: `failback` says *when* a step may start, finish or stop; this says *what*
a step moves, which is a matching problem with its own invariant. Every move must go up (to an
earlier subset, or an earlier cluster of a `Fill` subset), and after each step what is left must
still be pairable upward, or the steps would stop short of the from-scratch placement. A sweep
finds the largest set of upward pairs (`_matched`); the sorted pairing (the last surplus with the
last shortfall) keeps the rest pairable; where a cap blocks its last pair, another of its pairs
goes first (`_unblocked`), so a subset filled to its cap by one step is emptied by the next
rather than blocking every move after it.

Pure: counts in, moves out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from federation.api import spread

Counts = Mapping[str, Mapping[str, int]]
"""Replicas (or Ready pods) per subset per cluster."""


@dataclasses.dataclass(frozen=True)
class Move:
    """Replicas that go from one pair to a higher-priority one (the simulate JSON's `moves`)."""

    from_subset: str
    from_cluster: str
    to_subset: str
    to_cluster: str
    replicas: int


def upward_moves(spec: spread.FederatedSpreadSpec, *, current: Counts, target: Counts,
                 caps: Mapping[str, int | None], surge: int) -> tuple[list[Move], str | None]:
    """Up to `surge` upward moves, and (when there is none) the first subset a cap kept from taking any.

    Which replicas can move: the most shortfalls (`target` above `current`) that can each be paired
    with a surplus of lower priority (`_matched`). Which move first: the lowest-priority surplus (the
    scale-down order), paired as the sorted pairing pairs it — the last matched surplus with the
    last matched shortfall — so that what is left is still all upward moves and the steps end at
    the from-scratch placement. Where that shortfall's subset is at its cap, another pair of the
    sorted pairing goes first (`_unblocked`): a move out of the full subset makes the room the
    blocked one needs, so one full subset never stops the moves that would empty it."""
    order = _order(spec, current, target)
    shortfalls, surpluses = _matched(order, current=current, target=target)
    room = {name: None if cap is None else cap - sum(current.get(name, {}).values())
            for name, cap in caps.items()}
    moves: list[Move] = []
    capped: str | None = None
    moved = 0
    while moved < surge and shortfalls and surpluses:
        short_at, surplus_at = len(shortfalls) - 1, len(surpluses) - 1
        (to, need), (source, spare) = shortfalls[short_at], surpluses[surplus_at]
        left = room.get(to[0])
        count = min(need, spare, surge - moved, need if left is None else left)
        if count <= 0:  # the cap of `to`'s subset has no room: pair another way, one replica at a time
            capped = capped or to[0]
            found = _unblocked(shortfalls, surpluses, room=room)
            if found is None:
                break
            short_at, surplus_at = found
            (to, need), (source, spare) = shortfalls[short_at], surpluses[surplus_at]
            count = 1
        if moves and (moves[-1].from_subset, moves[-1].from_cluster, moves[-1].to_subset,
                      moves[-1].to_cluster) == (*source, *to):
            moves[-1] = dataclasses.replace(moves[-1], replicas=moves[-1].replicas + count)
        else:
            moves.append(Move(source[0], source[1], to[0], to[1], count))
        moved += count
        left = room.get(to[0])
        if left is not None:
            room[to[0]] = left - count
        _take(shortfalls, short_at, count)
        _take(surpluses, surplus_at, count)
    return moves, None if moves else capped


def _unblocked(shortfalls: Sequence[tuple[tuple[str, str], int]],
               surpluses: Sequence[tuple[tuple[str, str], int]], *,
               room: Mapping[str, int | None]) -> tuple[int, int] | None:
    """The (shortfall, surplus) indexes of the sorted pairing's lowest pair whose shortfall's
    subset has room; None where every pair of it is capped.

    Any pair of the sorted pairing may go first: the rest of that pairing still pairs what is left
    upward. And one always has room where every difference is paired and every cap is above its
    subset's from-scratch count: the earliest subset that receives a replica gives its own surplus
    only to itself, so it holds no more than its from-scratch count, below its cap. Linear in the
    matched pairs (a spread's clusters, not its replicas)."""
    short_at, surplus_at = len(shortfalls) - 1, len(surpluses) - 1
    short_left = shortfalls[short_at][1] if shortfalls else 0
    surplus_left = surpluses[surplus_at][1] if surpluses else 0
    while short_at >= 0 and surplus_at >= 0:
        left = room.get(shortfalls[short_at][0][0])
        if left is None or left > 0:
            return short_at, surplus_at
        count = min(short_left, surplus_left)
        short_left, surplus_left = short_left - count, surplus_left - count
        if short_left == 0:
            short_at -= 1
            short_left = shortfalls[short_at][1] if short_at >= 0 else 0
        if surplus_left == 0:
            surplus_at -= 1
            surplus_left = surpluses[surplus_at][1] if surplus_at >= 0 else 0
    return None


def _take(entries: list[tuple[tuple[str, str], int]], at: int, count: int) -> None:
    """Lower entry `at` by `count`, dropping it at zero."""
    pair, left = entries[at]
    if left == count:
        del entries[at]
    else:
        entries[at] = (pair, left - count)


def _matched(order: Mapping[tuple[str, str], _Rank], *, current: Counts,
             target: Counts) -> tuple[list[tuple[tuple[str, str], int]], list[tuple[tuple[str, str], int]]]:
    """The shortfalls and surpluses of a largest set of upward moves, each list from the highest
    priority down (equal ranks in scale-down order reversed).

    A sweep from the highest priority down: a shortfall waits in a pool, a surplus takes the
    highest-priority shortfalls waiting (only strictly higher ones: a surplus is met before the
    shortfalls of its own rank). Any surplus may take any waiting shortfall, so the sweep pairs as
    many as can be paired."""
    events = sorted(order, key=lambda pair: (
        order[pair].priority, count_at(current, pair) < count_at(target, pair), order[pair].position))
    pool: list[tuple[tuple[str, str], int]] = []  # shortfalls waiting, highest priority first
    shortfalls: dict[tuple[str, str], int] = {}
    surpluses: list[tuple[tuple[str, str], int]] = []
    for pair in events:
        difference = count_at(target, pair) - count_at(current, pair)
        if difference > 0:
            pool.append((pair, difference))
            continue
        spare, taken = -difference, 0
        while spare > taken and pool:
            waiting_pair, waiting = pool[0]
            count = min(spare - taken, waiting)
            shortfalls[waiting_pair] = shortfalls.get(waiting_pair, 0) + count
            taken += count
            if count == waiting:
                pool.pop(0)
            else:
                pool[0] = (waiting_pair, waiting - count)
        if taken:
            surpluses.append((pair, taken))
    ranked = sorted(shortfalls, key=lambda pair: (order[pair].priority, order[pair].position))
    return [(pair, shortfalls[pair]) for pair in ranked], surpluses


@dataclasses.dataclass(frozen=True)
class _Rank:
    priority: tuple[int, int]
    """(subset index, cluster index in a Fill subset else 0): smaller is preferred."""
    position: tuple[int, int]
    """(subset index, cluster index): the scale-down order is the reverse of this."""


def _order(spec: spread.FederatedSpreadSpec, current: Counts, target: Counts) -> dict[tuple[str, str], _Rank]:
    """Every (subset, cluster) pair of a spec subset in either placement, ranked. A subset's
    clusters are in the from-scratch placement's order (the subset's own), then any only held now."""
    ranks: dict[tuple[str, str], _Rank] = {}
    for index, subset in enumerate(spec.subsets):
        clusters = list(dict.fromkeys([*target.get(subset.name, {}), *current.get(subset.name, {})]))
        fill = subset.cluster_spread == "Fill"
        for place, name in enumerate(clusters):
            ranks[(subset.name, name)] = _Rank(priority=(index, place if fill else 0),
                                               position=(index, place))
    return ranks


def count_at(counts: Counts, pair: tuple[str, str]) -> int:
    """The replicas `counts` holds at `pair` (subset, cluster); 0 where it names none."""
    return counts.get(pair[0], {}).get(pair[1], 0)
