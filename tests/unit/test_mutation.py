"""Pod mutation by the webhook (DESIGN §4), the strategic-merge patch and the JSONPatch it returns."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from federation.api import names
from federation.core import mutation, strategic_merge

SUBSET = "onprem"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


ZONE_A = expr("zone", "In", "a")
TYPE_ECS = expr("type", "NotIn", "virtual-kubelet")
GPU = expr("gpu", "Exists")
NAME_FIELD = expr("metadata.name", "In", "node-1")
VK_TOLERATION = {"key": "virtual-kubelet.io/provider", "operator": "Exists"}
SPOT_TOLERATION = {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
PREFER_B = {"weight": 50, "preference": {"matchExpressions": [expr("zone", "In", "b")]}}
PREFER_C = {"weight": 10, "preference": {"matchExpressions": [expr("zone", "In", "c")]}}


def base_pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "web-", "labels": {"app": "web", "tier": "front"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "web:1",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "resources": {"requests": {"cpu": "100m"}},
                },
                {"name": "sidecar", "image": "proxy:1", "resources": {"requests": {"cpu": "50m"}}},
            ],
            **spec,
        },
    }


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": list(terms)}}}


def mutate(pod: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "subset": SUBSET,
        "required_term": None,
        "preferred_terms": [],
        "tolerations": [],
        "patch": None,
    }
    return mutation.mutate_pod(pod, **(args | kwargs))


def terms_of(pod: dict[str, Any]) -> Any:
    return pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"]


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == name)


# --- table: (id, pod, mutate kwargs, check on the result) -----------------------------------------

CASES: list[Any] = [
    pytest.param(
        base_pod(),
        {"required_term": {"matchExpressions": [ZONE_A]}},
        lambda p: terms_of(p) == [{"matchExpressions": [ZONE_A]}],
        id="no-affinity-term-becomes-only-term",
    ),
    pytest.param(
        base_pod(
            affinity={"podAntiAffinity": {"x": 1}, "nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}}
        ),
        {"required_term": {"matchExpressions": [ZONE_A]}},
        lambda p: (
            terms_of(p) == [{"matchExpressions": [ZONE_A]}] and p["spec"]["affinity"]["podAntiAffinity"]
        ),
        id="empty-terms-list-term-becomes-only-term",
    ),
    pytest.param(
        base_pod(affinity=required({"matchExpressions": [TYPE_ECS]}, {"matchExpressions": [GPU]})),
        {"required_term": {"matchExpressions": [ZONE_A]}},
        lambda p: (
            terms_of(p) == [{"matchExpressions": [TYPE_ECS, ZONE_A]}, {"matchExpressions": [GPU, ZONE_A]}]
        ),
        id="two-required-terms-subset-anded-into-both",
    ),
    pytest.param(
        base_pod(affinity=required({"matchExpressions": [TYPE_ECS]}, {"matchFields": [NAME_FIELD]})),
        {"required_term": {"matchExpressions": [ZONE_A], "matchFields": [NAME_FIELD]}},
        lambda p: (
            terms_of(p)
            == [
                {"matchExpressions": [TYPE_ECS, ZONE_A], "matchFields": [NAME_FIELD]},
                {"matchFields": [NAME_FIELD], "matchExpressions": [ZONE_A]},
            ]
        ),
        id="match-fields-concatenated-not-duplicated",
    ),
    pytest.param(
        base_pod(affinity={"nodeAffinity": {PREFERRED: [PREFER_C]}}),
        {"preferred_terms": [PREFER_B, PREFER_C]},
        lambda p: (
            p["spec"]["affinity"]["nodeAffinity"][PREFERRED] == [PREFER_C, PREFER_B]
            and REQUIRED not in p["spec"]["affinity"]["nodeAffinity"]
        ),
        id="preferred-terms-appended-without-duplicates",
    ),
    pytest.param(
        base_pod(),
        {"preferred_terms": [PREFER_B]},
        lambda p: p["spec"]["affinity"] == {"nodeAffinity": {PREFERRED: [PREFER_B]}},
        id="preferred-terms-create-affinity",
    ),
    pytest.param(
        base_pod(tolerations=[SPOT_TOLERATION]),
        {"tolerations": [VK_TOLERATION, dict(SPOT_TOLERATION)]},
        lambda p: p["spec"]["tolerations"] == [SPOT_TOLERATION, VK_TOLERATION],
        id="tolerations-appended-skipping-exact-duplicates",
    ),
    pytest.param(
        base_pod(),
        {"tolerations": [VK_TOLERATION]},
        lambda p: p["spec"]["tolerations"] == [VK_TOLERATION],
        id="tolerations-created",
    ),
    pytest.param(
        base_pod(),
        {"patch": {"metadata": {"labels": {"xxx-specific-label": "xxx"}}}},
        lambda p: p["metadata"]["labels"] == {"app": "web", "tier": "front", "xxx-specific-label": "xxx"},
        id="patch-adds-label",
    ),
    pytest.param(
        base_pod(),
        {"patch": {"metadata": {"labels": {"tier": None}}}},
        lambda p: p["metadata"]["labels"] == {"app": "web"},
        id="patch-null-deletes-label",
    ),
    pytest.param(
        base_pod(),
        {"patch": {"spec": {"containers": [{"name": "main", "resources": {"limits": {"cpu": "2"}}}]}}},
        lambda p: (
            container(p, "main")["resources"] == {"requests": {"cpu": "100m"}, "limits": {"cpu": "2"}}
            and container(p, "main")["image"] == "web:1"
            and container(p, "sidecar") == base_pod()["spec"]["containers"][1]
        ),
        id="patch-container-resources-merged-by-name-other-untouched",
    ),
    pytest.param(
        base_pod(),
        {
            "patch": {
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "env": [{"name": "B", "value": "20"}, {"name": "K", "value": "main"}],
                        }
                    ]
                }
            }
        },
        lambda p: (
            container(p, "main")["env"]
            == [{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "K", "value": "main"}]
        ),
        id="patch-env-merged-by-name",
    ),
    pytest.param(
        base_pod(),
        {"patch": {"spec": {"containers": [{"name": "main", "env": [{"name": "A", "$patch": "delete"}]}]}}},
        lambda p: container(p, "main")["env"] == [{"name": "B", "value": "2"}],
        id="patch-delete-directive-removes-env",
    ),
    pytest.param(
        base_pod(),
        {"patch": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}},
        lambda p: [c["name"] for c in p["spec"]["containers"]] == ["main"],
        id="patch-delete-directive-removes-container",
    ),
    pytest.param(
        base_pod(),
        {"patch": {"spec": {"containers": [{"name": "extra", "image": "x:1"}]}}},
        lambda p: [c["name"] for c in p["spec"]["containers"]] == ["main", "sidecar", "extra"],
        id="patch-new-container-appended",
    ),
    pytest.param(
        base_pod(tolerations=[SPOT_TOLERATION]),
        {"tolerations": [VK_TOLERATION], "patch": {"spec": {"tolerations": [{"operator": "Exists"}]}}},
        lambda p: p["spec"]["tolerations"] == [{"operator": "Exists"}],
        id="patch-replaces-tolerations-list",
    ),
    pytest.param(
        base_pod(),
        {},
        lambda p: (p["metadata"]["annotations"] == {names.SUBSET_ANNOTATION: SUBSET}
                   and "affinity" not in p["spec"]),
        id="annotation-set-nothing-else",
    ),
    pytest.param(
        {**base_pod(), "metadata": {"annotations": {names.SUBSET_ANNOTATION: "old", "x/y": "z"}}},
        {},
        lambda p: p["metadata"]["annotations"] == {names.SUBSET_ANNOTATION: SUBSET, "x/y": "z"},
        id="annotation-overwritten-others-kept",
    ),
    pytest.param(
        base_pod(),
        {"name": "web-bcdfg"},
        lambda p: p["metadata"]["name"] == "web-bcdfg",
        id="name-set-when-missing",
    ),
    pytest.param(
        {**base_pod(), "metadata": {"name": "given"}},
        {"name": "web-bcdfg"},
        lambda p: p["metadata"]["name"] == "given",
        id="name-kept-when-present",
    ),
]


@pytest.mark.parametrize(("pod", "kwargs", "check"), CASES)
def test_mutate_pod(pod: dict[str, Any], kwargs: dict[str, Any], check: Any) -> None:
    before = copy.deepcopy(pod)
    kwargs_before = copy.deepcopy(kwargs)
    mutated = mutate(pod, **kwargs)
    assert check(mutated), mutated
    assert mutated["metadata"]["annotations"][names.SUBSET_ANNOTATION] == SUBSET
    assert pod == before and kwargs == kwargs_before, "inputs must not be mutated"
    # idempotent: the webhook may be called again on its own output
    assert mutate(mutated, **kwargs) == mutated
    # the JSONPatch the webhook returns turns the original into the mutated pod
    assert jsonpatch.apply_patch(before, mutation.json_patch(before, mutated)) == mutated


def test_result_shares_nothing_with_inputs() -> None:
    pod, term = base_pod(), {"matchExpressions": [ZONE_A]}
    mutated = mutate(pod, required_term=term, tolerations=[VK_TOLERATION])
    terms_of(mutated)[0]["matchExpressions"].append(GPU)
    mutated["spec"]["tolerations"][0]["key"] = "changed"
    mutated["spec"]["containers"][0]["env"].clear()
    assert term == {"matchExpressions": [ZONE_A]}
    assert VK_TOLERATION["key"] == "virtual-kubelet.io/provider"
    assert len(pod["spec"]["containers"][0]["env"]) == 2


def test_idempotent_with_everything() -> None:
    pod = base_pod(affinity=required({"matchExpressions": [TYPE_ECS]}, {"matchExpressions": [GPU]}))
    kwargs: dict[str, Any] = {
        "required_term": {"matchExpressions": [ZONE_A], "matchFields": [NAME_FIELD]},
        "preferred_terms": [PREFER_B],
        "tolerations": [VK_TOLERATION],
        "patch": {"metadata": {"labels": {"tier": None, "s": "1"}, "finalizers": ["f"]}},
        "name": "web-xyz",
    }
    once = mutate(pod, **kwargs)
    assert mutate(once, **kwargs) == once
    assert once["metadata"]["finalizers"] == ["f"]


def test_malformed_affinity_is_a_value_error_with_path() -> None:
    with pytest.raises(ValueError, match=r"spec\.affinity\.nodeAffinity"):
        mutate(base_pod(affinity={"nodeAffinity": []}), required_term={"matchExpressions": [ZONE_A]})
    with pytest.raises(ValueError, match=r"spec\.tolerations"):
        mutate(base_pod(tolerations={"key": "x"}), tolerations=[VK_TOLERATION])


# --- strategic merge details ----------------------------------------------------------------------


def test_strategic_merge_directives() -> None:
    pod = base_pod(volumes=[{"name": "v1", "emptyDir": {}}, {"name": "v2", "secret": {"secretName": "s"}}])
    patched = strategic_merge.apply(
        pod,
        {
            "metadata": {"$patch": "replace", "labels": {"only": "this"}},
            "spec": {
                "volumes": [{"$patch": "replace"}, {"name": "v3", "emptyDir": {"medium": None}}],
                "containers": [{"name": "main", "ports": [{"containerPort": 80, "name": None}]}],
            },
        },
    )
    assert patched["metadata"] == {"labels": {"only": "this"}}
    assert patched["spec"]["volumes"] == [{"name": "v3", "emptyDir": {}}]
    assert container(patched, "main")["ports"] == [{"containerPort": 80}]
    assert pod == base_pod(
        volumes=[{"name": "v1", "emptyDir": {}}, {"name": "v2", "secret": {"secretName": "s"}}]
    )


def test_strategic_merge_keyed_lists_and_primitive_union() -> None:
    pod = base_pod()
    pod["metadata"]["finalizers"] = ["a"]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"mountPath": "/data", "name": "v1"}]
    patched = strategic_merge.apply(
        pod,
        {
            "metadata": {"finalizers": ["b", "a"]},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "volumeMounts": [{"mountPath": "/data", "readOnly": True}],
                        "args": ["x"],
                    }
                ],
                "imagePullSecrets": [{"name": "reg"}],
            },
        },
    )
    assert patched["metadata"]["finalizers"] == ["a", "b"]
    assert container(patched, "main")["volumeMounts"] == [
        {"mountPath": "/data", "name": "v1", "readOnly": True}
    ]
    assert container(patched, "main")["args"] == ["x"]
    assert patched["spec"]["imagePullSecrets"] == [{"name": "reg"}]


def test_strategic_merge_primitive_delete_retain_keys_and_element_order() -> None:
    pod = base_pod(volumes=[{"name": "v", "emptyDir": {}}])
    pod["metadata"]["finalizers"] = ["a", "b", "c"]
    patched = strategic_merge.apply(
        pod,
        {
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["b"], "finalizers": ["d"]},
            "spec": {
                "$setElementOrder/volumes": [{"name": "v"}],
                "volumes": [{"name": "v", "$retainKeys": ["name", "configMap"], "configMap": {"name": "cm"}}],
            },
        },
    )
    assert patched["metadata"]["finalizers"] == ["a", "c", "d"]
    assert patched["spec"]["volumes"] == [{"name": "v", "configMap": {"name": "cm"}}]
    assert strategic_merge.apply(pod, {"$patch": "delete"}) == {}


def test_strategic_merge_rejects_element_without_merge_key() -> None:
    with pytest.raises(ValueError, match=r"spec\.containers.*'name'"):
        strategic_merge.apply(base_pod(), {"spec": {"containers": [{"image": "x"}]}})
    with pytest.raises(ValueError, match="unknown"):
        strategic_merge.apply(base_pod(), {"spec": {"$patch": "explode"}})


# --- JSONPatch ------------------------------------------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "a/b", "~", "~1", "x~0/y", "fedspread.io/subset", "", "/", "~/~"])
_SCALARS = st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from([0.5, 1.0, "", "s", "~/"])
_VALUES = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_KEYS, children, max_size=3),
    max_leaves=10,
)
_DOCS = st.dictionaries(_KEYS, _VALUES, max_size=4)


@st.composite
def _edited(draw: st.DrawFn, value: Any) -> Any:
    """A copy of value with random keys kept, dropped, replaced, added or edited in depth."""
    if not isinstance(value, dict) or draw(st.integers(0, 9)) == 0:
        return draw(_VALUES) if draw(st.booleans()) else copy.deepcopy(value)
    result = {}
    for key, child in value.items():
        action = draw(st.sampled_from(["keep", "drop", "edit"]))
        if action == "keep":
            result[key] = copy.deepcopy(child)
        elif action == "edit":
            result[key] = draw(_edited(child))
    result.update(draw(st.dictionaries(_KEYS.filter(lambda k: k not in value), _VALUES, max_size=2)))
    return result


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.data(), _DOCS)
def test_json_patch_round_trip(data: st.DataObject, original: dict[str, Any]) -> None:
    mutated = data.draw(_edited(original) | _DOCS)
    before = copy.deepcopy(original)
    patch = mutation.json_patch(original, mutated)
    result = jsonpatch.apply_patch(original, patch)
    assert json.dumps(result, sort_keys=True) == json.dumps(mutated, sort_keys=True)
    assert mutation.json_patch(result, mutated) == []
    assert original == before


def test_json_patch_is_minimal_and_escapes_keys() -> None:
    original = {"metadata": {"annotations": {"a~b/c": "1"}, "labels": {"x": "1"}}, "spec": {"list": [1, 2]}}
    mutated = {
        "metadata": {"annotations": {"a~b/c": "2", "fedspread.io/subset": "s"}},
        "spec": {"list": [1, 2]},
    }
    assert mutation.json_patch(original, mutated) == [
        {"op": "replace", "path": "/metadata/annotations/a~0b~1c", "value": "2"},
        {"op": "add", "path": "/metadata/annotations/fedspread.io~1subset", "value": "s"},
        {"op": "remove", "path": "/metadata/labels"},
    ]
    assert mutation.json_patch({"v": 1}, {"v": True}) == [{"op": "replace", "path": "/v", "value": True}]


# --- generated names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "expected_prefix"),
    [
        pytest.param("web-", "web-", id="short"),
        pytest.param("", "", id="empty"),
        pytest.param("x" * 70, "x" * 58, id="truncated-to-63"),
    ],
)
def test_generated_name(prefix: str, expected_prefix: str) -> None:
    name = mutation.generated_name(prefix, token="tok-1")
    assert name.startswith(expected_prefix) and len(name) == len(expected_prefix) + 5 <= 63
    assert set(name[len(expected_prefix) :]) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert mutation.generated_name(prefix, token="tok-1") == name
    assert mutation.generated_name(prefix, token="tok-2") != name
