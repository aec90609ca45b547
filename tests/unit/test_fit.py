"""Capacity fit: pod shapes from pod specs, subset injection, node-pool admission and capacity."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from federation.api import cluster, common, quantity, spread
from federation.core import fit


def pool(**kwargs: Any) -> cluster.NodePool:
    return cluster.NodePool.model_validate(kwargs)


def shape(**requests: str) -> fit.PodShape:
    return fit.PodShape(requests={k: quantity.parse_quantity(v) for k, v in requests.items()})


def container(name: str = "c", requests: Any = None, limits: Any = None, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "x", "resources": resources, **extra}


def frac(**amounts: str) -> dict[str, Fraction]:
    return {k: quantity.parse_quantity(v) for k, v in amounts.items()}


def subset(**kwargs: Any) -> spread.Subset:
    return spread.Subset.model_validate({"name": "s", "clusters": ["c1"], **kwargs})


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


# --- pods_per_node --------------------------------------------------------------------------------

PODS_PER_NODE_CASES = [
    ("cpu-500m-in-1500m-free", {"cpu": "2"}, {"cpu": "500m"}, shape(cpu="500m"), 3),
    ("cpu-exact-fit", {"cpu": "2"}, {}, shape(cpu="500m"), 4),
    ("cpu-100m-thirds", {"cpu": "1"}, {"cpu": "700m"}, shape(cpu="100m"), 3),
    ("memory-gi-mi", {"memory": "4Gi"}, {"memory": "1Gi"}, shape(memory="768Mi"), 4),
    ("memory-just-short", {"memory": "1Gi"}, {"memory": "1Mi"}, shape(memory="512Mi"), 1),
    ("tightest-resource-binds", {"cpu": "8", "memory": "2Gi"}, {}, shape(cpu="1", memory="1Gi"), 2),
    ("pods-limit-binds", {"cpu": "64", "pods": "10"}, {"pods": "8"}, shape(cpu="1"), 2),
    ("pods-default-110", {"cpu": "1000"}, {"pods": "10"}, shape(cpu="1"), 100),
    ("no-requests-pods-only", {"pods": "30"}, {"pods": "5"}, fit.empty_shape(), 25),
    ("pods-full", {"cpu": "8", "pods": "10"}, {"pods": "10"}, shape(cpu="1"), 0),
    (
        "gpu-present",
        {"cpu": "8", "nvidia.com/gpu": "4"},
        {"nvidia.com/gpu": "1"},
        shape(cpu="1", **{"nvidia.com/gpu": "1"}),
        3,
    ),
    ("gpu-absent-on-cpu-node", {"cpu": "8"}, {}, shape(cpu="1", **{"nvidia.com/gpu": "1"}), 0),
    ("extended-any-name", {"example.com/dongle": "5"}, {}, shape(**{"example.com/dongle": "2"}), 2),
    ("overcommitted-clamps-to-zero", {"cpu": "2"}, {"cpu": "3"}, shape(cpu="1"), 0),
    ("pods-overcommitted-clamps", {"pods": "10"}, {"pods": "12"}, fit.empty_shape(), 0),
    ("zero-request-ignored", {"cpu": "1"}, {}, shape(cpu="1", **{"nvidia.com/gpu": "0"}), 1),
    ("unrequested-resource-ignored", {"cpu": "1", "memory": "0"}, {"memory": "5Gi"}, shape(cpu="1"), 1),
]


@pytest.mark.parametrize(
    ("allocatable", "requested", "the_shape", "expected"),
    [c[1:] for c in PODS_PER_NODE_CASES],
    ids=[c[0] for c in PODS_PER_NODE_CASES],
)
def test_pods_per_node(
    allocatable: dict[str, str], requested: dict[str, str], the_shape: fit.PodShape, expected: int
) -> None:
    node_pool = pool(count=3, allocatable=allocatable, requested=requested)
    assert fit.pods_per_node(node_pool, the_shape) == expected


# --- shape_from_pod_spec --------------------------------------------------------------------------

SHAPE_REQUEST_CASES = [
    ("no-spec", None, {}),
    ("no-resources", {"containers": [{"name": "a", "image": "x"}]}, {}),
    (
        "containers-summed",
        {"containers": [container("a", {"cpu": "250m", "memory": "64Mi"}), container("b", {"cpu": "1"})]},
        frac(cpu="1250m", memory="64Mi"),
    ),
    (
        "limits-default-requests",
        {"containers": [container("a", limits={"cpu": "2", "memory": "1Gi"})]},
        frac(cpu="2", memory="1Gi"),
    ),
    (
        "explicit-request-wins-over-limit",
        {"containers": [container("a", {"cpu": "500m"}, {"cpu": "2", "memory": "1Gi"})]},
        frac(cpu="500m", memory="1Gi"),
    ),
    (
        "init-smaller-than-sum",
        {
            "initContainers": [container("i", {"cpu": "1"})],
            "containers": [container("a", {"cpu": "1"}), container("b", {"cpu": "1"})],
        },
        frac(cpu="2"),
    ),
    (
        "init-larger-than-sum-max-not-sum",
        {
            "initContainers": [container("i1", {"cpu": "3", "memory": "1Gi"}), container("i2", {"cpu": "2"})],
            "containers": [container("a", {"cpu": "1", "memory": "2Gi"})],
        },
        frac(cpu="3", memory="2Gi"),
    ),
    (
        "init-only-resource",
        {"initContainers": [container("i", {"ephemeral-storage": "1Gi"})], "containers": [container("a")]},
        frac(**{"ephemeral-storage": "1Gi"}),
    ),
    (
        "sidecar-adds-to-containers",
        {
            "initContainers": [container("side", {"cpu": "500m"}, restartPolicy="Always")],
            "containers": [container("a", {"cpu": "1"})],
        },
        frac(cpu="1500m"),
    ),
    (
        "init-after-sidecar-runs-beside-it",
        {
            "initContainers": [
                container("side", {"cpu": "1"}, restartPolicy="Always"),
                container("migrate", {"cpu": "2"}),
            ],
            "containers": [container("a", {"cpu": "500m"})],
        },
        frac(cpu="3"),
    ),
    (
        "overhead-added",
        {"containers": [container("a", {"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "120Mi"}},
        frac(cpu="1250m", memory="120Mi"),
    ),
    (
        "overhead-added-after-init-max",
        {
            "initContainers": [container("i", {"cpu": "4"})],
            "containers": [container("a", {"cpu": "1"})],
            "overhead": {"cpu": "100m"},
        },
        frac(cpu="4100m"),
    ),
    (
        "pod-level-resources-override",
        {
            "resources": {"requests": {"cpu": "2"}, "limits": {"memory": "1Gi"}},
            "containers": [container("a", {"cpu": "500m", "memory": "256Mi"})],
        },
        frac(cpu="2", memory="1Gi"),
    ),
    (
        "extended-resource-and-numbers",
        {"containers": [container("a", {"nvidia.com/gpu": 1, "cpu": 0.5})]},
        {"nvidia.com/gpu": Fraction(1), "cpu": Fraction(1, 2)},
    ),
    (
        "explicit-nulls",
        {"containers": [{"name": "a", "resources": None}], "initContainers": None, "overhead": None},
        {},
    ),
]


@pytest.mark.parametrize(
    ("pod_spec", "expected"),
    [c[1:] for c in SHAPE_REQUEST_CASES],
    ids=[c[0] for c in SHAPE_REQUEST_CASES],
)
def test_shape_requests(pod_spec: dict[str, Any] | None, expected: dict[str, Fraction]) -> None:
    assert dict(fit.shape_from_pod_spec(pod_spec).requests) == expected


def test_shape_constraints() -> None:
    spec = {
        "containers": [container("a", {"cpu": "1"})],
        "nodeSelector": {"disktype": "ssd"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [expr("zone", "In", "a", "b")]},
                        {"matchFields": [expr("metadata.name", "In", "n1")], "matchExpressions": None},
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [expr("x", "Exists")]}}
                ],
            }
        },
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"},
            {"key": "gpu", "operator": "", "value": "yes"},
            {"operator": "Exists", "tolerationSeconds": None},
        ],
    }
    got = fit.shape_from_pod_spec(spec)
    assert got.node_selector == {"disktype": "ssd"}
    assert got.required_terms == (
        common.NodeSelectorTerm.model_validate({"matchExpressions": [expr("zone", "In", "a", "b")]}),
        common.NodeSelectorTerm.model_validate({"matchFields": [expr("metadata.name", "In", "n1")]}),
    )
    assert [(t.key, t.operator, t.value, t.effect) for t in got.tolerations] == [
        ("dedicated", "Equal", "batch", "NoSchedule"),
        ("gpu", "Equal", "yes", ""),
        ("", "Exists", "", ""),
    ]


def test_shape_from_deployment() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {"template": {"spec": {"containers": [container("a", {"cpu": "300m"})]}}},
    }
    assert dict(fit.shape_from_deployment(deployment).requests) == frac(cpu="300m")
    assert fit.shape_from_deployment(None) == fit.empty_shape()
    assert fit.shape_from_deployment({"spec": {}}) == fit.PodShape.empty_shape()


BAD_SPEC_CASES = [
    (
        "bad-request",
        {"containers": [container("web", {"cpu": "lots"})]},
        r"containers\[0\] \(web\)\.resources\.requests\.cpu",
    ),
    ("bad-limit", {"containers": [container("web", limits={"memory": "1GB"})]}, r"resources\.limits\.memory"),
    ("bad-init", {"initContainers": [container("i", {"cpu": "x"})]}, r"initContainers\[0\] \(i\)"),
    ("bad-overhead", {"overhead": {"cpu": "-"}}, r"overhead\.cpu"),
    ("bool-quantity", {"containers": [container("a", {"cpu": True})]}, r"cpu"),
    ("containers-not-list", {"containers": {"name": "a"}}, r"containers: expected a list"),
    (
        "bad-term",
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [expr("a", "Gt", "x")]}]
                    }
                }
            }
        },
        r"nodeSelectorTerms\[0\]",
    ),
    ("bad-toleration", {"tolerations": [{"operator": "Equal", "value": "v"}]}, r"tolerations\[0\]"),
]


@pytest.mark.parametrize(
    ("pod_spec", "message"), [c[1:] for c in BAD_SPEC_CASES], ids=[c[0] for c in BAD_SPEC_CASES]
)
def test_shape_errors(pod_spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit.shape_from_pod_spec(pod_spec)


def test_deployment_error_names_the_template() -> None:
    deployment = {"spec": {"template": {"spec": {"containers": [container("a", {"cpu": "1x"})]}}}}
    with pytest.raises(ValueError, match=r"^spec\.template\.spec: containers\[0\] \(a\)"):
        fit.shape_from_deployment(deployment)


# --- with_subset and pool_admits ------------------------------------------------------------------


def test_with_subset_ands_into_every_term() -> None:
    base = fit.shape_from_pod_spec(
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [expr("zone", "In", "a")]},
                            {"matchFields": [expr("metadata.name", "In", "n1")]},
                        ]
                    }
                }
            },
            "tolerations": [{"key": "x", "operator": "Exists"}],
        }
    )
    sub = subset(
        requiredNodeSelectorTerm={
            "matchExpressions": [expr("pool", "In", "ecs")],
            "matchFields": [expr("metadata.name", "NotIn", "bad")],
        },
        tolerations=[{"key": "spot", "operator": "Exists"}],
    )
    got = fit.with_subset(base, sub)
    assert [[(e.key, e.values) for e in t.match_expressions] for t in got.required_terms] == [
        [("zone", ["a"]), ("pool", ["ecs"])],
        [("pool", ["ecs"])],
    ]
    assert [[(f.operator, f.values) for f in t.match_fields] for t in got.required_terms] == [
        [("NotIn", ["bad"])],
        [("In", ["n1"]), ("NotIn", ["bad"])],
    ]
    assert [t.key for t in got.tolerations] == ["x", "spot"]
    # The input shape is untouched.
    assert [len(t.match_expressions) for t in base.required_terms] == [1, 0]
    assert len(base.tolerations) == 1


def test_with_subset_term_becomes_the_only_term() -> None:
    sub = subset(requiredNodeSelectorTerm={"matchExpressions": [expr("pool", "In", "ecs")]})
    got = fit.with_subset(shape(cpu="1"), sub)
    assert len(got.required_terms) == 1
    assert got.required_terms[0].match_expressions[0].key == "pool"
    assert got.requests == shape(cpu="1").requests


def test_with_subset_without_term_keeps_terms() -> None:
    base = dataclasses.replace(
        shape(),
        required_terms=(common.NodeSelectorTerm.model_validate({"matchExpressions": [expr("a", "Exists")]}),),
    )
    sub = subset(
        tolerations=[{"operator": "Exists"}],
        preferredNodeSelectorTerms=[{"weight": 5, "preference": {"matchExpressions": [expr("b", "Exists")]}}],
    )
    got = fit.with_subset(base, sub)
    assert got.required_terms == base.required_terms
    assert len(got.tolerations) == 1


ADMIT_CASES = [
    ("anything-on-plain-pool", {}, [], fit.empty_shape(), True),
    (
        "node-selector-holds",
        {"disk": "ssd"},
        [],
        dataclasses.replace(shape(), node_selector={"disk": "ssd"}),
        True,
    ),
    (
        "node-selector-wrong-value",
        {"disk": "hdd"},
        [],
        dataclasses.replace(shape(), node_selector={"disk": "ssd"}),
        False,
    ),
    (
        "node-selector-missing-label",
        {},
        [],
        dataclasses.replace(shape(), node_selector={"disk": "ssd"}),
        False,
    ),
    (
        "required-term-holds",
        {"zone": "a"},
        [],
        dataclasses.replace(
            shape(),
            required_terms=(
                common.NodeSelectorTerm.model_validate({"matchExpressions": [expr("zone", "In", "a")]}),
            ),
        ),
        True,
    ),
    (
        "required-term-fails",
        {"zone": "b"},
        [],
        dataclasses.replace(
            shape(),
            required_terms=(
                common.NodeSelectorTerm.model_validate({"matchExpressions": [expr("zone", "In", "a")]}),
            ),
        ),
        False,
    ),
    (
        "empty-required-term-admits-nothing",
        {},
        [],
        dataclasses.replace(shape(), required_terms=(common.NodeSelectorTerm(),)),
        False,
    ),
    ("noschedule-taint-binds", {}, [{"key": "t", "effect": "NoSchedule"}], fit.empty_shape(), False),
    ("noexecute-taint-binds", {}, [{"key": "t", "effect": "NoExecute"}], fit.empty_shape(), False),
    ("prefer-taint-does-not-bind", {}, [{"key": "t", "effect": "PreferNoSchedule"}], fit.empty_shape(), True),
    (
        "taint-tolerated",
        {},
        [{"key": "t", "value": "v", "effect": "NoSchedule"}],
        dataclasses.replace(shape(), tolerations=(common.Toleration(key="t", value="v"),)),
        True,
    ),
    (
        "taint-wrong-value",
        {},
        [{"key": "t", "value": "v", "effect": "NoSchedule"}],
        dataclasses.replace(shape(), tolerations=(common.Toleration(key="t", value="w"),)),
        False,
    ),
]


@pytest.mark.parametrize(
    ("labels", "taints", "the_shape", "expected"),
    [c[1:] for c in ADMIT_CASES],
    ids=[c[0] for c in ADMIT_CASES],
)
def test_pool_admits(
    labels: dict[str, str], taints: list[dict[str, str]], the_shape: fit.PodShape, expected: bool
) -> None:
    node_pool = pool(count=2, labels=labels, taints=taints, allocatable={"cpu": "4"})
    assert fit.pool_admits(node_pool, the_shape) is expected
    assert fit.pool_capacity(node_pool, the_shape) == (220 if expected else 0)


def test_subset_steers_capacity_to_its_pool() -> None:
    ecs = pool(
        count=4, labels={"pool": "ecs"}, allocatable={"cpu": "8", "pods": "110"}, requested={"cpu": "2"}
    )
    spot = pool(
        count=10,
        labels={"pool": "spot"},
        taints=[{"key": "spot", "effect": "NoSchedule"}],
        allocatable={"cpu": "4"},
    )
    member = cluster.ClusterCapacity(name="c1", node_pools=[ecs, spot])
    base = shape(cpu="1")
    assert fit.cluster_capacity(member, base) == 24
    on_spot = fit.with_subset(
        base,
        subset(
            requiredNodeSelectorTerm={"matchExpressions": [expr("pool", "In", "spot")]},
            tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        ),
    )
    assert fit.cluster_capacity(member, on_spot) == 40
    assert fit.pool_capacity(ecs, on_spot) == 0


def test_cluster_capacity_ignores_readiness_and_cluster_taints() -> None:
    member = cluster.ClusterCapacity(
        name="c1",
        ready=False,
        taints=[common.Taint(key="cordon", effect="NoSchedule")],
        node_pools=[pool(count=2, allocatable={"cpu": "2"})],
    )
    assert fit.cluster_capacity(member, shape(cpu="1")) == 4


def test_empty_pools() -> None:
    assert fit.pool_capacity(pool(count=0, allocatable={"cpu": "8"}), shape(cpu="1")) == 0
    assert fit.cluster_capacity(cluster.ClusterCapacity(name="c"), shape(cpu="1")) == 0


# --- deduct ---------------------------------------------------------------------------------------


def test_deduct_even_split() -> None:
    before = pool(
        count=4, allocatable={"cpu": "8", "memory": "16Gi", "pods": "20"}, requested={"cpu": "2", "pods": "2"}
    )
    pod = shape(cpu="1", memory="2Gi")
    assert fit.pods_per_node(before, pod) == 6
    after = fit.deduct(before, pod, pods=8)
    assert after.requested == {"cpu": "4", "pods": "4", "memory": "4Gi"}
    assert fit.pods_per_node(after, pod) == 4
    assert fit.pool_capacity(after, pod) == fit.pool_capacity(before, pod) - 8
    # The input pool is not modified, and the copy shares nothing mutable with it.
    assert before.requested == {"cpu": "2", "pods": "2"}
    after.labels["x"] = "y"
    assert "x" not in before.labels


def test_deduct_counts_pods_against_the_pods_limit() -> None:
    before = pool(count=2, allocatable={"pods": "10"}, requested={"pods": "4"})
    after = fit.deduct(before, fit.empty_shape(), pods=6)
    assert after.requested == {"pods": "7"}
    assert fit.pool_capacity(after, fit.empty_shape()) == 6


def test_deduct_fractional_share_stays_exact() -> None:
    before = pool(count=4, allocatable={"cpu": "2"})
    after = fit.deduct(before, shape(cpu="500m"), pods=3)
    assert quantity.parse_quantity(after.requested["cpu"]) == Fraction(3, 8)
    assert quantity.parse_quantity(after.requested["pods"]) == Fraction(3, 4)
    assert fit.pods_per_node(after, shape(cpu="500m")) == 3


def test_deduct_rounds_unrepresentable_shares_up() -> None:
    before = pool(count=3, allocatable={"cpu": "1"})
    after = fit.deduct(before, shape(cpu="1"), pods=1)
    assert after.requested["cpu"] == "333333334n"
    assert quantity.parse_quantity(after.requested["cpu"]) >= Fraction(1, 3)


def test_deduct_zero_and_errors() -> None:
    before = pool(count=2, allocatable={"cpu": "2"}, requested={"cpu": "1"})
    assert fit.deduct(before, shape(cpu="1"), pods=0) == before
    with pytest.raises(ValueError, match="negative"):
        fit.deduct(before, shape(cpu="1"), pods=-1)
    with pytest.raises(ValueError, match="no nodes"):
        fit.deduct(pool(count=0), shape(cpu="1"), pods=1)


# --- properties -----------------------------------------------------------------------------------

_amounts = st.fractions(min_value=0, max_value=64, max_denominator=1000)
_resources = st.sampled_from(["cpu", "memory", "nvidia.com/gpu"])


@st.composite
def pools(draw: st.DrawFn) -> cluster.NodePool:
    allocatable = draw(st.dictionaries(_resources, _amounts, max_size=3))
    requested = draw(st.dictionaries(_resources, _amounts, max_size=3))
    fmt = {k: quantity.format_quantity(v, resource=k) for k, v in allocatable.items()}
    if draw(st.booleans()):
        fmt["pods"] = str(draw(st.integers(0, 120)))
    used = {k: quantity.format_quantity(v, resource=k) for k, v in requested.items()}
    used["pods"] = str(draw(st.integers(0, 130)))
    return pool(count=draw(st.integers(0, 50)), allocatable=fmt, requested=used)


# Requests as users write them: whole milli-units (every parsed quantity is a whole nano-unit).
_requests = st.dictionaries(
    _resources, st.integers(0, 8000).map(lambda milli: Fraction(milli, 1000)), max_size=3
)


@given(node_pool=pools(), requests=_requests, growth=_requests)
def test_capacity_monotone_in_requests(
    node_pool: cluster.NodePool, requests: dict[str, Fraction], growth: dict[str, Fraction]
) -> None:
    small = fit.PodShape(requests=requests)
    bigger = {k: requests.get(k, Fraction(0)) + growth.get(k, Fraction(0)) for k in {*requests, *growth}}
    large = fit.PodShape(requests=bigger)
    assert 0 <= fit.pool_capacity(node_pool, large) <= fit.pool_capacity(node_pool, small)
    assert 0 <= fit.pods_per_node(node_pool, large) <= fit.pods_per_node(node_pool, small)


@given(node_pool=pools(), requests=_requests, per_node=st.integers(0, 5))
def test_deduct_whole_pods_per_node_is_exact(
    node_pool: cluster.NodePool, requests: dict[str, Fraction], per_node: int
) -> None:
    if node_pool.count == 0:
        return
    the_shape = fit.PodShape(requests=requests)
    fits = fit.pods_per_node(node_pool, the_shape)
    per_node = min(per_node, fits)
    after = fit.deduct(node_pool, the_shape, pods=per_node * node_pool.count)
    assert fit.pods_per_node(after, the_shape) == fits - per_node
    assert (
        fit.pool_capacity(after, the_shape)
        == fit.pool_capacity(node_pool, the_shape) - per_node * node_pool.count
    )


@given(node_pool=pools(), requests=_requests, pods=st.integers(0, 500))
def test_deduct_never_increases_capacity(
    node_pool: cluster.NodePool, requests: dict[str, Fraction], pods: int
) -> None:
    the_shape = fit.PodShape(requests=requests)
    if node_pool.count == 0:
        return
    after = fit.deduct(node_pool, the_shape, pods=pods)
    assert 0 <= fit.pool_capacity(after, the_shape) <= fit.pool_capacity(node_pool, the_shape)
