"""Who may post AdmissionReviews to a webhook: only the apiserver, by its client certificate.

Why: a webhook answers whoever reaches its port. The agent's pod webhook counts every admitted
review as a pod being created, so anyone on the network could post forged reviews and skew its
quota table (pods refused or sent to the wrong subset); the coordinator's validating webhook only
answers, but "only those who belong" holds for it too. Both take the same flags
(`--webhook-client-ca`, `--webhook-allowed-cn`) and this same check. The apiserver can present a
client certificate to webhooks (its `--admission-control-config-file`: an AdmissionConfiguration
whose webhook plugins name a kubeconfig with a client certificate, "Authenticate apiservers" in
the Kubernetes documentation); the webhook then admits reviews only from a certificate its client
CA signed and, if given, only from the allowed common names.

Where the check happens, and why there: TLS asks for a client certificate but does not require
one (`CERT_OPTIONAL`: a certificate that is presented must verify against the client CA, or the
handshake fails), because the kubelet's HTTPS probes of /healthz and /readyz present none. The
review path then refuses, at the HTTP level: no verified certificate → 401, a certificate whose CN
is not allowed → 403, each with a one-line JSON reason, and the server keeps serving. The client
CA file is re-read with the serving certificate when any of the files changes (`webhook_tls`).

Opt-in, since the apiserver's half lives outside the cluster: without a client CA anyone may post,
and the server logs `UNAUTHENTICATED` once as it starts, so an open webhook is never silent.
"""

from __future__ import annotations

import dataclasses
import pathlib
import ssl
from typing import Any

CN_OID_NAME = "commonName"
UNAUTHENTICATED = ("the webhook does not authenticate its caller (no --webhook-client-ca): anyone who "
                   "reaches its port may post reviews")
"""The warning a webhook served without `ClientAuth` logs as it starts (agent and coordinator alike)."""


@dataclasses.dataclass(frozen=True)
class ClientAuth:
    """Which callers may post reviews."""

    ca_file: pathlib.Path
    """CA (PEM) that must have signed the caller's client certificate."""
    allowed_names: frozenset[str] = frozenset()
    """Common names allowed; empty: any certificate the CA signed."""

    def configure(self, context: ssl.SSLContext) -> None:
        """Ask for (but do not require) a client certificate verified against `ca_file`."""
        context.load_verify_locations(cafile=str(self.ca_file))
        context.verify_mode = ssl.CERT_OPTIONAL


def common_name(certificate: dict[str, Any]) -> str:
    """The subject CN of a certificate as `SSLSocket.getpeercert()` returns it ("" when none)."""
    for rdn in certificate.get("subject", ()):
        for key, value in rdn:
            if key == CN_OID_NAME:
                return str(value)
    return ""


def refusal(connection: Any, auth: ClientAuth | None) -> tuple[int, str] | None:
    """None when the connection's peer may post reviews; else (401 or 403, why)."""
    if auth is None:
        return None
    try:
        certificate = connection.getpeercert()
    except (ValueError, AttributeError):  # no TLS, or no handshake: nobody
        certificate = None
    if not certificate:
        return 401, ("a client certificate signed by the webhook's client CA is required: only the "
                     "apiserver may post reviews (its --admission-control-config-file)")
    name = common_name(certificate)
    if auth.allowed_names and name not in auth.allowed_names:
        return 403, f"client certificate CN {name[:64]!r} may not post reviews to this webhook"
    return None
