"""The leader's label on its own pod, so that the coordinator Service routes to the leader only.

Why a label and not readiness: with two coordinators, a readiness that meant "leads" would leave
the standby never ready, and then neither a rolling update (it waits for new pods to be ready)
nor a PodDisruptionBudget (it would never allow evicting the one ready pod) could work. So both
pods are ready while they run, and the Service selects `names.LEADER_LABEL` as well: the leader
sets it once it has listed the hub, and removes it before it stops; a starting coordinator
removes it first, in case the container restarted on a pod whose previous process led.

Best effort: a coordinator that is not in a pod (POD_NAME unset, local use), or whose pod cannot
be patched, logs it and goes on; the Lease, not the label, decides who acts. Every call has a
deadline and is retried (tenacity, jittered, bounded) on errors that merit it.
"""

from __future__ import annotations

import logging
import os

import tenacity
from kubernetes import client

from federation.api import names

log = logging.getLogger(__name__)

CALL_TIMEOUT = 5.0
ATTEMPTS = 3


def _transient(error: BaseException) -> bool:
    if isinstance(error, client.ApiException):
        return error.status in (0, 429, 500, 502, 503, 504)
    return isinstance(error, OSError)


class LeaderLabel:
    """Set or remove `names.LEADER_LABEL` on pod `pod` (None: not in a pod, nothing to do)."""

    def __init__(self, api: client.ApiClient, *, namespace: str, pod: str | None) -> None:
        self._core = client.CoreV1Api(api)
        self.namespace, self.pod = namespace, pod

    @classmethod
    def from_environment(cls, api: client.ApiClient, *, namespace: str) -> LeaderLabel:
        """The pod named by POD_NAME (the downward API, deploy/coordinator), in `namespace`."""
        return cls(api, namespace=namespace, pod=os.environ.get("POD_NAME") or None)

    def mark(self, leading: bool, *, attempts: int = ATTEMPTS) -> bool:
        """Label the pod as the leader, or remove the label; False (logged) when it failed."""
        if self.pod is None:
            return True
        patch = {"metadata": {"labels": {names.LEADER_LABEL: "true" if leading else None}}}
        try:
            for attempt in tenacity.Retrying(
                    retry=tenacity.retry_if_exception(_transient), stop=tenacity.stop_after_attempt(attempts),
                    wait=tenacity.wait_random_exponential(multiplier=0.2, max=2.0), reraise=True):
                with attempt:
                    self._core.patch_namespaced_pod(self.pod, self.namespace, patch,
                                                    _request_timeout=CALL_TIMEOUT)
        except Exception as error:  # the Lease decides; the label only routes
            status = getattr(error, "status", None)
            if not (status == 404 and not leading):
                log.warning("cannot label the coordinator pod", extra={
                    "pod": self.pod, "namespace": self.namespace, "leading": leading,
                    "error": getattr(error, "reason", None) or str(error)[:200]})
            return False
        log.info("pod labelled" if leading else "pod label removed",
                 extra={"pod": self.pod, "label": names.LEADER_LABEL})
        return True
