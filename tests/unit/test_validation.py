"""FederatedSpread validation: every invalid input is reported with the exact camelCase field path.

Each invalid case starts from one valid spread and changes it in one place (given as
`{"path.to[0].field": new value}`; DELETE removes the field), then asserts the path of the problem
and a fragment of its message. Paths must never leak pydantic internals.
"""

from __future__ import annotations

import copy
import pathlib
import re
from typing import Any

import pytest
import yaml

from federation.api import problems, spread

DELETE = object()

# A path a user can follow into their YAML: `spec.subsets[1].maxReplicas`, or "" for the document.
CLEAN_PATH = re.compile(r"^([A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*|\[\d+\])*)?$")


def base_spread() -> dict[str, Any]:
    """Seed 001's first scenario: a capped on-prem base pool, then the cloud region."""
    return {
        "apiVersion": "fedspread.io/v1alpha1",
        "kind": "FederatedSpread",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "subsets": [
                {
                    "name": "onprem",
                    "clusters": ["dc1"],
                    "maxReplicas": 30,
                    "requiredNodeSelectorTerm": {
                        "matchExpressions": [{"key": "pool", "operator": "In", "values": ["base"]}]
                    },
                    "tolerations": [
                        {"key": "dedicated", "operator": "Equal", "value": "web",
                         "effect": "NoSchedule"}
                    ],
                },
                {
                    "name": "eu-cloud",
                    "clusterSelector": {
                        "matchLabels": {"topology.fedspread.io/region": "eu-west"},
                        "matchExpressions": [
                            {"key": "topology.fedspread.io/provider", "operator": "In",
                             "values": ["aws", "gcp"]}
                        ],
                    },
                    "clusterSpread": "Balance",
                },
            ],
            "scheduleStrategy": {
                "type": "Adaptive",
                "adaptive": {"rescheduleCriticalSeconds": 30, "unschedulableSeconds": 300},
            },
            "failover": {"clusterLostSeconds": 60},
        },
    }


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def with_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """The base spread with each `dotted.path[i]` set to its value (or removed for DELETE)."""
    doc = base_spread()
    for path, value in changes.items():
        steps: list[str | int] = [
            int(index) if index else key for key, index in _STEP.findall(path)
        ]
        parent: Any = doc
        for step in steps[:-1]:
            parent = parent[step]
        if value is DELETE:
            del parent[steps[-1]]
        else:
            parent[steps[-1]] = copy.deepcopy(value)
    return doc


def problems_of(doc: Any) -> list[problems.Problem]:
    with pytest.raises(problems.InvalidInput) as caught:
        problems.validate(spread.FederatedSpread, doc, what="spread.yaml")
    return caught.value.problems


S0 = "spec.subsets[0]"
S1 = "spec.subsets[1]"
CT = "spec.clusterTolerations"
IN_NO_VALUES = {"matchExpressions": [{"key": "pool", "operator": "In"}]}

