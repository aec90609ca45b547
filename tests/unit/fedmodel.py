"""A federation in one process for the stateful invariant test: real decision code, modelled Kubernetes.

Why: the invariants of issue 8 (no subset above its cap anywhere, every replica placed or
unplaced, convergence once events stop) are properties of the *interleaving* of many components'
decisions. Hypothesis can explore thousands of interleavings only in-process, so everything that
decides is the real code and everything that merely happens is a small model:

* real — the coordinator's facade (`facade.Coordinator`: the World, the placement loop,
  failover, assignment deltas and resyncs) with an injected clock; per member the agent's
  `Bookkeeping`, its `AdmissionHandler` (fed AdmissionReview JSON, answering JSONPatch), its
  `ReportOutbox` and report messages, `inventory.pools`, the adaptive-reschedule arithmetic, the
  spare-pod rule (`spare_pods`, with the agent's pause) and the deletion costs with the 1.22
  ReplicaSet ranking;
* modelled — the member's ReplicaSet (creates pods up to the agent's share, deletes by deletion
  cost), its scheduler (nodes of `SLOTS_PER_NODE` pods, first fit, else Pending/Unschedulable),
  its watch cache (`sync` hands the pods to the bookkeeping), node removal (evictions), the hub
  (spread edits and scales go to the World as the hub watcher would put them) and the agent's link
  (its rules for applying assignments and removals are mirrored: per-stream generations).

Each member also keeps, per subset, the most pods it may hold (`allowance`): its quota, or what it
already held when a new assignment lowered the quota. Pods only ever join a subset by admission,
so "never above the allowance" is "no admission ever put a subset above its quota in a cluster".
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import datetime
import itertools
import json
import queue
from collections.abc import Callable, Sequence
from typing import Any

import jsonpatch

from agents import bookkeeping, metrics, outbox, pod_ledger
from agents.controller import rescheduling, spare
from agents.webhook import handler
from federation.api import names
from federation.coordinator import facade
from federation.coordinator.model import loop, world
from federation.core import deletion_cost, inventory, reschedule, spare_pods, status
from federation.rpc import agent_pb2, assignment, capabilities
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
NAMESPACE, NAME = "shop", "web"
KEY = f"{NAMESPACE}/{NAME}"
CLUSTERS = ("dc1", "aws", "gcp")
SLOTS_PER_NODE = 2
HEARTBEAT_SECONDS = 5


@dataclasses.dataclass
class Pod:
    """A pod of the spread's member Deployment, as the member's apiserver holds it."""

    name: str
    subset: str | None
    created: datetime.datetime
    node: int | None = None
    unschedulable_since: datetime.datetime | None = None


class Member:
    """One member cluster: its nodes and pods, and its agent's real decision code."""

    def __init__(self, name: str, clock: ManualClock, *, nodes: int) -> None:
        self.name, self.clock, self.nodes = name, clock, nodes
        self.pods: dict[str, Pod] = {}
        self.stream: facade.AgentStream | None = None
        self.allowance: dict[str, int] = {}
        self.deployment_replicas = 0
        """The member Deployment's `spec.replicas` (0: none): it outlives an agent restart."""
        self._names = itertools.count()
        self._uids = itertools.count()
        self.restart_agent()
        self.seen: collections.Counter[str] = collections.Counter()
        """What happened here, for the test's coverage events."""

    def restart_agent(self) -> None:
        """A new agent process: bookkeeping, webhook state, outbox and stream numbering start
        empty (the pods and the member Deployment stay, as in a real cluster)."""
        # As the agent: a pod of a spread whose pods were not counted yet is refused (retried).
        self.book = bookkeeping.Bookkeeping(self.clock, count_wait=0.0)
        counter = itertools.count()
        self.webhook = handler.AdmissionHandler(self.book, metrics.AgentMetrics(cluster=self.name),
                                                token_source=lambda: f"{next(counter):06d}")
        self.outbox = outbox.ReportOutbox()
        self.spared_at: datetime.datetime | None = None
        """When this agent last removed spare pods (`spare.SpareRemover`'s pause)."""
        self.received: dict[str, int] = {}
        self._sequence = itertools.count(1)

    def running_pods(self) -> set[str]:
        """The pods bound to a node (Running and, in this model, Ready)."""
        return {p.name for p in self.pods.values() if p.node is not None}

    # --- what the agent enforces --------------------------------------------------------------------

    def quotas(self) -> dict[str, int]:
        current = self.book.assignment(KEY)
        return {} if current is None else {r.name: r.quota for r in current.subsets}

    def holding(self) -> dict[str, int]:
        """Pods per subset (those of no subset under "")."""
        found: dict[str, int] = {}
        for pod in self.pods.values():
            found[pod.subset or ""] = found.get(pod.subset or "", 0) + 1
        return found

    def running(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for pod in self.pods.values():
            if pod.node is not None:
                found[pod.subset or ""] = found.get(pod.subset or "", 0) + 1
        return found

    def _settle_allowance(self) -> None:
        quotas, held = self.quotas(), self.holding()
        for subset in set(self.allowance) | set(quotas):
            before = self.allowance.get(subset, quotas.get(subset, 0))
            self.allowance[subset] = max(quotas.get(subset, 0), min(before, held.get(subset, 0)))
            if held.get(subset, 0) > quotas.get(subset, 0):
                self.seen["pods above a lowered quota"] += 1

    # --- admission reviews ---------------------------------------------------------------------------

    def _review(self, operation: str, *, name: str, sub_resource: str = "", refusable: bool = False,
                **objects: Any) -> dict[str, Any]:
        kind = {"group": "policy", "version": "v1", "kind": "Eviction"} if sub_resource else \
            {"group": "", "version": "v1", "kind": "Pod"}
        request = {"uid": f"{self.name}-{next(self._uids)}", "operation": operation, "namespace": NAMESPACE,
                   "name": name, "kind": kind, "resource": {"group": "", "version": "v1", "resource": "pods"},
                   "subResource": sub_resource, "dryRun": False, **objects}
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        answer: dict[str, Any] = json.loads(self.webhook.respond(json.dumps(body).encode()))["response"]
        assert answer["allowed"] is True or refusable, answer
        return answer

    def _manifest(self, pod: Pod) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": pod.name, "labels": {names.SPREAD_LABEL: NAME}}
        if pod.subset is not None:
            meta["annotations"] = {names.SUBSET_ANNOTATION: pod.subset}
        return {"metadata": meta, "spec": {"containers": [{"name": "app", "image": "web:1"}]}}

    def create_pod(self) -> bool:
        """The ReplicaSet creates a pod; the webhook picks its subset. Checks admission safety.
        False: the webhook refused it (an agent that has not counted the spread's pods yet, as
        after a restart): the ReplicaSet tries again later."""
        pod = Pod(name=f"{NAME}-{self.name}-{next(self._names)}", subset=None, created=self.clock())
        before, quotas = self.holding(), self.quotas()
        manifest = self._manifest(pod)
        answer = self._review("CREATE", name=pod.name, object=manifest, refusable=True)
        if not answer["allowed"]:
            self.seen["refused: not counted yet"] += 1
            return False
        if "patch" in answer:
            patch = json.loads(base64.b64decode(answer["patch"]))
            mutated = jsonpatch.apply_patch(manifest, patch)
            pod.subset = mutated["metadata"].get("annotations", {}).get(names.SUBSET_ANNOTATION)
        self.seen["admitted" if pod.subset is not None else "admitted without a subset"] += 1
        if pod.subset is not None:
            assert before.get(pod.subset, 0) < quotas.get(pod.subset, 0), (
                f"{self.name}: pod admitted into {pod.subset} holding {before} with quotas {quotas}")
        self.pods[pod.name] = pod
        self._settle_allowance()
        return True

    def delete_pod(self, name: str, *, evict: bool = False) -> None:
        """A pod goes (user delete, eviction, ReplicaSet scale-down), through the webhook."""
        pod = self.pods.pop(name)
        if evict:
            self._review("CREATE", name=name, sub_resource="eviction")
        else:
            self._review("DELETE", name=name, oldObject=self._manifest(pod))
        self._settle_allowance()

    # --- the member's controllers --------------------------------------------------------------------

    def _views(self) -> list[deletion_cost.PodView]:
        return [deletion_cost.PodView(
            name=p.name, subset=p.subset, phase="Running" if p.node is not None else "Pending",
            ready=p.node is not None, node_name="" if p.node is None else f"n{p.node}", created=p.created)
            for p in self.pods.values()]

    def replicaset_step(self) -> bool:
        """One step of the ReplicaSet toward the agent's share; whether it did anything."""
        current = self.book.assignment(KEY)
        target = self.deployment_replicas
        if len(self.pods) < target:
            return self.create_pod()
        if len(self.pods) > target:
            subsets = [r.name for r in sorted(current.subsets, key=lambda r: r.index)] if current else []
            views = self._views()
            costs = deletion_cost.deletion_costs(views, subsets=subsets, quotas=self.quotas())
            (victim,) = deletion_cost.scale_down_victims(views, costs=costs, count=1)
            self.delete_pod(victim)
            return True
        return False

    def set_nodes(self, nodes: int) -> None:
        """Nodes added, or removed (their pods are evicted, as a drain does)."""
        for pod in sorted(self.pods.values(), key=lambda p: p.name):
            if pod.node is not None and pod.node >= nodes:
                self.delete_pod(pod.name, evict=True)
        self.nodes = nodes

    def schedule(self) -> None:
        """Bind Pending pods to nodes with a free slot, first fit; the rest are Unschedulable."""
        used = [0] * self.nodes
        for pod in self.pods.values():
            if pod.node is not None:
                used[pod.node] += 1
        for pod in sorted(self.pods.values(), key=lambda p: (p.created, p.name)):
            if pod.node is not None:
                continue
            free = next((i for i, n in enumerate(used) if n < SLOTS_PER_NODE), None)
            if free is None:
                pod.unschedulable_since = pod.unschedulable_since or self.clock()
            else:
                pod.node, pod.unschedulable_since = free, None
                used[free] += 1

    def slots(self) -> int:
        return self.nodes * SLOTS_PER_NODE

    def observe(self) -> None:
        """The watch cache catches up: the bookkeeping sees every pod, stale entries expire."""
        if self.book.assignment(KEY) is None:  # the controller counts assigned spreads only
            self.book.expire()
            return
        self.book.observe(KEY, [pod_ledger.PodRecord(
            name=p.name, subset=p.subset, revision="", phase="Running" if p.node is not None else "Pending",
            ready=p.node is not None, node_name="" if p.node is None else f"n{p.node}", created=p.created,
            unschedulable_since=p.unschedulable_since) for p in self.pods.values()])
        self.book.expire()

    def reschedule(self) -> None:
        """Adaptive: pods stuck Pending too long mark their subset here and are deleted (recreated)."""
        current = self.book.assignment(KEY)
        if current is None or not current.strategy.adaptive:
            return
        now = self.clock()
        stuck = reschedule.stuck_subsets(
            [p for p in self.book.pods(KEY) if p.name in self.pods], now=now,
            critical_seconds=current.strategy.reschedule_critical_seconds,
            order=[r.name for r in sorted(current.subsets, key=lambda r: r.index)])
        blocked = rescheduling.blocked_subsets(current, self.book.marked(KEY), now)
        until = reschedule.blocked_until(now, unschedulable_seconds=current.strategy.unschedulable_seconds)
        for item in reschedule.to_report(stuck, blocked=blocked):
            self.seen["unschedulable"] += 1
            self.book.mark_unschedulable(KEY, item.subset, until=until)
            self.outbox.unschedulable(spread=KEY, subset=item.subset, since=item.since, pods=len(item.pods),
                                      reason="stuck", generation=current.generation)
        for item in stuck:
            for name in item.pods:
                self.delete_pod(name)
                self.book.note_deleting(KEY, name, subset=item.subset)

    def remove_spare(self) -> None:
        """Spare pods that starve a subset are removed, as the agent's `spare.SpareRemover` does
        (its pause too): the member workload at its target creates the waiting subsets' pods."""
        now = self.clock()
        if self.spared_at is not None and (now - self.spared_at).total_seconds() < spare.PAUSE_SECONDS:
            return
        found = self.spare_due()
        for name in found.pods:
            subset = self.pods[name].subset
            self.delete_pod(name)
            self.book.note_deleting(KEY, name, subset=subset)
            self.seen["spare pod removed"] += 1
        if found.pods:
            self.spared_at = now

    def spare_due(self) -> spare_pods.SparePods:
        """What the agent's spare-pod rule would remove now, its pause aside: a removal under way
        (the pause delays its next step), which goes on while the agent is cut off (fail static)."""
        current = self.book.assignment(KEY)
        if current is None:
            return spare_pods.NONE
        blocked = rescheduling.blocked_subsets(current, self.book.marked(KEY), self.clock())
        return spare_pods.spare_pods(self._views(), shares=spare.shares_of(current, blocked=blocked),
                                     replicas=current.replicas, target=self.deployment_replicas)

    def report(self) -> None:
        """Queue the latest full inventory and pod counts, as the reporter and controller do."""
        nodes = [inventory.NodeView(name=f"{self.name}-n{i}", allocatable={"pods": str(SLOTS_PER_NODE)})
                 for i in range(self.nodes)]
        usage = [inventory.PodUsage(node_name=f"{self.name}-n{p.node}") for p in self.pods.values()
                 if p.node is not None]
        sequence = next(self._sequence)
        self.outbox.put_inventory(outbox.inventory_message(inventory.pools(nodes, usage), sequence=sequence,
                                                           observed_at=self.clock()))
        current = self.book.assignment(KEY)
        counts = {KEY: {**self.book.counts(KEY), status.UNASSIGNED: self.book.unassigned(KEY)}
                  } if current is not None else {}  # as the reconciler: pods of no subset too
        generations = {KEY: current.generation} if current is not None else {}
        # Evidence only for what was counted since this agent started (the reconciler's rule).
        assigned = set(counts) if self.book.counted(KEY) else set()
        self.outbox.put_counts(outbox.counts_message(
            counts, sequence=sequence, generations=generations, observed_at=self.clock(),
            assigned=assigned, first_after_start=sequence == 1))

    # --- the link ------------------------------------------------------------------------------------

    def apply(self, message: agent_pb2.CoordinatorMessage) -> None:
        """What the agent's link does with one coordinator message (generations per stream)."""
        kind = message.WhichOneof("body")
        self.seen[kind or ""] += 1
        if kind == "assignment":
            decoded = assignment.Assignment.from_proto(message.assignment)
            seen = self.received.get(decoded.spread)
            if seen is None or seen <= decoded.generation:
                self.book.set_assignment(decoded)
                self.deployment_replicas = decoded.replicas  # the agent writes its Deployment
                self.received[decoded.spread] = decoded.generation
                self.outbox.put_event(agent_pb2.AgentMessage(ack=agent_pb2.Ack(  # as the link acks
                    spread=decoded.spread, generation=decoded.generation)))
        elif kind == "removal":
            seen = self.received.get(message.removal.spread)
            if seen is None or seen <= message.removal.generation:
                self.book.remove_assignment(message.removal.spread)
                self.received.pop(message.removal.spread, None)
                if message.removal.orphan:  # released: the Deployment and its pods run on, unmanaged
                    self.seen["released"] += 1
                else:
                    self.deployment_replicas = 0
                    for name in sorted(self.pods):  # the member Deployment is deleted; its pods go
                        self.delete_pod(name)
        elif kind == "resync":
            for report in self.outbox.latest():
                self.outbox.put_event(report)
        elif kind == "notice" and message.notice.code == capabilities.RESYNC_COMPLETE_CODE:
            for value, subset, since in self.book.unechoed_marks():  # as the link, once resynced
                self.outbox.unschedulable(spread=value.spread, subset=subset, since=since, pods=0,
                                          reason="again", generation=value.generation)
        self._settle_allowance()


class Federation:
    """The coordinator facade and the members, with the plumbing of streams between them."""

    def __init__(self, clock: ManualClock, nodes: dict[str, int]) -> None:
        self.clock = clock
        self.coordinator = facade.Coordinator(world.World(clock), clock=clock, coordinator_id="model")
        self.members = {name: Member(name, clock, nodes=count) for name, count in nodes.items()}
        self.last_tick = clock()

    @property
    def world(self) -> world.World:
        return self.coordinator.world

    def pump(self) -> None:
        """Deliver every queued coordinator message, and the agents' answers, until all is quiet."""
        busy = True
        while busy:
            busy = False
            for member in self.members.values():
                if member.stream is None:
                    continue
                while True:
                    try:
                        item = member.stream.outgoing.get_nowait()
                    except queue.Empty:
                        break
                    if isinstance(item, agent_pb2.CoordinatorMessage):
                        member.apply(item)
                        busy = True
                busy |= self.flush(member)

    def flush(self, member: Member) -> bool:
        """Send what the member's outbox holds, if its stream is up; whether anything went."""
        if member.stream is None:
            return False
        sent = member.outbox.drain(timeout=0)
        for message in sent:
            self.coordinator.receive(member.stream, message)
        return bool(sent)

    def connect(self, name: str) -> None:
        member = self.members[name]
        hello = agent_pb2.Hello(cluster_name=name, capabilities=[capabilities.RESYNC_COMPLETE_CAPABILITY])
        pods = member.holding()  # per subset, those of no subset under ""
        for current in member.book.assignments():
            hello.applied.add(spread=current.spread, generation=current.generation,
                              template_revision=current.template_revision, subset_pods=pods)
        if not hello.applied and (member.deployment_replicas or member.pods):
            # a restarted agent names the Deployments it marked, with the spread's pods per subset
            hello.applied.add(spread=KEY, subset_pods=pods)
        member.received = {}
        member.stream = self.coordinator.attach(hello, heartbeat_seconds=HEARTBEAT_SECONDS)
        member.report()
        self.flush(member)  # as the real link: the latest full reports first after Welcome, then acks
        self.pump()

    def restart_agent(self, name: str) -> None:
        """The member's agent process is killed and started again: its stream ends, its
        bookkeeping is lost, and the new process connects with an empty first report."""
        self.disconnect(name)
        self.members[name].restart_agent()
        self.connect(name)

    def restart_coordinator(self, *, hub: Callable[[facade.Coordinator], None],
                            order: Sequence[str], synced_after: int) -> None:
        """The coordinator is killed and started again: every stream ends; the new one lists the
        hub (`hub` feeds its World, as the watcher does), and the agents reconnect in `order`,
        the first `synced_after` of them before the hub listing is complete."""
        for name in self.members:
            self.disconnect(name)
        fresh = world.World(self.clock, grace_from=self.clock())
        self.coordinator = facade.Coordinator(fresh, clock=self.clock, coordinator_id="model-2",
                                              hub_synced=False)
        with self.coordinator.lock:
            hub(self.coordinator)
        for index, name in enumerate(order):
            if index == synced_after:
                self.coordinator.mark_hub_synced()
                self.pump()
            self.connect(name)
        if synced_after >= len(order):
            self.coordinator.mark_hub_synced()
            self.pump()

    def disconnect(self, name: str) -> None:
        member = self.members[name]
        if member.stream is not None:
            self.coordinator.detach(member.stream)
            member.stream = None

    def controller_round(self, name: str) -> None:
        """One agent controller round in the member: ReplicaSet, scheduler, cache, reschedule, reports."""
        member = self.members[name]
        while member.replicaset_step():
            pass
        member.schedule()
        member.observe()
        member.reschedule()
        member.remove_spare()
        member.schedule()
        member.observe()
        member.report()
        self.pump()

    def heartbeat_and_tick(self) -> None:
        """Connected agents beat; the coordinator's timer runs (`CoordinatorProcess.tick`: failover,
        then the spreads whose unschedulable marks expired since the last tick)."""
        beat = agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat())
        for member in self.members.values():
            if member.stream is not None:
                self.coordinator.receive(member.stream, beat)
        now = self.clock()
        with self.coordinator.lock:
            for name in self.coordinator.tick().clusters:
                self.members[name].seen["cluster lost"] += 1
            expired = loop.due(self.world, since=self.last_tick, now=now)
            if expired:
                self.coordinator.publish(expired)
        self.last_tick = now
        self.pump()
