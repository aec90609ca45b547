"""The admission handler on a real Bookkeeping: subset choice, patches, deletions, concurrency.

The assignments are hand-made (they are our own value objects); reviews go through the real
parser, and patches are applied with the `jsonpatch` library to check what the apiserver would
store.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import datetime
import itertools
import json
import secrets
import threading
import urllib.request
from typing import Any

import jsonpatch
import pytest

from agents import bookkeeping, metrics, pod_ledger
from agents.webhook import handler, review
from federation import watchdog
from federation.api import names
from federation.core import deletion_cost, mutation
from federation.rpc import assignment

NAMESPACE = "shop"
SPREAD = f"{NAMESPACE}/web"
ZONE = "topology.kubernetes.io/zone"
NOW = datetime.datetime(2025, 1, 1, 12, 0, tzinfo=datetime.UTC)
_uids = itertools.count()


def rule(name: str, index: int, quota: int, **extra: Any) -> assignment.SubsetRule:
    """A subset pinned to zone `name` (plus whatever `extra` sets)."""
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [name]}]}
    return assignment.SubsetRule(name=name, index=index, quota=quota, required_term=term, **extra)


def spread(*rules: assignment.SubsetRule, name: str = "web",
           strategy: str = "Fixed") -> assignment.Assignment:
    """An assignment of spread `shop/<name>` with these subsets."""
    return assignment.Assignment(
        spread=f"{NAMESPACE}/{name}", generation=1, namespace=NAMESPACE, workload=name,
        replicas=sum(r.quota for r in rules), template={}, template_revision="r1",
        subsets=tuple(rules), subset_count=len(rules), strategy=assignment.Strategy(type=strategy),
    )


def pod(name: str | None = "p", *, spread_name: str | None = "web", revision: str = "r1",
        generate_name: str | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A core/v1 Pod as the apiserver sends it in a review."""
    labels = {"app": "web", names.REVISION_LABEL: revision}
    if spread_name is not None:
        labels[names.SPREAD_LABEL] = spread_name
    metadata: dict[str, Any] = {"namespace": NAMESPACE, "labels": labels}
    if name is not None:
        metadata["name"] = name
    if generate_name is not None:
        metadata["generateName"] = generate_name
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}}


def body(operation: str, *, obj: dict[str, Any] | None = None, old: dict[str, Any] | None = None,
         name: str = "", sub_resource: str = "", dry_run: bool = False,
         kind: tuple[str, str, str] = ("", "v1", "Pod")) -> bytes:
    """An AdmissionReview request body."""
    request: dict[str, Any] = {
        "uid": f"uid-{next(_uids)}", "operation": operation, "namespace": NAMESPACE, "name": name,
        "kind": dict(zip(("group", "version", "kind"), kind, strict=True)),
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "object": obj, "oldObject": old, "dryRun": dry_run,
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                     "groups": ["system:serviceaccounts"]},
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": request}).encode()


