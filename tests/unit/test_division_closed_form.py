"""Balance division in closed form equals the one-replica-at-a-time water-filling it replaced.

Why: `division._balance` and Balance removal used to move one replica per heap operation, so a
spread scaled to 2^31-1 replicas (a valid `kubectl scale`) held the coordinator's lock for the
better part of an hour — found by the spread fuzzer (`test_fuzz_spreads.py`). They now compute
the water level by binary search. The reference models below are the old loops, kept verbatim as
the specification; hypothesis checks the two agree on every small input, and the huge cases must
simply finish.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

import hypothesis
from hypothesis import strategies as st

from federation.core import division

NAMES = ("c0", "c1", "c2", "c3", "c4")


def balance_one_at_a_time(count: int, clusters: Sequence[str], held: Mapping[str, int],
                          room: Mapping[str, int | None]) -> dict[str, int]:
    """The replaced implementation: each replica to the lowest total with room, earlier first."""
    added = dict.fromkeys(clusters, 0)
    heap = [(held.get(name, 0), index, name) for index, name in enumerate(clusters)
            if room.get(name) is None or (room.get(name) or 0) > 0]
    heapq.heapify(heap)
    left = count
    while left and heap:
        total, index, name = heapq.heappop(heap)
        added[name] += 1
        left -= 1
        limit = room.get(name)
        if limit is None or added[name] < limit:
            heapq.heappush(heap, (total + 1, index, name))
    return added


def remove_one_at_a_time(count: int, clusters: Sequence[str], held: Mapping[str, int]) -> dict[str, int]:
    """The replaced removal: each replica from the largest cluster, later first."""
    removed = dict.fromkeys(clusters, 0)
    count = min(count, sum(held.get(n, 0) for n in clusters))
    heap = [(-held.get(name, 0), -index, name) for index, name in enumerate(clusters)]
    heapq.heapify(heap)
    for _ in range(max(0, count)):
        negative, order, name = heapq.heappop(heap)
        removed[name] += 1
        heapq.heappush(heap, (negative + 1, order, name))
    return removed


@st.composite
def cases(draw: st.DrawFn) -> tuple[int, list[str], dict[str, int], dict[str, int | None]]:
    clusters = draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=5))
    held = {n: draw(st.integers(0, 12)) for n in clusters}
    room = {n: draw(st.none() | st.integers(-2, 12)) for n in clusters}
    return draw(st.integers(0, 60)), clusters, held, room


@hypothesis.settings(max_examples=500, deadline=None)
@hypothesis.given(case=cases())
def test_balance_matches_the_one_at_a_time_model(
        case: tuple[int, list[str], dict[str, int], dict[str, int | None]]) -> None:
    count, clusters, held, room = case
    got = division.divide(count, mode="Balance", clusters=clusters, held=held, room=room, weights={})
    assert got == balance_one_at_a_time(count, clusters, held, room)


@hypothesis.settings(max_examples=500, deadline=None)
@hypothesis.given(case=cases())
def test_balance_removal_matches_the_one_at_a_time_model(
        case: tuple[int, list[str], dict[str, int], dict[str, int | None]]) -> None:
    count, clusters, held, _ = case
    got = division.remove(count, mode="Balance", clusters=clusters, held=held)
    assert got == remove_one_at_a_time(count, clusters, held)


def test_two_billion_replicas_are_divided_and_removed_in_closed_form() -> None:
    huge = 2**31 - 1
    added = division.divide(huge, mode="Balance", clusters=["a", "b", "c"], held={"a": 5},
                            room={"c": 7}, weights={})
    assert added == {"a": (huge - 7 - 5) // 2 + 1, "b": (huge - 7 + 5) // 2, "c": 7}
    assert sum(added.values()) == huge
    removed = division.remove(huge - 1, mode="Balance", clusters=["a", "b"], held={"a": huge, "b": 3})
    assert removed == {"a": huge - 2, "b": 1}  # 2 and 2 left: balanced
