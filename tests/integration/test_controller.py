"""The agent's controller on a real member (member-1): workload sync, deletion cost, adaptive
reschedule, scale-down order and inventory.

What runs: the real cache (list+watch of member-1's apiserver), the reconciler, the inventory
reporter and, where it is the subject, workload sync — each in its own thread, with a real
Bookkeeping and ReportOutbox. Assignments are installed with `Bookkeeping.set_assignment` (the gRPC
link is tested elsewhere). Pods are placed by the real scheduler and run by the node simulator.

Pods of a spread are created by hand with `fedspread.io/subset` already set — exactly what the
webhook would have written — so each test controls which subset every pod is in. A pod counts as a
spread's only while its owner chain leads to the spread's marked member Deployment
(agents/owners.py), so each such pod names as its controller that Deployment, made by the test
from the assignment with 0 replicas (its ReplicaSet makes no pod of its own). Waits have
deadlines that fail with what was last seen; nothing asserts on timing.

Why (d) uses a model: the sandbox's Kubernetes 1.20 ReplicaSet ignores pod-deletion-cost (DESIGN
§7a, known gap), so the scale-down order is checked on `deletion_cost.replicaset_deletion_order`,
a model of the >= 1.22 ranking, fed with the real pods and the costs the agent really wrote.
"""

from __future__ import annotations

import dataclasses
import fractions
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import Clusters
from kubernetes.client.exceptions import ApiException
from waiting import wait_for

from agents import bookkeeping, outbox, runnable
from agents.cache import store as cache
from agents.cache import views
from agents.controller import reconciler, workload, workload_loop
from agents.inventory import reporter
from federation.api import names, quantity
from federation.core import deletion_cost
from federation.rpc import agent_pb2, assignment, common_pb2
from tests.support import builders

MEMBER = "member-1"
WAIT = 60.0  # generous: the sandbox shares 2 cores with everything else
FEDERATION = "test-fed"
ZONE = "topology.kubernetes.io/zone"


@dataclasses.dataclass
class Agent:
    """The controller half of an agent for member-1, running in threads."""

    clusters: Clusters
    books: bookkeeping.Bookkeeping
    box: outbox.ReportOutbox
    cache: cache.Cache
    reconciler: reconciler.Reconciler
    reporter: reporter.InventoryReporter
    sync: workload.WorkloadSync
    stop: threading.Event
    threads: list[threading.Thread] = dataclasses.field(default_factory=list)

    def start(self, loop: runnable.Runnable) -> None:
        """Run one of the agent's loops on a thread, without a watchdog."""
        thread = threading.Thread(target=loop.run, args=(self.stop, runnable.no_beat), name=loop.name,
                                  daemon=True)
        thread.start()
        self.threads.append(thread)

    def start_workload_sync(self) -> None:
        self.start(workload_loop.WorkloadLoop(self.sync))

    def wait_rounds(self, counter: Callable[[], int], rounds: int = 2) -> None:
        """Wait until `rounds` more complete rounds of a loop have run."""
        target = counter() + rounds
        wait_for(lambda: counter() >= target, timeout=WAIT, message="the loop stopped running rounds")

    def events(self) -> list[agent_pb2.AgentMessage]:
        """Every message the outbox has for the link right now (events first)."""
        return self.box.drain(timeout=0)


@pytest.fixture
def agent(clusters: Clusters) -> Iterator[Agent]:
    core, apps = clusters.core(MEMBER), clusters.apps(MEMBER)
    books, box = bookkeeping.Bookkeeping(), outbox.ReportOutbox()
    feed = cache.Cache(core, apps, watch_seconds=60)
    feed.start()
    running = Agent(
        clusters=clusters, books=books, box=box, cache=feed,
        reconciler=reconciler.Reconciler(core, books, box, feed, heartbeat_seconds=5.0),
        reporter=reporter.InventoryReporter(feed, box, heartbeat_seconds=5.0),
        sync=workload.WorkloadSync(apps, books, feed, core_api=core), stop=threading.Event())
    try:
        assert feed.wait_synced(WAIT), "the cache never finished its first list of member-1"
        running.start(running.reconciler)
        running.start(running.reporter)
        yield running
    finally:
        running.stop.set()
        feed.stop()
        for thread in running.threads:
            thread.join(timeout=10)


