"""The election's decision (model.election) with an injected clock: client-go's semantics."""

from __future__ import annotations

import pytest

from federation.coordinator.model import election
from federation.coordinator.model.election import Action, Candidate, Seen

TIMING = election.Timing()


def held(holder: str, version: str, *, seconds: float = 15.0, transitions: int = 0) -> Seen:
    return Seen(holder=holder, lease_seconds=seconds, version=version, transitions=transitions)


def test_defaults_are_client_gos() -> None:
    assert (TIMING.lease_seconds, TIMING.renew_deadline_seconds, TIMING.retry_seconds) == (15.0, 10.0, 2.0)


@pytest.mark.parametrize(("lease", "renew", "retry", "says"), [
    (10.0, 10.0, 2.0, "longer than the renew deadline"),
    (15.0, 2.0, 2.0, "longer than 1.2 x the retry period"),
    (15.0, 10.0, 0.0, "positive"),
])
def test_timing_that_could_let_two_lead_is_refused(lease: float, renew: float, retry: float,
                                                  says: str) -> None:
    with pytest.raises(ValueError, match=says):
        election.Timing(lease_seconds=lease, renew_deadline_seconds=renew, retry_seconds=retry)


def test_an_identity_is_required() -> None:
    with pytest.raises(ValueError, match="identity"):
        Candidate("")


def test_no_lease_is_created_then_renewed() -> None:
    me = Candidate("a")
    assert me.decide(None, now=0.0) is Action.CREATE
    assert me.wrote(now=0.0) is True and me.leading
    assert me.decide(held("a", "1"), now=2.0) is Action.RENEW
    assert me.wrote(now=2.0) is False  # already leading: not a new start


def test_a_valid_lease_of_another_is_respected_until_it_expires_on_our_clock() -> None:
    me = Candidate("b")
    assert me.decide(held("a", "1"), now=100.0) is Action.STAND_BY
    assert me.decide(held("a", "1"), now=114.9) is Action.STAND_BY
    assert me.decide(held("a", "1"), now=115.0) is Action.TAKE


def test_a_renewal_restarts_the_wait() -> None:
    me = Candidate("b")
    me.decide(held("a", "1"), now=0.0)
    assert me.decide(held("a", "2"), now=10.0) is Action.STAND_BY  # renewed: seen anew at 10
    assert me.decide(held("a", "2"), now=24.0) is Action.STAND_BY
    assert me.decide(held("a", "2"), now=25.0) is Action.TAKE


def test_the_holders_own_duration_counts() -> None:
    me = Candidate("b")
    me.decide(held("a", "1", seconds=60.0), now=0.0)
    assert me.decide(held("a", "1", seconds=60.0), now=30.0) is Action.STAND_BY


def test_a_released_lease_is_taken_at_once() -> None:
    me = Candidate("b")
    assert me.decide(held("", "7", seconds=1.0), now=0.0) is Action.TAKE


def test_the_leader_loses_after_the_renew_deadline_without_a_renewal() -> None:
    me = Candidate("a")
    me.decide(None, now=0.0)
    me.wrote(now=0.0)
    assert not me.lost(now=9.9)
    assert me.lost(now=10.0)
    assert TIMING.renew_deadline_seconds < TIMING.lease_seconds  # it stops before anyone may take it


def test_a_successful_renewal_keeps_the_lead() -> None:
    me = Candidate("a")
    me.decide(None, now=0.0)
    me.wrote(now=0.0)
    me.decide(held("a", "1"), now=8.0)
    me.wrote(now=8.0)
    assert not me.lost(now=17.0)


def test_another_holder_seen_by_the_leader_means_it_lost() -> None:
    me = Candidate("a")
    me.decide(None, now=0.0)
    me.wrote(now=0.0)
    assert me.decide(held("b", "5"), now=2.0) is Action.STAND_BY
    assert not me.leading and not me.lost(now=100.0)


def test_transitions_count_holder_changes() -> None:
    me = Candidate("b")
    assert me.next_transitions(None) == 0
    assert me.next_transitions(held("a", "1", transitions=3)) == 4
    assert me.next_transitions(held("b", "1", transitions=3)) == 3


def test_a_standby_waits_a_jittered_retry_a_leader_the_retry() -> None:
    me = Candidate("a")
    assert me.wait_seconds(jitter_draw=0.0) == 2.0
    assert me.wait_seconds(jitter_draw=1.0) == pytest.approx(2.4)
    me.decide(None, now=0.0)
    me.wrote(now=0.0)
    assert me.wait_seconds(jitter_draw=1.0) == 2.0


def test_step_down_ends_the_lead() -> None:
    me = Candidate("a")
    me.decide(None, now=0.0)
    me.wrote(now=0.0)
    me.step_down()
    assert not me.leading and me.renewed_at is None
