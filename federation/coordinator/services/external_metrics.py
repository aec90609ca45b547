"""The `external.metrics.k8s.io/v1beta1` API, as pure functions: a path in, a status and a JSON body out.

Why pure and apart from the server: what the hub's HPA controller and the aggregator read is the
contract (discovery, `ExternalMetricValueList`, `Status` errors); keeping it free of sockets and
certificates makes every answer table-testable, and the server (`metrics_api`) only moves bytes
and decides who may ask. The figures come from one question, `UsageSource.usage` (the
coordinator's facade answers it from memory), so no request ever reaches a member cluster.

Answers, as an aggregated API server gives them:

* `GET /apis/external.metrics.k8s.io/v1beta1` — an `APIResourceList`, one namespaced resource
  per served metric (the aggregator's availability check reads it);
* `GET .../namespaces/{ns}/{metric}?labelSelector=...` — an `ExternalMetricValueList`, one item
  per spread the selector names that exists and has a value for the metric (none: an empty list);
* an unknown metric → 404 naming the served ones; a selector that is malformed or names no spread
  → 400 with the reason; any other path → 404. Errors are `Status` objects.

Selectors: `fedspread.io/spread=web`, `==web`, `in (a,b)`, joined by commas (each requirement
narrows the set); any other label or operator is a 400, since a spread has no other labels here.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import urllib.parse
from collections.abc import Sequence
from typing import Any, Protocol

from federation.core import usage as usage_rules

GROUP = "external.metrics.k8s.io"
VERSION = "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
ROOT = f"/apis/{GROUP_VERSION}"
LIST_KIND = "ExternalMetricValueList"
MAX_SELECTOR = 4096
"""A longer labelSelector is refused (400) before it is parsed."""
MAX_SPREADS = 256
"""At most this many spreads in one `in (...)`."""

_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_EQUALS = re.compile(r"\s*([^\s=!,()]+)\s*(==|=)\s*([^\s,()]*)\s*")
_IN = re.compile(r"\s*([^\s=!,()]+)\s+in\s*\(([^()]*)\)\s*")

Json = dict[str, Any]


class UsageSource(Protocol):
    """What answers for a spread's figures (`facade.Coordinator.usage`)."""

    def usage(self, namespace: str, name: str) -> usage_rules.FederationUsage | None:
        """The spread's metrics; None when there is no such spread."""


@dataclasses.dataclass(frozen=True)
class Answer:
    """An HTTP status and its JSON body."""

    code: int
    body: Json


@dataclasses.dataclass(frozen=True)
class Discovery:
    """The group version's resource list."""


@dataclasses.dataclass(frozen=True)
class MetricQuery:
    """A list of one metric in one namespace; `selector` still unparsed."""

    namespace: str
    metric: str
    selector: str


class SelectorError(ValueError):
    """A labelSelector this API cannot answer: the message says why."""


def status(code: int, message: str) -> Answer:
    """A `Status` failure, as the apiserver writes one."""
    reason = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
              405: "MethodNotAllowed", 503: "ServiceUnavailable"}.get(code, "InternalError")
    return Answer(code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                         "message": message, "reason": reason, "code": code})


def not_found(path: str) -> Answer:
    """The 404 of a path this server does not serve."""
    return status(404, f"the server could not find the requested resource ({path[:200]!r})")


def route(path: str, query: str) -> Discovery | MetricQuery | Answer:
    """What a GET of `path?query` asks for, or the error answer."""
    if path.rstrip("/") == ROOT:
        return Discovery()
    if not path.startswith(ROOT + "/"):
        return not_found(path)
    parts = path[len(ROOT) + 1:].split("/")
    if len(parts) != 3 or parts[0] != "namespaces" or not _NAMESPACE.fullmatch(parts[1]):
        return not_found(path)
    metric = parts[2]
    if metric not in usage_rules.SERVED_METRICS:
        return status(404, f"no metric {metric[:100]!r}: this server serves "
                           f"{', '.join(usage_rules.SERVED_METRICS)}")
    try:
        values = urllib.parse.parse_qs(query, keep_blank_values=True, strict_parsing=False,
                                       max_num_fields=32)
    except ValueError as error:
        return status(400, f"malformed query: {error}")
    selectors = values.get("labelSelector", [])
    if len(selectors) > 1:
        return status(400, "give one labelSelector")
    return MetricQuery(namespace=parts[1], metric=metric, selector=selectors[0] if selectors else "")


