"""The objects a spread's pods need, copied into this member cluster before its workload.

Why: a Deployment whose pods mount a ConfigMap, read a Secret, pull with an image pull secret or
run under their own ServiceAccount fails in a member that lacks them (`CreateContainerConfigError`,
`ErrImagePull`, refused by the ServiceAccount admission). Each assignment of a spread with
`propagateDependencies` names every object its template references, with the member copy the
coordinator made of the hub's (`SpreadAssignment.dependencies`; the hub is the source of truth).
The workload loop runs `sync_once` before the workload sync in every turn, so a new spread's
objects exist before its Deployment is created, and a changed object reaches the member as soon
as its changed assignment arrives. The objects a spread's `spec.propagate` lists (a Service, a
PodDisruptionBudget, a NetworkPolicy, a Role, a RoleBinding) come the same way and follow the same
rules; each is written at the apiVersion the coordinator gives (the hub's), and one the member
refuses (a Role beyond the agent's rights) stops none of the others.

Ownership, as for workloads (`agents.ownership`): a copy carries this federation's label and the
set of spreads that need it here (`fedspread.io/needed-by`); a same-name object without our
federation's label is never touched — the spread's pod counts report it (`conflicts`), and it is
read again every `CONFLICT_PAUSE` seconds. One object may serve several spreads: each adds itself
to the set. A spread leaves the set when its assignment stops naming the object (its template
changed) or an explicit removal of it arrives (`remove`); the copy is deleted only when the set is
empty and no spread removed with `deletionPolicy: Orphan` (`release`), or that stopped propagating
its dependencies, is recorded on it (`fedspread.io/orphaned-by`): its workload still runs and may
still use the copy. Nothing is deleted by absence: the agent leaves a spread's copies only for
what it was told (the references it last applied, kept in memory; after a restart, a reference
dropped while the agent was down leaves its copy in place, marked, never deleted).

An object the hub lacks (no copy in the assignment) is not created, and a copy already here is
kept as it is (the spread stays recorded on it): a hub object deleted by mistake must not break
the pods of every member. Writes are minimal: the copy carries a hash of the hub body it was made
from (`agents.controller.dependency_bodies`: the marks, the hash, what a rewrite keeps), and an
unchanged assignment is not looked at again for `RESYNC_SECONDS` (then one read per
object shows a copy deleted by hand in the member, which is put back; an edit by hand is replaced
when the hub's object next changes). A claim's spec
is immutable once bound: its copy is created from the hub's and afterwards only its marks change;
a ServiceAccount keeps the token secrets its cluster added.

Secrets: a copy's body is never logged; a failed call is logged with its status and reason only
(an apiserver's error body may quote the object).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from typing import Any

from kubernetes import client
from kubernetes.client import exceptions

from agents import bookkeeping, retries
from agents.controller import dependency_bodies as bodies
from federation.api import names
from federation.kube import deadlines
from federation.rpc import assignment

LOG = logging.getLogger(__name__)

Json = dict[str, Any]
CREATED, UPDATED, UNCHANGED, DELETED, CONFLICT, ABSENT, FAILED = (
    "created", "updated", "unchanged", "deleted", "conflict", "absent", "failed")
CONFLICT_PAUSE = 5.0
"""Seconds before a spread whose objects include one we do not own is looked at again."""
FAILURE_PAUSE = 10.0
"""Seconds before a spread whose objects could not be written is tried again."""
RESYNC_SECONDS = 60.0
"""Seconds before an unchanged spread's copies are read again (a copy removed or edited by hand)."""

_SUFFIX = {"ConfigMap": "config_map", "Secret": "secret", "ServiceAccount": "service_account",
           "PersistentVolumeClaim": "persistent_volume_claim", "Service": "service"}
"""Kind of the core group -> the CoreV1Api method suffix (`read_namespaced_<suffix>`, ...)."""
_PLURAL = {"PodDisruptionBudget": "poddisruptionbudgets", "NetworkPolicy": "networkpolicies",
           "Role": "roles", "RoleBinding": "rolebindings"}
"""Kind of another group (`spec.propagate`) -> its resource, called at the copy's apiVersion by the
apiserver's generic path (the typed client lacks policy/v1beta1, which Kubernetes 1.20 serves)."""
_DEFAULT_VERSION = {"PodDisruptionBudget": "policy/v1", "NetworkPolicy": "networking.k8s.io/v1",
                    "Role": "rbac.authorization.k8s.io/v1", "RoleBinding": "rbac.authorization.k8s.io/v1"}

