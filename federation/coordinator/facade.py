"""The coordinator's facade: the world model, its lock and the connected agents' streams.

Everything that changes the coordinator's state goes through `Coordinator`: the gRPC servicer
(`services.agent_service`), the hub watcher's event loop, the failover timer and the tests all
drive the same object, so the rules below hold whichever shell calls it.

Why it is shaped like this:

- **A facade, not Ray.** `Coordinator` holds the pure `world.World`, one lock and the streams; the
  servicer only validates and converts wire messages. The Ray shards (or a test) drive the same
  facade: `publish(keys)` recomputes through `loop.recompute` and pushes to each connected agent
  only what differs (`assignments.changed`) from what that agent last received; `tick()` is the
  failover timer's entry point (`loop.failover`, then publish). A parallel round whose answers
  were mostly placed again here (spreads sharing clusters) is said once in the log: measured,
  such a federation is placed faster in-process, the CLI's default (bench/README.md). A batch the shards do
  not answer within their deadline (`shards.PLACE_SECONDS`) is placed in this process instead,
  with a warning (`loop.Round.fell_back`).
- **Full resync on every stream, deltas after.** A (re)connecting agent may have missed anything,
  and a restarted coordinator holds nothing: after Welcome it gets every assignment for its
  cluster, then `Notice{code: "ResyncComplete"}`. A spread its Hello lists as applied (from its
  bookkeeping or from the Deployments it marked) that it is not sent gets a `SpreadRemoval` only
  when this coordinator knows why (`lifecycle.Lifecycle.leftover`): the spread is live and placed
  without this cluster (kept until the cluster's first full report, then handed over as any
  cluster leaving the selection; orphaned at once when the agent's Deployment carries another uid,
  an earlier spread of the name), or it saw the spread deleted (its policy decides). A spread it
  never knew gets nothing: an empty or wrong hub must not un-manage or delete what agents run.
  The full set is queued under the same lock as publish, so no delta can overtake it.
- **Nothing before the hub is known.** After a coordinator restart the world is empty until the
  hub watcher has listed everything; removing "unknown" spreads then would delete live workloads,
  and placing a spread before its clusters are listed would move its replicas. With
  `hub_synced=False`, streams are welcomed but nothing is placed and no stream is resynced until
  `mark_hub_synced()`, which places every spread (from the placements their hub statuses
  recorded) and then resyncs.
- **A listed spread whose status records no placement waits for the federation to gather** (a
  hub restored without statuses or MemberClusters: `model.settling`): for `settle` after the
  listing it is not placed and nothing of it is sent, so the first agent back is not given every
  replica; when the wait ends, the agents that held it are visited as a resync would.
- **Hello labels only register unknown clusters.** The MemberCluster in the hub is authoritative
  for labels and taints (agent.proto); a Hello only seeds a cluster the world has never seen.
  `on_cluster_hello` lets the shell create or update the MemberCluster object itself.
- **Duplicate streams: the newer wins.** A second stream for the same cluster replaces the first,
  which is ended with ALREADY_EXISTS (the old agent's link reconnects, which is right after a
  network flap; two agents fighting for one name keep replacing each other and say so in logs).
- Identity (mTLS) and malformed streams are the servicer's (`services.agent_service`); a message
  that cannot be applied raises ValueError/TypeError here and is answered there with a Notice.
"""

from __future__ import annotations

import datetime
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable

from federation import clock as clock_mod
from federation import collector
from federation.api import names
from federation.coordinator import backends, delivery
from federation.coordinator.agent_stream import END as END
from federation.coordinator.agent_stream import SUPERSEDED as SUPERSEDED
from federation.coordinator.agent_stream import AgentStream as AgentStream
from federation.coordinator.model import lifecycle as model_lifecycle
from federation.coordinator.model import loop, rebalance_plan, settling, usage_book
from federation.coordinator.model import world as world_model
from federation.coordinator.wire import inbound, shard_messages
from federation.core import usage as usage_rules
from federation.rpc import agent_pb2, capabilities

log = logging.getLogger(__name__)

