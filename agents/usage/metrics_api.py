"""Reading a member's resource metrics API (`metrics.k8s.io/v1beta1` PodMetrics), as metrics-server
serves it, with a deadline on every call and bounded, jittered retries.

Why its own module: how a failure is read decides what the hub's HPA sees. A member whose
apiserver does not serve the API (404), whose APIService has no live backend (503), that refuses
the agent (401/403) or that does not answer is a member **without a metrics API** for this round:
`MetricsUnavailable` says which (`federation.core.pod_usage`'s reasons), and the reporter sends
its pods unmeasured rather than as idle. Throttling and server errors are retried first
(`agents.retries`: 3 attempts, jittered backoff up to 2 s); a call that timed out is not
repeated in place — the next interval tries again.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from agents import retries
from federation.core import pod_usage
from federation.kube import deadlines
from federation.kube import errors as kube_errors

GROUP, VERSION, PLURAL = "metrics.k8s.io", "v1beta1", "pods"
_RETRY = retries.kube_retry(conflicts=False, attempts=3, max_wait=2.0)


class MetricsUnavailable(Exception):
    """The member's metrics API could not be read: `reason` is a condition reason
    (`pod_usage.UNAVAILABLE_REASONS`), the message says what happened."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _unavailable(error: BaseException) -> MetricsUnavailable:
    """The reason a failed PodMetrics list gives the member."""
    found = kube_errors.translate(error, what="list PodMetrics")
    if found.status == 404:
        return MetricsUnavailable(pod_usage.METRICS_API_NOT_FOUND,
                                  f"{GROUP}/{VERSION} is not served here (404: no metrics-server?)")
    if found.status in (401, 403):
        return MetricsUnavailable(pod_usage.METRICS_API_FORBIDDEN,
                                  f"the agent may not list {PLURAL}.{GROUP} ({found.status} {found.reason})")
    if found.status is not None and found.status != 504:
        return MetricsUnavailable(pod_usage.METRICS_API_UNAVAILABLE,
                                  f"{GROUP}/{VERSION} did not answer ({found.status} {found.reason})")
    return MetricsUnavailable(pod_usage.METRICS_API_UNREACHABLE, str(found)[:300])


class PodMetricsReader:
    """Lists PodMetrics of one namespace by label selector (the JSON items)."""

    def __init__(self, api_client: Any) -> None:
        self._api = client.CustomObjectsApi(api_client)

    def list(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """The PodMetrics items; MetricsUnavailable when the API cannot be read."""
        try:
            response = self._list(namespace, label_selector)
        except kube_errors.TRANSLATED as error:
            raise _unavailable(error) from error
        try:
            items = json.loads(response.data).get("items") or []
        except (ValueError, AttributeError) as error:
            raise MetricsUnavailable(pod_usage.METRICS_API_UNAVAILABLE,
                                     f"unreadable PodMetrics list: {error}"[:300]) from error
        return [item for item in items if isinstance(item, dict)]

    @_RETRY
    def _list(self, namespace: str, label_selector: str) -> Any:
        return self._api.list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, label_selector=label_selector, _preload_content=False,
            _request_timeout=deadlines.CALL)

