"""One status pass: FederatedSpread, hub workload and MemberCluster statuses from the World.

Why a module of its own: the statuses are what a person sees with `kubectl get` on the hub, and
each has its own rules — computed under the facade's lock (so they describe one consistent
World), written outside it (a slow apiserver must not stall placement), only when changed
(`StatusWriter` compares first). The rules:

- **FederatedSpread**: `core.spread_status.spread_status` from the last placement, the agents' pod
  counts and unschedulable marks. A spread whose latest spec failed validation keeps the
  placement of its last valid spec (the World never saw the bad one) and shows `Valid=False`
  with every problem, so the fix is one `kubectl describe` away.
- **FederatedSpread refused** by a target rule (`model.lifecycle`: its targetRef changed, or
  another spread holds its Deployment): `Valid=False` with that reason; the rest of the status is
  the one of what is in force (the last valid spec, or nothing).
- **hub Job** (a spread's target Job): `core.job_status` over the member Jobs as their agents last
  reported them, lost clusters' last reports included (`model.job_spreads`); a finished hub Job's
  status is not rewritten. While lost clusters' member Jobs hold unfinished completions, the
  spread has the condition `CompletionsStranded`, while member Jobs without a share do,
  `CompletionsPaused` (count and clusters).
- **hub workload** (the Deployment, ReplicaSet or StatefulSet a spread targets; a Job above): its kind's own
  replica fields (`core.status.workload_status`: a Deployment's `replicas/readyReplicas/
  availableReplicas/updatedReplicas/unavailableReplicas`, a ReplicaSet's `replicas/
  fullyLabeledReplicas/readyReplicas/availableReplicas`, a StatefulSet's `replicas/readyReplicas/
  updatedReplicas`) summed over the member workloads as their agents report them
  (pod counts stand in for an agent that reports none); a lost cluster counts for nothing, nobody
  can vouch for its pods. When its spread is deleted, these fields are removed (whatever the
  deletionPolicy: orphaned workloads run on, but fedspread no longer counts them), unless another
  spread of the workload writes them.
- **MemberCluster**: the Ready condition and heartbeat; rewritten when readiness changes, else at
  most every `member_status_seconds` (heartbeats arrive every few seconds).

With an Event recorder, each spread status write that applied a patch also records the Events of
the transition from the status it replaced (`core.spread_events`: Placed, Invalid, FailedOver, ...)
regarding the FederatedSpread: the old status is the one read from the hub just before the patch,
so a restarted coordinator does not announce again what it announced before.
"""

from __future__ import annotations

import datetime
import functools
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pydantic

from federation.api import cluster as cluster_api
from federation.api import common, problems
from federation.api import spread as spread_api
from federation.coordinator import facade
from federation.coordinator.hub import held_statuses, member_statuses, status_writer, watcher
from federation.coordinator.model import hub_objects, job_spreads, lifecycle
from federation.coordinator.wire import assignments
from federation.core import placement, spread_events
from federation.core import spread_status as spread_status_core
from federation.core import status as status_core
from federation.kube import errors as kube_errors
from federation.kube import events as kube_events

log = logging.getLogger(__name__)

Target = tuple[str, str, str, dict[str, Any], bool]
"""A hub workload's status to write: (kind, namespace, name, replica fields or a Job's whole status,
whether every member observed its current template: `observedGeneration` waits until then)."""
Released = tuple[str, str, str]
"""A hub workload whose status is to be cleared: (kind, namespace, name)."""
EventContext = tuple[frozenset[str], bool]
"""Per spread, what its Events need from the World: the clusters lost for it, whether Adaptive."""
CONFLICT_REASONS = frozenset({lifecycle.TARGET_CONFLICT})


