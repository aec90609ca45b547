"""What a hub object becomes in a member cluster, and a PodDisruptionBudget's share.

Why: the hub is the source of truth for the objects a spread's pods need (ConfigMaps, Secrets, the
ServiceAccount, PVCs) and for the objects `spec.propagate` lists (Service, PodDisruptionBudget,
NetworkPolicy, Role, RoleBinding), but an object read from the hub cannot be created as read in
another cluster. What the hub's apiserver and controllers wrote about *their* copy — uid,
resourceVersion, timestamps, managed fields, owner references (to hub objects), finalizers,
status, `kubectl apply`'s last-applied annotation — and what each cluster allocates for itself —
a Service's cluster IPs and node ports, a ServiceAccount's token secrets, a claim's bound volume
and the volume controller's annotations — would be refused, collide, or point at nothing there.
`member_copy` keeps what the user wrote and nothing the hub allocated; it refuses what must never
travel (a ServiceAccount token Secret: tokens are minted per cluster) and kinds it does not know.

A PodDisruptionBudget guards the whole workload on the hub; each member guards only its share, so
an absolute `minAvailable`/`maxUnavailable` is divided in proportion to the clusters' replicas
(largest remainder, so the parts sum to the whole), while a percentage means the same in every
cluster and is copied (`divide_budget`).

Pure: no Kubernetes client, no I/O; inputs are never mutated, outputs share nothing with them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from federation.core import apportion

SERVICE_ACCOUNT_TOKEN_TYPE = "kubernetes.io/service-account-token"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
# Annotations the volume controllers and the scheduler write on a claim in *their* cluster
# (bind-completed, bound-by-controller, storage-provisioner, selected-node, ...).
_CLAIM_ANNOTATION_PREFIXES = ("pv.kubernetes.io/", "volume.beta.kubernetes.io/", "volume.kubernetes.io/")
# ... except the deprecated form of `storageClassName`, which users write.
_CLAIM_ANNOTATIONS_KEPT = frozenset({"volume.beta.kubernetes.io/storage-class"})
_SERVICE_ALLOCATED = ("clusterIP", "clusterIPs", "healthCheckNodePort")
HEADLESS = "None"
"""A Service's `clusterIP` when the user asked for none (a headless Service, as a StatefulSet's)."""

# (API group, kind) -> the top-level fields of the object's body that travel.
_BODY_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "ConfigMap"): ("data", "binaryData", "immutable"),
    ("", "Secret"): ("type", "data", "stringData", "immutable"),
    ("", "ServiceAccount"): ("imagePullSecrets", "automountServiceAccountToken"),
    ("", "PersistentVolumeClaim"): ("spec",),
    ("", "Service"): ("spec",),
    ("policy", "PodDisruptionBudget"): ("spec",),
    ("networking.k8s.io", "NetworkPolicy"): ("spec",),
    ("rbac.authorization.k8s.io", "Role"): ("rules",),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("subjects", "roleRef"),
}
COPYABLE_KINDS = frozenset(kind for _, kind in _BODY_FIELDS)


class NotCopyable(ValueError):
    """The object must not, or cannot, be created in a member cluster; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _group(api_version: str) -> str:
    """`apps/v1` -> `apps`; the core group's `v1` -> ``."""
    return api_version.rpartition("/")[0]


def _string_map(value: object) -> dict[str, Any]:
    return {k: v for k, v in value.items() if isinstance(k, str)} if isinstance(value, Mapping) else {}


