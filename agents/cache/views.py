"""Kubernetes JSON to the compact views the agent's cache keeps: pods of spreads, nodes, usage,
the spreads' member workloads (Deployments, ReplicaSets, StatefulSets, Jobs) and the ReplicaSets of their
Deployments.

Why separate from the cache: these conversions are pure and decide what the controller believes
(a pod's subset, template revision, readiness, since when it is unschedulable, its current
deletion cost, the member Deployment's status the coordinator adds up into the hub's), so they
are unit-tested row by row; the cache only stores what they return.

Each view keeps just what its readers use, so a 20,000-pod cluster costs a few hundred bytes per
pod instead of a full object: a Pod object is kilobytes of JSON and a client model many times that.
Texts that many objects repeat (namespaces, node names, spread keys, subsets, revisions, phases,
node labels and allocatable amounts) are interned (`sys.intern`): parsed JSON gives every object
its own copy, and on a big member those copies were a fifth of the cache.
"""

from __future__ import annotations

import dataclasses
import datetime
import fractions
import logging
import re
import sys
from collections.abc import Mapping
from typing import Any

from agents import pod_ledger
from federation.api import names
from federation.core import deletion_cost, fit, inventory, job_status, pod_usage, rollout
from federation.rpc import assignment

LOG = logging.getLogger(__name__)

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
DEPLOYMENT_REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
"""The Deployment controller's number of each of its ReplicaSets (its template's rollout number)."""
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclasses.dataclass(frozen=True, slots=True)
class SpreadPod:
    """One pod of a spread, as the controller reads it (slotted: one per pod of every spread)."""

    namespace: str
    spread: str
    """The spread key, `namespace/name` (from the fedspread.io/spread label)."""
    uid: str
    record: pod_ledger.PodRecord
    ready_since: datetime.datetime | None = None
    owner: int | str = ""
    """The uid (`compact_uid`) of the pod's controller (its controller ownerReference: the
    ReplicaSet, for a Deployment's pod); "" for a pod no controller owns. Whose pod it is follows
    from it (`agents.owners`), not from the label."""


@dataclasses.dataclass(frozen=True)
class DeploymentStatus:
    """A member workload's apps/v1 `status` counters (agent.proto WorkloadStatus), 0 when unset: a
    Deployment's, or a ReplicaSet's (which has no updated or unavailable count: 0)."""

    observed_generation: int = 0
    replicas: int = 0
    ready_replicas: int = 0
    updated_replicas: int = 0
    available_replicas: int = 0
    unavailable_replicas: int = 0
    job: job_status.MemberJob | None = None
    """A member Job's status and completions (its counters above are 0); None for the apps/v1 kinds."""
    generation_observed: bool = True
    """Whether its controller has observed its spec (`status.observedGeneration >= metadata.generation`)."""
    template_revision: str | None = None
    """Set by the pod-counts report (`agents.controller.reconciler.member_status`): the template
    revision it was rendered from once observed, "" before; None where not known (a Job)."""


@dataclasses.dataclass(frozen=True)
class WorkloadView:
    """One member workload (a Deployment, a ReplicaSet no Deployment controls, a StatefulSet) labelled
    fedspread.io/spread, as workload sync and the pod counts read it."""

    namespace: str
    name: str
    uid: str
    spread_label: str
    replicas: int | None
    annotations: Mapping[str, str]
    """Only the fedspread.io/ annotations."""
    status: DeploymentStatus = DeploymentStatus()
    federation: str = ""
    """The fedspread.io/federation label (whose workload it is; agents.ownership)."""
    """Kept so that a status change alone (readyReplicas going up) is a cache change the
    reconciler wakes for and reports."""


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicaSetView:
    """One ReplicaSet labelled fedspread.io/spread: a member Deployment's (or a released one's), the
    link from a pod's controller to the Deployment that controls it; or, controlled by no
    Deployment, a ReplicaSet spread as a workload of its own (`workload`)."""

    uid: str
    owner: str
    """The uid of the Deployment that controls it (its controller ownerReference); "" if none."""
    workload: WorkloadView | None = None
    """For a ReplicaSet no Deployment controls: its view as a member workload (replicas, marks,
    status); None for a Deployment's, whose status changes would only cost cache updates."""
    template_hash: str = ""
    """A Deployment's ReplicaSet: its `pod-template-hash` label, the revision its pods carry."""
    revision: int = 0
    """A Deployment's ReplicaSet: its `deployment.kubernetes.io/revision` annotation (the highest is
    the Deployment's current template; a rollback renumbers the one it returns to); 0 if none."""


@dataclasses.dataclass(frozen=True, slots=True)
class AutoscalerView:
    """A member HorizontalPodAutoscaler, as far as the agent cares: which workload it scales."""

    namespace: str
    name: str
    target: str
    """`autoscaler_target` of its scaleTargetRef."""


