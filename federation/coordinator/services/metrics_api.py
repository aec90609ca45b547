"""The coordinator's `external.metrics.k8s.io` server: HTTPS, front-proxy authentication, RBAC.

Why in the coordinator: the hub's HorizontalPodAutoscaler scales a spread's hub workload from the
federation-wide usage the agents report, and only the coordinator holds it (`Coordinator.usage`,
answered from memory: a request never reaches a member). The hub apiserver's aggregation layer
forwards `/apis/external.metrics.k8s.io/v1beta1/...` here (deploy/coordinator's APIService), so
`kubectl get --raw` and the HPA controller both come through it.

Each GET, in order (the answers themselves: `external_metrics`):

1. **authentication** (`front_proxy`): only the aggregator's front-proxy client certificate, and
   the user it names in its headers; anything else is 401 (a certificate of another CA already
   fails the TLS handshake);
2. **routing**: discovery, or a metric list (unknown metric 404, bad selector 400, other paths 404);
3. **authorization**, for a metric list only (discovery needs authentication alone): a
   SubjectAccessReview on the hub for the user — verb `list` (a collection, as the apiserver's
   request info calls it), group `external.metrics.k8s.io`, resource the metric, the namespace —
   cached `SAR_TTL_SECONDS` (`hub.access_review`, passed in as an `access.Authorizer`); 403 when
   denied, 503 when the hub cannot say;
4. the answer from `UsageSource.usage`.

The HTTP server, its TLS (certificate and client CA reloaded when their files change), its limits
and its "never stop serving" are the webhooks' (`federation.kube.webhook_https`), reused.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import pathlib
import threading
from collections.abc import Callable

from federation.coordinator.services import external_metrics as api
from federation.coordinator.services import front_proxy
from federation.coordinator.wire import access
from federation.kube import admission_review, webhook_https, webhook_roles

LOG = logging.getLogger(__name__)

SAR_TTL_SECONDS = 5.0
"""How long a SubjectAccessReview's answer is reused (a revoked binding is honoured within this)."""


@dataclasses.dataclass(frozen=True)
class ExternalMetricsSettings:
    """Where and with what certificate the API is served (`--external-metrics-*` flags)."""

    cert_file: pathlib.Path
    key_file: pathlib.Path
    port: int
    """0: any free port (tests)."""
    host: str = "0.0.0.0"


class Handler:
    """Answers one GET (thread-safe): authenticate, route, authorize, answer."""

    def __init__(self, source: api.UsageSource, *, trust: front_proxy.FrontProxyTrust,
                 authorizer: access.Authorizer,
                 on_answer: Callable[[int], None] = lambda _code: None) -> None:
        self.source = source
        self.trust = trust
        self.authorizer = authorizer
        self.on_answer = on_answer
        """Called with each answer's status (the coordinator counts them by code)."""
        self.on_unauthenticated: Callable[[], None] = lambda: None
        """Called on a 401: the server then re-reads the front-proxy settings soon (never on the
        request's thread: a rotated CA or new allowed names look like this)."""
        self._lock = threading.Lock()
        self.answers: collections.Counter[int] = collections.Counter()

    def __call__(self, request: webhook_roles.GetRequest) -> tuple[int, bytes]:
        answer = self.answer(request)
        with self._lock:
            self.answers[answer.code] += 1
        self.on_answer(answer.code)
        return answer.code, json.dumps(answer.body, separators=(",", ":")).encode()

    def answer(self, request: webhook_roles.GetRequest) -> api.Answer:
        """The answer to `request` (never raises for anything a caller sends)."""
        user = front_proxy.identify(self.trust.config, certificate=request.peer_certificate,
                                    headers=request.headers)
        if isinstance(user, str):
            self.on_unauthenticated()
            return api.status(401, user)
        routed = api.route(request.path, request.query)
        if isinstance(routed, api.Answer):
            return routed
        if isinstance(routed, api.Discovery):
            return api.discovery()
        question = access.Access(verb="list", resource=routed.metric, namespace=routed.namespace,
                                 group=api.GROUP)
        try:
            allowed = self.authorizer.allowed(user, question)
        except access.AccessUnavailable as error:
            return api.status(503, str(error))
        if not allowed:
            return api.status(403, f"{api.GROUP}/{routed.metric} is forbidden: User {user.name!r} cannot "
                                   f"list resource {routed.metric!r} in API group {api.GROUP!r} in the "
                                   f"namespace {routed.namespace!r}")
        return api.answer(routed, self.source)


class _ReadOnly:
    """The POST side of the HTTPS server: this API takes no reviews."""

    def respond(self, body: bytes, *, max_body: int) -> bytes:
        raise admission_review.ReviewError("the external metrics API is read-only: GET only")


class ExternalMetricsServer:
    """The API over HTTPS, and the thread keeping the front-proxy settings current."""

    def __init__(self, handler: Handler, settings: ExternalMetricsSettings) -> None:
        """OSError or ssl.SSLError when the serving certificate cannot be loaded."""
        self.handler = handler
        self.trust = handler.trust
        role = webhook_roles.Role(review_path=api.ROOT, owner="coordinator", get=handler,
                                  on_connection_error=lambda: self._wake.set())
        self.https = webhook_https.WebhookServer(
            _ReadOnly(), role=role, host=settings.host, port=settings.port, cert_file=settings.cert_file,
            key_file=settings.key_file, client_auth=self.trust.client_auth)
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        handler.on_unauthenticated = self._wake.set

    @property
    def port(self) -> int:
        """The bound port once started."""
        return self.https.port

    def start(self) -> ExternalMetricsServer:
        """Serve, and keep the front-proxy settings current, in background threads; returns self."""
        self.https.start()
        self._thread = threading.Thread(target=self._refresh_loop, name="front-proxy-refresh", daemon=True)
        self._thread.start()
        LOG.info("external metrics API serving", extra={"port": self.port, "path": api.ROOT})
        return self

    def _refresh_loop(self) -> None:
        while not self._stopping.is_set():
            failed = self._wake.wait(timeout=front_proxy.MIN_REFRESH_SECONDS)
            self._wake.clear()
            if not self._stopping.is_set():
                self.trust.refresh(failed=failed)

    def stop(self) -> None:
        """Stop serving and refreshing; safe to call twice."""
        self._stopping.set()
        self._wake.set()
        self.https.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.trust.close()
