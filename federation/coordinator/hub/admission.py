"""The hub's validating webhook: an invalid FederatedSpread or MemberCluster is refused at the door.

Why: without it, `kubectl apply` of a spread with `maxReplicas: "140%"` succeeds and the problem
shows only later, as `Valid=False` in its status. The webhook answers with the very same checks
that condition reports — `watcher.parse_spread` / `parse_cluster`, i.e. `problems.validate`: the
schema and the cross-field rules in one pass — so a refusal lists EVERY problem with its field
path, and what the door lets through is what the coordinator would find valid.

Rules that span objects need the coordinator's World, the hub watcher's view of the hub:

* **One spread per target** (`lifecycle.Lifecycle.holder_against`): a spread whose Deployment
  another live spread already holds is refused, naming the holder.
* **`targetRef` is fixed on a live spread**: an edit that changes it is refused.
* **`spec.propagate` names versions the hub serves** (its discovery, `HubWatcher.served_versions`):
  `policy/v1` on a hub that serves only `policy/v1beta1` is refused; unknown until the hub answered.

Both are asked only once the coordinator has listed the hub (before, its World is not the hub's)
and only if the World's lock is free within `WORLD_WAIT` (a placement in progress must not stall
the apiserver); otherwise they are left to the Valid condition, which checks them again anyway.
So do spreads written while the webhook was away (`failurePolicy: Ignore`), and a conflict between
two spreads created at the same moment, before the watcher saw the first.

An UPDATE is refused only for problems it adds: if every problem of the new object is already a
problem of the old one (a label edit, a finalizer removed, a deletion of a spread stored while
the webhook was away), it is allowed with the problems as warnings — refusing it would leave the
user unable to clean up. CREATE and UPDATE of the main resource only: the `status` subresource
(the coordinator's own writes) is never sent here.

**HorizontalPodAutoscalers** get warnings, never a refusal (`core.hpa_advice`): a `Value`
target on one of fedspread's external metrics (only `AverageValue` works on a hub without pods),
a Job as the scale target (no scale subresource). Their webhook's registration says
`failurePolicy: Ignore` too: a warning must never stand between a user and their HPA.

Who may ask: with `WebhookSettings.client_auth` only the hub apiserver, by its client certificate
(401/403 for anyone else, the agent's check: `federation.kube.webhook_clients`). Without it anyone
reaching the port may; it changes nothing, but its answers tell which spread holds a Deployment.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
from collections.abc import Callable, Collection
from typing import Any

from federation.api import cluster as cluster_api
from federation.api import common, problems
from federation.api import propagate as propagate_api
from federation.api import spread as spread_api
from federation.coordinator import facade
from federation.coordinator.hub import watcher
from federation.coordinator.model import lifecycle
from federation.core import hpa_advice
from federation.kube import admission_review as review
from federation.kube import webhook_clients, webhook_https, webhook_roles

LOG = logging.getLogger(__name__)

VALIDATE_PATH = "/validate"
WORLD_WAIT = 1.0
"""The cross-object rules wait this long at most for the World's lock, then are left to the condition."""
HPA_GROUP = "autoscaling"
HPA_RESOURCE = "horizontalpodautoscalers"
INVALID = 422
"""The code of a refusal: the object is invalid (as the apiserver's own validation answers)."""
MAX_WARNINGS = 20

Json = dict[str, Any]


