"""What the coordinator tells an agent about one spread, and its one encoding as `SpreadAssignment`.

Why one type for both ends: the coordinator encodes an assignment and the agent decodes it; two
hand-written halves that must mirror each other drift apart field by field. `Assignment` is the
plain-Python form both sides use (frozen dataclasses with parsed JSON, cheap to read on every
admission and reconcile, easy to build in tests), and `to_proto`/`from_proto` are the only code
that maps it to and from the wire. Kubernetes-shaped fields travel as JSON text in `*_json` fields
(camelCase, as in the CRD); absent optional fields stay unset so that the bytes are minimal.

The coordinator sends one spread to many clusters, and only the quotas and unschedulable marks
differ between them: it encodes the shared part once and `with_shares` fills in each cluster's.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Sequence
from typing import Any

from federation.api import spread as spread_api
from federation.rpc import agent_pb2

DEFAULT_STRATEGY = "Fixed"
DEFAULT_RESCHEDULE_CRITICAL_SECONDS = 30
DEFAULT_UNSCHEDULABLE_SECONDS = 300


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
    leaving: int | None = None
    """Of `quota`, the pods outside their own subset's quota the coordinator keeps here until their
    replacements are Ready; None from a coordinator that does not say (agent.proto SubsetRule)."""
    kept: int | None = None
    """Of `quota`, every Ready pod the coordinator keeps here until its replacement is Ready
    (`leaving` included); None from a coordinator that does not say."""

    def schedulable(self, now: datetime.datetime) -> bool:
        """False while the coordinator keeps this subset out of this cluster."""
        return self.unschedulable_until is None or now >= self.unschedulable_until


@dataclasses.dataclass(frozen=True)
class Strategy:
    """The spread's schedule strategy as the agent applies it."""

    type: str = DEFAULT_STRATEGY
    reschedule_critical_seconds: int = DEFAULT_RESCHEDULE_CRITICAL_SECONDS
    unschedulable_seconds: int = DEFAULT_UNSCHEDULABLE_SECONDS

    @property
    def adaptive(self) -> bool:
        """True for the Adaptive strategy (pods stuck Pending are rescheduled)."""
        return spread_api.is_adaptive(self.type)


@dataclasses.dataclass(frozen=True)
class DependencyCopy:
    """One object the spread's pods need in the member (`Dependency` on the wire). `body` is the
    member copy, None when the hub has no such object; it may hold a Secret's data, so it is
    left out of `repr` (an assignment in a log line or a traceback shows no secret)."""

    kind: str
    name: str
    body: dict[str, Any] | None = dataclasses.field(default=None, repr=False, compare=True)
    api_version: str = "v1"

    @property
    def ref(self) -> str:
        """`Kind/name`, as conflicts and statuses name it."""
        return f"{self.kind}/{self.name}"