def _requirements(text: str) -> list[str]:
    """The selector's requirements, split on the commas outside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError("unbalanced parentheses")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise SelectorError("unbalanced parentheses")
    parts.append("".join(current))
    return parts


def spreads_of(selector: str) -> tuple[str, ...]:
    """The spread names a labelSelector picks, sorted; SelectorError for one we cannot answer."""
    label = usage_rules.SPREAD_SELECTOR_LABEL
    if len(selector) > MAX_SELECTOR:
        raise SelectorError(f"labelSelector longer than {MAX_SELECTOR} characters")
    if not selector.strip():
        raise SelectorError(f"a labelSelector naming the spread is required: {label}=<name>")
    chosen: set[str] | None = None
    for requirement in _requirements(selector):
        equals, within = _EQUALS.fullmatch(requirement), _IN.fullmatch(requirement)
        if equals is not None:
            key, names = equals.group(1), [equals.group(3)]
        elif within is not None:
            key, names = within.group(1), [name.strip() for name in within.group(2).split(",")]
        else:
            raise SelectorError(f"cannot parse requirement {requirement.strip()[:100]!r}: this server "
                                f"answers {label}=<name>, =={{name}} or in (<a>,<b>)")
        if key != label:
            raise SelectorError(f"only {label} selects here, not {key[:100]!r}")
        if len(names) > MAX_SPREADS:
            raise SelectorError(f"at most {MAX_SPREADS} spreads in one selector")
        for name in names:
            if not _VALUE.fullmatch(name):
                raise SelectorError(f"{name[:100]!r} is not a valid spread name")
        chosen = set(names) if chosen is None else chosen & set(names)
    if not chosen:
        raise SelectorError(f"the labelSelector names no spread: {label}=<name>")
    return tuple(sorted(chosen))


def discovery() -> Answer:
    """The `APIResourceList`: one namespaced resource per served metric."""
    resources = [{"name": metric, "singularName": "", "namespaced": True, "kind": LIST_KIND,
                  "verbs": ["get", "list"]} for metric in usage_rules.SERVED_METRICS]
    return Answer(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
                        "resources": resources})


def rfc3339(timestamp: float) -> str:
    """A Unix time as the API writes times (UTC, whole seconds)."""
    moment = datetime.datetime.fromtimestamp(int(timestamp), tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def item(metric: usage_rules.MetricValue, *, spread: str) -> Json:
    """One `ExternalMetricValue`: the spread's figure, its time and window (whole seconds)."""
    return {"metricName": metric.name,
            "metricLabels": {usage_rules.SPREAD_SELECTOR_LABEL: spread},
            "timestamp": rfc3339(metric.timestamp),
            "window": round(metric.window_seconds),
            "value": metric.quantity}


def value_list(items: Sequence[Json]) -> Answer:
    """The `ExternalMetricValueList` of `items`."""
    return Answer(200, {"kind": LIST_KIND, "apiVersion": GROUP_VERSION, "metadata": {},
                        "items": list(items)})


def answer(query: MetricQuery, source: UsageSource) -> Answer:
    """The metric's list for the spreads the selector names (missing spreads and metrics without
    a value are left out), or 400 for a selector we cannot answer."""
    try:
        spreads = spreads_of(query.selector)
    except SelectorError as error:
        return status(400, f"labelSelector {query.selector[:200]!r}: {error}")
    found = []
    for spread in spreads:
        figures = source.usage(query.namespace, spread)
        metric = None if figures is None else figures.values.get(query.metric)
        if metric is not None:
            found.append(item(metric, spread=spread))
    return value_list(found)
