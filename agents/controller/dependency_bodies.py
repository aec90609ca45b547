"""The body of a member copy: the hub's object with our marks, and what the member allocated kept.

Why a module of its own: what a copy carries decides who may touch it. The federation label says
it is ours; `fedspread.io/needed-by` lists the spreads that need it here and
`fedspread.io/orphaned-by` those removed with their workload left running (either keeps it from
being deleted); the hash of the hub body it was made from makes writes minimal. A rewrite keeps
what the member allocated (a ServiceAccount's token secrets, a bound claim's spec, a Service's IPs
and node ports). These are pure functions over JSON bodies; `agents.controller.dependencies`
reads, writes and deletes with them.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from federation.api import names
from federation.rpc import assignment

Json = dict[str, Any]


def names_in(value: object) -> set[str]:
    """The spreads a mark lists (`a,b`); none for a missing or malformed one."""
    return {part for part in value.split(",") if part} if isinstance(value, str) else set()


def joined(values: set[str]) -> str:
    """A set of spreads as a mark lists them (sorted, comma-separated)."""
    return ",".join(sorted(values))


def source_hash(body: Json) -> str:
    """The hash of a hub copy, written on the member copy made from it."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def digest(value: assignment.Assignment) -> str:
    """What of an assignment decides its copies: federation, namespace, and each object's hub hash."""
    parts = [value.federation, value.namespace, str(value.propagate_dependencies)]
    parts += [f"{d.kind}/{d.name}/{source_hash(d.body) if d.body is not None else '-'}"
              for d in value.dependencies]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def marked(body: Json, *, federation: str, needers: set[str], orphaned: set[str]) -> Json:
    """`body` (the hub's copy) with our marks: the federation label, the spreads needing it, the
    ones that orphaned it, and the hash of `body` as the hub gave it."""
    result = copy.deepcopy(body)
    metadata = result.setdefault("metadata", {})
    metadata.setdefault("labels", {})[names.FEDERATION_LABEL] = federation
    annotations = metadata.setdefault("annotations", {})
    annotations[names.DESIRED_HASH_ANNOTATION] = source_hash(body)
    annotations[names.NEEDED_BY_ANNOTATION] = joined(needers)
    annotations.pop(names.ORPHANED_BY_ANNOTATION, None)
    if orphaned:
        annotations[names.ORPHANED_BY_ANNOTATION] = joined(orphaned)
    return result


def _keep_service_allocations(live: Json, new: Json) -> None:
    """A Service's cluster IPs and node ports as the member allocated them (immutable, or a new
    node port each update)."""
    live_spec, new_spec = live.get("spec") or {}, new.get("spec")
    if not isinstance(new_spec, dict):
        return
    for field in ("clusterIP", "clusterIPs", "healthCheckNodePort"):
        if field in live_spec and field not in new_spec:
            new_spec[field] = live_spec[field]
    allocated = {(p.get("port"), p.get("protocol", "TCP")): p["nodePort"]
                 for p in live_spec.get("ports") or () if isinstance(p, dict) and "nodePort" in p}
    for port in new_spec.get("ports") or ():
        key = (port.get("port"), port.get("protocol", "TCP")) if isinstance(port, dict) else None
        if key in allocated and "nodePort" not in port:
            port["nodePort"] = allocated[key]


def keep_allocated(kind: str, live: Json, new: Json) -> Json:
    """`new` with what the member allocated for the live object kept: a ServiceAccount's token
    secrets, a claim's whole spec (immutable once bound), a Service's IPs and node ports; and the
    live resourceVersion."""
    if kind == "ServiceAccount" and "secrets" in live:
        new["secrets"] = live["secrets"]
    if kind == "PersistentVolumeClaim" and "spec" in live:
        new["spec"] = live["spec"]
    if kind == "Service":
        _keep_service_allocations(live, new)
    new["metadata"]["resourceVersion"] = (live.get("metadata") or {}).get("resourceVersion")
    return new
