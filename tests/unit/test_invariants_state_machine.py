"""Invariants under interleaved events: a hypothesis state machine over the coordinator and agents.

Why: each component is tested alone elsewhere; what fails in production is an interleaving — a
scale while an agent is away, an eviction between a quota cut and the cache catching up, a spec
edit during failover. Hypothesis interleaves pod creates (admitted by the agent's real webhook
against the quotas the coordinator assigned), deletes, evictions, scales, capacity changes, agent
disconnects and reconnects (heartbeats lost as the clock moves: cluster lost, failover),
MemberClusters deleted on the hub (nothing moves; recreated while the agent is connected), spec
edits of the caps, spreads deleted and created again (re-creation adopts: no running pod goes), and
clock steps, over `fedmodel.Federation` (real decision code, modelled
Kubernetes). After every step:

* every placement accounts for its replicas (placed + unplaced = replicas), no subset is placed
  above its cap, and nothing is placed on a cluster that is lost or unknown;
* every connected agent enforces exactly the placement's column for its cluster (the quotas never
  exceed the placement), and no agent holds an assignment for a cluster the spread does not use;
* no admission ever put a subset above its quota in a cluster (`Member.allowance`);
* no placement removes a verified Ready pod while the spread still needs it (the handover rule),
  also in a cluster that left the selection (a subset edit, a relabelled cluster) or in a subset
  the spread no longer has;
* an agent or coordinator restart (bookkeeping lost, an empty first report, the hub listed while
  agents reconnect) never takes the running pods below what ran or what the spread needs;
* a partition on the coordinator's side (every agent silent past clusterLostSeconds, then back
  one by one) moves no replica and deletes no pod (the `coordinator_partition` rule asserts it
  whenever the federation was quiet before the partition).

When the events stop (`teardown`), every agent comes back, capacity is made sufficient, and the
federation runs controller rounds and clock steps until nothing changes: the coordinator must be
at a fixed point, every agent's quotas must be the placement, each member's pods must number its
share, and once the pods are replaced (a rollout) each subset must run exactly its quota in each
cluster. Pods above a lowered quota are only moved by churn (DESIGN §4 moves Pending pods, not
Running ones), which is why the last check comes after the rollout.

`FEDSPREAD_SOAK=1` (`make soak`) runs many more and longer interleavings.
"""

from __future__ import annotations

import datetime
import fractions
import math
import os
from typing import Any

# tests/unit has no __init__.py: pytest's default import mode puts this directory on sys.path.
import fedmodel as fm
import hypothesis
from hypothesis import stateful
from hypothesis import strategies as st

from federation.api import common, names
from federation.api import spread as spread_api
from federation.coordinator.hub import watcher
from federation.core import apportion, placement
from tests.support import builders
from tests.support.clock import ManualClock

SOAK = os.environ.get("FEDSPREAD_SOAK") == "1"
LOST_SECONDS, CRITICAL_SECONDS, UNSCHEDULABLE_SECONDS = 30, 10, 60
REGIONS = {"dc1": "onprem", "aws": "cloud", "gcp": "cloud"}
CLUSTER = st.sampled_from(fm.CLUSTERS)
NODES = st.integers(0, 4)
REPLICAS = st.integers(0, 14)
STRATEGIES = st.sampled_from(["Fixed", "Adaptive", "Adaptive"])
"""Adaptive twice as often: capacity, overflow, reschedule and marks only happen there."""
QUIET_ROUNDS = 5
"""Rounds of ROUND_SECONDS with nothing changing before convergence is judged (> creatingPods TTL)."""
ROUND_SECONDS = 10
MAX_ROUNDS = 80


@st.composite
def subsets(draw: st.DrawFn) -> list[dict[str, Any]]:
    """1-3 subsets over the three clusters: explicit lists or the region selector."""
    count = draw(st.integers(1, 3))
    found = []
    for index in range(count):
        subset: dict[str, Any] = {"name": f"s{index}",
                                  "clusterSpread": draw(st.sampled_from(["Fill", "Balance", "Capacity"]))}
        if draw(st.booleans()):
            subset["clusters"] = draw(st.lists(CLUSTER, min_size=1, max_size=3, unique=True))
        else:
            subset["clusterSelector"] = {"matchLabels": {names.REGION_LABEL: draw(st.sampled_from(
                sorted(set(REGIONS.values()))))}}
        found.append(subset)
    return found


