"""The agent's local quota accounting: creatingPods/deletingPods settle and expire as Kruise's do."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime

import pytest

from agents import bookkeeping, pod_ledger
from federation.rpc import assignment
from tests.support.clock import ManualClock

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def book_with(
    quotas: dict[str, int], clock: ManualClock, *, strategy: str = "Fixed"
) -> bookkeeping.Bookkeeping:
    book = bookkeeping.Bookkeeping(clock=clock)
    rules = tuple(assignment.SubsetRule(name=n, index=i, quota=q) for i, (n, q) in enumerate(quotas.items()))
    book.set_assignment(assignment.Assignment(
        spread="ns/web", generation=1, namespace="ns", workload="web", replicas=sum(quotas.values()),
        template={}, template_revision="r1", subsets=rules, subset_count=len(rules),
        strategy=assignment.Strategy(type=strategy)))
    return book


def chosen(book: bookkeeping.Bookkeeping, pod: str, revision: str = "") -> str | None:
    rule = book.admit("ns/web", pod, revision=revision)
    return rule.name if rule else None


def test_subsets_fill_in_order_then_none() -> None:
    book = book_with({"a": 2, "b": 1}, ManualClock(T0))
    assert [chosen(book, f"p{i}") for i in range(4)] == ["a", "a", "b", None]


def test_a_pod_deleted_before_the_cache_saw_it_frees_its_quota() -> None:
    book = book_with({"a": 2, "b": 1}, ManualClock(T0))
    assert [chosen(book, p) for p in ("p1", "p2", "p3")] == ["a", "a", "b"]
    assert book.note_deleting("ns/web", "p3") == "b"
    assert chosen(book, "p4") == "b"


def test_creating_entries_settle_when_observed_and_expire_after_30_seconds() -> None:
    clock = ManualClock(T0)
    book = book_with({"a": 1}, clock)
    assert chosen(book, "p1") == "a"
    assert chosen(book, "p2") is None
    clock.now = T0 + datetime.timedelta(seconds=31)
    assert book.expire() == 1
    assert chosen(book, "p2") == "a"
    record = pod_ledger.PodRecord(name="p2", subset="a", revision="", phase="Running", ready=True,
                                   node_name="n1", created=T0)
    book.observe("ns/web", [record])
    creating, _ = book.pending_entries("ns/web")
    assert creating == {}
    assert chosen(book, "p3") is None


def test_dry_run_records_nothing() -> None:
    book = book_with({"a": 1}, ManualClock(T0))
    assert book.admit("ns/web", "p1", revision="", dry_run=True) is not None
    assert chosen(book, "p2") == "a"


def test_each_revision_fills_the_subsets_from_the_first() -> None:
    book = book_with({"a": 1, "b": 1}, ManualClock(T0))
    assert [chosen(book, p, "old") for p in ("o1", "o2")] == ["a", "b"]
    assert [chosen(book, p, "new") for p in ("n1", "n2")] == ["a", "b"]


def test_a_retried_admission_keeps_its_subset_during_a_rollout() -> None:
    # 4 replicas, surge 1: a holds its 2 old pods and the new pod n1 (2 + 1); asked again for n1,
    # the bookkeeping does not count n1 against itself, so n1 stays in a rather than moving to b.
    book = book_with({"a": 2, "b": 2}, ManualClock(T0))
    assert [chosen(book, p, "old") for p in ("o1", "o2", "o3", "o4")] == ["a", "a", "b", "b"]
    assert chosen(book, "n1", "new") == "a"
    assert chosen(book, "n1", "new") == "a"
    assert chosen(book, "n2", "new") == "b", "a is at its quota plus the surge"
    assert chosen(book, "n3", "new") is None, "b too"


def test_local_unschedulable_mark_skips_the_subset_until_it_expires() -> None:
    clock = ManualClock(T0)
    book = book_with({"a": 5, "b": 5}, clock, strategy="Adaptive")
    book.mark_unschedulable("ns/web", "a", until=T0 + datetime.timedelta(seconds=10))
    assert chosen(book, "p1") == "b"
    clock.now = T0 + datetime.timedelta(seconds=11)
    assert chosen(book, "p2") == "a"


def test_fixed_strategy_admits_into_a_marked_subset() -> None:
    book = book_with({"a": 5, "b": 5}, ManualClock(T0))
    book.mark_unschedulable("ns/web", "a", until=T0 + datetime.timedelta(seconds=10))
    assert chosen(book, "p1") == "a"


def test_an_assignment_of_a_new_spec_ends_the_local_marks_it_does_not_echo() -> None:
    """A local mark bridges the time until the coordinator echoes it; the coordinator spends its
    marks when an edit changes the subsets (`model.marks.spent`), so an assignment of a newer
    generation (or another uid: the spread re-created) that echoes no mark ends the local one. The
    same assignment sent again, or one that echoes the mark, keeps it."""
    clock = ManualClock(T0)
    book = book_with({"a": 5, "b": 5}, clock, strategy="Adaptive")
    until = T0 + datetime.timedelta(seconds=60)
    current = book.assignment("ns/web")
    assert current is not None
    book.mark_unschedulable("ns/web", "a", until=until)
    book.mark_unschedulable("ns/web", "b", until=until)

    book.set_assignment(dataclasses.replace(current, replicas=9))  # the same spec, another share
    assert set(book.marked("ns/web")) == {"a", "b"}
    echoing_a = tuple(dataclasses.replace(r, unschedulable_until=until) if r.name == "a" else r
                      for r in current.subsets)
    book.set_assignment(dataclasses.replace(current, generation=2, subsets=echoing_a))
    assert set(book.marked("ns/web")) == {"a"}, "b was not echoed by the new spec: it ends"
    assert chosen(book, "p1") == "b"
    book.set_assignment(dataclasses.replace(current, generation=1, spread_uid="re-created"))
    assert book.marked("ns/web") == {}
    assert chosen(book, "p2") == "a"


def test_the_local_marks_no_assignment_echoes_are_listed_to_be_reported_again() -> None:
    """After a new stream's resync, the active local marks the assignments do not echo are
    reported again (a restarted coordinator lost its marks), each with the `since` that makes the
    coordinator's mark end with the agent's; echoed and expired marks are not."""
    clock = ManualClock(T0)
    book = book_with({"a": 5, "b": 5}, clock, strategy="Adaptive")
    current = book.assignment("ns/web")
    assert current is not None
    until = T0 + datetime.timedelta(seconds=60)
    book.mark_unschedulable("ns/web", "a", until=until)
    book.mark_unschedulable("ns/web", "b", until=T0 + datetime.timedelta(seconds=5))
    since = until - datetime.timedelta(seconds=current.strategy.unschedulable_seconds)
    assert book.unechoed_marks() == [(current, "a", since),
                                     (current, "b", since - datetime.timedelta(seconds=55))]
    clock.advance(6)
    assert book.unechoed_marks() == [(current, "a", since)], "b ran out"
    echoing_a = tuple(dataclasses.replace(r, unschedulable_until=until) if r.name == "a" else r
                      for r in current.subsets)
    book.set_assignment(dataclasses.replace(current, subsets=echoing_a))
    assert book.unechoed_marks() == [], "the coordinator has a's mark"


def counting_book(count_wait: float) -> bookkeeping.Bookkeeping:
    book = bookkeeping.Bookkeeping(clock=ManualClock(T0), count_wait=count_wait)
    rules = (assignment.SubsetRule(name="a", index=0, quota=2),
             assignment.SubsetRule(name="b", index=1, quota=1))
    book.set_assignment(assignment.Assignment(
        spread="ns/web", generation=1, namespace="ns", workload="web", replicas=3, template={},
        template_revision="r1", subsets=rules, subset_count=2))
    return book


def test_a_counting_bookkeeping_refuses_to_choose_before_the_first_count() -> None:
    book = counting_book(0.05)
    with pytest.raises(bookkeeping.NotCounted):  # two pods of "a" may exist: the agent just started
        book.admit("ns/web", "p3", revision="r1")
    book.observe("ns/web", [])
    assert chosen(book, "p3", revision="r1") == "a"
    value = book.assignment("ns/web")
    assert value is not None
    book.remove_assignment("ns/web")
    book.set_assignment(value)
    with pytest.raises(bookkeeping.NotCounted):  # removed and assigned again: counted afresh
        book.admit("ns/web", "p4", revision="r1")


def test_a_waiting_admission_chooses_from_the_first_count() -> None:
    book = counting_book(30.0)
    running = [pod_ledger.PodRecord(name=f"p{i}", subset="a", revision="r1", phase="Running", ready=True,
                                     node_name="n1", created=T0) for i in (1, 2)]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(book.admit, "ns/web", "p3", revision="r1")
        book.observe("ns/web", running)  # the controller's first count (wakes it if it waits)
        admitted = waiting.result(timeout=30)
    assert admitted is not None and admitted.name == "b"


def test_a_pod_the_webhook_never_saw_is_matched_within_quota_plus_surge_during_a_rollout() -> None:
    # 4 replicas, surge 1 (25% rounded up). a holds its 2 old pods and new n1: at 2 + 1 it is full
    # for the bound, though the new revision has 1 of its 2 there; the pod that met no webhook
    # (it failed open) is counted in b, as the webhook would have placed it.
    book = book_with({"a": 2, "b": 2}, ManualClock(T0))

    def record(name: str, subset: str | None, revision: str) -> pod_ledger.PodRecord:
        return pod_ledger.PodRecord(name=name, subset=subset, revision=revision, phase="Running",
                                     ready=True, node_name="n1", created=T0)

    book.observe("ns/web", [record("o1", "a", "old"), record("o2", "a", "old"), record("o3", "b", "old"),
                            record("o4", "b", "old"), record("n1", "a", "new"), record("lost", None, "new")])
    assert book.match_by_node("ns/web", {"n1": {}}) == {"lost": "b"}
    one_revision = book_with({"a": 2, "b": 2}, ManualClock(T0))
    one_revision.observe("ns/web", [record("p1", "a", "r"), record("p2", None, "r"), record("p3", None, "r")])
    assert one_revision.match_by_node("ns/web", {"n1": {}}) == {"p2": "a", "p3": "b"}, "as before"
