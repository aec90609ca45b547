"""Workload sync: the member Deployment of each assigned spread, with this cluster's replicas.

Why the agent writes the Deployment (and not the coordinator): the member's own ReplicaSet
controller then creates and deletes pods, the webhook places each one, and the workload keeps
running exactly as last assigned while the coordinator is away (fail static).

What is written: the hub Deployment's selector, pod template and rollout settings, with
`spec.replicas` = this cluster's share, the label `fedspread.io/spread` on the Deployment and on
its pod template (so the webhook's objectSelector sees the pods), the ownership marks of
`agents.ownership` (label `fedspread.io/federation`, annotation `fedspread.io/spread-uid`), and
annotations for the spread's generation, its key, and a hash of everything we set. Minimal
writes: when the cached Deployment is ours and carries the desired hash and replicas, nothing is
sent; otherwise the live object is read fresh and compared again before any write, so a lagging
cache costs a read, never a write. Conflicts (409) and server errors are retried with tenacity.

Ownership (`agents.ownership`): a live Deployment of the target's name that does not carry this
assignment's federation and spread uid is never adopted or modified (except one of this
federation made for, or released by, an earlier spread of the same key, and one made by an
earlier agent version for the same spread); it is a conflict, reported per spread in the pod
counts (`conflicts()`), and looked at again every `CONFLICT_PAUSE` seconds.

A spread's namespace that does not exist in the member is created (labelled
`fedspread.io/created-by=agent`), as Karmada propagates namespaces; the agent never deletes one.

Removal: `remove(spread, federation=...)` for an explicit SpreadRemoval (`release` when the
removal orphans the workload: it keeps running, unmanaged), both only for Deployments marked with
the removal's federation. Nothing else deletes a member Deployment: `sync_once` never removes one
because no assignment names it (an agent whose coordinator reads an empty or wrong hub would
otherwise delete every workload of its cluster). A Deployment whose assignment is gone stays as
last written until its coordinator sends a removal; the agent's Hello lists it, so a coordinator
that knows why sends one at the next resync.
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from kubernetes.client import exceptions

from agents import bookkeeping, ownership, retries
from agents.cache import store as cache_mod
from federation.api import names
from federation.kube import deadlines
from federation.kube import events as kube_events
from federation.rpc import assignment

LOG = logging.getLogger(__name__)

Json = dict[str, Any]
KEPT_SPEC_FIELDS = ("selector", "template", "strategy", "minReadySeconds", "revisionHistoryLimit",
                    "progressDeadlineSeconds", "paused")
KEPT_POD_METADATA = ("labels", "annotations")
CREATED, UPDATED, UNCHANGED, DELETED, FAILED = "created", "updated", "unchanged", "deleted", "failed"
CONFLICT = "conflict"
FAILURE_PAUSE = 30.0
"""Seconds before a desired Deployment the apiserver refused (422, say) is tried again."""
CONFLICT_PAUSE = 5.0
"""Seconds before a Deployment we do not own is read again (the cache does not see it)."""


# --- rendering (pure) ----------------------------------------------------------------------------


def desired_hash(body: Mapping[str, Any]) -> str:
    """A stable hash of a rendered Deployment (without its hash annotation)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def render(value: assignment.Assignment) -> Json:
    """The member Deployment for an assignment, hash annotation included."""
    source = value.template or {}
    source_meta, source_spec = source.get("metadata") or {}, source.get("spec") or {}
    spec: Json = {k: copy.deepcopy(source_spec[k]) for k in KEPT_SPEC_FIELDS if k in source_spec}
    spec["replicas"] = value.replicas
    pod_template = spec.setdefault("template", {})
    pod_meta = {k: v for k, v in (pod_template.get("metadata") or {}).items() if k in KEPT_POD_METADATA and v}
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), names.SPREAD_LABEL: value.name}
    pod_template["metadata"] = pod_meta
    labels, annotations = ownership.marks(value)
    body: Json = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": value.workload, "namespace": value.namespace,
            "labels": {**(source_meta.get("labels") or {}), names.SPREAD_LABEL: value.name, **labels},
            "annotations": {names.GENERATION_ANNOTATION: str(value.generation),
                            names.SPREAD_KEY_ANNOTATION: value.spread, **annotations},
        },
        "spec": spec,
    }
    body["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION] = desired_hash(body)
    return body


def is_current(*, annotations: Mapping[str, str] | None, replicas: Any, desired: Mapping[str, Any]) -> bool:
    """True when a live Deployment already is `desired`: same hash and same replicas.

    Replicas are compared too because they are what someone is most likely to change by hand
    (kubectl scale); the rest is trusted to the hash.
    """
    wanted = desired["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION]
    same_hash = (annotations or {}).get(names.DESIRED_HASH_ANNOTATION) == wanted
    return bool(same_hash and replicas == desired["spec"]["replicas"])


def merged(live: Mapping[str, Any], desired: Mapping[str, Any]) -> Json:
    """The body for a replace: the live object with our labels, annotations and spec."""
    body = copy.deepcopy(dict(live))
    body.pop("status", None)
    meta = body.setdefault("metadata", {})
    meta.pop("managedFields", None)
    for field in ("labels", "annotations"):
        meta[field] = {**(meta.get(field) or {}), **desired["metadata"][field]}
    meta["annotations"].pop(names.RELEASED_FROM_ANNOTATION, None)  # adopted: managed again
    body["spec"] = copy.deepcopy(desired["spec"])
    body["apiVersion"], body["kind"] = desired["apiVersion"], desired["kind"]
    return body


_RETRY = retries.kube_retry(conflicts=True, attempts=5, max_wait=5.0)


# --- the sync --------------------------------------------------------------------------------------


class WorkloadSync:
    """Creates, updates and removes the member Deployments of assigned spreads."""

    def __init__(self, apps_api: Any, books: bookkeeping.Bookkeeping, cache: cache_mod.Cache, *,
                 core_api: Any = None, recorder: kube_events.EventRecorder | None = None) -> None:
        self._apps = apps_api
        self._recorder = recorder
        """Records an Event on each Deployment this sync creates, updates or deletes."""
        self._core = core_api  # creates a missing namespace when given
        self._books = books
        self._cache = cache
        self._rendered: dict[str, tuple[assignment.Assignment, Json]] = {}
        self._failed: dict[str, tuple[str, float]] = {}
        self._conflicts: dict[str, tuple[str, str, float]] = {}
        """Per spread: (desired hash, why, when to look again) for a target we do not own."""
        self._lock = threading.Lock()
        self.rounds = 0
        """Completed `sync_once` rounds (for status and for tests that wait for a round to pass)."""

    def desired(self, value: assignment.Assignment) -> Json:
        """The rendered Deployment of an assignment (memoised per assignment object)."""
        memo = self._rendered.get(value.spread)
        if memo is not None and memo[0] is value:
            return memo[1]
        body = render(value)
        self._rendered[value.spread] = (value, body)
        return body

    def conflicts(self) -> dict[str, str]:
        """Per spread: why its member Deployment is left alone (for the pod-count reports)."""
        with self._lock:
            return {spread: why for spread, (_, why, _) in self._conflicts.items()}

    def apply(self, value: assignment.Assignment) -> str:
        """Bring one spread's Deployment to its assignment: CREATED, UPDATED, UNCHANGED or CONFLICT."""
        body = self.desired(value)
        view = self._cache.deployment(value.namespace, value.workload)
        if view is not None and is_current(annotations=view.annotations, replicas=view.replicas,
                                           desired=body) and ownership.owns(
                federation=view.federation, uid=view.annotations.get(names.SPREAD_UID_ANNOTATION),
                value=value):
            return UNCHANGED
        return self._write(body, value)

    @_RETRY
    def _write(self, body: Json, value: assignment.Assignment) -> str:
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        if not ownership.identified(value):
            return self._conflict(value, body, ownership.claim(labels=None, annotations=None, value=value,
                                                               where=f"{namespace}/{name}").reason)
        try:
            response = self._apps.read_namespaced_deployment(name, namespace, _preload_content=False,
                                                             _request_timeout=deadlines.CALL)
            live = json.loads(response.data)
        except exceptions.ApiException as error:
            if error.status != 404:
                raise
            created = self._create(namespace, body)
            self._resolved(value.spread)
            LOG.info("deployment created deployment=%s/%s replicas=%s",
                     namespace, name, body["spec"]["replicas"])
            self._note(created, body, reason="Created", action="Create",
                       note=f"created with {body['spec']['replicas']} replicas for spread {value.spread}")
            return CREATED
        meta = live.get("metadata") or {}
        verdict = ownership.claim(labels=meta.get("labels"), annotations=meta.get("annotations"),
                                  value=value, where=f"{namespace}/{name}")
        if verdict.verdict == ownership.CONFLICT:
            return self._conflict(value, body, verdict.reason)
        self._resolved(value.spread)
        if is_current(annotations=meta.get("annotations"), replicas=(live.get("spec") or {}).get("replicas"),
                      desired=body):
            return UNCHANGED
        if verdict.verdict == ownership.ADOPT:
            LOG.info("adopting deployment=%s/%s reason=%s", namespace, name, verdict.reason)
        response = self._apps.replace_namespaced_deployment(name, namespace, merged(live, body),
                                                            _preload_content=False,
                                                            _request_timeout=deadlines.CALL)
        LOG.info("deployment updated deployment=%s/%s replicas=%s", namespace, name, body["spec"]["replicas"])
        was = (live.get("spec") or {}).get("replicas")
        self._note(response, body, reason="Updated", action="Update",
                   note=f"updated for spread {value.spread} (generation {value.generation}): "
                        f"{was} -> {body['spec']['replicas']} replicas")
        return UPDATED

    def _conflict(self, value: assignment.Assignment, body: Json, reason: str) -> str:
        digest = body["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION]
        with self._lock:
            known = self._conflicts.get(value.spread)
            self._conflicts[value.spread] = (digest, reason, time.monotonic() + CONFLICT_PAUSE)
        if known is None or known[1] != reason:
            LOG.warning("deployment left alone spread=%s reason=%s", value.spread, reason)
        return CONFLICT

    def _resolved(self, spread: str) -> None:
        with self._lock:
            if self._conflicts.pop(spread, None) is not None:
                LOG.info("deployment conflict resolved spread=%s", spread)

    def _note(self, response: Any, sent: Json, *, reason: str, action: str, note: str) -> None:
        """An Event on the Deployment the apiserver returned in `response` (its uid included),
        else on the one `sent`, if recording."""
        if self._recorder is None:
            return
        try:
            meta = json.loads(response.data).get("metadata") or {}
        except (AttributeError, TypeError, ValueError):  # no body to read: the uid stays unknown
            meta = sent.get("metadata") or {}
        if not meta.get("name"):
            return
        self._recorder.record(
            kube_events.ObjectRef("apps/v1", "Deployment", str(meta["name"]),
                                  namespace=str(meta.get("namespace") or ""), uid=str(meta.get("uid") or "")),
            reason=reason, action=action, note=note)

    def _create(self, namespace: str, body: Json) -> Any:
        """Create the Deployment (the client's response); a namespace the member lacks is created
        first (as Karmada does)."""
        try:
            return self._apps.create_namespaced_deployment(namespace, body, _preload_content=False,
                                                           _request_timeout=deadlines.CALL)
        except exceptions.ApiException as error:
            if error.status != 404 or self._core is None:
                raise
        try:
            meta = {"name": namespace, "labels": {names.CREATED_BY_LABEL: "agent"}}
            self._core.create_namespace({"metadata": meta}, _preload_content=False,
                                        _request_timeout=deadlines.CALL)
            LOG.info("namespace created namespace=%s", namespace)
        except exceptions.ApiException as error:
            if error.status != 409:  # 409: created meanwhile
                raise
        return self._apps.create_namespaced_deployment(namespace, body, _preload_content=False,
                                                       _request_timeout=deadlines.CALL)

    def sync_once(self) -> dict[str, int]:
        """Apply every assignment; outcome counts. Deletes nothing (module docstring)."""
        outcomes: dict[str, int] = {}
        current = self._books.assignments()
        now = time.monotonic()
        for value in current:
            body = self.desired(value)
            digest = body["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION]
            failed = self._failed.get(value.spread)
            with self._lock:
                conflict = self._conflicts.get(value.spread)
            if failed is not None and failed[0] == digest and now < failed[1]:
                continue
            if conflict is not None and conflict[0] == digest and now < conflict[2]:
                outcomes[CONFLICT] = outcomes.get(CONFLICT, 0) + 1
                continue
            try:
                outcome = self.apply(value)
                self._failed.pop(value.spread, None)
            except Exception as error:
                outcome = FAILED
                self._failed[value.spread] = (digest, now + FAILURE_PAUSE)
                LOG.warning("deployment sync failed spread=%s error=%s", value.spread, _reason(error))
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assigned = {v.spread for v in current}
        for spread in set(self._rendered) - assigned:
            self._rendered.pop(spread, None)
        with self._lock:
            for spread in set(self._conflicts) - assigned:
                del self._conflicts[spread]
        self.rounds += 1
        return outcomes

    def remove(self, spread: str, *, federation: str) -> int:
        """Delete the Deployments this agent made for `spread` in `federation` (a SpreadRemoval
        received from a coordinator of that federation); how many.

        Call after `Bookkeeping.remove_assignment`, or the next round recreates them. A Deployment
        that an assignment of the same spread key held now names is kept (`_claimed`): it arrived
        after the removal (the spread was created again) and adopts what runs.
        """
        self._forget(spread)
        keep = self._claimed(spread)
        return sum(int(self._delete(namespace, name, uid=uid, spread=spread))
                   for namespace, name, uid in self._owned(spread, federation)
                   if (namespace, name) not in keep)

    def release(self, spread: str, *, federation: str) -> int:
        """Stop managing `spread`'s Deployments of `federation` but leave them running (a
        SpreadRemoval that orphans its workload): our label, spread-key, hash, generation and
        ownership marks come off the Deployment's metadata, so no removal will touch it again, and
        the `released-from` mark goes on, so that a spread of the same key in this federation (the
        spread created again) adopts it and no other does (`agents.ownership`). Its pod template is
        left alone: editing it would roll every pod. Pods keep `fedspread.io/spread`, but a pod
        counts as a spread's only while its owner chain leads to a Deployment carrying the
        spread's marks (`agents.owners`), so the agent leaves the released pods alone.
        A Deployment an assignment of the same key held now names is kept as it is (`_claimed`):
        that assignment arrived after the removal and adopts it. How many were released."""
        self._forget(spread)
        released = 0
        keep = self._claimed(spread)
        ours = (names.SPREAD_KEY_ANNOTATION, names.DESIRED_HASH_ANNOTATION, names.GENERATION_ANNOTATION,
                names.SPREAD_UID_ANNOTATION)
        for namespace, name, _ in self._owned(spread, federation):
            if (namespace, name) in keep:
                continue
            annotations: dict[str, str | None] = {**dict.fromkeys(ours),
                                                  names.RELEASED_FROM_ANNOTATION: names.released_from(
                                                      federation, spread)}
            patch = {"metadata": {"labels": {names.SPREAD_LABEL: None, names.FEDERATION_LABEL: None},
                                  "annotations": annotations}}
            try:
                self._apps.patch_namespaced_deployment(name, namespace, patch, _preload_content=False,
                                                       _content_type="application/merge-patch+json",
                                                       _request_timeout=deadlines.CALL)
            except exceptions.ApiException as error:
                if error.status == 404:
                    continue
                raise
            LOG.info("deployment released deployment=%s/%s", namespace, name)
            released += 1
        return released

    def _claimed(self, spread: str) -> set[tuple[str, str]]:
        """(namespace, name) of the member Deployment an assignment of `spread` held now names: one
        that arrived after the removal (the spread created again), which adopts it. Another
        spread's assignment naming it never could (a Deployment marked for `spread` is a conflict
        for it), so it protects nothing: a successor of the target gets its own Deployment once
        the old one is deleted."""
        current = self._books.assignment(spread)
        return set() if current is None else {(current.namespace, current.workload)}

    def _forget(self, spread: str) -> None:
        self._rendered.pop(spread, None)
        self._failed.pop(spread, None)
        with self._lock:
            self._conflicts.pop(spread, None)

    def _owned(self, spread: str, federation: str) -> list[tuple[str, str, str]]:
        """(namespace, name, uid) of the Deployments made for `spread` and marked with `federation`,
        from the apiserver (a removal is rare and must not depend on the cache being current)."""
        if not federation:
            return []
        label = f"{names.SPREAD_LABEL}={spread.partition('/')[2]},{names.FEDERATION_LABEL}={federation}"
        listing = json.loads(self._apps.list_deployment_for_all_namespaces(
            label_selector=label, _preload_content=False, _request_timeout=deadlines.LIST).data)
        owned = []
        for item in listing.get("items") or ():
            meta = item.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            if (annotations.get(names.SPREAD_KEY_ANNOTATION) == spread
                    and annotations.get(names.SPREAD_UID_ANNOTATION)
                    and (meta.get("labels") or {}).get(names.FEDERATION_LABEL) == federation):
                owned.append((str(meta["namespace"]), str(meta["name"]), str(meta.get("uid") or "")))
        return owned

    def _delete(self, namespace: str, name: str, *, uid: str, spread: str) -> bool:
        options: Json = {"propagationPolicy": "Background"}
        if uid:
            options["preconditions"] = {"uid": uid}
        try:
            self._apps.delete_namespaced_deployment(name, namespace, body=options, _preload_content=False,
                                                    _request_timeout=deadlines.CALL)
        except exceptions.ApiException as error:
            if error.status == 404 or (error.status == 409 and uid):  # gone, or replaced meanwhile
                return False
            raise
        LOG.info("deployment deleted deployment=%s/%s", namespace, name)
        self._note(None, {"metadata": {"name": name, "namespace": namespace, "uid": uid}}, reason="Deleted",
                   action="Delete",
                   note=f"deleted: the coordinator removed spread {spread} from this cluster")
        return True

    def run(self, stop: threading.Event, *, interval: float = 1.0) -> None:
        """`sync_once` every `interval` seconds until `stop` is set."""
        while not stop.is_set():
            try:
                self.sync_once()
            except Exception as error:  # one bad round must not end the loop
                LOG.warning("workload sync round failed error=%s", _reason(error))
            stop.wait(interval)


def _reason(error: BaseException) -> str:
    if isinstance(error, exceptions.ApiException):
        return f"{error.status} {str(error.body or error.reason)[:300]}"
    return str(error)[:300]
