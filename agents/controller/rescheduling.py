"""Adaptive reschedule of stuck pods: mark their subset unschedulable here, and delete them.

Why a module of its own: it is one of the two places where the agent deletes pods of a spread on
its own judgement (the other removes spare pods that starve a subset: `agents.controller.spare`).
`federation.core.reschedule` finds the subsets whose pods waited longer than
`rescheduleCriticalSeconds`; each such subset is marked unschedulable in this cluster for
`unschedulableSeconds` (the webhook skips it at once, the coordinator hears of it once per mark),
and its stuck pods are deleted with their uid as a precondition (a new pod of that name
survives), each with a `Rescheduled` Event saying why; their ReplicaSet recreates them in another
subset. The reconciler calls it each round for Adaptive spreads of kinds whose pods may be
deleted to move (`reschedule_deletes_pods`: never a StatefulSet's).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kubernetes.client import exceptions

from agents import bookkeeping, outbox, retries
from agents.cache import views
from agents.controller import costs as pod_costs
from federation import clock as clock_mod
from federation.core import reschedule
from federation.kube import deadlines
from federation.kube import events as kube_events
from federation.rpc import assignment

LOG = logging.getLogger(__name__)

RESCHEDULED = "Rescheduled"
"""The reason of the Event on each pod deleted to reschedule it."""
_RETRY = retries.kube_retry(conflicts=False, attempts=4, max_wait=3.0)  # as the reconciler's writes


def blocked_subsets(value: assignment.Assignment, marks: Mapping[str, datetime.datetime],
                    now: datetime.datetime) -> set[str]:
    """Subsets kept out of this cluster now: local marks and the coordinator's echo of them."""
    return set(marks) | {r.name for r in value.subsets if not r.schedulable(now)}


class Tally(Protocol):
    """What a round counts of a reschedule (`reconciler.ReconcileOutcome`)."""

    reported: int
    deleted: int


class Rescheduler:
    """Reschedules one member cluster's stuck pods of Adaptive spreads."""

    def __init__(self, core_api: Any, books: bookkeeping.Bookkeeping, box: outbox.ReportOutbox, *,
                 clock: clock_mod.Clock, beat: Callable[[], None],
                 recorder: kube_events.EventRecorder | None = None) -> None:
        """`beat` is called before every delete (the reconciler's watchdog heartbeat)."""
        self._core = core_api
        self._books = books
        self._outbox = box
        self._clock = clock
        self._beat = beat
        self._recorder = recorder

    def reschedule(self, value: assignment.Assignment, pods: Sequence[views.SpreadPod],
                   done: Tally) -> None:
        """Mark the spread's stuck subsets unschedulable here (reported once per mark) and delete
        their stuck pods; counted in `done`."""
        now = self._clock()
        stuck = reschedule.stuck_subsets(
            [p.record for p in pods], now=now, critical_seconds=value.strategy.reschedule_critical_seconds,
            order=pod_costs.subset_order(value))
        if not stuck:
            return
        blocked = blocked_subsets(value, self._books.marked(value.spread), now)
        until = reschedule.blocked_until(now, unschedulable_seconds=value.strategy.unschedulable_seconds)
        for item in reschedule.to_report(stuck, blocked=blocked):
            self._books.mark_unschedulable(value.spread, item.subset, until=until)
            self._outbox.unschedulable(
                spread=value.spread, subset=item.subset, since=item.since, pods=len(item.pods),
                reason=f"Unschedulable for more than {value.strategy.reschedule_critical_seconds}s",
                generation=value.generation)
            done.reported += 1
            LOG.info("subset unschedulable",
                     extra={"spread": value.spread, "subset": item.subset, "pods": len(item.pods),
                            "until": until.isoformat()})
        uids = {p.record.name: (p.namespace, p.uid, p.record.unschedulable_since) for p in pods}
        for item in stuck:
            for name in item.pods:
                namespace, uid, since = uids[name]
                if delete_pod(self._core, namespace, name, uid=uid, beat=self._beat):
                    LOG.info("pod rescheduled", extra={"pod": f"{namespace}/{name}"})
                    self._books.note_deleting(value.spread, name, subset=item.subset)
                    done.deleted += 1
                    self._note_rescheduled(value, namespace, name, uid=uid, subset=item.subset,
                                           since=since or item.since)

    def _note_rescheduled(self, value: assignment.Assignment, namespace: str, name: str, *, uid: str,
                          subset: str, since: datetime.datetime) -> None:
        if self._recorder is None:
            return
        note = (f"deleted to reschedule: unschedulable in subset {subset} since {since.isoformat()} "
                f"(longer than rescheduleCriticalSeconds {value.strategy.reschedule_critical_seconds}s); "
                f"spread {value.spread} skips that subset for {value.strategy.unschedulable_seconds}s")
        self._recorder.record(kube_events.ObjectRef("v1", "Pod", name, namespace=namespace, uid=uid),
                              reason=RESCHEDULED, action="Delete", note=note)


@_RETRY
def delete_pod(core_api: Any, namespace: str, name: str, *, uid: str, beat: Callable[[], None]) -> bool:
    """Delete a pod of a spread with its `uid` as a precondition; False when it is gone or a new pod
    has its name (both are left alone). `beat` is called first (the reconciler's watchdog)."""
    options: dict[str, Any] = {"preconditions": {"uid": uid}} if uid else {}
    beat()
    try:
        core_api.delete_namespaced_pod(name, namespace, body=options, _preload_content=False,
                                       _request_timeout=deadlines.CALL)
    except exceptions.ApiException as error:
        if error.status == 404 or (error.status == 409 and uid):  # gone, or a new pod of that name
            return False
        raise
    return True
