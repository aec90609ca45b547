"""The admission decision: which subset a new pod of a spread gets, and which pods are going away.

Why here and not in the server: the HTTP shell only moves bytes; this is where the pod-level rules
happen (a subset per pod, within its quota),
and it is tested directly with a real `Bookkeeping` and hand-made assignments, including real
concurrency. The path makes no network call — the quota table is local, pushed by the coordinator —
and a pod of no spread returns at once, untouched, so that the webhook costs nothing to the rest of
the cluster.

* Pod CREATE of a spread: `Bookkeeping.admit` chooses the first subset in spec order with quota
  left for the pod's template revision (`rollout.pod_revision`, kruise#834) among those below
  quota + the member workload's surge (`rollout.choose`) and records it in creatingPods
  under the pod's name — generated here from `generateName` when the pod has none, as Kruise
  does, so that the controller can later match the pod it sees with the entry. The answer is the JSONPatch of
  `mutation.mutate_pod`. No subset left: the pod is allowed untouched (its deletion cost will make
  it the first to go). A just-started agent that has not counted the spread's pods yet refuses the
  pod for now (`Bookkeeping.admit` raises NotCounted, see agents.bookkeeping): its ReplicaSet
  retries a moment later, when the choice can respect the quotas.
* A pod whose controller is known and is not the spread's (`agents.owners.admission`: a
  ReplicaSet of a Deployment released by a deleted spread, another controller's pod carrying the
  label) is allowed untouched and recorded nowhere: the label alone does not make it the
  spread's. A pod whose ReplicaSet the agent's cache does not know yet (a rollout's first pods)
  and a pod no controller owns are admitted by label, as before.
* Pod DELETE, and CREATE of pods/eviction (which names the pod but carries no labels): the pod goes
  into deletingPods. Deletions are never blocked.
* Dry-run requests get the same answer and leave the bookkeeping alone (the configuration says
  sideEffects None).

Kept off the CREATE path, because the admission bench (`bench/admission.py`) showed them in its
p99: a system call for the generated name's randomness (`os.urandom` releases the interpreter
lock, and under load the thread then waits a switch interval to get it back — names need to be
unique, not secret, and the apiserver itself uses a plain PRNG for generateName), and a copy and a
JSONPatch diff of every field of the pod, managedFields included, where a few fields change
(`_injected_part`).
"""

from __future__ import annotations

import logging
import random
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from agents import bookkeeping, metrics, owners
from agents.webhook import review
from federation.api import names
from federation.core import deletion_cost, mutation, rollout, workload_kinds
from federation.rpc import assignment

LOG = logging.getLogger(__name__)

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

TokenSource = Callable[[], str]
OwnerCheck = Callable[[assignment.Assignment, str, Any], str]
"""Whose pod a pod being created is, from (its spread's assignment, its namespace, its
ownerReferences): `owners.OURS`, `owners.FOREIGN` or `owners.UNKNOWN` (`agents.owners.admission`)."""

_NAMES = random.Random(secrets.randbits(128))


def fresh_token() -> str:
    """128 random bits as hex for a generated name: a seeded PRNG, no system call."""
    return f"{_NAMES.getrandbits(128):032x}"


_INJECTED = {"metadata": ("name", "annotations"), "spec": ("affinity", "tolerations")}


