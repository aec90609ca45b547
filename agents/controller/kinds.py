"""The workload kinds the agent writes: one small strategy per kind, chosen by the kind table.

Why strategies: the workload sync (`agents.controller.workload`) does the same thing for every
kind — render the member object from the assignment, compare it with the cache and the live
object, create, replace, release or delete it, only ever an object it owns. What differs per kind
is small: which `spec` fields are kept from the hub object and which one carries the quantity, how
the quantity is read back from a member object, which API calls read and write it, and (from the
kind's row in `federation.core.workload_kinds`) whether deletion cost orders its scale-down. That
goes here, one class per kind, so a new kind is one strategy and one row in the table rather than
branches through the sync.

`strategy_for(api_version, kind)` gives the strategy through `workload_kinds.policy_for`; a kind
the table does not know, or one the agent does not write yet, raises `KindNotServed` (a
`ValueError` naming what is served): the sync reports it for that spread and goes on with the
others. Deployment, ReplicaSet, StatefulSet (apps/v1) and Job (batch/v1) are written.

Every API call carries its deadline (`federation.kube.deadlines`), as everywhere in the agent.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Protocol

from agents.cache import store as cache_mod
from federation.api import names
from federation.core import jobs, workload_kinds
from federation.kube import deadlines
from federation.rpc import assignment

Json = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"


class KindNotServed(ValueError):
    """An assignment names a kind the agent writes no member workload of."""


@dataclasses.dataclass(frozen=True)
class Apis:
    """The Kubernetes API objects the strategies call (one per API group they need)."""

    apps: Any
    """`kubernetes.client.AppsV1Api` (or a test's stand-in)."""
    batch: Any = None
    """`kubernetes.client.BatchV1Api`; None (a test's sync): no Job is read or written."""


@dataclasses.dataclass(frozen=True)
class Cached:
    """What the cache knows of a member workload: enough to skip a write that would change nothing."""

    annotations: Mapping[str, str]
    """Its fedspread.io/ annotations."""
    quantity: int | None
    """Its spec's quantity field (`KindPolicy.quantity_field`)."""
    federation: str
    """Its fedspread.io/federation label (`agents.ownership`)."""


class WorkloadKind(Protocol):
    """What the workload sync asks of one kind."""

    @property
    def policy(self) -> workload_kinds.KindPolicy:
        """The kind's row of facts (quantity field, scale-down order, ...)."""

    def spec(self, value: assignment.Assignment) -> Json:
        """The member object's spec: the hub template's kept fields, the quantity set to this
        cluster's share (a fresh dict, the template is not touched)."""

    def quantity(self, body: Mapping[str, Any]) -> Any:
        """The quantity in a member object's (or a rendered body's) spec; None when unset."""

    def cached(self, cache: cache_mod.Cache, namespace: str, name: str) -> Cached | None:
        """The cached member object of that name, if the cache has one labelled for a spread."""

    def read(self, apis: Apis, namespace: str, name: str) -> Json:
        """The live member object (ApiException 404 when there is none)."""

    def create(self, apis: Apis, namespace: str, body: Json) -> Any:
        """Create it; the client's raw response."""

    def replace(self, apis: Apis, namespace: str, name: str, body: Json) -> Any:
        """Replace it; the client's raw response."""

    def merge_patch(self, apis: Apis, namespace: str, name: str, patch: Json) -> Any:
        """A JSON merge patch of it; the client's raw response."""

    def list_labelled(self, apis: Apis, label_selector: str) -> list[Json]:
        """Every object of the kind with these labels, in every namespace, from the apiserver."""

    def delete(self, apis: Apis, namespace: str, name: str, options: Json) -> Any:
        """Delete it with these DeleteOptions; the client's raw response."""

    def not_creatable(self, body: Mapping[str, Any]) -> str:
        """Why a rendered body must not be created now ("" when it may be)."""


class _ClientCalls:
    """The client calls every kind makes: `<verb>_namespaced_<RESOURCE>` of the API group client
    `API` names in `Apis` (AppsV1Api, BatchV1Api), read and written as raw JSON with deadlines."""

    policy: workload_kinds.KindPolicy
    API = "apps"
    """The `Apis` field of the kind's API group client."""
    RESOURCE = ""
    """The kind's name in the client's method names (`deployment`, `replica_set`, `job`, ...)."""

    def cached(self, cache: cache_mod.Cache, namespace: str, name: str) -> Cached | None:
        view = cache.member_workload(self.policy.kind, namespace, name)
        if view is None:
            return None
        return Cached(annotations=view.annotations, quantity=view.replicas, federation=view.federation)

    def read(self, apis: Apis, namespace: str, name: str) -> Json:
        response = self._call(apis, "read_namespaced")(name, namespace, _preload_content=False,
                                                        _request_timeout=deadlines.CALL)
        found: Json = json.loads(response.data)
        return found

    def create(self, apis: Apis, namespace: str, body: Json) -> Any:
        return self._call(apis, "create_namespaced")(namespace, body, _preload_content=False,
                                                      _request_timeout=deadlines.CALL)

    def replace(self, apis: Apis, namespace: str, name: str, body: Json) -> Any:
        return self._call(apis, "replace_namespaced")(name, namespace, body, _preload_content=False,
                                                       _request_timeout=deadlines.CALL)

    def merge_patch(self, apis: Apis, namespace: str, name: str, patch: Json) -> Any:
        return self._call(apis, "patch_namespaced")(name, namespace, patch, _preload_content=False,
                                                     _content_type=MERGE_PATCH,
                                                     _request_timeout=deadlines.CALL)

    def list_labelled(self, apis: Apis, label_selector: str) -> list[Json]:
        listing = json.loads(self._call(apis, "list", "for_all_namespaces")(
            label_selector=label_selector, _preload_content=False, _request_timeout=deadlines.LIST).data)
        return list(listing.get("items") or ())

    def delete(self, apis: Apis, namespace: str, name: str, options: Json) -> Any:
        return self._call(apis, "delete_namespaced")(name, namespace, body=options, _preload_content=False,
                                                      _request_timeout=deadlines.CALL)

    def not_creatable(self, body: Mapping[str, Any]) -> str:
        del body
        return ""

    def _call(self, apis: Apis, verb: str, suffix: str = "") -> Any:
        return getattr(getattr(apis, self.API), "_".join(p for p in (verb, self.RESOURCE, suffix) if p))


class _AppsKind(_ClientCalls):
    """What the apps/v1 kinds share: the quantity is `spec.replicas` and the spec is the hub's
    `KEPT_SPEC_FIELDS`."""

    KEPT_SPEC_FIELDS: tuple[str, ...] = ()

    def spec(self, value: assignment.Assignment) -> Json:
        source_spec = (value.template or {}).get("spec") or {}
        spec: Json = {k: copy.deepcopy(source_spec[k]) for k in self.KEPT_SPEC_FIELDS if k in source_spec}
        spec["replicas"] = value.replicas
        return spec

    def quantity(self, body: Mapping[str, Any]) -> Any:
        return (body.get("spec") or {}).get("replicas")


class DeploymentKind(_AppsKind):
    """apps/v1 Deployment: `spec.replicas`, the hub's selector, pod template and rollout settings."""

    policy = workload_kinds.policy_for("apps/v1", "Deployment")
    KEPT_SPEC_FIELDS = ("selector", "template", "strategy", "minReadySeconds", "revisionHistoryLimit",
                        "progressDeadlineSeconds", "paused")
    RESOURCE = "deployment"


class ReplicaSetKind(_AppsKind):
    """apps/v1 ReplicaSet: `spec.replicas`, the hub's selector, pod template and minReadySeconds.
    Its pods are its own (no ReplicaSet between, `agents.owners`); its scale-down is steered by
    deletion cost, as a Deployment's. Changing its pod template replaces no pod (a ReplicaSet has
    no rollout): pods created afterwards get the new template, as on a single cluster."""

    policy = workload_kinds.policy_for("apps/v1", "ReplicaSet")
    KEPT_SPEC_FIELDS = ("selector", "template", "minReadySeconds")
    RESOURCE = "replica_set"


class StatefulSetKind(_AppsKind):
    """apps/v1 StatefulSet: `spec.replicas`, the hub's selector, pod template, serviceName,
    volumeClaimTemplates (each member creates its own claims; removed replicas' claims stay, as
    Kubernetes leaves them), pod management and update strategy. Its pods are its own (no link
    between, `agents.owners`); its controller removes the highest ordinal first and reads no
    deletion cost, so the webhook admits each pod into the subset whose ordinal range holds it
    (`federation.core.ordinals`) and no cost is written. The fields other than replicas, template
    and updateStrategy are immutable on a live StatefulSet: a change of them on the hub is refused
    by the member's apiserver and reported as the spread's sync failure there."""

    policy = workload_kinds.policy_for("apps/v1", "StatefulSet")
    KEPT_SPEC_FIELDS = ("selector", "template", "serviceName", "volumeClaimTemplates",
                        "podManagementPolicy", "updateStrategy", "revisionHistoryLimit")
    RESOURCE = "stateful_set"


class JobKind(_ClientCalls):
    """batch/v1 Job, through BatchV1Api: the quantity is `spec.parallelism` (this cluster's share);
    the spec is the hub Job's as `federation.core.jobs.member_job_spec` renders it — `completions`
    this cluster's portion (`Assignment.job_completions`, divided by the coordinator when the
    member Job is created), `suspend` the hub's, the hub-generated selector and template labels
    dropped (the member's apiserver generates its own), no TTL.

    A member Job is never replaced whole: its selector, template and completions are immutable, so
    an update is a merge patch of our labels and annotations, `parallelism` and `suspend` only (a
    scale changes member parallelism only). A Job whose hub has `completions` is not created while
    this cluster's portion is 0 (`not_creatable`): a Job with `completions: 0` is complete at once.
    No deletion cost: the Job controller picks which active pods a lower parallelism removes
    (`workload_kinds`: scale-down order `none`). Without a batch client (`Apis.batch` None) no Job
    is listed."""

    policy = workload_kinds.policy_for("batch/v1", "Job")
    API = "batch"
    RESOURCE = "job"

    def spec(self, value: assignment.Assignment) -> Json:
        source_spec = (value.template or {}).get("spec") or {}
        completions = None if source_spec.get("completions") is None else value.job_completions
        try:
            return jobs.member_job_spec(source_spec, parallelism=value.replicas, completions=completions,
                                        suspend=bool(source_spec.get("suspend", False)))
        except ValueError as error:  # an Indexed Job: its completion indexes cannot be divided
            raise KindNotServed(str(error)) from None

    def quantity(self, body: Mapping[str, Any]) -> Any:
        return (body.get("spec") or {}).get("parallelism")

    def not_creatable(self, body: Mapping[str, Any]) -> str:
        if (body.get("spec") or {}).get("completions") == 0:
            return "no completions of the hub Job are assigned to this cluster (yet)"
        return ""

    def replace(self, apis: Apis, namespace: str, name: str, body: Json) -> Any:
        meta = body.get("metadata") or {}
        annotations: dict[str, Any] = dict(meta.get("annotations") or {})
        annotations.setdefault(names.RELEASED_FROM_ANNOTATION, None)  # adopted: managed again
        spec = body.get("spec") or {}
        patch = {"metadata": {"labels": meta.get("labels") or {}, "annotations": annotations},
                 "spec": {"parallelism": spec.get("parallelism"), "suspend": spec.get("suspend")}}
        return self.merge_patch(apis, namespace, name, patch)

    def list_labelled(self, apis: Apis, label_selector: str) -> list[Json]:
        if apis.batch is None:
            return []
        return super().list_labelled(apis, label_selector)


SERVED: tuple[WorkloadKind, ...] = (DeploymentKind(), ReplicaSetKind(), StatefulSetKind(), JobKind())
"""The kinds the agent writes, in the kind table's order."""
_BY_REFERENCE = {(k.policy.api_version, k.policy.kind): k for k in SERVED}


def strategy_for(api_version: str, kind: str) -> WorkloadKind:
    """The strategy of `api_version`/`kind`; KindNotServed for a kind the table does not know (its
    message lists the supported kinds) or one the agent does not write yet."""
    try:
        policy = workload_kinds.policy_for(api_version, kind)
    except workload_kinds.UnsupportedKind as error:
        raise KindNotServed(str(error)) from None
    found = _BY_REFERENCE.get((policy.api_version, policy.kind))
    if found is None:
        served = ", ".join(k.policy.reference for k in SERVED)
        raise KindNotServed(f"this agent does not write {policy.reference} workloads yet; "
                            f"it writes: {served}")
    return found


def member_autoscalers(cache: cache_mod.Cache, value: assignment.Assignment) -> tuple[str, ...]:
    """The member HorizontalPodAutoscalers ("namespace/name") whose scale target is `value`'s member
    workload; none for a kind without `spec.replicas` (a Job has no scale subresource)."""
    try:
        field = workload_kinds.policy_for(value.api_version, value.kind).quantity_field
    except workload_kinds.UnsupportedKind:
        return ()
    if field != "replicas":
        return ()
    return cache.autoscalers(value.kind, value.namespace, value.workload)
