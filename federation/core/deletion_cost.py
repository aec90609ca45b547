"""Pod deletion cost: steer the ReplicaSet's scale-down toward over-quota and low-priority pods.

Why: a spread never deletes pods itself when a workload scales down; the member cluster's
ReplicaSet controller picks the victims. Kubernetes >= 1.22 lets us bias that choice with the
`controller.kubernetes.io/pod-deletion-cost` annotation (lower cost goes first). The agent keeps,
for every pod of a spread (Kruise's current values, n subsets, subset index i; its webhook gives a
pod it admits the in-quota cost at creation, so only changes are written afterwards):

- pods within their subset's quota in this cluster: ``100 * (n - i)``;
- pods beyond it: ``-100 * (i + 1)``;
- pods of no subset, or of a subset no longer in the spec: ``-100 * (n + 1)``.

Among pods the ReplicaSet otherwise ranks alike (say all Running and ready), scale-down thus
removes pods of no known subset first, then over-quota pods (last subset first), then in-quota
pods (last subset first), so the first subset keeps its pods longest.

During a rollout pods of several template revisions run side by side.
`revision_deletion_costs` puts each revision in a band of its own, the newest on top (its band is
the costs above, unchanged), every older one a band lower, so old-revision pods go before new ones;
inside a band the rule above holds, an older revision's quota in a subset being what the newer
revisions' pods leave of it, save that an older revision's pods beyond it (replaced) go first
subset first, as a rollout replaces them. As in Kruise's multi-version deletion cost, the old pods
still needed go from the last subset to the first, and a rollout that pauses halfway keeps the
spread.

Which pods of an over-full subset are "beyond" its quota is our choice; we mark the ones the
ReplicaSet would prefer to delete anyway (unscheduled, pending, not ready, newest), so the marks
agree with the controller's own ranks and change rarely, which keeps the patches few.

Upstream Kubernetes honours the annotation from 1.22; the sandbox runs 1.20 with fedspread's patch
that makes its ReplicaSet honour it (`federation/sandbox/patches/`). The deletion order is tested
against `replicaset_deletion_order`, a model of the 1.22 ranking, and on the sandbox's real
ReplicaSet (`tests/integration/test_sandbox_workloads.py`).

Pure: no Kubernetes client, no I/O; timestamps are compared as given (use aware UTC datetimes).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import re
from collections import abc

# Phases the ReplicaSet controller does not count as active replicas (FilterActivePods).
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

# podPhaseToOrdinal in controller_utils.go; any other phase maps to 0 (Go map default).
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}

# strconv.ParseInt(value, 10, 32): optional sign, ASCII digits, nothing else.
_COST_GRAMMAR = re.compile(r"[+-]?[0-9]+")
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class PodView:
    """What deletion cost needs to know about one pod of a spread's workload."""

    name: str
    subset: str | None
    phase: str
    ready: bool
    node_name: str
    created: datetime.datetime
    deleting: bool = False
    restarts: int = 0
    ready_since: datetime.datetime | None = None
    current_cost: int | None = None
    revision: str | None = None
    """The pod's template revision (`pod-template-hash`, `controller-revision-hash`), if known."""

    @property
    def active(self) -> bool:
        """Whether the ReplicaSet counts this pod as a replica (not terminating, not finished)."""
        return not self.deleting and self.phase not in _TERMINAL_PHASES


def parse_cost(value: str | None) -> int | None:
    """The annotation's value as the API server accepts it (an int32), or None."""
    if value is None:
        return None
    if not _COST_GRAMMAR.fullmatch(value):
        return None
    cost = int(value, 10)
    if not _INT32_MIN <= cost <= _INT32_MAX:
        return None
    return cost


def in_quota_cost(index: int, *, subset_count: int) -> int:
    """Cost of a pod within the quota of the subset at `index` (0 = first in spec order)."""
    return 100 * (subset_count - index)


def over_quota_cost(index: int) -> int:
    """Cost of a pod beyond the quota of the subset at `index`."""
    return -100 * (index + 1)


def replaced_cost(index: int, *, subset_count: int) -> int:
    """Cost, inside an older revision's band, of a pod of the subset at `index` beyond what the newer
    revisions leave of its quota: the first subset's lowest (`revision_deletion_costs` says why)."""
    return -100 * (subset_count - index)


def orphan_cost(subset_count: int) -> int:
    """Cost of a pod of no subset, or of a subset no longer in the spec."""
    return -100 * (subset_count + 1)