class Agent:
    """A handler with its bookkeeping and metrics."""

    def __init__(self, *assignments: assignment.Assignment, token: str | None = None) -> None:
        self.clock = NOW
        self.book = bookkeeping.Bookkeeping(clock=lambda: self.clock)
        self.metrics = metrics.AgentMetrics()
        for value in assignments:
            self.book.set_assignment(value)
        source = (lambda: token) if token is not None else secrets.token_hex
        self.handler = handler.AdmissionHandler(self.book, self.metrics, token_source=source)

    def answer(self, raw: bytes) -> dict[str, Any]:
        """The response part of the answer to a request body."""
        response: dict[str, Any] = json.loads(self.handler.respond(raw))["response"]
        return response

    def create(self, obj: dict[str, Any], *, dry_run: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
        """(response, the pod as the apiserver would store it) for a pod CREATE."""
        response = self.answer(body("CREATE", obj=obj, name=obj["metadata"].get("name", ""), dry_run=dry_run))
        assert response["allowed"] is True
        if "patch" not in response:
            return response, obj
        assert response["patchType"] == "JSONPatch"
        operations = json.loads(base64.b64decode(response["patch"]))
        return response, jsonpatch.apply_patch(obj, operations)


def subset_of(stored: dict[str, Any]) -> str | None:
    """The subset annotation of a stored pod."""
    return (stored["metadata"].get("annotations") or {}).get(names.SUBSET_ANNOTATION)


# --- pods that are not ours --------------------------------------------------------------------------


@pytest.mark.parametrize("obj", [pod(spread_name=None), pod(spread_name="other-spread")],
                         ids=["no-label", "unknown-spread"])
def test_pods_of_no_spread_pass_untouched(obj: dict[str, Any]) -> None:
    agent = Agent(spread(rule("a", 0, 2)))
    response, stored = agent.create(obj)
    assert "patch" not in response and stored == obj
    assert agent.book.pending_entries(SPREAD) == ({}, {})
    assert agent.metrics.decision_count(spread="", subset=None, outcome=metrics.PASSTHROUGH) == 1


def test_other_operations_and_resources_pass() -> None:
    agent = Agent(spread(rule("a", 0, 2)))
    assert agent.answer(body("UPDATE", obj=pod(), old=pod())).keys() == {"uid", "allowed"}
    assert agent.answer(body("CONNECT", obj=None)).keys() == {"uid", "allowed"}
    assert agent.book.pending_entries(SPREAD) == ({}, {})


# --- CREATE ---------------------------------------------------------------------------------------------


def test_create_fills_subsets_in_order_then_gives_no_subset() -> None:
    toleration = {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}
    preferred = {"weight": 10, "preference": {"matchExpressions": [
        {"key": "type", "operator": "In", "values": ["worker"]}]}}
    patch = {"metadata": {"labels": {"pool": "a"}},
             "spec": {"containers": [{"name": "app", "env": [{"name": "POOL", "value": "a"}]}]}}
    first_rule = rule("a", 0, 2, tolerations=(toleration,), preferred_terms=(preferred,), patch=patch)
    agent = Agent(spread(first_rule, rule("b", 1, 1)))
    stored = [agent.create(pod(f"p{i}"))[1] for i in range(4)]
    assert [subset_of(s) for s in stored] == ["a", "a", "b", None]

    first = stored[0]
    node_affinity = first["spec"]["affinity"]["nodeAffinity"]
    assert node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] == {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}]}
    assert node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] == [preferred]
    assert first["spec"]["tolerations"] == [toleration]
    assert first["metadata"]["labels"]["pool"] == "a"
    assert first["spec"]["containers"] == [{"name": "app", "image": "nginx",
                                            "env": [{"name": "POOL", "value": "a"}]}]
    assert "tolerations" not in stored[2]["spec"] and "pool" not in stored[2]["metadata"]["labels"]
    assert stored[3] == pod("p3"), "a pod with no subset left is untouched"

    creating, deleting = agent.book.pending_entries(SPREAD)
    assert {n: e.subset for n, e in creating.items()} == {"p0": "a", "p1": "a", "p2": "b"}
    assert deleting == {}
    assert agent.metrics.decision_count(spread=SPREAD, subset="a", outcome=metrics.ASSIGNED) == 2
    assert agent.metrics.decision_count(spread=SPREAD, subset="b", outcome=metrics.ASSIGNED) == 1
    assert agent.metrics.decision_count(spread=SPREAD, subset=None, outcome=metrics.NO_SUBSET) == 1


def test_an_admitted_pod_is_born_with_its_subsets_in_quota_deletion_cost() -> None:
    """As the controller would write it (`deletion_cost.in_quota_cost`, n = 3 subsets in the spec,
    of which this cluster has two): no PATCH of every new pod after it is created."""
    value = dataclasses.replace(spread(rule("a", 0, 1), rule("c", 2, 1)), subset_count=3)
    agent = Agent(value)
    stored = [agent.create(pod(f"p{i}"))[1] for i in range(3)]
    costs = [(s["metadata"].get("annotations") or {}).get(names.DELETION_COST_ANNOTATION) for s in stored]
    assert costs == [str(deletion_cost.in_quota_cost(0, subset_count=3)),
                     str(deletion_cost.in_quota_cost(2, subset_count=3)), None]  # the last: no subset
    assert costs[:2] == ["300", "100"]


