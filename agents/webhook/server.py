"""The agent's webhook over HTTPS: POST /mutate for the apiserver, GET /healthz and /readyz for probes.

Why this is small: the HTTPS server itself (TLS per connection, certificates reloaded when their
files change, 400/413 for bad requests, a server that keeps serving whatever it is sent) is
shared with the coordinator's validating webhook and lives in `federation.kube.webhook_https`.
What is the agent's own: the path, counting every non-200 answer in its metrics, /readyz
saying ready only once its caches are synced (and, `agents.main`, while no controller loop is
stalled), and (`--webhook-client-ca`) admitting reviews only from the member apiserver's client
certificate (`federation.kube.webhook_clients`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from agents.webhook import handler as handler_mod
from agents.webhook import review
from federation.kube import webhook_clients, webhook_https, webhook_roles

MUTATE_PATH = "/mutate"


class WebhookServer(webhook_https.WebhookServer):
    """The agent's admission webhook over HTTPS, served from a background thread."""

    def __init__(self, admission: handler_mod.AdmissionHandler, *, host: str = "0.0.0.0", port: int = 9443,
                 cert_file: str | os.PathLike[str], key_file: str | os.PathLike[str],
                 max_body: int = review.MAX_BODY, ready: Callable[[], bool] = lambda: True,
                 client_auth: webhook_clients.ClientAuth | None = None, reuse_port: bool = False) -> None:
        role = webhook_roles.Role(review_path=MUTATE_PATH, owner="agent",
                                  on_http_error=admission.metrics.http_error,
                                  not_ready=("not ready: the caches are not synced yet, "
                                             "or a controller loop is stalled\n"))
        super().__init__(admission, role=role, host=host, port=port, cert_file=cert_file, key_file=key_file,
                         max_body=max_body, ready=ready, client_auth=client_auth, reuse_port=reuse_port)
        self.admission = admission
