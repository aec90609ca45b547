"""What each agent is sent for a spread: `SpreadAssignment` messages built from a placement.

Why here: turning a spread and its placement into per-cluster assignments is coordinator logic
(which clusters, which quotas, which unschedulable marks are still active, the trimmed template and
its revision). The encoding itself is `federation.rpc.assignment`, the one the agent decodes with.

`changed` compares serialized messages so an agent gets only what differs after the first sync
(and a removal when a spread no longer concerns it).

A cluster is sent a spread only while it has replicas of it: assigned now, or still holding pods
or a workload it was given (`keep`). At 1,000 clusters a spread selects ~100 and runs in ~10; a
message, a member Deployment scaled to 0 and a namespace in each of the other 90 cost every side
and tell nobody anything (Karmada sends nothing there either). A cluster whose quota drops to 0 is
first sent the zero quotas (its Deployment scales to 0, the handover rules apply as everywhere);
the removal — its member workload deleted — follows once it reports no pods of the spread. A
spread scaled to 0 is the exception: its clusters keep their zero assignments (and workloads), as
a Deployment scaled to 0 is kept (the facade passes them as `keep`).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

from google.protobuf import timestamp_pb2

from federation.api import spread as spread_api
from federation.coordinator.model import hub_objects
from federation.coordinator.model import world as world_model
from federation.core import member_copy, placement, reasons
from federation.rpc import agent_pb2, assignment, framing

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


def template_text(template: Mapping[str, Any]) -> str:
    """The template as every message carries it (`template_json`) and its revision hashes it: JSON
    with sorted keys and no spaces, so that one text, made once per template, is both."""
    return json.dumps(template, sort_keys=True, separators=(",", ":"))


def revision_of_text(text: str) -> str:
    """The revision of a template whose `template_text` is `text`."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def revision_of(template: Mapping[str, Any]) -> str:
    """A stable hash of the template: unchanged means the agent need not re-apply it."""
    return revision_of_text(template_text(template))


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


def _rule(subset: spread_api.Subset, *, index: int) -> assignment.SubsetRule:
    """The rule of one subset with quota 0 (each cluster's quota is filled in per message)."""
    required = subset.required_node_selector_term
    return assignment.SubsetRule(
        name=subset.name, index=index, quota=0,
        required_term=_json(required) if required is not None else None,
        preferred_terms=tuple(_json(t) for t in subset.preferred_node_selector_terms),
        tolerations=tuple(_json(t) for t in subset.tolerations),
        patch=subset.patch,
    )


@dataclasses.dataclass(frozen=True)
class SpecParts:
    """What a spread's assignments take from its spec, as plain data (`parts_of`): built once per
    spec, and pickled to a Ray shard without the spec's pydantic models (unpickling 10,000 specs
    cost a shard more than building their messages)."""

    workload: str
    api_version: str
    kind: str
    strategy: assignment.Strategy
    rules: tuple[assignment.SubsetRule, ...]
    """Each subset's rule with quota 0, in spec order (a message numbers them in placement order)."""
    propagate_dependencies: bool


def parts_of(spec: spread_api.FederatedSpreadSpec, *, key: str) -> SpecParts:
    """Spread `key`'s `SpecParts` from its `spec`."""
    settings = spec.schedule_strategy.adaptive_settings()
    return SpecParts(
        workload=spec.target_ref.name or key.partition("/")[2], api_version=spec.target_ref.api_version,
        kind=spec.target_ref.kind,
        strategy=assignment.Strategy(
            type=spec.schedule_strategy.type, unschedulable_seconds=settings.unschedulable_seconds,
            reschedule_critical_seconds=settings.reschedule_critical_seconds),
        rules=tuple(_rule(s, index=i) for i, s in enumerate(spec.subsets)),
        propagate_dependencies=spec.propagate_dependencies)


