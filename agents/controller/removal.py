"""An explicit SpreadRemoval in this member: delete the spread's workloads, or release them running.

Why a module of its own: removal is the one path on which the agent deletes (or stops managing) a
member workload, and it is guarded apart from the sync that writes them. Only workloads marked
with the removal's federation and the spread's key and uid are touched, found on the apiserver
(not the cache: a removal is rare and must not depend on the cache being current); one that an
assignment of the same spread key held now names is kept (the spread was created again and adopts
it); a delete carries the uid as a precondition, so a workload replaced meanwhile survives.
`release` strips our marks and leaves the `released-from` mark, so only a spread of the same key
in this federation adopts it again (`agents.ownership`). `WorkloadSync.remove`/`release` call this
after forgetting what the sync held for the spread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kubernetes.client import exceptions

from agents import bookkeeping
from agents.controller import kinds
from federation.api import names

LOG = logging.getLogger(__name__)

Json = dict[str, Any]


class WorkloadRemoval:
    """Deletes or releases the member workloads of a removed spread."""

    def __init__(self, apis: kinds.Apis, books: bookkeeping.Bookkeeping, *,
                 record: Callable[..., None]) -> None:
        """`record(response, sent, reason=, action=, note=)` records an Event on a deleted workload."""
        self._apis = apis
        self._books = books
        self._record = record

    def remove(self, spread: str, *, federation: str) -> int:
        """Delete the Deployments this agent made for `spread` in `federation` (a SpreadRemoval
        received from a coordinator of that federation); how many.

        Call after `Bookkeeping.remove_assignment`, or the next sync round recreates them. A Deployment
        that an assignment of the same spread key held now names is kept (`_claimed`): it arrived
        after the removal (the spread was created again) and adopts what runs.
        """
        keep = self._claimed(spread)
        return sum(int(self._delete(kind, namespace, name, uid=uid, spread=spread))
                   for kind, namespace, name, uid in self._owned(spread, federation)
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
        released = 0
        keep = self._claimed(spread)
        ours = (names.SPREAD_KEY_ANNOTATION, names.DESIRED_HASH_ANNOTATION, names.GENERATION_ANNOTATION,
                names.TEMPLATE_REVISION_ANNOTATION, names.SPREAD_UID_ANNOTATION)
        for kind, namespace, name, _ in self._owned(spread, federation):
            if (namespace, name) in keep:
                continue
            annotations: dict[str, str | None] = {**dict.fromkeys(ours),
                                                  names.RELEASED_FROM_ANNOTATION: names.released_from(
                                                      federation, spread)}
            patch = {"metadata": {"labels": {names.SPREAD_LABEL: None, names.FEDERATION_LABEL: None},
                                  "annotations": annotations}}
            try:
                kind.merge_patch(self._apis, namespace, name, patch)
            except exceptions.ApiException as error:
                if error.status == 404:
                    continue
                raise
            LOG.info("deployment released", extra={"deployment": f"{namespace}/{name}"})
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

    def _owned(self, spread: str, federation: str) -> list[tuple[kinds.WorkloadKind, str, str, str]]:
        """(kind, namespace, name, uid) of the workloads of every kind written here made for
        `spread` and marked with `federation`, from the apiserver (a removal is rare and must not
        depend on the cache being current; it does not say the spread's kind)."""
        if not federation:
            return []
        label = f"{names.SPREAD_LABEL}={spread.partition('/')[2]},{names.FEDERATION_LABEL}={federation}"
        owned = []
        for kind in kinds.SERVED:
            for item in kind.list_labelled(self._apis, label):
                meta = item.get("metadata") or {}
                annotations = meta.get("annotations") or {}
                if (annotations.get(names.SPREAD_KEY_ANNOTATION) == spread
                        and annotations.get(names.SPREAD_UID_ANNOTATION)
                        and (meta.get("labels") or {}).get(names.FEDERATION_LABEL) == federation):
                    owned.append((kind, str(meta["namespace"]), str(meta["name"]),
                                  str(meta.get("uid") or "")))
        return owned

    def _delete(self, kind: kinds.WorkloadKind, namespace: str, name: str, *, uid: str, spread: str) -> bool:
        options: Json = {"propagationPolicy": "Background"}
        if uid:
            options["preconditions"] = {"uid": uid}
        try:
            kind.delete(self._apis, namespace, name, options)
        except exceptions.ApiException as error:
            if error.status == 404 or (error.status == 409 and uid):  # gone, or replaced meanwhile
                return False
            raise
        LOG.info("deployment deleted", extra={"deployment": f"{namespace}/{name}"})
        sent = {"apiVersion": kind.policy.api_version, "kind": kind.policy.kind,
                "metadata": {"name": name, "namespace": namespace, "uid": uid}}
        self._record(None, sent, reason="Deleted", action="Delete",
                   note=f"deleted: the coordinator removed spread {spread} from this cluster")
        return True