_RETRY = retries.kube_retry(conflicts=True, attempts=4, max_wait=3.0)

Ref = tuple[str, str]  # kind, name


@dataclasses.dataclass(frozen=True)
class _Applied:
    """What one spread's last applied assignment named: the objects it is recorded on."""

    digest: str
    namespace: str
    refs: frozenset[Ref]
    versions: dict[Ref, str] = dataclasses.field(default_factory=dict)
    """The apiVersion each copy was written at (`v1` unless listed)."""



class DependencySync:
    """Creates, updates and removes the member copies of the objects assigned spreads need."""

    def __init__(self, core_api: Any, books: bookkeeping.Bookkeeping) -> None:
        self._core = core_api
        self._custom = client.CustomObjectsApi(core_api.api_client)
        self._books = books
        self._applied: dict[str, _Applied] = {}
        self._again: dict[str, float] = {}
        """Per spread: when its copies are looked at again although its assignment is unchanged."""
        self._conflicts: dict[str, tuple[str, ...]] = {}
        self._digests: dict[str, tuple[assignment.Assignment, str]] = {}
        """Per spread: the digest of its assignment object (hashed once per assignment received)."""
        self._lock = threading.Lock()

    def conflicts(self) -> dict[str, tuple[str, ...]]:
        """Per spread: the objects it needs here (`Kind/name`) that we do not own (reported)."""
        with self._lock:
            return dict(self._conflicts)

    # --- the sync --------------------------------------------------------------------------

    def sync_once(self) -> dict[str, int]:
        """Bring every assigned spread's copies to its assignment; outcome counts per object."""
        outcomes: dict[str, int] = {}
        now = time.monotonic()
        current = self._books.assignments()
        for value in current:
            if not value.federation:  # no identity: nothing can be marked ours
                continue
            memo = self._digests.get(value.spread)
            digest = memo[1] if memo is not None and memo[0] is value else bodies.digest(value)
            self._digests[value.spread] = (value, digest)
            applied = self._applied.get(value.spread)
            if applied is not None and applied.digest == digest and now < self._again.get(value.spread, 0.0):
                continue
            try:
                found = self._apply(value, digest, applied)
            except Exception as error:
                self._again[value.spread] = now + FAILURE_PAUSE
                LOG.warning("dependencies sync failed",
                            extra={"spread": value.spread, "error": _reason(error)})
                outcomes["failed"] = outcomes.get("failed", 0) + 1
                continue
            conflicted = tuple(ref for ref, outcome in found.items() if outcome == CONFLICT)
            pause = FAILURE_PAUSE if FAILED in found.values() else CONFLICT_PAUSE if conflicted \
                else RESYNC_SECONDS
            self._again[value.spread] = now + pause
            self._set_conflicts(value.spread, conflicted)
            for outcome in found.values():
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assigned = {v.spread for v in current}
        for spread in set(self._digests) - assigned:
            del self._digests[spread]
        with self._lock:
            for spread in set(self._conflicts) - assigned:
                del self._conflicts[spread]
        return outcomes

    def _apply(self, value: assignment.Assignment, digest: str, applied: _Applied | None) -> dict[str, str]:
        same = applied is not None and applied.namespace == value.namespace
        previous = applied.refs if applied is not None and same else frozenset()
        versions = applied.versions if applied is not None and same else {}
        found: dict[str, str] = {}
        if not value.propagate_dependencies:  # handed over: they stay, no longer updated for it
            for ref in sorted(previous):
                self._leave(value.namespace, ref, versions.get(ref), spread=value.spread,
                            federation=value.federation, orphan=True)
            self._applied[value.spread] = _Applied(digest, value.namespace, frozenset())
            return found
        for dependency in value.dependencies:  # one refused object (a Role beyond our rights) stops no other
            try:
                found[dependency.ref] = self._ensure(value, dependency)
            except Exception as error:
                found[dependency.ref] = FAILED
                LOG.warning("dependency not written",
                            extra={"object": f"{dependency.kind}/{value.namespace}/{dependency.name}",
                                   "spread": value.spread, "error": _reason(error)})
        now_named = frozenset((d.kind, d.name) for d in value.dependencies)
        for ref in sorted(previous - now_named):  # no longer referenced by its template
            found[f"{ref[0]}/{ref[1]}"] = self._leave(value.namespace, ref, versions.get(ref),
                                                      spread=value.spread, federation=value.federation,
                                                      orphan=False)
        self._applied[value.spread] = _Applied(digest, value.namespace, now_named, {
            (d.kind, d.name): d.api_version for d in value.dependencies if d.api_version != "v1"})
        return found

    @_RETRY
    def _ensure(self, value: assignment.Assignment, dependency: assignment.DependencyCopy) -> str:
        namespace, kind, name, version = value.namespace, dependency.kind, dependency.name, \
            dependency.api_version
        live = self._read(kind, version, namespace, name)
        if live is None:
            if dependency.body is None:
                return ABSENT  # the hub has none either: DependencyMissing says so on the hub
            body = bodies.marked(dependency.body, federation=value.federation, needers={value.spread},
                                 orphaned=set())
            body["metadata"]["namespace"] = namespace
            self._create(kind, version, namespace, body)
            LOG.info("dependency created",
                     extra={"object": f"{kind}/{namespace}/{name}", "spread": value.spread})
            return CREATED
        meta = live.get("metadata") or {}
        if (meta.get("labels") or {}).get(names.FEDERATION_LABEL) != value.federation:
            with self._lock:
                known = value.spread in self._conflicts and dependency.ref in self._conflicts[value.spread]
            if not known:
                LOG.warning("dependency left alone", extra={
                    "object": f"{kind}/{namespace}/{name}", "spread": value.spread,
                    "reason": "exists without this federation's mark"})
            return CONFLICT
        annotations = meta.get("annotations") or {}
        had_needers, had_orphaned = bodies.names_in(annotations.get(names.NEEDED_BY_ANNOTATION)), \
            bodies.names_in(annotations.get(names.ORPHANED_BY_ANNOTATION))
        needers, orphaned = had_needers | {value.spread}, had_orphaned - {value.spread}
        same_marks = (needers, orphaned) == (had_needers, had_orphaned)
        if dependency.body is None:  # gone from the hub: kept as it is, the spread still recorded
            if same_marks:
                return UNCHANGED
            new = bodies.marked({k: v for k, v in live.items() if k != "status"},
                                federation=value.federation, needers=needers, orphaned=orphaned)
            new["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION] = \
                annotations.get(names.DESIRED_HASH_ANNOTATION, "")
        else:
            hashed = bodies.source_hash(dependency.body)
            if same_marks and annotations.get(names.DESIRED_HASH_ANNOTATION) == hashed:
                return UNCHANGED
            new = bodies.marked(dependency.body, federation=value.federation, needers=needers,
                                orphaned=orphaned)
            new["metadata"]["namespace"] = namespace
        self._replace(kind, version, namespace, name, bodies.keep_allocated(kind, live, new))
        LOG.info("dependency updated", extra={"object": f"{kind}/{namespace}/{name}", "spread": value.spread})
        return UPDATED

    # --- removals ----------------------------------------------------------------------------

    def remove(self, spread: str, *, federation: str) -> int:
        """Spread `spread` was removed from this cluster (its workload deleted): it no longer needs
        its copies here; each no other spread needs (nor orphaned) is deleted. How many."""
        return self._forget(spread, federation=federation, orphan=False)

    def release(self, spread: str, *, federation: str) -> int:
        """Spread `spread` was removed with its workload orphaned (it keeps running): its copies
        stay, recorded as orphaned by it, never deleted while so recorded. How many were touched."""
        return self._forget(spread, federation=federation, orphan=True)

    def _forget(self, spread: str, *, federation: str, orphan: bool) -> int:
        applied = self._applied.pop(spread, None)
        self._again.pop(spread, None)
        self._set_conflicts(spread, ())
        if applied is None or not federation or self._books.assignment(spread) is not None:
            return 0  # nothing recorded here, or a spread of the key assigned again since: it keeps them
        return sum(int(self._leave(applied.namespace, ref, applied.versions.get(ref), spread=spread,
                                   federation=federation, orphan=orphan) != UNCHANGED)
                   for ref in sorted(applied.refs))

    @_RETRY
    def _leave(self, namespace: str, ref: Ref, version: str | None, *, spread: str, federation: str,
               orphan: bool) -> str:
        """`spread` leaves the copy `ref` (written at `version`, None: the kind's default);
        deleted when no spread needs it and none orphaned it."""
        kind, name = ref
        version = version or _DEFAULT_VERSION.get(kind, "v1")
        live = self._read(kind, version, namespace, name)
        meta = (live or {}).get("metadata") or {}
        if live is None or (meta.get("labels") or {}).get(names.FEDERATION_LABEL) != federation:
            return UNCHANGED  # gone, or not ours: never touched
        annotations = meta.get("annotations") or {}
        had_needers = bodies.names_in(annotations.get(names.NEEDED_BY_ANNOTATION))
        had_orphaned = bodies.names_in(annotations.get(names.ORPHANED_BY_ANNOTATION))
        needers = had_needers - {spread}
        orphaned = had_orphaned | ({spread} if orphan and spread in had_needers else set())
        if not needers and not orphaned:
            self._delete(kind, version, namespace, name, uid=str(meta.get("uid") or ""))
            LOG.info("dependency deleted", extra={"object": f"{kind}/{namespace}/{name}", "spread": spread})
            return DELETED
        if (needers, orphaned) == (had_needers, had_orphaned):
            return UNCHANGED
        new = bodies.marked({k: v for k, v in live.items() if k != "status"}, federation=federation,
                            needers=needers, orphaned=orphaned)
        new["metadata"]["annotations"][names.DESIRED_HASH_ANNOTATION] = \
            annotations.get(names.DESIRED_HASH_ANNOTATION, "")
        self._replace(kind, version, namespace, name, new)
        return UPDATED

    def _set_conflicts(self, spread: str, refs: tuple[str, ...]) -> None:
        with self._lock:
            if refs:
                self._conflicts[spread] = refs
            else:
                self._conflicts.pop(spread, None)

    # --- API calls -----------------------------------------------------------------------------

    def _call(self, verb: str, kind: str, version: str, namespace: str, *rest: Any, **kwargs: Any) -> Any:
        """`verb` (read, create, replace, delete) on a copy of `kind` at apiVersion `version`; `rest`
        is the name (not for create), then the body (create, replace)."""
        options: dict[str, Any] = {"_preload_content": False, "_request_timeout": deadlines.CALL, **kwargs}
        plural = _PLURAL.get(kind)
        if plural is None:
            method = getattr(self._core, f"{verb}_namespaced_{_SUFFIX[kind]}")
            args = (namespace, *rest) if verb == "create" else (rest[0], namespace, *rest[1:])
            return method(*args, **options)
        group, _, number = version.partition("/")
        custom = {"read": "get", "create": "create", "replace": "replace", "delete": "delete"}[verb]
        method = getattr(self._custom, f"{custom}_namespaced_custom_object")
        return method(group, number, namespace, plural, *rest, **options)

    def _read(self, kind: str, version: str, namespace: str, name: str) -> Json | None:
        try:
            found: Json = json.loads(self._call("read", kind, version, namespace, name).data)
        except exceptions.ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    def _replace(self, kind: str, version: str, namespace: str, name: str, body: Json) -> None:
        self._call("replace", kind, version, namespace, name, body)

    def _delete(self, kind: str, version: str, namespace: str, name: str, *, uid: str) -> None:
        options: Json = {"preconditions": {"uid": uid}} if uid else {}
        try:
            self._call("delete", kind, version, namespace, name, body=options)
        except exceptions.ApiException as error:
            if error.status not in (404, 409):  # gone, or replaced meanwhile (not ours to delete)
                raise

    def _create(self, kind: str, version: str, namespace: str, body: Json) -> None:
        """Create the copy; a namespace the member lacks is created first (as for workloads)."""
        try:
            self._call("create", kind, version, namespace, body)
            return
        except exceptions.ApiException as error:
            if error.status != 404:
                raise
        try:
            meta = {"name": namespace, "labels": {names.CREATED_BY_LABEL: "agent"}}
            self._core.create_namespace({"metadata": meta}, _preload_content=False,
                                        _request_timeout=deadlines.CALL)
            LOG.info("namespace created", extra={"namespace": namespace})
        except exceptions.ApiException as error:
            if error.status != 409:
                raise
        self._call("create", kind, version, namespace, body)


def _reason(error: BaseException) -> str:
    """A failed call in a log line: its status and reason, never its body (it may quote a Secret)."""
    if isinstance(error, exceptions.ApiException):
        return f"{error.status} {error.reason}"
    return type(error).__name__
