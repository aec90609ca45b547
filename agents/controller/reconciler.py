"""The controller loop: recount pods, keep deletion costs, reschedule stuck pods, report counts.

Why one loop for these: they all start from the same snapshot of the cache (a spread's pods) and
run on the same beat (a second, or sooner when pods change). Each round, per assigned spread:

1. recount — the cached pods whose owner chain leads to the spread's marked member workload
   (`agents.owners`: Pod → ReplicaSet → Deployment, or Pod → ReplicaSet for a spread of a
   ReplicaSet; not the label alone: a released workload's pods, another controller's and bare
   pods are not the spread's) become `PodRecord`s handed to `Bookkeeping.observe` (once
   the cache has listed everything: a partial list would undercount), which settles the webhook's
   creatingPods/deletingPods and lets the webhook place pods of a spread it never counted; then
   `Bookkeeping.expire` drops stale entries and local unschedulable marks whose time is up;
   pods of no subset (they predate the assignment, or the webhook was down) are matched to a
   subset by their node's labels (`Bookkeeping.match_by_node`), counted there at once and
   annotated with it;
2. deletion cost — `federation.core.deletion_cost` gives every pod its cost (while a rollout
   runs, old revisions below new ones, each old one's quota what the new ones leave of it:
   `revision_deletion_costs`); a pod the webhook admitted was born with its
   in-quota cost, so only pods whose annotation differs (quotas moved, no subset) are patched,
   with a one-key merge patch on metadata.annotations; only for kinds whose scale-down deletion
   cost steers (`KindPolicy.uses_deletion_cost`: Deployment, ReplicaSet);
3. adaptive reschedule (Adaptive strategy) — `federation.core.reschedule` finds subsets whose
   pods waited longer than rescheduleCriticalSeconds; the subset is marked unschedulable here for
   unschedulableSeconds, reported once per mark, and those pods are deleted (their ReplicaSet
   recreates them and the webhook now skips the subset), each with a `Rescheduled` Event saying why;
   never for a kind whose pods are bound to their identity (`reschedule_deletes_pods`: a
   StatefulSet's keep their name and claims) (`agents.controller.rescheduling`);
4. spare pods (Deployment, ReplicaSet; once the cache has listed everything) — a member workload
   at its target whose pods fill its replicas while a subset waits for pods it never creates (pods
   beyond their subset's quota, pods of no subset the coordinator does not keep): those spare
   pods are removed, each with a `SparePodRemoved` Event, so that it creates the missing ones
   (`federation.core.spare_pods`, `agents.controller.spare`);
5. pod counts (pods of no subset under `status.UNASSIGNED`, sent as `unassigned`) — with each
   spread's member workload status (from the cached workload; none while it does not exist) and,
   for a StatefulSet, the pods whose ordinal maps to another subset now (never deleted),
   sent to the outbox when either changed, and at least every heartbeat.

Rounds run every second, or sooner when the spreads' pods or the fedspread workloads change in
the cache: a workload whose readyReplicas went up is reported at once, not at the next beat.

The arithmetic lives in federation.core; this module fetches from the cache, calls it, and writes.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes.client import exceptions

from agents import bookkeeping, outbox, owners, pod_ledger, retries, runnable
from agents.cache import store as cache_mod
from agents.cache import views
from agents.controller import costs as pod_costs
from agents.controller import kinds, rescheduling, spare
from agents.controller import misplaced as misplaced_pods
from federation import clock as clock_mod
from federation.api import names
from federation.core import deletion_cost, status, workload_kinds
from federation.kube import deadlines
from federation.kube import events as kube_events
from federation.rpc import assignment

LOG = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
"""The reason of the Event on a pod deleted because it waited too long in its subset."""
REWRITE_AFTER = 10.0
"""Seconds during which a cost just written is not written again while the cache catches up."""
WAKE_KINDS = (cache_mod.SPREAD_PODS, cache_mod.DEPLOYMENTS, cache_mod.REPLICASETS, cache_mod.AUTOSCALERS)
"""Cache changes that start a round early: the spreads' pods, the member Deployments (whose
status goes into the pod counts report) and their ReplicaSets (which make pods the spread's)."""


# --- pure helpers --------------------------------------------------------------------------------


pod_view = pod_costs.pod_view
subset_order = pod_costs.subset_order
desired_costs = pod_costs.desired_costs
revision_order = pod_costs.revision_order


def member_status(value: assignment.Assignment, view: views.WorkloadView | None
                  ) -> views.DeploymentStatus | None:
    """The status of the spread's member workload; None when the cache has no workload of its kind
    and name labelled for this spread and marked as this assignment's (not created yet, or someone
    else's: agents.ownership)."""
    mine = owners.member_workload(value, view)
    return None if mine is None else observed_status(mine)


def observed_status(workload: views.WorkloadView) -> views.DeploymentStatus:
    """A member workload's status with the template revision it was rendered from once its
    controller has observed its spec, "" before (the hub's observedGeneration waits for it)."""
    revision = workload.annotations.get(names.TEMPLATE_REVISION_ANNOTATION, "")
    observed = revision if workload.status.generation_observed else ""
    return dataclasses.replace(workload.status, template_revision=observed)



@dataclasses.dataclass
class ReconcileOutcome:
    """What one reconcile round did."""

    patched: int = 0
    matched: int = 0
    deleted: int = 0
    reported: int = 0
    spared: int = 0
    counts_sent: bool = False


Seen = tuple[int, owners.Controllers]
"""What a spread's pods were read at: the cache's version of its pods and its owner chain."""

Report = tuple[dict[str, dict[str, pod_ledger.SubsetCounts]], dict[str, views.DeploymentStatus | None],
               dict[str, str], frozenset[str], dict[str, tuple[str, ...]], dict[str, str],
               dict[str, tuple[str, ...]]]
"""What a PodCountsReport says, per spread: pods per subset, the member Deployment's status, why
that Deployment is left alone (a conflict), the spreads the counts are evidence for (their
assignment held, the cache synced), the objects its pods need that are left alone, and its
StatefulSet pods whose ordinal maps to another subset now (`agents.controller.misplaced`), and the
member HPAs that scale its member workload (`kinds.member_autoscalers`)."""

ROUND_SECONDS = 1.0
"""Without a change, a reconcile round runs this often (`run`; the watchdog's period)."""
_RETRY = retries.kube_retry(conflicts=False, attempts=4, max_wait=3.0)


# --- the loop --------------------------------------------------------------------------------------


class Reconciler:
    """One member cluster's controller rounds over every assigned spread (an `agents.runnable.Runnable`:
    critical, since the webhook's counts depend on it)."""

    name = "reconciler"
    period = ROUND_SECONDS
    critical = True

    def __init__(self, core_api: Any, books: bookkeeping.Bookkeeping, box: outbox.ReportOutbox,
                 cache: cache_mod.Cache, *, clock: clock_mod.Clock = clock_mod.utcnow,
                 heartbeat_seconds: float = 10.0,
                 conflicts: Callable[[], Mapping[str, str]] | None = None,
                 dependency_conflicts: Callable[[], Mapping[str, tuple[str, ...]]] | None = None,
                 recorder: kube_events.EventRecorder | None = None) -> None:
        self._core = core_api
        self._conflicts = conflicts
        """Per spread, why its member Deployment is left alone (the workload sync's), reported."""
        self._dependency_conflicts = dependency_conflicts
        """Per spread, the objects its pods need that the member has without our mark, reported."""
        self._books = books
        self._outbox = box
        self._cache = cache
        self._clock = clock
        self.heartbeat_seconds = heartbeat_seconds
        self.beat: runnable.Beat = runnable.no_beat
        """The watchdog's heartbeat (`federation.watchdog`, given to `run`): called every round and
        before every write, so a round of many writes is turning as long as each ends within its
        deadline."""
        self._written: dict[tuple[str, str], tuple[int, float]] = {}
        self._costs_done: dict[str, tuple[assignment.Assignment, Seen]] = {}
        """Per spread: the assignment, pods version and owner chain whose costs are all written
        (skip until one changes: sorting 20,000 pods every second would be wasted)."""
        self._last_counts: Report | None = None
        """The pod counts and member Deployment statuses last sent."""
        self._last_sent = float("-inf")
        self._sequence = 0
        self.rounds = 0
        """Completed rounds (for status and for tests that wait for a round to pass)."""
        self._rescheduler = rescheduling.Rescheduler(core_api, books, box, clock=clock,
                                                     beat=lambda: self.beat(), recorder=recorder)
        """Adaptive reschedule of stuck pods; records a `Rescheduled` Event on each pod it deletes."""
        self._spare = spare.SpareRemover(core_api, books, clock=clock, beat=lambda: self.beat(),
                                         recorder=recorder)
        """Spare pods that starve a subset; records a `SparePodRemoved` Event on each it removes."""

    def costs_written(self, value: assignment.Assignment) -> bool:
        """Whether a round has written the deletion costs of assignment `value` (this very object)
        on the spread's pods: the workload sync lowers a member workload's quantity only then
        (`WorkloadSync.costs_written`)."""
        done = self._costs_done.get(value.spread)
        return done is not None and done[0] is value

    def reconcile_once(self) -> ReconcileOutcome:
        """One round over every assignment; errors on one spread do not stop the others."""
        done = ReconcileOutcome()
        current = self._books.assignments()
        counted = self._cache.synced  # a cache still listing would count too few pods
        versions: dict[str, Seen] = {}
        snapshot: dict[str, list[views.SpreadPod]] = {}
        nodes: dict[str, Mapping[str, str]] | None = None
        for value in current:
            versions[value.spread], snapshot[value.spread] = self._owned_pods(value)
            if counted:
                self._books.observe(value.spread, [p.record for p in snapshot[value.spread]])
                if nodes is None and any(p.record.subset is None for p in snapshot[value.spread]):
                    nodes = {n.name: n.labels for n in self._cache.nodes()}
                if nodes is not None:
                    done.matched += self._match_by_node(value, snapshot[value.spread], nodes)
        self._books.expire()
        for spread in set(self._costs_done) - set(snapshot):
            del self._costs_done[spread]
        self._spare.forget(set(snapshot))
        for value in current:
            try:
                costed = self._costs_done.get(value.spread)
                costs = workload_kinds.policy_for(value.api_version, value.kind).uses_deletion_cost
                if costs and (costed is None or costed[0] is not value
                              or costed[1] != versions[value.spread]):
                    done.patched += self._write_costs(value, snapshot[value.spread])
                    self._costs_done[value.spread] = (value, versions[value.spread])
                policy = workload_kinds.policy_for(value.api_version, value.kind)
                if value.strategy.adaptive and policy.reschedule_deletes_pods:
                    self._rescheduler.reschedule(value, snapshot[value.spread], done)
                if counted and costs and policy.reschedule_deletes_pods:
                    mine = owners.member_workload(value, self._member(value))
                    self._spare.remove(value, snapshot[value.spread], done=done,
                                       target=mine.replicas if mine is not None else None)
            except Exception as error:
                LOG.warning("reconcile failed", extra={"spread": value.spread, "error": str(error)[:300]})
        self._forget_written(snapshot)
        found = {a.spread: misplaced_pods.misplaced_report(a, snapshot[a.spread], self._member(a))
                 for a in current} if counted else {}
        done.counts_sent = self._send_counts(current, counted=counted,
                                             misplaced={k: v for k, v in found.items() if v})
        self.rounds += 1
        return done

    def _owned_pods(self, value: assignment.Assignment) -> tuple[Seen, list[views.SpreadPod]]:
        """The spread's pods: those labelled for it whose owner chain leads to its marked member
        Deployment (`agents.owners`); with what they were read at (pods version, owner chain)."""
        version, pods = self._cache.spread_snapshot(value.spread)
        chain = owners.controllers(value, self._member(value), self._cache.replicasets_of)
        return (version, chain), owners.owned(pods, chain)

    def _member(self, value: assignment.Assignment) -> views.WorkloadView | None:
        """The cached member workload of `value`'s kind and target name."""
        return self._cache.member_workload(value.kind, value.namespace, value.workload)

    # --- pods that predate the spread ------------------------------------------------------------

    def _match_by_node(self, value: assignment.Assignment, pods: Sequence[views.SpreadPod],
                       nodes: Mapping[str, Mapping[str, str]]) -> int:
        """Match the spread's pods of no subset to one by their node (the bookkeeping counts them
        there at once) and annotate each with it, so the match outlives this agent."""
        found = self._books.match_by_node(value.spread, nodes)
        namespaces = {p.record.name: p.namespace for p in pods}
        for name, subset in sorted(found.items()):
            LOG.info("pod matched by its node", extra={"spread": value.spread, "pod": name, "subset": subset})
            try:
                self._annotate(namespaces[name], name, {names.SUBSET_ANNOTATION: subset})
            except Exception as error:  # counted all the same; the next agent matches it again
                LOG.warning("subset annotation failed",
                            extra={"pod": f"{namespaces[name]}/{name}",
                                   "error": str(error)[:300]})
        return len(found)

    @_RETRY
    def _annotate(self, namespace: str, name: str, annotations: Mapping[str, str]) -> bool:
        body = {"metadata": {"annotations": dict(annotations)}}
        self.beat()
        try:
            self._core.patch_namespaced_pod(name, namespace, body, _content_type=MERGE_PATCH,
                                            _preload_content=False, _request_timeout=deadlines.CALL)
        except exceptions.ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    # --- deletion cost -----------------------------------------------------------------------------

    def _revisions(self, value: assignment.Assignment) -> tuple[str, ...]:
        """The member Deployment's template revisions, newest first (none for other kinds)."""
        mine = owners.member_workload(value, self._member(value)) if value.kind == "Deployment" else None
        return self._cache.revisions_of(mine.uid) if mine is not None else ()

    def _write_costs(self, value: assignment.Assignment, pods: Sequence[views.SpreadPod]) -> int:
        costs = desired_costs(value, pods, revisions=self._revisions(value))
        active = [pod_view(p) for p in pods if p.record.active]
        now = time.monotonic()
        patched = 0
        by_name = {p.record.name: p for p in pods}
        for pod in pods:  # the cache caught up with what we wrote: a later change is someone else's
            key = (pod.namespace, pod.record.name)
            if key in self._written and self._written[key][0] == pod.record.current_cost:
                del self._written[key]
        for name, cost in deletion_cost.cost_patches(active, costs).items():
            key = (by_name[name].namespace, name)
            written = self._written.get(key)
            if written is not None and written[0] == cost and now - written[1] < REWRITE_AFTER:
                continue  # written already; the cache has not caught up yet
            if self._patch_cost(by_name[name].namespace, name, cost):
                self._written[key] = (cost, now)
                patched += 1
        return patched

    def _patch_cost(self, namespace: str, name: str, cost: int) -> bool:
        if not self._annotate(namespace, name, {names.DELETION_COST_ANNOTATION: str(cost)}):
            return False
        LOG.debug("deletion cost", extra={"pod": f"{namespace}/{name}", "cost": cost})
        return True

    def _forget_written(self, snapshot: dict[str, list[views.SpreadPod]]) -> None:
        alive = {(p.namespace, p.record.name) for pods in snapshot.values() for p in pods}
        for key in set(self._written) - alive:
            del self._written[key]

    # --- pod counts --------------------------------------------------------------------------------

    def _send_counts(self, current: Sequence[assignment.Assignment], *, counted: bool,
                     misplaced: Mapping[str, str] | None = None) -> bool:
        """Queue a PodCountsReport if counts or a member Deployment's status changed, or a beat is due.

        The report lists as `assigned` the spreads it is evidence for: those whose assignment is
        held, counted from a synced cache (`counted`). A restarted agent's first reports list
        none, so the coordinator keeps what it knew ("unknown is not zero", agent.proto)."""
        report: Report = (
            {a.spread: {**self._books.counts(a.spread), status.UNASSIGNED: self._books.unassigned(a.spread)}
             for a in current},
            {a.spread: member_status(a, self._member(a)) for a in current},
            dict(self._conflicts()) if self._conflicts is not None else {},
            frozenset(a.spread for a in current) if counted else frozenset(),
            dict(self._dependency_conflicts()) if self._dependency_conflicts is not None else {},
            dict(misplaced or {}),
            {a.spread: found for a in current if (found := kinds.member_autoscalers(self._cache, a))},
        )
        now = time.monotonic()
        if report == self._last_counts and now - self._last_sent < self.heartbeat_seconds:
            return False
        first = self._sequence == 0
        self._sequence += 1
        per_spread, workloads, conflicts, assigned, dependency_conflicts, moved, autoscalers = report
        self._outbox.put_counts(outbox.counts_message(
            per_spread, sequence=self._sequence, generations={a.spread: a.generation for a in current},
            observed_at=self._clock(), workloads=workloads, conflicts=conflicts, assigned=assigned,
            first_after_start=first, dependency_conflicts=dependency_conflicts, misplaced=moved,
            autoscalers=autoscalers))
        self._last_counts, self._last_sent = report, now
        return True

    def run(self, stop: threading.Event, beat: runnable.Beat, *, interval: float = ROUND_SECONDS,
            min_gap: float = 0.5) -> None:
        """Reconcile until `stop`: after a change of the spreads' pods or of a fedspread Deployment
        (its status included), or every `interval` s; `beat` every round and before every write.

        `min_gap` seconds separate rounds, so a busy cluster's stream of pod events (our own
        patches among them) batches into rounds instead of spinning.
        """
        self.beat = beat
        while not stop.is_set():
            self.beat()
            seen = self._cache.version(*WAKE_KINDS)
            try:
                self.reconcile_once()
            except Exception as error:  # one bad round must not end the loop
                LOG.warning("reconcile round failed", extra={"error": str(error)[:300]})
            if stop.wait(min_gap):
                break
            self._cache.wait_for_change(seen, timeout=max(0.0, interval - min_gap), kinds=WAKE_KINDS)
