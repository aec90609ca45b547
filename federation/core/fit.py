"""How many more pods of a template fit on a cluster's node pools.

Why: the Adaptive strategy limits each subset by simulated capacity so that replicas
which cannot schedule overflow to the next subset instead of waiting Pending. The simulation follows
kube-scheduler's NodeResourcesFit, NodeAffinity and TaintToleration filters: effective pod requests
(containers, init and sidecar containers, overhead, limits defaulting requests), the node's free
allocatable and pods limit, node selector and required affinity, and binding taints. Quantities are
exact Fractions so "100m" times ten is exactly one cpu.
"""

from __future__ import annotations

import dataclasses
import fractions
import functools
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from federation.api import cluster, common, quantity, spread
from federation.core import matching

PODS = "pods"
DEFAULT_MAX_PODS = 110
"""The kubelet's default pods limit, used when a node reports no allocatable pods."""

POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})
"""Resources a pod-level `spec.resources` may set (they replace the container aggregate)."""

Resources = dict[str, fractions.Fraction]


@dataclasses.dataclass(frozen=True)
class PodShape:
    """What the scheduler looks at when fitting one pod: requests, node constraints, tolerations."""

    requests: Mapping[str, fractions.Fraction] = dataclasses.field(default_factory=dict)
    """Per-pod effective requests, overhead included; the implicit one pod is not listed."""
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    required_terms: tuple[common.NodeSelectorTerm, ...] = ()
    """Required node-affinity terms, ORed; empty means any node."""
    tolerations: tuple[common.Toleration, ...] = ()

    @classmethod
    def empty_shape(cls) -> PodShape:
        """A pod that requests nothing and goes anywhere untainted."""
        return cls()


def empty_shape() -> PodShape:
    """A pod that requests nothing and goes anywhere untainted."""
    return PodShape()


# --- pod spec -> shape ----------------------------------------------------------------------------


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if type(value) is dict:
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _quantities(value: Any, where: str) -> Resources:
    parsed: Resources = {}
    for name, text in _mapping(value, where).items():
        try:
            parsed[str(name)] = _parsed(text) if type(text) is str else quantity.parse_quantity(text)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{where}.{name}: {err}") from None
    return parsed


def _container_requests(container: Any, where: str) -> Resources:
    """Requests of one container, each unset request defaulting to its limit (k8s defaulting)."""
    resources = _mapping(_mapping(container, where).get("resources"), f"{where}.resources")
    requests = _quantities(resources.get("requests"), f"{where}.resources.requests")
    limits = _quantities(resources.get("limits"), f"{where}.resources.limits")
    return {**limits, **requests}


def _label(container: Any, kind: str, index: int) -> str:
    name = container.get("name") if isinstance(container, Mapping) else None
    return f"{kind}[{index}]" + (f" ({name})" if name else "")


def _add(total: Resources, extra: Mapping[str, fractions.Fraction]) -> None:
    for name, amount in extra.items():
        total[name] = total.get(name, fractions.Fraction(0)) + amount


def _max_into(total: Resources, other: Mapping[str, fractions.Fraction]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, fractions.Fraction(0)):
            total[name] = amount


def _effective_requests(spec: Mapping[str, Any]) -> Resources:
    """k8s PodRequests: max(containers + sidecars, each init step), pod-level override, overhead."""
    requests: Resources = {}
    for i, container in enumerate(_list(spec.get("containers"), "containers")):
        _add(requests, _container_requests(container, _label(container, "containers", i)))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for i, container in enumerate(_list(spec.get("initContainers"), "initContainers")):
        own = _container_requests(container, _label(container, "initContainers", i))
        if _mapping(container, "initContainers").get("restartPolicy") == "Always":
            # A sidecar keeps running next to the app containers and the later init containers.
            _add(requests, own)
            _add(sidecars, own)
            step = dict(sidecars)
        else:
            step = dict(sidecars)
            _add(step, own)
        _max_into(init_peak, step)
    _max_into(requests, init_peak)
    pod_level = _mapping(spec.get("resources"), "resources")
    pod_requests = {
        **_quantities(pod_level.get("limits"), "resources.limits"),
        **_quantities(pod_level.get("requests"), "resources.requests"),
    }
    for name, amount in pod_requests.items():
        if name in POD_LEVEL_RESOURCES:
            requests[name] = amount
    _add(requests, _quantities(spec.get("overhead"), "overhead"))
    requests.pop(PODS, None)
    return requests


