"""How many more pods of a shape fit on a cluster's node pools.

Why: the Adaptive strategy limits each subset by simulated capacity so that replicas
which cannot schedule overflow to the next subset instead of waiting Pending. The simulation follows
kube-scheduler's NodeResourcesFit, NodeAffinity and TaintToleration filters on a node pool's
nodes, alike as the pool states them (each real node has at least the room its pool states:
`inventory`, `pool_bounds`): the node's free allocatable and pods limit, node selector and required
affinity, and binding taints. What one pod needs (its `PodShape`, a subset's patch applied) is read by
`pod_shape`, re-exported here because every caller of the arithmetic names shapes through `fit`.
"""

from __future__ import annotations

import dataclasses
import fractions
import math
from collections.abc import Hashable, Mapping, Sequence

from federation.api import cluster, common, quantity
from federation.core import matching, pod_shape
from federation.core.pod_shape import PODS as PODS
from federation.core.pod_shape import PodShape as PodShape
from federation.core.pod_shape import Resources as Resources
from federation.core.pod_shape import empty_shape as empty_shape
from federation.core.pod_shape import shape_from_deployment as shape_from_deployment
from federation.core.pod_shape import shape_from_pod_spec as shape_from_pod_spec
from federation.core.pod_shape import with_subset as with_subset

_parsed = pod_shape.cached_quantity

DEFAULT_MAX_PODS = 110
"""The kubelet's default pods limit, used when a node reports no allocatable pods."""


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
        requested[name] = quantity.format_at_least(before + extra, resource=name)
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


def binding(
    allocatable: Mapping[str, quantity.Nanos], requested: Mapping[str, quantity.Nanos], requests: Requests
) -> str:
    """The resource that bounds `free_pods` on one node: "pods" for the pods limit, else the first
    request (by name) that allows the fewest pods (one the node does not offer allows none)."""
    fits = (allocatable[PODS] - requested.get(PODS, 0)) // quantity.NANO
    found = PODS
    for name, amount in requests:
        have = allocatable.get(name)
        if have is None:
            return name
        here = (have - requested.get(name, 0)) // amount
        if here < fits:
            fits, found = here, name
    return found


def kinds(requests: Sequence[Requests]) -> tuple[tuple[Requests, ...], tuple[int, ...]]:
    """The distinct requests among subsets' pods, in first-seen order, and each subset's number.

    Subsets whose pods request the same share their pod slots in a pool (one kind); the resource
    ledger of a placement (`placement_passes.NodesLeft`) keeps one count per kind.
    """
    distinct: dict[Requests, int] = {}
    numbers = tuple(distinct.setdefault(r, len(distinct)) for r in requests)
    return tuple(distinct), numbers
