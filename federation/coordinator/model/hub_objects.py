"""The hub objects spreads' pods need, and what each spread's assignments carry of them.

Why: a pod template that mounts a ConfigMap, reads a Secret, pulls with an image pull secret or
runs under its own ServiceAccount fails in a member cluster unless the object is there. The hub
is the source of truth: the coordinator follows the hub's ConfigMaps, Secrets, ServiceAccounts
and PersistentVolumeClaims, and the kinds `spec.propagate` may list (Services, PodDisruptionBudgets,
NetworkPolicies, Roles, RoleBindings; `hub/watcher.py`), keeps them here, and each
assignment of a spread with `propagateDependencies` carries the member copies of the objects its
template references and its `spec.propagate` lists (`core.dependencies.references`,
`core.member_copy.member_copy`), so an agent creates them in the same turn as, and before, the
workload, and a change on the hub reaches every cluster the spread runs in as a changed assignment.

What is kept: the objects' bodies as the hub's apiserver returned them, less `managedFields` and
status, by (namespace, kind, name). A ServiceAccount token Secret is never kept (tokens are minted
per cluster, `member_copy` refuses them). **A Secret's data is held only while delivery needs it**:
while some spread's template references it (an assignment, or a resync at any time, must carry its
copy). Every other Secret the hub watch reports is only known to exist (`exists`, for the
`DependencyMissing` and `status.dependencies` answers); its data is dropped. When a spread comes to
reference such a Secret, its key is `wanted`: the coordinator reads that one Secret from the hub
(`hub/secret_reads.py`, before the spread's event is applied, so the copy still reaches the members
before the workload) and puts it here. A Secret no spread references any more loses its data
again. Held data lives in memory only: nothing in this module logs a body, and `DependencyCopy`
leaves the body out of its `repr`.

`affected` answers which spreads an object's change concerns: the spreads of its namespace whose
template references it or whose `spec.propagate` lists it, with `propagateDependencies` on. Their
references are cached per spread and template (a template is read once per change, not once per hub event).

Pure: no Kubernetes client; the watcher feeds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from federation.api import propagate as propagate_api
from federation.core import dependencies, member_copy

KINDS = (dependencies.CONFIG_MAP, dependencies.SECRET, dependencies.SERVICE_ACCOUNT,
         dependencies.PERSISTENT_VOLUME_CLAIM)
"""The kinds the coordinator follows on the hub for dependencies."""

_KEPT_TOP = ("apiVersion", "kind", "metadata", "data", "binaryData", "stringData", "immutable", "type",
             "imagePullSecrets", "automountServiceAccountToken", "spec", "rules", "subjects", "roleRef")

_Key = tuple[str, str, str]  # namespace, kind, name
Propagated = tuple[dependencies.Reference, ...]


def propagated(entries: Sequence[propagate_api.PropagateRef]) -> Propagated:
    """A spread's `spec.propagate` entries as references (never optional: the user named them)."""
    return tuple(dependencies.Reference(e.api_version, e.kind, e.name) for e in entries)