def rule(name: str, index: int, quota: int) -> assignment.SubsetRule:
    return assignment.SubsetRule(name=name, index=index, quota=quota)


def spread_of(namespace: str, name: str, quotas: dict[str, int], *, generation: int = 1,
              strategy: assignment.Strategy | None = None, template: dict[str, Any] | None = None,
              replicas: int | None = None) -> assignment.Assignment:
    rules = tuple(rule(subset, i, quota) for i, (subset, quota) in enumerate(quotas.items()))
    return assignment.Assignment(
        spread=assignment.spread_key(namespace, name), generation=generation, namespace=namespace,
        workload=name, replicas=sum(quotas.values()) if replicas is None else replicas,
        template=template or {}, template_revision="r1", subsets=rules, subset_count=len(rules),
        strategy=strategy or assignment.Strategy(), spread_uid=f"uid-{namespace}-{name}",
        federation=FEDERATION)


def bare_pod(name: str, *, spread: str, subset: str | None, cpu: str = "100m",
             owner: dict[str, Any] | None = None) -> dict[str, Any]:
    annotations = {names.SUBSET_ANNOTATION: subset} if subset else {}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {names.SPREAD_LABEL: spread, "app": spread},
                     "annotations": annotations, "ownerReferences": [owner] if owner else []},
        "spec": {"terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "app", "image": "registry.example/app:1.0",
                                 "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
    }


def pods_json(clusters: Clusters, namespace: str) -> dict[str, dict[str, Any]]:
    listing = json.loads(clusters.core(MEMBER).list_namespaced_pod(namespace, _preload_content=False).data)
    return {p["metadata"]["name"]: p for p in listing["items"]}


def costs_of(pods: dict[str, dict[str, Any]]) -> dict[str, int | None]:
    cost = names.DELETION_COST_ANNOTATION
    return {name: deletion_cost.parse_cost((p["metadata"].get("annotations") or {}).get(cost))
            for name, p in pods.items()}


def wait_costs(clusters: Clusters, namespace: str, expected: Callable[[dict[str, int | None]], bool],
               what: str) -> dict[str, dict[str, Any]]:
    seen: dict[str, Any] = {}

    def probe() -> dict[str, dict[str, Any]] | None:
        pods = pods_json(clusters, namespace)
        seen["costs"] = costs_of(pods)
        return pods if expected(seen["costs"]) else None

    return wait_for(probe, timeout=WAIT, message=lambda: f"{what}; costs last seen: {seen.get('costs')}")


def member_owner(clusters: Clusters, value: assignment.Assignment) -> dict[str, Any]:
    """A controller reference to `value`'s member Deployment, marked as `value`'s and made (once)
    with 0 replicas and a selector that matches none of the test's pods."""
    template = builders.deployment(f"{value.workload}-owner", 0, cpu="10m", image="registry.example/app:1.0")
    body = workload.render(dataclasses.replace(value, replicas=0, template=template))
    apps = clusters.apps(MEMBER)
    try:
        made = apps.create_namespaced_deployment(value.namespace, body)
    except ApiException as error:
        if error.status != 409:
            raise
        made = apps.read_namespaced_deployment(value.workload, value.namespace)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": made.metadata.name,
            "uid": made.metadata.uid, "controller": True}


def create_pods(clusters: Clusters, value: assignment.Assignment, subsets: dict[str, str | None],
                cpu: str = "100m") -> None:
    """Pods of spread `value` in the given subsets, controlled by its member Deployment."""
    owner = member_owner(clusters, value)
    for name, subset in subsets.items():
        body = bare_pod(name, spread=value.name, subset=subset, cpu=cpu, owner=owner)
        clusters.core(MEMBER).create_namespaced_pod(value.namespace, body)