def _without_nulls(value: Any) -> Any:
    """JSON from the apiserver may carry explicit nulls; the API models want the key absent."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _required_terms(spec: Mapping[str, Any]) -> tuple[common.NodeSelectorTerm, ...]:
    affinity = _mapping(spec.get("affinity"), "affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), "affinity.nodeAffinity")
    where = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = _mapping(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), where)
    terms = []
    for i, raw in enumerate(_list(required.get("nodeSelectorTerms"), f"{where}.nodeSelectorTerms")):
        try:
            terms.append(common.NodeSelectorTerm.model_validate(_without_nulls(raw)))
        except ValueError as err:
            raise ValueError(f"{where}.nodeSelectorTerms[{i}]: {err}") from None
    return tuple(terms)


def _tolerations(spec: Mapping[str, Any]) -> tuple[common.Toleration, ...]:
    tolerations = []
    for i, raw in enumerate(_list(spec.get("tolerations"), "tolerations")):
        data = dict(_without_nulls(_mapping(raw, f"tolerations[{i}]")))
        if data.get("operator") == "":
            del data["operator"]  # empty means Equal
        try:
            tolerations.append(common.Toleration.model_validate(data))
        except ValueError as err:
            raise ValueError(f"tolerations[{i}]: {err}") from None
    return tuple(tolerations)


def shape_from_pod_spec(pod_spec: Mapping[str, Any] | None) -> PodShape:
    """The shape of a pod spec (camelCase, as in spec.template.spec); ValueError if malformed."""
    spec = _mapping(pod_spec, "pod spec")
    node_selector = {str(k): str(v) for k, v in _mapping(spec.get("nodeSelector"), "nodeSelector").items()}
    return PodShape(
        requests=_effective_requests(spec),
        node_selector=node_selector,
        required_terms=_required_terms(spec),
        tolerations=_tolerations(spec),
    )


def shape_from_deployment(deployment: Mapping[str, Any] | None) -> PodShape:
    """The shape of a Deployment's pod template (spec.template.spec); empty when absent."""
    spec = _mapping(_mapping(deployment, "deployment").get("spec"), "spec")
    template = _mapping(spec.get("template"), "spec.template")
    try:
        return shape_from_pod_spec(template.get("spec"))
    except ValueError as err:
        raise ValueError(f"spec.template.spec: {err}") from None


def with_subset(shape: PodShape, subset: spread.Subset) -> PodShape:
    """The shape after the fedspread webhook injects the subset.

    The subset's requiredNodeSelectorTerm is ANDed into every required term, or becomes the only
    term; its tolerations are appended. Preferred terms do not affect fit. As in Kubernetes, an
    empty subset term on a pod without terms yields one empty term, which matches no node.
    """
    extra = subset.required_node_selector_term
    if extra is None and not subset.tolerations:
        return shape  # nothing injected: the same (immutable) shape
    terms = shape.required_terms
    if extra is not None:
        if terms:
            terms = tuple(
                common.NodeSelectorTerm(
                    match_expressions=[*t.match_expressions, *extra.match_expressions],
                    match_fields=[*t.match_fields, *extra.match_fields],
                )
                for t in terms
            )
        else:
            terms = (extra.model_copy(deep=True),)
    return dataclasses.replace(
        shape, required_terms=terms, tolerations=(*shape.tolerations, *subset.tolerations)
    )


# --- pools ----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> fractions.Fraction:
    """Pools repeat the same few quantity texts; Fractions are immutable, so cache the parse."""
    return quantity.parse_quantity(text)


def admits(shape: PodShape, *, labels: Mapping[str, str], taints: Sequence[common.Taint]) -> bool:
    """A node with these labels and taints passes the node selector, affinity and taint filters."""
    if shape.node_selector and any(labels.get(k) != v for k, v in shape.node_selector.items()):
        return False
    if shape.required_terms and not matching.terms_match(shape.required_terms, labels):
        return False
    return not taints or not matching.untolerated_taints(shape.tolerations, taints)


