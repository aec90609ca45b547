"""A MemberCluster's status, when one is due: its readiness, heartbeat, decommission, metrics and nodes.

Why its own module: the status pass (`hub.statuses`) writes three kinds of status; a member's is
decided from the World and the agent's reports alone, and is written at most every
`--member-status-seconds` unless something a user acts on changed (readiness, a decommission's
progress, the metrics API's availability): a heartbeat alone must not rewrite a thousand
MemberClusters every pass. Computed under the facade's lock, as the rest of a pass; each call
costs one cluster's facts, never a snapshot of the whole federation.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from federation.api import cluster as cluster_api
from federation.api import common
from federation.coordinator import facade
from federation.core import status as status_core

Written = tuple[cluster_api.MemberClusterStatus, datetime.datetime]
"""A member's status as last written, and when."""


def due(coordinator: facade.Coordinator, name: str, *, now: datetime.datetime,
        agent_versions: Mapping[str, str], written: Written | None,
        every_seconds: float) -> tuple[str, cluster_api.MemberClusterStatus] | None:
    """Member `name`'s status to write now, or None when the one `written` still says it (and was
    written less than `every_seconds` ago). Call under the facade's lock."""
    world = coordinator.world
    lost_after = datetime.timedelta(seconds=world.min_lost_seconds())
    ready = world.ready(name, after=lost_after)
    last = world.tracker.last(name)
    old, written_at = written if written is not None else (None, None)
    previous = list(old.conditions) if old is not None else []
    was_ready = any(c.type == "Ready" and c.status == "True" for c in previous)
    retiring = status_core.decommission_condition(
        holding=sorted(world.held_at(name)), previous=previous, now=now,
    ) if world.decommissioned(name) else None
    said = next((c for c in previous if c.type == "Decommissioned"), None)
    same_retiring = (said is None and retiring is None) or (
        said is not None and retiring is not None and said.message == retiring.message)
    metrics = metrics_condition(coordinator, name, previous=previous, now=now)
    shown = next((c for c in previous if c.type == status_core.METRICS_AVAILABLE), None)
    same_metrics = metrics is None or (shown is not None and (
        shown.status, shown.reason, shown.message) == (metrics.status, metrics.reason, metrics.message))
    if written_at is not None and was_ready == ready and same_retiring and same_metrics and \
            now - written_at < datetime.timedelta(seconds=every_seconds):
        return None
    nodes = sum(p.count for p in world.node_pools(name))  # one cluster's pools, not a snapshot's
    conditions = [c for c in status_core.member_cluster_conditions(
        ready=ready, last_heartbeat=last, lost_after=lost_after, previous=previous, now=now)
        if c.type not in ("Decommissioned", status_core.METRICS_AVAILABLE)] + (
            [retiring] if retiring is not None else []) + ([metrics] if metrics is not None else [])
    return name, cluster_api.MemberClusterStatus(
        conditions=conditions, last_heartbeat_time=last, agent_version=agent_versions.get(name, ""),
        capacity=cluster_api.CapacitySummary(nodes=nodes))


def metrics_condition(coordinator: facade.Coordinator, name: str, *, previous: list[common.Condition],
                      now: datetime.datetime) -> common.Condition | None:
    """`MetricsAvailable` from the agent's last usage report; None until its agent has said (an
    agent from before usage reports never does: the condition it had stays)."""
    said = coordinator.usage_book.availability(name)
    if said is None:
        return next((c for c in previous if c.type == status_core.METRICS_AVAILABLE), None)
    return status_core.metrics_condition(reason=said.reason, message=said.message, previous=previous,
                                         now=now)
