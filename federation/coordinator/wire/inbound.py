"""Checks on what reaches the coordinator over gRPC, before any of it reaches the World.

Why a module of its own: agents are remote processes (old, buggy, or not ours at all) and the SDK
takes names from people and scripts. Whatever they send must end in a specific status or a
`BadReport` notice with the field at fault — never in UNKNOWN, a dead stream thread, or a World
holding a cluster that cannot exist (an uppercase or 100 kB name) or negative pod counts. Keeping
the checks here keeps the servicers (`agent_service`, `placement_service`) thin, and leaves their
stream and identity logic alone.

The message size limit lives here too, so that the coordinator's server and the tests that prove
an oversized message is answered RESOURCE_EXHAUSTED use the same number; with it the server's
keepalive settings (`federation.rpc.keepalive`, which the agent's channel matches).
"""

from __future__ import annotations

import re
from typing import Any

import pydantic

from federation.api import cluster, problems
from federation.coordinator.model import usage_book
from federation.core import usage
from federation.rpc import agent_pb2, keepalive

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""The largest message the coordinator accepts (gRPC's default, stated): a full inventory of a
5,000-node cluster grouped into pools is a few kB."""
MAX_PENDING_CALLS = 10_000
"""Calls the gRPC core holds before the server's event loop takes them. Past its default (1,000)
it refuses new calls at random with CANCELLED (load shedding): 2,000 agents reconnecting at once,
after a coordinator restart, lost a few percent of their streams to it in the scale test."""
SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.server.max_pending_requests", MAX_PENDING_CALLS),
    ("grpc.server.max_pending_requests_hard_limit", 2 * MAX_PENDING_CALLS),
    ("grpc.so_reuseport", 0),
    *keepalive.SERVER_OPTIONS)
"""Options for the coordinator's gRPC server: the size limit, room for a reconnect storm,
keepalive pings both ways, and no SO_REUSEPORT (gRPC's default on Linux): with it a second
coordinator started on the same port binds silently and the kernel splits the agents' connections
between the two; without it the second one fails to start, naming the port."""

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_LABEL = re.compile(_DNS_LABEL)
DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
MAX_LABEL = 63
MAX_SUBDOMAIN = 253
_SHOWN = 60


def shown(text: str) -> str:
    """`text` quoted for an error message, cut short when long (a 100 kB name must not be echoed:
    gRPC status details travel in headers, and the client refuses headers over 16 kB)."""
    return repr(text) if len(text) <= _SHOWN else repr(text[:_SHOWN]) + f"... ({len(text)} characters)"


def _name_problem(name: str, *, pattern: re.Pattern[str], limit: int, kind: str) -> str | None:
    if not name:
        return "must not be empty"
    if len(name) > limit:
        return f"{shown(name)} is longer than {limit} characters"
    if not pattern.fullmatch(name):
        return (f"{shown(name)} is not a {kind}: use lowercase letters, digits and '-'"
                + (", '.' between labels" if pattern is DNS_SUBDOMAIN else "")
                + ", starting and ending with a letter or digit")
    return None


def cluster_name_problem(name: str) -> str | None:
    """Why `name` cannot name a member cluster (a MemberCluster object's name), or None."""
    return _name_problem(name, pattern=DNS_SUBDOMAIN, limit=MAX_SUBDOMAIN, kind="DNS subdomain")


def spread_key_problem(key: str) -> str | None:
    """Why `key` is not a spread key "namespace/name" (a namespace and an object name), or None."""
    namespace, slash, name = key.partition("/")
    if not slash:
        return f"{shown(key)} is not a spread key; expected \"namespace/name\""
    found = _name_problem(namespace, pattern=DNS_LABEL, limit=MAX_LABEL, kind="DNS label")
    if found is not None:
        return f"namespace {found} (expected \"namespace/name\")"
    found = _name_problem(name, pattern=DNS_SUBDOMAIN, limit=MAX_SUBDOMAIN, kind="DNS subdomain")
    if found is not None:
        return f"name {found} (expected \"namespace/name\")"
    return None


def node_pools(report: agent_pb2.InventoryReport) -> dict[str, cluster.NodePool]:
    """The report's node pools by name, validated; ValueError naming every field at fault."""
    found: dict[str, cluster.NodePool] = {}
    for index, pool in enumerate(report.node_pools):
        data: dict[str, Any] = {
            "name": pool.name, "count": pool.count, "labels": dict(pool.labels),
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in pool.taints],
            "allocatable": dict(pool.allocatable), "requested": dict(pool.requested),
        }
        try:
            found[pool.name] = cluster.NodePool.model_validate(data)
        except pydantic.ValidationError as error:
            where = f"InventoryReport.node_pools[{index}]"
            raise ValueError("; ".join(f"{where}.{p}" for p in problems.problems_from(error))) from None
    return found


_COUNT_FIELDS = ("running", "ready", "pending", "unschedulable", "creating", "deleting")
_WORKLOAD_FIELDS = ("replicas", "ready_replicas", "updated_replicas", "available_replicas",
                    "unavailable_replicas")


def _non_negative(message: Any, fields: tuple[str, ...], where: str) -> None:
    for name in fields:
        value = getattr(message, name)
        if value < 0:
            raise ValueError(f"{where}.{name} is negative ({value})")


def check_pod_counts(report: agent_pb2.PodCountsReport) -> None:
    """ValueError when any count in the report is negative (a pod count never is; the member
    Deployment's status goes to the hub, whose apiserver would refuse it)."""
    for i, item in enumerate(report.spreads):
        where = f"PodCountsReport.spreads[{i}]"
        for j, subset in enumerate(item.subsets):
            _non_negative(subset.counts, _COUNT_FIELDS, f"{where}.subsets[{j}].counts")
            for k, revision in enumerate(subset.revisions):
                _non_negative(revision, ("pods",), f"{where}.subsets[{j}].revisions[{k}]")
        _non_negative(item.unassigned, _COUNT_FIELDS, f"{where}.unassigned")
        if item.HasField("workload"):
            _non_negative(item.workload, _WORKLOAD_FIELDS, f"{where}.workload")


_USAGE_COUNTS = ("ready_pods", "measured_pods", "cpu_requested_pods", "memory_requested_pods",
                 "cpu_usage_milli", "memory_usage_milli", "cpu_utilization_milli", "memory_utilization_milli",
                 "window_milliseconds")
MAX_USAGE_INTERVAL_SECONDS = 3600
"""The longest reporting interval an agent may state (its figures are stale after five of them)."""
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
"""A Kubernetes condition reason (metav1.Condition's pattern)."""


def usage_report(report: agent_pb2.UsageReport) -> usage_book.Report:
    """A checked UsageReport (ValueError naming the field at fault): a stated interval within
    bounds, a condition-reason-shaped unavailability reason, valid distinct spread keys, no
    negative figure, and no more pods measured than Ready (nor with a request than measured)."""
    if not 0 < report.interval_seconds <= MAX_USAGE_INTERVAL_SECONDS:
        raise ValueError(f"UsageReport.interval_seconds must be 1..{MAX_USAGE_INTERVAL_SECONDS} "
                         f"(got {report.interval_seconds})")
    reason = report.metrics_unavailable_reason
    if reason and (len(reason) > 128 or not _REASON.match(reason)):
        raise ValueError(f"UsageReport.metrics_unavailable_reason is not a condition reason: {shown(reason)}")
    found: dict[str, usage.ClusterUsage] = {}
    for i, item in enumerate(report.spreads):
        where = f"UsageReport.spreads[{i}]"
        problem = spread_key_problem(item.spread)
        if problem is not None:
            raise ValueError(f"{where}.spread: {problem}")
        if item.spread in found:
            raise ValueError(f"{where}.spread: {shown(item.spread)} listed twice")
        _non_negative(item, _USAGE_COUNTS, where)
        if item.measured_pods > item.ready_pods or max(item.cpu_requested_pods,
                                                       item.memory_requested_pods) > item.measured_pods:
            raise ValueError(f"{where}: more pods measured than Ready, or with a request than measured")
        found[item.spread] = usage.ClusterUsage(
            cluster="", ready_pods=item.ready_pods, measured_pods=item.measured_pods,
            cpu_requested_pods=item.cpu_requested_pods, memory_requested_pods=item.memory_requested_pods,
            cpu_usage_milli=item.cpu_usage_milli, memory_usage_milli=item.memory_usage_milli,
            cpu_utilization_milli=item.cpu_utilization_milli,
            memory_utilization_milli=item.memory_utilization_milli,
            sampled_at=item.sampled_at.seconds + item.sampled_at.nanos / 1e9
            if item.HasField("sampled_at") and item.measured_pods else 0.0,
            window_seconds=item.window_milliseconds / 1000)
    return usage_book.Report(
        interval_seconds=float(report.interval_seconds),
        availability=usage_book.Availability(reason=reason, message=report.metrics_unavailable_message[:1024]
                                             if reason else ""),
        spreads=found)
