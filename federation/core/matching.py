"""Kubernetes label, node-selector and taint matching, reimplemented exactly.

Why reimplement: the placement core must predict what each member's kube-scheduler will do with a
pod, offline and without a cluster. Every rule here mirrors apimachinery's `labels.Requirement`,
component-helpers' `nodeaffinity` and core/v1 `Toleration.ToleratesTaint`, including the corners
that surprise people: NotIn matches a missing key, Gt/Lt need an integer label, an empty
node-selector term matches nothing while an empty label selector matches everything, and
PreferNoSchedule taints never keep a pod away.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from federation.api import common

NODE_NAME_FIELD = "metadata.name"
"""The only node field a matchFields requirement may name."""

BINDING_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that keep a new pod off a node unless tolerated."""

_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def _parse_int64(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64): an optional sign and ASCII digits, in int64 range."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _operator_matches(key: str, operator: str, *, values: Sequence[str], labels: Mapping[str, str]) -> bool:
    """One requirement against a label set (apimachinery labels.Requirement.Matches)."""
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        have = _parse_int64(labels[key])
        want = _parse_int64(values[0])
        if have is None or want is None:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def requirement_matches(req: common.NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """Whether node labels satisfy one matchExpressions requirement."""
    return _operator_matches(req.key, req.operator, values=req.values, labels=labels)


def _field_matches(req: common.NodeSelectorRequirement, node_name: str) -> bool:
    """A matchFields requirement: only metadata.name, In/NotIn with exactly one value.

    The apiserver rejects anything else; the scheduler treats such a term as matching nothing.
    """
    if req.key != NODE_NAME_FIELD or req.operator not in ("In", "NotIn") or len(req.values) != 1:
        return False
    equal = node_name == req.values[0]
    return equal if req.operator == "In" else not equal


def term_matches(term: common.NodeSelectorTerm, labels: Mapping[str, str], *, node_name: str = "") -> bool:
    """All expressions and fields hold; an empty term matches no node (k8s semantics)."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(requirement_matches(r, labels) for r in term.match_expressions) and all(
        _field_matches(r, node_name) for r in term.match_fields
    )


def terms_match(
    terms: Sequence[common.NodeSelectorTerm], labels: Mapping[str, str], *, node_name: str = ""
) -> bool:
    """The terms are ORed; no terms at all means no requirement."""
    if not terms:
        return True
    return any(term_matches(t, labels, node_name=node_name) for t in terms)


def label_selector_matches(selector: common.LabelSelector, labels: Mapping[str, str]) -> bool:
    """meta/v1 LabelSelector semantics: everything ANDed; an empty selector matches everything."""
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    return all(
        _operator_matches(r.key, r.operator, values=r.values, labels=labels)
        for r in selector.match_expressions
    )


tolerates = common.tolerates
"""core/v1 Toleration.ToleratesTaint (the rule lives in the API so cluster cordons share it)."""


def untolerated_taints(
    tolerations: Iterable[common.Toleration], taints: Iterable[common.Taint]
) -> list[common.Taint]:
    """NoSchedule/NoExecute taints no toleration tolerates; PreferNoSchedule never binds."""
    tolerations = tuple(tolerations)
    return [
        taint
        for taint in taints
        if taint.effect in BINDING_TAINT_EFFECTS and not any(tolerates(t, taint) for t in tolerations)
    ]
