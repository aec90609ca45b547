"""Kubernetes client errors as fedspread's own exceptions, translated in one place.

Why: the Kubernetes client reports a missing object, a conflict and an expired watch all as
`ApiException` with a number in `.status`, and an apiserver that does not answer as one of several
urllib3 exceptions. Code that reacts to those cases reads better, and is tested more easily,
against named exceptions (`NotFound`, `Conflict`, `Gone`, `Timeout`, `Unreachable`). Every
translation keeps the client's exception as `__cause__` (`raise Ours(...) from error`), so a
developer still sees the status line and the response body.

Retry policies that classify `ApiException` themselves (`agents.retries`, the coordinator's status
writer) keep doing so; this module is for the places that only ask "was it a 404?".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import urllib3
from kubernetes.client import exceptions

MAX_REASON = 200


class KubeError(Exception):
    """A Kubernetes API call failed; `status` is the HTTP status when the apiserver answered."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NotFound(KubeError):
    """404: the object (or its kind) does not exist."""


class Conflict(KubeError):
    """409: the object exists already, or it changed since it was read (stale resourceVersion)."""


class Gone(KubeError):
    """410: a watch's or list's resourceVersion is too old; list again."""


class Timeout(KubeError):
    """The apiserver did not answer within the request's deadline."""


class Unreachable(KubeError):
    """No connection to the apiserver (refused, DNS, TLS handshake, reset)."""


_BY_STATUS: dict[int, type[KubeError]] = {404: NotFound, 409: Conflict, 410: Gone}

TRANSLATED = (exceptions.ApiException, urllib3.exceptions.HTTPError, OSError)
"""The exception types `translate` understands (for `except TRANSLATED as error:`)."""


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:MAX_REASON]


def _network_reason(error: BaseException) -> str:
    """The innermost useful words of a urllib3 error ('Connection refused', 'Read timed out')."""
    reason = getattr(error, "reason", None) or error
    return _first_line(str(reason).rpartition(": ")[2] or str(reason)) or type(error).__name__


def _is_timeout(error: BaseException) -> bool:
    """A deadline passed (urllib3 files a refused connection, NewConnectionError, under timeouts too)."""
    for candidate in (error, getattr(error, "reason", None)):
        if isinstance(candidate, urllib3.exceptions.NewConnectionError):
            return False
        if isinstance(candidate, (urllib3.exceptions.TimeoutError, TimeoutError)):
            return True
    return False


def translate(error: BaseException, *, what: str = "") -> KubeError:
    """Our exception for a Kubernetes client error; `what` names the call ("read deployment a/b").

    The caller raises it `from error`; `translated()` does both.
    """
    prefix = f"{what}: " if what else ""
    if isinstance(error, exceptions.ApiException):
        status = error.status if isinstance(error.status, int) else None
        reason = _first_line(str(error.reason or "")) or "no reason given"
        if status is None:  # the client raises ApiException without a status for its own checks
            return KubeError(f"{prefix}{reason}", reason=reason)
        kind = _BY_STATUS.get(status, Timeout if status == 504 else KubeError)
        return kind(f"{prefix}{status} {reason}", status=status, reason=reason)
    reason = _network_reason(error)
    if _is_timeout(error):
        return Timeout(f"{prefix}timed out ({reason})", reason=reason)
    return Unreachable(f"{prefix}{reason}", reason=reason)


@contextlib.contextmanager
def translated(what: str = "") -> Iterator[None]:
    """Run the block; a Kubernetes client error leaves it as our exception, the original as __cause__."""
    try:
        yield
    except TRANSLATED as error:
        raise translate(error, what=what) from error
