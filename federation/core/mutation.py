"""What the webhook does to a Pod it assigns to a subset, as data: the mutated Pod and its JSONPatch.

Why pure: the admission path must be fast and local, and the injection rules are where
Kruise's WorkloadSpread semantics live: the subset's requiredNodeSelectorTerm is ANDed
into every required node-selector term (or becomes the only one), preferred terms and tolerations
are appended, the subset's strategic-merge `patch` is applied (a patch that changes the priority
class also drops the priority resolved from the old one), and the `fedspread.io/subset`
annotation records the choice. Keeping this free of HTTP and Kubernetes clients lets it be tested
exhaustively and lets the webhook be a thin shell: decode, `mutate_pod`, `json_patch`, encode.

Idempotent by design: an apiserver may call a webhook again (reinvocationPolicy, retries), so
injecting the same subset twice must give the same Pod as once. Requirements already in a term are
not ANDed again, and preferred terms and tolerations already present are not appended again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from federation.api import names
from federation.core import strategic_merge

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The apiserver's generateName alphabet: no vowels (no words), no 0/1/3 (look like letters)."""
NAME_SUFFIX_LENGTH = 5
MAX_NAME_LENGTH = 63

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_TERM_FIELDS = ("matchExpressions", "matchFields")


# --- walking a pod --------------------------------------------------------------------------------


