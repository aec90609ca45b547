"""Every example in examples/ applied to the demo's federation, and its documented placement checked.

Why: an example is a promise — apply this file, get that placement. Each file's header comment says
what to expect on the demo's federation (dc1, aws-eu, gcp-eu: federation/demo/environment.py);
this test applies the file to the hub in a fresh namespace of its own (examples carry no namespace:
the user picks one with `kubectl apply -n`) and, step by step (apply, scale, stop or start an
agent), waits until the coordinator's placement (through the SDK) and the member pods (Running, per
subset annotation and cluster) are exactly what the comment says; then it checks what the example
is about on the pods themselves (the subset's patch, node affinity and the node each pod landed
on). CASES must name every example file, so a new example without a case fails here.

Every case leaves the shared federation as it found it: spread, workload and namespaces deleted,
its member pods gone (dc1 holds only four 1-CPU pods, and Adaptive examples count on that room),
every agent running and heard by the coordinator.
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import demo_scene
import pytest
import waiting
import yaml
from click import testing
from demo_scene import (
    QUANTITY,
    TIMEOUT,
    WORKLOADS,
    Apis,
    Placement,
    Seen,
    clean_up,
    hub_call,
    idle,
    observe,
    reached,
)
from kubernetes import client, dynamic

from federation import cli
from federation.api import cluster, common, names, quantity
from federation.api import spread as spread_api
from federation.demo import environment

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
SNAPSHOT = EXAMPLES / "simulate" / "demo-federation.yaml"
ARCH, POOL = "kubernetes.io/arch", "cloud.google.com/gke-nodepool"
ARCH_LABEL = "example.fedspread.io/arch"


def example_files() -> list[str]:
    """The ready-to-apply examples: examples/*.yaml (simulate/ and demo/ have their own users)."""
    return sorted(p.name for p in EXAMPLES.glob("*.yaml"))


@dataclasses.dataclass(frozen=True)
class Step:
    """An action on the federation and the placement it must lead to."""

    what: str
    placement: Placement
    scale: int | None = None
    stop_agent: str | None = None
    start_agent: str | None = None
    not_before: float = 0.0
    """The placement must not be reached sooner than this many seconds after the action."""
    pods: Callable[[Seen], None] | None = None
    """Further checks on the member pods once the placement is reached."""
    members: Callable[[Apis, str], None] | None = None
    """Further checks on the member clusters (given the namespace) once the placement is reached."""


# --- checks on pods ----------------------------------------------------------------------------


def required_expressions(pod: client.V1Pod) -> list[list[tuple[str, str, tuple[str, ...]]]]:
    """The pod's required node-selector terms, each as (key, operator, values) expressions."""
    affinity = pod.spec.affinity
    node = affinity.node_affinity if affinity else None
    required = node.required_during_scheduling_ignored_during_execution if node else None
    return [[(e.key, e.operator, tuple(e.values or ())) for e in term.match_expressions or []]
            for term in (required.node_selector_terms if required else [])]


def check_node_label(seen: Seen, key: str) -> set[str]:
    """Every pod runs on a node whose label `key` is its subset's name; a pod the webhook admitted
    requires that label (its subset's node-selector term), and each subset has such a pod. The
    names of the pods the webhook admitted.

    (A pod whose admission failed open — the agent's webhook is `failurePolicy: Ignore` with a 2 s
    timeout, and a loaded sandbox may time it out — carries no term and no patch: the agent matches
    it to its subset by its node afterwards, so its node still says its subset. Seen in full
    `make test` runs, here and in the lifecycle test; RELIABILITY, "Agent process dies".)"""
    admitted: set[str] = set()
    subsets: dict[str, int] = {}
    for member, pods in seen.pods.items():
        for pod in pods:
            subset = pod.metadata.annotations[names.SUBSET_ANNOTATION]
            subsets.setdefault(subset, 0)
            node = seen.nodes[member][pod.spec.node_name]
            assert node.get(key) == subset, f"{member}/{pod.metadata.name} of {subset} runs on {node}"
            terms = required_expressions(pod)
            if terms:
                assert all((key, "In", (subset,)) in term for term in terms), (pod.metadata.name, terms)
                admitted.add(pod.metadata.name)
                subsets[subset] += 1
    assert all(subsets.values()), f"a subset none of whose pods the webhook admitted: {subsets}"
    return admitted


def check_arch_patches(seen: Seen) -> None:
    """per-arch-patches.yaml: each subset's label and limits on the pods the webhook admitted, every
    pod on nodes of its arch (`check_node_label`)."""
    limits = {"arm64": {"cpu": "300m", "memory": "600Mi"}, "amd64": {"cpu": "500m", "memory": "800Mi"}}
    admitted = check_node_label(seen, ARCH)
    for pods in seen.pods.values():
        for pod in pods:
            main = next(c for c in pod.spec.containers if c.name == "main")
            assert main.resources.requests == {"cpu": "200m", "memory": "256Mi"}  # the template's
            if pod.metadata.name not in admitted:
                continue
            subset = pod.metadata.annotations[names.SUBSET_ANNOTATION]
            assert pod.metadata.labels[ARCH_LABEL] == subset
            assert main.resources.limits == limits[subset]


def check_pools(seen: Seen) -> None:
    """node-pool.yaml: highmem pods on the highmem node, general pods on general nodes."""
    check_node_label(seen, POOL)
    used = {seen.nodes["gcp-eu"][p.spec.node_name][POOL] for p in seen.pods["gcp-eu"]}
    assert used == {"highmem", "general"}


def _failure(check: Callable[[Apis, str], None] | None, apis: Apis, namespace: str) -> str:
    """What `check` finds wrong now ("" when it passes)."""
    try:
        if check is not None:
            check(apis, namespace)
    except AssertionError as error:
        return str(error)
    return ""


def _passes(check: Callable[[Apis, str], None] | None, apis: Apis, namespace: str) -> bool:
    return not _failure(check, apis, namespace)


def check_copies(apis: Apis, namespace: str, budgets: dict[str, int]) -> None:
    """application.yaml: exactly the members in `budgets` hold fedspread's copies of what the pods
    need and of the Service, and the budget there has that member's part of minAvailable."""
    objects = (("config_map", "web-config"), ("secret", "web-env"), ("secret", "registry-pull"),
               ("service_account", "web"), ("service", "web"))
    for member in apis.members:
        core = apis.core(member)
        found = {f"{kind}/{obj}": read_marked(getattr(core, f"read_namespaced_{kind}"), obj, namespace)
                 for kind, obj in objects}
        budget = read_marked(client.CustomObjectsApi(apis.api[member]).get_namespaced_custom_object,
                             "policy", "v1beta1", namespace, "poddisruptionbudgets", "web")
        if member in budgets:
            assert all(found.values()), f"{member} lacks copies: {[k for k, v in found.items() if not v]}"
            assert budget and budget["spec"]["minAvailable"] == budgets[member], f"{member}: {budget}"
        else:
            kept = [k for k, v in found.items() if v] + (["budget"] if budget else [])
            assert not kept, f"{member} kept copies: {kept}"


def read_marked(read: Callable[..., Any], *args: str) -> Any:
    """What `read(*args)` returns if it is fedspread's copy (its federation label), else None."""
    try:
        obj = read(*args)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    labels = obj["metadata"].get("labels") if isinstance(obj, dict) else obj.metadata.labels
    return obj if (labels or {}).get(names.FEDERATION_LABEL) else None


# --- the cases: what each example's comment documents ------------------------------------------


def eu(aws: int, gcp: int) -> dict[str, int]:
    return {"aws-eu": aws, "gcp-eu": gcp}


CASES: dict[str, list[Step]] = {
    "capped-onprem.yaml": [
        Step("apply (5 replicas)", {"onprem": {"dc1": 3}, "eu": eu(1, 1)}),
        Step("scale to 3: eu gives back first", {"onprem": {"dc1": 3}, "eu": eu(0, 0)}, scale=3),
    ],
    "prefer-onprem.yaml": [
        Step("apply (6 replicas): dc1 full at 4, overflow to eu", {"onprem": {"dc1": 4}, "eu": eu(1, 1)}),
        Step("scale to 4: eu gives back first", {"onprem": {"dc1": 4}, "eu": eu(0, 0)}, scale=4),
    ],
    "ratio-1-1-3.yaml": [
        Step("apply (5 replicas)", {"dc1": {"dc1": 1}, "aws": {"aws-eu": 1}, "gcp": {"gcp-eu": 3}}),
        Step("scale to 10", {"dc1": {"dc1": 2}, "aws": {"aws-eu": 2}, "gcp": {"gcp-eu": 6}}, scale=10),
    ],
    "per-arch-patches.yaml": [
        Step("apply (4 replicas)", {"arm64": {"aws-eu": 2}, "amd64": {"gcp-eu": 2}}, pods=check_arch_patches),
    ],
    "region-fill.yaml": [
        Step("apply (8 two-CPU replicas)", {"eu": eu(6, 2)}),
    ],
    "region-balance.yaml": [
        Step("apply (5 replicas)", {"eu": eu(3, 2)}),
        Step("scale to 4: the larger cluster gives back", {"eu": eu(2, 2)}, scale=4),
    ],
    "topology-spread.yaml": [
        Step("apply (5 replicas): the eu floor first, then within one of each other",
             {"onprem": {"dc1": 3}, "eu": eu(1, 1)}),
        Step("scale to 9: the regions alternate", {"onprem": {"dc1": 5}, "eu": eu(2, 2)}, scale=9),
        Step("scale to 3: the floor stays", {"onprem": {"dc1": 1}, "eu": eu(1, 1)}, scale=3),
    ],
    "region-capacity.yaml": [
        Step("apply (7 one-CPU replicas)", {"everywhere": {"aws-eu": 3, "dc1": 1, "gcp-eu": 3}}),
    ],
    "node-pool.yaml": [
        Step("apply (6 replicas)", {"highmem": {"gcp-eu": 4}, "general": {"gcp-eu": 2}}, pods=check_pools),
    ],
    "replicaset.yaml": [
        Step("apply (4 replicas)", {"ring": {"dc1": 2}, "eu": eu(1, 1)}),
        Step("scale to 2: eu gives back first", {"ring": {"dc1": 2}, "eu": eu(0, 0)}, scale=2),
    ],
    "statefulset.yaml": [
        Step("apply (4 replicas)", {"ring": {"dc1": 2}, "eu": eu(1, 1)}),
        Step("scale to 2: eu gives back first", {"ring": {"dc1": 2}, "eu": eu(0, 0)}, scale=2),
    ],
    "job.yaml": [
        Step("apply (parallelism 4): member Jobs with parallelism 2/1/1",
             {"ring": {"dc1": 2}, "eu": eu(1, 1)}),
    ],
    "application.yaml": [
        Step("apply (4 replicas): the objects its pods need, the Service and the budget in each member",
             {"ring": {"dc1": 2}, "eu": eu(1, 1)},
             members=lambda apis, ns: check_copies(apis, ns, {"dc1": 1, "aws-eu": 1, "gcp-eu": 0})),
        Step("scale to 2: eu gives back first, and its copies go", {"ring": {"dc1": 2}, "eu": eu(0, 0)},
             scale=2, members=lambda apis, ns: check_copies(apis, ns, {"dc1": 2})),
    ],
    "failover.yaml": [
        Step("apply (3 replicas)", {"primary": {"aws-eu": 3}, "standby": {"gcp-eu": 0}}),
        Step("aws-eu's agent stops: after clusterLostSeconds its replicas move",
             {"primary": {"aws-eu": 0}, "standby": {"gcp-eu": 3}}, stop_agent="aws-eu", not_before=8.0),
        Step("aws-eu's agent returns: its pods count again, the standby's surplus goes",
             {"primary": {"aws-eu": 3}, "standby": {"gcp-eu": 0}}, start_agent="aws-eu"),
    ],
}


# --- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def apis(federation: environment.Federation) -> Iterator[Apis]:
    with demo_scene.connect(federation) as connected:
        yield connected


def documents(name: str) -> list[dict[str, Any]]:
    text = (EXAMPLES / name).read_text()
    assert text.startswith("# "), f"{name} must start with a comment saying what it shows and expects"
    return [d for d in yaml.safe_load_all(text) if d]


def supporting(name: str) -> list[dict[str, Any]]:
    """The objects an example applies before its workload (what its pods need, its Service, ...)."""
    found = documents(name)[:-2]
    assert all(d["kind"] in SUPPORTING for d in found), f"{name}: {[d['kind'] for d in found]}"
    return found


SUPPORTING = {"ConfigMap", "Secret", "ServiceAccount", "Service", "PodDisruptionBudget"}


def load(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The example's workload (a Deployment, ReplicaSet, StatefulSet or Job) and FederatedSpread,
    checked to be a well-formed pair, after the objects it needs (`supporting`)."""
    docs = documents(name)[-2:]
    assert [d["kind"] for d in docs][1:] == [spread_api.KIND] and docs[0]["kind"] in WORKLOADS, name
    workload, spread = docs
    assert all("namespace" not in d["metadata"] for d in supporting(name)), name
    assert all("namespace" not in d["metadata"] for d in docs), f"{name}: examples carry no namespace"
    spread_api.FederatedSpreadSpec.model_validate(spread["spec"])
    assert spread["spec"]["targetRef"]["name"] == workload["metadata"]["name"]
    assert spread["spec"]["targetRef"]["kind"] == workload["kind"]
    assert spread["spec"]["targetRef"]["apiVersion"] == workload["apiVersion"]
    return workload, spread


# --- the tests ---------------------------------------------------------------------------------


def test_every_example_has_a_case() -> None:
    assert set(CASES) == set(example_files())


@pytest.mark.parametrize("name", example_files())
def test_example_places_as_documented(name: str, apis: Apis) -> None:
    if name not in CASES:
        pytest.fail(f"examples/{name} has no case in CASES: add the placements its comment documents")
    workload, spread = load(name)
    namespace = f"ex-{pathlib.Path(name).stem}-{uuid.uuid4().hex[:6]}"
    key = f"{namespace}/{spread['metadata']['name']}"
    label = f"{names.SPREAD_LABEL}={spread['metadata']['name']}"
    waiting.wait_for(lambda: idle(apis), timeout=TIMEOUT, message=lambda: "the federation is not idle: "
                     f"{apis.placements.clusters(include_node_pools=True)}")
    apis.core("hub").create_namespace({"metadata": {"name": namespace}})
    try:
        hub = dynamic.DynamicClient(apis.api["hub"])
        for obj in supporting(name):
            hub.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).create(
                body=obj, namespace=namespace)
        hub_call(apis, workload["kind"], 0)(namespace, workload)
        apis.custom().create_namespaced_custom_object(
            common.API_GROUP, common.API_VERSION, namespace, spread_api.PLURAL, spread)
        for step in CASES[name]:
            started = time.monotonic()
            if step.scale is not None:
                hub_call(apis, workload["kind"], 1)(workload["metadata"]["name"], namespace, {
                    "spec": {QUANTITY.get(workload["kind"], "replicas"): step.scale}})
            if step.stop_agent:
                apis.federation.stop_agent(step.stop_agent)
            if step.start_agent:
                apis.federation.start_agent(step.start_agent)
            last: list[Seen] = []

            def probe(step: Step = step, last: list[Seen] = last) -> Seen | None:
                last[:] = [observe(apis, key, label)]
                return last[0] if reached(last[0], step.placement, apis.federation.stopped) else None

            def told(step: Step = step, last: list[Seen] = last) -> str:
                return (f"{name}, step {step.what!r}: wanted {step.placement}; "
                        f"last seen {last[0].describe() if last else 'nothing'}")

            seen = waiting.wait_for(probe, timeout=TIMEOUT, interval=0.5, message=told)
            took = time.monotonic() - started
            assert took >= step.not_before, f"{name}, step {step.what!r}: reached after {took:.1f} s"
            if step.pods is not None:
                step.pods(seen)
            if step.members is not None:
                waiting.wait_for(lambda step=step: _passes(step.members, apis, namespace), timeout=TIMEOUT,
                                 interval=0.5, message=lambda step=step: f"{name}, step {step.what!r}: "
                                 f"{_failure(step.members, apis, namespace)}")
    finally:
        clean_up(apis, namespace, workload, spread["metadata"]["name"])


@pytest.mark.parametrize("name", example_files())
def test_simulate_previews_the_first_placement(name: str) -> None:
    """`fedspread simulate` on the demo's snapshot gives each example's documented first placement
    (no cluster needed: a reader can preview every example offline)."""
    if name not in CASES:
        pytest.fail(f"examples/{name} has no case in CASES")
    result = testing.CliRunner().invoke(cli.main, ["simulate", "-f", str(EXAMPLES / name), "--clusters",
                                                   str(SNAPSHOT), "-o", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(result.stdout)
    assert {s["name"]: s["clusters"] for s in data["subsets"]} == CASES[name][0].placement
    assert data["unplaced"] == 0


def test_the_demo_snapshot_is_the_demo_federation(apis: Apis) -> None:
    """examples/simulate/demo-federation.yaml is what the agents report (requests aside), so
    `fedspread simulate -f examples/X.yaml --clusters examples/simulate/demo-federation.yaml`
    previews each example's first placement offline."""

    def pools(pools: list[Any]) -> list[tuple[int, dict[str, str], dict[str, Any]]]:
        shape = [(p.count, dict(p.labels), {k: quantity.parse_quantity(v) for k, v in p.allocatable.items()})
                 for p in pools]
        return sorted(shape, key=repr)

    snapshot = cluster.CapacitySnapshot.model_validate(yaml.safe_load(SNAPSHOT.read_text()))
    reported = apis.placements.clusters(include_node_pools=True)
    live = {c.name: (dict(c.labels), pools(c.node_pools)) for c in reported}
    assert {c.name: (dict(c.labels), pools(c.node_pools)) for c in snapshot.clusters} == live