def deletion_costs(
    pods: abc.Sequence[PodView],
    *,
    subsets: abc.Sequence[str],
    quotas: abc.Mapping[str, int | None],
    over_quota: abc.Callable[[int], int] = over_quota_cost,
) -> dict[str, int]:
    """The deletion cost of every pod, by name (`over_quota`: the cost of a pod beyond the quota
    of the subset at an index; `revision_deletion_costs` passes its own for older revisions).

    `subsets` are the subset names in spec order; `quotas` the per-subset quota in this cluster,
    None (or a missing key) meaning unbounded. Pods being deleted, and finished pods, never count
    toward a quota and get their subset's over-quota cost. When a subset holds more active pods
    than its quota, the `quota` pods with the strongest keep preference are in quota; the rest are
    those the ReplicaSet would give up first anyway: unscheduled, then Pending (before Unknown,
    before Running), then not ready, then the newest, ties by name (smaller name given up first).
    """
    _check_unique(pods)
    index = _subset_index(subsets)
    n = len(subsets)
    costs: dict[str, int] = {}
    members: dict[str, list[PodView]] = {name: [] for name in subsets}
    for pod in pods:
        if pod.subset is None or pod.subset not in index:
            costs[pod.name] = orphan_cost(n)
        elif not pod.active:
            costs[pod.name] = over_quota(index[pod.subset])
        else:
            members[pod.subset].append(pod)
    for name, group in members.items():
        i = index[name]
        quota = quotas.get(name)
        over = 0 if quota is None else max(0, len(group) - max(0, quota))
        give_up_first = sorted(group, key=functools.cmp_to_key(_keep_compare))
        for pod in give_up_first[:over]:
            costs[pod.name] = over_quota(i)
        for pod in give_up_first[over:]:
            costs[pod.name] = in_quota_cost(i, subset_count=n)
    return costs


REVISION_BANDS = 8
"""Revisions with a band of their own: the ninth newest and older share the lowest (a Deployment
keeps ten ReplicaSets by default, but pods of more than two revisions at once are rare)."""


def revision_band(subset_count: int) -> int:
    """The distance between two revisions' bands: wider than one band's costs, from the orphan
    cost to the first subset's in-quota cost."""
    return 100 * (2 * subset_count + 2)


def revision_deletion_costs(
    pods: abc.Sequence[PodView],
    *,
    subsets: abc.Sequence[str],
    quotas: abc.Mapping[str, int | None],
    revisions: abc.Sequence[str],
) -> dict[str, int]:
    """`deletion_costs` across template revisions: every pod of an older revision below every pod
    of a newer one.

    `revisions` are the revisions newest first (the workload's current one first); a pod of another
    or of no known revision is a band below the oldest. The newest revision's pods get `deletion_costs`
    with `quotas`; each older revision's pods get them with what the newer revisions' active pods
    leave of each quota, lowered by one `revision_band` per revision, except that an older
    revision's pods beyond that quota (replaced, or being replaced, by newer pods of their subset)
    cost less in spec order, the first subset's lowest (`replaced_cost`). With one revision (or
    none given) the costs are `deletion_costs`'s.

    Why spec order for the replaced old pods: a rollout's new pods fill the subsets in spec order,
    so the first subset's replacements are the oldest and become Ready first, and the Deployment
    controller removes an old pod the moment a new one is Ready — before the agent can see it and
    write anything. In the plain order (last subset first) it removed a later subset's old pod
    whose replacement was still starting, rather than the first subset's, whose replacement served:
    that subset was short of Ready pods while the first had one extra, and the coordinator's
    handover kept the extra one, scaling the member up mid-rollout (seen on the sandbox).
    Counting the newer pods once they exist, not once Ready, settles the costs when the new pods
    are created, seconds before the controller acts on them.
    """
    _check_unique(pods)
    rank = {name: min(i, REVISION_BANDS - 1) for i, name in reversed(list(enumerate(revisions)))}
    oldest = min(len(revisions), REVISION_BANDS - 1)
    groups: dict[int, list[PodView]] = {}
    for pod in pods:
        band = rank.get(pod.revision, oldest) if pod.revision is not None else oldest
        groups.setdefault(band if revisions else 0, []).append(pod)
    left: dict[str, int | None] = {name: quotas.get(name) for name in subsets}
    band_width = revision_band(len(subsets))
    costs: dict[str, int] = {}
    for band in sorted(groups):
        group = groups[band]
        over = over_quota_cost if band == 0 else functools.partial(replaced_cost, subset_count=len(subsets))
        for name, cost in deletion_costs(group, subsets=subsets, quotas=left, over_quota=over).items():
            costs[name] = cost - band * band_width
        for pod in group:
            if pod.subset is None or not pod.active:
                continue
            quota = left.get(pod.subset)
            if quota is not None:
                left[pod.subset] = max(0, quota - 1)
    return costs


def cost_patches(pods: abc.Sequence[PodView], costs: abc.Mapping[str, int]) -> dict[str, int]:
    """The costs to write: pods whose current annotation differs from `costs` (absent = differs)."""
    return {
        pod.name: costs[pod.name] for pod in pods if pod.name in costs and pod.current_cost != costs[pod.name]
    }


