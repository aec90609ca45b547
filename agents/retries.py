"""The agent's one retry policy for Kubernetes API calls.

Why one place: every write the agent makes (deletion-cost patches, pod deletions, Deployment
updates) should retry the same way — bounded attempts with jittered exponential backoff — and only
on errors that merit it: throttling (429) and server errors (5xx) always, conflicts (409) where the
caller re-reads before writing again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import tenacity
from kubernetes.client import exceptions

Fn = TypeVar("Fn", bound=Callable[..., Any])


def _retriable(*, conflicts: bool) -> Callable[[BaseException], bool]:
    def check(error: BaseException) -> bool:
        status = getattr(error, "status", None)
        if not isinstance(error, exceptions.ApiException) or not isinstance(status, int):
            return False
        return status == 429 or status >= 500 or (conflicts and status == 409)
    return check


def kube_retry(*, conflicts: bool, attempts: int, max_wait: float) -> Callable[[Fn], Fn]:
    """A tenacity decorator: `attempts` tries, jittered backoff up to `max_wait` s, then re-raise."""
    decorator = tenacity.retry(
        retry=tenacity.retry_if_exception(_retriable(conflicts=conflicts)),
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_random_exponential(multiplier=0.2, max=max_wait),
        reraise=True,
    )
    return cast("Callable[[Fn], Fn]", decorator)  # tenacity's wrapper keeps the signature
