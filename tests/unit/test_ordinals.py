"""StatefulSet ordinal ranges (issue 24 §1): pod names, ranges, scale-down losses, misplaced pods."""

from __future__ import annotations

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.core import ordinals
from federation.core.ordinals import OrdinalRange

# --- ordinal_of / pod_name -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "statefulset", "expected"),
    [
        pytest.param("web-0", "web", 0, id="zero"),
        pytest.param("web-12", "web", 12, id="two-digits"),
        pytest.param("web-2147483646", "web", ordinals.MAX_ORDINAL, id="highest-int32-ordinal"),
        pytest.param("web-1-0", "web-1", 0, id="statefulset-name-ending-in-digits"),
        pytest.param("web-1-0", "web", None, id="pod-of-another-statefulset-with-longer-name"),
        pytest.param("web-01", "web", None, id="leading-zero"),
        pytest.param("web-00", "web", None, id="zero-with-leading-zero"),
        pytest.param("web-", "web", None, id="no-ordinal"),
        pytest.param("web", "web", None, id="statefulset-name-alone"),
        pytest.param("web--1", "web", None, id="negative"),
        pytest.param("web-+1", "web", None, id="plus-sign"),
        pytest.param("web-1a", "web", None, id="trailing-letter"),
        pytest.param("web-1\n", "web", None, id="trailing-newline"),
        pytest.param("web- 1", "web", None, id="space"),
        pytest.param("web-\u0661", "web", None, id="non-ascii-digit"),
        pytest.param("web-2147483647", "web", None, id="beyond-int32-replicas"),
        pytest.param("web-" + "9" * 5000, "web", None, id="huge-number"),
        pytest.param("xweb-1", "web", None, id="other-prefix"),
        pytest.param("web-6d4cf56db6-x7k2p", "web", None, id="deployment-pod"),
    ],
)
def test_ordinal_of(name: str, statefulset: str, expected: int | None) -> None:
    assert ordinals.ordinal_of(name, statefulset=statefulset) == expected


def test_empty_statefulset_name_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        ordinals.ordinal_of("-1", statefulset="")
    with pytest.raises(ValueError, match="must not be empty"):
        ordinals.pod_name("", 1)


def test_pod_name() -> None:
    assert ordinals.pod_name("web", 0) == "web-0"
    assert ordinals.pod_name("db-2", 10) == "db-2-10"
    with pytest.raises(ValueError, match=">= 0"):
        ordinals.pod_name("web", -1)


STATEFULSET_NAMES = st.text(alphabet="ab01-", min_size=1, max_size=8)


@hypothesis.given(statefulset=STATEFULSET_NAMES, ordinal=st.integers(0, ordinals.MAX_ORDINAL))
def test_ordinal_of_round_trips_names_it_made(statefulset: str, ordinal: int) -> None:
    name = ordinals.pod_name(statefulset, ordinal)
    assert ordinals.ordinal_of(name, statefulset=statefulset) == ordinal


@hypothesis.given(
    statefulset=STATEFULSET_NAMES,
    prefixed=st.booleans(),
    rest=st.text(alphabet="ab0129-", max_size=12),
)
def test_ordinal_of_accepts_only_names_the_controller_makes(
    statefulset: str, prefixed: bool, rest: str
) -> None:
    name = f"{statefulset}-{rest}" if prefixed else rest
    ordinal = ordinals.ordinal_of(name, statefulset=statefulset)
    if ordinal is not None:
        assert ordinals.pod_name(statefulset, ordinal) == name


# --- ordinal_ranges ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quotas", "expected"),
    [
        pytest.param([], (), id="no-subsets"),
        pytest.param([("a", 2), ("b", 3)], (OrdinalRange("a", 0, 2), OrdinalRange("b", 2, 5)), id="two"),
        pytest.param(
            [("a", 0), ("b", 2), ("c", 0), ("d", 1)],
            (
                OrdinalRange("a", 0, 0),
                OrdinalRange("b", 0, 2),
                OrdinalRange("c", 2, 2),
                OrdinalRange("d", 2, 3),
            ),
            id="zero-quotas-are-empty",
        ),
        pytest.param(
            [("z", 1), ("a", 1)],
            (OrdinalRange("z", 0, 1), OrdinalRange("a", 1, 2)),
            id="order-given-not-names",
        ),
    ],
)
def test_ordinal_ranges(quotas: list[tuple[str, int]], expected: tuple[OrdinalRange, ...]) -> None:
    assert ordinals.ordinal_ranges(quotas) == expected


