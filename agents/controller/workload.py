"""Workload sync: the member Deployment of each assigned spread, with this cluster's replicas.

Why the agent writes the Deployment (and not the coordinator): the member's own ReplicaSet
controller then creates and deletes pods, the webhook places each one, and the workload keeps
running exactly as last assigned while the coordinator is away (fail static).

What is written (`agents.controller.rendering`): the hub Deployment's selector, pod template and
rollout settings, with `spec.replicas` = this cluster's share, our label and ownership marks, and a
hash of everything we set. Minimal writes: when the cached Deployment is ours and carries the
desired hash and replicas, nothing is sent; otherwise the live object is read fresh and compared
again before any write, so a lagging cache costs a read, never a write. Conflicts (409) and server
errors are retried with tenacity.

Ownership (`agents.ownership`): a live Deployment of the target's name that does not carry this
assignment's federation and spread uid is never adopted or modified (except one of this
federation made for, or released by, an earlier spread of the same key, and one made by an
earlier agent version for the same spread); it is a conflict, reported per spread in the pod
counts (`conflicts()`), and looked at again every `CONFLICT_PAUSE` seconds.

A spread's namespace that does not exist in the member is created (labelled
`fedspread.io/created-by=agent`), as Karmada propagates namespaces; the agent never deletes one.

Removal: `remove(spread, federation=...)` for an explicit SpreadRemoval (`release` when the
removal orphans the workload: it keeps running, unmanaged), both only for Deployments marked with
the removal's federation (`agents.controller.removal`). Nothing else deletes a member
Deployment: `sync_once` never removes one because no assignment names it (an agent whose
coordinator reads an empty or wrong hub would otherwise delete every workload of its cluster). A
Deployment whose assignment is gone stays as last written until its coordinator sends a removal;
the agent's Hello lists it, so a coordinator that knows why sends one at the next resync.

Per kind (`agents.controller.kinds`): what is kept of the hub object, which field carries the
quantity, how it is read back and which API calls write it belong to the kind's strategy, chosen
by `federation.core.workload_kinds.policy_for`; this module is the same for every kind, save
that a kind may hold a creation back (`not_creatable`: a member Job with no completions assigned
here yet, outcome `waiting`). An assignment of a kind the agent does not write fails for that
spread alone (logged once, outcome `failed`); the other spreads are synced as usual. The loop that
runs the sync is `agents.controller.workload_loop`.

Scale-down after the costs: a write that lowers the quantity of a kind whose scale-down deletion
costs steer waits (`DEFERRED`, at most `SCALE_DOWN_WAIT` seconds) until the reconciler has written
the costs of that assignment's quotas (`costs_written`). Written the other way round, the
ReplicaSet removes by the costs of the old quotas — a subset that keeps its share can lose a pod,
the webhook refills it, and a spread whose coordinator keeps Ready pods until their replacements
are Ready (`federation.core.handover`) was seen to flap a member between two replica counts.

Member autoscalers: while a HorizontalPodAutoscaler of the member scales a spread's member
workload (`autoscaled`), the agent leaves that workload's `spec.replicas` as the member has it —
never fights the HPA, never deletes it — and writes the rest as usual; the pod counts name the HPA,
and the coordinator shows `AutoscalerConflict` on the spread.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes.client import exceptions

from agents import bookkeeping, ownership, retries
from agents.cache import store as cache_mod
from agents.controller import kinds, removal, rendering
from federation.api import names
from federation.kube import deadlines
from federation.kube import events as kube_events
from federation.rpc import assignment

LOG = logging.getLogger(__name__)

Json = dict[str, Any]
CREATED, UPDATED, UNCHANGED, DELETED, FAILED = "created", "updated", "unchanged", "deleted", "failed"
CONFLICT = "conflict"
WAITING = "waiting"
"""Not created yet, by the kind's rule (a member Job with no completions assigned here yet)."""
FAILURE_PAUSE = 30.0
"""Seconds before a desired Deployment the apiserver refused (422, say) is tried again."""
CONFLICT_PAUSE = 5.0
"""Seconds before a Deployment we do not own is read again (the cache does not see it)."""
DEFERRED = "deferred"
"""A scale-down held back until the deletion costs of its assignment are written."""
SCALE_DOWN_WAIT = 5.0
"""Seconds a scale-down waits at most for those costs (a stuck cost writer never blocks it)."""


# The pure rendering lives in agents.controller.rendering; its names stay reachable from here.
render = rendering.render
is_current = rendering.is_current
merged = rendering.merged
desired_hash = rendering.desired_hash


_RETRY = retries.kube_retry(conflicts=True, attempts=5, max_wait=5.0)


# --- the sync --------------------------------------------------------------------------------------