def _get(parent: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    """parent[key] if present and non-null, checked to be of `kind`; None when absent."""
    value = parent.get(key)
    if value is not None and not isinstance(value, kind):
        raise ValueError(
            f"{where}: expected {'an object' if kind is dict else 'a list'}, got {type(value).__name__}"
        )
    return value


def _lookup(root: Mapping[str, Any], keys: Sequence[str], kind: type) -> Any:
    """The value at a path of map keys (None if any step is absent), type-checked on the way."""
    node: Any = root
    for depth, key in enumerate(keys):
        last = depth == len(keys) - 1
        node = _get(node, key, kind if last else dict, ".".join(keys[: depth + 1]))
        if node is None:
            return None
    return node


def _ensure(root: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """The map at a path of keys, creating missing (or null) maps on the way."""
    node = root
    for depth, key in enumerate(keys):
        child = _get(node, key, dict, ".".join(keys[: depth + 1]))
        if child is None:
            child = {}
            node[key] = child
        node = child
    return node


def _append_new(root: dict[str, Any], keys: Sequence[str], items: Sequence[Any]) -> None:
    """Append to the list at the path those items not already in it (creating it if needed)."""
    existing = _lookup(root, keys, list) or []
    added = list(existing)
    for item in strategic_merge.to_plain(list(items)):
        if item not in added:
            added.append(item)
    if len(added) > len(existing):
        _ensure(root, keys[:-1])[keys[-1]] = added


# --- injection ------------------------------------------------------------------------------------


def _and_required(pod: dict[str, Any], term: dict[str, Any]) -> None:
    """AND the term into every required node-selector term, or make it the only term."""
    required = _ensure(pod, ("spec", "affinity", "nodeAffinity", _REQUIRED))
    where = f"spec.affinity.nodeAffinity.{_REQUIRED}.nodeSelectorTerms"
    terms = _get(required, "nodeSelectorTerms", list, where)
    if not terms:
        required["nodeSelectorTerms"] = [term]
        return
    for i, existing in enumerate(terms):
        if not isinstance(existing, dict):
            raise ValueError(f"{where}[{i}]: expected an object, got {type(existing).__name__}")
        for field in _TERM_FIELDS:
            extra = _get(term, field, list, f"requiredNodeSelectorTerm.{field}") or []
            have = _get(existing, field, list, f"{where}[{i}].{field}") or []
            missing = [r for r in extra if r not in have]
            if missing:
                existing[field] = [*have, *strategic_merge.to_plain(missing)]


RESOLVED_FROM_CLASS = ("priority", "preemptionPolicy")
"""Pod spec fields the Priority admission plugin fills in from `priorityClassName`."""


def _drop_resolved_priority(pod: Mapping[str, Any], result: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """When the patch changed `spec.priorityClassName`, remove what the Priority plugin resolved
    from the old class (`priority`, `preemptionPolicy`), unless the patch sets them itself.

    The Priority plugin runs before mutating webhooks and, because a webhook changed the pod,
    once more after them: it then resolves the new class and refuses a pod whose `priority` or
    `preemptionPolicy` differ from it. Without those fields it fills them in from the new class
    (docs/decisions.md, "A subset patch may change the priority class").
    """
    before, after = pod.get("spec"), result.get("spec")
    if not isinstance(after, dict):
        return
    old_class = before.get("priorityClassName") if isinstance(before, Mapping) else None
    if after.get("priorityClassName") == old_class:
        return
    patch_spec = patch.get("spec")
    given = patch_spec.keys() if isinstance(patch_spec, Mapping) else ()
    for field in RESOLVED_FROM_CLASS:
        if field not in given:
            after.pop(field, None)


def mutate_pod(
    pod: Mapping[str, Any],
    *,
    subset: str,
    required_term: Mapping[str, Any] | None,
    preferred_terms: Sequence[Mapping[str, Any]],
    tolerations: Sequence[Mapping[str, Any]],
    patch: Mapping[str, Any] | None,
    name: str | None = None,
    deletion_cost: int | None = None,
) -> dict[str, Any]:
    """The pod (camelCase JSON) after injecting the subset; the input is not changed.

    `deletion_cost`: the pod-deletion-cost annotation it is born with (the in-quota cost of its
    subset, `deletion_cost.in_quota_cost`), so the agent need not write it to every new pod.

    ValueError with a field path when the pod's affinity or tolerations have the wrong shape.
    """
    if not isinstance(pod, Mapping):
        raise ValueError(f"a pod must be an object, got {type(pod).__name__}")
    result: dict[str, Any] = strategic_merge.to_plain(pod)
    if required_term is not None:
        _and_required(result, strategic_merge.to_plain(required_term))
    if preferred_terms:
        _append_new(result, ("spec", "affinity", "nodeAffinity", _PREFERRED), preferred_terms)
    if tolerations:
        _append_new(result, ("spec", "tolerations"), tolerations)
    if patch:
        result = strategic_merge.apply(result, patch)
        _drop_resolved_priority(pod, result, patch)
    annotations = _ensure(result, ("metadata", "annotations"))
    annotations[names.SUBSET_ANNOTATION] = subset
    if deletion_cost is not None:
        annotations[names.DELETION_COST_ANNOTATION] = str(deletion_cost)
    metadata = _ensure(result, ("metadata",))
    if name is not None and not metadata.get("name"):
        metadata["name"] = name
    return result


# --- JSONPatch ------------------------------------------------------------------------------------


def _escape(key: Any) -> str:
    """A JSON Pointer reference token (RFC 6901): '~' -> '~0', '/' -> '~1'."""
    return str(key).replace("~", "~0").replace("/", "~1")


def _same(a: Any, b: Any) -> bool:
    """JSON equality: like ==, but True is not 1 and 1 is not 1.0."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _diff(original: Any, mutated: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if isinstance(original, Mapping) and isinstance(mutated, Mapping):
        for key, value in original.items():
            child = f"{path}/{_escape(key)}"
            if key not in mutated:
                ops.append({"op": "remove", "path": child})
            else:
                _diff(value, mutated[key], child, ops)
        for key, value in mutated.items():
            if key not in original:
                ops.append(
                    {"op": "add", "path": f"{path}/{_escape(key)}", "value": strategic_merge.to_plain(value)}
                )
        return
    if not _same(original, mutated):
        ops.append({"op": "replace", "path": path, "value": strategic_merge.to_plain(mutated)})


def json_patch(original: Mapping[str, Any], mutated: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A small RFC 6902 patch turning original into mutated: per key in maps, lists whole."""
    ops: list[dict[str, Any]] = []
    _diff(original, mutated, "", ops)
    return ops


# --- names ----------------------------------------------------------------------------------------


def generated_name(generate_name: str, *, token: str) -> str:
    """generateName plus 5 apiserver-style characters derived from token; at most 63 characters.

    The same token gives the same name; pass fresh randomness (e.g. `secrets.token_hex()`).
    """
    number = int.from_bytes(hashlib.sha256(token.encode()).digest(), "big")
    suffix = []
    for _ in range(NAME_SUFFIX_LENGTH):
        number, index = divmod(number, len(NAME_ALPHABET))
        suffix.append(NAME_ALPHABET[index])
    return generate_name[: MAX_NAME_LENGTH - NAME_SUFFIX_LENGTH] + "".join(suffix)
