"""Messages from the agent's parts to the coordinator, queued until the link can send them.

Why a queue between them: the controller and reporter must never block on the network (the agent
keeps enforcing while the coordinator is away — fail static), and the link must be able to resend
the latest state after a reconnect. Reports are *latest-wins*: only the newest inventory and pod
counts are kept; unschedulable reports are events and are kept in order (bounded). Usage reports
are latest-wins too, and drained only when new.

A PodCountsReport also carries, per spread, the member Deployment's status: the coordinator adds
those up into the hub Deployment's status, and the latest-wins report is already resent on every
reconnect, so the status needs no message of its own.
"""

from __future__ import annotations

import collections
import datetime
import threading
from collections.abc import Collection, Mapping, Sequence

from agents import pod_ledger
from agents.cache import views
from federation.api import cluster
from federation.core import status as status_mod
from federation.rpc import agent_pb2, common_pb2

MAX_EVENTS = 1000


def _stamp(message: object, field: str, when: datetime.datetime) -> None:
    getattr(message, field).FromDatetime(when)


def inventory_message(pools: list[cluster.NodePool], *, sequence: int,
                      observed_at: datetime.datetime) -> agent_pb2.AgentMessage:
    """A full InventoryReport of the cluster's node pools."""
    report = agent_pb2.InventoryReport(full=True, sequence=sequence)
    _stamp(report, "observed_at", observed_at)
    for pool in pools:
        report.node_pools.append(common_pb2.NodePool(
            name=pool.name, count=pool.count, labels=pool.labels,
            taints=[common_pb2.Taint(key=t.key, value=t.value, effect=t.effect) for t in pool.taints],
            allocatable=pool.allocatable, requested=pool.requested,
        ))
    return agent_pb2.AgentMessage(inventory=report)


def workload_status(status: views.DeploymentStatus) -> agent_pb2.WorkloadStatus:
    """The member workload's status as agent.proto carries it (a member Job's in its `job` part)."""
    message = agent_pb2.WorkloadStatus(
        observed_generation=status.observed_generation, replicas=status.replicas,
        ready_replicas=status.ready_replicas, updated_replicas=status.updated_replicas,
        available_replicas=status.available_replicas, unavailable_replicas=status.unavailable_replicas)
    if status.template_revision is not None:
        message.observed_template_revision = status.template_revision
    job = status.job
    if job is not None:
        message.job.CopyFrom(agent_pb2.JobStatus(
            active=job.active, succeeded=job.succeeded, failed=job.failed, complete=job.complete,
            failed_condition=job.failed_condition, failed_reason=job.failed_reason,
            has_completions=job.completions is not None, completions=job.completions or 0))
        for field, when in (("start_time", job.start_time), ("completion_time", job.completion_time),
                            ("failed_time", job.failed_time)):
            if when is not None:
                _stamp(message.job, field, when)
    return message


