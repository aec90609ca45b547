"""What each agent is sent for a spread: `SpreadAssignment` messages built from a placement.

Why the coordinator builds these itself rather than reusing the agent's dataclasses: the
coordinator must not depend on the agent package; the wire contract (`agent.proto`) is the only
thing they share. The field usage mirrors `agents.assignment.to_proto` exactly (JSON for the
Kubernetes-shaped fields, camelCase as in the CRD), and a unit test round-trips these messages
through the agent's decoder.

`changed` compares serialized messages so an agent gets only what differs after the first sync
(and a removal when a spread no longer concerns it).
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from federation.coordinator.model import world as world_model
from federation.core import placement
from federation.rpc import agent_pb2

_KEPT_METADATA = ("name", "namespace", "labels", "annotations")


def trimmed_template(deployment: Mapping[str, Any] | None) -> dict[str, Any]:
    """The hub Deployment with metadata trimmed to name, namespace, labels, annotations; no status."""
    if not deployment:
        return {}
    body = {k: v for k, v in deployment.items() if k != "status"}
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping):
        body["metadata"] = {k: metadata[k] for k in _KEPT_METADATA if k in metadata}
    return body


def revision_of(template: Mapping[str, Any]) -> str:
    """A stable hash of the template: unchanged means the agent need not re-apply it."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _json(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _active_until(
    marks: Sequence[placement.UnschedulableMark], *, seconds: int, now: datetime.datetime | None
) -> dict[tuple[str, str], datetime.datetime]:
    """When each (subset, cluster) mark expires, for the marks still active at `now`."""
    until: dict[tuple[str, str], datetime.datetime] = {}
    for mark in marks:
        end = mark.since + datetime.timedelta(seconds=seconds)
        if now is not None and end <= now:
            continue
        pair = (mark.subset, mark.cluster)
        if pair not in until or end > until[pair]:
            until[pair] = end
    return until


def for_clusters(
    entry: world_model.SpreadEntry,
    result: placement.Placement,
    *,
    marks: Sequence[placement.UnschedulableMark] = (),
    now: datetime.datetime | None = None,
    only: Collection[str] | None = None,
) -> dict[str, agent_pb2.SpreadAssignment]:
    """One assignment per cluster any subset selects (quota 0 included), by cluster name; with
    `only`, for those clusters alone (the ones with a stream to send it on; a resync asks for one
    cluster's share of every spread).

    What every cluster's message shares (template, target, strategy, subset rules) is built once
    and copied; only the quotas and unschedulable marks are per cluster. A failover republishes
    hundreds of spreads to every cluster they use, under the coordinator's lock.
    """
    names = sorted({name for s in result.subsets for name in s.clusters})
    if only is not None:
        names = [name for name in names if name in only]
    if not names:
        return {}
    spec = entry.spec
    settings = spec.schedule_strategy.adaptive_settings()
    until = _active_until(marks, seconds=settings.unschedulable_seconds, now=now)
    template = trimmed_template(entry.template)
    namespace, _, name = entry.key.partition("/")
    base = agent_pb2.SpreadAssignment(
        spread=entry.key, generation=entry.generation, template_json=json.dumps(template),
        template_revision=revision_of(template), subset_count=len(result.subsets),
    )
    base.target.api_version = spec.target_ref.api_version
    base.target.kind = spec.target_ref.kind
    base.target.namespace = namespace
    base.target.name = spec.target_ref.name or name
    base.strategy.type = spec.schedule_strategy.type
    base.strategy.reschedule_critical_seconds = settings.reschedule_critical_seconds
    base.strategy.unschedulable_seconds = settings.unschedulable_seconds
    subsets = {s.name: s for s in spec.subsets}
    for index, subset_result in enumerate(result.subsets):
        item = base.subsets.add(name=subset_result.name, index=index)
        subset = subsets.get(subset_result.name)
        if subset is not None:
            if subset.required_node_selector_term is not None:
                item.required_node_selector_term_json = json.dumps(_json(subset.required_node_selector_term))
            if subset.preferred_node_selector_terms:
                item.preferred_node_selector_terms_json = json.dumps(
                    [_json(t) for t in subset.preferred_node_selector_terms]
                )
            if subset.tolerations:
                item.tolerations_json = json.dumps([_json(t) for t in subset.tolerations])
            if subset.patch is not None:
                item.patch_json = json.dumps(subset.patch)
    messages: dict[str, agent_pb2.SpreadAssignment] = {}
    for cluster_name in names:
        message = agent_pb2.SpreadAssignment()
        message.CopyFrom(base)
        total = 0
        for item, subset_result in zip(message.subsets, result.subsets, strict=True):
            quota = subset_result.clusters.get(cluster_name, 0)
            item.quota = quota
            total += quota
            end = until.get((subset_result.name, cluster_name)) if until else None
            if end is not None:
                item.unschedulable_until.FromDatetime(end)
        message.replicas = total
        messages[cluster_name] = message
    return messages


def comparable(message: agent_pb2.SpreadAssignment) -> bytes:
    """The message without what changes on every send (generation, issue time), serialized."""
    copy = agent_pb2.SpreadAssignment()
    copy.CopyFrom(message)
    copy.generation = 0
    copy.ClearField("issued_at")
    data: bytes = copy.SerializeToString(deterministic=True)
    return data


def changed(
    old: Mapping[str, agent_pb2.SpreadAssignment], new: Mapping[str, agent_pb2.SpreadAssignment]
) -> dict[str, agent_pb2.SpreadAssignment | None]:
    """What to send per cluster: the new assignment where it differs, None where it must be removed."""
    delta: dict[str, agent_pb2.SpreadAssignment | None] = {}
    for name in sorted(set(old) | set(new)):
        after = new.get(name)
        before = old.get(name)
        if after is None:
            delta[name] = None
        elif before is None or comparable(before) != comparable(after):
            delta[name] = after
    return delta


def removal(
    key: str, *, generation: int, orphan: bool = False, reason: str = ""
) -> agent_pb2.SpreadRemoval:
    """The removal of spread `key` from an agent (orphan: leave the member workload running)."""
    return agent_pb2.SpreadRemoval(spread=key, generation=generation, orphan=orphan, reason=reason)
