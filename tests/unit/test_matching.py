"""Kubernetes matching rules: node-selector requirements and terms, label selectors, taints."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from federation.api import common
from federation.core import matching


def req(key: str, operator: str, *values: str) -> common.NodeSelectorRequirement:
    return common.NodeSelectorRequirement.model_validate(
        {"key": key, "operator": operator, "values": list(values)}
    )


def term(*exprs: common.NodeSelectorRequirement, fields: Any = ()) -> common.NodeSelectorTerm:
    return common.NodeSelectorTerm(match_expressions=list(exprs), match_fields=list(fields))


def tol(**kwargs: Any) -> common.Toleration:
    return common.Toleration.model_validate(kwargs)


def taint(key: str, effect: str, value: str = "") -> common.Taint:
    return common.Taint.model_validate({"key": key, "value": value, "effect": effect})


REQUIREMENT_CASES = [
    ("in-match", req("zone", "In", "a", "b"), {"zone": "b"}, True),
    ("in-other-value", req("zone", "In", "a", "b"), {"zone": "c"}, False),
    ("in-key-absent", req("zone", "In", "a"), {}, False),
    ("notin-other-value", req("zone", "NotIn", "a"), {"zone": "b"}, True),
    ("notin-listed-value", req("zone", "NotIn", "a", "b"), {"zone": "a"}, False),
    ("notin-key-absent", req("zone", "NotIn", "a"), {"other": "a"}, True),
    ("exists-present", req("gpu", "Exists"), {"gpu": ""}, True),
    ("exists-absent", req("gpu", "Exists"), {}, False),
    ("doesnotexist-absent", req("gpu", "DoesNotExist"), {}, True),
    ("doesnotexist-present", req("gpu", "DoesNotExist"), {"gpu": "x"}, False),
    ("gt-greater", req("cores", "Gt", "4"), {"cores": "8"}, True),
    ("gt-equal", req("cores", "Gt", "4"), {"cores": "4"}, False),
    ("gt-smaller", req("cores", "Gt", "4"), {"cores": "3"}, False),
    ("gt-numeric-not-lexical", req("cores", "Gt", "9"), {"cores": "10"}, True),
    ("gt-negative", req("t", "Gt", "-5"), {"t": "-4"}, True),
    ("gt-plus-sign", req("cores", "Gt", "4"), {"cores": "+5"}, True),
    ("gt-leading-zeros", req("cores", "Gt", "4"), {"cores": "007"}, True),
    ("gt-key-absent", req("cores", "Gt", "4"), {}, False),
    ("gt-non-integer-label", req("cores", "Gt", "4"), {"cores": "eight"}, False),
    ("gt-decimal-label", req("cores", "Gt", "4"), {"cores": "4.5"}, False),
    ("gt-empty-label", req("cores", "Gt", "4"), {"cores": ""}, False),
    ("gt-spaces-label", req("cores", "Gt", "4"), {"cores": " 5"}, False),
    ("gt-underscore-label", req("cores", "Gt", "4"), {"cores": "1_000"}, False),
    ("gt-beyond-int64-label", req("cores", "Gt", "4"), {"cores": str(2**63)}, False),
    ("gt-int64-max-label", req("cores", "Gt", "4"), {"cores": str(2**63 - 1)}, True),
    ("lt-smaller", req("cores", "Lt", "4"), {"cores": "3"}, True),
    ("lt-equal", req("cores", "Lt", "4"), {"cores": "4"}, False),
    ("lt-greater", req("cores", "Lt", "4"), {"cores": "5"}, False),
    ("lt-key-absent", req("cores", "Lt", "4"), {}, False),
    ("lt-non-integer-label", req("cores", "Lt", "4"), {"cores": "1Gi"}, False),
    ("lt-requirement-not-go-int", req("cores", "Lt", "1_0"), {"cores": "1"}, False),
]


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [c[1:] for c in REQUIREMENT_CASES],
    ids=[c[0] for c in REQUIREMENT_CASES],
)
def test_requirement_matches(
    requirement: common.NodeSelectorRequirement, labels: dict[str, str], expected: bool
) -> None:
    assert matching.requirement_matches(requirement, labels) is expected


TERM_CASES = [
    ("empty-term-matches-nothing", term(), {"a": "1"}, "n1", False),
    ("all-expressions-hold", term(req("a", "In", "1"), req("b", "Exists")), {"a": "1", "b": ""}, "", True),
    ("one-expression-fails", term(req("a", "In", "1"), req("b", "Exists")), {"a": "1"}, "", False),
    ("field-name-in", term(fields=[req("metadata.name", "In", "n1")]), {}, "n1", True),
    ("field-name-in-other", term(fields=[req("metadata.name", "In", "n1")]), {}, "n2", False),
    ("field-name-notin", term(fields=[req("metadata.name", "NotIn", "n1")]), {}, "n2", True),
    ("field-name-notin-same", term(fields=[req("metadata.name", "NotIn", "n1")]), {}, "n1", False),
    ("field-two-values-invalid", term(fields=[req("metadata.name", "In", "n1", "n2")]), {}, "n1", False),
    ("field-unknown-key", term(fields=[req("metadata.uid", "NotIn", "x")]), {}, "n1", False),
    ("field-exists-unsupported", term(fields=[req("metadata.name", "Exists")]), {}, "n1", False),
    (
        "expressions-and-fields",
        term(req("a", "In", "1"), fields=[req("metadata.name", "In", "n1")]),
        {"a": "1"},
        "n1",
        True,
    ),
    (
        "fields-hold-expressions-fail",
        term(req("a", "In", "2"), fields=[req("metadata.name", "In", "n1")]),
        {"a": "1"},
        "n1",
        False,
    ),
]


@pytest.mark.parametrize(
    ("the_term", "labels", "node_name", "expected"),
    [c[1:] for c in TERM_CASES],
    ids=[c[0] for c in TERM_CASES],
)
def test_term_matches(
    the_term: common.NodeSelectorTerm, labels: dict[str, str], node_name: str, expected: bool
) -> None:
    assert matching.term_matches(the_term, labels, node_name=node_name) is expected


def test_terms_are_ored() -> None:
    terms = [term(req("zone", "In", "a")), term(req("zone", "In", "b"))]
    assert matching.terms_match(terms, {"zone": "b"})
    assert not matching.terms_match(terms, {"zone": "c"})


def test_no_terms_is_no_requirement() -> None:
    assert matching.terms_match([], {})


def test_only_empty_terms_match_nothing() -> None:
    assert not matching.terms_match([term(), term()], {"a": "1"})


def test_terms_pass_node_name() -> None:
    terms = [term(fields=[req("metadata.name", "In", "n7")])]
    assert matching.terms_match(terms, {}, node_name="n7")
    assert not matching.terms_match(terms, {}, node_name="n8")


def sel(labels: dict[str, str] | None = None, *exprs: dict[str, Any]) -> common.LabelSelector:
    return common.LabelSelector.model_validate({"matchLabels": labels or {}, "matchExpressions": list(exprs)})


SELECTOR_CASES = [
    ("empty-selects-all", sel(), {"x": "y"}, True),
    ("empty-selects-unlabelled", sel(), {}, True),
    ("match-labels-hold", sel({"region": "eu"}), {"region": "eu", "x": "1"}, True),
    ("match-labels-other-value", sel({"region": "eu"}), {"region": "us"}, False),
    ("match-labels-absent", sel({"region": "eu"}), {}, False),
    ("in", sel(None, {"key": "r", "operator": "In", "values": ["a"]}), {"r": "a"}, True),
    ("notin-absent", sel(None, {"key": "r", "operator": "NotIn", "values": ["a"]}), {}, True),
    ("exists", sel(None, {"key": "r", "operator": "Exists"}), {"r": ""}, True),
    ("doesnotexist", sel(None, {"key": "r", "operator": "DoesNotExist"}), {"r": ""}, False),
    (
        "labels-and-expressions-anded",
        sel({"a": "1"}, {"key": "b", "operator": "In", "values": ["2"]}),
        {"a": "1", "b": "3"},
        False,
    ),
]


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [c[1:] for c in SELECTOR_CASES],
    ids=[c[0] for c in SELECTOR_CASES],
)
def test_label_selector_matches(
    selector: common.LabelSelector, labels: dict[str, str], expected: bool
) -> None:
    assert matching.label_selector_matches(selector, labels) is expected


TOLERATION_CASES = [
    ("exists-empty-key-tolerates-all", tol(operator="Exists"), taint("any", "NoExecute", "v"), True),
    (
        "exists-empty-key-wrong-effect",
        tol(operator="Exists", effect="NoSchedule"),
        taint("any", "NoExecute"),
        False,
    ),
    ("exists-key-any-value", tol(key="k", operator="Exists"), taint("k", "NoSchedule", "v"), True),
    ("exists-other-key", tol(key="k", operator="Exists"), taint("j", "NoSchedule"), False),
    ("equal-same-value", tol(key="k", value="v"), taint("k", "NoSchedule", "v"), True),
    ("equal-wrong-value", tol(key="k", value="v"), taint("k", "NoSchedule", "w"), False),
    ("equal-empty-values", tol(key="k", operator="Equal"), taint("k", "NoSchedule"), True),
    ("equal-value-vs-empty", tol(key="k", value="v"), taint("k", "NoSchedule"), False),
    ("empty-effect-matches-noexecute", tol(key="k", value="v"), taint("k", "NoExecute", "v"), True),
    (
        "empty-effect-matches-prefer",
        tol(key="k", value="v"),
        taint("k", "PreferNoSchedule", "v"),
        True,
    ),
    (
        "effect-mismatch",
        tol(key="k", value="v", effect="NoSchedule"),
        taint("k", "NoExecute", "v"),
        False,
    ),
    (
        "effect-match",
        tol(key="k", value="v", effect="NoExecute"),
        taint("k", "NoExecute", "v"),
        True,
    ),
]


@pytest.mark.parametrize(
    ("toleration", "the_taint", "expected"),
    [c[1:] for c in TOLERATION_CASES],
    ids=[c[0] for c in TOLERATION_CASES],
)
def test_tolerates(toleration: common.Toleration, the_taint: common.Taint, expected: bool) -> None:
    assert matching.tolerates(toleration, the_taint) is expected


UNTOLERATED_CASES = [
    ("no-taints", [], [], []),
    ("noschedule-binds", [], [taint("a", "NoSchedule")], ["a"]),
    ("noexecute-binds", [], [taint("a", "NoExecute")], ["a"]),
    ("prefer-never-binds", [], [taint("a", "PreferNoSchedule")], []),
    ("tolerated", [tol(key="a", operator="Exists")], [taint("a", "NoSchedule")], []),
    (
        "one-of-two-tolerated",
        [tol(key="a", operator="Exists")],
        [taint("a", "NoSchedule"), taint("b", "NoExecute")],
        ["b"],
    ),
    (
        "wildcard-tolerates-all",
        [tol(operator="Exists")],
        [taint("a", "NoSchedule"), taint("b", "NoExecute")],
        [],
    ),
    ("wrong-value", [tol(key="a", value="x")], [taint("a", "NoSchedule", "y")], ["a"]),
]


@pytest.mark.parametrize(
    ("tolerations", "taints", "expected_keys"),
    [c[1:] for c in UNTOLERATED_CASES],
    ids=[c[0] for c in UNTOLERATED_CASES],
)
def test_untolerated_taints(
    tolerations: list[common.Toleration], taints: list[common.Taint], expected_keys: list[str]
) -> None:
    assert [t.key for t in matching.untolerated_taints(tolerations, taints)] == expected_keys


def test_untolerated_taints_accepts_generators() -> None:
    tolerations = (tol(key=k, operator="Exists") for k in ["a"])
    taints = iter([taint("a", "NoSchedule"), taint("b", "NoSchedule")])
    assert [t.key for t in matching.untolerated_taints(tolerations, taints)] == ["b"]


# --- properties -----------------------------------------------------------------------------------

_keys = st.sampled_from(["a", "b", "c"])
_values = st.sampled_from(["1", "2", "x", "-3", "10"])
_labels = st.dictionaries(_keys, _values, max_size=3)


@given(key=_keys, values=st.lists(_values, min_size=1, max_size=3), labels=_labels)
def test_notin_is_the_negation_of_in(key: str, values: list[str], labels: dict[str, str]) -> None:
    assert matching.requirement_matches(req(key, "NotIn", *values), labels) is not (
        matching.requirement_matches(req(key, "In", *values), labels)
    )


@given(key=_keys, labels=_labels)
def test_doesnotexist_is_the_negation_of_exists(key: str, labels: dict[str, str]) -> None:
    assert matching.requirement_matches(req(key, "DoesNotExist"), labels) is not (
        matching.requirement_matches(req(key, "Exists"), labels)
    )


@given(key=_keys, bound=st.integers(-20, 20), labels=_labels)
def test_gt_and_lt_never_both_hold(key: str, bound: int, labels: dict[str, str]) -> None:
    gt = matching.requirement_matches(req(key, "Gt", str(bound)), labels)
    lt = matching.requirement_matches(req(key, "Lt", str(bound)), labels)
    assert not (gt and lt)
    if gt or lt:
        assert int(labels[key]) != bound


@given(
    terms=st.lists(
        st.lists(st.tuples(_keys, _values), max_size=2).map(
            lambda pairs: term(*(req(k, "In", v) for k, v in pairs))
        ),
        max_size=3,
    ),
    labels=_labels,
)
def test_terms_match_is_any_term(terms: list[common.NodeSelectorTerm], labels: dict[str, str]) -> None:
    expected = not terms or any(matching.term_matches(t, labels) for t in terms)
    assert matching.terms_match(terms, labels) is expected
