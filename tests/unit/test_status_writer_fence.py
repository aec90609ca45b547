"""The status writer's fence (`StatusWriter.close`, `wait_idle`): after it, nothing is written.

Why it matters: a leader that gives its Lease up closes the writer before the release, and a
status thread it could not join (stalled) must not write over the next leader's statuses when it
wakes. Driven through the writer's own retry loop (`_retrying`, which every write goes through)
with attempts the test controls; the client is never called.
"""

from __future__ import annotations

import threading

import pytest
from kubernetes import client
from kubernetes.client import exceptions

from federation.coordinator.hub import status_writer

WAIT = 10.0


def writer() -> status_writer.StatusWriter:
    return status_writer.StatusWriter(client.ApiClient(client.Configuration()), max_wait=0.01)


def test_a_closed_writer_starts_no_attempt_and_counts_no_failure() -> None:
    made = writer()
    made.close()
    assert made.wait_idle(timeout=1) is True
    ran: list[str] = []
    with pytest.raises(status_writer.WriterClosed, match="spread shop/web"):
        made._retrying("spread", "shop/web", lambda: bool(ran.append("ran")))
    assert ran == []
    assert sum(made.failures.values()) == 0
    made.close()  # twice is fine
    assert made.wait_idle(timeout=1) is True


def test_wait_idle_waits_for_the_write_under_way_and_a_retry_does_not_start() -> None:
    made = writer()
    inside, finish = threading.Event(), threading.Event()
    attempts: list[int] = []
    outcome: list[BaseException] = []

    def busy_then_conflict() -> bool:  # the first attempt is under way when the writer closes
        attempts.append(len(attempts) + 1)
        inside.set()
        finish.wait(WAIT)
        raise exceptions.ApiException(status=409, reason="Conflict")

    def write() -> None:
        try:
            made._retrying("spread", "shop/web", busy_then_conflict)
        except BaseException as error:  # the test reads what the thread met
            outcome.append(error)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    assert inside.wait(WAIT)
    made.close()
    assert made.wait_idle(timeout=0.2) is False, "the attempt under way still runs"
    finish.set()
    assert made.wait_idle(timeout=WAIT) is True
    thread.join(WAIT)
    assert attempts == [1], "a 409 is retried, but not after the writer closed"
    assert len(outcome) == 1 and isinstance(outcome[0], status_writer.WriterClosed)
    assert made.retries["spread"] == 1 and sum(made.failures.values()) == 0


def test_a_passes_writes_run_side_by_side_after_the_first_and_stop_when_the_hub_is_away() -> None:
    started: list[str] = []
    together = threading.Barrier(2, timeout=WAIT)  # two writes at once, or this times out

    def work(item: str) -> None:
        started.append(item)
        if item in ("b", "c"):
            together.wait()

    status_writer.side_by_side(work, ["a", "b", "c"], stopped=lambda: False)
    assert started[0] == "a" and sorted(started) == ["a", "b", "c"], "the first goes alone, then all"
    started.clear()
    status_writer.side_by_side(work, ["a", "b", "c"], stopped=lambda: True)
    assert started == ["a"], "a hub that did not answer the first write gets no more this pass"


def test_wait_idle_waits_for_every_write_under_way() -> None:
    made = writer()
    inside, finish = threading.Barrier(3, timeout=WAIT), threading.Event()

    def busy() -> bool:
        inside.wait()
        finish.wait(WAIT)
        return True

    threads = [threading.Thread(target=made._retrying, args=("spread", f"shop/w{i}", busy), daemon=True)
               for i in range(2)]
    for thread in threads:
        thread.start()
    inside.wait()  # both attempts are under way at once
    made.close()
    assert made.wait_idle(timeout=0.2) is False
    finish.set()
    assert made.wait_idle(timeout=WAIT) is True
    for thread in threads:
        thread.join(WAIT)
