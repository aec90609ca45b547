"""Hypothesis strategies for FederatedSpread *documents* — the YAML a user writes — valid or broken.

Why beside `strategies.py`: those build validated models for placement properties; the fuzzer of
validation needs the raw camelCase dicts, far wider than placement needs (unicode cluster names,
label selectors with expressions, patches, tolerations, huge integers), and documents broken on
purpose. Each breaking `Mutation` returns the field path where validation must report the problem
(`spec.subsets[1].maxReplicas`), so a test can check the path as well as the refusal.
"""

from __future__ import annotations

import copy
import string
from collections.abc import Callable
from typing import Any

# tests/unit has no __init__.py: pytest's default import mode puts this directory on sys.path.
import strategies as fs
from hypothesis import strategies as st

from federation.api import names, spread
from tests.support.builders import CORDON_TAINT_KEY

Doc = dict[str, Any]
Mutation = Callable[[st.DrawFn, Doc], str]
"""Breaks a document in place; returns the path of the field at fault."""

SUBSET_NAMES = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?", fullmatch=True)
CLUSTER_NAMES = st.sampled_from(fs.CLUSTER_NAMES) | st.text(min_size=1, max_size=20)
"""Mostly the snapshot's clusters; sometimes any non-empty text (unicode included), which is valid."""
LABEL_TEXT = st.sampled_from(["", "r0", "r1", "a", names.REGION_LABEL]) | st.text(max_size=10)
HUGE = st.integers(0, 50) | st.integers(2**31 - 1, 2**70)
SECONDS = st.integers(1, 600) | st.integers(spread.MAX_SECONDS - 10, spread.MAX_SECONDS)
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


