"""The structural openAPIV3Schema of a kind, converted from its pydantic model's JSON schema.

Why a converter and not the JSON schema as is: the apiserver only accepts *structural* schemas
(apiextensions.k8s.io/v1): every node has a `type`, there is no `$ref`, no `anyOf`/`oneOf` except
the int-or-string form, `exclusiveMinimum` is a boolean next to `minimum`, `metadata` is left to
the apiserver, and free-form objects say `x-kubernetes-preserve-unknown-fields`. The converter below
inlines `$defs`, rewrites those forms, drops what has no CRD meaning (titles, most defaults) and
refuses any JSON-schema keyword it does not know, so that a model change the CRD cannot express
fails loudly here instead of producing a CRD the apiserver rejects.

Why some defaults are in the CRD (`APISERVER_DEFAULTS`): the models apply every default, but a
default only the models know is invisible on the hub — `kubectl get -o yaml` of a spread written
without `deletionPolicy` would not say what deleting it does. Every defaulted field whose value
decides what fedspread deletes or moves is therefore also defaulted by the apiserver, which stores
it (structural defaulting, apiextensions.k8s.io/v1, Kubernetes 1.16+): the value is the model's
own (a test checks the two agree), and a parent object that holds such a field defaults to `{}` so
that its child's default applies when the parent is omitted. Other defaults (where new replicas go,
cosmetic fields) stay the models' alone, to keep what users wrote readable.

Why a module of its own: converting a model is one job with its own rules and refusals; which
kinds fedspread installs, their names and printer columns, and the files under crds/ are
`federation.api.crd`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pydantic

Schema = dict[str, Any]

# JSON-schema keywords copied unchanged into the CRD schema.
_COPIED = frozenset(
    {"description", "enum", "format", "pattern", "minLength", "maxLength", "minimum", "maximum",
     "minItems", "maxItems", "uniqueItems"}
)
# Keywords with no meaning in a CRD: titles are pydantic's, defaults are applied by the models
# (and, for `APISERVER_DEFAULTS`, written by the converter).
_DROPPED = frozenset({"title", "default"})

APISERVER_DEFAULTS: Mapping[str, str] = {
    "FederatedSpread.spec.deletionPolicy": "what deleting the spread does to its member workloads",
    "FederatedSpread.spec.propagateDependencies":
        "whether fedspread creates, updates and removes copies of the template's objects in members",
    "FederatedSpread.spec.failover": "holds clusterLostSeconds (defaults to {})",
    "FederatedSpread.spec.failover.clusterLostSeconds": "how long a silent cluster keeps its replicas",
    "FederatedSpread.spec.scheduleStrategy": "holds type (defaults to {})",
    "FederatedSpread.spec.scheduleStrategy.type":
        "Adaptive moves replicas off unschedulable subsets and deletes stuck pods; Fixed does neither",
    "FederatedSpread.spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds":
        "how long a Pending pod waits before the agent deletes it",
    "FederatedSpread.spec.scheduleStrategy.adaptive.unschedulableSeconds":
        "how long replicas keep away from a subset marked unschedulable",
}
"""Schema paths (model title, then the fields as spelled in YAML) the apiserver defaults, and why:
each decides what fedspread deletes or moves (docs/decisions.md, "Defaults the hub stores")."""
# Keywords handled structurally by `_convert`.
_STRUCTURAL = frozenset({"type", "properties", "required", "items", "additionalProperties"})

_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_NULL = {"type": "null"}

_API_VERSION_DESCRIPTION = (
    "APIVersion defines the versioned schema of this representation of an object; "
    "servers convert recognized schemas to the latest internal value."
)
_KIND_DESCRIPTION = (
    "Kind is a string value representing the REST resource this object represents; "
    "servers infer it from the endpoint the client submits requests to."
)


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Schema], where: str,
             inlined: tuple[str, ...]) -> tuple[Schema, tuple[str, ...]]:
    """Inline a `$ref`; keywords next to it (the field's description) win over the definition's."""
    if "$ref" not in node:
        return dict(node), inlined
    name = str(node["$ref"]).removeprefix("#/$defs/")
    if name in inlined:
        raise ValueError(f"{where}: {name} refers to itself; a CRD schema cannot be recursive")
    if name not in defs:
        raise ValueError(f"{where}: unknown reference {node['$ref']!r}")
    merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
    return merged, (*inlined, name)


def _convert_any_of(node: Schema, defs: Mapping[str, Schema], where: str,
                    inlined: tuple[str, ...]) -> Schema:
    """Optional[X] becomes X with `nullable`; int | str becomes the int-or-string form."""
    rest = {k: v for k, v in node.items() if k != "anyOf"}
    branches = [b for b in node["anyOf"] if b != _NULL]
    nullable = len(branches) < len(node["anyOf"])
    if branches == _INT_OR_STRING:
        out: Schema = {"x-kubernetes-int-or-string": True, "anyOf": [dict(b) for b in branches]}
        for key, value in rest.items():
            if key in _DROPPED:
                continue
            if key != "description":
                raise ValueError(f"{where}: {key!r} is not supported on an int-or-string field")
            out[key] = value
    elif len(branches) == 1:
        out = _convert({**branches[0], **rest}, defs, where, inlined)
    else:
        raise ValueError(f"{where}: a CRD cannot express a union of {branches}")
    if nullable:
        out["nullable"] = True
    return out


def _convert(raw: Mapping[str, Any], defs: Mapping[str, Schema], where: str,
             inlined: tuple[str, ...] = ()) -> Schema:
    """One JSON-schema node of a pydantic model as a structural CRD schema node."""
    node, inlined = _resolve(raw, defs, where, inlined)
    if "anyOf" in node:
        return _convert_any_of(node, defs, where, inlined)
    out: Schema = {}
    for key, value in node.items():
        if key in _COPIED:
            out[key] = value
        elif key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            # JSON schema's numeric form; apiextensions v1 wants minimum/maximum plus a boolean.
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        elif key not in _DROPPED and key not in _STRUCTURAL:
            raise ValueError(f"{where}: no CRD equivalent for JSON-schema keyword {key!r}")
    type_ = node.get("type")
    if not isinstance(type_, str):
        raise ValueError(f"{where}: every CRD schema node needs a single type, got {type_!r}")
    out["type"] = type_
    if type_ == "array":
        out["items"] = _convert(node["items"], defs, f"{where}[]", inlined)
    if type_ == "object":
        properties: Mapping[str, Any] = node.get("properties", {})
        if properties:
            out["properties"] = {
                name: _property(sub, defs, f"{where}.{name}", inlined)
                for name, sub in properties.items()
            }
            if node.get("required"):
                out["required"] = list(node["required"])
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            out["additionalProperties"] = _convert(extra, defs, f"{where}.*", inlined)
        elif extra is True:  # extra="allow", or dict[str, Any]: keep whatever the user wrote
            out["x-kubernetes-preserve-unknown-fields"] = True
        # `additionalProperties: false` (extra="forbid") has no structural form: the apiserver
        # prunes unknown fields, and fedspread's own validation names them.
    if where in APISERVER_DEFAULTS:
        out["default"] = _apiserver_default(node, where)
    return out


def _apiserver_default(node: Mapping[str, Any], where: str) -> Any:
    """The default the apiserver stores at `where`: the model's own, or `{}` for an object whose
    model default is a factory (its children's defaults then apply inside it)."""
    if "default" in node:
        if node["default"] is None:
            raise ValueError(f"{where}: a null default cannot be stored; take it out of APISERVER_DEFAULTS")
        return node["default"]
    if node.get("type") == "object":
        return {}
    raise ValueError(f"{where}: in APISERVER_DEFAULTS but the model gives it no default")


def _property(raw: Mapping[str, Any], defs: Mapping[str, Schema], where: str,
              inlined: tuple[str, ...]) -> Schema:
    converted = _convert(raw, defs, where, inlined)
    if not converted.get("description"):
        raise ValueError(f"{where}: no description; give the field pydantic.Field(description=...)")
    return converted


def openapi_schema(model: type[pydantic.BaseModel]) -> Schema:
    """The structural openAPIV3Schema of a top-level kind's model."""
    raw = model.model_json_schema(by_alias=True)
    defs: Mapping[str, Schema] = raw.get("$defs", {})
    name = raw.get("title", model.__name__)
    properties: Schema = {
        "apiVersion": {"type": "string", "description": _API_VERSION_DESCRIPTION},
        "kind": {"type": "string", "description": _KIND_DESCRIPTION},
        # The apiserver owns metadata; a CRD may not say anything else about it.
        "metadata": {"type": "object"},
    }
    for field in ("spec", "status"):
        if field in raw["properties"]:
            properties[field] = _property(raw["properties"][field], defs, f"{name}.{field}", ())
    missing = [path for path in APISERVER_DEFAULTS
               if path.partition(".")[0] == name and not _defaulted(properties, path.split(".")[1:])]
    if missing:
        raise ValueError(f"APISERVER_DEFAULTS names fields the {name} schema does not have: {missing}")
    schema: Schema = {
        "type": "object",
        "description": raw.get("description", ""),
        "properties": properties,
    }
    required = [f for f in raw.get("required", []) if f in ("spec", "status")]
    if required:
        schema["required"] = required
    return schema


def _defaulted(properties: Mapping[str, Any], path: Sequence[str]) -> bool:
    """Whether the schema node at `path` (property names) under `properties` has a default."""
    node: Mapping[str, Any] = {"properties": properties}
    for part in path:
        node = node.get("properties", {}).get(part, {})
    return "default" in node
