"""Adaptive reschedule rule (federation.core.reschedule): which pods are stuck, per subset.

Table-driven: each row is a pod and whether the rule calls it stuck at a fixed `now` with a
30-second critical time, measured from the PodScheduled=False/Unschedulable transition.
"""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from federation.core import reschedule

NOW = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)


def ago(seconds: float) -> datetime.datetime:
    return NOW - datetime.timedelta(seconds=seconds)


@dataclasses.dataclass(frozen=True)
class Pod:
    name: str
    subset: str | None = "a"
    phase: str = "Pending"
    deleting: bool = False
    unschedulable_since: datetime.datetime | None = None
    owned: bool = True


@pytest.mark.parametrize(
    ("pod", "stuck"),
    [
        pytest.param(Pod("p", unschedulable_since=ago(31)), True, id="unschedulable 31s > 30s"),
        pytest.param(Pod("p", unschedulable_since=ago(30)), False, id="exactly 30s is not longer"),
        pytest.param(Pod("p", unschedulable_since=ago(5)), False, id="recently unschedulable"),
        pytest.param(Pod("p"), False, id="pending but not unschedulable (binding, pulling)"),
        pytest.param(Pod("p", subset=None, unschedulable_since=ago(300)), False, id="no subset"),
        pytest.param(Pod("p", deleting=True, unschedulable_since=ago(300)), False, id="being deleted"),
        pytest.param(Pod("p", owned=False, unschedulable_since=ago(300)), False,
                     id="no controller owns it: deleted, it would never come back"),
        pytest.param(Pod("p", phase="Running", unschedulable_since=ago(300)), False, id="not pending"),
    ],
)
def test_is_stuck(pod: Pod, stuck: bool) -> None:
    assert reschedule.is_stuck(pod, now=NOW, critical=datetime.timedelta(seconds=30)) is stuck


def test_stuck_subsets_groups_by_subset_in_spec_order_with_earliest_since() -> None:
    pods = [
        Pod("b-2", subset="b", unschedulable_since=ago(40)),
        Pod("a-1", subset="a", unschedulable_since=ago(35)),
        Pod("b-1", subset="b", unschedulable_since=ago(90)),
        Pod("c-1", subset="c", unschedulable_since=ago(10)),  # not yet
        Pod("z-1", subset="zz", unschedulable_since=ago(60)),  # a subset not in the order: last
    ]
    found = reschedule.stuck_subsets(pods, now=NOW, critical_seconds=30, order=["b", "a", "c"])
    assert found == [
        reschedule.Stuck(subset="b", pods=("b-1", "b-2"), since=ago(90)),
        reschedule.Stuck(subset="a", pods=("a-1",), since=ago(35)),
        reschedule.Stuck(subset="zz", pods=("z-1",), since=ago(60)),
    ]


def test_negative_critical_time_is_zero() -> None:
    found = reschedule.stuck_subsets([Pod("p", unschedulable_since=ago(0.5))], now=NOW, critical_seconds=-5)
    assert [s.subset for s in found] == ["a"]


@pytest.mark.parametrize(
    ("blocked", "reported"),
    [
        pytest.param(set(), ["a", "b"], id="nothing blocked: report both"),
        pytest.param({"a"}, ["b"], id="a already marked: report b only"),
        pytest.param({"a", "b"}, [], id="both marked: report nothing"),
    ],
)
def test_to_report_skips_blocked_subsets(blocked: set[str], reported: list[str]) -> None:
    stuck = [reschedule.Stuck("a", ("p",), ago(40)), reschedule.Stuck("b", ("q",), ago(40))]
    assert [s.subset for s in reschedule.to_report(stuck, blocked=blocked)] == reported


@pytest.mark.parametrize(
    ("seconds", "until"),
    [(300, NOW + datetime.timedelta(seconds=300)), (0, NOW), (-1, NOW)],
)
def test_blocked_until(seconds: float, until: datetime.datetime) -> None:
    assert reschedule.blocked_until(NOW, unschedulable_seconds=seconds) == until