def all_ready(clusters: Clusters, namespace: str, count: int) -> None:
    def probe() -> bool:
        pods = pods_json(clusters, namespace).values()
        return len(pods) == count and all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
            for p in pods)

    wait_for(probe, timeout=WAIT, message=f"{count} pods Running and Ready in {namespace}")


# --------------------------------------------------------------------------------------------
# (a) workload sync
# --------------------------------------------------------------------------------------------


def hub_deployment(name: str) -> dict[str, Any]:
    """The hub Deployment as the coordinator sends it: with what the agent must not copy (uid,
    resourceVersion, status)."""
    return builders.deployment(name, 9, namespace="hub-ns", cpu="50m", image="registry.example/app:1.0",
                               metadata={"uid": "hub-uid", "resourceVersion": "999", "labels": {"app": name}},
                               status={"replicas": 9})


def read_deployment(agent: Agent, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        apps = agent.clusters.apps(MEMBER)
        response = apps.read_namespaced_deployment(name, namespace, _preload_content=False)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return dict(json.loads(response.data))


def settled(deployment: dict[str, Any] | None) -> dict[str, Any] | None:
    """The Deployment if its controller has nothing left to do (status matches spec), else None."""
    if deployment is None:
        return None
    spec, status = deployment["spec"], deployment.get("status") or {}
    done = (status.get("observedGeneration") == deployment["metadata"]["generation"]
            and status.get("replicas") == status.get("updatedReplicas") == status.get("readyReplicas")
            == status.get("availableReplicas") == spec["replicas"])
    return deployment if done else None


def test_workload_sync_creates_updates_skips_and_removes(agent: Agent, namespace: str) -> None:
    web = spread_of(namespace, "web", {"a": 2}, template=hub_deployment("web"))
    agent.books.set_assignment(web)
    agent.start_workload_sync()

    created = wait_for(lambda: read_deployment(agent, namespace, "web"), timeout=WAIT,
                       message="the member Deployment web was never created")
    assert created["spec"]["replicas"] == 2
    assert created["metadata"]["labels"][names.SPREAD_LABEL] == "web"
    assert created["spec"]["template"]["metadata"]["labels"] == {"app": "web", names.SPREAD_LABEL: "web"}
    assert created["metadata"]["annotations"][names.GENERATION_ANNOTATION] == "1"

    agent.books.set_assignment(dataclasses.replace(web, replicas=3, generation=2))
    def scaled() -> dict[str, Any] | None:
        live = read_deployment(agent, namespace, "web")
        return live if live and live["spec"]["replicas"] == 3 else None

    updated = wait_for(scaled, timeout=WAIT, message="the Deployment was never scaled to the new share (3)")
    assert updated["metadata"]["annotations"][names.GENERATION_ANNOTATION] == "2"

    # The same assignment again (a new object, as after a resync): no write at all. Wait until the
    # Deployment controller is done with its status, so that only our writes could change it.
    wait_for(lambda: (v := agent.cache.deployment(namespace, "web")) and v.replicas == 3, timeout=WAIT,
             message="the cache never saw the updated Deployment")
    before = wait_for(lambda: settled(read_deployment(agent, namespace, "web")), timeout=WAIT,
                      message=lambda: f"Deployment never settled: {read_deployment(agent, namespace, 'web')}")
    agent.books.set_assignment(dataclasses.replace(web, replicas=3, generation=2))
    agent.wait_rounds(lambda: agent.sync.rounds, rounds=3)
    after = read_deployment(agent, namespace, "web")
    assert after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], "a needless write"

    # An explicit SpreadRemoval: the link drops the assignment, then removes the workload.
    agent.books.remove_assignment(web.spread)
    assert agent.sync.remove(web.spread, federation=FEDERATION) == 1
    wait_for(lambda: read_deployment(agent, namespace, "web") is None, timeout=WAIT,
             message="the removed spread's Deployment still exists")