def _annotations(kind: str, annotations: Mapping[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in annotations.items() if k != LAST_APPLIED_ANNOTATION}
    if kind == "PersistentVolumeClaim":
        kept = {k: v for k, v in kept.items()
                if k in _CLAIM_ANNOTATIONS_KEPT or not k.startswith(_CLAIM_ANNOTATION_PREFIXES)}
    return kept


def _metadata(kind: str, metadata: Mapping[str, Any], marks: Mapping[str, str]) -> dict[str, Any]:
    result: dict[str, Any] = {"name": metadata.get("name")}
    if "namespace" in metadata:
        result["namespace"] = metadata["namespace"]
    labels = {**_string_map(metadata.get("labels")), **marks}
    if labels:
        result["labels"] = labels
    annotations = _annotations(kind, _string_map(metadata.get("annotations")))
    if annotations:
        result["annotations"] = annotations
    return result


def _service_spec(spec: dict[str, Any]) -> None:
    headless = spec.get("clusterIP") == HEADLESS  # what the user asked for, not an allocation
    for field in _SERVICE_ALLOCATED:
        spec.pop(field, None)
    if headless:
        spec["clusterIP"] = HEADLESS
    ports = spec.get("ports")
    if isinstance(ports, list):
        for port in ports:
            if isinstance(port, dict):
                port.pop("nodePort", None)


def _claim_spec(spec: dict[str, Any]) -> None:
    spec.pop("volumeName", None)


def member_copy(obj: Mapping[str, Any], *, marks: Mapping[str, str]) -> dict[str, Any]:
    """`obj` (a hub object, as the apiserver returns it) as it is to be created in a member.

    Keeps `apiVersion`, `kind`, the name, namespace, labels (with `marks` merged in, marks win) and
    annotations (less `kubectl apply`'s), and the kind's body; drops everything the hub allocated.
    Raises NotCopyable for a kind outside COPYABLE_KINDS, an object without a name, or a
    ServiceAccount token Secret.
    """
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise NotCopyable("the object has no apiVersion or kind")
    fields = _BODY_FIELDS.get((_group(api_version), kind))
    if fields is None:
        raise NotCopyable(f"{api_version} {kind} is not a kind fedspread copies to member clusters "
                          f"(it copies {', '.join(sorted(COPYABLE_KINDS))})")
    metadata = _string_map(obj.get("metadata"))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise NotCopyable(f"the {kind} has no name")
    if kind == "Secret" and obj.get("type") == SERVICE_ACCOUNT_TOKEN_TYPE:
        raise NotCopyable(f"Secret {name} is a ServiceAccount token ({SERVICE_ACCOUNT_TOKEN_TYPE}): "
                          "tokens are issued by each cluster for its own ServiceAccounts")
    result: dict[str, Any] = {"apiVersion": api_version, "kind": kind,
                              "metadata": _metadata(kind, metadata, marks)}
    result.update({field: obj[field] for field in fields if field in obj})
    result = copy.deepcopy(result)  # from here on, changes touch the copy only
    spec = result.get("spec")
    if isinstance(spec, dict):
        if kind == "Service":
            _service_spec(spec)
        elif kind == "PersistentVolumeClaim":
            _claim_spec(spec)
    return result


def _percentage(value: str) -> bool:
    digits = value[:-1]
    return value.endswith("%") and digits.isascii() and digits.isdigit()


def divide_budget(value: int | str, *, shares: Mapping[str, int]) -> dict[str, int | str]:
    """Each cluster's part of a PodDisruptionBudget's `minAvailable` or `maxUnavailable`.

    `shares` are the spread's replicas per cluster. A percentage ("50%") is every cluster's part
    as it is. An absolute value is split in proportion to the shares by largest remainder (the
    parts sum to `value` unless every share is 0; ties go to the larger share, then to
    the cluster named first); a cluster with share 0 gets 0, and so does every cluster when all
    shares are 0. Raises ValueError for a negative value or share, or a string that is not a
    percentage (the apiserver admits neither).
    """
    if isinstance(value, str):
        if not _percentage(value):
            raise ValueError(f"{value!r} is neither an integer nor a percentage such as '50%'")
        return dict.fromkeys(shares, value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a disruption budget of {value!r} is not a non-negative integer")
    if any(share < 0 for share in shares.values()):
        raise ValueError("replica shares must not be negative")
    order = sorted(shares, key=lambda cluster: (-shares[cluster], cluster))
    weights = [shares[cluster] for cluster in order]
    if sum(weights) == 0:
        return dict.fromkeys(shares, 0)
    parts = dict(zip(order, apportion.split_ints(value, weights), strict=True))
    return {cluster: parts[cluster] for cluster in shares}