class StatusPass:
    """Computes and writes statuses; remembers what it wrote (thread-safe)."""

    def __init__(
        self, coordinator: facade.Coordinator, writer: status_writer.StatusWriter, *,
        agent_versions: Mapping[str, str], member_status_seconds: float,
        events: kube_events.EventRecorder | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.world = coordinator.world
        self.writer = writer
        self.agent_versions = agent_versions
        self.member_status_seconds = member_status_seconds
        self.events = events
        self.members: set[str] = set()  # MemberClusters seen on the hub
        self._lock = threading.Lock()
        self._spread_status: dict[str, spread_api.FederatedSpreadStatus] = {}
        self._revisions: dict[str, tuple[object, str]] = {}
        """Per spread: the template object read and its revision (`_revision`)."""
        self._member_status: dict[str, tuple[cluster_api.MemberClusterStatus, datetime.datetime]] = {}
        self._invalid: dict[str, tuple[int | None, tuple[problems.Problem, ...]]] = {}
        self._released: set[Released] = set()  # hub workloads whose status is to be cleared
        self.on_write: Callable[[], None] = lambda: None
        """Called before each write (the status loop's watchdog heartbeat: a pass of many writes
        is turning as long as each write ends within its deadline)."""
        self._hub_away = False  # this pass met a hub that did not answer: the rest of it waits
        self.held = held_statuses.HeldStatuses()
        """What the hub holds of the spread and workload statuses written here: `hub_changed`."""

    # --- what the hub watcher tells it -------------------------------------------------------

    def spread_seen(self, key: str, *, generation: int | None, found: tuple[problems.Problem, ...]) -> None:
        """A spread event: remember its problems (or that it has none now)."""
        with self._lock:
            if found:
                self._invalid[key] = (generation, found)
            else:
                self._invalid.pop(key, None)

    def hub_changed(self, stream: str, key: str, *, deleted: bool = False) -> None:
        """A hub watch event (`stream`: its kind, e.g. spread, deployment): when it is of a spread
        or a hub workload, what its status is on the hub is unknown until read again
        (`held_statuses`); other kinds' events say nothing of the statuses written here."""
        if key and (stream == "spread" or stream in watcher.WORKLOAD_STREAMS):
            (self.held.forget if deleted else self.held.seen)((stream, key))

    def spread_deleted(self, key: str, *, target: spread_api.TargetRef | None = None) -> None:
        """The spread is gone: forget its problems and what was written; with `target` (the hub
        workload it was in force for), clear that workload's status in the next passes. Call it
        under the facade's lock, with the deletion applied to the World."""
        with self._lock:
            self._invalid.pop(key, None)
            self._spread_status.pop(key, None)
            if target is not None:
                self._released.add((target.kind, key.partition("/")[0], target.name))

    def conditions(self, key: str) -> list[common.Condition]:
        """The conditions last written for spread `key` (for the PlacementService)."""
        with self._lock:
            written = self._spread_status.get(key)
        return list(written.conditions) if written is not None else []

    # --- one pass -------------------------------------------------------------------------------

    def run(self, now: datetime.datetime) -> None:
        """Compute every status under the facade's lock, write them outside it.

        The writes run side by side (`status_writer.side_by_side`). A write that times out or
        finds the hub unreachable ends the writing of this pass: no write starts after it (each
        would wait out its deadline too; those under way end at theirs); the next pass writes
        everything that is still due."""
        self._hub_away = False
        with self.coordinator.lock:
            spreads = [self._spread_job(key, now=now) for key in sorted(self.world.placements)]
            members = [member_statuses.due(self.coordinator, name, now=now,
                                           agent_versions=self.agent_versions,
                                           written=self._member_status.get(name),
                                           every_seconds=self.member_status_seconds)
                       for name in self.world.cluster_names() if name in self.members]
            refused = dict(self.world.lifecycle.refusals())
            until = self.coordinator.settling.until()
            settling = {key: (entry.spread.status, entry.spread.metadata.generation)
                        for key in self.coordinator.settling.waiting()
                        if (entry := self.world.spread(key)) is not None} if until is not None else {}
            context = self._event_context() if self.events is not None else {}
            with self._lock:  # with the World (`spread_deleted` is called under the facade's lock)
                claimed = {(t[0], t[1], t[2]) for _, _, t in spreads if t is not None}
                self._released -= claimed  # a placed spread writes this workload's status now
                released = set(self._released)
        with self._lock:
            invalid = dict(self._invalid)
            placed = {key for key, _, _ in spreads}
            for gone in set(self._spread_status) - placed - set(invalid) - set(refused) - set(settling):
                del self._spread_status[gone]
            previous = dict(self._spread_status)
        jobs = {key: (new, target) for key, new, target in spreads}
        self._clear_released(released)
        for key, (recorded, generation) in settling.items():  # not placed yet: say why (`settling`)
            if key not in jobs and until is not None:
                jobs[key] = (spread_status_core.settling_spread_status(
                    previous.get(key, recorded), generation=generation, until=until, now=now), None)
        for key, refusal in refused.items():
            if key not in invalid:  # a schema problem is reported first: it is what to fix first
                base, target = jobs.get(key, (previous.get(key), None))
                jobs[key] = (spread_status_core.refused_spread_status(
                    base, generation=refusal.generation, reason=refusal.reason, message=refusal.message,
                    now=now), target)
        for key, (generation, found) in invalid.items():
            base, target = jobs.get(key, (previous.get(key), None))
            jobs[key] = (spread_status_core.invalid_spread_status(
                base, generation=generation, problems=[str(p) for p in found], now=now), target)
        self.held.start_pass(now)

        def spread_job(key: str) -> None:
            new, target = jobs[key]
            assert new is not None
            write = functools.partial(self.writer.write_spread, key, new)
            if self.events is not None:  # told what the patch replaced, to announce the transition
                write = functools.partial(write, applied=functools.partial(
                    self._announce, key, new, context.get(key, (frozenset(), False))))
            if self._write_unless_held(("spread", key), new, write, what="spread", key=key):
                with self._lock:
                    self._spread_status[key] = new
            if target is not None:
                kind, namespace, name, fields, observed = target
                self._write_unless_held(
                    (kind.lower(), f"{namespace}/{name}"), (dict(fields), observed),
                    functools.partial(self.writer.write_workload_status, kind, namespace, name, fields,
                                      observed=observed), what=kind.lower(), key=f"{namespace}/{name}")

        def member_job(job: tuple[str, cluster_api.MemberClusterStatus]) -> None:
            name, member = job
            if self._write(functools.partial(self.writer.write_member_cluster, name, member),
                           what="cluster", key=name):
                with self._lock:
                    self._member_status[name] = (member, now)

        away = lambda: self._hub_away  # noqa: E731
        status_writer.side_by_side(spread_job, sorted(jobs), stopped=away)
        status_writer.side_by_side(member_job, [job for job in members if job is not None], stopped=away)

    def _event_context(self) -> dict[str, EventContext]:
        """Per placed spread, the clusters lost for it and whether it is Adaptive (under the lock)."""
        names = self.world.cluster_names()
        lost_by: dict[datetime.timedelta, frozenset[str]] = {}
        found: dict[str, EventContext] = {}
        for key in self.world.placements:
            entry = self.world.spread(key)
            if entry is None:
                continue
            after = entry.lost_after
            if after not in lost_by:
                lost_by[after] = frozenset(n for n in names if not self.world.ready(n, after=after))
            found[key] = (lost_by[after], entry.spec.schedule_strategy.is_adaptive)
        return found

    def _announce(self, key: str, new: spread_api.FederatedSpreadStatus, context: EventContext,
                  before: status_writer.Json) -> None:
        """Record the Events of a spread's status change (`before`: the object as it was read);
        never raises: an Event is a side note of the write, which succeeded."""
        try:
            self._record_transition(key, new, context, before)
        except Exception as error:  # a malformed object read back; the status is written all the same
            log.warning("spread events not recorded", extra={"key": key, "error": str(error)[:200]})

    def _record_transition(self, key: str, new: spread_api.FederatedSpreadStatus, context: EventContext,
                           before: status_writer.Json) -> None:
        assert self.events is not None
        raw = before.get("status")
        try:
            old = spread_api.FederatedSpreadStatus.model_validate(raw) if isinstance(raw, dict) else None
        except pydantic.ValidationError:
            old = None  # unreadable: as if there were none
        lost, adaptive = context
        metadata = before.get("metadata") or {}
        namespace, _, name = key.partition("/")
        regarding = kube_events.ObjectRef(common.GROUP_VERSION, spread_api.KIND, name, namespace=namespace,
                                          uid=str(metadata.get("uid") or ""))
        for event in spread_events.spread_events(old, new, lost=lost, adaptive=adaptive,
                                                 conflicts=CONFLICT_REASONS):
            self.events.record(regarding, reason=event.reason, note=event.note, type=event.type,
                               action=event.action)

    def _clear_released(self, targets: set[Released]) -> None:
        """Clear the status of hub workloads whose spread was deleted and that no placed spread
        writes now; one that fails is tried again in the next pass."""
        for kind, namespace, name in sorted(targets):
            self.held.forget((kind.lower(), f"{namespace}/{name}"))  # what it held is being cleared
            done = self._write(functools.partial(self.writer.clear_workload_status, kind, namespace, name),
                               what=kind.lower(), key=f"{namespace}/{name}")
            if done:
                with self._lock:
                    self._released.discard((kind, namespace, name))

    def _spread_job(self, key: str, *, now: datetime.datetime) -> tuple[
            str, spread_api.FederatedSpreadStatus, Target | None]:
        entry, result = self.world.spread(key), self.world.placements[key]
        assert entry is not None  # placements of deleted spreads are dropped by the same publish
        reports: dict[str, dict[str, status_core.ClusterPods]] = {}
        for subset, per_cluster in self.world.pods.pods_for(key).items():
            for name, pods in per_cluster.items():
                reports.setdefault(name, {})[subset] = pods
        with self._lock:
            previous = self._spread_status.get(key)
        new = spread_status_core.spread_status(
            placement=result, spec=entry.spec, generation=entry.spread.metadata.generation,
            reports=reports, marks=self.world.marks_for(key), previous=previous, now=now,
            failover=self.world.brakes.state(key),
            selectable=len(self.world.selected(key) & frozenset(self.world.cluster_names())),
            conflicts=self.world.pods.conflicts_for(key),
            dependency_conflicts=self.world.pods.dependency_conflicts_for(key),
            misplaced=self.world.pods.misplaced_for(key),
            autoscalers=self.world.pods.autoscalers_for(key),
            missing_dependencies=[f"{ref.kind}/{ref.name}"
                                  for ref in self.world.hub_objects.missing(
                                      key, entry.template, hub_objects.propagated(entry.spec.propagate))]
            if entry.spec.propagate_dependencies else None,
            dependencies=self._dependencies(key, result) if entry.spec.propagate_dependencies else None)
        new = self.world.rebalancing.annotated(key, new, previous=previous, now=now,
                                               generation=entry.spread.metadata.generation)
        target = None
        if entry.replicas is not None:
            ref = entry.spec.target_ref
            if job_spreads.is_job(entry):
                fields: dict[str, Any] = job_spreads.hub_status(self.world, entry, result)
                said = job_spreads.conditions(self.world, entry, result, now=now,
                                              previous=previous.conditions if previous is not None else [])
                if said:
                    new = new.model_copy(update={"conditions": [*new.conditions, *said]})
                observed = True
            else:
                members = self._member_workloads(key, reports, lost_after=entry.lost_after)
                fields = dict(status_core.workload_status(ref.kind, members, replicas=entry.replicas))
                observed = status_core.observed_everywhere(  # reported workloads, not pod stand-ins
                    self.world.pods.workloads_for(key), revision=self._revision(key, entry.template),
                    shares=result.clusters)
            target = (ref.kind, key.partition("/")[0], ref.name, fields, observed)
        return key, new, target

    def _dependencies(self, key: str, result: placement.Placement) -> list[spread_api.DependencyStatus]:
        """Where each object spread `key`'s template references is: found on the hub or not, the
        clusters it is copied to (those with replicas, less the ones whose agent reports a
        same-name object not ours) and those conflicts."""
        entry = self.world.spread(key)
        objects, namespace = self.world.hub_objects, key.partition("/")[0]
        conflicts = self.world.pods.dependency_conflicts_for(key)
        running = sorted(name for name, count in result.clusters.items() if count)
        found: list[spread_api.DependencyStatus] = []
        listed = hub_objects.propagated(entry.spec.propagate) if entry is not None else ()
        for ref in objects.references(key, entry.template if entry is not None else None, listed):
            named = f"{ref.kind}/{ref.name}"
            clashing = [name for name in sorted(conflicts) if named in conflicts[name]]
            present = objects.exists(namespace, ref.kind, ref.name)
            found.append(spread_api.DependencyStatus(
                kind=ref.kind, name=ref.name, found=present, optional=ref.optional,
                clusters=[name for name in running if name not in clashing] if present else [],
                conflicts=clashing))
        return found

    def _revision(self, key: str, template: Mapping[str, Any] | None) -> str:
        """The template revision spread `key`'s assignments carry (cached per template object)."""
        cached = self._revisions.get(key)
        if cached is None or cached[0] is not template:
            cached = (template, assignments.revision_of(assignments.trimmed_template(template)))
            self._revisions[key] = cached
        return cached[1]

    def _member_workloads(
        self, key: str, reports: dict[str, dict[str, status_core.ClusterPods]], *,
        lost_after: datetime.timedelta,
    ) -> dict[str, status_core.WorkloadStatus]:
        """Each ready cluster's member workload status for spread `key` (pod counts stand in)."""
        reported = self.world.pods.workloads_for(key)
        found: dict[str, status_core.WorkloadStatus] = {}
        for name in sorted(set(reported) | set(reports)):
            if not self.world.ready(name, after=lost_after):
                continue
            pods = reports.get(name, {}).values()
            found[name] = reported.get(name) or status_core.WorkloadStatus(
                replicas=sum(p.active for p in pods), ready=sum(p.ready for p in pods),
                available=sum(p.ready for p in pods), updated=sum(p.active for p in pods))
        return found

    def _write_unless_held(self, ident: tuple[str, str], value: object, write: Callable[[], bool], *,
                           what: str, key: str) -> bool:
        """`_write`, skipped (False) while the hub holds `value` as far as the watch says."""
        same = _same_status if isinstance(value, pydantic.BaseModel) else None
        if self.held.holds(ident, value, same=same):
            return False
        mark = self.held.mark(ident)
        if not self._write(write, what=what, key=key):
            return False
        self.held.remember(ident, value, mark=mark)
        return True

    def _write(self, write: Callable[[], bool], *, what: str, key: str) -> bool:
        """Run one status write; False (logged, quietly for a vanished object) when it failed."""
        if self._hub_away:
            return False
        self.on_write()
        try:
            with kube_errors.translated():
                write()
            return True
        except status_writer.WriterClosed:  # this process stopped acting: the rest of the pass too
            self._hub_away = True
        except kube_errors.NotFound:
            log.debug("status target gone", extra={"kind": what, "key": key})
        except (kube_errors.Unreachable, kube_errors.Timeout) as error:
            self._hub_away = True
            log.warning("status write failed; the rest of this status pass waits for the next",
                        extra={"kind": what, "key": key, "error": str(error)})
        except kube_errors.KubeError as error:
            log.warning("status write failed", extra={"kind": what, "key": key,
                                                      "status": error.status, "reason": error.reason})
        return False


def _same_status(held: object, wanted: object) -> bool:
    """Whether a held status is the one to write, as the writer compares them."""
    return isinstance(held, pydantic.BaseModel) and isinstance(wanted, pydantic.BaseModel) \
        and not status_core.status_changed(held, wanted)