def test_workload_sync_creates_the_namespace_the_member_lacks(agent: Agent) -> None:
    missing = f"t-{uuid.uuid4().hex[:10]}"  # exists in no cluster
    core = agent.clusters.core(MEMBER)
    web = spread_of(missing, "web", {"a": 1}, template=hub_deployment("web"))
    agent.books.set_assignment(web)
    agent.start_workload_sync()
    try:
        wait_for(lambda: read_deployment(agent, missing, "web"), timeout=WAIT,
                 message=f"no Deployment web in the namespace {missing} the member lacked")
        labels = core.read_namespace(missing).metadata.labels
        assert labels[names.CREATED_BY_LABEL] == "agent"
    finally:
        agent.books.remove_assignment(web.spread)
        agent.sync.remove(web.spread, federation=FEDERATION)
        core.delete_namespace(missing, propagation_policy="Background")


def test_nothing_is_deleted_without_an_explicit_removal(agent: Agent, namespace: str) -> None:
    api, kept = (spread_of(namespace, n, {"a": 1}, template=hub_deployment(n)) for n in ("api", "kept"))
    for value in (api, kept):
        agent.books.set_assignment(value)
    agent.start_workload_sync()

    def written(name: str) -> tuple[Any, ...] | None:  # not its status: its pods start meanwhile
        found = read_deployment(agent, namespace, name)
        meta = (found or {}).get("metadata") or {}
        ours = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(names.PREFIX)}
        return found and (meta["generation"], meta["labels"], ours, found["spec"]["replicas"])
    before = wait_for(lambda: agent.cache.deployment(namespace, "kept") and written("api"), timeout=WAIT,
                      message="the Deployments never appeared in the cache")
    # Its assignment is gone (an agent restart, or a coordinator whose hub lists no such spread,
    # resynced in full): the Deployment stays as last written, round after round.
    agent.books.remove_assignment(api.spread)
    agent.wait_rounds(lambda: agent.sync.rounds, rounds=5)
    assert written("api") == before, "deleted or changed by absence"
    # A removal that orphans its workload: released, it keeps running unmanaged.
    agent.books.remove_assignment(kept.spread)
    assert agent.sync.release(kept.spread, federation=FEDERATION) == 1
    agent.wait_rounds(lambda: agent.sync.rounds, rounds=2)
    released = written("kept")
    assert released is not None and names.SPREAD_KEY_ANNOTATION not in released[2], "not released"
    # Only an explicit removal of this federation deletes: another federation's removes nothing.
    assert agent.sync.remove(api.spread, federation="another-federation") == 0
    assert agent.sync.remove(api.spread, federation=FEDERATION) == 1
    wait_for(lambda: read_deployment(agent, namespace, "api") is None, timeout=WAIT,
             message="the removed spread's Deployment still exists")
    assert agent.sync.remove(kept.spread, federation=FEDERATION) == 0, "a released Deployment is not ours"


# --------------------------------------------------------------------------------------------
# (b) deletion cost follows quotas
# --------------------------------------------------------------------------------------------