CLUSTER_TOLERATIONS: list[Doc] = [
    {"operator": "Exists"},
    {"key": CORDON_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
    {"key": CORDON_TAINT_KEY, "value": "maintenance", "effect": "NoExecute"},
    {"key": CORDON_TAINT_KEY, "operator": "Exists", "tolerationSeconds": 300},
]
"""Valid `spec.clusterTolerations` entries."""
CLUSTER_TOLERATION_DOCS = st.sampled_from(CLUSTER_TOLERATIONS).map(copy.deepcopy)
"""One of them, a fresh copy (tests change drawn documents in place)."""


@st.composite
def label_selectors(draw: st.DrawFn) -> Doc:
    selector: Doc = {}
    if draw(st.booleans()):
        selector["matchLabels"] = draw(st.dictionaries(LABEL_TEXT, LABEL_TEXT, max_size=2))
    if draw(st.booleans()):
        operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
        values = draw(st.lists(LABEL_TEXT, min_size=1, max_size=2)) if operator in ("In", "NotIn") else []
        selector["matchExpressions"] = [{"key": draw(LABEL_TEXT.filter(bool)), "operator": operator,
                                         "values": values}]
    return selector


@st.composite
def adaptive_settings(draw: st.DrawFn) -> Doc:
    """A valid `scheduleStrategy.adaptive` block."""
    return {"disableSimulationSchedule": draw(st.booleans()), "rescheduleCriticalSeconds": draw(SECONDS),
            "unschedulableSeconds": draw(SECONDS)}


@st.composite
def subsets(draw: st.DrawFn, name: str, cap: int | str | None) -> Doc:
    subset: Doc = {"name": name}
    if draw(st.booleans()):
        subset["clusters"] = draw(st.lists(CLUSTER_NAMES, min_size=1, max_size=4, unique=True))
    else:
        subset["clusterSelector"] = draw(label_selectors())
    subset["clusterSpread"] = draw(st.sampled_from(fs.CLUSTER_SPREADS))
    if cap is not None:
        subset["maxReplicas"] = cap
    if draw(st.integers(0, 3)) == 0:
        subset["requiredNodeSelectorTerm"] = {"matchExpressions": [
            {"key": fs.POOL_TYPE_LABEL, "operator": "In", "values": [draw(st.sampled_from(fs.POOL_TYPES))]}]}
    if draw(st.integers(0, 4)) == 0:
        subset["preferredNodeSelectorTerms"] = [{"weight": draw(st.integers(1, 100)), "preference": {
            "matchExpressions": [{"key": "ssd", "operator": "Exists"}]}}]
    if draw(st.integers(0, 3)) == 0:
        subset["tolerations"] = [draw(st.sampled_from([
            {"key": fs.NODE_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
            {"operator": "Exists"},
            {"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30}]))]
    if draw(st.integers(0, 4)) == 0:
        labels = draw(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2))
        subset["patch"] = {"metadata": {"labels": labels}}
    return subset


def _caps(draw: st.DrawFn, count: int) -> list[int | str | None]:
    kind = draw(st.sampled_from(["none", "integer", "percent"]))
    if kind == "none":
        return [None] * count
    if kind == "integer":
        return [draw(st.none() | HUGE) for _ in range(count)]
    caps: list[int | str | None] = []
    budget = 100
    for _ in range(count):
        pct = draw(st.none() | st.integers(0, budget))
        caps.append(None if pct is None else f"{pct}%")
        budget -= pct or 0
    return caps


@st.composite
def documents(draw: st.DrawFn, *, min_subsets: int = 1, max_subsets: int = 4) -> Doc:
    """A valid FederatedSpread document, as a user could write it."""
    count = draw(st.integers(min_subsets, max_subsets))
    names = draw(st.lists(SUBSET_NAMES, min_size=count, max_size=count, unique=True))
    doc: Doc = {
        "apiVersion": "fedspread.io/v1alpha1", "kind": "FederatedSpread",
        "metadata": {"name": draw(st.text(min_size=1, max_size=12)), "namespace": "shop"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": draw(st.text(min_size=1))},
            "subsets": [draw(subsets(n, cap)) for n, cap in zip(names, _caps(draw, count), strict=True)],
        },
    }
    if draw(st.integers(0, 2)) != 0:  # two in three documents say which strategy
        strategy: Doc = {"type": draw(st.sampled_from(fs.STRATEGY_TYPES))}
        if strategy["type"] == "Adaptive" and draw(st.booleans()):  # settings under Fixed are refused
            strategy["adaptive"] = draw(adaptive_settings())
        doc["spec"]["scheduleStrategy"] = strategy
    if draw(st.booleans()):
        doc["spec"]["failover"] = {"clusterLostSeconds": draw(SECONDS)}
    if draw(st.integers(0, 3)) == 0:
        doc["spec"]["clusterTolerations"] = draw(st.lists(CLUSTER_TOLERATION_DOCS, max_size=3))
    return doc


# --- breaking a valid document -----------------------------------------------------------------------


def _subset(draw: st.DrawFn, doc: Doc) -> tuple[int, Doc]:
    index = draw(st.integers(0, len(doc["spec"]["subsets"]) - 1))
    return index, doc["spec"]["subsets"][index]


def _at(index: int, field: str = "") -> str:
    return f"spec.subsets[{index}]" + (f".{field}" if field else "")


def cap_of_wrong_type(draw: st.DrawFn, doc: Doc) -> str:
    index, subset = _subset(draw, doc)
    subset["maxReplicas"] = draw(
        st.booleans() | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f))
        | st.lists(st.integers(), max_size=2) | st.dictionaries(st.text(), st.integers()))
    return _at(index, "maxReplicas")


def negative_cap(draw: st.DrawFn, doc: Doc) -> str:
    index, subset = _subset(draw, doc)
    subset["maxReplicas"] = draw(st.integers(max_value=-1))
    return _at(index, "maxReplicas")


def malformed_cap(draw: st.DrawFn, doc: Doc) -> str:
    index, subset = _subset(draw, doc)
    subset["maxReplicas"] = draw(
        st.integers(101, 999).map(lambda n: f"{n}%") | st.integers(1, 100).map(lambda n: f"-{n}%")
        | st.sampled_from(["30", "50 %", "%", "50%%", "1.5%", "1e2%", "100000000000%", "", "\u00bd%",
                           "\u0665\u0660%", "\uff15%"])  # ½%, Arabic-Indic 50%, fullwidth 5%
        | st.text(max_size=6).filter(lambda t: not t.strip().rstrip("%").isdigit()))
    return _at(index, "maxReplicas")


def mixed_caps(draw: st.DrawFn, doc: Doc) -> str:
    items = doc["spec"]["subsets"]
    for item in items:
        item.pop("maxReplicas", None)
    first, later = sorted(draw(st.lists(st.integers(0, len(items) - 1), min_size=2, max_size=2, unique=True)))
    kinds = draw(st.permutations([draw(st.integers(0, 10**6)), f"{draw(st.integers(0, 50))}%"]))
    items[first]["maxReplicas"], items[later]["maxReplicas"] = kinds
    return _at(later, "maxReplicas")


def percentages_over_100(draw: st.DrawFn, doc: Doc) -> str:
    items = doc["spec"]["subsets"]
    percents = draw(st.lists(st.integers(0, 100), min_size=len(items), max_size=len(items))
                    .filter(lambda ps: sum(ps) > 100))
    for item, pct in zip(items, percents, strict=True):
        item["maxReplicas"] = f"{pct}%"
    return "spec.subsets"


def duplicate_name(draw: st.DrawFn, doc: Doc) -> str:
    items = doc["spec"]["subsets"]
    first, later = sorted(draw(st.lists(st.integers(0, len(items) - 1), min_size=2, max_size=2, unique=True)))
    items[later]["name"] = items[first]["name"]
    return _at(later, "name")


def bad_subset_name(draw: st.DrawFn, doc: Doc) -> str:
    index, subset = _subset(draw, doc)
    subset["name"] = draw(st.sampled_from(["", "OnPrem", "on_prem", "-a", "a-", "a\n", "ünï", "a.b",
                                           "a" * 64])
                          | st.text(string.ascii_uppercase + "_ ./", min_size=1, max_size=8))
    return _at(index, "name")


def clusters_or_selector(draw: st.DrawFn, doc: Doc) -> str:
    index, subset = _subset(draw, doc)
    choice = draw(st.sampled_from(["neither", "both", "empty", "blank-name", "repeated", "not-a-list"]))
    subset.pop("clusters", None)
    subset.pop("clusterSelector", None)
    if choice == "neither":
        return _at(index)
    if choice == "both":
        subset["clusters"], subset["clusterSelector"] = ["c0"], {}
        return _at(index)
    subset["clusters"] = {"empty": [], "blank-name": ["c0", ""], "repeated": ["c1", "c0", "c1"],
                          "not-a-list": "c0"}[choice]
    return _at(index, "clusters")


def bad_selector(draw: st.DrawFn, doc: Doc) -> str:
    index, subset = _subset(draw, doc)
    subset.pop("clusters", None)
    here = _at(index, "clusterSelector")
    choice = draw(st.sampled_from(["In-without-values", "Exists-with-values", "unknown-operator",
                                   "label-number", "not-a-mapping"]))
    if choice == "label-number":
        subset["clusterSelector"] = {"matchLabels": {"k": draw(st.integers())}}
        return f"{here}.matchLabels.k"
    if choice == "not-a-mapping":
        subset["clusterSelector"] = draw(st.lists(st.text(), max_size=2) | st.text())
        return here
    operator, values = {"In-without-values": ("In", []), "Exists-with-values": ("Exists", ["x"]),
                        "unknown-operator": (draw(st.sampled_from(["Gt", "Near", "in", ""])), ["x"])}[choice]
    subset["clusterSelector"] = {"matchExpressions": [{"key": "k", "operator": operator, "values": values}]}
    return f"{here}.matchExpressions[0]" + (".operator" if choice == "unknown-operator" else "")


def bad_pod_fields(draw: st.DrawFn, doc: Doc) -> str:
    index, subset = _subset(draw, doc)
    choice = draw(st.sampled_from(["empty-term", "weight", "toleration", "patch"]))
    if choice == "empty-term":
        subset["requiredNodeSelectorTerm"] = {}
        return _at(index, "requiredNodeSelectorTerm")
    if choice == "weight":
        subset["preferredNodeSelectorTerms"] = [{"weight": draw(st.integers(max_value=0) | st.integers(101)),
                                                 "preference": {}}]
        return _at(index, "preferredNodeSelectorTerms[0].weight")
    if choice == "toleration":
        subset["tolerations"] = [{"key": "k", "operator": "Exists", "value": "v"}]
        return _at(index, "tolerations[0]")
    subset["patch"] = draw(st.lists(st.integers(), max_size=2) | st.text())
    return _at(index, "patch")


def bad_cluster_toleration(draw: st.DrawFn, doc: Doc) -> str:
    """A cluster toleration Kubernetes would refuse, among valid ones: the path names its field."""
    tolerations = draw(st.lists(CLUSTER_TOLERATION_DOCS, max_size=2))
    index = draw(st.integers(0, len(tolerations)))
    choice = draw(st.sampled_from(["Exists-with-value", "empty-key-Equal", "seconds-not-NoExecute",
                                   "negative-seconds", "unknown-effect"]))
    bad: Doc = {"key": "k"}
    field = "tolerationSeconds"
    if choice == "Exists-with-value":
        bad, field = {"key": "k", "operator": "Exists", "value": draw(st.text(min_size=1))}, "operator"
    elif choice == "empty-key-Equal":
        bad, field = {"operator": "Equal", "value": draw(st.text())}, "operator"
    elif choice == "seconds-not-NoExecute":
        bad["effect"] = draw(st.sampled_from(["NoSchedule", "PreferNoSchedule"]))
        bad["tolerationSeconds"] = draw(st.integers(0, 600))
    elif choice == "negative-seconds":
        bad["effect"] = draw(st.sampled_from(["NoExecute", ""]))
        bad["tolerationSeconds"] = draw(st.integers(max_value=-1))
    else:
        bad["effect"], field = draw(st.sampled_from(["NoRun", "noschedule", "Evict"])), "effect"
    tolerations.insert(index, bad)
    doc["spec"]["clusterTolerations"] = tolerations
    return f"spec.clusterTolerations[{index}].{field}"


def bad_strategy_or_failover(draw: st.DrawFn, doc: Doc) -> str:
    spec = doc["spec"]
    bad = draw(st.integers(max_value=0) | st.integers(min_value=spread.MAX_SECONDS + 1)
               | st.sampled_from(["30s", "1m", "", "ten", 1.5]))
    choice = draw(st.sampled_from(["type", "rescheduleCriticalSeconds", "unschedulableSeconds", "lost"]))
    if choice == "lost":
        spec["failover"] = {"clusterLostSeconds": bad}
        return "spec.failover.clusterLostSeconds"
    if choice == "type":
        spec["scheduleStrategy"] = {"type": draw(st.sampled_from(["Random", "fixed", "", "Spread"]))}
        return "spec.scheduleStrategy.type"
    spec["scheduleStrategy"] = {"type": "Adaptive", "adaptive": {choice: bad}}
    return f"spec.scheduleStrategy.adaptive.{choice}"


def adaptive_under_fixed(draw: st.DrawFn, doc: Doc) -> str:
    """Adaptive settings with type Fixed, said or defaulted: refused, not silently ignored."""
    strategy: Doc = {"adaptive": draw(adaptive_settings() | st.just({}))}
    if draw(st.booleans()):
        strategy["type"] = "Fixed"
    doc["spec"]["scheduleStrategy"] = strategy
    return "spec.scheduleStrategy.adaptive"


def bad_target_or_kind(draw: st.DrawFn, doc: Doc) -> str:
    choice = draw(st.sampled_from(["targetName", "targetKind", "apiVersion", "kind", "metadataName",
                                   "noSubsets", "subsetsNotAList"]))
    if choice == "targetName":
        doc["spec"]["targetRef"]["name"] = ""
        return "spec.targetRef.name"
    if choice == "targetKind":
        doc["spec"]["targetRef"]["kind"] = "CronJob"
        return "spec.targetRef.kind"
    if choice in ("apiVersion", "kind"):
        doc[choice] = draw(st.text(max_size=20).filter(lambda t: t not in ("fedspread.io/v1alpha1",
                                                                          "FederatedSpread")))
        return choice
    if choice == "metadataName":
        del doc["metadata"]["name"]
        return "metadata.name"
    doc["spec"]["subsets"] = [] if choice == "noSubsets" else draw(st.text() | st.integers() | st.just({}))
    return "spec.subsets"


_MODEL_PATHS = ("", "spec", "spec.targetRef")
KNOWN_FIELDS = frozenset({
    "apiVersion", "api_version", "kind", "metadata", "spec", "status", "targetRef", "target_ref", "subsets",
    "scheduleStrategy", "schedule_strategy", "failover", "name", "clusters", "clusterSelector",
    "cluster_selector", "clusterSpread", "cluster_spread", "requiredNodeSelectorTerm",
    "required_node_selector_term", "preferredNodeSelectorTerms", "preferred_node_selector_terms",
    "tolerations", "patch", "maxReplicas", "max_replicas", "type", "adaptive", "clusterLostSeconds",
    "cluster_lost_seconds", "clusterTolerations", "cluster_tolerations"})


def unknown_field(draw: st.DrawFn, doc: Doc) -> str:
    where = draw(st.sampled_from([*_MODEL_PATHS, "subset"]))
    key = draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in KNOWN_FIELDS))
    if where == "subset":
        index, node = _subset(draw, doc)
        where = _at(index)
    else:
        node = doc
        for part in filter(None, where.split(".")):
            node = node[part]
    node[key] = draw(JSON)
    return f"{where}.{key}" if where else key


MUTATIONS: dict[str, Mutation] = {m.__name__: m for m in (
    cap_of_wrong_type, negative_cap, malformed_cap, mixed_caps, percentages_over_100, duplicate_name,
    bad_subset_name, clusters_or_selector, bad_selector, bad_pod_fields, bad_cluster_toleration,
    bad_strategy_or_failover,
    adaptive_under_fixed, bad_target_or_kind, unknown_field)}


@st.composite
def broken_documents(draw: st.DrawFn, mutation: str | None = None) -> tuple[str, Doc, str]:
    """(mutation name, a document broken by it, the path validation must report); `mutation`
    picks the mutation, else any is drawn."""
    doc = copy.deepcopy(draw(documents(min_subsets=2)))
    name = mutation if mutation is not None else draw(st.sampled_from(sorted(MUTATIONS)))
    return name, doc, MUTATIONS[name](draw, doc)
