"""Spare pods removed: the agent's side of `federation.core.spare_pods`.

Why a module of its own: it is, beside the adaptive reschedule (`agents.controller.rescheduling`),
the one place where the agent deletes Ready pods of a spread itself, so its guards are in one
place. A member workload at its target whose pods fill every quota's sum while a subset waits
(pods beyond their subset's quota, pods of no subset that the coordinator does not keep) never
creates that subset's pods: the rule names the spare pods, and this removes them, each with its uid
as a precondition (a new pod of that name survives) and a `SparePodRemoved` Event saying which
subsets wait; their ReplicaSet creates the missing pods, which the webhook admits into the
waiting subsets.

Guards beyond the rule's own (target reached, none terminating, one revision, the Ready pods the
spread needs kept): only kinds whose pods may be deleted to move (`reschedule_deletes_pods`: never
a StatefulSet's), only once the cache has listed everything, only the spread's member workload as
the cluster holds it (`target`: its `spec.replicas`), and after a removal the spread waits
`PAUSE_SECONDS` before the next, so that a pod the webhook puts back where it was (a subset that
filled meanwhile) costs one removal per pause, never a loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from agents import bookkeeping
from agents.cache import views
from agents.controller import costs as pod_costs
from agents.controller import rescheduling
from federation import clock as clock_mod
from federation.core import spare_pods
from federation.kube import events as kube_events
from federation.rpc import assignment

LOG = logging.getLogger(__name__)

SPARE_POD_REMOVED = "SparePodRemoved"
"""The reason of the Event on each spare pod removed."""
PAUSE_SECONDS = 30.0
"""After removing spare pods of a spread, the agent removes none of its pods for this long."""


class Tally(Protocol):
    """What a round counts of removals (`reconciler.ReconcileOutcome`)."""

    spared: int


def shares_of(value: assignment.Assignment, *, blocked: set[str]) -> list[spare_pods.Share]:
    """The assignment's subsets in spec order as the rule reads them (`blocked`: subsets the webhook
    skips here now)."""
    return [spare_pods.Share(name=r.name, quota=r.quota, leaving=r.leaving, kept=r.kept,
                             admits=r.name not in blocked)
            for r in sorted(value.subsets, key=lambda r: r.index)]


class SpareRemover:
    """Removes one member cluster's spare pods (the reconciler calls `remove` each round)."""

    def __init__(self, core_api: Any, books: bookkeeping.Bookkeeping, *, clock: clock_mod.Clock,
                 beat: Callable[[], None], recorder: kube_events.EventRecorder | None = None) -> None:
        """`beat` is called before every delete (the reconciler's watchdog heartbeat)."""
        self._core = core_api
        self._books = books
        self._clock = clock
        self._beat = beat
        self._recorder = recorder
        self._last: dict[str, float] = {}
        """Per spread, the clock's time (seconds) of its last removal."""

    def remove(self, value: assignment.Assignment, pods: Sequence[views.SpreadPod], *,
               target: int | None, done: Tally) -> None:
        """Remove spread `value`'s spare pods here, if the rule names any; counted in `done`."""
        now = self._clock()
        last = self._last.get(value.spread)
        if last is not None and now.timestamp() - last < PAUSE_SECONDS:
            return
        blocked = rescheduling.blocked_subsets(value, self._books.marked(value.spread), now)
        found = spare_pods.spare_pods([pod_costs.pod_view(p) for p in pods],
                                      shares=shares_of(value, blocked=blocked),
                                      replicas=value.replicas, target=target)
        if not found.pods:
            return
        self._last[value.spread] = now.timestamp()
        by_name = {p.record.name: p for p in pods}
        waiting = ", ".join(f"{name} waits for {count}" for name, count in found.waiting.items())
        LOG.info("spare pods removed", extra={"spread": value.spread, "pods": list(found.pods),
                                              "waiting": dict(found.waiting)})
        for name in found.pods:
            pod = by_name[name]
            if rescheduling.delete_pod(self._core, pod.namespace, name, uid=pod.uid, beat=self._beat):
                self._books.note_deleting(value.spread, name, subset=pod.record.subset)
                done.spared += 1
                self._note(value, pod, waiting=waiting)

    def forget(self, spreads: set[str]) -> None:
        """Drop the pause of spreads no longer assigned."""
        for spread in set(self._last) - spreads:
            del self._last[spread]

    def _note(self, value: assignment.Assignment, pod: views.SpreadPod, *, waiting: str) -> None:
        if self._recorder is None:
            return
        subset = pod.record.subset or "no subset"
        note = (f"removed as spare: no quota of spread {value.spread} counts it (subset {subset}) while "
                f"its member workload, at {value.replicas} replicas, creates no pods for the waiting "
                f"subsets ({waiting})")
        self._recorder.record(
            kube_events.ObjectRef("v1", "Pod", pod.record.name, namespace=pod.namespace, uid=pod.uid),
            reason=SPARE_POD_REMOVED, action="Delete", note=note)
