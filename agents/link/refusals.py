"""How an agent stream ended, whether retrying can fix it, and what the link says about it.

Why its own module: the link retries forever (fail static), but not every end is alike. A
coordinator that is away comes back; a coordinator that refuses this agent — its certificate
names another cluster (PERMISSION_DENIED), it has none (UNAUTHENTICATED), a bad Hello — refuses
it again on every attempt until a person changes a certificate or a flag. Those are *refusals*:
the link logs them as ERROR with the coordinator's reason and retries slowly, so fixing the other
side heals the link without a restart.

TLS trouble mostly surfaces as UNAVAILABLE, because the handshake fails before any status
exists. Where the text is unambiguous — the coordinator's certificate is not signed by our CA,
does not name the host dialled, or the coordinator speaks plaintext — that is a refusal too; a
closed socket stays an outage (it is also what a restarting coordinator looks like), with advice
(`federation.certs.transport.hint`) attached to the outage warning.

What is said (`Outage`): one WARNING when an outage starts, never one per attempt; one ERROR per
distinct refusal; at reconnect, how long the outage lasted.
"""

from __future__ import annotations

import logging
import time

import grpc

from federation.certs import transport

FAIL_STATIC_MESSAGE = "coordinator unreachable; enforcing last quotas (fail static)"

# Refusals a retry cannot fix by itself: somebody must change a certificate or the coordinator.
MISCONFIGURED = frozenset({
    grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.FAILED_PRECONDITION,
})
# Handshake failures (in UNAVAILABLE details) that only a configuration change can fix.
TLS_REFUSALS = ("certificate_verify_failed", "certificate signature failure", "hostname verification",
                "wrong_version_number")


class StreamEnded(Exception):
    """One Connect stream is over; `code` is None when the coordinator closed it cleanly."""

    def __init__(self, code: grpc.StatusCode | None, details: str, *, welcomed: bool) -> None:
        super().__init__(f"{code.name if code else 'END'}: {details}")
        self.code = code
        self.details = details
        self.welcomed = welcomed

    @property
    def refused(self) -> bool:
        """True when only a configuration change (a certificate, a flag) can fix this end."""
        if self.code in MISCONFIGURED:
            return True
        text = self.details.lower()
        return self.code == grpc.StatusCode.UNAVAILABLE and any(marker in text for marker in TLS_REFUSALS)

    def reason(self) -> str:
        """`CODE: details`, for logs."""
        return f"{self.code.name}: {self.details}" if self.code else self.details


class Outage:
    """The link's outage log: one WARNING per outage, one ERROR per new refusal, its length at the end."""

    def __init__(self, log: logging.Logger, *, cluster: str, target: str, secure: bool) -> None:
        self._log = log
        self._where = {"cluster": cluster, "coordinator": target}
        self._secure = secure
        self._logged = False
        self.last_refusal = ""
        self._since: float | None = None

    def lost(self, error: StreamEnded) -> None:
        """A stream ended (not by our own stop): log what is new about it."""
        if self._since is None:
            self._since = time.monotonic()
        advice = transport.hint(error.details, secure=self._secure) or None
        if error.refused:
            refusal = error.reason()
            if refusal != self.last_refusal:
                self._log.error("coordinator refused the agent; fix the configuration, retrying slowly",
                                extra={**self._where, "reason": refusal, "hint": advice})
                self.last_refusal = refusal
        if not self._logged:
            self._log.warning(FAIL_STATIC_MESSAGE,
                              extra={**self._where, "reason": str(error), "hint": advice})
            self._logged = True

    def over(self) -> float | None:
        """Welcomed again: the outage's length in seconds (None: there was none); the next loss
        starts a new outage."""
        seconds = None if self._since is None else round(time.monotonic() - self._since, 1)
        self._logged, self.last_refusal, self._since = False, "", None
        return seconds
