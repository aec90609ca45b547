"""Rendering a member workload from an assignment (pure): what the agent writes, and whether a live
object already is it.

Why apart from the sync (`agents.controller.workload`): these are the rules a reader checks first
— which fields of the hub object reach the member, which marks we add, what the hash covers —
and they are pure, so they are tested without a cluster.

What is written: the fields the kind's strategy keeps of the hub object (`agents.controller.kinds`:
a Deployment's selector, pod template and rollout settings) with the kind's quantity field
(`spec.replicas`) = this cluster's share, the label `fedspread.io/spread` on the object and on its
pod template (so the webhook's objectSelector sees the pods), the ownership marks of
`agents.ownership` (label `fedspread.io/federation`, annotation `fedspread.io/spread-uid`), and
annotations for the spread's generation, its key, and a hash of everything we set.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from agents import ownership
from agents.controller import kinds
from federation.api import names
from federation.core import workload_kinds
from federation.rpc import assignment

Json = dict[str, Any]
KEPT_POD_METADATA = ("labels", "annotations")


def desired_hash(body: Mapping[str, Any]) -> str:
    """A stable hash of a rendered member workload (without its hash annotation)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def render(value: assignment.Assignment) -> Json:
    """The member workload for an assignment, hash annotation included (KindNotServed for a kind
    the agent does not write)."""
    kind = kinds.strategy_for(value.api_version, value.kind)
    source_meta = (value.template or {}).get("metadata") or {}
    spec = kind.spec(value)
    pod_template = spec.setdefault("template", {})
    pod_meta = {k: v for k, v in (pod_template.get("metadata") or {}).items() if k in KEPT_POD_METADATA and v}
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), names.SPREAD_LABEL: value.name}
    pod_template["metadata"] = pod_meta
    labels, annotations = ownership.marks(value)
    body: Json = {
        "apiVersion": kind.policy.api_version, "kind": kind.policy.kind,
        "metadata": {
            "name": value.workload, "namespace": value.namespace,
            "labels": {**(source_meta.get("labels") or {}), names.SPREAD_LABEL: value.name, **labels},
            "annotations": {names.GENERATION_ANNOTATION: str(value.generation),
                            names.TEMPLATE_REVISION_ANNOTATION: value.template_revision,
                            names.SPREAD_KEY_ANNOTATION: value.spread, **annotations},
        },
        "spec": spec,
    }
    body["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION] = desired_hash(body)
    return body


def is_current(*, annotations: Mapping[str, str] | None, replicas: Any, desired: Mapping[str, Any]) -> bool:
    """True when a live workload already is `desired`: same hash and same quantity (`replicas`: the
    live value of the kind's quantity field).

    The quantity is compared too because it is what someone is most likely to change by hand
    (kubectl scale); the rest is trusted to the hash.
    """
    wanted = desired["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION]
    same_hash = (annotations or {}).get(names.DESIRED_HASH_ANNOTATION) == wanted
    field = workload_kinds.policy_for(desired["apiVersion"], desired["kind"]).quantity_field
    return bool(same_hash and replicas == desired["spec"][field])


def keeping_quantity(desired: Mapping[str, Any], quantity: Any) -> Json:
    """`desired` with the kind's quantity field set to `quantity` (the live one, which a member
    HPA owns), its hash annotation still the assignment's: a new assignment is still a write, a
    replica count the HPA set is never one. An unknown `quantity` (None) leaves `desired` as is."""
    if quantity is None:
        return dict(desired)
    field = workload_kinds.policy_for(desired["apiVersion"], desired["kind"]).quantity_field
    body = copy.deepcopy(dict(desired))
    body["spec"][field] = quantity
    return body


def merged(live: Mapping[str, Any], desired: Mapping[str, Any]) -> Json:
    """The body for a replace: the live object with our labels, annotations and spec."""
    body = copy.deepcopy(dict(live))
    body.pop("status", None)
    meta = body.setdefault("metadata", {})
    meta.pop("managedFields", None)
    for field in ("labels", "annotations"):
        meta[field] = {**(meta.get(field) or {}), **desired["metadata"][field]}
    meta["annotations"].pop(names.RELEASED_FROM_ANNOTATION, None)  # adopted: managed again
    body["spec"] = copy.deepcopy(desired["spec"])
    body["apiVersion"], body["kind"] = desired["apiVersion"], desired["kind"]
    return body