@pytest.mark.parametrize(
    ("quotas", "message"),
    [
        pytest.param([("a", -1)], "quota must be >= 0", id="negative"),
        pytest.param([("a", 1), ("a", 2)], "appears twice", id="repeated-subset"),
        pytest.param([("a", 2**31), ("b", 0)], "more replicas than a StatefulSet", id="beyond-int32"),
    ],
)
def test_ordinal_ranges_refuses(quotas: list[tuple[str, int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ordinals.ordinal_ranges(quotas)


def test_ordinal_range_shape() -> None:
    window = OrdinalRange("a", 2, 5)
    assert window.size == 3
    assert [o for o in range(7) if window.holds(o)] == [2, 3, 4]
    assert OrdinalRange("a", 4, 4).size == 0
    with pytest.raises(ValueError, match="start <= stop"):
        OrdinalRange("a", 3, 2)
    with pytest.raises(ValueError, match="0 <= start"):
        OrdinalRange("a", -1, 2)


SUBSET_NAMES = st.sampled_from(("a", "b", "c", "d", "e", "f"))
QUOTAS = st.lists(st.tuples(SUBSET_NAMES, st.integers(0, 6)), max_size=6, unique_by=lambda row: row[0])


@hypothesis.given(quotas=QUOTAS)
def test_ranges_tile_the_ordinals_in_subset_order(quotas: list[tuple[str, int]]) -> None:
    ranges = ordinals.ordinal_ranges(quotas)
    assert [(r.subset, r.size) for r in ranges] == quotas
    edges = [0, *(r.stop for r in ranges)]
    assert [r.start for r in ranges] == edges[:-1]  # each range starts where the one before stopped
    assert edges[-1] == sum(q for _, q in quotas)


@hypothesis.given(quotas=QUOTAS)
def test_every_ordinal_below_the_sum_maps_to_exactly_one_subset(quotas: list[tuple[str, int]]) -> None:
    ranges = ordinals.ordinal_ranges(quotas)
    total = sum(q for _, q in quotas)
    for ordinal in range(total):
        holders = [r.subset for r in ranges if r.holds(ordinal)]
        assert len(holders) == 1
        assert ordinals.subset_for_ordinal(ordinal, ranges) == holders[0]
    for ordinal in range(total, total + 3):
        assert ordinals.subset_for_ordinal(ordinal, ranges) is None


# --- subset_for_ordinal ------------------------------------------------------------------------------

RANGES = ordinals.ordinal_ranges([("a", 2), ("b", 0), ("c", 3)])


@pytest.mark.parametrize(
    ("ordinal", "expected"),
    [(0, "a"), (1, "a"), (2, "c"), (4, "c"), (5, None), (ordinals.MAX_ORDINAL, None)],
)
def test_subset_for_ordinal(ordinal: int, expected: str | None) -> None:
    assert ordinals.subset_for_ordinal(ordinal, RANGES) == expected


def test_subset_for_ordinal_refuses_a_negative_ordinal() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        ordinals.subset_for_ordinal(-1, RANGES)


def test_no_ranges_admit_no_pod() -> None:
    assert ordinals.subset_for_ordinal(0, ()) is None


# --- scale_down_losses -------------------------------------------------------------------------------

LOSS_RANGES = ordinals.ordinal_ranges([("a", 2), ("b", 3), ("c", 1)])  # a 0-1, b 2-4, c 5


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        pytest.param(6, 6, {"a": 0, "b": 0, "c": 0}, id="no-change"),
        pytest.param(6, 5, {"a": 0, "b": 0, "c": 1}, id="last-subset-first"),
        pytest.param(6, 4, {"a": 0, "b": 1, "c": 1}, id="then-the-one-before"),
        pytest.param(6, 2, {"a": 0, "b": 3, "c": 1}, id="first-subset-untouched-until-the-rest-are-gone"),
        pytest.param(6, 1, {"a": 1, "b": 3, "c": 1}, id="into-the-first-subset"),
        pytest.param(6, 0, {"a": 2, "b": 3, "c": 1}, id="to-zero"),
        pytest.param(4, 2, {"a": 0, "b": 2, "c": 0}, id="from-below-the-sum"),
        pytest.param(8, 5, {"a": 0, "b": 0, "c": 1}, id="pods-beyond-every-range-not-counted"),
        pytest.param(9, 7, {"a": 0, "b": 0, "c": 0}, id="only-pods-beyond-every-range"),
        pytest.param(3, 5, {"a": 0, "b": 0, "c": 0}, id="scale-up-removes-nothing"),
    ],
)
def test_scale_down_losses(before: int, after: int, expected: dict[str, int]) -> None:
    losses = ordinals.scale_down_losses(LOSS_RANGES, before=before, after=after)
    assert losses == expected
    assert list(losses) == ["a", "b", "c"]


def test_scale_down_losses_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        ordinals.scale_down_losses(LOSS_RANGES, before=-1, after=0)
    with pytest.raises(ValueError, match=">= 0"):
        ordinals.scale_down_losses(LOSS_RANGES, before=3, after=-1)


@hypothesis.given(quotas=QUOTAS, before=st.integers(0, 40), after=st.integers(0, 40))
def test_scale_down_removes_the_latest_subsets_first(
    quotas: list[tuple[str, int]], before: int, after: int
) -> None:
    ranges = ordinals.ordinal_ranges(quotas)
    total = sum(q for _, q in quotas)
    losses = ordinals.scale_down_losses(ranges, before=before, after=after)
    # what each subset loses is the pods of its ordinals the StatefulSet controller removes
    removed = [ordinals.subset_for_ordinal(o, ranges) for o in range(after, before)]
    assert losses == {r.subset: removed.count(r.subset) for r in ranges}
    assert sum(losses.values()) == max(0, min(before, total) - min(after, total))
    # losses are a suffix of the subset order: a subset loses pods only when every later subset
    # lost all the pods it had
    held = {r.subset: max(0, min(r.stop, before) - r.start) for r in ranges}
    for i, r in enumerate(ranges):
        if losses[r.subset]:
            assert all(losses[later.subset] == held[later.subset] for later in ranges[i + 1:])


@hypothesis.given(quotas=QUOTAS, before=st.integers(0, 40), after=st.integers(0, 40))
def test_scaling_down_one_at_a_time_never_returns_to_a_later_subset(
    quotas: list[tuple[str, int]], before: int, after: int
) -> None:
    ranges = ordinals.ordinal_ranges(quotas)
    position = {r.subset: i for i, r in enumerate(ranges)}
    order = []
    for count in range(before, after, -1):
        step = ordinals.scale_down_losses(ranges, before=count, after=count - 1)
        order += [position[s] for s, lost in step.items() if lost]
    assert order == sorted(order, reverse=True)


# --- misplaced ---------------------------------------------------------------------------------------


def test_quota_change_misplaces_the_pods_between_the_old_and_new_boundary() -> None:
    old = ordinals.ordinal_ranges([("a", 2), ("b", 3)])
    pods = {o: ordinals.subset_for_ordinal(o, old) for o in range(5)}
    assert pods == {0: "a", 1: "a", 2: "b", 3: "b", 4: "b"}
    new = ordinals.ordinal_ranges([("a", 4), ("b", 1)])
    assert ordinals.misplaced(pods, new) == {2: ("b", "a"), 3: ("b", "a")}
    assert ordinals.misplaced(pods, old) == {}


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param({0: "a", 1: "a", 2: "b"}, {}, id="all-in-place"),
        pytest.param({1: None, 0: "a"}, {1: (None, "a")}, id="pod-of-no-subset-whose-ordinal-has-one"),
        pytest.param({3: "b", 4: None}, {3: ("b", None)}, id="beyond-every-range"),
        pytest.param({2: "gone"}, {2: ("gone", "b")}, id="subset-no-longer-in-spec"),
        pytest.param({2: "a", 0: "b"}, {0: ("b", "a"), 2: ("a", "b")}, id="swapped-ordered-by-ordinal"),
        pytest.param({}, {}, id="no-pods"),
    ],
)
def test_misplaced(pods: dict[int, str | None], expected: dict[int, tuple[str | None, str | None]]) -> None:
    ranges = ordinals.ordinal_ranges([("a", 2), ("b", 1)])
    found = ordinals.misplaced(pods, ranges)
    assert found == expected
    assert list(found) == sorted(found)