class SpecAdmission:
    """Answers AdmissionReviews for FederatedSpreads and MemberClusters (thread-safe)."""

    def __init__(self, coordinator: facade.Coordinator, *, hub_synced: Callable[[], bool],
                 served: Callable[[], Collection[str] | None] = lambda: None) -> None:
        self.coordinator = coordinator
        self.hub_synced = hub_synced
        """Whether the World has the whole hub (the coordinator's first list is done)."""
        self.served = served
        """The group versions the hub serves (`HubWatcher.served_versions`); None: not known yet."""

    def respond(self, body: bytes, *, max_body: int = review.MAX_BODY) -> bytes:
        """Parse a request body, decide, encode the response; ReviewError for a malformed one."""
        return review.encode(self.handle(review.parse(body, max_body=max_body)))

    def handle(self, request: review.Review) -> Json:
        """The response AdmissionReview for a parsed request."""
        if request.operation not in ("CREATE", "UPDATE") or request.sub_resource:
            return review.allow(request.uid)
        if request.resource.group == HPA_GROUP and request.resource.resource == HPA_RESOURCE:
            advice = hpa_advice.warnings(request.object or {})
            return review.allow(request.uid, warnings=advice[:MAX_WARNINGS])
        if request.resource.group != common.API_GROUP or request.resource.resource not in (
                spread_api.PLURAL, cluster_api.PLURAL):
            return review.allow(request.uid)  # not ours: registered for our CRDs only
        if request.object is None:
            raise review.ReviewError(f"request.object is required for {request.operation}")
        obj = _in_namespace(request.object, request)
        old = None if request.old_object is None else _in_namespace(request.old_object, request)
        found = self.problems_of(request.resource.resource, obj,
                                 old=old if request.operation == "UPDATE" else None)
        if request.operation == "UPDATE":
            if old is None:
                raise review.ReviewError("request.oldObject is required for UPDATE")
            before = set(self.problems_of(request.resource.resource, old, old=None))
            if all(problem in before for problem in found):
                return review.allow(request.uid, warnings=_warnings(found))
        if not found:
            return review.allow(request.uid)
        what = f"{request.kind.kind} {_name(request)}"
        LOG.info("refused at admission", extra={"object": what, "operation": request.operation,
                                                "problems": len(found)})
        return review.refuse(request.uid, str(problems.InvalidInput(what, found)), code=INVALID)

    def problems_of(self, resource: str, obj: Json, *, old: Json | None) -> list[problems.Problem]:
        """Every problem of `obj`: the Valid condition's, then the cross-object rules' (`old`: the
        object it replaces, for an UPDATE)."""
        if resource == cluster_api.PLURAL:
            return list(watcher.parse_cluster(obj)[1])
        item, found = watcher.parse_spread(obj)
        unserved = self._unserved(obj)
        if item is None:
            return [*found, *unserved]
        return unserved + self._cross_object(item, old=old)

    def _unserved(self, obj: Json) -> list[problems.Problem]:
        """The `spec.propagate` entries whose apiVersion the hub does not serve (read as written,
        so they are reported beside the model's problems); [] while the hub's versions are unknown."""
        spec = obj.get("spec")
        entries = spec.get("propagate") if isinstance(spec, dict) else None
        if not isinstance(entries, list) or not entries:
            return []
        served = self.served()
        if served is None:
            return []
        versions = [entry.get("apiVersion") if isinstance(entry, dict) else None for entry in entries]
        return [problems.Problem(path, message)
                for path, message in propagate_api.unserved_problems(versions, served=served)]

    def _cross_object(self, item: spread_api.FederatedSpread, *, old: Json | None) -> list[problems.Problem]:
        """The rules spanning spreads, from the World; [] when they cannot be decided now."""
        if not self.hub_synced():
            return []
        lock = self.coordinator.lock
        if not lock.acquire(timeout=WORLD_WAIT):
            LOG.info("the World is busy: cross-object rules left to the Valid condition",
                     extra={"spread": item.key})
            return []
        try:
            world = self.coordinator.world
            live = world.spread(item.key)
            if old is not None and live is not None and live.spec.target_ref != item.spec.target_ref:
                return [problems.Problem("spec.targetRef", lifecycle.target_change_message(
                    current=live.spec.target_ref.described, wanted=item.spec.target_ref.described))]
            holder = world.lifecycle.holder_against(item, placed=world.placements)
        finally:
            lock.release()
        if holder is None:
            return []
        return [problems.Problem("spec.targetRef.name", lifecycle.conflict_message(item, holder=holder))]


def _in_namespace(obj: Json, request: review.Review) -> Json:
    """`obj` with the request's namespace when its metadata names none (as the hub stores it)."""
    if not request.namespace:
        return obj
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or meta.get("namespace"):
        return obj
    return {**obj, "metadata": {**meta, "namespace": request.namespace}}


def _name(request: review.Review) -> str:
    return f"{request.namespace}/{request.name}" if request.namespace else request.name


def _warnings(found: list[problems.Problem]) -> list[str]:
    """The problems an allowed UPDATE keeps, as warnings (kubectl prints them)."""
    if not found:
        return []
    shown = [f"still invalid (see the Valid condition): {p}" for p in found[:MAX_WARNINGS]]
    if len(found) > MAX_WARNINGS:
        shown.append(f"... and {len(found) - MAX_WARNINGS} more problems")
    return shown


@dataclasses.dataclass(frozen=True)
class WebhookSettings:
    """Where and with what certificate the coordinator serves the webhook (`--webhook-*` flags)."""

    cert_file: pathlib.Path
    key_file: pathlib.Path
    port: int = 9443
    """0: any free port (tests)."""
    host: str = "0.0.0.0"
    client_auth: webhook_clients.ClientAuth | None = None
    """Only the hub apiserver's client certificate may post reviews (`--webhook-client-ca`,
    `--webhook-allowed-cn`); None: anyone, with a warning at start."""


def server(admission: SpecAdmission, settings: WebhookSettings) -> webhook_https.WebhookServer:
    """The HTTPS server for `admission` (not started); /readyz is ready once the hub is listed.
    OSError or ssl.SSLError when the certificate or client CA files cannot be read or loaded."""
    role = webhook_roles.Role(review_path=VALIDATE_PATH, owner="coordinator",
                              not_ready="not ready: the hub is not listed yet\n")
    return webhook_https.WebhookServer(admission, role=role, host=settings.host, port=settings.port,
                                       cert_file=settings.cert_file, key_file=settings.key_file,
                                       ready=admission.hub_synced, client_auth=settings.client_auth)