@dataclasses.dataclass(frozen=True)
class MessageInputs:
    """Everything a spread's assignment messages are built from besides its placement (`build`).

    Plain picklable data, read from the World and the sent ledger under the coordinator's lock:
    a Ray SpreadShard builds the messages of its spreads from it beside their answers (`encode`),
    exactly as the coordinator builds them (the coordinator uses the shard's bytes only when the
    inputs it reads at delivery are these and the placement is the shard's answer)."""

    key: str
    generation: int
    uid: str
    spec: SpecParts
    template: str
    """The hub workload, trimmed (`trimmed_template`), as the messages carry it (`template_text`):
    text, so that a Ray shard is sent it without a pickle of its every field, and builds no JSON."""
    revision: str
    """`revision_of_text(template)`."""
    marks: tuple[placement.UnschedulableMark, ...] = ()
    now: datetime.datetime | None = None
    """The marks still active at `now` are sent, and `encode` stamps it as the issue time."""
    keep: frozenset[str] = frozenset()
    """Clusters sent their (zero) quotas even without replicas: they still hold pods or a workload."""
    keep_unselected: frozenset[str] = frozenset()
    """Clusters sent their zero quotas even when no subset selects them (a member Job)."""
    dependencies: tuple[assignment.DependencyCopy, ...] = ()


class Encoded(NamedTuple):
    """One cluster's assignment serialized inside the `CoordinatorMessage` that carries it (`data`,
    `rpc.framing.assignment_message`: the stream queues it as it is, with no copy made to frame it),
    its `comparable` fingerprint (`print`), and what the coordinator reads of it, so that it routes
    the bytes without parsing them: its `replicas`, `generation` and `quotas` (`quotas` as pairs,
    in the message's order)."""

    data: bytes
    print: bytes
    replicas: int
    generation: int
    quotas: tuple[tuple[str, int], ...]

    def message(self) -> agent_pb2.SpreadAssignment:
        """The assignment itself, parsed."""
        return agent_pb2.CoordinatorMessage.FromString(self.data).assignment


def inputs_of(
    entry: world_model.SpreadEntry, *, marks: Sequence[placement.UnschedulableMark] = (),
    now: datetime.datetime | None = None, keep: Collection[str] = (),
    objects: hub_objects.HubObjects | None = None, keep_unselected: Collection[str] = (),
    template: tuple[str, str] | None = None, parts: SpecParts | None = None,
) -> MessageInputs:
    """Spread `entry`'s `MessageInputs` (`template`: its trimmed template's `template_text` and
    revision, and `parts` its `SpecParts`, when the caller keeps them; built here otherwise)."""
    if template is None:
        text = template_text(trimmed_template(entry.template))
        template = (text, revision_of_text(text))
    spec = entry.spec
    return MessageInputs(
        key=entry.key, generation=entry.generation, uid=entry.uid,
        spec=parts if parts is not None else parts_of(spec, key=entry.key), template=template[0],
        revision=template[1], marks=tuple(marks), now=now, keep=frozenset(keep),
        keep_unselected=frozenset(keep_unselected),
        dependencies=dependency_copies(objects, entry)
        if spec.propagate_dependencies and objects is not None else ())


def for_clusters(
    entry: world_model.SpreadEntry,
    result: placement.Placement,
    *,
    marks: Sequence[placement.UnschedulableMark] = (),
    now: datetime.datetime | None = None,
    only: Collection[str] | None = None,
    keep: Collection[str] = (),
    objects: hub_objects.HubObjects | None = None,
    job_completions: Mapping[str, int] | None = None,
    keep_unselected: Collection[str] = (),
) -> dict[str, agent_pb2.SpreadAssignment]:
    """`build` on spread `entry`'s inputs (`inputs_of`)."""
    inputs = inputs_of(entry, marks=marks, now=now, keep=keep, objects=objects,
                       keep_unselected=keep_unselected)
    return build(inputs, result, only=only, job_completions=job_completions)


