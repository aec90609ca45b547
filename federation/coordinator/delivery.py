"""What each agent is sent: assignments, removals and full resyncs, against what it holds.

Why a module of its own: the facade (`coordinator.facade`) decides *when* to place and whom to
tell; what a given agent must be sent for a spread — given the placement, what it reported and
what it was last sent (`wire.deliveries.SentLedger`) — is the do-no-harm half of the coordinator
and deserves to be read on its own:

- **A removal only for a known reason.** A spread an agent holds but is not sent gets a removal
  only when the lifecycle says why (`lifecycle.Lifecycle.leftover`): deleted (its policy decides),
  or an earlier spread of the name (released, never deleted). A live spread placed without the
  cluster is kept until the cluster's first full report (unknown is not zero), then handed over
  as any cluster leaving the selection. A spread never known here is kept (fail static).
- **Holders are visited.** Clusters that hold a spread's pods, were last sent replicas of it, or
  (scaled to zero) hold its workload are sent its assignment even at a share of 0; a Job's member
  workload is never removed for a share of 0 or a deselection (it pauses at parallelism 0).
- **Deltas only.** An assignment equal to what the agent holds is not sent again
  (`SentLedger.deliver`).

Everything here runs under the facade's lock; nothing here places.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Collection, Mapping

from federation import clock as clock_mod
from federation.coordinator.agent_stream import AgentStream
from federation.coordinator.model import job_spreads
from federation.coordinator.model import world as world_model
from federation.coordinator.wire import assignments, deliveries, shard_messages
from federation.rpc import agent_pb2, capabilities

log = logging.getLogger(__name__)

NOT_SELECTED = "cluster no longer selected"
NO_REPLICAS_LEFT = "no replicas here: a share of 0 and no pods left"


@dataclasses.dataclass(frozen=True)
class _Built:
    """What a spread's messages are built from that changes only with its template or spec."""

    template: object
    """The hub template it was built from (compared by identity)."""
    spec: object
    """The spec it was built from (compared by identity)."""
    text: str
    """The template trimmed, as the messages carry it (`assignments.template_text`)."""
    revision: str
    parts: assignments.SpecParts