def autoscaler_target(kind: str, namespace: str, name: str) -> str:
    """The index of a workload an HPA may target: kind, namespace and name (not the API version:
    the HPA controller resolves the kind through the scale subresource, whatever group it says)."""
    return f"{kind}/{namespace}/{name}"


def autoscaler_view(hpa: Mapping[str, Any]) -> AutoscalerView:
    """The compact view of a HorizontalPodAutoscaler (any autoscaling version: scaleTargetRef is
    the same in each)."""
    meta = hpa.get("metadata") or {}
    ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
    namespace = str(meta.get("namespace") or "")
    target = autoscaler_target(str(ref.get("kind") or ""), namespace, str(ref.get("name") or ""))
    return AutoscalerView(namespace=namespace, name=str(meta.get("name") or ""), target=target)


def controller_of(meta: Mapping[str, Any], *, kind: str | None = None) -> Mapping[str, Any] | None:
    """An object's controller ownerReference (of `kind`, when given), if it has one."""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref if kind is None or ref.get("kind") == kind else None
    return None


def replicaset_view(replicaset: Mapping[str, Any]) -> ReplicaSetView:
    """The compact view of a spread's ReplicaSet."""
    meta = replicaset.get("metadata") or {}
    owner = controller_of(meta, kind="Deployment")
    uid = str(meta.get("uid") or "")
    if owner is not None:
        revision = str((meta.get("annotations") or {}).get(DEPLOYMENT_REVISION_ANNOTATION) or "")
        return ReplicaSetView(uid=uid, owner=str(owner.get("uid") or ""),
                              template_hash=sys.intern(str((meta.get("labels") or {}).get(
                                  names.REVISION_LABEL) or "")),
                              revision=int(revision) if revision.isdigit() else 0)
    return ReplicaSetView(uid=uid, owner="", workload=workload_view(replicaset))


def compact_uid(uid: str) -> int | str:
    """A uid as a cache keeps it to tell objects apart: a canonical (lowercase) UUID, as the
    apiserver makes them, as its 128-bit int (44 bytes rather than an 85-byte string); any other
    text as it is. Distinct texts stay distinct: only the canonical form becomes an int."""
    if _UUID.fullmatch(uid):
        return int(uid.replace("-", ""), 16)
    return uid


def parse_time(text: Any) -> datetime.datetime | None:
    """An RFC 3339 timestamp as an aware datetime; None when absent or malformed."""
    if not text or not isinstance(text, str):
        return None
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return {}


def unschedulable_since(pod: Mapping[str, Any]) -> datetime.datetime | None:
    """When an unbound Pending pod became PodScheduled=False/Unschedulable (else None).

    Timed from the condition's lastTransitionTime; the pod's creation time stands in
    when the scheduler left the time out.
    """
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName") or (status.get("phase") or "Pending") != "Pending":
        return None
    scheduled = _condition(status, "PodScheduled")
    if scheduled.get("status") != "False" or scheduled.get("reason") != "Unschedulable":
        return None
    created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    return parse_time(scheduled.get("lastTransitionTime")) or created or EPOCH


def spread_pod(pod: Mapping[str, Any]) -> SpreadPod | None:
    """The compact view of a spread's pod; None for a pod without the fedspread.io/spread label."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    spread_name = labels.get(names.SPREAD_LABEL)
    if not spread_name:
        return None
    annotations = meta.get("annotations") or {}
    status = pod.get("status") or {}
    ready_condition = _condition(status, "Ready")
    ready = ready_condition.get("status") == "True"
    restarts = [int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or ()]
    controller = controller_of(meta)
    namespace = sys.intern(str(meta.get("namespace") or ""))
    subset = annotations.get(names.SUBSET_ANNOTATION) or None
    record = pod_ledger.PodRecord(
        name=str(meta.get("name") or ""),
        subset=sys.intern(subset) if isinstance(subset, str) else subset,
        revision=sys.intern(str(rollout.pod_revision(labels))),
        phase=sys.intern(str(status.get("phase") or "Pending")),
        ready=ready,
        node_name=sys.intern(str((pod.get("spec") or {}).get("nodeName") or "")),
        created=parse_time(meta.get("creationTimestamp")) or EPOCH,
        deleting=meta.get("deletionTimestamp") is not None,
        unschedulable_since=unschedulable_since(pod),
        current_cost=deletion_cost.parse_cost(annotations.get(names.DELETION_COST_ANNOTATION)),
        restarts=max(restarts, default=0),
        owned=controller is not None,
    )
    return SpreadPod(
        namespace=namespace, spread=sys.intern(assignment.spread_key(namespace, spread_name)),
        uid=str(meta.get("uid") or ""), record=record,
        ready_since=parse_time(ready_condition.get("lastTransitionTime")) if ready else None,
        owner=compact_uid(str(controller.get("uid") or "")) if controller is not None else "",
    )


def _interned(mapping: Any) -> dict[str, str]:
    """A string map with every key and value interned (nodes of a kind share all but a few)."""
    return {sys.intern(str(k)): sys.intern(str(v)) for k, v in (mapping or {}).items()}


def node_view(node: Mapping[str, Any]) -> inventory.NodeView:
    """The compact view of a Node."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    taints = tuple(
        {field: sys.intern(str(t.get(field) or "")) for field in ("key", "value", "effect")}
        for t in spec.get("taints") or () if isinstance(t, Mapping)
    )
    return inventory.NodeView(
        name=sys.intern(str(meta.get("name") or "")),  # the same string as its pods' node_name
        labels=_interned(meta.get("labels")),
        taints=taints,
        allocatable=_interned(status.get("allocatable")),
        unschedulable=bool(spec.get("unschedulable")),
        ready=_condition(status, "Ready").get("status") == "True",
    )