def build(
    inputs: MessageInputs, result: placement.Placement, *, only: Collection[str] | None = None,
    job_completions: Mapping[str, int] | None = None,
) -> dict[str, agent_pb2.SpreadAssignment]:
    """One assignment per cluster a subset gives replicas, or that a subset selects and is in
    `inputs.keep` (it still holds pods or a workload of the spread: it is sent its zero quotas until
    they are gone), by cluster name; with `only`, for those clusters alone (the ones with a stream
    to send it on; a resync asks for one cluster's share of every spread). No issue time.

    What every cluster's message shares (template, target, strategy, subset rules) is built once
    and copied; only the quotas and unschedulable marks are per cluster. A failover republishes
    hundreds of spreads to every cluster they use, under the coordinator's lock.

    With `spec.propagateDependencies`, every message carries the member copies of the objects the
    template references and `spec.propagate` lists (`inputs.dependencies`, `dependency_copies` of
    the hub's objects); a PodDisruptionBudget's absolute budget is each cluster's part
    (`divided_budgets`), in proportion to the replicas of every cluster sent the spread, whether or
    not in `only`.

    For a Job with completions, `job_completions` gives each cluster's member Job completions
    (`model.job_spreads.completions`; a cluster absent gets 0: no member Job is created there).
    `inputs.keep_unselected`: clusters sent their zero quotas even when no subset selects them any
    more (a member Job there pauses at parallelism 0 rather than being removed with its completions).
    The template goes as its text (`inputs.template`), never dumped here.
    """
    keep = inputs.keep
    names = every = sorted({name for s in result.subsets for name, count in s.clusters.items()
                            if count or name in keep} | set(inputs.keep_unselected))
    if only is not None:
        names = [name for name in names if name in only]
    if not names:
        return {}
    spec = inputs.spec
    until = _active_until(inputs.marks, seconds=spec.strategy.unschedulable_seconds, now=inputs.now)
    rules = {rule.name: rule for rule in spec.rules}
    shared = assignment.Assignment(
        spread=inputs.key, generation=inputs.generation, namespace=inputs.key.partition("/")[0],
        workload=spec.workload, replicas=0, template_revision=inputs.revision,
        template={},  # its text is set below, as it came
        subsets=tuple(dataclasses.replace(rules[s.name], index=i) if s.name in rules
                      else assignment.SubsetRule(name=s.name, index=i, quota=0)
                      for i, s in enumerate(result.subsets)),
        subset_count=len(result.subsets), strategy=spec.strategy, api_version=spec.api_version,
        kind=spec.kind, spread_uid=inputs.uid, propagate_dependencies=spec.propagate_dependencies,
        dependencies=inputs.dependencies if spec.propagate_dependencies else (),
    )
    base = shared.to_proto()
    base.template_json = inputs.template
    budgets = divided_budgets(shared.dependencies, {
        name: sum(s.clusters.get(name, 0) for s in result.subsets) for name in every})
    messages: dict[str, agent_pb2.SpreadAssignment] = {}
    for cluster_name in names:
        quotas = [s.clusters.get(cluster_name, 0) for s in result.subsets]
        ends = [until.get((s.name, cluster_name)) for s in result.subsets]
        message = assignment.with_shares(
            base, quotas, until=ends, kept=[kept_pods(s, cluster_name) for s in result.subsets],
            job_completions=None if job_completions is None else job_completions.get(cluster_name, 0))
        for index, text in budgets.get(cluster_name, {}).items():
            message.dependencies[index].object_json = text
        messages[cluster_name] = message
    return messages


def kept_pods(subset: placement.SubsetPlacement, cluster: str) -> tuple[int, int]:
    """Of `subset`'s share in `cluster`, the Ready pods its handover keeps there until their
    replacements are Ready, and of those the pods outside their own subset's quota (its `leaving`
    reasons): the agent removes no pod they count (`federation.core.spare_pods`)."""
    leaving = sum(r.count for r in subset.reasons
                  if r.kind is reasons.ReasonKind.LEAVING and r.cluster == cluster)
    return subset.kept_clusters.get(cluster, 0), leaving


def stamped(messages: Mapping[str, agent_pb2.SpreadAssignment], *, now: datetime.datetime | None,
            ) -> Mapping[str, agent_pb2.SpreadAssignment]:
    """`messages`, each stamped with issue time `now` (none when None)."""
    if messages and now is not None:
        issued = timestamp_pb2.Timestamp()
        issued.FromDatetime(now)
        for message in messages.values():
            message.issued_at.CopyFrom(issued)
    return messages