class Delivery:
    """What each connected agent holds and is sent (the streams are the facade's, shared)."""

    def __init__(self, world: world_model.World, *, clock: clock_mod.Clock,
                 streams: Mapping[str, AgentStream]) -> None:
        self.world = world
        self.clock = clock
        self._streams = streams
        self.sent = deliveries.SentLedger()
        """What each agent was last sent per spread (`wire.deliveries`)."""
        self._built: dict[str, _Built] = {}
        """Per spread, its hub template and spec (the objects), the trimmed template's text and
        revision, and the spec's `SpecParts`: built once per template and spec, not once per publish."""

    def resync(self, stream: AgentStream, *, waiting: frozenset[str]) -> None:
        """Every assignment for the stream's cluster, removals for stale applied spreads, the notice;
        nothing of the spreads `waiting` (`model.settling`): the agent keeps what it runs of them."""
        name, sent = stream.cluster, {}
        for key in sorted(self.world.placements.keys() - waiting):
            # A spread the agent holds a workload of is sent even at quota 0 (removed once empty).
            applied = (name,) if key in stream.applied else ()
            message = self.assignments_for(key, only={name}, keep=applied).get(name)
            if message is not None:
                sent[key] = message
                stream.send(assignment=message)
                self.world.pods.sent(name, key, quotas=assignments.quotas(message))
        outcomes = {key: self.leftover(stream, key)  # a waiting spread: kept as it is
                    for key in sorted(set(stream.applied) - set(sent) - waiting)}
        removed, unknown = (sum(1 for o in outcomes.values() if o == kind) for kind in ("removed", "unknown"))
        deselected = {key for key, outcome in outcomes.items() if outcome == "deselected"}
        self.sent.reset(name, sent)
        for key in deselected:  # the next publish of each sends its new assignment or removal
            entry = self.world.spread(key)
            self.sent.holding_unknown(name, key, generation=entry.generation if entry else 0)
        stream.awaiting_report = deselected
        stream.resynced = True
        stream.send(notice=agent_pb2.Notice(
            severity=agent_pb2.Notice.SEVERITY_INFO, code=capabilities.RESYNC_COMPLETE_CODE,
            message=f"{len(sent)} assignments, {removed} removals, {unknown} unknown, kept"))
        log.info("agent resynced", extra={"cluster": name, "assignments": len(sent), "removals": removed,
                                          "unknown_kept": unknown})

    def leftover(self, stream: AgentStream, key: str) -> str:
        """Spread `key`, which the stream's agent holds and was not sent: removed by the lifecycle's
        verdict ("removed"), kept as never known here ("unknown", fail static), kept until the
        cluster reports ("deselected"), or kept ("kept")."""
        entry = self.world.spread(key)
        verdict = self.world.lifecycle.leftover(
            key, live_uid=None if entry is None else entry.uid, placed=key in self.world.placements,
            applied_uids=stream.applied[key])
        if not verdict.remove:
            return "unknown" if entry is None else "deselected" if verdict.deselected else "kept"
        stream.send(removal=assignments.removal(
            key, generation=(entry.generation if entry else 0) + 1, orphan=verdict.orphan,
            reason=verdict.reason))
        if verdict.orphan:  # released, not deleted: a spread of this key created again adopts it
            self.world.release_pods(stream.cluster, key)
        else:
            self.world.forget_pods(stream.cluster, key)
        return "removed"

    def inputs_for(self, key: str, *, now: datetime.datetime,
                   keep: Collection[str] = ()) -> assignments.MessageInputs | None:
        """What spread `key`'s assignments are built from (`wire.assignments.MessageInputs`), to
        clusters with replicas of it, and to the ones that still hold its pods (reported), were
        last sent replicas of it, or are in `keep`; None when it is not known here."""
        entry = self.world.spread(key)
        if entry is None:
            self._built.pop(key, None)
            return None
        holding = self.world.pods.holding(key) | self.sent.gave_replicas(key) | set(keep)
        if entry.replicas == 0:  # scaled to zero: the member workloads stay, at 0 (HPAs, PDBs)
            holding |= self.sent.holders(key)
        # A member Job is never removed for a share of 0 or a deselection: it pauses at parallelism 0
        # (its completions are immutable; removed, they would be divided again and run twice).
        member_jobs = set(self.world.pods.workloads_for(key)) if job_spreads.is_job(entry) else set()
        cached = self._built_for(entry)
        return assignments.inputs_of(
            entry, marks=self.world.marks_for(key), now=now, keep=holding | member_jobs,
            objects=self.world.hub_objects, keep_unselected=member_jobs,
            template=(cached.text, cached.revision), parts=cached.parts)

    def _built_for(self, entry: world_model.SpreadEntry) -> _Built:
        cached = self._built.get(entry.key)
        if cached is None or cached.template is not entry.template or cached.spec is not entry.spec:
            text = assignments.template_text(assignments.trimmed_template(entry.template))
            cached = self._built[entry.key] = _Built(
                entry.template, entry.spec, text, assignments.revision_of_text(text),
                assignments.parts_of(entry.spec, key=entry.key))
        return cached

    def inputs_for_shards(self, key: str, *, now: datetime.datetime) -> assignments.MessageInputs | None:
        """`inputs_for`, for a SpreadShard to build spread `key`'s messages from beside its answer
        (`wire.shard_messages.Encodings`); None for a Job (its completions follow the World's reports)."""
        entry = self.world.spread(key)
        return None if entry is None or job_spreads.is_job(entry) else self.inputs_for(key, now=now)

    def assignments_for(
        self, key: str, *, only: Collection[str] | None = None, keep: Collection[str] = (),
        now: datetime.datetime | None = None,
    ) -> Mapping[str, agent_pb2.SpreadAssignment]:
        """Spread `key`'s assignments (`inputs_for`), issued at `now` (the clock's by default)."""
        now = now or self.clock()
        entry, result = self.world.spread(key), self.world.placements.get(key)
        inputs = self.inputs_for(key, now=now, keep=keep)
        if entry is None or result is None or inputs is None:
            return {}
        return assignments.stamped(assignments.build(
            inputs, result, only=only, job_completions=job_spreads.completions(self.world, entry, result)),
            now=now)

    def publish_spread(self, key: str, *, listening: Collection[str], now: datetime.datetime,
                       settled: bool, encodings: shard_messages.Encodings | None = None) -> None:
        """Send each listening agent what changed for spread `key`, just placed, against what the
        ledger says it holds: the SpreadShard's encoding of its messages when it was built from this
        placement and from the inputs read now (`wire.shard_messages.Encodings.usable`), else built here.
        `settled`: placed for the first time since its wait ended (`visit_settled`)."""
        result = self.world.placements[key]
        encoded = None
        if encodings is not None and encodings.answered_for(key):  # not for a spread placed here alone
            inputs = self.inputs_for_shards(key, now=now)
            encoded = None if inputs is None else encodings.usable(key, placed=result, inputs=inputs)
        new: Mapping[str, agent_pb2.SpreadAssignment | assignments.Encoded] = (
            {name: item for name, item in encoded.items() if name in listening} if encoded is not None
            else self.assignments_for(key, only=listening, now=now))
        if settled:
            self.visit_settled(key, assigned=new.keys())
        selected = {name for s in result.subsets for name in s.clusters}
        for name in self.sent.clusters_for(key, new):
            stream = self._streams.get(name)
            if name not in new and stream is not None and key in stream.awaiting_report:
                continue  # unknown is not zero: removed (if at all) after its first report
            self.deliver(name, key, new.get(name),
                         reason=NO_REPLICAS_LEFT if name in selected else NOT_SELECTED)

    def visit_settled(self, key: str, *, assigned: Collection[str]) -> None:
        """Spread `key` is placed for the first time since its wait ended (`model.settling`). An
        agent that held it at its resync was sent nothing then, so the ledger does not know it
        holds it: a cluster this placement assigns nothing gets what a resync would have done
        (`leftover`) — the publish then sends its handover or removal, and one whose pods are not
        verified yet waits for its first report (unknown is not zero)."""
        entry = self.world.spread(key)
        for name, stream in self._streams.items():
            if (not stream.resynced or key not in stream.applied or name in assigned
                    or name in self.sent.holders(key)):
                continue
            if self.leftover(stream, key) == "deselected":
                self.sent.holding_unknown(name, key, generation=entry.generation if entry else 0)
                if not self.world.pods.verified(name, key):
                    stream.awaiting_report.add(key)

    def remove_everywhere(self, key: str, *, orphan: bool, reason: str) -> None:
        """A removal of deleted spread `key` to every cluster that holds it."""
        self._built.pop(key, None)
        for name in self.sent.clusters_for(key, ()):
            self.deliver(name, key, None, reason=reason, orphan=orphan)

    def deliver(
        self, name: str, key: str, new: agent_pb2.SpreadAssignment | assignments.Encoded | None, *,
        reason: str = NOT_SELECTED, orphan: bool = False,
    ) -> None:
        """Send cluster `name`'s resynced stream `new` (None: a removal, orphaning the workload when
        `orphan`; encoded: its bytes as the shard made them) unless it holds the same."""
        stream = self._streams.get(name)
        if stream is None or not stream.resynced:
            return
        message = self.sent.deliver(name, key, new, reason=reason, orphan=orphan)
        if isinstance(message, assignments.Encoded):  # a shard's bytes, sent as they are
            stream.send_assignment(spread=key, message=message.data)
            self.world.pods.sent(name, key, quotas=dict(message.quotas))
        elif isinstance(message, agent_pb2.SpreadAssignment):
            stream.send(assignment=message)
            self.world.pods.sent(name, key, quotas=assignments.quotas(message))
        elif message is not None:
            stream.send(removal=message)
            if orphan:  # released, not deleted: a spread of this key adopts what runs there
                self.world.release_pods(name, key)
            else:
                self.world.forget_pods(name, key)

    def remove_if_empty(self, name: str, key: str) -> None:
        """Cluster `name` applied an assignment of spread `key`: if what it holds now is a share of 0
        and it reports no pods of the spread, it is sent the removal (its pod reports would not
        change, so no publish would send it)."""
        replicas, entry = self.sent.replicas_sent(name, key), self.world.spread(key)
        if (replicas == 0 and name not in self.world.pods.holding(key)
                and self.world.pods.verified(name, key) and (entry is None or entry.replicas != 0)):
            self.deliver(name, key, None, reason=NO_REPLICAS_LEFT)