class WorkloadSync:
    """Creates, updates and removes the member Deployments of assigned spreads."""

    def __init__(self, apps_api: Any, books: bookkeeping.Bookkeeping, cache: cache_mod.Cache, *,
                 core_api: Any = None, batch_api: Any = None,
                 recorder: kube_events.EventRecorder | None = None) -> None:
        self._apis = kinds.Apis(apps=apps_api, batch=batch_api)
        self._recorder = recorder
        """Records an Event on each Deployment this sync creates, updates or deletes."""
        self._core = core_api  # creates a missing namespace when given
        self._books = books
        self._cache = cache
        self._rendered: dict[str, tuple[assignment.Assignment, Json]] = {}
        self._failed: dict[str, tuple[str, float]] = {}
        self._conflicts: dict[str, tuple[str, str, float]] = {}
        """Per spread: (desired hash, why, when to look again) for a target we do not own."""
        self._not_served: dict[str, str] = {}
        """Per spread: why its kind is not written (logged once per reason)."""
        self._lock = threading.Lock()
        self.rounds = 0
        """Completed `sync_once` rounds (for status and for tests that wait for a round to pass)."""
        self.costs_written: Callable[[assignment.Assignment], bool] | None = None
        """Whether the deletion costs of an assignment's quotas are written on its pods
        (`Reconciler.costs_written`); None: a scale-down is never held back."""
        self._held: dict[str, tuple[assignment.Assignment, float]] = {}
        """Per spread: the assignment whose scale-down waits for its costs, and since when."""
        self._removal = removal.WorkloadRemoval(self._apis, books, record=self._note)

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

    def autoscaled(self, value: assignment.Assignment) -> tuple[str, ...]:
        """The member HPAs that scale `value`'s member workload: while there is one, its quantity
        is the member's (`rendering.keeping_quantity`), never written back."""
        return kinds.member_autoscalers(self._cache, value)

    def apply(self, value: assignment.Assignment) -> str:
        """Bring one spread's Deployment to its assignment: CREATED, UPDATED, UNCHANGED or CONFLICT."""
        body = self.desired(value)
        kind = kinds.strategy_for(value.api_version, value.kind)
        view = kind.cached(self._cache, value.namespace, value.workload)
        if view is not None and self.autoscaled(value):
            body = rendering.keeping_quantity(body, view.quantity)
        if view is not None and is_current(annotations=view.annotations, replicas=view.quantity,
                                           desired=body) and ownership.owns(
                federation=view.federation, uid=view.annotations.get(names.SPREAD_UID_ANNOTATION),
                value=value):
            return UNCHANGED
        if view is not None and self._hold_scale_down(value, kind, wanted=kind.quantity(body),
                                                      was=view.quantity):
            return DEFERRED
        return self._write(kind, body, value)

    def _hold_scale_down(self, value: assignment.Assignment, kind: kinds.WorkloadKind, *,
                         wanted: Any, was: int | None) -> bool:
        """Whether to hold back a write that lowers the workload's quantity: its ReplicaSet picks the
        pods to remove by their deletion costs, so they must first say which pods the new quotas
        leave over (a lowered subset's), or the controller removes pods of a subset that keeps its
        share and the webhook refills it; at most `SCALE_DOWN_WAIT` seconds per assignment."""
        check = self.costs_written
        if (check is None or not kind.policy.uses_deletion_cost or not isinstance(wanted, int)
                or was is None or wanted >= was or check(value)):
            self._held.pop(value.spread, None)
            return False
        held = self._held.get(value.spread)
        if held is None or held[0] is not value:
            held = self._held[value.spread] = (value, time.monotonic())
        return time.monotonic() - held[1] < SCALE_DOWN_WAIT

    @_RETRY
    def _write(self, kind: kinds.WorkloadKind, body: Json, value: assignment.Assignment) -> str:
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        if not ownership.identified(value):
            return self._conflict(value, body, ownership.claim(labels=None, annotations=None, value=value,
                                                               where=f"{namespace}/{name}").reason)
        try:
            live = kind.read(self._apis, namespace, name)
        except exceptions.ApiException as error:
            if error.status != 404:
                raise
            waiting = kind.not_creatable(body)
            if waiting:
                LOG.debug("workload not created yet",
                          extra={"workload": f"{namespace}/{name}", "reason": waiting})
                return WAITING
            created = self._create(kind, namespace, body)
            self._resolved(value.spread)
            LOG.info("deployment created",
                     extra={"deployment": f"{namespace}/{name}", "replicas": kind.quantity(body)})
            self._note(created, body, reason="Created", action="Create",
                       note=f"created with {kind.quantity(body)} replicas for spread {value.spread}")
            return CREATED
        meta = live.get("metadata") or {}
        verdict = ownership.claim(labels=meta.get("labels"), annotations=meta.get("annotations"),
                                  value=value, where=f"{namespace}/{name}")
        if verdict.verdict == ownership.CONFLICT:
            return self._conflict(value, body, verdict.reason)
        self._resolved(value.spread)
        was = kind.quantity(live)
        if self.autoscaled(value):
            body = rendering.keeping_quantity(body, was)
        if is_current(annotations=meta.get("annotations"), replicas=was, desired=body):
            return UNCHANGED
        if verdict.verdict == ownership.ADOPT:
            LOG.info("adopting", extra={"deployment": f"{namespace}/{name}", "reason": verdict.reason})
        response = kind.replace(self._apis, namespace, name, merged(live, body))
        LOG.info("deployment updated",
                 extra={"deployment": f"{namespace}/{name}", "replicas": kind.quantity(body)})
        self._note(response, body, reason="Updated", action="Update",
                   note=f"updated for spread {value.spread} (generation {value.generation}): "
                        f"{was} -> {kind.quantity(body)} replicas")
        return UPDATED

    def _conflict(self, value: assignment.Assignment, body: Json, reason: str) -> str:
        digest = body["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION]
        with self._lock:
            known = self._conflicts.get(value.spread)
            self._conflicts[value.spread] = (digest, reason, time.monotonic() + CONFLICT_PAUSE)
        if known is None or known[1] != reason:
            LOG.warning("deployment left alone", extra={"spread": value.spread, "reason": reason})
        return CONFLICT

    def _resolved(self, spread: str) -> None:
        with self._lock:
            if self._conflicts.pop(spread, None) is not None:
                LOG.info("deployment conflict resolved", extra={"spread": spread})

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
            kube_events.ObjectRef(str(sent["apiVersion"]), str(sent["kind"]), str(meta["name"]),
                                  namespace=str(meta.get("namespace") or ""), uid=str(meta.get("uid") or "")),
            reason=reason, action=action, note=note)

    def _create(self, kind: kinds.WorkloadKind, namespace: str, body: Json) -> Any:
        """Create the workload (the client's response); a namespace the member lacks is created
        first (as Karmada does)."""
        try:
            return kind.create(self._apis, namespace, body)
        except exceptions.ApiException as error:
            if error.status != 404 or self._core is None:
                raise
        try:
            meta = {"name": namespace, "labels": {names.CREATED_BY_LABEL: "agent"}}
            self._core.create_namespace({"metadata": meta}, _preload_content=False,
                                        _request_timeout=deadlines.CALL)
            LOG.info("namespace created", extra={"namespace": namespace})
        except exceptions.ApiException as error:
            if error.status != 409:  # 409: created meanwhile
                raise
        return kind.create(self._apis, namespace, body)

    def sync_once(self) -> dict[str, int]:
        """Apply every assignment; outcome counts. Deletes nothing (module docstring)."""
        outcomes: dict[str, int] = {}
        current = self._books.assignments()
        now = time.monotonic()
        for value in current:
            try:
                body = self.desired(value)
            except kinds.KindNotServed as error:
                outcomes[FAILED] = outcomes.get(FAILED, 0) + 1
                self._refuse(value.spread, str(error))
                continue
            self._not_served.pop(value.spread, None)
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
                LOG.warning("deployment sync failed", extra={"spread": value.spread, "error": _reason(error)})
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assigned = {v.spread for v in current}
        for spread in set(self._rendered) - assigned:
            self._rendered.pop(spread, None)
        for spread in set(self._held) - assigned:
            del self._held[spread]
        for spread in set(self._not_served) - assigned:
            del self._not_served[spread]
        with self._lock:
            for spread in set(self._conflicts) - assigned:
                del self._conflicts[spread]
        self.rounds += 1
        return outcomes

    def _refuse(self, spread: str, why: str) -> None:
        """An assignment of a kind not written here: said once per spread and reason, not every round."""
        if self._not_served.get(spread) != why:
            LOG.warning("workload not written", extra={"spread": spread, "error": why})
            self._not_served[spread] = why

    def remove(self, spread: str, *, federation: str) -> int:
        """Delete the Deployments this agent made for `spread` in `federation` (a SpreadRemoval
        received from a coordinator of that federation); how many (`removal.WorkloadRemoval.remove`).
        Call after `Bookkeeping.remove_assignment`, or the next round recreates them."""
        self._forget(spread)
        return self._removal.remove(spread, federation=federation)

    def release(self, spread: str, *, federation: str) -> int:
        """Stop managing `spread`'s Deployments of `federation` but leave them running (a
        SpreadRemoval that orphans its workload); how many (`removal.WorkloadRemoval.release`)."""
        self._forget(spread)
        return self._removal.release(spread, federation=federation)

    def _forget(self, spread: str) -> None:
        self._rendered.pop(spread, None)
        self._failed.pop(spread, None)
        with self._lock:
            self._conflicts.pop(spread, None)


def _reason(error: BaseException) -> str:
    if isinstance(error, exceptions.ApiException):
        return f"{error.status} {str(error.body or error.reason)[:300]}"
    return str(error)[:300]
