"""What the node simulator's resource metrics API (`metrics.k8s.io/v1beta1`) answers: pure rendering.

Why: a sandbox member has no kubelet and no metrics-server, yet `kubectl top`, the stock HPA
controller and fedspread's agents read pod usage from this API. The node simulator serves it
(`metrics_server`) from the pods it already watches; this module turns those pods into the documents
metrics-server would return, so a test sets load by annotating a pod: `USAGE_ANNOTATION` holds JSON
such as `{"cpu": "450m", "memory": "64Mi"}` (no annotation, bad JSON or a bad quantity: zero). A
pod's usage is divided over its containers in proportion to their requests of each resource (all to
the first container when none requests it); a node's usage is the sum of its Running pods'. Only
Running pods are reported, every one stamped now with `WINDOW`, as a fresh scrape would be.
"""

from __future__ import annotations

import datetime
import fractions
import json
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from federation.api import quantity
from federation.sandbox import label_selector

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
USAGE_ANNOTATION = "sandbox.fedspread.io/usage"
WINDOW = "15s"
RESOURCES = ("cpu", "memory")
Json = dict[str, Any]
Usage = dict[str, int]
"""Usage per resource in whole units of its finest grain: nanocores for cpu, bytes for memory."""
_GRAIN = {"cpu": quantity.NANO, "memory": 1}


def parse_usage(annotations: Mapping[str, str] | None) -> Usage:
    """The usage a pod's annotation declares; zero for each resource it does not state correctly."""
    usage = dict.fromkeys(RESOURCES, 0)
    try:
        declared = json.loads((annotations or {}).get(USAGE_ANNOTATION) or "{}")
    except ValueError:
        return usage
    if not isinstance(declared, dict):
        return usage
    for resource in RESOURCES:
        value = declared.get(resource, 0)
        if not isinstance(value, str | int | float):
            continue
        try:
            amount = quantity.parse_quantity(value)
        except ValueError:
            continue
        usage[resource] = max(0, int(amount * _GRAIN[resource]))
    return usage


def _request(container: Json, resource: str) -> int:
    requests = (container.get("resources") or {}).get("requests") or {}
    try:
        return max(0, int(quantity.parse_quantity(requests.get(resource, 0)) * _GRAIN[resource]))
    except (ValueError, TypeError):
        return 0


def container_usage(pod: Json) -> list[tuple[str, Usage]]:
    """Each container's share of the pod's declared usage, in proportion to its requests (the
    rounding remainder to the first container, so the shares add up to the pod's usage)."""
    containers = pod["spec"].get("containers") or []
    if not containers:
        return []
    total = parse_usage(pod["metadata"].get("annotations"))
    shares: list[Usage] = [{} for _ in containers]
    for resource in RESOURCES:
        weights = [_request(c, resource) for c in containers]
        if not sum(weights):
            weights = [1] + [0] * (len(containers) - 1)
        parts = [total[resource] * w // sum(weights) for w in weights]
        parts[0] += total[resource] - sum(parts)
        for share, part in zip(shares, parts, strict=True):
            share[resource] = part
    return [(str(c["name"]), share) for c, share in zip(containers, shares, strict=True)]


def _quantities(usage: Usage) -> dict[str, str]:
    return {resource: quantity.format_quantity(fractions.Fraction(usage[resource], _GRAIN[resource]),
                                               resource=resource) for resource in RESOURCES}


def stamp(now: datetime.datetime) -> str:
    """RFC 3339, seconds, UTC."""
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def running(pods: Sequence[Json]) -> list[Json]:
    """The pods whose phase is Running."""
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]


def pod_metrics(pod: Json, *, now: datetime.datetime) -> Json:
    """The PodMetrics of one pod."""
    meta = pod["metadata"]
    return {"kind": "PodMetrics", "apiVersion": GROUP_VERSION,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "creationTimestamp": stamp(now), "labels": dict(meta.get("labels") or {})},
            "timestamp": stamp(now), "window": WINDOW,
            "containers": [{"name": name, "usage": _quantities(usage)}
                           for name, usage in container_usage(pod)]}


