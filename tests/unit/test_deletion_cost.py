"""Deletion cost (DESIGN §4) and the model of the 1.22 ReplicaSet scale-down ranking (§7a gap)."""

from __future__ import annotations

import datetime
import random

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.api import names
from federation.core import deletion_cost as dc

NOW = datetime.datetime(2025, 1, 1, 12, 0, tzinfo=datetime.UTC)
SUBSETS = ("a", "b", "c")
QUOTAS: dict[str, int | None] = {"a": 2, "b": 3, "c": None}
# n = 3: in quota 100*(n-i), beyond it -100*(i+1), no subset -100*(n+1).
IN_A, IN_B, IN_C = 300, 200, 100
OVER_A, OVER_B, OVER_C = -100, -200, -300
ORPHAN = -400


def pod(
    name: str,
    subset: str | None = "a",
    *,
    phase: str = "Running",
    ready: bool = True,
    node: str = "node-1",
    age: int = 60,
    deleting: bool = False,
    restarts: int = 0,
    ready_age: int | None = None,
    current_cost: int | None = None,
) -> dc.PodView:
    """A pod created `age` minutes ago (ready `ready_age` minutes ago, if given)."""
    return dc.PodView(
        name=name,
        subset=subset,
        phase=phase,
        ready=ready,
        node_name=node,
        created=NOW - datetime.timedelta(minutes=age),
        deleting=deleting,
        restarts=restarts,
        ready_since=None if ready_age is None else NOW - datetime.timedelta(minutes=ready_age),
        current_cost=current_cost,
    )


def test_annotation_keys() -> None:
    assert names.DELETION_COST_ANNOTATION == "controller.kubernetes.io/pod-deletion-cost"
    assert names.SUBSET_ANNOTATION == "fedspread.io/subset"


COST_CASES = [
    pytest.param(
        [pod("a1"), pod("a2"), pod("b1", "b"), *(pod(f"c{k}", "c") for k in range(5))],
        QUOTAS,
        {"a1": IN_A, "a2": IN_A, "b1": IN_B} | {f"c{k}": IN_C for k in range(5)},
        id="every-subset-within-quota",
    ),
    pytest.param(
        [pod("a1", age=30), pod("a2", age=20), pod("a3", age=10)],
        QUOTAS,
        {"a1": IN_A, "a2": IN_A, "a3": OVER_A},
        id="one-over-quota-newest-marked",
    ),
    pytest.param(
        [pod(f"b{k}", "b", age=10 * k) for k in range(1, 6)],
        QUOTAS,
        {"b1": OVER_B, "b2": OVER_B, "b3": IN_B, "b4": IN_B, "b5": IN_B},
        id="two-over-quota-of-second-subset",
    ),
    pytest.param(
        [pod("x", None), pod("y", None, deleting=True)],
        QUOTAS,
        {"x": ORPHAN, "y": ORPHAN},
        id="no-subset",
    ),
    pytest.param(
        [pod("gone", "removed-subset")],
        QUOTAS,
        {"gone": ORPHAN},
        id="subset-no-longer-in-spec",
    ),
    pytest.param(
        [pod("a1", deleting=True, age=90), pod("a2"), pod("a3")],
        QUOTAS,
        {"a1": OVER_A, "a2": IN_A, "a3": IN_A},
        id="deleting-pod-not-counted-and-negative",
    ),
    pytest.param(
        [pod("a1", phase="Failed", ready=False), pod("a2"), pod("a3")],
        QUOTAS,
        {"a1": OVER_A, "a2": IN_A, "a3": IN_A},
        id="finished-pod-not-counted-and-negative",
    ),
    pytest.param(
        [pod(f"c{k}", "c") for k in range(10)],
        QUOTAS,
        {f"c{k}": IN_C for k in range(10)},
        id="unbounded-subset-never-over",
    ),
    pytest.param(
        [pod("b1", "b"), pod("b2", "b")],
        {"a": 2, "b": 0, "c": None},
        {"b1": OVER_B, "b2": OVER_B},
        id="zero-quota-all-over",
    ),
    pytest.param(
        [pod("a1"), pod("a2"), pod("a3"), pod("b1", "b")],
        {"b": 0},
        {"a1": IN_A, "a2": IN_A, "a3": IN_A, "b1": OVER_B},
        id="missing-quota-key-is-unbounded",
    ),
    pytest.param([], QUOTAS, {}, id="no-pods"),
]