INVALID = [
    # subsets: names and cluster choice
    pytest.param({f"{S1}.name": "onprem"}, f"{S1}.name", "duplicate subset name",
                 id="duplicate-subset-name"),
    pytest.param({f"{S0}.clusters": DELETE}, S0, "neither is set", id="neither-clusters-nor-selector"),
    pytest.param({f"{S0}.clusterSelector": {"matchLabels": {"a": "b"}}}, S0, "both is set",
                 id="both-clusters-and-selector"),
    pytest.param({f"{S0}.clusters": []}, f"{S0}.clusters", "at least one cluster",
                 id="empty-clusters-list"),
    pytest.param({f"{S0}.requiredNodeSelectorTerm": {}}, f"{S0}.requiredNodeSelectorTerm",
                 "matches no node", id="empty-required-node-selector-term"),
    pytest.param({f"{S0}.clusters": ["dc1", "dc2", "dc1"]}, f"{S0}.clusters", "listed twice",
                 id="cluster-listed-twice"),
    pytest.param({f"{S0}.clusters": ["dc1", ""]}, f"{S0}.clusters", "must not be empty",
                 id="empty-cluster-name"),
    pytest.param({f"{S0}.clusters": "dc1"}, f"{S0}.clusters", "valid list",
                 id="clusters-not-a-list"),
    pytest.param({f"{S0}.name": "OnPrem"}, f"{S0}.name", "not a DNS label", id="uppercase-subset-name"),
    pytest.param({f"{S0}.name": "on_prem"}, f"{S0}.name", "not a DNS label",
                 id="underscore-in-subset-name"),
    pytest.param({f"{S0}.name": "a" * 64}, f"{S0}.name", "at most 63", id="subset-name-too-long"),
    pytest.param({f"{S0}.name": DELETE}, f"{S0}.name", "required", id="missing-subset-name"),
    pytest.param({f"{S0}.clusterSpread": "RoundRobin"}, f"{S0}.clusterSpread", "'Fill'",
                 id="unknown-cluster-spread"),
    # maxReplicas
    pytest.param({f"{S0}.maxReplicas": -1}, f"{S0}.maxReplicas", "must not be negative",
                 id="maxReplicas-negative"),
    pytest.param({f"{S0}.maxReplicas": "150%"}, f"{S0}.maxReplicas", "between 0% and 100%",
                 id="maxReplicas-150-percent"),
    pytest.param({f"{S0}.maxReplicas": "abc"}, f"{S0}.maxReplicas", "neither an integer",
                 id="maxReplicas-abc"),
    pytest.param({f"{S0}.maxReplicas": "30"}, f"{S0}.maxReplicas", "neither an integer",
                 id="maxReplicas-string-without-percent"),
    pytest.param({f"{S0}.maxReplicas": "-10%"}, f"{S0}.maxReplicas", "neither an integer",
                 id="maxReplicas-negative-percent"),
    pytest.param({f"{S0}.maxReplicas": True}, f"{S0}.maxReplicas", "non-negative integer",
                 id="maxReplicas-boolean"),
    pytest.param({f"{S0}.maxReplicas": 2.5}, f"{S0}.maxReplicas", "non-negative integer",
                 id="maxReplicas-float"),
    pytest.param({f"{S1}.maxReplicas": "50%"}, f"{S1}.maxReplicas", "mixes cap kinds",
                 id="mixed-integer-and-percentage-caps"),
    pytest.param({f"{S0}.maxReplicas": "60%", f"{S1}.maxReplicas": "50%"}, "spec.subsets",
                 "sum to 110%", id="percentages-sum-to-110"),
    # minReplicas and topologySpread (issue 25)
    pytest.param({f"{S0}.minReplicas": -1}, f"{S0}.minReplicas", "must not be negative", id="floor-negative"),
    pytest.param({f"{S0}.minReplicas": "120%"}, f"{S0}.minReplicas", "between 0% and 100%",
                 id="floor-120-percent"),
    pytest.param({f"{S0}.minReplicas": 31}, f"{S0}.minReplicas", "above the subset's cap",
                 id="floor-above-cap"),
    pytest.param({f"{S0}.maxReplicas": "20%", f"{S0}.minReplicas": "30%"}, f"{S0}.minReplicas",
                 "above the subset's cap", id="percentage-floor-above-percentage-cap"),
    pytest.param({f"{S0}.minReplicas": 2, f"{S1}.minReplicas": "10%"}, f"{S1}.minReplicas",
                 "mixes floor kinds", id="mixed-floor-kinds"),
    pytest.param({f"{S0}.maxReplicas": DELETE, f"{S0}.minReplicas": "60%", f"{S1}.minReplicas": "50%"},
                 "spec.subsets", "minReplicas sum to 110%", id="floors-sum-to-110"),
    pytest.param({"spec.topologySpread": [{"topologyKey": "region", "maxSkew": 0}]},
                 "spec.topologySpread[0].maxSkew", "greater than or equal to 1", id="maxSkew-zero"),
    pytest.param({"spec.topologySpread": [{"topologyKey": "region", "maxSkew": 1,
                                           "whenUnsatisfiable": "Sometimes"}]},
                 "spec.topologySpread[0].whenUnsatisfiable", "'DoNotSchedule'",
                 id="unknown-whenUnsatisfiable"),
    pytest.param({"spec.topologySpread": [{"topologyKey": "region", "maxSkew": 1,
                                           "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 3}]},
                 "spec.topologySpread[0].minDomains", "only with whenUnsatisfiable: DoNotSchedule",
                 id="minDomains-with-ScheduleAnyway"),
    pytest.param({"spec.topologySpread": [{"maxSkew": 1}]}, "spec.topologySpread[0].topologyKey",
                 "required", id="topologyKey-missing"),
    # strategy and failover
    pytest.param({"spec.scheduleStrategy.type": "Random"}, "spec.scheduleStrategy.type", "'Fixed'",
                 id="unknown-strategy-type"),
    pytest.param({"spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds": 0},
                 "spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds", "greater than 0",
                 id="rescheduleCriticalSeconds-zero"),
    pytest.param({"spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds": -5},
                 "spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds", "got -5",
                 id="rescheduleCriticalSeconds-negative"),
    pytest.param({"spec.scheduleStrategy.adaptive.unschedulableSeconds": 0},
                 "spec.scheduleStrategy.adaptive.unschedulableSeconds", "greater than 0",
                 id="unschedulableSeconds-zero"),
    pytest.param({"spec.scheduleStrategy.type": "Fixed"}, "spec.scheduleStrategy.adaptive",
                 "apply only to type Adaptive", id="adaptive-settings-with-Fixed"),
    pytest.param({"spec.scheduleStrategy.type": DELETE}, "spec.scheduleStrategy.adaptive",
                 "apply only to type Adaptive", id="adaptive-settings-with-default-Fixed"),
    pytest.param({"spec.failover.clusterLostSeconds": 0}, "spec.failover.clusterLostSeconds",
                 "greater than 0", id="clusterLostSeconds-zero"),
    # unknown and missing fields
    pytest.param({"replicas": 3}, "replicas", "unknown field", id="unknown-top-level-field"),
    pytest.param({"spec.replicas": 3}, "spec.replicas", "unknown field", id="unknown-spec-field"),
    pytest.param({f"{S0}.maxReplica": 3}, f"{S0}.maxReplica", "unknown field",
                 id="unknown-subset-field-typo"),
    pytest.param({"spec.scheduleStrategy.adaptive.rescheduleSeconds": 3},
                 "spec.scheduleStrategy.adaptive.rescheduleSeconds", "unknown field",
                 id="unknown-adaptive-field"),
    pytest.param({"spec.targetRef": DELETE}, "spec.targetRef", "required", id="missing-targetRef"),
    pytest.param({"spec.targetRef.name": DELETE}, "spec.targetRef.name", "required",
                 id="missing-targetRef-name"),
    pytest.param({"spec.targetRef.kind": "DaemonSet"}, "spec.targetRef.kind",
                 "'Deployment', 'ReplicaSet', 'StatefulSet' or 'Job'",
                 id="wrong-targetRef-kind"),
    pytest.param({"spec.targetRef.kind": "Job"}, "spec.targetRef.kind",
                 "Job is served as batch/v1, not apps/v1", id="targetRef-job-as-apps-v1"),
    pytest.param({"spec.targetRef.kind": "Deployment", "spec.targetRef.apiVersion": "batch/v1"},
                 "spec.targetRef.kind", "Deployment is served as apps/v1, not batch/v1",
                 id="targetRef-deployment-as-batch-v1"),
    pytest.param({"spec.targetRef.kind": "replicaset"}, "spec.targetRef.kind", "'ReplicaSet'",
                 id="targetRef-kind-lowercase"),
    pytest.param({"spec.targetRef.apiVersion": "extensions/v1beta1"}, "spec.targetRef.apiVersion",
                 "'apps/v1' or 'batch/v1'",
                 id="wrong-targetRef-apiVersion"),
    pytest.param({"spec.subsets": []}, "spec.subsets", "at least 1", id="empty-subsets"),
    pytest.param({"spec": DELETE}, "spec", "required", id="missing-spec"),
    pytest.param({"metadata.name": DELETE}, "metadata.name", "required", id="missing-metadata-name"),
    pytest.param({"apiVersion": "fedspread.io/v1"}, "apiVersion", "fedspread.io/v1alpha1",
                 id="wrong-apiVersion"),
    # node selectors, tolerations
    pytest.param({f"{S0}.requiredNodeSelectorTerm": IN_NO_VALUES},
                 f"{S0}.requiredNodeSelectorTerm.matchExpressions[0]", "needs at least one value",
                 id="node-selector-In-without-values"),
    pytest.param({f"{S0}.requiredNodeSelectorTerm.matchExpressions[0]":
                  {"key": "cpus", "operator": "Gt", "values": ["many"]}},
                 f"{S0}.requiredNodeSelectorTerm.matchExpressions[0]", "needs an integer value",
                 id="node-selector-Gt-non-integer"),
    pytest.param({f"{S0}.requiredNodeSelectorTerm.matchExpressions[0]":
                  {"key": "cpus", "operator": "Lt", "values": ["1", "2"]}},
                 f"{S0}.requiredNodeSelectorTerm.matchExpressions[0]", "exactly one value",
                 id="node-selector-Lt-two-values"),
    pytest.param({f"{S0}.requiredNodeSelectorTerm.matchExpressions[0]":
                  {"key": "gpu", "operator": "Exists", "values": ["yes"]}},
                 f"{S0}.requiredNodeSelectorTerm.matchExpressions[0]", "takes no values",
                 id="node-selector-Exists-with-values"),
    pytest.param({f"{S0}.requiredNodeSelectorTerm.matchExpressions[0].operator": "Near"},
                 f"{S0}.requiredNodeSelectorTerm.matchExpressions[0].operator", "'In'",
                 id="node-selector-unknown-operator"),
    pytest.param({f"{S0}.preferredNodeSelectorTerms": [{"weight": 0, "preference": {}}]},
                 f"{S0}.preferredNodeSelectorTerms[0].weight", "greater than or equal to 1",
                 id="preferred-term-weight-zero"),
    pytest.param({f"{S0}.tolerations[0]": {"key": "dedicated", "operator": "Exists",
                                           "value": "web"}},
                 f"{S0}.tolerations[0]", "takes no value", id="toleration-Exists-with-value"),
    pytest.param({f"{S0}.tolerations[0]": {"key": "", "operator": "Equal", "value": "web"}},
                 f"{S0}.tolerations[0]", "empty key requires operator Exists",
                 id="toleration-empty-key-Equal"),
    pytest.param({f"{S0}.tolerations[0].effect": "NoRun"}, f"{S0}.tolerations[0].effect",
                 "'NoSchedule'", id="toleration-bad-taint-effect"),
    # clusterTolerations: Kubernetes tolerations of MemberCluster taints
    pytest.param({"spec.clusterTolerations": [{"key": "maint", "operator": "Exists", "value": "x"}]},
                 f"{CT}[0].operator", "takes no value", id="cluster-toleration-Exists-with-value"),
    pytest.param({"spec.clusterTolerations": [{"operator": "Equal", "value": "x"}]},
                 f"{CT}[0].operator", "empty key requires operator Exists",
                 id="cluster-toleration-empty-key-Equal"),
    pytest.param({"spec.clusterTolerations": [{"key": "maint", "effect": "NoSchedule",
                                               "tolerationSeconds": 30}]},
                 f"{CT}[0].tolerationSeconds", "only to effect NoExecute",
                 id="cluster-toleration-seconds-with-NoSchedule"),
    pytest.param({"spec.clusterTolerations": [{"key": "maint", "effect": "NoExecute",
                                               "tolerationSeconds": -1}]},
                 f"{CT}[0].tolerationSeconds", "must not be negative",
                 id="cluster-toleration-negative-seconds"),
    pytest.param({"spec.clusterTolerations": [{"key": "maint"}, {"key": "m", "operator": "Near"}]},
                 f"{CT}[1].operator", "'Exists'", id="cluster-toleration-unknown-operator"),
    pytest.param({f"{S1}.clusterSelector.matchExpressions[0].values": DELETE},
                 f"{S1}.clusterSelector.matchExpressions[0]", "needs at least one value",
                 id="cluster-selector-In-without-values"),
    pytest.param({f"{S1}.clusterSelector.matchExpressions[0].operator": "Gt"},
                 f"{S1}.clusterSelector.matchExpressions[0].operator", "'In'",
                 id="cluster-selector-Gt-not-allowed"),
]


def test_the_base_spread_is_valid() -> None:
    parsed = problems.validate(spread.FederatedSpread, base_spread(), what="spread.yaml")
    assert [s.name for s in parsed.spec.subsets] == ["onprem", "eu-cloud"]


@pytest.mark.parametrize(("changes", "path", "fragment"), INVALID)
def test_invalid_spread_reports_the_field_path(
    changes: dict[str, Any], path: str, fragment: str
) -> None:
    found = problems_of(with_changes(changes))
    by_path = {p.path: p.message for p in found}
    assert path in by_path, f"expected a problem at {path}, got {[str(p) for p in found]}"
    assert fragment.lower() in by_path[path].lower(), by_path[path]
    for problem in found:
        assert CLEAN_PATH.match(problem.path), f"pydantic internals leak into {problem.path!r}"
        assert "Value error" not in problem.message
        assert "errors.pydantic.dev" not in problem.message


def test_invalid_cases_cover_at_least_25_documents() -> None:
    assert len(INVALID) >= 25


SEED_STYLE_SPREADS = {
    "minimal-defaults": {
        "metadata": {"name": "web"},
        "spec": {"targetRef": {"name": "web"}, "subsets": [{"name": "all", "clusters": ["dc1"]}]},
    },
    "base-pool-capped-then-elastic": base_spread(),
    "prefer-onprem-overflow-to-cloud": {
        "apiVersion": "fedspread.io/v1alpha1",
        "kind": "FederatedSpread",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "targetRef": {"name": "web"},
            "subsets": [
                {"name": "onprem", "clusters": ["dc1", "dc2"], "clusterSpread": "Fill"},
                {"name": "cloud", "clusterSelector": {"matchLabels": {
                    "topology.fedspread.io/provider": "aws"}}},
            ],
            "scheduleStrategy": {"type": "Adaptive", "adaptive": {
                "disableSimulationSchedule": True, "rescheduleCriticalSeconds": 10}},
        },
    },
    "one-one-three-zone-ratio": {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "targetRef": {"name": "web"},
            "subsets": [
                {"name": "eu-west", "clusters": ["aws-eu"], "maxReplicas": "20%"},
                {"name": "eu-central", "clusters": ["gcp-eu"], "maxReplicas": "20%"},
                {"name": "us-east", "clusters": ["aws-us"], "maxReplicas": "60%"},
            ],
        },
    },
    "per-arch-patches": {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "targetRef": {"name": "web"},
            "subsets": [
                {
                    "name": "arm",
                    "clusters": ["dc1"],
                    "maxReplicas": 0,
                    "requiredNodeSelectorTerm": {"matchExpressions": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                        {"key": "cpus", "operator": "Gt", "values": ["4"]},
                    ]},
                    "preferredNodeSelectorTerms": [{"weight": 100, "preference": {
                        "matchExpressions": [{"key": "ssd", "operator": "Exists"}]}}],
                    "tolerations": [{"operator": "Exists"},
                                    {"key": "arm", "operator": "Exists", "effect": "NoExecute",
                                     "tolerationSeconds": 30}],
                    "patch": {"metadata": {"labels": {"arch": "arm64"}},
                              "spec": {"containers": [{"name": "web", "image": "web:arm64"}]}},
                },
                {"name": "x86", "clusterSelector": {}, "maxReplicas": 10},
            ],
            "failover": {"clusterLostSeconds": 120},
        },
    },
}