def node_metrics(name: str, labels: Mapping[str, str], pods: Sequence[Json], *,
                 now: datetime.datetime) -> Json:
    """The NodeMetrics of node `name`: the summed usage of its Running pods among `pods`."""
    usage = dict.fromkeys(RESOURCES, 0)
    for pod in running(pods):
        if pod["spec"].get("nodeName") == name:
            for resource, amount in parse_usage(pod["metadata"].get("annotations")).items():
                usage[resource] += amount
    return {"kind": "NodeMetrics", "apiVersion": GROUP_VERSION,
            "metadata": {"name": name, "creationTimestamp": stamp(now), "labels": dict(labels)},
            "timestamp": stamp(now), "window": WINDOW, "usage": _quantities(usage)}


def status(code: int, reason: str, message: str) -> Json:
    """A `Status` document, as the apiserver and metrics-server answer failures."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _discovery(path: str) -> Json | None:
    group = {"name": GROUP, "versions": [{"groupVersion": GROUP_VERSION, "version": VERSION}],
             "preferredVersion": {"groupVersion": GROUP_VERSION, "version": VERSION}}
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}
    if path == f"/apis/{GROUP}":
        return {"kind": "APIGroup", "apiVersion": "v1", **group}
    if path == f"/apis/{GROUP_VERSION}":
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION, "resources": [
            {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics",
             "verbs": ["get", "list"]},
            {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics",
             "verbs": ["get", "list"]}]}
    return None


def respond(target: str, *, pods: Sequence[Json], nodes: Mapping[str, Mapping[str, str]],
            now: datetime.datetime) -> tuple[int, Json]:
    """The status and document for a GET of `target` (path and query): `pods` are the pods bound to
    this simulator's nodes, `nodes` its node names with their labels."""
    parsed = urllib.parse.urlsplit(target)
    path = parsed.path.rstrip("/") or "/"
    if (document := _discovery(path)) is not None:
        return 200, document
    prefix = f"/apis/{GROUP_VERSION}/"
    parts = path[len(prefix):].split("/") if path.startswith(prefix) else []
    try:
        requirements = label_selector.parse(
            urllib.parse.parse_qs(parsed.query).get("labelSelector", [""])[0])
    except label_selector.SelectorError as error:
        return 400, status(400, "BadRequest", str(error))
    shown = running(pods)
    if parts[:1] == ["pods"] and len(parts) == 1:
        return 200, _pod_list(shown, requirements, now=now)
    if parts[:1] == ["namespaces"] and len(parts) in (3, 4) and parts[2] == "pods":
        in_namespace = [p for p in shown if p["metadata"]["namespace"] == parts[1]]
        if len(parts) == 3:
            return 200, _pod_list(in_namespace, requirements, now=now)
        for pod in in_namespace:
            if pod["metadata"]["name"] == parts[3]:
                return 200, pod_metrics(pod, now=now)
        return 404, status(404, "NotFound", f'podmetrics.{GROUP} "{parts[3]}" not found')
    if parts[:1] == ["nodes"] and len(parts) in (1, 2):
        if len(parts) == 1:
            return 200, {"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": [
                node_metrics(name, labels, shown, now=now) for name, labels in sorted(nodes.items())
                if label_selector.matches(requirements, labels)]}
        if parts[1] in nodes:
            return 200, node_metrics(parts[1], nodes[parts[1]], shown, now=now)
        return 404, status(404, "NotFound", f'nodemetrics.{GROUP} "{parts[1]}" not found')
    return 404, status(404, "NotFound", f"the server could not find the requested resource ({path})")


def _pod_list(pods: Sequence[Json], requirements: Sequence[label_selector.Requirement], *,
              now: datetime.datetime) -> Json:
    chosen = sorted((p for p in pods if label_selector.matches(requirements, p["metadata"].get("labels"))),
                    key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
    return {"kind": "PodMetricsList", "apiVersion": GROUP_VERSION, "metadata": {},
            "items": [pod_metrics(p, now=now) for p in chosen]}