def test_misplaced_refuses_negative_numbers() -> None:
    ranges = ordinals.ordinal_ranges([("a", 1)])
    with pytest.raises(ValueError, match="ordinal must be >= 0"):
        ordinals.misplaced({-1: "a"}, ranges)
    with pytest.raises(ValueError, match="ordinal must be >= 0"):
        ordinals.misplaced({-1: "a"}, ranges, replicas=0)
    with pytest.raises(ValueError, match="replicas must be >= 0"):
        ordinals.misplaced({0: "a"}, ranges, replicas=-1)


def test_pods_a_scale_down_is_removing_are_not_misplaced() -> None:
    # quotas went from a=2, b=3 to a=2, b=1: the agent scales the StatefulSet from 5 to 3, and
    # until its controller has removed web-4 and web-3 they are condemned, not misplaced
    pods = {0: "a", 1: "a", 2: "b", 3: "b", 4: "b"}
    ranges = ordinals.ordinal_ranges([("a", 2), ("b", 1)])
    assert ordinals.misplaced(pods, ranges) == {3: ("b", None), 4: ("b", None)}
    assert ordinals.misplaced(pods, ranges, replicas=3) == {}
    assert ordinals.misplaced(pods, ranges, replicas=4) == {3: ("b", None)}
    # a pod below spec.replicas but beyond every range is still reported
    assert ordinals.misplaced(pods, ordinals.ordinal_ranges([("a", 2)]), replicas=3) == {2: ("b", None)}