@pytest.mark.parametrize("doc", SEED_STYLE_SPREADS.values(), ids=SEED_STYLE_SPREADS.keys())
def test_seed_style_spreads_are_valid(doc: dict[str, Any]) -> None:
    parsed = problems.validate(spread.FederatedSpread, doc, what="spread.yaml")
    assert parsed.spec.subsets


def test_defaults_and_percentage_normalisation() -> None:
    doc = SEED_STYLE_SPREADS["minimal-defaults"]
    parsed = problems.validate(spread.FederatedSpread, copy.deepcopy(doc), what="spread.yaml")
    assert parsed.spec.schedule_strategy.type == "Fixed"
    assert parsed.spec.failover.cluster_lost_seconds == 60
    assert parsed.spec.subsets[0].cluster_spread == "Capacity"
    assert parsed.key == "default/web"
    capped = with_changes({f"{S0}.maxReplicas": " 50% ", f"{S1}.maxReplicas": "0%"})
    parsed = problems.validate(spread.FederatedSpread, capped, what="spread.yaml")
    assert [s.max_replicas for s in parsed.spec.subsets] == ["50%", "0%"]
    assert parsed.spec.subsets[0].percent == 50


def test_every_field_problem_is_reported_at_once() -> None:
    doc = with_changes({
        f"{S0}.maxReplicas": -1,
        f"{S1}.name": "Bad_Name",
        "spec.scheduleStrategy.type": "Random",
        "spec.failover.clusterLostSeconds": 0,
        "status": {"replicas": "many"},
        "extra": True,
    })
    paths = [p.path for p in problems_of(doc)]
    assert paths == [
        f"{S0}.maxReplicas",
        f"{S1}.name",
        "spec.scheduleStrategy.type",
        "spec.failover.clusterLostSeconds",
        "status.replicas",
        "extra",
    ]


