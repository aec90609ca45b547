"""Placement accuracy from pod histories: the pure arithmetic of the accuracy benchmark.

Why pure and apart: the numbers the benchmark reports are a classification of what each pod went
through, and a benchmark is only worth its definitions. Here they are, tested without a cluster
(tests/unit/test_bench_accuracy.py):

* a replica is *placed* when the webhook admits its pod into a subset of a cluster (the pod
  carries `fedspread.io/subset`); its history is when the pod was first seen, first seen Running,
  first seen being deleted;
* *accurate*: it became Running there before anything deleted it. *Rescheduled*: it was deleted
  before it ever ran — the agent's reschedule of a pod stuck Pending, or a scale-down of its
  cluster once its subset was marked unschedulable (the benchmark only scales up, so nothing else
  deletes a pod that never ran). *Waiting*: still not Running when the run ended. Accuracy is
  accurate / placed; pods admitted into no subset are counted apart (*unassigned*);
* *Pending longer than 10 s*: from first seen to Running, deletion or the end of the run;
* *stuck while another subset had room*: when a pod of a subset has been Pending 10 s, some other
  subset of the spread could take one more pod at that moment — one of its nodes has room for a
  pod of that subset's shape (allocatable minus the requests of every pod bound there, the pods
  limit included, taints and node labels respected) beyond that subset's own pods still waiting
  for a node, and its cap is not reached. It may over-count (two stuck pods can see the same free
  slot, and a subset's room may be what another subset's unbound pod is about to take), so a
  zero is a sound zero.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from bench import admission_stats as stats
from federation.api import quantity

PENDING_LIMIT = 10.0
"""Seconds a pod may wait Pending before it counts."""
PODS = "pods"

Outcome = Literal["accurate", "rescheduled", "waiting", "unassigned"]


@dataclasses.dataclass(frozen=True)
class PodHistory:
    """What one pod of the spread went through, in seconds of the benchmark's clock."""

    cluster: str
    name: str
    subset: str | None
    """The subset the webhook (or the agent's match by node) put it in; None: no subset."""
    created: float
    running: float | None = None
    """First seen Running."""
    deleted: float | None = None
    """First seen being deleted, or gone."""
    room_elsewhere: tuple[str, ...] = ()
    """The other subsets that had room when it had been Pending PENDING_LIMIT seconds."""


def outcome(pod: PodHistory) -> Outcome:
    """accurate, rescheduled, waiting (not Running at the end), or unassigned (no subset)."""
    if pod.subset is None:
        return "unassigned"
    if pod.running is not None and (pod.deleted is None or pod.running <= pod.deleted):
        return "accurate"
    return "rescheduled" if pod.deleted is not None else "waiting"


def pending_seconds(pod: PodHistory, *, end: float) -> float:
    """How long it was Pending: until Running, deleted, or `end`, whichever came first."""
    return min(t for t in (pod.running, pod.deleted, end) if t is not None) - pod.created


@dataclasses.dataclass(frozen=True)
class Summary:
    """The benchmark's figures over a set of pod histories."""

    placed: int
    accurate: int
    rescheduled: int
    waiting: int
    unassigned: int
    accuracy: float
    """accurate / placed (1.0 for none placed)."""
    pending_over_limit: int
    """Pods (assigned or not) Pending longer than PENDING_LIMIT."""
    stuck_with_room: int
    """Of those, pods of a subset while another subset had room."""
    pending_p50_s: float
    pending_p99_s: float
    pending_max_s: float


def summarize(pods: Iterable[PodHistory], *, end: float) -> Summary:
    """The figures of `pods`, the run having ended at `end`."""
    pods = list(pods)
    kinds = [outcome(p) for p in pods]
    placed = sum(k != "unassigned" for k in kinds)
    accurate = kinds.count("accurate")
    waited = [pending_seconds(p, end=end) for p in pods]
    over = [p for p, seconds in zip(pods, waited, strict=True) if seconds > PENDING_LIMIT]
    return Summary(
        placed=placed, accurate=accurate, rescheduled=kinds.count("rescheduled"),
        waiting=kinds.count("waiting"), unassigned=kinds.count("unassigned"),
        accuracy=accurate / placed if placed else 1.0,
        pending_over_limit=len(over),
        stuck_with_room=sum(bool(p.room_elsewhere) and p.subset is not None for p in over),
        pending_p50_s=round(stats.percentile(waited, 50), 2),
        pending_p99_s=round(stats.percentile(waited, 99), 2),
        pending_max_s=round(max(waited, default=0.0), 2))