@pytest.mark.parametrize(("pods", "quotas", "expected"), COST_CASES)
def test_deletion_costs(
    pods: list[dc.PodView], quotas: dict[str, int | None], expected: dict[str, int]
) -> None:
    assert dc.deletion_costs(pods, subsets=SUBSETS, quotas=quotas) == expected


BEYOND_CASES = [
    pytest.param(
        pod("keep", age=10),
        pod("drop", phase="Pending", ready=False, node="", age=90),
        id="unscheduled-before-scheduled",
    ),
    pytest.param(
        pod("keep", age=10),
        pod("drop", phase="Pending", ready=False, age=90),
        id="pending-before-running",
    ),
    pytest.param(
        pod("keep", age=10),
        pod("drop", phase="Unknown", ready=False, age=90),
        id="unknown-before-running",
    ),
    pytest.param(
        pod("keep", age=10),
        pod("drop", ready=False, age=90),
        id="not-ready-before-ready",
    ),
    pytest.param(
        pod("keep", age=90),
        pod("drop", age=10),
        id="newest-before-older",
    ),
    pytest.param(
        pod("keep-z"),
        pod("drop-a"),
        id="name-breaks-ties",
    ),
    pytest.param(
        pod("keep", phase="Pending", ready=False, age=10),
        pod("drop", phase="Pending", ready=False, node="", age=90),
        id="unscheduled-beats-every-later-rank",
    ),
]


@pytest.mark.parametrize(("kept", "dropped"), BEYOND_CASES)
def test_beyond_quota_choice(kept: dc.PodView, dropped: dc.PodView) -> None:
    quotas = {"a": 1}
    for pods in ([kept, dropped], [dropped, kept]):
        costs = dc.deletion_costs(pods, subsets=SUBSETS, quotas=quotas)
        assert costs == {kept.name: IN_A, dropped.name: OVER_A}


PATCH_CASES = [
    pytest.param(pod("p", current_cost=300), {"p": 300}, {}, id="unchanged-not-patched"),
    pytest.param(pod("p"), {"p": 300}, {"p": 300}, id="absent-is-patched"),
    pytest.param(pod("p", current_cost=300), {"p": -100}, {"p": -100}, id="changed-is-patched"),
    pytest.param(pod("p", current_cost=0), {"p": 0}, {}, id="zero-unchanged"),
    pytest.param(pod("p", current_cost=5), {}, {}, id="pod-without-cost-skipped"),
]


@pytest.mark.parametrize(("view", "costs", "expected"), PATCH_CASES)
def test_cost_patches(view: dc.PodView, costs: dict[str, int], expected: dict[str, int]) -> None:
    assert dc.cost_patches([view], costs) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(None, None, id="absent"),
        pytest.param("300", 300, id="positive"),
        pytest.param("-400", -400, id="negative"),
        pytest.param("+7", 7, id="plus-sign"),
        pytest.param("", None, id="empty"),
        pytest.param(" 1", None, id="whitespace"),
        pytest.param("1_000", None, id="underscore"),
        pytest.param("1.5", None, id="fraction"),
        pytest.param(str(2**31), None, id="beyond-int32"),
        pytest.param(str(-(2**31)), -(2**31), id="int32-min"),
    ],
)
def test_parse_cost(text: str | None, expected: int | None) -> None:
    assert dc.parse_cost(text) == expected


