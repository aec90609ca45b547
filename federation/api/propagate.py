"""`spec.propagate`: further objects of the spread's namespace sent to the clusters that run it.

Why: a real application is more than its workload and the objects its pods reference. Its Service
(so that each member answers under the same name), its PodDisruptionBudget (so that a node drain in
a member respects the application), its NetworkPolicy and its Role/RoleBinding are needed in every
cluster that runs it, and move with the placement, as Karmada's PropagationPolicy
`resourceSelectors` carry them. An entry names one object by `apiVersion`, `kind` and `name`; it
travels like a dependency (`spec.propagateDependencies`): to exactly the clusters with replicas,
before the workload, marked, never over a same-name object fedspread did not create.

Which kinds (`SUPPORTED`): the namespaced kinds fedspread knows how to copy (what a member copy
keeps and drops, `federation.core.member_copy`). Refused with a field path, by the hub webhook and
by `fedspread simulate`: a cluster-scoped kind (only the spread's namespace is propagated), the
spread's own workload (it is placed, not copied), any other kind or version, a duplicate entry,
and entries while `propagateDependencies` is false (the copies and their hand-over are one
mechanism; see docs/decisions.md). Whether the hub serves an entry's `apiVersion` needs the hub:
the webhook asks it (`unserved_problems`); simulate, offline, checks the list alone.

Pure: no Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pydantic

from federation.api import common

SUPPORTED: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Service"): ("v1",),
    ("policy", "PodDisruptionBudget"): ("v1", "v1beta1"),
    ("networking.k8s.io", "NetworkPolicy"): ("v1",),
    ("rbac.authorization.k8s.io", "Role"): ("v1",),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("v1",),
    ("", "ConfigMap"): ("v1",),
    ("", "Secret"): ("v1",),
    ("", "ServiceAccount"): ("v1",),
    ("", "PersistentVolumeClaim"): ("v1",),
}
"""(API group, kind) -> the versions an entry may name."""

CLUSTER_SCOPED = frozenset({
    "APIService", "CertificateSigningRequest", "ClusterRole", "ClusterRoleBinding", "ComponentStatus",
    "CSIDriver", "CSINode", "CustomResourceDefinition", "FlowSchema", "IngressClass", "MemberCluster",
    "MutatingWebhookConfiguration", "Namespace", "Node", "PersistentVolume", "PodSecurityPolicy",
    "PriorityClass", "PriorityLevelConfiguration", "RuntimeClass", "StorageClass",
    "ValidatingWebhookConfiguration", "VolumeAttachment",
})
"""Kinds without a namespace (Kubernetes' own, and fedspread's MemberCluster)."""

WORKLOAD_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet", "Pod", "CronJob"})


def group_of(api_version: str) -> str:
    """`policy/v1` -> `policy`; the core group's `v1` -> ``."""
    return api_version.rpartition("/")[0]


def _supported_text() -> str:
    return ", ".join(f"{'/'.join(filter(None, (group, versions[0])))} {kind}"
                     for (group, kind), versions in SUPPORTED.items())


class PropagateRef(common.SpecModel):
    """One further object to send to the clusters that run the spread, in the spread's namespace."""

    api_version: str = pydantic.Field(
        min_length=1, max_length=253,
        description="API version of the object: v1 (Service), policy/v1 or policy/v1beta1 "
                    "(PodDisruptionBudget), networking.k8s.io/v1 (NetworkPolicy), "
                    "rbac.authorization.k8s.io/v1 (Role, RoleBinding).")
    kind: str = pydantic.Field(
        min_length=1, max_length=63,
        description="Service, PodDisruptionBudget, NetworkPolicy, Role or RoleBinding (or a "
                    "ConfigMap, Secret, ServiceAccount or PersistentVolumeClaim the template does "
                    "not reference).")
    name: str = pydantic.Field(
        min_length=1, max_length=253, description="Its name in the spread's namespace on the hub.")

    @property
    def described(self) -> str:
        """`Kind/name`, as status and conditions name objects."""
        return f"{self.kind}/{self.name}"


def problems(entries: Sequence[PropagateRef], *, target: tuple[str, str, str],
             propagate_dependencies: bool) -> list[tuple[str, str]]:
    """(path relative to the spec, message) for each refused entry; `target` is the workload's
    (apiVersion, kind, name)."""
    found: list[tuple[str, str]] = []
    if entries and not propagate_dependencies:
        found.append(("propagate", "objects are propagated with the dependencies: set "
                                   "propagateDependencies to true (its default), or remove propagate"))
    first: dict[tuple[str, str], int] = {}
    for index, entry in enumerate(entries):
        here = f"propagate[{index}]"
        group = group_of(entry.api_version)
        same_workload = (entry.kind, entry.name) == target[1:] and entry.kind in WORKLOAD_KINDS
        if (entry.api_version, entry.kind, entry.name) == target or same_workload:
            found.append((here, f"{entry.kind} {entry.name!r} is the spread's own workload "
                                "(targetRef): it is placed, not copied"))
        elif entry.kind in CLUSTER_SCOPED:
            found.append((f"{here}.kind", f"{entry.kind} is cluster-scoped: only objects of the "
                                          "spread's namespace are propagated"))
        elif (group, entry.kind) not in SUPPORTED:
            found.append((f"{here}.kind", f"{entry.api_version} {entry.kind} is not a kind fedspread "
                                          f"propagates (it propagates {_supported_text()})"))
        elif entry.api_version.partition("/")[2 if group else 0] not in SUPPORTED[group, entry.kind]:
            versions = ", ".join("/".join(filter(None, (group, v))) for v in SUPPORTED[group, entry.kind])
            found.append((f"{here}.apiVersion", f"{entry.kind} is propagated as {versions}, "
                                                f"not {entry.api_version}"))
        if (entry.kind, entry.name) in first:
            earlier = first[entry.kind, entry.name]
            found.append((here, f"{entry.described} is already listed (propagate[{earlier}])"))
        else:
            first[entry.kind, entry.name] = index
    return found


def unserved_problems(api_versions: Sequence[object], *, served: Collection[str],
                      path: str = "spec.propagate") -> list[tuple[str, str]]:
    """(path, message) for each entry's apiVersion (`api_versions`, in entry order, as written: a
    non-string is skipped, the schema reports it) that the hub does not serve; `served` holds the
    hub's group versions as discovery names them (`v1`, `policy/v1beta1`, ...)."""
    found: list[tuple[str, str]] = []
    for index, version in enumerate(api_versions):
        if not isinstance(version, str) or version in served:
            continue
        group = group_of(version)
        others = ", ".join(sorted(v for v in served if group_of(v) == group)) or "no version of that group"
        found.append((f"{path}[{index}].apiVersion",
                      f"the hub does not serve {version} (it serves {others})"))
    return found
