"""What a webhook served by `webhook_https` tells the server: its path, its name, its answers and hooks.

Why a module of its own: fedspread's HTTPS server is shared by three webhooks — the agent's pod
webhook (POST /mutate), the coordinator's validating webhook (POST /validate) and its
`external.metrics.k8s.io` server (GETs) — and this is the contract between them and the server:
a `Responder` that turns a review's bytes into the answer's, a `Role` that names the review
path, the owner and the hooks, and the `GetRequest` a GET handler is given (with the caller's
verified client certificate and headers). The server itself only moves bytes, over TLS, safely.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Protocol


class Responder(Protocol):
    """What answers the reviews: one request body in, the response body out."""

    def respond(self, body: bytes, *, max_body: int) -> bytes:
        """The encoded response AdmissionReview; `review.ReviewError` for a malformed request."""


@dataclasses.dataclass(frozen=True)
class GetRequest:
    """A GET other than the probes, for `Role.get` (the coordinator's metrics API serves these)."""

    path: str
    query: str
    headers: Mapping[str, tuple[str, ...]]
    """Every header's values, by lower-case name."""
    peer_certificate: Mapping[str, Any] | None
    """The caller's client certificate, verified against the client CA (`getpeercert()`); None: none."""


GetHandler = Callable[[GetRequest], tuple[int, bytes]]
"""Answers a GET: the status and a JSON body."""


@dataclasses.dataclass(frozen=True)
class Role:
    """What differs between fedspread's webhooks: the review path, names, hooks."""

    review_path: str
    """Where the apiserver POSTs reviews (`/mutate`, `/validate`)."""
    owner: str
    """Who serves (`agent`, `coordinator`): the Server header and the 500 message name it."""
    on_http_error: Callable[[int], None] = lambda _code: None
    """Called with the status of every non-200 answer (the agent counts them)."""
    not_ready: str = "not ready\n"
    """/readyz's body while `ready()` is False."""
    get: GetHandler | None = None
    """Answers GETs of other paths (None: 404); an exception in it is logged and answered 500."""
    on_connection_error: Callable[[], None] = lambda: None
    """Called when a connection fails (a TLS handshake refused a client certificate, a reset)."""
