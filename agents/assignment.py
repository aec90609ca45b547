"""What the coordinator tells an agent about one spread, as plain Python values.

Why not use the protobuf messages directly: the webhook, controller and workload sync read these
on every admission and reconcile; plain frozen dataclasses with parsed JSON are cheaper to read,
easy to build in tests, and keep protobuf out of everything but the link.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Any

from federation.rpc import agent_pb2

SPREAD_LABEL = "fedspread.io/spread"
SUBSET_ANNOTATION = "fedspread.io/subset"
GENERATION_ANNOTATION = "fedspread.io/generation"
REVISION_LABEL = "pod-template-hash"


@dataclasses.dataclass(frozen=True)
class SubsetRule:
    """One subset as this cluster enforces it."""

    name: str
    index: int
    quota: int
    required_term: dict[str, Any] | None = None
    preferred_terms: tuple[dict[str, Any], ...] = ()
    tolerations: tuple[dict[str, Any], ...] = ()
    patch: dict[str, Any] | None = None
    unschedulable_until: datetime.datetime | None = None

    def schedulable(self, now: datetime.datetime) -> bool:
        """False while the coordinator keeps this subset out of this cluster."""
        return self.unschedulable_until is None or now >= self.unschedulable_until


@dataclasses.dataclass(frozen=True)
class Strategy:
    """The spread's schedule strategy as the agent applies it."""

    type: str = "Fixed"
    reschedule_critical_seconds: int = 30
    unschedulable_seconds: int = 300

    @property
    def adaptive(self) -> bool:
        """True for the Adaptive strategy (pods stuck Pending are rescheduled)."""
        return self.type == "Adaptive"


@dataclasses.dataclass(frozen=True)
class Assignment:
    """This cluster's share of one spread: Deployment replicas, template and subset table."""

    spread: str
    generation: int
    namespace: str
    workload: str
    replicas: int
    template: dict[str, Any]
    template_revision: str
    subsets: tuple[SubsetRule, ...]
    subset_count: int
    strategy: Strategy = Strategy()

    @property
    def name(self) -> str:
        """The spread's name (the value of the fedspread.io/spread label)."""
        return self.spread.split("/", 1)[1]

    def rule(self, subset: str) -> SubsetRule | None:
        """The rule of `subset`, if the spread has it."""
        return next((r for r in self.subsets if r.name == subset), None)

    def quotas(self) -> dict[str, int | None]:
        """Quota per subset in this cluster."""
        return {r.name: r.quota for r in self.subsets}


def spread_key(namespace: str, name: str) -> str:
    """`namespace/name`."""
    return f"{namespace}/{name}"


def _json(text: str) -> Any:
    return json.loads(text) if text else None


def _time(message: Any, field: str) -> datetime.datetime | None:
    if not message.HasField(field):
        return None
    stamp: datetime.datetime = getattr(message, field).ToDatetime(tzinfo=datetime.UTC)
    return stamp


def from_proto(message: agent_pb2.SpreadAssignment) -> Assignment:
    """Decode a SpreadAssignment; ValueError (with the field) when its JSON is malformed."""
    try:
        rules = tuple(
            SubsetRule(
                name=r.name, index=r.index, quota=r.quota,
                required_term=_json(r.required_node_selector_term_json),
                preferred_terms=tuple(_json(r.preferred_node_selector_terms_json) or ()),
                tolerations=tuple(_json(r.tolerations_json) or ()),
                patch=_json(r.patch_json),
                unschedulable_until=_time(r, "unschedulable_until"),
            )
            for r in message.subsets
        )
        template = _json(message.template_json) or {}
    except json.JSONDecodeError as error:
        raise ValueError(f"assignment {message.spread}: malformed JSON ({error})") from None
    namespace, _, name = message.spread.partition("/")
    strategy = message.strategy
    return Assignment(
        spread=message.spread, generation=message.generation,
        namespace=message.target.namespace or namespace, workload=message.target.name or name,
        replicas=message.replicas, template=template, template_revision=message.template_revision,
        subsets=tuple(sorted(rules, key=lambda r: r.index)),
        subset_count=message.subset_count or len(rules),
        strategy=Strategy(
            type=strategy.type or "Fixed",
            reschedule_critical_seconds=strategy.reschedule_critical_seconds or 30,
            unschedulable_seconds=strategy.unschedulable_seconds or 300,
        ),
    )


def to_proto(assignment: Assignment) -> agent_pb2.SpreadAssignment:
    """Encode an Assignment (used by the coordinator and by test stand-ins)."""
    message = agent_pb2.SpreadAssignment(
        spread=assignment.spread, generation=assignment.generation,
        template_json=json.dumps(assignment.template), template_revision=assignment.template_revision,
        replicas=assignment.replicas, subset_count=assignment.subset_count,
    )
    message.target.api_version = "apps/v1"
    message.target.kind = "Deployment"
    message.target.namespace = assignment.namespace
    message.target.name = assignment.workload
    message.strategy.type = assignment.strategy.type
    message.strategy.reschedule_critical_seconds = assignment.strategy.reschedule_critical_seconds
    message.strategy.unschedulable_seconds = assignment.strategy.unschedulable_seconds
    for rule in assignment.subsets:
        item = message.subsets.add(name=rule.name, index=rule.index, quota=rule.quota)
        if rule.required_term is not None:
            item.required_node_selector_term_json = json.dumps(rule.required_term)
        if rule.preferred_terms:
            item.preferred_node_selector_terms_json = json.dumps(list(rule.preferred_terms))
        if rule.tolerations:
            item.tolerations_json = json.dumps(list(rule.tolerations))
        if rule.patch is not None:
            item.patch_json = json.dumps(rule.patch)
        if rule.unschedulable_until is not None:
            item.unschedulable_until.FromDatetime(rule.unschedulable_until)
    return message
