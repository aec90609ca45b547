"""Leader election's decision, pure: given the Lease seen in the hub and the clock, what to do.

Why pure and apart: two coordinators must never both act (two writers of statuses, two sets of
quotas handed to agents), so the rule that decides "acquire, renew or stand by" is the part of
high availability that has to be right; here it is tested with an injected clock, and
`coordinator.hub.leader` only reads and writes the Lease.

The semantics are client-go's `leaderelection` (read there, not guessed):

* A Lease is *valid* while less than its `leaseDurationSeconds` has passed since this candidate
  last saw it CHANGE (its resourceVersion), measured on this candidate's own monotonic clock, never
  by comparing the record's renewTime with a local wall clock (clocks of two pods may differ).
* A candidate acquires a Lease that does not exist, has no holder (released on a clean stop), or
  is no longer valid; it stands by while another holder's Lease is valid.
* The holder renews every retry period; when it has not renewed successfully for
  `renew_deadline` it has LOST: it must stop acting at once (client-go's OnStoppedLeading). As
  `renew_deadline` < `lease_duration`, it stops before any other candidate may take the Lease.
* Writes are conditional on the resourceVersion read (optimistic concurrency): of two candidates
  racing for an expired Lease, the apiserver lets one win; the other gets a conflict.
"""

from __future__ import annotations

import dataclasses
import enum


class Action(enum.Enum):
    """What the candidate does after reading the Lease."""

    CREATE = "create"
    """No Lease yet: create it, holding it."""
    TAKE = "take"
    """Released or expired: write it as the new holder (a transition)."""
    RENEW = "renew"
    """Ours: write a fresh renewTime."""
    STAND_BY = "stand-by"
    """Another holder's valid Lease: do nothing this round."""


@dataclasses.dataclass(frozen=True)
class Timing:
    """client-go's defaults: lease 15 s, renew deadline 10 s, retry period 2 s."""

    lease_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_seconds: float = 2.0
    jitter: float = 1.2
    """A standby waits retry * [1, jitter] between tries, so candidates do not beat in step."""

    def __post_init__(self) -> None:
        if not self.lease_seconds > self.renew_deadline_seconds:
            raise ValueError(f"the lease duration ({self.lease_seconds:g} s) must be longer than the "
                             f"renew deadline ({self.renew_deadline_seconds:g} s)")
        if not self.renew_deadline_seconds > self.jitter * self.retry_seconds:
            raise ValueError(f"the renew deadline ({self.renew_deadline_seconds:g} s) must be longer "
                             f"than {self.jitter:g} x the retry period ({self.retry_seconds:g} s)")
        if self.retry_seconds <= 0:
            raise ValueError("the retry period must be positive")


@dataclasses.dataclass(frozen=True)
class Seen:
    """The parts of a Lease the decision needs."""

    holder: str
    """holderIdentity; "" when released."""
    lease_seconds: float
    """leaseDurationSeconds as the holder wrote it."""
    version: str
    """metadata.resourceVersion: it changes on every write, so it tells a renewal apart."""
    transitions: int = 0


class Candidate:
    """One coordinator's view of the election; `decide` each round, `wrote` after a write succeeded.

    Times are seconds of a monotonic clock, passed in (no clock is read here).
    """

    def __init__(self, identity: str, *, timing: Timing | None = None) -> None:
        if not identity:
            raise ValueError("a candidate needs a non-empty identity")
        self.identity = identity
        self.timing = timing or Timing()
        self._seen: Seen | None = None
        self._seen_at = 0.0
        """When `_seen` was first observed (its version changed), on our clock."""
        self._renewed_at: float | None = None
        """When our last write as holder succeeded; None while not leading."""

    @property
    def leading(self) -> bool:
        return self._renewed_at is not None

    @property
    def renewed_at(self) -> float | None:
        """When our last write as holder succeeded; None while not leading."""
        return self._renewed_at

    def decide(self, seen: Seen | None, *, now: float) -> Action:
        """What to do about the Lease read at `now` (None: there is none)."""
        if seen is None:
            self._seen = None
            return Action.CREATE
        if self._seen is None or seen.version != self._seen.version:
            self._seen, self._seen_at = seen, now
        if seen.holder == self.identity:
            return Action.RENEW
        if self.leading:  # someone else holds what we thought ours: we lost it
            self._renewed_at = None
            return Action.STAND_BY
        if not seen.holder or now - self._seen_at >= seen.lease_seconds:
            return Action.TAKE
        return Action.STAND_BY

    def wrote(self, *, now: float) -> bool:
        """Our CREATE/TAKE/RENEW write succeeded at `now`; True when that made us the leader."""
        became = not self.leading
        self._renewed_at = now
        return became

    def lost(self, *, now: float) -> bool:
        """Leading, but no successful renewal for the renew deadline: stop acting now."""
        return self._renewed_at is not None and now - self._renewed_at >= self.timing.renew_deadline_seconds

    def step_down(self) -> None:
        """We released the Lease or stopped leading: no longer the leader."""
        self._renewed_at = None

    def next_transitions(self, seen: Seen | None) -> int:
        """leaseTransitions to write: +1 when the holder changes."""
        if seen is None:
            return 0
        return seen.transitions if seen.holder == self.identity else seen.transitions + 1

    def wait_seconds(self, *, jitter_draw: float) -> float:
        """Until the next round: the retry period, jittered for a standby (`jitter_draw` in [0, 1])."""
        if self.leading:
            return self.timing.retry_seconds
        return self.timing.retry_seconds * (1 + (self.timing.jitter - 1) * jitter_draw)
