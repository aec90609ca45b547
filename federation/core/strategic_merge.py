"""Strategic-merge patch for core/v1 Pod objects, as the apiserver and kubectl apply it.

Why our own: a subset's `patch` (as in Kruise's WorkloadSpread) is a strategic-merge patch, and the webhook
must apply it without a Kubernetes client on the admission path (federation.core is pure). A plain
JSON merge patch would be wrong: `spec.containers` is merged by container name, so a patch naming
one container must leave the others alone. Only Pods are patched, so the patch strategy of each list
is a table of paths below (taken from the `patchMergeKey`/`patchStrategy` tags of core/v1 types),
not a reflection of Go structs.

Semantics: maps merge recursively and a `null` value deletes the key; lists listed in
`MERGE_KEYS` merge element by element on their merge key (a new element is appended); lists in
`PRIMITIVE_MERGE_LISTS` are a union; every other list (`spec.tolerations`, `envFrom`, `args`, ...)
is replaced. Directives: `$patch: delete` on a keyed list element removes the element with that key;
`$patch: replace` on a map replaces the map, and as a lone list element replaces the list;
`$patch: delete` on a map removes the map; `$retainKeys` and `$deleteFromPrimitiveList/<field>` work
as in Kubernetes; `$setElementOrder/<field>` is accepted and ignored (merged order: original elements
in place, new ones appended). Nulls and directives inside values new to the original are dropped, as
the apiserver does (IgnoreUnmatchedNulls).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
_CONTAINER_FIELD_KEYS = {
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}

MERGE_KEYS: Mapping[str, str] = {
    "metadata.ownerReferences": "uid",
    "spec.volumes": "name",
    "spec.imagePullSecrets": "name",
    "spec.hostAliases": "ip",
    "spec.topologySpreadConstraints": "topologyKey",
    "spec.schedulingGates": "name",
    "spec.resourceClaims": "name",
    **{f"spec.{kind}": "name" for kind in _CONTAINER_LISTS},
    **{
        f"spec.{kind}[].{field}": key
        for kind in _CONTAINER_LISTS
        for field, key in _CONTAINER_FIELD_KEYS.items()
    },
}
"""Lists merged element by element, by path ('[]' marks a list element) -> the merge key."""

PRIMITIVE_MERGE_LISTS = frozenset({"metadata.finalizers"})
"""Lists of scalars with patchStrategy merge: the patch's values are added (set union)."""

_PATCH = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder/"
_DELETE_FROM = "$deleteFromPrimitiveList/"


def to_plain(value: Any) -> Any:
    """A deep copy made of plain dicts and lists (any Mapping or tuple converted)."""
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    return value


def apply(original: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """The original Pod (JSON dict) with the strategic-merge patch applied; inputs stay untouched.

    ValueError (with the field path) for an unknown directive or a keyed list element lacking
    its merge key.
    """
    if not isinstance(original, Mapping) or not isinstance(patch, Mapping):
        raise ValueError("a strategic-merge patch applies an object to an object")
    merged = _merge_map(to_plain(original), patch, "")
    return {} if merged is None else merged


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _where(path: str) -> str:
    return path or "<root>"


def _merge_map(target: dict[str, Any], patch: Mapping[str, Any], path: str) -> dict[str, Any] | None:
    """Merge patch into target (owned by the caller, changed in place); None deletes the map."""
    directive = patch.get(_PATCH, "merge")
    if directive == "delete":
        return None
    if directive == "replace":
        target = {}
    elif directive != "merge":
        raise ValueError(f"{_where(path)}: unknown $patch directive {directive!r}")
    retain = patch.get(_RETAIN_KEYS)
    if retain is not None:
        if not isinstance(retain, list):
            raise ValueError(f"{_where(path)}: $retainKeys must be a list")
        target = {k: v for k, v in target.items() if k in retain}
    for key, values in patch.items():
        if isinstance(key, str) and key.startswith(_DELETE_FROM):
            field = key[len(_DELETE_FROM) :]
            current = target.get(field)
            if isinstance(current, list) and isinstance(values, list):
                target[field] = [v for v in current if v not in values]
    for key, value in patch.items():
        if not isinstance(key, str):
            raise ValueError(f"{_where(path)}: field names must be strings, got {key!r}")
        if key in (_PATCH, _RETAIN_KEYS) or key.startswith((_SET_ORDER, _DELETE_FROM)):
            continue
        if key.startswith("$"):
            raise ValueError(f"{_where(path)}: unknown directive {key!r}")
        if value is None:
            target.pop(key, None)
            continue
        merged = _merge_value(target.get(key), value, _join(path, key))
        if merged is None:
            target.pop(key, None)
        else:
            target[key] = merged
    return target


def _merge_value(current: Any, value: Any, path: str) -> Any:
    """The merged value of one field; None removes the field."""
    if isinstance(value, Mapping):
        return _merge_map(current if isinstance(current, dict) else {}, value, path)
    if isinstance(value, list | tuple):
        return _merge_list(current if isinstance(current, list) else [], list(value), path)
    return value


def _is_list_replace(element: Any, key: str) -> bool:
    return isinstance(element, Mapping) and element.get(_PATCH) == "replace" and key not in element


def _merge_list(current: list[Any], patch: list[Any], path: str) -> list[Any]:
    """Merge a patch list into the current one according to the path's strategy."""
    if path in PRIMITIVE_MERGE_LISTS:
        result = list(current)
        for value in to_plain(patch):
            if value not in result:
                result.append(value)
        return result
    key = MERGE_KEYS.get(path)
    if key is None:
        return list(to_plain(patch))
    if any(_is_list_replace(element, key) for element in patch):
        current = []
        patch = [element for element in patch if not _is_list_replace(element, key)]
    result = list(current)
    element_path = f"{path}[]"
    for element in patch:
        if not isinstance(element, Mapping) or key not in element:
            raise ValueError(f"{path}: every element needs the merge key {key!r}, got {element!r}")
        ident = element[key]
        if element.get(_PATCH) == "delete":
            result = [old for old in result if not (isinstance(old, dict) and old.get(key) == ident)]
            continue
        index = next(
            (i for i, old in enumerate(result) if isinstance(old, dict) and old.get(key) == ident), None
        )
        if index is None:
            merged = _merge_map({}, element, element_path)
            if merged is not None:
                result.append(merged)
            continue
        merged = _merge_map(result[index], element, element_path)
        if merged is None:
            del result[index]
        else:
            result[index] = merged
    return result