def encode(inputs: MessageInputs, result: placement.Placement) -> dict[str, Encoded]:
    """`build`'s messages for every cluster, stamped with `inputs.now`, serialized with their
    fingerprints: what a SpreadShard returns for its spread (not for a Job: its completions are
    divided from the World's reports, `model.job_spreads`). Each is framed here, in the shard, as
    the `CoordinatorMessage` the agent is sent: framing copies the bytes, a copy per message that
    the coordinator's one thread would otherwise make for every message of a round."""
    messages = stamped(build(inputs, result), now=inputs.now)
    return {name: Encoded(framing.assignment_message(message.SerializeToString()), comparable(message),
                          message.replicas,
                          message.generation, tuple((rule.name, rule.quota) for rule in message.subsets))
            for name, message in messages.items()}


def dependency_copies(objects: hub_objects.HubObjects, entry: world_model.SpreadEntry,
                      ) -> tuple[assignment.DependencyCopy, ...]:
    """Each object spread `entry`'s template references with its member copy, sorted by kind and
    name; the copy is None where the hub has no such object or it must not be copied (a
    ServiceAccount token Secret): the agent then creates nothing and keeps what it made."""
    namespace = entry.key.partition("/")[0]
    result: list[assignment.DependencyCopy] = []
    for ref in objects.references(entry.key, entry.template, hub_objects.propagated(entry.spec.propagate)):
        obj = objects.get(namespace, ref.kind, ref.name)
        body: dict[str, Any] | None = None
        if obj is not None:
            try:
                body = member_copy.member_copy(obj, marks={})
            except member_copy.NotCopyable:
                body = None
        version = body.get("apiVersion") if body is not None else None
        result.append(assignment.DependencyCopy(kind=ref.kind, name=ref.name, body=body,
                                                api_version=version if isinstance(version, str)
                                                else ref.api_version))
    return tuple(result)


_BUDGET_FIELDS = ("minAvailable", "maxUnavailable")


def divided_budgets(copies: Sequence[assignment.DependencyCopy], shares: Mapping[str, int],
                    ) -> dict[str, dict[int, str]]:
    """Per cluster of `shares` (its replicas of the spread): the index in `copies` and the JSON of
    each PodDisruptionBudget whose absolute `minAvailable`/`maxUnavailable` is that cluster's part
    (`member_copy.divide_budget`); a budget with a percentage, or none, is the same everywhere and
    is not listed. A value the apiserver would not have admitted is left as it is."""
    result: dict[str, dict[int, str]] = {name: {} for name in shares}
    for index, dependency in enumerate(copies):
        spec = (dependency.body or {}).get("spec") if dependency.kind == "PodDisruptionBudget" else None
        if not isinstance(spec, Mapping):
            continue
        parts: dict[str, dict[str, int | str]] = {}
        for field in _BUDGET_FIELDS:
            value = spec.get(field)
            if isinstance(value, int) and not isinstance(value, bool):
                try:
                    parts[field] = member_copy.divide_budget(value, shares=shares)
                except ValueError:
                    continue
        if not parts:
            continue
        assert dependency.body is not None
        for name in shares:
            body = {**dependency.body, "spec": {**spec, **{f: part[name] for f, part in parts.items()}}}
            result[name][index] = json.dumps(body)
    return result


def comparable(message: agent_pb2.SpreadAssignment) -> bytes:
    """The message without what changes on every send (generation, issue time), serialized and
    hashed (BLAKE2b, 16 bytes): the sent ledger keeps one per agent and spread — 100,000 at
    10,000 spreads, where the messages themselves (each with its template) weigh a kilobyte or more."""
    copy = agent_pb2.SpreadAssignment()
    copy.CopyFrom(message)
    copy.generation = 0
    copy.ClearField("issued_at")
    return hashlib.blake2b(copy.SerializeToString(deterministic=True), digest_size=16).digest()


def quotas(message: agent_pb2.SpreadAssignment) -> dict[str, int]:
    """The message's quota per subset name: what the agent lets run once it holds the message."""
    return {rule.name: rule.quota for rule in message.subsets}


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