@hypothesis.given(old=QUOTAS, new_quotas=st.lists(st.integers(0, 6), min_size=6, max_size=6))
def test_misplaced_pods_are_those_whose_subset_the_quota_change_moved(
    old: list[tuple[str, int]], new_quotas: list[int]
) -> None:
    before = ordinals.ordinal_ranges(old)
    after = ordinals.ordinal_ranges([(name, q) for (name, _), q in zip(old, new_quotas, strict=False)])
    pods = {o: ordinals.subset_for_ordinal(o, before) for o in range(sum(q for _, q in old))}
    found = ordinals.misplaced(pods, after)
    moved = {o for o in pods if ordinals.subset_for_ordinal(o, after) != pods[o]}
    assert set(found) == moved
    assert all(found[o] == (pods[o], ordinals.subset_for_ordinal(o, after)) for o in found)
    assert ordinals.misplaced(pods, before) == {}


# --- messages ----------------------------------------------------------------------------------------


def test_misplaced_message_names_pods_and_subsets() -> None:
    found = {3: ("b", "a"), 1: (None, "a"), 7: ("b", None)}
    assert ordinals.misplaced_message(found, statefulset="web") == (
        "3 pods of StatefulSet web are not in the subset their ordinal maps to: "
        "web-1 (no subset, ordinal maps to subset a), web-3 (subset b, ordinal maps to subset a), "
        "web-7 (subset b, ordinal maps to no subset); "
        "left in place (a StatefulSet pod keeps its identity and volumes), each moves when next recreated"
    )


def test_misplaced_message_of_one_pod() -> None:
    message = ordinals.misplaced_message({0: ("b", "a")}, statefulset="db")
    assert message.startswith("1 pod of StatefulSet db is not in the subset")
    assert "db-0 (subset b, ordinal maps to subset a);" in message


def test_misplaced_message_is_bounded() -> None:
    found: dict[int, tuple[str | None, str | None]] = {o: ("b", "a") for o in range(25)}
    message = ordinals.misplaced_message(found, statefulset="web", limit=3)
    assert message.startswith("25 pods of StatefulSet web are not")
    assert "web-0 (subset b, ordinal maps to subset a), web-1 (" in message
    assert "web-2 (subset b, ordinal maps to subset a) and 22 more;" in message
    assert "web-3 " not in message


def test_misplaced_message_of_nothing_is_empty() -> None:
    assert ordinals.misplaced_message({}, statefulset="web") == ""
    with pytest.raises(ValueError, match="limit"):
        ordinals.misplaced_message({0: ("a", "b")}, statefulset="web", limit=0)


def test_ranges_text() -> None:
    ranges = ordinals.ordinal_ranges([("a", 2), ("b", 0), ("c", 1), ("d", 3)])
    assert ordinals.ranges_text(ranges) == "a: 0-1, b: none, c: 2, d: 3-5"
    assert ordinals.ranges_text(()) == ""
