"""The hub answers PlacementService's access questions: a SubjectAccessReview per question, cached.

Why a SubjectAccessReview: the hub's RBAC already says who may read which namespace's spreads;
asking the hub (`authorization.k8s.io/v1`, as `kubectl auth can-i --as` does) means a Role and a
RoleBinding there is all it takes to let a user read placements, and taking it away works too.

* Cached briefly: each answer, allowed or denied, for `ttl` seconds (10 s by default), in a
  bounded cache (`capacity` entries, least recently used out first), so a burst of calls or a
  watch that re-filters every change costs the hub one review per (user, question) per 10 s; a
  revoked binding is honoured within that long.
* Every review has a deadline (`timeout` each); a connection failure, a timeout, 429 or 5xx is
  retried (tenacity: `attempts` in all, jittered, within `budget` seconds); anything else (the
  coordinator itself may not create reviews: 403) is not.
* Failure never allows: the caller gets `AccessUnavailable` (the servicer answers UNAVAILABLE), and
  nothing is cached, so the next call asks again.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

import tenacity
from kubernetes import client

from federation.coordinator.wire import access
from federation.kube import errors

LOG = logging.getLogger(__name__)

TTL_SECONDS = 10.0
CAPACITY = 4096
TIMEOUT_SECONDS = 2.0
ATTEMPTS = 3
BUDGET_SECONDS = 6.0
"""Retries stop after this long: under the SDK's default 10 s deadline, so a caller sees UNAVAILABLE."""


def _transient(error: BaseException) -> bool:
    if isinstance(error, errors.Unreachable | errors.Timeout):
        return True
    return isinstance(error, errors.KubeError) and error.status is not None and \
        (error.status == 429 or error.status >= 500)


def review_body(user: access.User, question: access.Access) -> client.V1SubjectAccessReview:
    """The SubjectAccessReview asking whether `user` may do `question`."""
    attributes = client.V1ResourceAttributes(
        group=question.group, resource=question.resource, verb=question.verb,
        namespace=question.namespace or None, name=question.name or None)
    return client.V1SubjectAccessReview(
        api_version="authorization.k8s.io/v1", kind="SubjectAccessReview",
        spec=client.V1SubjectAccessReviewSpec(user=user.name, groups=list(user.groups),
                                              extra={key: list(values) for key, values in user.extra} or None,
                                              resource_attributes=attributes))


class SubjectAccessReviewer:
    """An `access.Authorizer` backed by the hub's SubjectAccessReviews; thread-safe."""

    def __init__(
        self, api: client.ApiClient, *, ttl: float = TTL_SECONDS, capacity: int = CAPACITY,
        timeout: float = TIMEOUT_SECONDS, attempts: int = ATTEMPTS, budget: float = BUDGET_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = client.AuthorizationV1Api(api)
        self.ttl, self.capacity, self.timeout = ttl, capacity, timeout
        self._attempts, self._budget = attempts, budget
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: collections.OrderedDict[tuple[access.User, access.Access], tuple[bool, float]] = \
            collections.OrderedDict()
        self.reviews = 0
        """Reviews sent to the hub (retries included), for tests and curiosity."""

    def allowed(self, user: access.User, question: access.Access) -> bool:
        """Whether the hub allows it (cached `ttl` s); AccessUnavailable when the hub cannot say."""
        key = (user, question)
        now = self._clock()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached[1] > now:
                self._cache.move_to_end(key)
                return cached[0]
        answer = self._ask(user, question)
        with self._lock:
            self._cache[key] = (answer, self._clock() + self.ttl)
            self._cache.move_to_end(key)
            while len(self._cache) > self.capacity:
                self._cache.popitem(last=False)
        return answer

    def _ask(self, user: access.User, question: access.Access) -> bool:
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_transient),
            stop=tenacity.stop_after_attempt(self._attempts) | tenacity.stop_after_delay(self._budget),
            wait=tenacity.wait_random_exponential(multiplier=0.1, max=1.0), reraise=True)
        try:
            return retrying(self._review, user, question)
        except errors.KubeError as error:
            hint = " (the coordinator needs `create subjectaccessreviews`: deploy/coordinator/rbac.yaml)" \
                if error.status == 403 else ""
            LOG.warning("access review failed", extra={"user": user.name, "access": question.describe(),
                                                       "error": str(error)})
            raise access.AccessUnavailable(f"the hub did not answer a SubjectAccessReview: {error}{hint}") \
                from error

    def _review(self, user: access.User, question: access.Access) -> bool:
        with self._lock:
            self.reviews += 1
        with errors.translated("create SubjectAccessReview"):
            answer = self._api.create_subject_access_review(review_body(user, question),
                                                            _request_timeout=self.timeout)
        status = answer.status
        if status is not None and status.evaluation_error and not status.allowed:
            LOG.info("access review evaluation error", extra={"user": user.name,
                                                              "error": status.evaluation_error[:200]})
        return bool(status is not None and status.allowed)