RoundObserver = Callable[[loop.Round, float], None]
"""Told of every placement round that had spreads to place: what it did and how long it took
(seconds, recompute and queueing to the streams); the metrics (`coordinator.metrics`) listen."""
WASTED_ROUND_SPREADS = 50
"""A parallel round of at least this many spreads, more than half of them placed again in this
process, is said once in the log: the Ray shards gained nothing for this federation."""


class Coordinator:
    """The world, its lock and the connected agents; everything the servicer changes goes through here."""

    def __init__(
        self, world: world_model.World, *, clock: clock_mod.Clock, coordinator_id: str | None = None,
        hub_synced: bool = True, backend: backends.PlacementBackend | None = None,
        federation_id: str = names.DEFAULT_FEDERATION_ID, settle: datetime.timedelta = settling.WINDOW,
    ) -> None:
        self.world = world
        self.federation_id = federation_id
        """Sent in every Welcome: agents manage only member Deployments labelled with it."""
        self.clock = clock
        self.backend: backends.PlacementBackend = backend if backend is not None else backends.LocalBackend()
        self.coordinator_id = coordinator_id or uuid.uuid4().hex[:12]
        self.lock = threading.RLock()
        self._hub_synced = hub_synced
        self._streams: dict[str, AgentStream] = {}
        self._delivery = delivery.Delivery(world, clock=clock, streams=self._streams)
        """What each agent is sent (`coordinator.delivery`)."""
        self.settling = settling.Settling(window=settle)
        """Listed spreads without a recorded placement wait for the agents (`model.settling`)."""
        self._settled: set[str] = set()
        """Spreads whose wait ended, live, not placed since: the agents that hold them were sent
        nothing at their resync, so the next placement of each visits them (`Delivery.visit_settled`)."""
        self.ray_gained_nothing = False
        """A parallel round was mostly placed again here (logged once, when it first happened)."""
        self.on_round: RoundObserver | None = None
        """Called under the lock after each round with spreads to place (keep it quick)."""
        self.clusters_lost = 0
        """Clusters `tick` reported newly lost (each once per silence), for the metrics."""
        self.usage_book = usage_book.UsageBook()
        """The agents' usage reports, what `usage` answers from (`model.usage_book`)."""

    # --- streams -------------------------------------------------------------------------------

    def connected(self) -> list[str]:
        """Clusters with a stream, by name."""
        with self.lock:
            return sorted(self._streams)

    def backlog(self, cluster_name: str | None = None) -> int:
        """Messages queued for the agents (for `cluster_name`'s only, if given) and not yet written
        to their streams (after coalescing)."""
        with self.lock:
            streams = [s for name, s in self._streams.items() if cluster_name in (None, name)]
            return sum(stream.outgoing.qsize() for stream in streams)

    def awaiting_report(self, cluster_name: str) -> frozenset[str]:
        """The spreads `cluster_name`'s agent holds that no longer select it, kept since its resync
        until its first full report (`lifecycle.Leftover.deselected`)."""
        with self.lock:
            stream = self._streams.get(cluster_name)
            return frozenset(stream.awaiting_report) if stream is not None else frozenset()

    def attach(self, hello: agent_pb2.Hello, *, heartbeat_seconds: int) -> AgentStream:
        """A welcomed Hello: replace any older stream, register, queue Welcome and the full resync."""
        name = hello.cluster_name
        stream = AgentStream(name, applied=hello.applied)
        with self.lock:
            previous = self._streams.get(name)
            if previous is not None:
                previous.outgoing.close(SUPERSEDED)
                log.warning("newer stream replaces the old one", extra={"cluster": name})
            self._streams[name] = stream
            # Unknown is not zero: the agent may have restarted and lost its bookkeeping; what it
            # reported before stands, unverified, until a report made holding each assignment.
            affected = {key for key in self.world.pods.reconnected(name)
                        if self.world.spread(key) is not None}
            if name not in self.world.cluster_names():  # (a decommissioned one stays so)
                affected |= self.world.upsert_cluster(name, labels=dict(hello.topology_labels),
                                                      decommission=self.world.decommissioned(name))
            affected |= self.world.heartbeat(name)
            affected |= self.world.announce_pods(name, stream.subset_pods)
            # Place first, then resync: the returning agent must receive the placement of the world
            # in which it is heard again, not one computed while it was silent (that one may say 0
            # for pods it still runs, and a quota 0 followed by the fix a moment later kills them).
            self.publish(affected)
            stream.send(welcome=self._welcome(name, heartbeat_seconds=heartbeat_seconds))
            if self._hub_synced:
                self._resync(stream)
        return stream

    def detach(self, stream: AgentStream) -> None:
        """The stream ended; forget what it was sent (the next one gets a full resync)."""
        with self.lock:
            if self._streams.get(stream.cluster) is stream:
                del self._streams[stream.cluster]
                self._delivery.sent.forget(stream.cluster)

    def hub_listed(self) -> bool:
        """Whether `mark_hub_synced` ran: placement and the agents' resyncs have begun."""
        return self._hub_synced

    def mark_hub_synced(self) -> None:
        """The hub watcher listed everything: resync the streams that were waiting for it."""
        with self.lock:
            self._hub_synced = True
            for stream in self._streams.values():  # Hellos heard before the spreads were listed
                self.world.announce_pods(stream.cluster, stream.subset_pods)
            self.settling.begin(now=self.clock(), candidates=[
                entry.key for entry in self.world.spreads()
                if not model_lifecycle.recorded_holder(entry.spread)])
            self.publish(entry.key for entry in self.world.spreads())
            for stream in self._streams.values():
                if not stream.resynced:
                    self._resync(stream)

    def _welcome(self, name: str, *, heartbeat_seconds: int) -> agent_pb2.Welcome:
        welcome = agent_pb2.Welcome(
            cluster_name=name, coordinator_id=self.coordinator_id, full_resync=True,
            heartbeat_interval_seconds=heartbeat_seconds, resume_token=self.coordinator_id,
            capabilities=[capabilities.RESYNC_COMPLETE_CAPABILITY, capabilities.MESSAGE_BATCHES_CAPABILITY],
            federation_id=self.federation_id,
        )
        welcome.server_time.FromDatetime(self.clock())
        return welcome



    def _resync(self, stream: AgentStream) -> None:
        """The stream's full resync (`delivery.Delivery.resync`), once a restored spread this
        agent holds waits (or, deleted while it waited, is released)."""
        self._settling(set(stream.applied))
        self._delivery.resync(stream, waiting=self.settling.waiting())

    # --- placement -----------------------------------------------------------------------------

    def publish(self, keys: Iterable[str]) -> loop.Round:
        """Recompute `keys` and send each resynced agent what changed for it.

        Before the hub is listed nothing is placed: a spread seen before the clusters it uses (or
        before its recorded placement) would be placed on a partial world. `mark_hub_synced`
        places every spread once everything is known. The cycle collector is paused meanwhile
        (`federation.collector.paused`: a round's garbage dies with it, uncollected), and what a
        large round leaves alive is kept out of the collections for a while (`Pause.keep`).
        """
        with self.lock, collector.paused() as pause:
            wanted = set(keys)
            if wanted and self._hub_synced:
                wanted -= self._settling(wanted)
            if not self._hub_synced or not wanted:
                return loop.Round(placements={})
            started = time.perf_counter()
            # Held deletions settle first: a spread created again meanwhile turns its hold into a
            # release, whose pods (unverified, `PodReports.released`) its first placement must keep.
            now, lifecycle = self.clock(), self.world.lifecycle
            for key, orphan in lifecycle.settle(now=now, live=lambda k: self.world.spread(k) is not None):
                self._delivery.remove_everywhere(key, orphan=orphan,
                                        reason=model_lifecycle.RECREATED if orphan else "spread deleted")
                if orphan:
                    wanted.add(key)
            encodings: shard_messages.Encodings | None = None
            on_shards: loop.PlaceRound | None = None
            if self.backend.parallel:  # the shards build the agents' messages too (`wire.shard_messages`)
                encodings = shard_messages.Encodings(
                    lambda key: self._delivery.inputs_for_shards(key, now=now))
                on_shards = functools.partial(self.backend.place_round, encodings=encodings)
            result = loop.recompute(self.world, wanted, now=now, place_round=on_shards,
                                    parallel_from=self.backend.parallel_from)
            if result.fell_back:
                log.warning("the placement shards did not answer; this round was placed or checked in the "
                            "coordinator's process instead", extra={
                                "spreads": len(result.placements), "error": result.fell_back})
            elif on_shards is not None and len(result.placements) >= self.backend.parallel_from:
                self._say_if_ray_gained_nothing(result)  # only a round the shards were asked for
            listening = {name for name, stream in self._streams.items() if stream.resynced}
            # Deleted spreads first (their deletionPolicy decides), before any assignment. A `Delete`
            # is held for a re-creation (`lifecycle.hold`): a spread of the key created meanwhile
            # turns it into a release its agents adopt from, never a delete of what it will claim.
            for key in result.removed:
                self._settled.discard(key)
                if lifecycle.orphans(key):
                    self._delivery.remove_everywhere(key, orphan=True, reason="spread deleted")
                else:
                    lifecycle.hold(key, until=now + model_lifecycle.RECREATE_GRACE)
            for key in sorted(result.placements):
                settled = key in self._settled
                self._settled.discard(key)
                self._delivery.publish_spread(key, listening=listening, now=now, settled=settled,
                                              encodings=encodings)
            if encodings is not None and encodings.failed:
                log.warning("the placement shards did not build the round's agent messages; they were "
                            "built in the coordinator's process instead", extra={"error": encodings.failed})
            if len(result.placements) >= collector.FREEZE_FROM:
                pause.keep()
            if self.on_round is not None:
                self.on_round(result, time.perf_counter() - started)
            return result

    def rebalance(self, key: str, *, dry_run: bool = False,
                  max_surge: int | None = None) -> rebalance_plan.Plan | None:
        """`fedspread rebalance`: spread `key`'s whole failback (None: no such spread placed), and
        unless `dry_run` (or nothing moves) started now — its policy and cooldown ignored, each
        step surge first (`model.rebalancing`)."""
        with self.lock:
            found = rebalance_plan.plan(self.world, key, now=self.clock(), max_surge=max_surge)
            if found is None or dry_run or not found.steps:
                return found
            self.world.rebalancing.ask(key, max_surge=max_surge)
            self.publish({key})
            return found

    def _settling(self, wanted: set[str]) -> set[str]:
        """Of `wanted`, the spreads that wait for the federation to gather (`model.settling`): their
        placement, made on no evidence, is dropped. One deleted while it waited was sent nothing:
        the agents that hold it get what a resync would send them (its deletion policy decides)."""
        was_waiting = self.settling.waiting() & wanted
        waiting = self.settling.deferred(
            wanted, now=self.clock(), live=lambda key: self.world.spread(key) is not None)
        for key in waiting:
            self.world.drop(key)
        for key in sorted(was_waiting - waiting):
            if self.world.spread(key) is not None:
                self._settled.add(key)
                continue
            for stream in self._streams.values():
                if stream.resynced and key in stream.applied:
                    self._delivery.leftover(stream, key)
        return waiting



    def _say_if_ray_gained_nothing(self, result: loop.Round) -> None:
        """Once: a big parallel round whose answers were mostly placed again in this process (their
        node pools were contended: `loop.Round.replaced`)."""
        placed = len(result.placements)
        if self.ray_gained_nothing or placed < WASTED_ROUND_SPREADS or result.replaced * 2 <= placed:
            return
        self.ray_gained_nothing = True
        log.warning("the Ray shards' placements were mostly redone in the coordinator: most spreads "
                    "of this round competed for the same full node pools, and those are placed again "
                    "one after the other; the shards only added a round trip (placing in-process avoids it)",
                    extra={"spreads": placed, "placed_again": result.replaced})

    def tick(self) -> loop.Lost:
        """The failover timer: clusters silent past clusterLostSeconds lose their replicas."""
        with self.lock:
            lost = loop.failover(self.world)
            self.clusters_lost += len(lost.clusters)
            if lost.clusters:
                log.warning("clusters lost", extra={"clusters": list(lost.clusters)})
            settled = self.settling.released(now=self.clock())
            self._settled |= settled
            if settled:
                log.info("spreads placed after the agents had time to reconnect",
                         extra={"spreads": len(settled)})
            self.publish(lost.keys | settled)
            self.usage_book.retain(live=lambda key: self.world.spread(key) is not None,
                                   clusters=self.world.cluster_names())
            return lost

    # --- usage: the hub HPA's external metrics ---------------------------------------------------

    def usage(self, namespace: str, name: str) -> usage_rules.FederationUsage | None:
        """Spread `namespace/name`'s federation-wide usage metrics from the agents' last reports,
        answered from memory (None: no such spread). The members left out of the figures are named
        in the answer (`without_metrics`, `stale`); `model.usage_book` has the rules."""
        key = f"{namespace}/{name}"
        with self.lock:
            if self.world.spread(key) is None:
                return None
            ready: dict[str, int] = {}
            for per_cluster in self.world.pods.pods_for(key).values():
                for cluster_name, pods in per_cluster.items():
                    ready[cluster_name] = ready.get(cluster_name, 0) + pods.ready
            return self.usage_book.usage(key, now=self.clock().timestamp(), ready_elsewhere=ready)

    # --- reports -------------------------------------------------------------------------------

    def receive(self, stream: AgentStream, message: agent_pb2.AgentMessage) -> None:
        """Apply one message from `stream`'s agent (ValueError/TypeError: a bad report)."""
        kind, name = message.WhichOneof("body"), stream.cluster
        with self.lock:
            if kind == "heartbeat":
                self.publish(self.world.heartbeat(name))
            elif kind == "inventory":
                self._inventory(stream, message.inventory)
            elif kind == "pod_counts":
                self._pod_counts(stream, message.pod_counts)
            elif kind == "usage":
                self.usage_book.receive(name, inbound.usage_report(message.usage),
                                        now=self.clock().timestamp())
            elif kind == "unschedulable":
                report = message.unschedulable
                if not report.spread or not report.subset:
                    raise ValueError("UnschedulableReport needs spread and subset")
                since = report.since.ToDatetime(tzinfo=datetime.UTC)
                self.publish(self.world.unschedulable(name, spread=report.spread, subset=report.subset,
                                                      since=since, generation=report.generation))
            elif kind == "ack":
                self._ack(name, message.ack)
            elif kind == "acks":  # an AckBatch: each in its order, under this one lock
                for ack in message.acks.acks:
                    self._ack(name, ack)
            elif kind == "hello":
                raise ValueError("Hello is only valid as the first message of a stream")

    def _ack(self, name: str, ack: agent_pb2.Ack) -> None:
        if ack.error:
            log.warning("agent could not apply", extra={
                "cluster": name, "spread": ack.spread, "generation": ack.generation, "error": ack.error})
        else:
            self._delivery.remove_if_empty(name, ack.spread)

    def _inventory(self, stream: AgentStream, report: agent_pb2.InventoryReport) -> None:
        latest = stream.take_inventory(report)
        if latest is not None:
            self.backend.report_inventory(stream.cluster, latest)
            self.publish(self.world.inventory(stream.cluster, latest))

    def _pod_counts(self, stream: AgentStream, report: agent_pb2.PodCountsReport) -> None:
        found = stream.take_pod_counts(report)
        changed = self.world.pod_counts(stream.cluster, stream.counts, workloads=stream.workloads,
                                        conflicts=stream.conflicts, assigned=found.assigned,
                                        dependency_conflicts=stream.dependency_conflicts,
                                        misplaced=stream.misplaced, autoscalers=stream.autoscalers)
        if report.full and stream.awaiting_report:  # what runs there is known now: place them again
            changed, stream.awaiting_report = changed | stream.awaiting_report, set()
        self.publish(changed)