def test_required_term_is_anded_into_every_existing_term() -> None:
    agent = Agent(spread(rule("a", 0, 1)))
    obj = pod("p")
    own = [{"matchExpressions": [{"key": "type", "operator": "In", "values": ["worker"]}]},
           {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    obj["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": own}}}
    _, stored = agent.create(obj)
    terms = stored["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    zone = {"key": ZONE, "operator": "In", "values": ["a"]}
    assert terms == [{"matchExpressions": [own[0]["matchExpressions"][0], zone]},
                     {"matchFields": own[1]["matchFields"], "matchExpressions": [zone]}]


def test_dry_run_gets_the_same_answer_and_records_nothing() -> None:
    agent = Agent(spread(rule("a", 0, 1), rule("b", 1, 1)))
    for _ in range(3):
        _, stored = agent.create(pod("p"), dry_run=True)
        assert subset_of(stored) == "a"
    assert agent.book.pending_entries(SPREAD) == ({}, {})
    _, stored = agent.create(pod("p"))
    assert subset_of(stored) == "a"


def test_name_is_generated_when_missing() -> None:
    agent = Agent(spread(rule("a", 0, 2)), token="fixed-token")
    _, stored = agent.create(pod(None, generate_name="web-5d9c7f-"))
    expected = mutation.generated_name("web-5d9c7f-", token="fixed-token")
    assert stored["metadata"]["name"] == expected and expected.startswith("web-5d9c7f-")
    creating, _ = agent.book.pending_entries(SPREAD)
    assert set(creating) == {expected}


def test_names_are_distinct_with_the_default_token_source() -> None:
    agent = Agent(spread(rule("a", 0, 50)))
    names = {agent.create(pod(None, generate_name="web-"))[1]["metadata"]["name"] for _ in range(20)}
    assert len(names) == 20
    assert len(agent.book.pending_entries(SPREAD)[0]) == 20


def surging(value: assignment.Assignment, max_surge: int | str | None = None, *,
             strategy: str = "RollingUpdate") -> assignment.Assignment:
    """`value` whose member Deployment rolls with this strategy and maxSurge."""
    rolling = {"rollingUpdate": {"maxSurge": max_surge}} if max_surge is not None else {}
    return dataclasses.replace(value, template={"spec": {"strategy": {"type": strategy, **rolling}}})


def test_revisions_fill_from_the_first_subset_again() -> None:
    # A surge as large as the workload: the bound never binds, only the per-revision quota does.
    agent = Agent(surging(spread(rule("a", 0, 2), rule("b", 1, 1)), "100%"))
    old = [subset_of(agent.create(pod(f"old{i}", revision="r1"))[1]) for i in range(3)]
    new = [subset_of(agent.create(pod(f"new{i}", revision="r2"))[1]) for i in range(4)]
    assert old == ["a", "a", "b"]
    assert new == ["a", "a", "b", None], "a rolling update's surge pods are counted per revision"


@pytest.mark.parametrize(("max_surge", "strategy", "expected"), [
    # Default 25% of 3 replicas, rounded up: 1. a takes one new pod (3 = 2 + 1), the next goes to b.
    (None, "RollingUpdate", ["a", "b", None]),
    (2, "RollingUpdate", ["a", "a", "b"]),
    ("34%", "RollingUpdate", ["a", "a", "b"]),  # 1.02 rounds up to 2
    # Recreate surges by nothing: no subset holds more than its quota, so no new pod has one.
    (None, "Recreate", [None, None, None]),
])
def test_a_subset_holds_no_more_than_its_quota_plus_the_surge_while_old_pods_run(
        max_surge: int | str | None, strategy: str, expected: list[str | None]) -> None:
    agent = Agent(surging(spread(rule("a", 0, 2), rule("b", 1, 1)), max_surge, strategy=strategy))
    for i in range(3):
        agent.create(pod(f"old{i}", revision="r1"))
    new = [subset_of(agent.create(pod(f"new{i}", revision="r2"))[1]) for i in range(3)]
    assert new == expected


def test_one_revision_is_admitted_up_to_the_quota_whatever_the_surge() -> None:
    # With one revision the surge never matters: the quota alone, as before issue 28.
    for max_surge in (0, 1, "100%"):
        agent = Agent(surging(spread(rule("a", 0, 2), rule("b", 1, 1)), max_surge))
        assert [subset_of(agent.create(pod(f"p{i}"))[1]) for i in range(4)] == ["a", "a", "b", None]


def test_unschedulable_subset_is_skipped_until_it_recovers() -> None:
    until = NOW + datetime.timedelta(minutes=5)
    agent = Agent(spread(rule("a", 0, 2, unschedulable_until=until), rule("b", 1, 2), strategy="Adaptive"))
    assert subset_of(agent.create(pod("p0"))[1]) == "b"
    agent.clock = until
    assert subset_of(agent.create(pod("p1"))[1]) == "a"


def test_local_unschedulable_mark_is_honoured() -> None:
    agent = Agent(spread(rule("a", 0, 2), rule("b", 1, 2), strategy="Adaptive"))
    agent.book.mark_unschedulable(SPREAD, "a", until=NOW + datetime.timedelta(minutes=1))
    assert subset_of(agent.create(pod("p0"))[1]) == "b"


def test_fixed_strategy_ignores_unschedulable_marks() -> None:
    until = NOW + datetime.timedelta(minutes=5)
    agent = Agent(spread(rule("a", 0, 2, unschedulable_until=until), rule("b", 1, 2)))
    agent.book.mark_unschedulable(SPREAD, "a", until=until)
    assert [subset_of(agent.create(pod(f"p{i}"))[1]) for i in range(3)] == ["a", "a", "b"]


def test_malformed_pod_of_a_spread_is_rejected_before_anything_is_recorded() -> None:
    agent = Agent(spread(rule("a", 0, 2)))
    bad = pod("p")
    bad["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ["zone-a"]}}}
    with pytest.raises(review.ReviewError, match="nodeSelectorTerms"):
        agent.handler.respond(body("CREATE", obj=bad, name="p"))
    unnamed = pod(None)
    with pytest.raises(review.ReviewError, match="generateName"):
        agent.handler.respond(body("CREATE", obj=unnamed))
    labels = pod("p")
    labels["metadata"]["labels"]["n"] = 5
    with pytest.raises(review.ReviewError, match="labels"):
        agent.handler.respond(body("CREATE", obj=labels, name="p"))
    assert agent.book.pending_entries(SPREAD) == ({}, {})


def test_a_patch_that_does_not_apply_lets_the_pod_in_with_a_warning() -> None:
    agent = Agent(spread(rule("a", 0, 2, patch={"spec": {"$patch": "bogus"}})))
    response, stored = agent.create(pod("p"))
    assert "patch" not in response and stored == pod("p")
    assert "not injected" in response["warnings"][0]


# --- DELETE and eviction -----------------------------------------------------------------------------


def test_delete_of_an_assigned_pod_goes_into_deleting() -> None:
    agent = Agent(spread(rule("a", 0, 2), rule("b", 1, 2)))
    _, stored = agent.create(pod("p0"))
    response = agent.answer(body("DELETE", old=stored, name="p0", dry_run=True))
    assert response["allowed"] is True and agent.book.pending_entries(SPREAD)[1] == {}
    response = agent.answer(body("DELETE", old=stored, name="p0"))
    assert response == {"uid": response["uid"], "allowed": True}
    _, deleting = agent.book.pending_entries(SPREAD)
    assert {n: e.subset for n, e in deleting.items()} == {"p0": "a"}
    assert agent.metrics.decision_count(spread=SPREAD, subset="a", outcome=metrics.DELETING) == 1


def test_delete_without_labels_finds_the_pod_by_its_annotation_and_name() -> None:
    agent = Agent(spread(rule("a", 0, 2)))
    agent.create(pod("p0"))
    unlabelled = {"metadata": {"name": "p0", "annotations": {names.SUBSET_ANNOTATION: "a"}}}
    agent.answer(body("DELETE", old=unlabelled, name="p0"))
    assert set(agent.book.pending_entries(SPREAD)[1]) == {"p0"}


def test_eviction_of_an_observed_pod_goes_into_deleting() -> None:
    agent = Agent(spread(rule("a", 0, 2), rule("b", 1, 2)))
    agent.book.observe(SPREAD, [pod_ledger.PodRecord(
        name="p7", subset="b", revision="r1", phase="Running", ready=True, node_name="n1", created=NOW)])
    eviction = {"apiVersion": "policy/v1beta1", "kind": "Eviction",
                "metadata": {"name": "p7", "namespace": NAMESPACE}}
    for name in ("stranger", "p7"):
        response = agent.answer(body("CREATE", obj={**eviction, "metadata": {"name": name}}, name=name,
                                     sub_resource="eviction", kind=("policy", "v1beta1", "Eviction")))
        assert response["allowed"] is True and "patch" not in response
    _, deleting = agent.book.pending_entries(SPREAD)
    assert {n: e.subset for n, e in deleting.items()} == {"p7": "b"}


def test_deleting_pods_free_their_quota_for_new_pods() -> None:
    agent = Agent(spread(rule("a", 0, 1), rule("b", 1, 1)))
    agent.book.observe(SPREAD, [pod_ledger.PodRecord(
        name="old", subset="a", revision="r1", phase="Running", ready=True, node_name="n1", created=NOW)])
    assert subset_of(agent.create(pod("p1"))[1]) == "b"
    agent.answer(body("DELETE", old=pod("old", annotations={names.SUBSET_ANNOTATION: "a"}), name="old"))
    assert subset_of(agent.create(pod("p2"))[1]) == "a"


# --- concurrency ---------------------------------------------------------------------------------------


def test_concurrent_creates_never_exceed_a_quota() -> None:
    agent = Agent(spread(rule("a", 0, 30), rule("b", 1, 20)))
    threads, per_thread = 50, 2
    start = threading.Barrier(threads)
    results: list[str | None] = []
    lock = threading.Lock()
    failures: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            start.wait()
            for j in range(per_thread):
                _, stored = agent.create(pod(None, generate_name=f"burst-{k}-{j}-"))
                with lock:
                    results.append(subset_of(stored))
        except BaseException as error:  # reported below, with the thread's failure
            failures.append(error)

    workers = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    assert not failures, failures
    assert collections.Counter(results) == {"a": 30, "b": 20, None: 50}
    creating, _ = agent.book.pending_entries(SPREAD)
    assert collections.Counter(e.subset for e in creating.values()) == {"a": 30, "b": 20}


# --- metrics ---------------------------------------------------------------------------------------------


def test_metrics_are_exposed_per_agent_registry() -> None:
    first, second = Agent(spread(rule("a", 0, 1))), Agent(spread(rule("a", 0, 1)))
    first.create(pod("p0"))
    first.metrics.set_link(connected=False)
    port = first.metrics.serve(0, addr="127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            text = response.read().decode()
    finally:
        first.metrics.stop()
    decisions = 'fedspread_agent_admission_decisions_total{outcome="assigned",spread="shop/web",subset="a"}'
    assert f"{decisions} 1.0" in text
    assert 'fedspread_agent_admission_seconds_bucket{le="5e-05",operation="CREATE"}' in text
    assert "fedspread_agent_link_connected 0.0" in text and "fedspread_agent_fail_static 1.0" in text
    assert second.metrics.decision_count(spread=SPREAD, subset="a", outcome=metrics.ASSIGNED) == 0


def test_the_agents_watchdog_loops_are_metrics() -> None:
    ticks = [0.0]
    dog = watchdog.Watchdog("agent", clock=lambda: ticks[0], floor=0.0)
    dog.register("workload", period=1.0)
    beat = dog.register("link", period=10.0, critical=False)
    found = metrics.AgentMetrics(cluster="c1")
    found.watch_loops(dog)
    ticks[0] = 5.0
    beat()
    dog.check()
    text = found.exposition().decode()
    assert 'fedspread_agent_loop_stalled{loop="workload"} 1.0' in text
    assert 'fedspread_agent_loop_stalled{loop="link"} 0.0' in text
    assert 'fedspread_agent_loop_seconds_since_turn{loop="workload"} 5.0' in text


def test_a_pod_of_a_spread_not_counted_yet_is_refused_for_now() -> None:
    agent = Agent(spread(rule("a", 0, 2)))
    agent.book = bookkeeping.Bookkeeping(clock=lambda: agent.clock, count_wait=0.01)
    agent.book.set_assignment(spread(rule("a", 0, 2)))
    agent.handler = handler.AdmissionHandler(agent.book, agent.metrics)
    refused = agent.answer(body("CREATE", obj=pod("p1"), name="p1"))
    assert refused["allowed"] is False and refused["status"]["code"] == 503
    assert "not counted yet" in refused["status"]["message"]
    assert agent.metrics.decision_count(spread=SPREAD, subset=None, outcome=metrics.NOT_COUNTED) == 1
    assert agent.book.pending_entries(SPREAD) == ({}, {})

    agent.book.observe(SPREAD, [])
    _, stored = agent.create(pod("p1"))
    assert subset_of(stored) == "a"
