"""Per spread, the failback the coordinator keeps between rounds: the step in flight, the last move.

Why a book of its own: `failback.next_step` is pure — it is told the step in flight and when the
last move completed, and answers what to run now. Those two facts outlive a round, and a
coordinator restart too: a step whose surge pods run when the coordinator dies must be finished or
stopped by the next one (else the surge pods stay above the total for good, or the removals never
come). They are written to the spread's status (`status.rebalancing`, `status_of`) with the
Rebalancing condition, and a restarted coordinator seeds them from there (`seed`), as it seeds the
placement itself from `status.subsetStatuses`.

A round asks `context` for what to hand the rule (None: the spread has no failback to judge — a
`Never` spread with nothing in flight and nothing asked on demand costs no from-scratch placement)
and `commit`s the decision its placement carries. `due` names the spreads whose answer changes by
time alone (a cooldown's end, a step's Ready deadline), for the coordinator's timer.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from collections.abc import Mapping

from federation.api import common
from federation.api import rebalance as rebalance_api
from federation.api import spread as spread_api
from federation.core import failback, failback_round, status

CONDITION = failback.CONDITION
_WAITING = frozenset({"Started", "WaitingForReady", "Cooldown", "NotReady", "CapReached", "Finished"})
"""Reasons under which a failback is under way or held back (the condition is True)."""


@dataclasses.dataclass
class State:
    """One spread's failback between rounds."""

    in_flight: failback.Step | None = None
    last_move: datetime.datetime | None = None
    on_demand: bool = False
    max_surge: int | None = None
    decision: failback.Decision | None = None
    """The last round's answer (the condition's content); None before the first."""
    retry_at: datetime.datetime | None = None
    last_outcome: typing.Literal["Finished", "Stopped"] | None = None
    """How the last step ended (`status.rebalancing.lastOutcome`: what its Event says)."""


