"""The Hello that opens every stream; what it lists as applied: the assignments held in memory, and
the member workloads (Deployments, ReplicaSets no Deployment controls) marked as ours.

Why the workloads too: the coordinator removes a spread from a cluster only when it knows why,
and it learns what a cluster runs from the Hello. Nothing on the agent deletes a member Deployment
because no assignment names it any more (`agents.ownership`), so a Deployment whose assignment
was lost — the agent restarted (its bookkeeping is in memory) while the spread was de-selected for
its cluster — would otherwise stay for ever: listed, it gets its removal at the next resync.

Each entry names the spread, the generation and template revision of the assignment held (0 and
empty when only a Deployment is known), the spread's pods per subset (unknown is not zero: a
restarted agent's pods may have grown while it was away, and the coordinator must not send it a
quota below them before it reports; per subset, because a count put in the wrong subset would
raise that subset's quota above its cap; pods of no subset under their own key, which the
coordinator keeps as strays, as it keeps a removed subset's pods) and the spread uid, so that
the coordinator can tell the live spread from an earlier one of the same name (and orphan,
rather than delete, the latter). A spread is listed once per distinct uid: a Deployment that
carries another uid than the assignment held (one not adopted yet) is listed beside it.

Why the link waits for the cache (`wait_for_cache`): a Hello built from a cache that has not
listed the member's Deployments yet lists none of them. The first stream waits for that list, up
to a deadline; past it the Hello lists only the bookkeeping (the coordinator must be heard from,
or it fails the cluster over), and later streams list what the cache holds by then.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from agents import ownership
from agents.cache import store, views
from federation.core import status
from federation.rpc import agent_pb2, capabilities
from federation.rpc import assignment as assignment_mod

LOG = logging.getLogger(__name__)


def agent_version() -> str:
    """The installed fedspread version ("0+unknown" when running from an uninstalled tree)."""
    try:
        return importlib.metadata.version("fedspread")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


class DeploymentCache(Protocol):
    """What the Hello needs of `agents.cache.store.Cache`."""

    def wait_synced(self, timeout: float, *, kinds: tuple[str, ...] = ()) -> bool:
        """True once `kinds` (every kind if none) have been listed; False after `timeout` seconds."""

    def workloads(self) -> list[views.WorkloadView]:
        """Every member workload labelled fedspread.io/spread."""

    def spread_pods(self, spread: str) -> list[views.SpreadPod]:
        """The pods of spread key `spread`."""


def build(*, cluster: str, labels: Mapping[str, str], resume_token: str, started_at: datetime.datetime,
          applied: Iterable[agent_pb2.AppliedSpread]) -> agent_pb2.AgentMessage:
    """The Hello: identity, topology labels, capabilities and what is enforced right now."""
    hello = agent_pb2.Hello(cluster_name=cluster, agent_version=agent_version(), topology_labels=labels,
                            resume_token=resume_token, applied=applied,
                            capabilities=[capabilities.RESYNC_COMPLETE_CAPABILITY,
                                          capabilities.MESSAGE_BATCHES_CAPABILITY])
    hello.started_at.FromDatetime(started_at)
    return agent_pb2.AgentMessage(hello=hello)


def listing(assignments: Iterable[assignment_mod.Assignment], workloads: Iterable[views.WorkloadView],
            *, federation: str, pods_of: Callable[[str], Iterable[views.SpreadPod]] = lambda _: (),
            ) -> list[agent_pb2.AppliedSpread]:
    """The Hello's applied spreads: every assignment held, then every (spread, uid) of a member
    workload marked with `federation` that no assignment held names; sorted by spread and uid.
    Each with the spread's pods per subset (`pods_of`: the cache's pods of a spread key)."""
    entries: dict[tuple[str, str], agent_pb2.AppliedSpread] = {}
    for value in assignments:
        entries[(value.spread, value.spread_uid)] = agent_pb2.AppliedSpread(
            spread=value.spread, generation=value.generation, template_revision=value.template_revision,
            spread_uid=value.spread_uid)
    for view in workloads:
        marked = ownership.marked_spread(federation_label=view.federation, annotations=view.annotations,
                                         federation=federation)
        if marked is not None and marked not in entries:
            entries[marked] = agent_pb2.AppliedSpread(spread=marked[0], generation=0, spread_uid=marked[1])
    counted: dict[str, dict[str, int]] = {}
    for (spread, _), entry in entries.items():
        if spread not in counted:
            counted[spread] = subset_pods(pods_of(spread))
        entry.subset_pods.update(counted[spread])
    return [entries[key] for key in sorted(entries)]


def subset_pods(pods: Iterable[views.SpreadPod]) -> dict[str, int]:
    """The pods per subset that hold a place in the cluster: made by a controller, not being
    deleted and not finished; those of no subset under `status.UNASSIGNED`, as the agent's reports
    count them (the coordinator keeps them whole, in no subset's quota, until a report verifies
    them: left out, a coordinator restarted from a status that gave the cluster no share would
    send it a quota of zero, and its running pods would go)."""
    found: dict[str, int] = {}
    for pod in pods:
        record = pod.record
        if record.owned and record.active:
            subset = record.subset or status.UNASSIGNED
            found[subset] = found.get(subset, 0) + 1
    return found


def wait_for_cache(cache: DeploymentCache, *, deadline_seconds: float, stopped: Callable[[], bool]) -> bool:
    """Wait until `cache` has listed the member's workloads and the spreads' pods, at most
    `deadline_seconds` (and not past `stopped()`); whether it has. Past the deadline, a warning
    says what the Hello lacks."""
    end = time.monotonic() + deadline_seconds
    while not stopped():
        left = end - time.monotonic()
        if cache.wait_synced(max(0.0, min(left, 0.5)), kinds=(*store.WORKLOAD_KINDS, store.SPREAD_PODS)):
            return True
        if left <= 0:
            LOG.warning("member workloads or pods not listed yet; this Hello lists only what is "
                        "known, the next one lists them", extra={"waited_s": deadline_seconds})
            return False
    return False