def test_cluster_tolerations_parse_and_report_every_problem_at_once() -> None:
    doc = with_changes({"spec.clusterTolerations": [
        {"operator": "Exists"},
        {"key": "maint", "operator": "Equal", "value": "yes", "effect": "NoExecute", "tolerationSeconds": 0},
    ]})
    parsed = problems.validate(spread.FederatedSpread, doc, what="spread.yaml")
    assert [(t.key, t.operator, t.toleration_seconds) for t in parsed.spec.cluster_tolerations] == [
        ("", "Exists", None), ("maint", "Equal", 0)]
    doc = with_changes({
        f"{S0}.maxReplicas": -1,
        "spec.clusterTolerations": [
            {"key": "a", "operator": "Exists", "value": "v", "effect": "PreferNoSchedule",
             "tolerationSeconds": -5},
            {"key": "b", "effect": "NoExecute", "tolerationSeconds": 60},
            {"operator": "Equal"},
        ],
    })
    assert [p.path for p in problems_of(doc)] == [
        f"{S0}.maxReplicas", f"{CT}[0].operator", f"{CT}[0].tolerationSeconds",
        f"{CT}[0].tolerationSeconds", f"{CT}[2].operator"]


def test_every_cross_field_problem_is_reported_at_once() -> None:
    doc = base_spread()
    doc["spec"]["subsets"][0]["maxReplicas"] = "60%"
    doc["spec"]["subsets"][1]["maxReplicas"] = "50%"
    doc["spec"]["subsets"][1]["clusters"] = ["dc2"]
    doc["spec"]["subsets"].append({"name": "onprem", "maxReplicas": 5})
    found = problems_of(doc)
    assert [p.path for p in found] == [
        S1,
        "spec.subsets[2].name",
        "spec.subsets[2]",
        "spec.subsets[2].maxReplicas",
        "spec.subsets",
    ]
    messages = "\n".join(str(p) for p in found)
    assert "already used by subsets[0]" in messages
    assert "subsets[0] has a percentage cap, this one an integer" in messages


