"""How an agent stream ended, and whether retrying can fix it (pure: status codes and text).

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
"""

from __future__ import annotations

import grpc

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
