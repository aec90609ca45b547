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
per cluster, `member_copy` refuses them). Secrets are held here as the coordinator's watch cache
holds any object, in memory only: nothing in this module logs a body, and `DependencyCopy` leaves
the body out of its `repr`.

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

    def __len__(self) -> int:
        return len(self._objects)

    def put(self, namespace: str, kind: str, name: str, obj: Mapping[str, Any] | None) -> bool:
        """The hub's object as last seen (None: deleted, or never copied); whether it changed."""
        key = (namespace, kind, name)
        body = kept_body(kind, obj) if obj is not None else None
        if body is None:
            return self._objects.pop(key, None) is not None
        if self._objects.get(key) == body:
            return False
        self._objects[key] = body
        return True

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
        self._references[spread] = (template, propagate, found)
        return found

    def forget(self, spread: str) -> None:
        """Spread `spread` is gone: drop its cached references."""
        self._references.pop(spread, None)

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
        present = [(ref.kind, ref.name) for ref in refs if (namespace, ref.kind, ref.name) in self._objects]
        return dependencies.missing(refs, present)