def test_invalid_input_lists_every_problem_one_per_line() -> None:
    doc = with_changes({f"{S0}.maxReplicas": -1, "spec.scheduleStrategy.type": "Random"})
    with pytest.raises(problems.InvalidInput) as caught:
        problems.validate(spread.FederatedSpread, doc, what="spread.yaml")
    error = caught.value
    assert error.what == "spread.yaml"
    assert str(error).splitlines() == [
        "spread.yaml is invalid:",
        f"  - {S0}.maxReplicas: maxReplicas must not be negative, got -1",
        "  - spec.scheduleStrategy.type: Input should be 'Fixed' or 'Adaptive'",
    ]


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        pytest.param(None, "empty", id="empty-document"),
        pytest.param(["a", "b"], "expected a mapping", id="a-list"),
        pytest.param("web", "expected a mapping", id="a-string"),
    ],
)
def test_a_document_that_is_not_a_mapping(data: Any, fragment: str) -> None:
    found = problems_of(data)
    assert len(found) == 1
    assert found[0].path == ""
    assert fragment in found[0].message


def test_load_spread_reads_a_valid_file(tmp_path: pathlib.Path) -> None:
    source = tmp_path / "spread.yaml"
    source.write_text(yaml.safe_dump(base_spread()))
    assert problems.load_spread(source).key == "shop/web"


