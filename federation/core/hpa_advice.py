"""What the hub's webhook tells the author of a HorizontalPodAutoscaler that cannot work as written.

Why warnings and never refusals: an HPA is the user's object, not ours, and the stock controller
would store and run it anyway; the mistakes below are silent at run time (the HPA just never
scales, or shows an error condition), so the moment `kubectl apply` prints a warning is the best
place to say so. Two mistakes are common with fedspread's external metrics:

* **A `Value` target on one of our metrics.** The stock controller's `Value` path divides by the
  number of Ready pods it finds for the target in the hub, and the hub runs no pods: only
  `AverageValue` works (`ceil(sum / averageValue)` replicas, over the whole federation).
* **A Job (or CronJob) as the scale target.** It has no scale subresource: the HPA cannot scale it.

Pure: the object in, the warnings out (the webhook in `coordinator.hub.admission` sends them).
Reads `autoscaling/v2` and `v2beta2` (`target.type`) and `v2beta1` (`targetValue`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.core import usage as usage_rules

NO_SCALE_SUBRESOURCE = frozenset({("batch", "Job"), ("batch", "CronJob")})
"""Kinds an HPA may name that have no scale subresource."""


def value_target_warning(metric: str) -> str:
    """The warning for a `Value` target on `metric`."""
    return (f"external metric {metric}: only AverageValue works on a hub without pods (the HPA's Value "
            f"target counts Ready pods in the hub, and there are none); use averageValue, e.g. "
            f"averageValue: \"50\" for 50% of requests per replica (docs/autoscaling.md)")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _value_targets(metrics: Any) -> list[str]:
    """Our metric names that have a Value target, in the order written."""
    found: list[str] = []
    for entry in metrics if isinstance(metrics, list) else []:
        entry = _mapping(entry)
        if entry.get("type") != "External":
            continue
        external = _mapping(entry.get("external"))
        name = _mapping(external.get("metric")).get("name", external.get("metricName"))
        if name not in usage_rules.SERVED_METRICS:
            continue
        target = _mapping(external.get("target"))
        if target.get("type") == "Value" or (not target and external.get("targetValue") is not None):
            found.append(str(name))
    return found


def warnings(hpa: Mapping[str, Any]) -> list[str]:
    """Every warning for a HorizontalPodAutoscaler object (any autoscaling version); [] when fine."""
    spec = _mapping(hpa.get("spec"))
    found = [value_target_warning(name) for name in _value_targets(spec.get("metrics"))]
    target = _mapping(spec.get("scaleTargetRef"))
    api_version = str(target.get("apiVersion") or "")
    group = api_version.partition("/")[0] if "/" in api_version else ""
    kind = target.get("kind")
    if (group, kind) in NO_SCALE_SUBRESOURCE:
        found.append(f"scaleTargetRef {kind} {target.get('name', '')}: a {kind} has no scale subresource, "
                     f"so no HorizontalPodAutoscaler can scale it; target a Deployment, ReplicaSet or "
                     f"StatefulSet")
    return found