RANK_CASES = [
    pytest.param(
        pod("first", node="", phase="Pending", ready=False, current_cost=1000),
        pod("second", phase="Pending", ready=False),
        id="1-unassigned-before-assigned-despite-cost",
    ),
    pytest.param(
        pod("first", phase="Pending", ready=False, current_cost=1000),
        pod("second", phase="Unknown", ready=False),
        id="2-pending-before-unknown",
    ),
    pytest.param(
        pod("first", phase="Unknown", ready=False, current_cost=1000),
        pod("second", phase="Running", ready=False),
        id="2-unknown-before-running",
    ),
    pytest.param(
        pod("first", ready=False, current_cost=1000),
        pod("second"),
        id="3-not-ready-before-ready-despite-cost",
    ),
    pytest.param(
        pod("first", current_cost=-100, ready_age=90, age=90),
        pod("second", current_cost=100, ready_age=1, age=1),
        id="4-lower-cost-before-higher",
    ),
    pytest.param(
        pod("first", ready_age=5, restarts=0, age=90),
        pod("second", ready_age=50, restarts=9, age=60),
        id="6-ready-shorter-before-longer",
    ),
    pytest.param(
        pod("first", ready_age=None, age=90),
        pod("second", ready_age=50, age=60),
        id="6-unknown-ready-time-first",
    ),
    pytest.param(
        pod("first", ready=False, restarts=0, age=5),
        pod("second", ready=False, restarts=0, age=50),
        id="6-skipped-when-not-ready",
    ),
    pytest.param(
        pod("first", restarts=3, ready_age=30, age=90),
        pod("second", restarts=1, ready_age=30, age=1),
        id="7-more-restarts-first",
    ),
    pytest.param(
        pod("first", ready_age=30, age=40),
        pod("second", ready_age=30, age=50),
        id="8-newer-before-older",
    ),
    pytest.param(pod("first"), pod("second"), id="name-breaks-ties"),
]


@pytest.mark.parametrize(("first", "second"), RANK_CASES)
def test_replicaset_rank(first: dc.PodView, second: dc.PodView) -> None:
    for pods in ([first, second], [second, first]):
        assert dc.replicaset_deletion_order(pods, costs={}) == ["first", "second"]


def test_replicaset_order_uses_new_costs_over_current_annotation() -> None:
    pods = [pod("p", current_cost=-500), pod("q", current_cost=500)]
    assert dc.replicaset_deletion_order(pods, costs={"p": 9, "q": -9}) == ["q", "p"]


def test_replicaset_order_skips_inactive_pods() -> None:
    pods = [pod("live"), pod("going", deleting=True), pod("done", phase="Succeeded", ready=False)]
    assert dc.replicaset_deletion_order(pods, costs={}) == ["live"]


def test_scale_down_after_quota_shrink() -> None:
    pods = [
        pod("a-old", "a", age=90, ready_age=80),
        pod("a-new", "a", age=30, ready_age=20),
        *(pod(f"b{k}", "b", age=10 * k, ready_age=10 * k - 5) for k in range(1, 4)),
        pod("c1", "c", age=100, ready_age=99),
        pod("c2", "c", age=100, ready_age=99),
    ]
    before = dc.deletion_costs(pods, subsets=SUBSETS, quotas=QUOTAS)
    assert sorted(set(before.values())) == [IN_C, IN_B, IN_A]
    written = [
        pod(p.name, p.subset, age=0, current_cost=before[p.name]) for p in pods
    ]  # the annotations as the agent wrote them
    assert dc.cost_patches(written, before) == {}

    shrunk = {"a": 1, "b": 1, "c": None}
    after = dc.deletion_costs(pods, subsets=SUBSETS, quotas=shrunk)
    assert after == {
        "a-old": IN_A, "a-new": OVER_A,
        "b1": OVER_B, "b2": OVER_B, "b3": IN_B,
        "c1": IN_C, "c2": IN_C,
    }  # fmt: skip
    assert dc.cost_patches(written, after) == {"a-new": OVER_A, "b1": OVER_B, "b2": OVER_B}

    # Over-quota pods go first (last subset's first), then in-quota ones of the last subset.
    assert dc.scale_down_victims(pods, costs=after, count=3) == ["b1", "b2", "a-new"]
    assert dc.scale_down_victims(pods, costs=after, count=5) == ["b1", "b2", "a-new", "c1", "c2"]
    assert dc.scale_down_victims(pods, costs=after, count=100)[-1] == "a-old"
    assert dc.scale_down_victims(pods, costs=after, count=0) == []


def test_scale_down_rejects_negative_count() -> None:
    with pytest.raises(ValueError, match="count"):
        dc.scale_down_victims([pod("p")], costs={}, count=-1)


def test_duplicate_names_rejected() -> None:
    with pytest.raises(ValueError, match="subset 'a' appears twice"):
        dc.deletion_costs([], subsets=["a", "a"], quotas={})
    with pytest.raises(ValueError, match="pod 'p' appears twice"):
        dc.deletion_costs([pod("p"), pod("p")], subsets=SUBSETS, quotas=QUOTAS)