def pool_admits(pool: cluster.NodePool, shape: PodShape) -> bool:
    """A node of the pool passes the node selector, required affinity and taint filters."""
    return admits(shape, labels=pool.labels, taints=pool.taints)


def pods_per_node(pool: cluster.NodePool, shape: PodShape) -> int:
    """How many more pods of the shape fit on one node of the pool by resources and pods limit.

    Ignores labels and taints (see `pool_admits`). A requested resource the node does not offer
    allows no pod; resources requested at zero never bind. Only the resources that can bind are
    parsed, each once.
    """
    allocatable, requested = pool.allocatable, pool.requested
    pods_allocatable = _parsed(allocatable[PODS]) if PODS in allocatable else DEFAULT_MAX_PODS
    pods_requested = _parsed(requested[PODS]) if PODS in requested else 0
    fits = math.floor(pods_allocatable - pods_requested)
    for name, amount in shape.requests.items():
        if name == PODS or amount <= 0:
            continue
        if name not in allocatable:
            return 0
        free = _parsed(allocatable[name]) - (_parsed(requested[name]) if name in requested else 0)
        fits = min(fits, math.floor(free / amount))
    return max(fits, 0)


def pool_capacity(pool: cluster.NodePool, shape: PodShape) -> int:
    """How many more pods of the shape fit on the whole pool."""
    if pool.count == 0 or not pool_admits(pool, shape):
        return 0
    return pool.count * pods_per_node(pool, shape)


def cluster_capacity(cluster: cluster.ClusterCapacity, shape: PodShape) -> int:
    """How many more pods fit on the cluster's nodes; readiness and cluster taints are unchecked."""
    return sum(pool_capacity(pool, shape) for pool in cluster.node_pools)


def _format_at_least(amount: fractions.Fraction, resource: str) -> str:
    """The quantity text for amount, rounded up to the next nano unit when not exact."""
    text = quantity.format_quantity(amount, resource=resource)
    if quantity.parse_quantity(text) < amount:
        text = f"{math.ceil(amount * 10**9)}n"
    return text


def deduct(pool: cluster.NodePool, shape: PodShape, *, pods: int) -> cluster.NodePool:
    """A copy of the pool with `pods` more pods of the shape counted as requested.

    Used for replicas placed but not yet running (overcommit protection across spreads). The pods
    are spread evenly: each node's `requested` grows by pods * request / count (and pods / count).
    This averaging is exact when `pods` is a multiple of `count`; otherwise real nodes hold whole
    pods, and the pool's capacity afterwards can be off by less than one pod per node either way.
    Amounts that are not whole nano units are rounded up, erring towards less free capacity.
    """
    if pods < 0:
        raise ValueError(f"cannot deduct a negative number of pods ({pods})")
    if pods == 0:
        return pool.model_copy(deep=True)
    if pool.count == 0:
        raise ValueError(f"cannot deduct {pods} pods from pool {pool.name!r}, which has no nodes")
    requested = dict(pool.requested)
    share = fractions.Fraction(pods, pool.count)
    additions: Resources = {PODS: share}
    for name, amount in shape.requests.items():
        if name != PODS and amount > 0:
            additions[name] = amount * share
    for name, extra in additions.items():
        before = _parsed(requested[name]) if name in requested else 0
        requested[name] = _format_at_least(before + extra, name)
    copy = pool.model_copy(deep=True)
    copy.requested = requested
    return copy


# --- numbers for the hot path ---------------------------------------------------------------------
#
# The coordinator asks "how many pods of this shape fit here, once other spreads' pending pods are
# charged" for every cluster a spread can use, on every recompute. Answering on pydantic NodePools
# with quantity strings means parsing, formatting and deep copies each time; `Pool` holds the same
# numbers parsed once, in nano-units, and `charge` is `deduct` on them: the same rounding (up to a
# whole nano-unit, which is exactly what formatting the quantity back did), so the answers are
# identical.

Requests = tuple[tuple[str, quantity.Nanos], ...]
"""A pod's positive requests other than pods, in nano-units, sorted by resource name."""