def replicaset_deletion_order(pods: abc.Sequence[PodView], *, costs: abc.Mapping[str, int]) -> list[str]:
    """Model of the >= 1.22 ReplicaSet scale-down ranking; pod names, first-to-delete first.

    Mirrors `ActivePodsWithRanks.Less` in pkg/controller/controller_utils.go, applied to the active
    pods only (the controller drops terminating and finished pods before ranking, so they are
    not in the result):

    1. unassigned (no node) before assigned;
    2. Pending before Unknown before Running;
    3. not ready before ready;
    4. lower pod-deletion-cost before higher (`costs`, else the pod's current annotation, else 0);
    5. NOT MODELLED: "doubled up" (more co-located ready pods of the same ReplicaSet on the node
       goes first); the model assumes every pod has the same rank here;
    6. if both ready: ready for a shorter time first (unknown ready time first);
    7. more container restarts first (`restarts` stands for the max over containers);
    8. newer creation first;
    then name, for determinism.

    Uncertain points: with the LogarithmicScaleDown gate (beta, on by default since 1.22) steps 6
    and 8 compare timestamps in power-of-two buckets of age rather than exactly, and the real
    controller breaks remaining ties arbitrarily (by UID with that gate), not by name. The model
    uses exact timestamps, so it is one admissible order among those the controller may choose
    whenever pods differ only in timestamps of the same bucket.
    """
    _check_unique(pods)
    active = [pod for pod in pods if pod.active]
    compare = functools.partial(_replicaset_compare, costs=costs)
    return [pod.name for pod in sorted(active, key=functools.cmp_to_key(compare))]


def scale_down_victims(pods: abc.Sequence[PodView], *, costs: abc.Mapping[str, int], count: int) -> list[str]:
    """The `count` pods the modelled ReplicaSet deletes when scaling down by `count`."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return replicaset_deletion_order(pods, costs=costs)[:count]


def _subset_index(subsets: abc.Sequence[str]) -> dict[str, int]:
    """Subset name -> spec index; ValueError on a repeated name."""
    index: dict[str, int] = {}
    for i, name in enumerate(subsets):
        if name in index:
            raise ValueError(f"subset {name!r} appears twice in the spec")
        index[name] = i
    return index


def _check_unique(pods: abc.Sequence[PodView]) -> None:
    """ValueError if two pods share a name (results are keyed by name)."""
    seen: set[str] = set()
    for pod in pods:
        if pod.name in seen:
            raise ValueError(f"pod {pod.name!r} appears twice")
        seen.add(pod.name)


def _sign(first: bool, second: bool) -> int:
    """-1 if only `first` holds, 1 if only `second` holds, else 0."""
    return int(second) - int(first)


def _compare_times(first: datetime.datetime | None, second: datetime.datetime | None) -> int:
    """-1 if `first` should go first by Go's afterOrZero: missing, else later; 0 if equal."""
    if first == second:
        return 0
    if first is None or second is None:
        return _sign(first is None, second is None)
    return -1 if first > second else 1


def _compare_phases(first: str, second: str) -> int:
    """-1 if phase `first` goes first: Pending (and unknown phases) < Unknown < Running."""
    ordinal_first = _PHASE_ORDINAL.get(first, 0)
    ordinal_second = _PHASE_ORDINAL.get(second, 0)
    return (ordinal_first > ordinal_second) - (ordinal_first < ordinal_second)


def _keep_compare(first: PodView, second: PodView) -> int:
    """Order by keep preference: negative if `first` is the one to give up first."""
    steps = (
        _sign(not first.node_name, not second.node_name),
        _compare_phases(first.phase, second.phase),
        _sign(not first.ready, not second.ready),
        _compare_times(first.created, second.created),
    )
    for step in steps:
        if step:
            return step
    return _compare_names(first.name, second.name)


def _replicaset_compare(first: PodView, second: PodView, *, costs: abc.Mapping[str, int]) -> int:
    """Negative if the modelled ReplicaSet deletes `first` before `second`."""
    steps = [
        _sign(not first.node_name, not second.node_name),
        _compare_phases(first.phase, second.phase),
        _sign(not first.ready, not second.ready),
        _cost_of(first, costs) - _cost_of(second, costs),
    ]
    if first.ready and second.ready:
        steps.append(_compare_times(first.ready_since, second.ready_since))
    steps.append(second.restarts - first.restarts)
    steps.append(_compare_times(first.created, second.created))
    for step in steps:
        if step:
            return step
    return _compare_names(first.name, second.name)


def _cost_of(pod: PodView, costs: abc.Mapping[str, int]) -> int:
    """The cost the controller would read for `pod`: the new one, else current, else 0."""
    if pod.name in costs:
        return costs[pod.name]
    return pod.current_cost if pod.current_cost is not None else 0


def _compare_names(first: str, second: str) -> int:
    """Plain three-way comparison of names: the smaller name goes first."""
    return (first > second) - (first < second)
