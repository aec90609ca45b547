"""Reasons as values (`federation/core/reasons.py`): each kind's text is the wording people have
always read, consumers match on kind, and every subset's number has its reason — where capacity,
not the cap, bound a subset, the reason names what its clusters fit."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from federation.api import cluster, spread
from federation.core import fit, placement, spread_status
from federation.core.reasons import Reason, ReasonKind, Room
from tests.support.builders import member, pool, snapshot, spread_spec

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
ONE_CPU = fit.shape_from_pod_spec({"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]})

TEXTS = [
    (Reason(ReasonKind.CAP_REACHED, count=6), "cap 6 reached"),
    (Reason(ReasonKind.CAPACITY_SHORT, count=4, rooms=(Room("dc1", 4, "cpu"),)),
     "capacity: only 4 more pods fit (dc1: 4 fit (cpu))"),
    (Reason(ReasonKind.CAPACITY_SHORT, count=0), "capacity: only 0 more pods fit"),
    (Reason(ReasonKind.CAPACITY_FULL, rooms=(Room("dc1", 4, "cpu"), Room("dc2", 2, "pods"))),
     "capacity: dc1 fits 4 (cpu), dc2 fits 2 (pods)"),
    (Reason(ReasonKind.WAITING, count=3), "3 waiting: no capacity left in any subset"),
    (Reason(ReasonKind.NO_MEMBERS), "no member cluster matches the subset"),
    (Reason(ReasonKind.NOT_IN_SNAPSHOT, "x"), "x: no such cluster in the snapshot"),
    (Reason(ReasonKind.NOT_READY, "gcp-eu"), "gcp-eu: not ready"),
    (Reason(ReasonKind.CORDONED_NO_EXECUTE, "a"),
     "a: cordoned (NoExecute): its replicas move, takes no new replicas"),
    (Reason(ReasonKind.CORDONED_NO_SCHEDULE, "a"), "a: cordoned (NoSchedule): takes no new replicas"),
    (Reason(ReasonKind.CORDONED_NO_SCHEDULE, "a", count=3),
     "a: cordoned (NoSchedule): keeps its 3 running, takes no new replicas"),
    (Reason(ReasonKind.UNSCHEDULABLE, "a"), "a: unschedulable, skipped until the mark expires"),
    (Reason(ReasonKind.FLOOR, floor=2), "floor 2"),
    (Reason(ReasonKind.FLOOR_WAITING, floor=3, count=2), "floor 3: 2 waiting for room"),
    (Reason(ReasonKind.TOPOLOGY_SPREAD, detail="topologySpread region maxSkew 1"),
     "topologySpread region maxSkew 1"),
    (Reason(ReasonKind.PACED, count=1000), "at most 1000 replicas placed one at a time per placement"),
    (Reason(ReasonKind.NO_ROOM), "no subset has room"),
    (Reason(ReasonKind.ROOM_LEFT, count=2),
     "room for 2 more: the replicas placed after it stay where they run (spec.rebalance policy WhenRoom "
     "moves them back)"),
    (Reason(ReasonKind.KEPT_UNVERIFIED, "x", count=2),
     "x: keeps its 2 pods until its agent reports them again (unverified since it was lost, reconnected or "
     "restarted)"),
    (Reason(ReasonKind.KEPT_UNTIL_READY, "x", count=4),
     "x: keeps 4 Ready pods until their replacements are Ready"),
    (Reason(ReasonKind.LEAVING, "x", count=1),
     "x: no longer takes this spread's pods here; keeps 1 of them until their replacements are Ready"),
    (Reason(ReasonKind.LEAVING, "x"), "x: no longer takes this spread's pods here; its last ones go"),
]


@pytest.mark.parametrize(("reason", "text"), TEXTS, ids=[text for _, text in TEXTS])
def test_each_kind_reads_as_people_have_always_read_it(reason: Reason, text: str) -> None:
    assert reason.text == text
    assert reason.said == (text if reason.cluster is None else text.removeprefix(f"{reason.cluster}: "))


def test_every_kind_has_a_text() -> None:
    assert {reason.kind for reason, _ in TEXTS} == set(ReasonKind)


ONPREM_6_THEN_CLOUD = spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 6},
                                  {"name": "cloud", "clusters": ["aws-eu"]}, strategy="Adaptive")
TWO_ONPREM = spread_spec({"name": "onprem", "clusters": ["dc1", "dc2"]},
                         {"name": "cloud", "clusters": ["aws-eu"]}, strategy="Adaptive")


def cpus(name: str, *, cpu: str, used: str = "0") -> dict[str, Any]:
    """A member of one node with `cpu` CPUs, `used` of them requested."""
    return member(name, pool(1, cpu=cpu, used_cpu=used))


@dataclasses.dataclass
class Case:
    id: str
    spec: spread.FederatedSpreadSpec
    snapshot: cluster.CapacitySnapshot
    replicas: int
    current: dict[str, dict[str, int]]
    expected: dict[str, tuple[str, ...]]


CASES = [
    Case("the demo scaled to 9: dc1 full with 4 of cap 6, kept: capacity names what dc1 fits",
         ONPREM_6_THEN_CLOUD, snapshot(cpus("dc1", cpu="4", used="4"), cpus("aws-eu", cpu="64", used="5")),
         9, {"onprem": {"dc1": 4}, "cloud": {"aws-eu": 5}},
         {"onprem": ("capacity: dc1 fits 4 (cpu)",), "cloud": ()}),
    Case("the placement that met the end of the room says so once, not twice",
         ONPREM_6_THEN_CLOUD, snapshot(cpus("dc1", cpu="4"), cpus("aws-eu", cpu="64")), 9, {},
         {"onprem": ("capacity: only 4 more pods fit (dc1: 4 fit (cpu))",), "cloud": ()}),
    Case("the cap decided: cap reached, no capacity reason",
         ONPREM_6_THEN_CLOUD, snapshot(cpus("dc1", cpu="6", used="6"), cpus("aws-eu", cpu="64", used="3")),
         9, {"onprem": {"dc1": 6}, "cloud": {"aws-eu": 3}}, {"onprem": ("cap 6 reached",), "cloud": ()}),
    Case("room came back: stability holds it below, not capacity, and says so with the room",
         ONPREM_6_THEN_CLOUD, snapshot(cpus("dc1", cpu="8", used="4"), cpus("aws-eu", cpu="64", used="5")),
         9, {"onprem": {"dc1": 4}, "cloud": {"aws-eu": 5}},
         {"onprem": ("room for 2 more: the replicas placed after it stay where they run (spec.rebalance "
                     "policy WhenRoom moves them back)",), "cloud": ()}),
    Case("room for one more below a cap of 6: the room, not the cap's distance, is named",
         ONPREM_6_THEN_CLOUD, snapshot(cpus("dc1", cpu="5", used="4"), cpus("aws-eu", cpu="64", used="5")),
         9, {"onprem": {"dc1": 4}, "cloud": {"aws-eu": 5}},
         {"onprem": ("room for 1 more: the replicas placed after it stay where they run (spec.rebalance "
                     "policy WhenRoom moves them back)",), "cloud": ()}),
    Case("a full subset that holds its whole turn was not bound",
         ONPREM_6_THEN_CLOUD, snapshot(cpus("dc1", cpu="4", used="4"), cpus("aws-eu", cpu="64")),
         4, {"onprem": {"dc1": 4}}, {"onprem": (), "cloud": ()}),
    Case("each full cluster of the subset is named with what bounds it",
         TWO_ONPREM, snapshot(cpus("dc1", cpu="2", used="2"), cpus("dc2", cpu="3", used="3"),
                              cpus("aws-eu", cpu="64", used="4")),
         9, {"onprem": {"dc1": 2, "dc2": 3}, "cloud": {"aws-eu": 4}},
         {"onprem": ("capacity: dc1 fits 2 (cpu), dc2 fits 3 (cpu)",), "cloud": ()}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_subset_bound_by_capacity_names_it(case: Case) -> None:
    current = case.current or None
    result = placement.place(case.spec, replicas=case.replicas, snapshot=case.snapshot, shape=ONE_CPU,
                             current=current, running=current)
    assert {s.name: s.reason_texts for s in result.subsets} == case.expected


def test_fixed_simulates_no_capacity_and_names_none() -> None:
    spec = spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 6},
                       {"name": "cloud", "clusters": ["aws-eu"]})
    full = snapshot(cpus("dc1", cpu="4", used="4"), cpus("aws-eu", cpu="64", used="5"))
    result = placement.place(spec, replicas=9, snapshot=full, shape=ONE_CPU,
                             current={"onprem": {"dc1": 4}, "cloud": {"aws-eu": 5}})
    assert [s.reason_texts for s in result.subsets] == [(), ()]


def test_a_cluster_named_like_a_reason_is_still_a_cluster() -> None:
    """Matched by kind, not parsed: a not-ready cluster called "capacity" blocks its subset in the
    status (with text it read as a capacity reason, and the status gave no cause)."""
    spec = spread_spec({"name": "onprem", "clusters": ["capacity"]},
                       {"name": "cloud", "clusters": ["dc8", "dc9"], "maxReplicas": 1}, strategy="Adaptive")
    down = snapshot(member("capacity", pool(1), ready=False), member("dc8", pool(1)), member("dc9", pool(1)))
    result = placement.place(spec, replicas=3, snapshot=down)
    assert result.subsets[0].reasons == (Reason(ReasonKind.NOT_READY, "capacity"),)
    status = spread_status.spread_status(placement=result, spec=spec, generation=1, reports={}, marks=(),
                                         previous=None, now=NOW)
    placed = next(c for c in status.conditions if c.type == "Placed")
    assert "subset onprem has no usable cluster (capacity: not ready)" in placed.message