@dataclasses.dataclass(frozen=True)
class Assignment:
    """One cluster's share of one spread: Deployment replicas, template and subset table."""

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
    api_version: str = "apps/v1"
    kind: str = "Deployment"
    spread_uid: str = ""
    """The hub FederatedSpread's metadata.uid: which incarnation of the spread owns the member
    Deployment (empty from a coordinator that does not send it)."""
    propagate_dependencies: bool = False
    """spec.propagateDependencies: `dependencies` is the whole list, kept copied for this spread.
    False (or an older coordinator): nothing is copied, and copies made for it are handed over."""
    dependencies: tuple[DependencyCopy, ...] = ()
    """The objects the pod template references, sorted by kind and name."""
    job_completions: int = 0
    """For a spread of a Job with `completions`: the completions of the member Job to create here
    (0: create none here); an existing member Job keeps its own (they are immutable)."""
    federation: str = ""
    """The federation identity of the coordinator that sent it (Welcome.federation_id). Not a
    SpreadAssignment field: the agent's link fills it in from its stream's Welcome."""

    @property
    def name(self) -> str:
        """The spread's name (the value of the spread label)."""
        return self.spread.split("/", 1)[1]

    @property
    def spec_subsets(self) -> int:
        """How many subsets the spread's spec has (n in the deletion-cost formula): the count sent,
        or the rules given when a coordinator sent fewer (an older one sends no count)."""
        return max(self.subset_count, len(self.subsets))

    def rule(self, subset: str) -> SubsetRule | None:
        """The rule of `subset`, if the spread has it."""
        return next((r for r in self.subsets if r.name == subset), None)

    def quotas(self) -> dict[str, int | None]:
        """Quota per subset in this cluster."""
        return {r.name: r.quota for r in self.subsets}

    def to_proto(self) -> agent_pb2.SpreadAssignment:
        """The SpreadAssignment message of this assignment."""
        message = agent_pb2.SpreadAssignment(
            spread=self.spread, generation=self.generation,
            template_json=json.dumps(self.template), template_revision=self.template_revision,
            replicas=self.replicas, subset_count=self.subset_count, spread_uid=self.spread_uid,
            propagate_dependencies=self.propagate_dependencies, job_completions=self.job_completions,
        )
        for dependency in self.dependencies:
            message.dependencies.add(
                api_version=dependency.api_version, kind=dependency.kind, name=dependency.name,
                object_json=json.dumps(dependency.body) if dependency.body is not None else "")
        message.target.api_version = self.api_version
        message.target.kind = self.kind
        message.target.namespace = self.namespace
        message.target.name = self.workload
        message.strategy.type = self.strategy.type
        message.strategy.reschedule_critical_seconds = self.strategy.reschedule_critical_seconds
        message.strategy.unschedulable_seconds = self.strategy.unschedulable_seconds
        for rule in self.subsets:
            item = message.subsets.add(name=rule.name, index=rule.index, quota=rule.quota)
            if rule.leaving is not None:
                item.leaving = rule.leaving
            if rule.kept is not None:
                item.kept = rule.kept
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

    @classmethod
    def from_proto(cls, message: agent_pb2.SpreadAssignment, *, federation: str = "") -> Assignment:
        """Decode a SpreadAssignment; ValueError (with the spread) when its JSON is malformed.

        Unset fields take their defaults: the target from the spread key, the subset count from
        the rules, the strategy settings from the CRD's defaults. `federation` is the identity of
        the stream it arrived on (Welcome.federation_id).
        """
        try:
            rules = tuple(
                SubsetRule(
                    name=r.name, index=r.index, quota=r.quota,
                    required_term=_json(r.required_node_selector_term_json),
                    preferred_terms=tuple(_json(r.preferred_node_selector_terms_json) or ()),
                    tolerations=tuple(_json(r.tolerations_json) or ()),
                    patch=_json(r.patch_json),
                    unschedulable_until=_time(r, "unschedulable_until"),
                    leaving=r.leaving if r.HasField("leaving") else None,
                    kept=r.kept if r.HasField("kept") else None,
                )
                for r in message.subsets
            )
            template = _json(message.template_json) or {}
            dependencies = tuple(
                DependencyCopy(kind=d.kind, name=d.name, body=_json(d.object_json),
                               api_version=d.api_version or "v1")
                for d in message.dependencies
            )
        except json.JSONDecodeError as error:
            raise ValueError(f"assignment {message.spread}: malformed JSON ({error})") from None
        namespace, _, name = message.spread.partition("/")
        strategy = message.strategy
        target = message.target
        return cls(
            spread=message.spread, generation=message.generation,
            namespace=target.namespace or namespace, workload=target.name or name,
            replicas=message.replicas, template=template, template_revision=message.template_revision,
            subsets=tuple(sorted(rules, key=lambda r: r.index)),
            subset_count=message.subset_count or len(rules),
            strategy=Strategy(
                type=strategy.type or DEFAULT_STRATEGY,
                reschedule_critical_seconds=strategy.reschedule_critical_seconds
                or DEFAULT_RESCHEDULE_CRITICAL_SECONDS,
                unschedulable_seconds=strategy.unschedulable_seconds or DEFAULT_UNSCHEDULABLE_SECONDS,
            ),
            api_version=target.api_version or "apps/v1", kind=target.kind or "Deployment",
            spread_uid=message.spread_uid, federation=federation,
            propagate_dependencies=message.propagate_dependencies, dependencies=dependencies,
            job_completions=message.job_completions,
        )


def with_shares(
    base: agent_pb2.SpreadAssignment,
    quotas: Sequence[int],
    *,
    until: Sequence[datetime.datetime | None],
    kept: Sequence[tuple[int, int]] | None = None,
    job_completions: int | None = None,
) -> agent_pb2.SpreadAssignment:
    """A copy of `base` with each subset's quota, unschedulable mark and (when given) the pods kept
    until their replacements are Ready (`kept`: pairs of SubsetRule.kept and .leaving), in subset
    order, filled in, and the replicas set to the quotas' sum: one cluster's message from the
    encoding all share (and, for a Job's, the completions of a member Job created there)."""
    message = agent_pb2.SpreadAssignment()
    message.CopyFrom(base)
    for item, quota, end in zip(message.subsets, quotas, until, strict=True):
        item.quota = quota
        if end is not None:
            item.unschedulable_until.FromDatetime(end)
    if kept is not None:
        for item, (held, leaving) in zip(message.subsets, kept, strict=True):
            item.kept, item.leaving = held, leaving
    message.replicas = sum(quotas)
    if job_completions is not None:
        message.job_completions = job_completions
    return message


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
