"""Bookkeeping slips of issue 15: a pod being deleted counted twice, a re-admitted pod moved on.

Each case is the situation the slip showed up in, through the agent's real `Bookkeeping` and the
status arithmetic the coordinator applies to what it reports.
"""

from __future__ import annotations

import datetime

from agents import bookkeeping, pod_ledger
from federation.core import placement, spread_status, status
from federation.rpc import assignment
from tests.support.builders import member, pool, snapshot, spread_spec
from tests.support.clock import ManualClock

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
SPREAD = "ns/web"


def book_with(quotas: dict[str, int], clock: ManualClock) -> bookkeeping.Bookkeeping:
    book = bookkeeping.Bookkeeping(clock=clock)
    rules = tuple(assignment.SubsetRule(name=n, index=i, quota=q) for i, (n, q) in enumerate(quotas.items()))
    book.set_assignment(assignment.Assignment(
        spread=SPREAD, generation=1, namespace="ns", workload="web", replicas=sum(quotas.values()),
        template={}, template_revision="r1", subsets=rules, subset_count=len(rules)))
    return book


def running(name: str, subset: str = "a", *, deleting: bool = False) -> pod_ledger.PodRecord:
    return pod_ledger.PodRecord(name=name, subset=subset, revision="", phase="Running", ready=True,
                                 node_name="n1", created=T0, deleting=deleting)


def chosen(book: bookkeeping.Bookkeeping, pod: str, *, dry_run: bool = False) -> str | None:
    rule = book.admit(SPREAD, pod, revision="", dry_run=dry_run)
    return rule.name if rule else None


def missing_replicas(counts: dict[str, status.ClusterPods], *, cap: int) -> int:
    """The hub's `missingReplicas` of subset "a" (maxReplicas `cap`, one cluster dc1)."""
    spec = spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": cap})
    result = placement.place(spec, replicas=cap, snapshot=snapshot(member("dc1", pool(1))), now=T0)
    got = spread_status.spread_status(placement=result, spec=spec, generation=1, reports={"dc1": counts},
                                      marks=(), previous=None, now=T0)
    return got.subset_statuses[0].missing_replicas


# --- slip 1: a terminating pod is counted once, as deleting ---------------------------------------


def test_a_terminating_pod_is_counted_once_as_deleting_through_its_grace_period() -> None:
    clock = ManualClock(T0)
    book = book_with({"a": 3}, clock)
    book.observe(SPREAD, [running("p1"), running("p2"), running("p3")])
    assert missing_replicas(book.counts(SPREAD), cap=3) == 0

    book.note_deleting(SPREAD, "p3")  # the webhook saw the DELETE; the cache still lists p3 running
    seen_by_webhook = book.counts(SPREAD)
    book.observe(SPREAD, [running("p1"), running("p2"), running("p3", deleting=True)])  # grace period
    terminating = book.counts(SPREAD)
    clock.now = T0 + pod_ledger.DELETING_TTL + datetime.timedelta(seconds=1)
    book.expire()  # the deletingPods entry expired; the pod is still terminating
    expired = book.counts(SPREAD)

    once = status.ClusterPods(running=2, ready=2, deleting=1)
    assert {"a": once} == seen_by_webhook == terminating == expired
    assert once.active == 2  # not active ...
    for counts in (seen_by_webhook, terminating, expired):
        assert missing_replicas(counts, cap=3) == 1  # ... and missing once: the slot its replacement takes


def test_a_pod_deleted_while_being_created_is_counted_once_as_deleting() -> None:
    book = book_with({"a": 2}, ManualClock(T0))
    book.observe(SPREAD, [])
    assert chosen(book, "p1") == "a"
    book.note_deleting(SPREAD, "p1")
    assert book.counts(SPREAD) == {"a": status.ClusterPods(deleting=1)}
    assert missing_replicas(book.counts(SPREAD), cap=2) == 2


# --- slip 2: a pod admitted again keeps its own creatingPods entry out of the count -----------------


def test_a_retried_admission_of_the_same_pod_keeps_its_subset() -> None:
    book = book_with({"a": 1, "b": 1}, ManualClock(T0))
    assert chosen(book, "p1") == "a"
    assert chosen(book, "p1") == "a"  # the apiserver called the webhook again for the same pod
    creating, _ = book.pending_entries(SPREAD)
    assert set(creating) == {"p1"}
    assert chosen(book, "p2") == "b"  # p1 holds one slot, not two
    assert chosen(book, "p3") is None


def test_a_dry_run_after_the_real_admission_gives_the_same_subset() -> None:
    book = book_with({"a": 1, "b": 1}, ManualClock(T0))
    assert chosen(book, "p1") == "a"
    assert chosen(book, "p1", dry_run=True) == "a"
    assert chosen(book, "p2") == "b"


def test_a_readmitted_pod_stays_in_its_subset_while_that_subset_has_room() -> None:
    book = book_with({"a": 1, "b": 2}, ManualClock(T0))
    assert [chosen(book, p) for p in ("x", "p1")] == ["a", "b"]
    book.note_deleting(SPREAD, "x")  # "a" has room again
    assert chosen(book, "p1") == "b"  # the same pod again: it keeps "b", which still has room
    assert chosen(book, "p2") == "a"


def test_a_readmitted_pod_whose_subset_filled_up_moves_on() -> None:
    book = book_with({"a": 1, "b": 1}, ManualClock(T0))
    assert chosen(book, "p1") == "a"
    book.observe(SPREAD, [running("q1")])  # a pod the cache found in "a" (p1 not seen: still creating)
    assert chosen(book, "p1") == "b"
    creating, _ = book.pending_entries(SPREAD)
    assert {n: e.subset for n, e in creating.items()} == {"p1": "b"}