def test_quota_shrink_moves_deletion_costs(agent: Agent, namespace: str) -> None:
    # n = 3 subsets: in quota 100·(n-i) = 300/200/100, over quota -100·(i+1) = -100/-200/-300,
    # no subset -100·(n+1) = -400.
    agent.books.set_assignment(spread := spread_of(namespace, "s", {"a": 2, "b": 2, "c": 2}))
    create_pods(agent.clusters, spread, {"a-0": "a", "a-1": "a", "b-0": "b", "b-1": "b",
                                                 "c-0": "c", "c-1": "c", "x-0": None})
    all_ready(agent.clusters, namespace, 7)
    first = {"a-0": 300, "a-1": 300, "b-0": 200, "b-1": 200, "c-0": 100, "c-1": 100, "x-0": -400}
    wait_costs(agent.clusters, namespace, lambda c: c == first, f"initial costs {first}")
    wait_for(lambda: running_counts(agent, f"{namespace}/s") == {"a": 2, "b": 2, "c": 2}, timeout=WAIT,
             message=lambda: f"pod counts report: {running_counts(agent, f'{namespace}/s')}")

    agent.wait_rounds(lambda: agent.reconciler.rounds)
    versions = {n: p["metadata"]["resourceVersion"] for n, p in pods_json(agent.clusters, namespace).items()}

    agent.books.set_assignment(spread_of(namespace, "s", {"a": 1, "b": 2, "c": 0}, generation=2))

    def shrunk(costs: dict[str, int | None]) -> bool:
        return (sorted([costs["a-0"], costs["a-1"]], key=lambda v: v or 0) == [-100, 300]
                and costs["b-0"] == costs["b-1"] == 200 and costs["c-0"] == costs["c-1"] == -300
                and costs["x-0"] == -400)

    wait_costs(agent.clusters, namespace, shrunk, "a: one in quota (300), one over (-100); b 200; c -300")
    agent.wait_rounds(lambda: agent.reconciler.rounds)
    pods = pods_json(agent.clusters, namespace)
    unchanged = [n for n, c in costs_of(pods).items() if c == first[n]]
    assert sorted(unchanged) == sorted(["b-0", "b-1", "x-0", next(n for n in ("a-0", "a-1")
                                                                   if costs_of(pods)[n] == 300)])
    for name in unchanged:
        assert pods[name]["metadata"]["resourceVersion"] == versions[name], f"{name} written without a change"


def running_counts(agent: Agent, spread: str) -> dict[str, int] | None:
    """Running pods per subset in the latest PodCountsReport for `spread`."""
    for message in agent.box.latest():
        if message.WhichOneof("body") == "pod_counts":
            for item in message.pod_counts.spreads:
                if item.spread == spread:
                    return {s.subset: s.counts.running for s in item.subsets}
    return None


# --------------------------------------------------------------------------------------------
# (c) adaptive reschedule
# --------------------------------------------------------------------------------------------


def test_adaptive_reschedule_marks_reports_deletes_and_recovers(agent: Agent, namespace: str) -> None:
    strategy = assignment.Strategy(type="Adaptive", reschedule_critical_seconds=3, unschedulable_seconds=6)
    spread = spread_of(namespace, "ad", {"big": 2, "small": 2}, strategy=strategy)
    agent.books.set_assignment(spread)
    create_pods(agent.clusters, spread, {"small-0": "small"})
    # No node has 8 cpu: these stay Pending with PodScheduled=False/Unschedulable.
    create_pods(agent.clusters, spread, {"big-0": "big", "big-1": "big"}, cpu="8")

    reports: list[agent_pb2.UnschedulableReport] = []

    def reported() -> list[agent_pb2.UnschedulableReport]:
        reports.extend(m.unschedulable for m in agent.events() if m.WhichOneof("body") == "unschedulable")
        return reports

    wait_for(reported, timeout=WAIT, message="no UnschedulableReport for the stuck pods of subset big")
    chosen = agent.books.admit(spread.spread, "probe-1", revision="", dry_run=True)
    assert chosen is not None and chosen.name == "small", "the webhook would still place new pods in big"
    assert (reports[0].spread, reports[0].subset, reports[0].generation) == (spread.spread, "big", 1)
    assert reports[0].pod_count >= 1

    wait_for(lambda: not {"big-0", "big-1"} & set(pods_json(agent.clusters, namespace)), timeout=WAIT,
             message=lambda: f"stuck pods not deleted: {sorted(pods_json(agent.clusters, namespace))}")
    assert "small-0" in pods_json(agent.clusters, namespace), "a schedulable pod was deleted"

    def usable_again() -> bool:
        rule = agent.books.admit(spread.spread, "probe-2", revision="", dry_run=True)
        return rule is not None and rule.name == "big"

    wait_for(usable_again, timeout=WAIT, message="subset big never became usable again")
    reported()
    assert [(r.spread, r.subset) for r in reports] == [(spread.spread, "big")], "one report per mark"


# --------------------------------------------------------------------------------------------
# (d) scale-down order, on the model of the >= 1.22 ReplicaSet, with the real costs
# --------------------------------------------------------------------------------------------