@st.composite
def caps(draw: st.DrawFn, count: int) -> list[int | str | None]:
    kind = draw(st.sampled_from(["none", "integer", "percent"]))
    if kind == "none":
        return [None] * count
    if kind == "integer":
        return [draw(st.none() | st.integers(0, 6)) for _ in range(count)]
    found: list[int | str | None] = []
    budget = 100
    for _ in range(count):
        pct = draw(st.none() | st.integers(0, budget))
        found.append(None if pct is None else f"{pct}%")
        budget -= pct or 0
    return found


class FederationMachine(stateful.RuleBasedStateMachine):
    """Events on one spread over three member clusters; invariants after each."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(fm.T0)
        self.fed: fm.Federation
        self.items: list[dict[str, Any]] = []
        self.strategy = "Fixed"
        self.generation = 1
        self.replicas = 0
        self.limits: list[int | str | None] = []
        self.uid = 1
        self.deletion_policy = "Orphan"
        self.status_now: tuple[int, placement.Placement | None] = (0, None)
        self.status_before: tuple[int, placement.Placement | None] = (0, None)
        """The placement after the previous step and after the one before (with the spread's
        incarnation): what a status pass one decision behind has written (`coordinator_restarts`)."""

    # --- set-up ---------------------------------------------------------------------------------------

    @stateful.initialize(items=subsets(), data=st.data(), strategy=STRATEGIES, replicas=REPLICAS,
                         nodes=st.lists(NODES, min_size=3, max_size=3))
    def start(self, items: list[dict[str, Any]], data: st.DataObject, strategy: str, replicas: int,
              nodes: list[int]) -> None:
        self.fed = fm.Federation(self.clock, dict(zip(fm.CLUSTERS, nodes, strict=True)))
        self.items, self.strategy, self.replicas = items, strategy, replicas
        self.regions = dict(REGIONS)
        for name in fm.CLUSTERS:
            self.fed.world.upsert_cluster(name, labels={names.REGION_LABEL: self.regions[name]})
            self.fed.connect(name)
        self._apply_spec(data.draw(caps(len(items)), label="caps"))
        template = builders.deployment(fm.NAME, replicas, namespace=fm.NAMESPACE, cpu=None, image="web:1")
        self._hub(self.fed.world.set_target(fm.KEY, replicas=replicas, template=template))

    def _hub(self, keys: set[str]) -> None:
        with self.fed.coordinator.lock:
            self.fed.coordinator.publish(keys)
        self.fed.pump()

    def _apply_spec(self, limits: list[int | str | None]) -> None:
        self.limits = limits
        self._hub(self.fed.world.upsert_spread(self._spread_item()))

    def _spread_item(self) -> spread_api.FederatedSpread:
        with_caps = [{**item, **({"maxReplicas": cap} if cap is not None else {})}
                     for item, cap in zip(self.items, self.limits, strict=True)]
        item = builders.federated_spread(
            fm.NAME, with_caps, namespace=fm.NAMESPACE, generation=self.generation, strategy=self.strategy,
            adaptive={"rescheduleCriticalSeconds": CRITICAL_SECONDS,
                      "unschedulableSeconds": UNSCHEDULABLE_SECONDS} if self.strategy == "Adaptive" else None,
            lost_seconds=LOST_SECONDS, uid=f"uid-{self.uid}")
        spec = item.spec.model_copy(update={"deletion_policy": self.deletion_policy})
        return item.model_copy(update={"spec": spec, "status": self._written_status()})

    def _written_status(self) -> spread_api.FederatedSpreadStatus | None:
        """The status the hub holds for this incarnation of the spread: once it was placed, the
        status pass has recorded that (a `Placed` condition); a spread just created has none."""
        entry = self.fed.world.spread(fm.KEY) if hasattr(self, "fed") else None
        if entry is None or entry.uid != f"uid-{self.uid}" or fm.KEY not in self.fed.world.placements:
            return None
        placed = common.Condition(type="Placed", status="True", reason="Placed")  # as the status pass
        return spread_api.FederatedSpreadStatus(conditions=[placed])

    # --- events ---------------------------------------------------------------------------------------

    @stateful.rule(name=CLUSTER, steps=st.integers(1, 4))
    def replicaset_works(self, name: str, steps: int) -> None:
        """The member's ReplicaSet creates (through the webhook) or deletes pods toward its share."""
        for _ in range(steps):
            self.fed.members[name].replicaset_step()

    @stateful.rule(name=CLUSTER, pick=st.integers(0, 100), evict=st.booleans())
    def pod_goes(self, name: str, pick: int, evict: bool) -> None:
        """A person deletes a pod, or a PodDisruptionBudget-respecting eviction takes it."""
        member = self.fed.members[name]
        if member.pods:
            names = sorted(member.pods)
            member.delete_pod(names[pick % len(names)], evict=evict)

    @stateful.rule(name=CLUSTER)
    def controller_round(self, name: str) -> None:
        self.fed.controller_round(name)

    @stateful.rule(replicas=REPLICAS)
    def scale(self, replicas: int) -> None:
        self.replicas = replicas
        template = builders.deployment(fm.NAME, replicas, namespace=fm.NAMESPACE, cpu=None, image="web:1")
        self._hub(self.fed.world.set_target(fm.KEY, replicas=replicas, template=template))

    @stateful.rule(data=st.data())
    def edit_caps(self, data: st.DataObject) -> None:
        self.generation += 1
        self._apply_spec(data.draw(caps(len(self.items)), label="new caps"))

    @stateful.rule(items=subsets(), data=st.data())
    def edit_subsets(self, items: list[dict[str, Any]], data: st.DataObject) -> None:
        """New subsets (other clusters, more or fewer): some agents lose the spread, some gain it."""
        self.generation += 1
        self.items = items
        self._apply_spec(data.draw(caps(len(items)), label="new caps"))

    @stateful.rule(policy=st.sampled_from(["Orphan", "Delete"]), seconds=st.sampled_from([0, 1, 5, 12]))
    def spread_recreated(self, policy: str, seconds: int) -> None:
        """`kubectl replace --force` (an Argo CD replace sync, re-applying after a prune): the
        spread is deleted and created again with a new UID `seconds` later, within the re-creation
        grace. Re-creation adopts and decides nothing new, judged as a restart is: under either
        deletionPolicy the running pods never fall below what ran or what the spread needs."""
        self.deletion_policy = policy
        self._hub(self.fed.world.upsert_spread(self._spread_item()))  # the policy in force first

        def recreate() -> None:
            self._hub(watcher.apply_to_world(self.fed.world, watcher.HubEvent("spread", "DELETED", fm.KEY)))
            self.clock.advance(seconds)
            self.fed.heartbeat_and_tick()  # the timer: a held removal is not due within the grace
            self.uid += 1
            self.generation = 1
            template = builders.deployment(fm.NAME, self.replicas, namespace=fm.NAMESPACE, cpu=None,
                                           image="web:1")
            target = watcher.WorkloadInfo(kind="Deployment", namespace=fm.NAMESPACE, name=fm.NAME,
                                          replicas=self.replicas, template=template)
            self._hub(watcher.apply_to_world(self.fed.world, watcher.HubEvent(
                "spread", "ADDED", fm.KEY, spread=self._spread_item(), generation=1, target=target)))

        self._judge_restart(recreate, recreation=True)

    @stateful.rule(name=CLUSTER, region=st.sampled_from(["onprem", "cloud", "elsewhere"]))
    def cluster_relabelled(self, name: str, region: str) -> None:
        """A MemberCluster's labels change: a `clusterSelector` may stop (or start) matching it —
        the cluster leaves (or joins) the selection, and leaving is a move, not a deletion."""
        self.regions[name] = region
        self._hub(self.fed.world.upsert_cluster(name, labels={names.REGION_LABEL: region}))

    @stateful.rule(name=CLUSTER, nodes=NODES)
    def capacity_changes(self, name: str, nodes: int) -> None:
        member = self.fed.members[name]
        member.set_nodes(nodes)
        member.schedule()
        member.report()
        self.fed.flush(member)
        self.fed.pump()

    @stateful.rule(name=CLUSTER)
    def agent_disconnects(self, name: str) -> None:
        self.fed.disconnect(name)

    @stateful.rule(name=CLUSTER)
    def agent_reconnects(self, name: str) -> None:
        if self.fed.members[name].stream is None:
            self.fed.connect(name)

    @stateful.rule(name=CLUSTER)
    def agent_restarts(self, name: str) -> None:
        """The member's agent is killed and started again, in the middle of whatever is going on
        (a handover, a scale): its bookkeeping is lost and its first report is empty. Unknown is
        not zero: no running pod the spread still needs may go because of it."""
        self._judge_restart(lambda: self.fed.restart_agent(name))

    @stateful.rule(order=st.permutations(fm.CLUSTERS), synced_after=st.integers(0, len(fm.CLUSTERS)),
                   stale=st.booleans())
    def coordinator_restarts(self, order: list[str], synced_after: int, stale: bool = False) -> None:
        """The coordinator is killed and started again: the new one lists the hub (the spread
        with the placement its status recorded) while the agents reconnect, in any order. A
        restart decides nothing new: no running pod the spread still needs may go. The status
        it lists is the last placement's (written before the kill) or, when `stale`, the one
        before the last step's decision (killed between a placement and its status write: the
        agents may run the newer one)."""
        template = builders.deployment(fm.NAME, self.replicas, namespace=fm.NAMESPACE, cpu=None,
                                       image="web:1")

        def listed() -> spread_api.FederatedSpread:
            recorded = self.fed.world.placements.get(fm.KEY)
            item = self._spread_item()
            if stale:
                incarnation, recorded = self.status_before
                if incarnation != self.uid or recorded is None:  # this incarnation had no status yet
                    return item.model_copy(update={"status": None})
            if recorded is None:
                return item
            statuses = [spread_api.SubsetStatus(name=s.name, clusters=[
                spread_api.SubsetClusterStatus(cluster=n, replicas=c, kept=s.kept_clusters.get(n, 0))
                for n, c in s.clusters.items()]) for s in recorded.subsets]
            placed = common.Condition(type="Placed", status="True", reason="Placed")  # as the status pass
            status = spread_api.FederatedSpreadStatus(subset_statuses=statuses, conditions=[placed])
            return item.model_copy(update={"status": status})

        def restart() -> None:
            item = listed()  # read from the old coordinator's World, after the last decision

            def hub(coordinator: Any) -> None:
                for cluster_name in fm.CLUSTERS:
                    labels = {names.REGION_LABEL: self.regions[cluster_name]}
                    coordinator.world.upsert_cluster(cluster_name, labels=labels)
                coordinator.world.upsert_spread(item)
                coordinator.world.set_target(fm.KEY, replicas=self.replicas, template=template)

            self.fed.restart_coordinator(hub=hub, order=order, synced_after=synced_after)

        self._judge_restart(restart)

    def _judge_restart(self, restart: Any, *, recreation: bool = False) -> None:
        """Settle every ReplicaSet, restart, let the ReplicaSets act on what the restart sent:
        the running pods never fall below min(what ran, what the spread needs), and a quiet
        federation (everything placed runs) loses no running pod at all."""
        for _ in range(5):  # until what the coordinator decided on what it heard is done
            pods = self._members_state()
            for member in self.fed.members.values():
                while member.replicaset_step():
                    pass
                if member.stream is not None:  # what runs there now, the coordinator has heard
                    member.observe()
                    member.report()
                    self.fed.flush(member)
            self.fed.pump()
            if pods == self._members_state():
                break
        before = self.fed.world.placements.get(fm.KEY)
        # A re-creation is quiet only with no handover in flight: a pod kept until its replacement
        # is Ready is already decided away, and the new spread, placed from scratch, may need none.
        quiet = (before is not None and placement.settled(before) and not self.fed.world.marks_for(fm.KEY)
                 and not (recreation and any(s.kept for s in before.subsets))
                 and all(m.stream is not None and m.running_pods() == set(m.pods)
                         for m in self.fed.members.values()))
        # Judged: the pods the coordinator knows of. Pods a disconnected member's ReplicaSet made
        # meanwhile are unknown to it; if its agent also restarts, nothing tells it of them before
        # the resync (a known gap: the Hello does not carry the member Deployment's replicas).
        running = {name: member.running_pods() if member.stream is not None else set()
                   for name, member in self.fed.members.items()}
        restart()
        for member in self.fed.members.values():
            while member.replicaset_step():
                pass
        after = {name: member.running_pods() for name, member in self.fed.members.items()}
        needed = 0 if before is None else before.replicas - before.unplaced
        total_before, total_after = (sum(len(v) for v in found.values()) for found in (running, after))
        assert total_after >= min(total_before, needed), (running, after, needed)
        hypothesis.event(f"restart judged quiet: {quiet}")
        if quiet:
            for name in fm.CLUSTERS:
                assert running[name] <= after[name], (name, running[name] - after[name])

    def _members_state(self) -> dict[str, tuple[set[str], dict[str, int]]]:
        """Per member: its pods and the quotas its agent enforces."""
        return {name: (set(member.pods), member.quotas()) for name, member in self.fed.members.items()}

    @stateful.rule(name=CLUSTER)
    def member_cluster_deleted(self, name: str) -> None:
        """Its MemberCluster deleted on the hub (a GitOps prune): nothing moves, no quota changes;
        while its agent is connected the coordinator creates it again with what it had
        (`MemberClusters.restore`)."""
        before = self.fed.world.placements.get(fm.KEY)
        quotas = {n: m.quotas() for n, m in self.fed.members.items()}
        self._hub(watcher.apply_to_world(self.fed.world, watcher.HubEvent("cluster", "DELETED", name)))
        kept = self.fed.world.member(name)
        assert kept is not None, name
        if self.fed.members[name].stream is not None:
            info = watcher.ClusterInfo(name, kept.labels, kept.taints)
            self._hub(watcher.apply_to_world(self.fed.world, watcher.HubEvent("cluster", "ADDED", name,
                                                                              cluster=info)))
        assert self.fed.world.placements.get(fm.KEY) == before
        assert {n: m.quotas() for n, m in self.fed.members.items()} == quotas

    @stateful.rule(seconds=st.sampled_from([1, 5, 12, 31]))
    def time_passes(self, seconds: int) -> None:
        """The clock moves: every member's controller runs a round (its ReplicaSet, scheduler and
        cache catch up, stuck pods are rescheduled), connected agents beat, failover ticks."""
        self.clock.advance(seconds)
        for name in fm.CLUSTERS:
            self.fed.controller_round(name)
        self.fed.heartbeat_and_tick()

    @stateful.rule(seconds=st.integers(LOST_SECONDS + 1, 3 * LOST_SECONDS),
                   order=st.permutations(fm.CLUSTERS))
    def coordinator_partition(self, seconds: int, order: list[str]) -> None:
        """Every agent goes silent at once (the fault is on the coordinator's side) for longer than
        clusterLostSeconds, then they return one by one: no replica moves, no running pod is deleted."""
        for name in fm.CLUSTERS:
            self.fed.controller_round(name)
        before = self.fed.world.placements.get(fm.KEY)
        # Judged only when nothing else would move a replica meanwhile: everything placed fits and
        # runs (a Pending pod may be rescheduled while the agents are cut off, by design), every
        # pod holds a subset (a pod admitted into none is surplus the next reports may remove), and
        # no agent has spare pods to remove (a removal under way goes on, fail static, at the pace
        # of its pause: it was decided before the partition, not because of it).
        quiet = (before is not None and placement.settled(before) and not self.fed.world.marks_for(fm.KEY)
                 and all(m.stream is not None and sum(m.quotas().values()) == len(m.pods)
                         and m.running() == m.holding() and "" not in m.holding()
                         and not m.spare_due().pods for m in self.fed.members.values()))
        running = {name: {p.name for p in member.pods.values() if p.node is not None}
                   for name, member in self.fed.members.items()}
        for name in fm.CLUSTERS:
            self.fed.disconnect(name)
        for _ in range(0, seconds, ROUND_SECONDS):  # the members' controllers go on (fail static)
            self.clock.advance(ROUND_SECONDS)
            for name in fm.CLUSTERS:
                self.fed.controller_round(name)
            self.fed.heartbeat_and_tick()
        for name in order:
            self.fed.connect(name)
            self.fed.heartbeat_and_tick()
            for member in self.fed.members.values():
                while member.replicaset_step():
                    pass
        hypothesis.event(f"partition judged: {quiet}")
        if not quiet:
            return
        assert before is not None
        after = self.fed.world.placements[fm.KEY]
        assert after.counts() == before.counts(), (before.counts(), after.counts())
        for name, member in self.fed.members.items():  # no running pod deleted (a stuck Pending one may be)
            assert running[name] <= set(member.pods), (name, running[name] - set(member.pods))

    # --- invariants -----------------------------------------------------------------------------------

    @stateful.invariant()
    def status_pass_follows(self) -> None:
        """Not a check: the status pass writes each step's placement (kept two steps deep)."""
        self.status_before = self.status_now
        self.status_now = (self.uid, self.fed.world.placements.get(fm.KEY))

    @stateful.invariant()
    def placement_accounts_for_every_replica_within_caps(self) -> None:
        entry, result = self.fed.world.spread(fm.KEY), self.fed.world.placements.get(fm.KEY)
        if entry is None or result is None:
            return
        assert result.replicas == entry.replicas == self.replicas
        kept = sum(s.kept for s in result.subsets)  # Ready pods the handover keeps (not the rule's)
        assert result.placed - kept + result.unplaced == result.replicas and result.unplaced >= 0
        percents = [s.percent for s in entry.spec.subsets]
        if any(p is not None for p in percents):
            share = apportion.round_half_up(fractions.Fraction(
                sum(p or 0 for p in percents) * result.replicas, 100))
            bounded = zip(result.subsets, percents, strict=True)
            assert sum(r.replicas - r.kept for r, p in bounded if p is not None) <= share
        for subset, placed in zip(entry.spec.subsets, result.subsets, strict=True):
            if isinstance(subset.max_replicas, int):
                assert placed.replicas - placed.kept <= subset.max_replicas, (subset.name, placed)
            elif subset.percent is not None:
                assert placed.replicas - placed.kept <= math.floor(subset.percent * result.replicas / 100) + 1
        lost_after = entry.lost_after
        brake = self.fed.world.brakes.state(fm.KEY)
        braked = brake.clusters if brake is not None else frozenset()
        for name, count in result.clusters.items():
            if count:  # on a lost cluster only while the failover brake keeps it (the fault looks ours)
                assert name in fm.CLUSTERS, (name, result)
                assert self.fed.world.ready(name, after=lost_after) or name in braked, (name, result, brake)

    @stateful.invariant()
    def no_ready_pod_is_removed_while_the_spread_needs_it(self) -> None:
        """The placement keeps as many of the verified Ready pods (of clusters it may still use) as
        the spread needs: a Ready pod goes only when its replacements are Ready."""
        entry, result = self.fed.world.spread(fm.KEY), self.fed.world.placements.get(fm.KEY)
        if entry is None or result is None:
            return
        usable = self.fed.world.ready_selected(fm.KEY)
        ready = self.fed.world.pods.ready_for(fm.KEY, usable=usable)
        # Unverified clusters' pods (a reconnect, a restart) are kept whole, not counted Ready: a
        # release decided while they were verified stands, and what they hold still counts.
        unverified = self.fed.world.pods.unverified_for(fm.KEY, usable=usable)
        have = keep = 0
        for subset in result.subsets:
            for source in (ready, unverified):
                for name, count in (source.get(subset.name) or {}).items():
                    if name in subset.clusters:
                        have += count
                        keep += min(count, subset.clusters[name])
        # Replicas no rule lets the spread place anywhere (caps) have no replacement to wait for.
        assert keep >= min(have, result.replicas - result.unplaced), (ready, result.counts())
        # The same per cluster, counting clusters that left the selection and pods of subsets the
        # placement no longer has (a member workload keeps min(its Ready pods, its share)).
        world = self.fed.world
        usable = world.ready_selected(fm.KEY) | world.departing(fm.KEY)
        per_cluster: dict[str, int] = {}
        for per_subset in world.pods.ready_for(fm.KEY, usable=usable).values():
            for name, count in per_subset.items():
                per_cluster[name] = per_cluster.get(name, 0) + count
        kept = sum(min(count, result.clusters.get(name, 0)) for name, count in per_cluster.items())
        needed = min(sum(per_cluster.values()), result.replicas - result.unplaced)
        assert kept >= needed, (per_cluster, result.clusters)

    @stateful.invariant()
    def connected_agents_enforce_exactly_the_placement(self) -> None:
        if fm.KEY in self.fed.coordinator.settling.waiting():
            return  # a restored spread waits for the agents: each keeps what it runs (fail static)
        result = self.fed.world.placements.get(fm.KEY)
        for name, member in self.fed.members.items():
            if member.stream is None:
                continue
            used = result is not None and any(name in s.clusters for s in result.subsets)
            if not used:
                # (one the spread no longer selects keeps its assignment from its resync until its
                # first report says what runs there: unknown is not zero)
                kept = fm.KEY in self.fed.coordinator.awaiting_report(name)
                assert kept or member.book.assignment(fm.KEY) is None, name
                continue
            assert result is not None
            expected = {s.name: s.clusters.get(name, 0) for s in result.subsets}
            if member.book.assignment(fm.KEY) is None:  # sent only while it has replicas or pods
                assert not any(expected.values()), (name, expected)
                continue
            assert member.quotas() == expected, (name, member.quotas(), expected)

    @stateful.invariant()
    def no_admission_put_a_subset_above_its_quota(self) -> None:
        for member in self.fed.members.values():
            for subset, count in member.holding().items():
                if subset:
                    assert count <= member.allowance.get(subset, 0), (member.name, subset, count,
                                                                      member.allowance)

    # --- convergence ----------------------------------------------------------------------------------

    def teardown(self) -> None:
        if not hasattr(self, "fed"):
            return
        hypothesis.event(f"strategy {self.strategy}")
        for member in self.fed.members.values():
            for what in member.seen:
                hypothesis.event(f"seen: {what}")
        for name in fm.CLUSTERS:
            if self.fed.members[name].stream is None:
                self.fed.connect(name)
        if self.strategy == "Adaptive":  # capacity that allows every replica anywhere: nothing waits
            for member in self.fed.members.values():  # (twice: room for pods the handover keeps)
                member.set_nodes(max(member.nodes, math.ceil(2 * self.replicas / fm.SLOTS_PER_NODE)))
        quiet = 0
        for _ in range(MAX_ROUNDS):
            before = self._state()
            self.clock.advance(ROUND_SECONDS)
            for name in fm.CLUSTERS:
                self.fed.controller_round(name)
            self.fed.heartbeat_and_tick()
            # Not quiet while a mark holds: the rollout below would admit pods into no subset there.
            quiet = quiet + 1 if self._state() == before and not self._marked() else 0
            if quiet >= QUIET_ROUNDS:
                break
        assert quiet >= QUIET_ROUNDS, f"no fixed point after {MAX_ROUNDS} rounds: {self._state()}"
        self._check_fixed_point()
        for member in self.fed.members.values():  # a rollout: every pod replaced through the webhook
            for name in sorted(member.pods):
                member.delete_pod(name)
            member.observe()
            while member.replicaset_step():
                pass
            member.schedule()
            member.observe()
        self._check_pods_match_the_placement()
        for member in self.fed.members.values():
            for what in member.seen:
                hypothesis.event(f"seen by the end: {what}")

    def _marked(self) -> bool:
        """Whether an unschedulable mark holds now: the coordinator's, or an agent's own."""
        return bool(self._state()[2]) or any(m.book.assignment(fm.KEY) is not None and m.book.marked(fm.KEY)
                                             for m in self.fed.members.values())

    def _state(self) -> tuple[Any, ...]:
        result = self.fed.world.placements.get(fm.KEY)
        return (result.counts() if result else None,
                tuple((m.name, tuple(sorted(m.quotas().items())), tuple(sorted(m.holding().items())),
                       tuple(sorted(m.running().items())), tuple(sorted(m.book.marked(fm.KEY))))
                      for m in self.fed.members.values()),
                tuple(m.since for m in self.fed.world.marks_for(fm.KEY)
                      if self.clock() < m.since + datetime.timedelta(seconds=UNSCHEDULABLE_SECONDS)))

    def _check_fixed_point(self) -> None:
        result = self.fed.world.placements[fm.KEY]
        with self.fed.coordinator.lock:
            again = self.fed.coordinator.publish([fm.KEY]).placements[fm.KEY]
        assert again.counts() == result.counts(), "the coordinator is not at a fixed point"
        for member in self.fed.members.values():
            assert member.stream is not None and member.stream.outgoing.empty(), member.name
            assert sum(member.quotas().values()) == len(member.pods), (member.name, member.quotas(),
                                                                       sorted(member.pods))
            # Assignments only where replicas are: a share of 0 with no pods left is removed —
            # unless the spread is scaled to 0 (its workloads stay, at 0).
            assert member.book.assignment(fm.KEY) is None or member.pods or self.replicas == 0, (
                member.name, member.quotas())
        self.connected_agents_enforce_exactly_the_placement()
        if self.strategy == "Adaptive" and not any("" in m.holding() for m in self.fed.members.values()):
            # Waiting is state: replicas that fit nowhere stay waiting until their pods run. Pods of
            # the spread admitted into no subset (the webhook fails open when a subset is full)
            # take room no subset counts, so replicas may wait beside them for good: judged only
            # when every pod holds a subset.
            assert again.capacity_exhausted == 0, again

    def _check_pods_match_the_placement(self) -> None:
        result = self.fed.world.placements[fm.KEY]
        for name, member in self.fed.members.items():
            expected = {s.name: s.clusters.get(name, 0) for s in result.subsets}
            held = member.holding()
            assert "" not in held, (name, held)
            assert {s: n for s, n in expected.items() if n} == held, (name, expected, held)
            running = sum(member.running().values())
            assert running == min(len(member.pods), member.slots()), (name, running, member.slots())
            if self.strategy == "Adaptive":
                assert member.running() == held, (name, member.running(), held)


# `make test` replays the same 60 interleavings every run (derandomized); `make soak` explores
# new ones each time. Every long run so far has found interleavings the fixed draws never did
# (RELIABILITY.md, "What fedspread does not guarantee"), so a random draw in `make test` could
# fail CI at random rather than tell anything new: what soak finds is replayed as a regression.
FederationMachine.TestCase.settings = hypothesis.settings(
    max_examples=400 if SOAK else 60, stateful_step_count=80 if SOAK else 30, deadline=None,
    derandomize=not SOAK, database=None if not SOAK else hypothesis.settings.default.database,
    suppress_health_check=[hypothesis.HealthCheck.too_slow, hypothesis.HealthCheck.filter_too_much],
)
test_invariants_under_interleaved_events = FederationMachine.TestCase