def test_load_spread_reports_field_paths_with_the_file_name(tmp_path: pathlib.Path) -> None:
    source = tmp_path / "spread.yaml"
    source.write_text(yaml.safe_dump(with_changes({f"{S0}.maxReplicas": "150%"})))
    with pytest.raises(problems.InvalidInput) as caught:
        problems.load_spread(source)
    assert caught.value.what == str(source)
    assert [p.path for p in caught.value.problems] == [f"{S0}.maxReplicas"]


def test_yaml_syntax_error_is_invalid_input_with_a_line(tmp_path: pathlib.Path) -> None:
    source = tmp_path / "spread.yaml"
    source.write_text("apiVersion: fedspread.io/v1alpha1\nspec:\n  subsets: [onprem\n")
    with pytest.raises(problems.InvalidInput) as caught:
        problems.load_spread(source)
    (problem,) = caught.value.problems
    assert problem.path == ""
    assert "not valid YAML" in problem.message
    assert "line " in problem.message


def test_missing_file_is_invalid_input(tmp_path: pathlib.Path) -> None:
    with pytest.raises(problems.InvalidInput) as caught:
        problems.load_spread(tmp_path / "nowhere.yaml")
    (problem,) = caught.value.problems
    assert problem.message.startswith("cannot read")


def test_directory_is_invalid_input(tmp_path: pathlib.Path) -> None:
    with pytest.raises(problems.InvalidInput) as caught:
        problems.load_spread(tmp_path)
    assert caught.value.problems[0].message.startswith("cannot read")