# --- room: could another subset take one more pod now? ----------------------------------------------


def milli_units(amounts: Mapping[str, str]) -> dict[str, int]:
    """Resource quantities in thousandths ("500m" cpu -> 500, "1Gi" -> 1073741824000)."""
    return {name: math.floor(quantity.parse_quantity(text) * 1000) for name, text in amounts.items()}


@dataclasses.dataclass(frozen=True)
class Need:
    """What one pod needs of a node: requests (thousandths), node labels, taint keys it tolerates."""

    resources: Mapping[str, int]
    selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerated: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class NodeRoom:
    """One node now: its labels, the keys of its NoSchedule/NoExecute taints, and what is free —
    allocatable minus the requests of the pods bound to it (thousandths; `pods` counts pods)."""

    name: str
    labels: Mapping[str, str]
    taints: frozenset[str]
    free: Mapping[str, int]


def fits(need: Need, nodes: Iterable[NodeRoom]) -> int:
    """How many pods of `need` fit on `nodes`, node by node."""
    total = 0
    for node in nodes:
        if node.taints - need.tolerated or any(node.labels.get(k) != v for k, v in need.selector.items()):
            continue
        wanted = {**need.resources, PODS: 1000}
        total += min(node.free.get(name, 0) // amount for name, amount in wanted.items() if amount > 0)
    return total


@dataclasses.dataclass(frozen=True)
class SubsetRoom:
    """A subset as the room judgement sees it: its cluster, its pod, its cap."""

    name: str
    cluster: str
    need: Need
    cap: int | None = None


def spare(subset: SubsetRoom, *, nodes: Mapping[str, Sequence[NodeRoom]], placed: Mapping[str, int],
          unbound: Mapping[str, int]) -> int:
    """How many more pods `subset` could take now: room for its pods on its cluster's `nodes`
    beyond its own pods waiting unbound (`unbound`), within its cap (`placed`: its pods not being
    deleted)."""
    free = fits(subset.need, nodes.get(subset.cluster, ())) - unbound.get(subset.name, 0)
    if subset.cap is not None:
        free = min(free, subset.cap - placed.get(subset.name, 0))
    return max(0, free)


def subsets_with_room(subset: str, subsets: Sequence[SubsetRoom], *,
                      nodes: Mapping[str, Sequence[NodeRoom]], placed: Mapping[str, int],
                      unbound: Mapping[str, int]) -> tuple[str, ...]:
    """The subsets other than `subset` that could take one more pod now (`spare`)."""
    return tuple(other.name for other in subsets if other.name != subset
                 and spare(other, nodes=nodes, placed=placed, unbound=unbound) > 0)


def node_room(node: Mapping[str, object], bound: Iterable[Mapping[str, int]]) -> NodeRoom:
    """A node object (JSON) and the requests (thousandths) of the pods bound to it, as NodeRoom."""
    meta, spec, status = (_mapping(node.get(k)) for k in ("metadata", "spec", "status"))
    free = milli_units({str(k): str(v) for k, v in _mapping(status.get("allocatable")).items()})
    for requests in bound:
        for name, amount in {**requests, PODS: 1000}.items():
            free[name] = free.get(name, 0) - amount
    taints = spec.get("taints")
    keys = frozenset(str(_mapping(t).get("key")) for t in taints if _mapping(t).get("effect") in
                     ("NoSchedule", "NoExecute")) if isinstance(taints, list) else frozenset()
    labels = {str(k): str(v) for k, v in _mapping(meta.get("labels")).items()}
    return NodeRoom(name=str(meta.get("name")), labels=labels, taints=keys, free=free)


def pod_requests(spec: Mapping[str, object]) -> dict[str, int]:
    """A pod spec's requests in thousandths: its containers' summed (the benchmark's pods have no
    init containers or overhead)."""
    total: dict[str, int] = {}
    containers = spec.get("containers")
    for container in containers if isinstance(containers, list) else ():
        requests = _mapping(_mapping(_mapping(container).get("resources")).get("requests"))
        for name, amount in milli_units({str(k): str(v) for k, v in requests.items()}).items():
            total[name] = total.get(name, 0) + amount
    return total


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}