# --- properties ---------------------------------------------------------------------------------

SUBSET_NAMES = st.lists(st.sampled_from(["s0", "s1", "s2", "s3", "s4"]), min_size=1, max_size=5, unique=True)


@st.composite
def scenarios(draw: st.DrawFn, *, steady: bool) -> tuple[list[str], dict[str, int | None], list[dc.PodView]]:
    """Subsets, quotas and pods; `steady` makes every pod scheduled, Running, ready and active."""
    subsets = draw(SUBSET_NAMES)
    quotas = {
        name: draw(st.none() | st.integers(min_value=0, max_value=6))
        for name in subsets
        if draw(st.booleans()) or steady
    }
    choices = [*subsets, None, "gone"]
    pods = []
    for k in range(draw(st.integers(min_value=0, max_value=25))):
        ready = True if steady else draw(st.booleans())
        pods.append(
            dc.PodView(
                name=f"pod-{k}",
                subset=draw(st.sampled_from(choices)),
                phase="Running"
                if steady
                else draw(st.sampled_from(["Pending", "Unknown", "Running", "Failed"])),
                ready=ready,
                node_name="node" if steady else draw(st.sampled_from(["", "node"])),
                created=NOW - datetime.timedelta(seconds=draw(st.integers(0, 5))),
                deleting=False if steady else draw(st.booleans()),
                restarts=draw(st.integers(0, 3)),
                ready_since=draw(
                    st.none() | st.integers(0, 5).map(lambda s: NOW - datetime.timedelta(seconds=s))
                )
                if ready
                else None,
                current_cost=draw(st.none() | st.sampled_from([-400, -100, 0, 100, 300])),
            )
        )
    return subsets, quotas, pods


@hypothesis.given(scenarios(steady=False), st.randoms(use_true_random=False))
def test_property_costs_allowed_and_deterministic(
    scenario: tuple[list[str], dict[str, int | None], list[dc.PodView]],
    rng: random.Random,
) -> None:
    subsets, quotas, pods = scenario
    n = len(subsets)
    costs = dc.deletion_costs(pods, subsets=subsets, quotas=quotas)
    assert set(costs) == {p.name for p in pods}
    for p in pods:
        if p.subset in subsets:
            i = subsets.index(p.subset)
            assert costs[p.name] in {100 * (n - i), -100 * (i + 1)}
        else:
            assert costs[p.name] == -100 * (n + 1)
    for i, name in enumerate(subsets):
        members = [p for p in pods if p.subset == name and p.active]
        quota = quotas.get(name)
        limit = len(members) if quota is None else min(quota, len(members))
        assert sum(costs[p.name] == 100 * (n - i) for p in members) == limit
    shuffled = list(pods)
    rng.shuffle(shuffled)
    assert dc.deletion_costs(shuffled, subsets=subsets, quotas=quotas) == costs
    assert set(dc.cost_patches(pods, costs)) == {p.name for p in pods if p.current_cost != costs[p.name]}


@hypothesis.given(scenarios(steady=True))
def test_property_steady_scale_down_respects_subset_order_and_quota(
    scenario: tuple[list[str], dict[str, int | None], list[dc.PodView]],
) -> None:
    subsets, quotas, pods = scenario
    n = len(subsets)
    costs = dc.deletion_costs(pods, subsets=subsets, quotas=quotas)
    order = dc.replicaset_deletion_order(pods, costs=costs)
    assert sorted(order) == sorted(p.name for p in pods)
    by_name = {p.name: p for p in pods}

    def in_quota_index(name: str) -> int | None:
        subset = by_name[name].subset
        if subset not in subsets:
            return None
        i = subsets.index(subset)
        return i if costs[name] == 100 * (n - i) else None

    in_quota = [name for name in order if in_quota_index(name) is not None]
    over_quota = [name for name in order if in_quota_index(name) is None]
    # No in-quota pod is deleted before an over-quota (or orphan) pod.
    assert order == over_quota + in_quota
    # Among in-quota pods, a later subset's are deleted before an earlier subset's.
    indexes = [subsets.index(str(by_name[name].subset)) for name in in_quota]
    assert indexes == sorted(indexes, reverse=True)
    for count in range(len(order) + 1):
        assert dc.scale_down_victims(pods, costs=costs, count=count) == order[:count]
