"""Pods that predate a spread's assignment are matched to a subset by the node they run on.

A pod of the member Deployment admitted while the agent had no assignment for its spread (or while
the webhook was down: failurePolicy Ignore) carries no subset. As OpenKruise's WorkloadSpread does,
the agent matches it to the first subset in spec order whose required node-selector term its node
satisfies and that has quota room, and counts it there; a pod whose node matches no subset with
room stays unmatched and is reported as such.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping

from agents import bookkeeping, pod_ledger
from federation.api import common
from federation.core import quotas, status
from federation.rpc import assignment
from tests.support.clock import ManualClock

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
SPREAD = "ns/web"
ZONE = "topology.kubernetes.io/zone"
NODES: Mapping[str, Mapping[str, str]] = {
    "node-a": {ZONE: "a"}, "node-a2": {ZONE: "a"}, "node-b": {ZONE: "b"}, "node-c": {ZONE: "c"}}


def zone(name: str) -> dict[str, list[dict[str, object]]]:
    return {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [name]}]}


def table(**quota: int) -> list[quotas.SubsetQuota]:
    return [quotas.SubsetQuota(subset=n, index=i, quota=q) for i, (n, q) in enumerate(quota.items())]


TERMS = {name: common.NodeSelectorTerm.model_validate(zone(name)) for name in ("a", "b")}


# --- the pure decision ----------------------------------------------------------------------------


def test_each_pod_goes_to_the_first_subset_its_node_satisfies_with_room() -> None:
    pods = [("p1", "node-a"), ("p2", "node-a2"), ("p3", "node-b"), ("p4", "node-c"), ("p5", "gone")]
    got = quotas.match_by_node(pods, table(a=1, b=2), terms=TERMS, nodes=NODES, assigned={})
    assert got == {"p1": "a", "p3": "b"}  # p2: "a" is full; p4: no subset's node; p5: unknown node


def test_pods_already_holding_quota_leave_less_room() -> None:
    got = quotas.match_by_node([("p1", "node-a")], table(a=1, b=1), terms=TERMS, nodes=NODES,
                               assigned={"a": 1})
    assert got == {}


def test_a_subset_without_a_required_term_takes_any_node_in_its_turn() -> None:
    terms = {**TERMS, "rest": None}
    pods = [("p1", "node-a"), ("p2", "node-a"), ("p3", "node-c")]
    got = quotas.match_by_node(pods, table(a=1, b=1, rest=1), terms=terms, nodes=NODES, assigned={})
    assert got == {"p1": "a", "p2": "rest"}  # p3: "rest" is full by then


def test_a_term_on_the_node_name_is_matched_by_name() -> None:
    by_name = common.NodeSelectorTerm.model_validate(
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-c"]}]})
    got = quotas.match_by_node([("p1", "node-a"), ("p2", "node-c")], table(x=5),
                               terms={"x": by_name}, nodes=NODES, assigned={})
    assert got == {"p2": "x"}


# --- the agent's bookkeeping --------------------------------------------------------------------


def book_with(**quota: int) -> bookkeeping.Bookkeeping:
    book = bookkeeping.Bookkeeping(clock=ManualClock(T0))
    rules = tuple(assignment.SubsetRule(name=n, index=i, quota=q, required_term=zone(n))
                  for i, (n, q) in enumerate(quota.items()))
    book.set_assignment(assignment.Assignment(
        spread=SPREAD, generation=1, namespace="ns", workload="web", replicas=sum(quota.values()),
        template={}, template_revision="r1", subsets=rules, subset_count=len(rules)))
    return book


def running(name: str, node: str, subset: str | None = None, *, minute: int = 0) -> pod_ledger.PodRecord:
    return pod_ledger.PodRecord(name=name, subset=subset, revision="", phase="Running", ready=True,
                                 node_name=node, created=T0 + datetime.timedelta(minutes=minute))


PREDATING = [running("old-1", "node-a"), running("old-2", "node-a2", minute=1),
             running("old-3", "node-b", minute=2), running("old-4", "node-c", minute=3)]


def test_predating_pods_are_matched_counted_and_hold_quota() -> None:
    book = book_with(a=1, b=1)
    book.observe(SPREAD, PREDATING)  # the pods ran before the spread was assigned here
    assert book.match_by_node(SPREAD, NODES) == {"old-1": "a", "old-3": "b"}  # the oldest first
    counted = status.ClusterPods(running=1, ready=1)
    assert book.counts(SPREAD) == {"a": counted, "b": counted}
    assert book.unassigned(SPREAD) == status.ClusterPods(running=2, ready=2)  # old-2 ("a" full), old-4
    assert book.admit(SPREAD, "new-1", revision="") is None  # both subsets are full here

    book.observe(SPREAD, PREDATING)  # the next round: the cache has not seen the annotations yet
    assert book.match_by_node(SPREAD, NODES) == {}
    assert book.counts(SPREAD) == {"a": counted, "b": counted}
    assert book.note_deleting(SPREAD, "old-1") == "a"  # a matched pod leaves its subset's quota


def test_annotated_pods_are_counted_as_such_and_not_matched_again() -> None:
    book = book_with(a=2, b=1)
    book.observe(SPREAD, [running("p1", "node-b", "a"), running("old", "node-a")])
    assert book.match_by_node(SPREAD, NODES) == {"old": "a"}
    assert book.counts(SPREAD)["a"] == status.ClusterPods(running=2, ready=2)


def test_a_pod_no_controller_made_is_not_matched() -> None:
    # A stray pod carrying the spread's label (made by hand, owned by nothing) is not the
    # workload's: it keeps no subset and takes no quota, as the webhook left it.
    book = book_with(a=1, b=1)
    stray = dataclasses.replace(running("stray", "node-a"), owned=False)
    book.observe(SPREAD, [stray])
    assert book.match_by_node(SPREAD, NODES) == {}
    assert all(pods.running == 0 for pods in book.counts(SPREAD).values())
    assert book.unassigned(SPREAD).running == 1
