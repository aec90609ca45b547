"""The workload kinds a spread can target, and the facts that differ between them, in one table.

Why a table: Deployment, ReplicaSet, StatefulSet and Job differ in a few facts — which field
holds the spread quantity, how their controller chooses the pods a scale-down removes, whether
reschedule may delete a pod to move it, whether `kubectl scale` works on them — and every part
(validation, the webhook, the agent's workload code, status, simulate) must agree on them. Each
part asks `policy_for(api_version, kind)` and reads a field rather than branching on the kind's
name, so a new kind is one row here plus its own strategy, not a search for `if kind == ...`.

The facts, for Kubernetes 1.20 as the sandbox runs it:

- **Deployment, ReplicaSet**: `spec.replicas`; scale-down by the ReplicaSet controller's pod
  ranking, which `controller.kubernetes.io/pod-deletion-cost` steers (1.22+, and the sandbox's
  patched controller); a stuck pod deleted is recreated by the ReplicaSet, so reschedule may move
  it; both serve `/scale`.
- **StatefulSet**: `spec.replicas`; the controller removes the highest ordinal first and ignores
  deletion cost, so subsets take ordinal ranges (`ordinals`); a pod keeps its name and volumes when
  recreated, so reschedule never deletes one to move it; serves `/scale`.
- **Job**: `spec.parallelism`; a lower parallelism makes the Job controller delete active pods by
  its own ranking (`controller.ActivePods`, which reads no deletion cost), so no subset order can
  be imposed (`none`); its pods are interchangeable, so a stuck pod may be deleted and is recreated;
  no `/scale` subresource (scale it with `kubectl patch`).

Pure: data only, no Kubernetes client.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

QuantityField = Literal["replicas", "parallelism"]
ScaleDownOrder = Literal["deletion-cost", "ordinals", "none"]


@dataclasses.dataclass(frozen=True)
class KindPolicy:
    """What fedspread needs to know about one workload kind."""

    api_version: str
    kind: str
    quantity_field: QuantityField
    """The `spec` field that is the spread quantity: caps, percentages and overflow apply to it."""
    scale_down_order: ScaleDownOrder
    """How a spread steers which subset's pods a scale-down removes: by pod-deletion-cost, by
    ordinal ranges, or not at all (the kind's controller picks)."""
    reschedule_deletes_pods: bool
    """Whether adaptive reschedule may delete a stuck pod so its controller recreates it elsewhere."""
    has_scale_subresource: bool
    """Whether the kind serves `/scale` (so `kubectl scale` works on the hub object)."""

    @property
    def uses_deletion_cost(self) -> bool:
        """Whether the agent keeps pod-deletion-cost annotations on this kind's pods."""
        return self.scale_down_order == "deletion-cost"

    @property
    def reference(self) -> str:
        """`apiVersion kind`, as messages name a kind."""
        return f"{self.api_version} {self.kind}"


POLICIES: tuple[KindPolicy, ...] = (
    KindPolicy(
        api_version="apps/v1",
        kind="Deployment",
        quantity_field="replicas",
        scale_down_order="deletion-cost",
        reschedule_deletes_pods=True,
        has_scale_subresource=True,
    ),
    KindPolicy(
        api_version="apps/v1",
        kind="ReplicaSet",
        quantity_field="replicas",
        scale_down_order="deletion-cost",
        reschedule_deletes_pods=True,
        has_scale_subresource=True,
    ),
    KindPolicy(
        api_version="apps/v1",
        kind="StatefulSet",
        quantity_field="replicas",
        scale_down_order="ordinals",
        reschedule_deletes_pods=False,
        has_scale_subresource=True,
    ),
    KindPolicy(
        api_version="batch/v1",
        kind="Job",
        quantity_field="parallelism",
        scale_down_order="none",
        reschedule_deletes_pods=True,
        has_scale_subresource=False,
    ),
)
"""Every kind a spread's `targetRef` may name, in the order messages list them."""

_BY_REFERENCE = {(p.api_version, p.kind): p for p in POLICIES}


class UnsupportedKind(ValueError):
    """A `targetRef` names a kind (or apiVersion) fedspread cannot spread."""

    def __init__(self, api_version: str, kind: str) -> None:
        self.api_version = api_version
        self.kind = kind
        supported = ", ".join(p.reference for p in POLICIES)
        message = f"unsupported workload kind {api_version} {kind}; supported: {supported}"
        hint = _hint(api_version, kind)
        super().__init__(f"{message} ({hint})" if hint else message)


def policy_for(api_version: str, kind: str) -> KindPolicy:
    """The policy of `api_version`/`kind` (exact, case-sensitive, as the apiserver matches them);
    UnsupportedKind naming the supported kinds otherwise."""
    policy = _BY_REFERENCE.get((api_version, kind))
    if policy is None:
        raise UnsupportedKind(api_version, kind)
    return policy


def template_quantity(policy: KindPolicy, template: Mapping[str, Any] | None) -> int | None:
    """The spread quantity a workload document of `policy`'s kind asks for: its
    `spec.<quantity_field>`, a Job's `parallelism` being 1 when unset (as the apiserver defaults
    it); None when absent, or not a non-negative integer (`simulate` then asks for one)."""
    spec = template.get("spec") if template else None
    if not isinstance(spec, Mapping):
        return None
    value = spec.get(policy.quantity_field)
    if value is None and policy.quantity_field == "parallelism":
        return 1
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _hint(api_version: str, kind: str) -> str:
    """A nearby supported kind: the same kind under another apiVersion, or another spelling."""
    for policy in POLICIES:
        if policy.kind == kind:
            return f"{kind} is served as {policy.api_version}"
        if policy.kind.lower() == kind.lower():
            return f"did you mean {policy.reference}?"
    return ""