def test_scale_down_order_on_model_removes_lowest_priority_first(agent: Agent, namespace: str) -> None:
    agent.books.set_assignment(spread := spread_of(namespace, "d", {"a": 2, "b": 1, "c": 1}))
    subsets: dict[str, str | None] = {"a-0": "a", "a-1": "a", "b-0": "b", "b-1": "b", "c-0": "c", "c-1": "c",
                                      "x-0": None}
    create_pods(agent.clusters, spread, subsets)
    all_ready(agent.clusters, namespace, 7)

    def costs_settled(costs: dict[str, int | None]) -> bool:
        def of(*names: str) -> list[int]:
            return sorted(costs[n] or 0 for n in names)

        return (of("a-0", "a-1") == [300, 300] and of("b-0", "b-1") == [-200, 200]
                and of("c-0", "c-1") == [-300, 100] and costs["x-0"] == -400)

    pods = wait_costs(agent.clusters, namespace, costs_settled,
                      "costs a 300/300, b 200/-200, c 100/-300, x -400")
    models = []
    for source in pods.values():
        seen = views.spread_pod(source)
        assert seen is not None
        models.append(reconciler.pod_view(seen))
    assert all(v.phase == "Running" and v.ready for v in models), "the model ranks by cost only among equals"

    order = deletion_cost.replicaset_deletion_order(models, costs={})  # costs: the pods' real annotations
    assert [subsets[name] for name in order] == [None, "c", "b", "c", "b", "a", "a"]
    victims = deletion_cost.scale_down_victims(models, costs={}, count=3)
    assert [subsets[name] for name in victims] == [None, "c", "b"]


# --------------------------------------------------------------------------------------------
# (e) inventory report
# --------------------------------------------------------------------------------------------


def latest_pools(agent: Agent) -> list[common_pb2.NodePool] | None:
    for message in agent.box.latest():
        if message.WhichOneof("body") == "inventory":
            return list(message.inventory.node_pools)
    return None


def test_inventory_report_pools_and_requested(agent: Agent, namespace: str) -> None:
    nodes = json.loads(agent.clusters.core(MEMBER).list_node(_preload_content=False).data)["items"]
    zones = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in nodes}
    assert len(zones) == 3

    def covering() -> list[Any] | None:
        pools = latest_pools(agent)
        if pools and sum(p.count for p in pools) == 3 and {p.labels[ZONE] for p in pools} == set(
                zones.values()):
            return pools
        return None

    pools = wait_for(covering, timeout=WAIT,
                     message=lambda: f"pools for 3 zones; last seen {latest_pools(agent)}")
    assert all(p.count == 1 and p.allocatable["cpu"] == "4" for p in pools), "zones split the nodes"

    target = sorted(zones)[0]
    pod = bare_pod("bound", spread="none", subset=None, cpu="1500m")
    del pod["metadata"]["labels"][names.SPREAD_LABEL]
    pod["spec"]["nodeName"] = target
    agent.clusters.core(MEMBER).create_namespaced_pod(namespace, pod)

    def truth() -> tuple[fractions.Fraction, int]:
        listing = json.loads(agent.clusters.core(MEMBER).list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={target},{cache.BOUND_ACTIVE_PODS.split(',', 1)[1]}",
            _preload_content=False).data)["items"]
        zero = fractions.Fraction(0)
        cpu = sum((views.pod_requests(p).get("cpu", zero) for p in listing), zero)
        return cpu, len(listing)

    def reported() -> tuple[fractions.Fraction, int] | None:
        pools = latest_pools(agent) or []
        pool = next((p for p in pools if p.labels.get(ZONE) == zones[target]), None)
        if pool is None:
            return None
        return quantity.parse_quantity(pool.requested.get("cpu", "0")), int(pool.requested["pods"])

    def matches() -> bool:
        cpu, count = truth()
        return cpu >= fractions.Fraction(3, 2) and reported() == (cpu, count)

    wait_for(matches, timeout=WAIT,
             message=lambda: f"node {target}: reported (cpu, pods) {reported()}, apiserver says {truth()}")