def _injected_part(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The only fields an injection without a subset `patch` reads or writes — metadata name and
    annotations, spec affinity and tolerations — as a pod of their own.

    `mutate_pod` deep-copies its input and `json_patch` compares every field it is given; handed
    this instead of the whole pod (managedFields, containers and all) they do the same work on a
    few fields and give the same JSONPatch. With a `patch`, which may touch anything, the whole pod
    is used.
    """
    part: dict[str, Any] = {}
    for section, value in pod.items():  # in the pod's order, so that the patch's order is the same
        keys = _INJECTED.get(section)
        if keys is None:
            continue
        part[section] = {k: v for k, v in value.items() if k in keys} if isinstance(value, dict) else value
    return part


def _pod_metadata(pod: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The pod's metadata with labels, annotations, name and generateName type-checked."""
    meta: dict[str, Any] = review.field(pod, "metadata", dict, where, default={})
    path = f"{where}.metadata"
    review.string_map(meta, "labels", path)
    review.string_map(meta, "annotations", path)
    review.field(meta, "name", str, path)
    review.field(meta, "generateName", str, path)
    return meta


def _check_injectable(pod: Mapping[str, Any]) -> None:
    """ReviewError unless the fields the injection touches have the shapes of a core/v1 Pod.

    Checked before the bookkeeping records anything, so that a malformed pod never holds quota.
    """
    spec: dict[str, Any] = review.field(pod, "spec", dict, "request.object", default={})
    review.field(spec, "tolerations", list, "request.object.spec")
    affinity: dict[str, Any] = review.field(spec, "affinity", dict, "request.object.spec", default={})
    node: dict[str, Any] = review.field(affinity, "nodeAffinity", dict, "spec.affinity", default={})
    review.field(node, _PREFERRED, list, "spec.affinity.nodeAffinity")
    required: dict[str, Any] = review.field(node, _REQUIRED, dict, "spec.affinity.nodeAffinity", default={})
    terms: list[Any] = review.field(required, "nodeSelectorTerms", list, f"nodeAffinity.{_REQUIRED}",
                                    default=[])
    for i, term in enumerate(terms):
        if not isinstance(term, dict):
            raise review.ReviewError(f"nodeSelectorTerms[{i}] must be object")
        for key in ("matchExpressions", "matchFields"):
            review.field(term, key, list, f"nodeSelectorTerms[{i}]")


class AdmissionHandler:
    """Answers AdmissionReviews from the local bookkeeping (thread-safe, no I/O)."""

    def __init__(self, book: bookkeeping.Bookkeeping, agent_metrics: metrics.AgentMetrics, *,
                 token_source: TokenSource = fresh_token, owner_check: OwnerCheck | None = None) -> None:
        self.book = book
        self.metrics = agent_metrics
        self._token = token_source
        self._owner_check = owner_check
        """None: every pod labelled for an assigned spread is admitted by label (no cache to ask)."""

    # --- entry points -----------------------------------------------------------------------------

    def respond(self, body: bytes, *, max_body: int = review.MAX_BODY) -> bytes:
        """Parse a request body, decide, and encode the response; ReviewError for bad input."""
        started = time.perf_counter()
        parsed = review.parse(body, max_body=max_body)
        answer = review.encode(self.handle(parsed))
        self.metrics.observe_admission(parsed.operation, time.perf_counter() - started)
        return answer

    def handle(self, request: review.Review) -> dict[str, Any]:
        """The response AdmissionReview for a parsed request."""
        if request.is_resource("pods"):
            if request.operation == "CREATE":
                return self._create(request)
            if request.operation == "DELETE":
                return self._delete(request)
        elif request.is_resource("pods", sub_resource="eviction") and request.operation == "CREATE":
            return self._evict(request)
        return review.allow(request.uid)

    # --- pod CREATE -------------------------------------------------------------------------------

    def _create(self, request: review.Review) -> dict[str, Any]:
        pod = request.object
        if pod is None:
            raise review.ReviewError("request.object is required for a pod CREATE")
        meta = _pod_metadata(pod, "request.object")
        labels = meta.get("labels") or {}
        spread = self.book.spread_of(request.namespace, labels)
        if spread is None:
            self.metrics.decision(spread="", subset=None, outcome=metrics.PASSTHROUGH)
            return review.allow(request.uid)
        check, references = self._owner_check, meta.get("ownerReferences")
        if check is not None and check(spread, request.namespace, references) == owners.FOREIGN:
            # Another controller's pod carrying the label (a released Deployment's, say): not ours.
            self.metrics.decision(spread=spread.spread, subset=None, outcome=metrics.PASSTHROUGH)
            return review.allow(request.uid)
        _check_injectable(pod)
        name = meta.get("name") or request.name
        generated = None
        if not name:
            base = meta.get("generateName")
            if not base:
                raise review.ReviewError("the pod has neither metadata.name nor metadata.generateName")
            name = generated = mutation.generated_name(base, token=self._token())
        try:
            rule = self.book.admit(spread.spread, name, revision=rollout.pod_revision(labels),
                                   dry_run=request.dry_run)
        except bookkeeping.NotCounted as error:  # just started: placing it now could overfill a subset
            self.metrics.decision(spread=spread.spread, subset=None, outcome=metrics.NOT_COUNTED)
            return review.refuse(request.uid, f"fedspread agent: {error}; retry in a moment")
        if rule is None:
            self.metrics.decision(spread=spread.spread, subset=None, outcome=metrics.NO_SUBSET)
            LOG.debug("pod %s/%s of %s: every subset is full here", request.namespace, name, spread.spread)
            return review.allow(request.uid)
        source = pod if rule.patch else _injected_part(pod)
        try:
            mutated = mutation.mutate_pod(
                source, subset=rule.name, required_term=rule.required_term,
                preferred_terms=rule.preferred_terms, tolerations=rule.tolerations, patch=rule.patch,
                name=generated,
                # Admitted within its subset's quota: born with the cost the controller would write
                # (none for a kind whose controller reads none: a StatefulSet's).
                deletion_cost=deletion_cost.in_quota_cost(rule.index, subset_count=spread.spec_subsets)
                if workload_kinds.policy_for(spread.api_version, spread.kind).uses_deletion_cost else None,
            )
        except ValueError as error:
            # The pod's shape was checked above, so this is the subset's patch not fitting the pod:
            # a configuration problem, not the requester's. Let the pod in unplaced and say so; its
            # creatingPods entry settles when the controller sees the pod (without a subset).
            LOG.error("spread %s subset %s cannot be injected into pod %s/%s: %s",
                      spread.spread, rule.name, request.namespace, name, error)
            self.metrics.decision(spread=spread.spread, subset=None, outcome=metrics.NO_SUBSET)
            warning = f"fedspread: subset {rule.name} not injected: {error}"
            return review.allow(request.uid, warnings=[warning])
        self.metrics.decision(spread=spread.spread, subset=rule.name, outcome=metrics.ASSIGNED)
        return review.allow(request.uid, patch=mutation.json_patch(source, mutated))

    # --- pod DELETE and eviction ------------------------------------------------------------------

    def _delete(self, request: review.Review) -> dict[str, Any]:
        old = request.old_object
        meta = _pod_metadata(old, "request.oldObject") if old is not None else {}
        name = meta.get("name") or request.name
        subset = (meta.get("annotations") or {}).get(names.SUBSET_ANNOTATION) or None
        spread = self.book.spread_of(request.namespace, meta.get("labels"))
        key = spread.spread if spread is not None else None
        if key is None and (subset is not None or old is None) and name:
            key = self._find_spread(request.namespace, name)
        if key is not None and name:
            self._note_deleting(key, name, subset=subset, dry_run=request.dry_run)
        return review.allow(request.uid)

    def _evict(self, request: review.Review) -> dict[str, Any]:
        # The Eviction object carries the pod's name but none of its labels: look the pod up.
        name = request.name
        if not name and request.object is not None:
            name = review.field(_pod_metadata(request.object, "request.object"), "name", str,
                                "request.object.metadata", default="")
        key = self._find_spread(request.namespace, name) if name else None
        if key is not None:
            self._note_deleting(key, name, subset=None, dry_run=request.dry_run)
        return review.allow(request.uid)

    def _note_deleting(self, spread: str, name: str, *, subset: str | None, dry_run: bool) -> None:
        if dry_run:
            return
        chosen = self.book.note_deleting(spread, name, subset=subset)
        if chosen is not None:
            self.metrics.decision(spread=spread, subset=chosen, outcome=metrics.DELETING)

    def _find_spread(self, namespace: str, name: str) -> str | None:
        """The spread whose bookkeeping knows pod `namespace/name` (observed or being created)."""
        for current in self.book.assignments():
            if current.spread.partition("/")[0] != namespace:
                continue
            creating, _ = self.book.pending_entries(current.spread)
            if name in creating or any(p.name == name for p in self.book.pods(current.spread)):
                return current.spread
        return None