def pod_requests(pod: Mapping[str, Any]) -> Mapping[str, fractions.Fraction]:
    """The pod's effective requests as the scheduler counts them (empty if its spec is malformed)."""
    try:
        return fit.shape_from_pod_spec(pod.get("spec") or {}).requests
    except ValueError as error:
        meta = pod.get("metadata") or {}
        LOG.warning("pod requests unreadable",
                    extra={"pod": f"{meta.get('namespace')}/{meta.get('name')}", "error": error})
        return {}


def container_requests(pod: Mapping[str, Any]) -> Mapping[str, fractions.Fraction]:
    """The pod's containers' requests summed per resource (empty if its spec is malformed)."""
    try:
        return pod_usage.container_requests(pod.get("spec") or {})
    except (ValueError, TypeError, AttributeError):
        return {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _observed(meta: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether a workload's controller has seen its current spec (no generation: nothing to wait for)."""
    generation = meta.get("generation")
    return not isinstance(generation, int) or _count(status.get("observedGeneration")) >= generation


def deployment_status(status: Mapping[str, Any]) -> DeploymentStatus:
    """A Deployment's (or ReplicaSet's) `status` counters; absent or malformed fields read as 0, as
    apps/v1 omits zeros."""
    return DeploymentStatus(
        observed_generation=_count(status.get("observedGeneration")),
        replicas=_count(status.get("replicas")),
        ready_replicas=_count(status.get("readyReplicas")),
        updated_replicas=_count(status.get("updatedReplicas")),
        available_replicas=_count(status.get("availableReplicas")),
        unavailable_replicas=_count(status.get("unavailableReplicas")),
    )


def workload_view(workload: Mapping[str, Any]) -> WorkloadView:
    """The compact view of a member workload labelled for a spread (Deployment, ReplicaSet, StatefulSet;
    a Job's through `job_view`)."""
    meta = workload.get("metadata") or {}
    replicas = (workload.get("spec") or {}).get("replicas")
    return WorkloadView(
        namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        spread_label=str((meta.get("labels") or {}).get(names.SPREAD_LABEL) or ""),
        replicas=replicas if isinstance(replicas, int) else None,
        annotations={k: str(v) for k, v in (meta.get("annotations") or {}).items()
                     if k.startswith(names.PREFIX)},
        status=dataclasses.replace(deployment_status(workload.get("status") or {}),
                                   generation_observed=_observed(meta, workload.get("status") or {})),
        federation=str((meta.get("labels") or {}).get(names.FEDERATION_LABEL) or ""),
    )


def member_job(job: Mapping[str, Any]) -> job_status.MemberJob:
    """A member Job's status (counts, times, its Complete/Failed conditions) and `spec.completions`,
    as its agent reports it for the hub Job's status (`federation.core.job_status`)."""
    status = job.get("status") or {}
    complete = _condition(status, "Complete")
    failed = _condition(status, "Failed")
    completions = (job.get("spec") or {}).get("completions")
    return job_status.MemberJob(
        active=_count(status.get("active")), succeeded=_count(status.get("succeeded")),
        failed=_count(status.get("failed")), start_time=parse_time(status.get("startTime")),
        completion_time=parse_time(status.get("completionTime")),
        complete=complete.get("status") == "True", failed_condition=failed.get("status") == "True",
        completions=completions if isinstance(completions, int) and not isinstance(completions, bool)
        else None,
        failed_time=parse_time(failed.get("lastTransitionTime")) if failed.get("status") == "True" else None,
        failed_reason=str(failed.get("reason") or "") if failed.get("status") == "True" else "")


def job_view(job: Mapping[str, Any]) -> WorkloadView:
    """The compact view of a member Job labelled for a spread: its quantity is `spec.parallelism`,
    its status the Job's own (`member_job`)."""
    view = workload_view(job)
    parallelism = (job.get("spec") or {}).get("parallelism")
    return dataclasses.replace(view, replicas=parallelism if isinstance(parallelism, int) else None,
                               status=DeploymentStatus(job=member_job(job)))