def pod_spec_of(template: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The pod template's spec of a hub workload (`spec.template.spec`); {} when it has none."""
    spec = (template or {}).get("spec")
    pod = spec.get("template") if isinstance(spec, Mapping) else None
    pod_spec = pod.get("spec") if isinstance(pod, Mapping) else None
    return pod_spec if isinstance(pod_spec, Mapping) else {}


def kept_body(kind: str, obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """What is kept of a hub object of `kind`: its top-level fields less status, its metadata less
    managedFields; None for an object that is never copied (a ServiceAccount token Secret)."""
    if kind == dependencies.SECRET and obj.get("type") == member_copy.SERVICE_ACCOUNT_TOKEN_TYPE:
        return None
    body = {k: v for k, v in obj.items() if k in _KEPT_TOP}
    body.setdefault("apiVersion", "v1")
    body["kind"] = kind
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping):
        body["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
    return body


class HubObjects:
    """The hub's dependency objects by (namespace, kind, name), and spreads' references to them."""

    def __init__(self) -> None:
        self._objects: dict[_Key, dict[str, Any]] = {}
        self._references: dict[str, tuple[object, Propagated, tuple[dependencies.Reference, ...]]] = {}
        """Per spread key: (the template read, its propagate entries, the references of both); a new
        template object is read again."""
        self._unheld: set[_Key] = set()
        """Secrets the hub has whose data is not kept: no spread references them."""
        self._secret_users: dict[_Key, set[str]] = {}
        """Per Secret, the spreads whose references name it; its data is kept while there is one."""
        self._wanted: set[_Key] = set()
        """Referenced Secrets whose data is not kept: to be read from the hub (`take_wanted`)."""

    def __len__(self) -> int:
        return len(self._objects)

    def put(self, namespace: str, kind: str, name: str, obj: Mapping[str, Any] | None, *,
            hold: bool = False) -> bool:
        """The hub's object as last seen (None: deleted, or never copied); whether what is kept
        changed. A Secret's data is kept only while a spread references it, or with `hold` (read
        from the hub for a spread about to reference it: `settle` drops it if none does)."""
        key = (namespace, kind, name)
        body = kept_body(kind, obj) if obj is not None else None
        self._wanted.discard(key)
        if body is None:
            self._unheld.discard(key)
            return self._objects.pop(key, None) is not None
        if kind == dependencies.SECRET and not hold and not self._secret_users.get(key):
            self._unheld.add(key)
            return self._objects.pop(key, None) is not None
        self._unheld.discard(key)
        if self._objects.get(key) == body:
            return False
        self._objects[key] = body
        return True

    def exists(self, namespace: str, kind: str, name: str) -> bool:
        """Whether the hub has the object (a Secret no spread references counts: only its data is
        not kept)."""
        key = (namespace, kind, name)
        return key in self._objects or key in self._unheld

    def unheld_secrets(self, namespace: str, template: Mapping[str, Any] | None) -> list[str]:
        """The Secrets `template` (a hub workload) references that the hub has and whose data is not
        kept, by name: what to read before a spread of it is placed."""
        return sorted({ref.name for ref in dependencies.references(pod_spec_of(template))
                       if ref.kind == dependencies.SECRET
                       and (namespace, dependencies.SECRET, ref.name) in self._unheld})

    def take_wanted(self) -> list[tuple[str, str]]:
        """Secrets (namespace, name) a spread references whose data is not kept, once each: the
        coordinator reads them from the hub and `put`s them (`want_again` if a read failed)."""
        found = sorted((namespace, name) for namespace, _, name in self._wanted)
        self._wanted.clear()
        return found

    def want_again(self, secrets: Iterable[tuple[str, str]]) -> None:
        """Reads of these Secrets failed: `take_wanted` lists them again while still needed."""
        for namespace, name in secrets:
            key = (namespace, dependencies.SECRET, name)
            if key in self._unheld and self._secret_users.get(key):
                self._wanted.add(key)

    def settle(self, secrets: Iterable[tuple[str, str]]) -> None:
        """Of Secrets put with `hold`, drop the data of those no spread references."""
        for namespace, name in secrets:
            key = (namespace, dependencies.SECRET, name)
            if not self._secret_users.get(key) and self._objects.pop(key, None) is not None:
                self._unheld.add(key)

    def _track(self, spread: str, before: Sequence[dependencies.Reference],
               after: Sequence[dependencies.Reference]) -> None:
        """Spread `spread`'s Secret references went from `before` to `after`."""
        namespace = spread.partition("/")[0]
        old = {(namespace, dependencies.SECRET, r.name) for r in before if r.kind == dependencies.SECRET}
        new = {(namespace, dependencies.SECRET, r.name) for r in after if r.kind == dependencies.SECRET}
        for key in new - old:
            self._secret_users.setdefault(key, set()).add(spread)
            if key in self._unheld:
                self._wanted.add(key)
        for key in old - new:
            users = self._secret_users.get(key, set())
            users.discard(spread)
            if not users:
                self._secret_users.pop(key, None)
                self._wanted.discard(key)
                if self._objects.pop(key, None) is not None:
                    self._unheld.add(key)

    def references(self, spread: str, template: Mapping[str, Any] | None,
                   propagate: Propagated = ()) -> tuple[dependencies.Reference, ...]:
        """What the pod template of spread `spread`'s workload references, and the objects its
        `spec.propagate` lists (`propagate`), once each, sorted by kind and name (cached per template)."""
        cached = self._references.get(spread)
        if cached is not None and cached[0] is template and cached[1] == propagate:
            return cached[2]
        found = dependencies.references(pod_spec_of(template))
        named = {(ref.kind, ref.name) for ref in found}
        found = tuple(sorted((*found, *(ref for ref in propagate if (ref.kind, ref.name) not in named)),
                             key=lambda ref: (ref.kind, ref.name)))
        self._track(spread, cached[2] if cached is not None else (), found)
        self._references[spread] = (template, propagate, found)
        return found

    def forget(self, spread: str) -> None:
        """Spread `spread` is gone: drop its cached references (and the data of Secrets only it used)."""
        cached = self._references.pop(spread, None)
        if cached is not None:
            self._track(spread, cached[2], ())

    def affected(self, namespace: str, kind: str, name: str,
                 spreads: Iterable[tuple[str, bool, Mapping[str, Any] | None, Propagated]]) -> set[str]:
        """Of `spreads` (key, propagateDependencies, template, propagate entries), those of
        `namespace` whose template references `kind`/`name`, or whose propagate lists it, and that
        propagate their dependencies."""
        found: set[str] = set()
        for key, propagate_dependencies, template, entries in spreads:
            if not propagate_dependencies or key.partition("/")[0] != namespace:
                continue
            if any(ref.kind == kind and ref.name == name for ref in self.references(key, template, entries)):
                found.add(key)
        return found

    def get(self, namespace: str, kind: str, name: str) -> Mapping[str, Any] | None:
        """The hub's object as kept, or None."""
        return self._objects.get((namespace, kind, name))

    def missing(self, spread: str, template: Mapping[str, Any] | None,
                propagate: Propagated = ()) -> tuple[dependencies.Reference, ...]:
        """The required references of spread `spread`'s template, and its propagate entries, the hub
        does not have (`DependencyMissing`)."""
        namespace = spread.partition("/")[0]
        refs = self.references(spread, template, propagate)
        present = [(ref.kind, ref.name) for ref in refs if self.exists(namespace, ref.kind, ref.name)]
        return dependencies.missing(refs, present)