def test_empty_file_is_invalid_input(tmp_path: pathlib.Path) -> None:
    source = tmp_path / "spread.yaml"
    source.write_text("# nothing here\n")
    with pytest.raises(problems.InvalidInput) as caught:
        problems.load_spread(source)
    assert [p.message for p in caught.value.problems] == ["the document is empty"]


def test_schema_and_cross_field_problems_come_in_one_pass() -> None:
    # Two schema problems (a percentage above 100%, an unknown strategy) and two cross-field ones
    # (a duplicate name, both clusters and clusterSelector): all four at once, not two then two.
    doc = with_changes({f"{S0}.maxReplicas": "140%", "spec.scheduleStrategy.type": "Random",
                        f"{S1}.name": "onprem", f"{S1}.clusters": ["aws"]})
    found = [str(problem) for problem in problems_of(doc)]
    assert any(line.startswith(f"{S0}.maxReplicas: ") and "140%" in line for line in found), found
    assert any(line.startswith("spec.scheduleStrategy.type: ") for line in found), found
    assert f"{S1}.name: duplicate subset name 'onprem' (already used by subsets[0])" in found
    assert any(line.startswith(f"{S1}: set exactly one of clusters or clusterSelector") for line in found)
    # A rule where a field was removed to get this far is not judged: the strategy's type was
    # removed, so "adaptive settings apply only to Adaptive" would only be about its default.
    assert len(found) == 4, found


def test_topology_spread_and_floors_parse_with_their_defaults() -> None:
    doc = base_spread()
    doc["spec"]["subsets"][1]["minReplicas"] = 2
    doc["spec"]["topologySpread"] = [
        {"topologyKey": "topology.fedspread.io/region", "maxSkew": 1, "minDomains": 3},
        {"topologyKey": "fedspread.io/cluster", "maxSkew": 2, "whenUnsatisfiable": "ScheduleAnyway"},
    ]
    parsed = problems.validate(spread.FederatedSpread, doc, what="spread")
    first, second = parsed.spec.topology_spread
    assert (first.when_unsatisfiable, first.min_domains) == ("DoNotSchedule", 3)
    assert (second.when_unsatisfiable, second.min_domains) == ("ScheduleAnyway", None)
    assert [s.min_replicas for s in parsed.spec.subsets] == [None, 2]
    assert parsed.spec.model_dump(by_alias=True, exclude_defaults=True)["topologySpread"][0]["maxSkew"] == 1