class Rebalancings:
    """Every spread's failback state (`State`), by key."""

    def __init__(self) -> None:
        self._states: dict[str, State] = {}

    def seed(self, key: str, recorded: rebalance_api.RebalancingStatus | None) -> None:
        """A spread first seen with a status: resume the failback its status recorded."""
        if recorded is None:
            return
        step = None
        if recorded.step is not None:
            step = failback.Step(
                moves=tuple(failback.Move(m.from_subset, m.from_cluster, m.to_subset, m.to_cluster,
                                          m.replicas) for m in recorded.step.moves),
                started=recorded.step.started,
                ready_before=tuple(failback.Shift(r.subset, r.cluster, r.replicas)
                                   for r in recorded.step.ready_before))
        self._states[key] = State(in_flight=step, last_move=recorded.last_move, on_demand=recorded.on_demand,
                                  max_surge=recorded.max_surge, retry_at=step.started if step else None,
                                  last_outcome=recorded.last_outcome)

    def forget(self, key: str) -> None:
        """Spread `key` was deleted."""
        self._states.pop(key, None)

    def ask(self, key: str, *, max_surge: int | None = None) -> None:
        """`fedspread rebalance`: one whole failback of spread `key`, its policy and cooldown ignored."""
        state = self._states.setdefault(key, State())
        state.on_demand, state.max_surge = True, max_surge

    def state(self, key: str) -> State | None:
        """Spread `key`'s failback state, if it has one."""
        return self._states.get(key)

    def context(self, key: str, spec: spread_api.FederatedSpreadSpec) -> failback_round.Context | None:
        """What a round hands the rule for spread `key` (None: no failback to judge). A Job's pods
        run to completion, so none is moved: a Job spread never fails back."""
        if spec.target_ref.kind == "Job":
            return None
        state = self._states.get(key)
        if state is None:
            return failback_round.Context() if spec.rebalance.policy == "WhenRoom" else None
        if spec.rebalance.policy != "WhenRoom" and state.in_flight is None and not state.on_demand:
            return None
        return failback_round.Context(in_flight=state.in_flight, last_move=state.last_move,
                                      on_demand=state.on_demand, max_surge=state.max_surge)

    def without_surge(self, key: str, current: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
        """`current` less the surge pods of spread `key`'s step in flight (the rule's own `current`)."""
        state = self._states.get(key)
        return failback_round.without_surge(current, state.in_flight if state is not None else None)

    def commit(self, key: str, decision: failback.Decision | None, *, now: datetime.datetime,
               spec: spread_api.FederatedSpreadSpec) -> None:
        """Keep what a round decided for spread `key` (None: it judged no failback)."""
        state = self._states.get(key)
        if decision is None:
            if state is not None and spec.rebalance.policy != "WhenRoom":
                state.decision = state.retry_at = None  # a Never spread: no condition, the last move stays
            return
        if state is None:
            state = self._states[key] = State()
        state.decision, state.retry_at = decision, decision.retry_at
        if decision.action == "start":
            state.in_flight = decision.step
        elif decision.completed:
            state.in_flight, state.last_move = None, now
            state.last_outcome = "Stopped" if decision.action == "stop" else "Finished"
            if decision.action == "stop":
                state.on_demand = False  # the room was not real: an on-demand failback ends here
            if spec.rebalance.policy == "WhenRoom" and not state.on_demand:  # the next try after the cooldown
                state.retry_at = now + datetime.timedelta(seconds=spec.rebalance.cooldown_seconds)
            elif state.on_demand:
                state.retry_at = now  # the next step at once
        elif decision.reason in ("NothingToMove", "CapReached") and state.in_flight is None:
            state.on_demand, state.max_surge = False, None

    def due(self, *, since: datetime.datetime, now: datetime.datetime) -> set[str]:
        """Spreads whose failback answer may have changed by time alone in (since, now]."""
        return {key for key, state in self._states.items()
                if state.retry_at is not None and state.retry_at <= now and (
                    since < state.retry_at or state.decision is None or state.decision.completed)}

    def status_of(self, key: str) -> rebalance_api.RebalancingStatus | None:
        """What spread `key`'s status records of its failback (None: nothing to resume)."""
        state = self._states.get(key)
        if state is None or (state.in_flight is None and state.last_move is None and not state.on_demand):
            return None
        step = None
        if state.in_flight is not None:
            step = rebalance_api.RebalanceStepStatus(
                started=state.in_flight.started,
                moves=[rebalance_api.RebalanceMoveStatus(
                    from_subset=m.from_subset, from_cluster=m.from_cluster, to_subset=m.to_subset,
                    to_cluster=m.to_cluster, replicas=m.replicas) for m in state.in_flight.moves],
                ready_before=[rebalance_api.RebalanceReadyStatus(subset=r.subset, cluster=r.cluster,
                                                                 replicas=r.replicas)
                              for r in state.in_flight.ready_before])
        return rebalance_api.RebalancingStatus(step=step, last_move=state.last_move,
                                               on_demand=state.on_demand, max_surge=state.max_surge,
                                               last_outcome=state.last_outcome)

    def condition(self, key: str, *, previous: list[common.Condition], now: datetime.datetime,
                  generation: int | None) -> common.Condition | None:
        """Spread `key`'s Rebalancing condition: True with the step and what it waits for while a
        failback is under way or held back, False once the placement matches the one from scratch
        (or a step stopped); None for a spread without a failback judged."""
        state = self._states.get(key)
        if state is None or state.decision is None:
            return None
        decision = state.decision
        step = decision.step if decision.step is not None else state.in_flight
        message = decision.message
        if step is not None and decision.action != "start":
            moves = ", ".join(f"{m.replicas} from {m.from_subset}/{m.from_cluster} to "
                              f"{m.to_subset}/{m.to_cluster}" for m in step.moves)
            message = f"step started {step.started.isoformat()} ({moves}): {message}"
        on: typing.Literal["True", "False"] = "True" if decision.reason in _WAITING else "False"
        return status.condition(CONDITION, on, reason=decision.reason, message=message, previous=previous,
                                now=now, generation=generation)

    def annotated(self, key: str, written: spread_api.FederatedSpreadStatus, *,
                  previous: spread_api.FederatedSpreadStatus | None, now: datetime.datetime,
                  generation: int | None) -> spread_api.FederatedSpreadStatus:
        """`written` (a spread's status as the placement gives it) with its failback: the
        Rebalancing condition and `status.rebalancing` (what a restarted coordinator resumes)."""
        said = self.condition(key, previous=previous.conditions if previous is not None else [], now=now,
                              generation=generation)
        recorded = self.status_of(key)
        if said is None and recorded is None:
            return written
        conditions = [*written.conditions, said] if said is not None else written.conditions
        return written.model_copy(update={"conditions": conditions, "rebalancing": recorded})
