"""Each spread's failover brake, kept between placements.

Why a registry of its own: the brake's rule is pure (`federation.core.brake`), but whether a brake
holds depends on its previous state — when it began, when it lifted, which clusters it keeps — so
the coordinator keeps one `BrakeState` per spread. The placement loop updates it before every
placement of the spread (`loop.request_for`), the failover timer asks which graces have ended
(`due`), and the status pass reads it for the `FailoverSuspended` condition.

`FailoverRateLimit` is the federation-wide half: how many lost clusters may start failing over per
minute, whatever spreads they hold.

Thread-safety: used under the coordinator's lock, like the World whose `liveness.Liveness` owns it.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection

from federation.core import brake


@dataclasses.dataclass(frozen=True)
class BrakeDecision:
    """Spread `key`'s brake as looking at its clusters now decided it, not yet kept."""

    key: str
    state: brake.BrakeState | None
    """None: failover works normally (the brake is forgotten on commit)."""
    grace: datetime.timedelta

    @property
    def kept(self) -> frozenset[str]:
        """The lost clusters the brake keeps (their replicas stay, they take no new ones)."""
        return frozenset() if self.state is None else self.state.clusters


@dataclasses.dataclass(frozen=True)
class Admission:
    """Which lost clusters may fail over now, as the rate limit decided it, not yet kept."""

    lost: frozenset[str]
    admitted: frozenset[str]
    """Those of `lost` whose replicas may move now (admitted before, or newly while budget lasts)."""
    newly: frozenset[str]
    """Of `admitted`, those the commit records as admitted at `now` (they spend the budget)."""
    now: datetime.datetime

    @property
    def waiting(self) -> frozenset[str]:
        """Lost clusters that keep their replicas until the budget allows."""
        return self.lost - self.admitted


class Brakes:
    """Per spread key, its brake state (absent: failover works normally)."""

    def __init__(self) -> None:
        self._states: dict[str, brake.BrakeState] = {}
        self._graces: dict[str, datetime.timedelta] = {}
        self._held: set[str] = set()
        """Spreads with lost clusters that wait for the federation's failover rate limit."""
        self.suspensions = 0
        """Times a spread's failover was suspended (its brake began holding), for the metrics."""

    def decide(
        self, key: str, *, selectable: Collection[str], lost: Collection[str], heard_from_any: bool,
        now: datetime.datetime, grace: datetime.timedelta, falling_silent: Collection[str] = (),
    ) -> BrakeDecision:
        """Spread `key`'s brake after looking at its clusters now, decided but not kept (`commit`)."""
        state = brake.next_state(self._states.get(key), selectable=selectable, lost=lost,
                                 heard_from_any=heard_from_any, now=now, grace=grace,
                                 falling_silent=falling_silent)
        return BrakeDecision(key=key, state=state, grace=grace)

    def commit(self, decision: BrakeDecision) -> frozenset[str]:
        """Keep `decision` as its spread's brake; the lost clusters it keeps."""
        key, state = decision.key, decision.state
        if state is None:
            self.forget(key)
            return frozenset()
        previous = self._states.get(key)
        if state.suspended and (previous is None or not previous.suspended):
            self.suspensions += 1
        self._states[key] = state
        self._graces[key] = decision.grace
        return state.clusters

    def update(
        self, key: str, *, selectable: Collection[str], lost: Collection[str], heard_from_any: bool,
        now: datetime.datetime, grace: datetime.timedelta, falling_silent: Collection[str] = (),
    ) -> frozenset[str]:
        """`decide` and `commit` at once: the lost clusters spread `key`'s brake keeps."""
        return self.commit(self.decide(key, selectable=selectable, lost=lost, heard_from_any=heard_from_any,
                                       now=now, grace=grace, falling_silent=falling_silent))

    def state(self, key: str) -> brake.BrakeState | None:
        """Spread `key`'s brake, if it holds or is in its grace."""
        return self._states.get(key)

    def due(self, now: datetime.datetime) -> set[str]:
        """Spreads whose grace after lifting has ended by `now`: place them again (failover resumes)."""
        found = set()
        for key, state in self._states.items():
            ends = state.grace_ends(self._graces[key])
            if ends is not None and now > ends:
                found.add(key)
        return found

    def forget(self, key: str) -> None:
        """Spread `key` is gone, or its brake no longer holds."""
        self._states.pop(key, None)
        self._graces.pop(key, None)

    def hold(self, key: str, *, waiting: bool) -> None:
        """Whether spread `key` has lost clusters waiting for the failover rate limit."""
        if waiting:
            self._held.add(key)
        else:
            self._held.discard(key)

    def held(self) -> set[str]:
        """Spreads that wait for the failover rate limit (placed again when it has budget)."""
        return set(self._held)


FAILOVER_WINDOW = datetime.timedelta(minutes=1)


class FailoverRateLimit:
    """At most `per_minute` clusters start failing over in any minute, across the federation.

    Why: when many clusters go silent together but fewer than half of each spread's (a zone or a
    network segment failing), failing them all over at once moves a large share of the federation
    in one round and can overload the survivors. As Karmada's and Kubernetes' eviction rate limits
    do, lost clusters are admitted to failover a few at a time (by name, for a stable order); the
    others keep their replicas until the budget allows. A cluster's admission ends when it is heard
    again. `per_minute` None: no limit.
    """

    def __init__(self, per_minute: int | None = None) -> None:
        self._per_minute = per_minute
        self._admitted: dict[str, datetime.datetime] = {}
        self._waiting: set[str] = set()
        self.deferred = 0
        """Lost clusters made to wait for the budget (each once per wait), for the metrics."""

    def decide(self, lost: Collection[str], *, now: datetime.datetime) -> Admission:
        """Those of `lost` whose replicas may move now, decided but not kept (`commit`)."""
        lost = frozenset(lost)
        if self._per_minute is None:
            return Admission(lost=lost, admitted=lost, newly=frozenset(), now=now)
        budget = self._per_minute - self._admitted_within(now)
        newly: set[str] = set()
        for name in sorted(lost - set(self._admitted)):
            if budget <= 0:
                break
            newly.add(name)
            budget -= 1
        admitted = frozenset(name for name in lost if name in self._admitted or name in newly)
        return Admission(lost=lost, admitted=admitted, newly=frozenset(newly), now=now)

    def commit(self, admission: Admission) -> frozenset[str]:
        """Keep `admission`: its new admissions spend the budget, its waiting clusters wait; the
        clusters admitted."""
        if self._per_minute is None:
            return admission.admitted
        for name in admission.newly:
            self._admitted.setdefault(name, admission.now)
        waiting = admission.waiting
        self.deferred += len(waiting - self._waiting)
        self._waiting = (self._waiting - admission.admitted) | waiting
        return admission.admitted

    def admit(self, lost: Collection[str], *, now: datetime.datetime) -> frozenset[str]:
        """`decide` and `commit` at once: those of `lost` whose replicas may move now."""
        return self.commit(self.decide(lost, now=now))

    def has_budget(self, now: datetime.datetime) -> bool:
        """Whether clusters wait for failover and the budget admits one now."""
        if self._per_minute is None or not self._waiting:
            return False
        return self._admitted_within(now) < self._per_minute

    def heard(self, name: str) -> None:
        """Cluster `name`'s agent was heard: it is no longer failing over, nor waiting to."""
        self._admitted.pop(name, None)
        self._waiting.discard(name)

    def _admitted_within(self, now: datetime.datetime) -> int:
        return sum(1 for when in self._admitted.values() if now - when < FAILOVER_WINDOW)