@dataclasses.dataclass(frozen=True)
class Pool:
    """A node pool in numbers: per-node allocatable (pods defaulted) and requested, in nano-units."""

    count: int
    labels: Mapping[str, str]
    taints: tuple[common.Taint, ...]
    allocatable: Mapping[str, quantity.Nanos]
    requested: Mapping[str, quantity.Nanos]


def pool_of(pool: cluster.NodePool) -> Pool:
    """The numbers of a NodePool, parsed once."""
    allocatable = {name: quantity.nanos(_parsed(text)) for name, text in pool.allocatable.items()}
    allocatable.setdefault(PODS, DEFAULT_MAX_PODS * quantity.NANO)
    requested = {name: quantity.nanos(_parsed(text)) for name, text in pool.requested.items()}
    return Pool(pool.count, dict(pool.labels), tuple(pool.taints), allocatable, requested)


def requests_of(shape: PodShape) -> Requests:
    """The requests that can bind (positive, not pods), in nano-units."""
    return tuple(sorted(
        (name, quantity.nanos(amount)) for name, amount in shape.requests.items()
        if name != PODS and amount > 0
    ))


def free_pods(
    allocatable: Mapping[str, quantity.Nanos], requested: Mapping[str, quantity.Nanos], requests: Requests
) -> int:
    """`pods_per_node` on numbers: pods of `requests` one node still takes."""
    fits = (allocatable[PODS] - requested.get(PODS, 0)) // quantity.NANO
    for name, amount in requests:
        have = allocatable.get(name)
        if have is None:
            return 0
        fits = min(fits, (have - requested.get(name, 0)) // amount)
    return max(int(fits), 0)


def slots(pool: Pool, requested: Mapping[str, quantity.Nanos], requests: Requests) -> int:
    """Pods of `requests` the whole pool still takes when its nodes hold `requested` each."""
    return pool.count * free_pods(pool.allocatable, requested, requests) if pool.count else 0


def _ceil_add(before: quantity.Nanos, amount: quantity.Nanos, *, pods: int, count: int) -> quantity.Nanos:
    """before + amount * pods / count, rounded up to a whole nano-unit."""
    extra = amount * pods
    if type(before) is int and type(extra) is int:
        return before - (-extra // count)
    return math.ceil(before + fractions.Fraction(extra) / count)


def charge(requested: dict[str, quantity.Nanos], requests: Requests, *, pods: int, count: int) -> None:
    """`deduct` on numbers, in place: `pods` more pods spread evenly over `count` nodes."""
    requested[PODS] = _ceil_add(requested.get(PODS, 0), quantity.NANO, pods=pods, count=count)
    for name, amount in requests:
        requested[name] = _ceil_add(requested.get(name, 0), amount, pods=pods, count=count)


def additions(requests: Requests, *, pods: int, count: int) -> Requests:
    """What `charge` adds per node when every amount before it is a whole number of nano-units."""
    return ((PODS, -(-quantity.NANO * pods // count)),
            *((name, _ceil_add(0, amount, pods=pods, count=count)) for name, amount in requests))


@dataclasses.dataclass(frozen=True, eq=False)
class Profile:
    """A pod shape prepared for the hot path: its requests in numbers and a key for admission.

    Two profiles with equal `admission` are admitted by exactly the same pools, so admission is
    computed once per (pool, key). Compared by identity: profiles are built once and shared.
    """

    shape: PodShape
    requests: Requests
    admission: Hashable


def profile(shape: PodShape, *, requests: Requests | None = None) -> Profile:
    """The profile of a shape (`requests`: its `requests_of`, when already known)."""
    key = (
        tuple(sorted(shape.node_selector.items())),
        tuple(term.model_dump_json() for term in shape.required_terms),
        tuple(toleration.model_dump_json() for toleration in shape.tolerations),
    )
    return Profile(shape, requests_of(shape) if requests is None else requests, key)


def admitting(pools: Sequence[Pool], shape: PodShape) -> tuple[int, ...]:
    """Indices of the pools with nodes whose nodes admit the shape, in pool order."""
    return tuple(
        i for i, p in enumerate(pools) if p.count and admits(shape, labels=p.labels, taints=p.taints)
    )