def counts_message(per_spread: Mapping[str, Mapping[str, pod_ledger.SubsetCounts]], *, sequence: int,
                   generations: Mapping[str, int], observed_at: datetime.datetime,
                   workloads: Mapping[str, views.DeploymentStatus | None] | None = None,
                   conflicts: Mapping[str, str] | None = None, assigned: Collection[str] | None = None,
                   first_after_start: bool = False,
                   dependency_conflicts: Mapping[str, Sequence[str]] | None = None,
                   misplaced: Mapping[str, str] | None = None,
                   autoscalers: Mapping[str, Sequence[str]] | None = None) -> agent_pb2.AgentMessage:
    """A full PodCountsReport: per spread, per subset, pods by state, the member Deployment's
    status (`workload` left unset for a spread without one in `workloads`), and why the target
    Deployment is left alone for a spread in `conflicts` (not ours: agents.ownership), and which
    objects its pods need are, in `dependency_conflicts` (`Kind/name`); `misplaced`: per spread, the
    report of StatefulSet pods whose ordinal maps to another subset now; `autoscalers`: per spread, the
    member HPAs ("namespace/name") that scale its member workload.

    `assigned`: the spreads whose assignment was held, with a synced cache, when counting — the
    only ones the report is evidence for (agent.proto; None: not said, as agents before the field
    did); `first_after_start`: this agent process has sent no report before (it knows nothing yet)."""
    report = agent_pb2.PodCountsReport(full=True, sequence=sequence, first_after_start=first_after_start)
    if assigned is not None:
        report.lists_assigned = True
        report.assigned.extend(sorted(assigned))
    _stamp(report, "observed_at", observed_at)
    for spread, subsets in sorted(per_spread.items()):
        item = report.spreads.add(spread=spread, generation=generations.get(spread, 0))
        for name, counts in subsets.items():
            message = agent_pb2.PodCounts(
                running=counts.running, ready=counts.ready, pending=counts.pending,
                unschedulable=counts.unschedulable, creating=counts.creating, deleting=counts.deleting)
            if name == status_mod.UNASSIGNED:  # pods in no subset: their own field
                item.unassigned.CopyFrom(message)
            else:
                entry = item.subsets.add(subset=name, counts=message)
                for revision, pods in counts.revisions:
                    entry.revisions.add(revision=revision, pods=pods)
        status = (workloads or {}).get(spread)
        if status is not None:
            item.workload.CopyFrom(workload_status(status))
        item.conflict = (conflicts or {}).get(spread, "")
        item.dependency_conflicts.extend((dependency_conflicts or {}).get(spread, ()))
        item.misplaced = (misplaced or {}).get(spread, "")
        item.autoscalers.extend((autoscalers or {}).get(spread, ()))
    return agent_pb2.AgentMessage(pod_counts=report)


class ReportOutbox:
    """Thread-safe: latest inventory and counts, plus ordered events, for the link to drain."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._inventory: agent_pb2.AgentMessage | None = None
        self._counts: agent_pb2.AgentMessage | None = None
        self._usage: agent_pb2.AgentMessage | None = None
        self._usage_new = False
        """The usage report is drained only when new (not with every counts report: it is the
        coordinator's sign of a live usage reporter, `model.usage_book`)."""
        self._events: collections.deque[agent_pb2.AgentMessage] = collections.deque(maxlen=MAX_EVENTS)
        self._dirty = False

    def put_inventory(self, message: agent_pb2.AgentMessage) -> None:
        """Replace the latest inventory report."""
        with self._lock:
            self._inventory = message
            self._dirty = True
            self._lock.notify_all()

    def put_counts(self, message: agent_pb2.AgentMessage) -> None:
        """Replace the latest pod counts report."""
        with self._lock:
            self._counts = message
            self._dirty = True
            self._lock.notify_all()

    def put_usage(self, message: agent_pb2.AgentMessage) -> None:
        """Replace the latest usage report (complete, like the counts)."""
        with self._lock:
            self._usage = message
            self._usage_new = True
            self._lock.notify_all()

    def put_event(self, message: agent_pb2.AgentMessage) -> None:
        """Queue an event (unschedulable report, ack); the oldest is dropped past 1,000."""
        with self._lock:
            self._events.append(message)
            self._dirty = True
            self._lock.notify_all()

    def unschedulable(self, *, spread: str, subset: str, since: datetime.datetime, pods: int,
                      reason: str, generation: int) -> None:
        """Queue an UnschedulableReport."""
        report = agent_pb2.UnschedulableReport(spread=spread, subset=subset, pod_count=pods,
                                               reason=reason, generation=generation)
        _stamp(report, "since", since)
        self.put_event(agent_pb2.AgentMessage(unschedulable=report))

    def drain(self, *, timeout: float | None = None) -> list[agent_pb2.AgentMessage]:
        """Wait up to `timeout` for something new; return events, then the latest reports."""
        with self._lock:
            if not self._dirty and not self._usage_new:
                self._lock.wait(timeout)
            out = list(self._events)
            self._events.clear()
            if self._dirty:
                out += [m for m in (self._inventory, self._counts) if m is not None]
            if self._usage_new and self._usage is not None:
                out.append(self._usage)
            self._dirty = self._usage_new = False
            return out

    def latest(self) -> list[agent_pb2.AgentMessage]:
        """The latest reports, for a full resync after reconnecting (events are not repeated)."""
        with self._lock:
            return [m for m in (self._inventory, self._counts, self._usage) if m is not None]
