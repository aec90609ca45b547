"""The objects pods need (issue 24 §2): references, missing ones, member copies, PDB division."""

from __future__ import annotations

import copy
import fractions
from collections.abc import Callable
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from federation.core import dependencies as deps
from federation.core import member_copy as mc
from federation.core.dependencies import Reference

CM, SECRET, SA, PVC = "ConfigMap", "Secret", "ServiceAccount", "PersistentVolumeClaim"


def ref(kind: str, name: str, optional: bool = False) -> Reference:
    return Reference("v1", kind, name, optional)


# --- references: one table row per place a pod spec names an object -------------------------------

PLACES = [
    pytest.param({"volumes": [{"name": "v", "configMap": {"name": "x"}}]}, CM, id="volume-configMap"),
    pytest.param({"volumes": [{"name": "v", "secret": {"secretName": "x"}}]}, SECRET, id="volume-secret"),
    pytest.param({"volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "x"}}]}}]},
                 CM, id="projected-configMap"),
    pytest.param({"volumes": [{"name": "v", "projected": {"sources": [{"secret": {"name": "x"}}]}}]},
                 SECRET, id="projected-secret"),
    pytest.param({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "x"}}]}, PVC, id="pvc"),
    pytest.param({"containers": [{"name": "c", "env": [
        {"name": "E", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "k"}}}]}]},
        CM, id="env-configMap"),
    pytest.param({"initContainers": [{"name": "c", "env": [
        {"name": "E", "valueFrom": {"secretKeyRef": {"name": "x", "key": "k"}}}]}]},
        SECRET, id="init-env-secret"),
    pytest.param({"ephemeralContainers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "x"}}]}]},
                 CM, id="ephemeral-envFrom-configMap"),
    pytest.param({"containers": [{"name": "c", "envFrom": [{"prefix": "P_", "secretRef": {"name": "x"}}]}]},
                 SECRET, id="envFrom-secret"),
    pytest.param({"imagePullSecrets": [{"name": "x"}]}, SECRET, id="imagePullSecrets"),
    pytest.param({"serviceAccountName": "x"}, SA, id="serviceAccountName"),
    pytest.param({"serviceAccount": "x"}, SA, id="deprecated-serviceAccount"),
    pytest.param({"volumes": [{"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "x"}}}]},
                 SECRET, id="csi-nodePublishSecretRef"),
    pytest.param({"volumes": [{"name": "v", "rbd": {"image": "i", "secretRef": {"name": "x"}}}]},
                 SECRET, id="rbd-secretRef"),
    pytest.param({"volumes": [{"name": "v", "azureFile": {"shareName": "s", "secretName": "x"}}]},
                 SECRET, id="azureFile-secretName"),
]


@pytest.mark.parametrize(("pod_spec", "kind"), PLACES)
def test_each_place_is_a_reference(pod_spec: dict[str, Any], kind: str) -> None:
    assert deps.references(pod_spec) == (ref(kind, "x"),)


@pytest.mark.parametrize("pod_spec", [
    {"serviceAccountName": "default"},
    {"serviceAccountName": ""},
    {"serviceAccount": "default"},
    {"serviceAccountName": "", "serviceAccount": ""},
])
def test_the_default_or_no_service_account_is_no_reference(pod_spec: dict[str, Any]) -> None:
    assert deps.references(pod_spec) == ()


def test_service_account_name_wins_over_the_deprecated_field() -> None:
    assert deps.references({"serviceAccountName": "runner", "serviceAccount": "old"}) == (ref(SA, "runner"),)
    assert deps.references({"serviceAccountName": "default", "serviceAccount": "old"}) == ()


def test_references_are_deduplicated_and_sorted() -> None:
    spec = {
        "imagePullSecrets": [{"name": "pull"}, {"name": "pull"}],
        "volumes": [{"name": "a", "configMap": {"name": "cfg"}},
                    {"name": "b", "secret": {"secretName": "pull"}}],
        "containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "cfg"}},
                                                 {"configMapRef": {"name": "a"}}]}],
        "serviceAccountName": "runner",
    }
    assert deps.references(spec) == (ref(CM, "a"), ref(CM, "cfg"), ref(SECRET, "pull"), ref(SA, "runner"))


def test_an_object_is_optional_only_when_every_use_says_so() -> None:
    optional_twice = {
        "volumes": [{"name": "v", "configMap": {"name": "x", "optional": True}}],
        "containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "x", "optional": True}}]}],
    }
    assert deps.references(optional_twice) == (ref(CM, "x", optional=True),)
    once_required = copy.deepcopy(optional_twice)
    once_required["containers"][0]["envFrom"][0]["configMapRef"]["optional"] = False
    assert deps.references(once_required) == (ref(CM, "x"),)
    with_pull_secret = {"volumes": [{"name": "v", "secret": {"secretName": "x", "optional": True}}],
                        "imagePullSecrets": [{"name": "x"}]}
    assert deps.references(with_pull_secret) == (ref(SECRET, "x"),)


@pytest.mark.parametrize("flag", ["true", 1, None, "yes"])
def test_only_the_boolean_true_makes_a_use_optional(flag: object) -> None:
    assert deps.references({"volumes": [{"configMap": {"name": "x", "optional": flag}}]}) == (ref(CM, "x"),)


ODD_SPECS: list[Any] = [
    {},
    None,
    [],
    "spec",
    {"volumes": None, "containers": "c", "imagePullSecrets": 3, "initContainers": [None, 1, "x"]},
    {"volumes": [None, 3, "v", {"configMap": None}, {"configMap": "x"}, {"configMap": {"name": 3}},
                 {"configMap": {"name": ""}}, {"secret": {"name": "wrong-field"}},
                 {"projected": {"sources": "x"}}, {"projected": {"sources": [None, {"secret": []}]}},
                 {"persistentVolumeClaim": {"name": "wrong-field"}}, {"csi": {"nodePublishSecretRef": "x"}}]},
    {"containers": [{"env": [None, {"name": "E", "value": "v"},
                             {"valueFrom": {"fieldRef": {"fieldPath": "x"}}},
                             {"valueFrom": {"configMapKeyRef": None}}, {"valueFrom": "x"}],
                     "envFrom": [{"prefix": "x"}, {"configMapRef": {"optional": True}}, "x"]}]},
    {"imagePullSecrets": [{"name": None}, {}, "pull"], "serviceAccountName": 7, "serviceAccount": ["x"]},
]


@pytest.mark.parametrize("pod_spec", ODD_SPECS)
def test_odd_fields_are_skipped_never_raised(pod_spec: Any) -> None:
    assert deps.references(pod_spec) == ()


# --- references: property over random pod specs --------------------------------------------------

NAMES = ("a", "b", "web", "db")
NOISE = "noise"
"""A name planted only where no reference is: it must never be found."""

Planter = Callable[[dict[str, Any], str, bool], None]


def _volume(source: dict[str, Any]) -> Planter:
    def plant(spec: dict[str, Any], name: str, optional: bool) -> None:
        volumes = spec.setdefault("volumes", [])
        volumes.append({"name": f"v{len(volumes)}", **source(name, optional)})
    return plant


def _container(field: str, index: int, entry: Callable[[str, bool], tuple[str, dict[str, Any]]]) -> Planter:
    def plant(spec: dict[str, Any], name: str, optional: bool) -> None:
        containers = spec.setdefault(field, [])
        while len(containers) <= index:
            containers.append({"name": f"{field}-{len(containers)}", "image": "i"})
        key, item = entry(name, optional)
        containers[index].setdefault(key, []).append(item)
    return plant


def _opt(optional: bool) -> dict[str, Any]:
    return {"optional": True} if optional else {}


# (kind or None for noise, may the place say optional, planter)
_VOLUME_PLACES: list[tuple[str | None, bool, Callable[[str, bool], dict[str, Any]]]] = [
    (CM, True, lambda n, o: {"configMap": {"name": n, **_opt(o)}}),
    (SECRET, True, lambda n, o: {"secret": {"secretName": n, **_opt(o)}}),
    (CM, True, lambda n, o: {"projected": {"sources": [{"downwardAPI": {}},
                                                       {"configMap": {"name": n, **_opt(o)}}]}}),
    (SECRET, True, lambda n, o: {"projected": {"sources": [{"secret": {"name": n, **_opt(o)}}]}}),
    (PVC, False, lambda n, o: {"persistentVolumeClaim": {"claimName": n, "readOnly": o}}),
    (None, False, lambda n, o: {"secret": {"name": n}}),
    (None, False, lambda n, o: {"emptyDir": {}, "hostPath": {"path": n}}),
    (None, False, lambda n, o: {"projected": {"sources": [{"serviceAccountToken": {"audience": n}}]}}),
]
_CONTAINER_ENTRIES: list[tuple[str | None, bool, Callable[[str, bool], tuple[str, dict[str, Any]]]]] = [
    (CM, True, lambda n, o: ("env", {"name": "E", "valueFrom": {
        "configMapKeyRef": {"name": n, "key": "k", **_opt(o)}}})),
    (SECRET, True, lambda n, o: ("env", {"name": "E", "valueFrom": {
        "secretKeyRef": {"name": n, "key": "k", **_opt(o)}}})),
    (CM, True, lambda n, o: ("envFrom", {"configMapRef": {"name": n, **_opt(o)}})),
    (SECRET, True, lambda n, o: ("envFrom", {"prefix": "P", "secretRef": {"name": n, **_opt(o)}})),
    (None, False, lambda n, o: ("env", {"name": n, "value": n})),
    (None, False, lambda n, o: ("volumeMounts", {"name": n, "mountPath": "/x"})),
]
PLANTERS: list[tuple[str | None, bool, Planter]] = [
    *((kind, may, _volume(source)) for kind, may, source in _VOLUME_PLACES),
    *((kind, may, _container(field, index, entry)) for kind, may, entry in _CONTAINER_ENTRIES
      for field in ("containers", "initContainers", "ephemeralContainers") for index in (0, 1)),
    (SECRET, False, lambda spec, n, o: spec.setdefault("imagePullSecrets", []).append({"name": n})),
]


@st.composite
def planted_specs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[tuple[str, str], bool]]:
    """A pod spec with names planted at random places, and the references expected of it."""
    spec: dict[str, Any] = {}
    expected: dict[tuple[str, str], bool] = {}
    for kind, may_be_optional, plant in draw(st.lists(st.sampled_from(PLANTERS), max_size=12)):
        optional = draw(st.booleans())
        name = draw(st.sampled_from(NAMES)) if kind is not None else NOISE
        plant(spec, name, optional)
        if kind is not None:
            expected[kind, name] = expected.get((kind, name), True) and may_be_optional and optional
    account = draw(st.sampled_from((None, "", "default", *NAMES)))
    deprecated = draw(st.sampled_from((None, "", "default", *NAMES)))
    if account is not None:
        spec["serviceAccountName"] = account
    if deprecated is not None:
        spec["serviceAccount"] = deprecated
    effective = account or deprecated
    if effective and effective != "default":
        expected[SA, effective] = False
    return spec, expected


@hypothesis.given(planted_specs())
def test_references_finds_every_planted_name_and_nothing_else(
    case: tuple[dict[str, Any], dict[tuple[str, str], bool]],
) -> None:
    spec, expected = case
    before = copy.deepcopy(spec)
    found = deps.references(spec)
    assert {(r.kind, r.name): r.optional for r in found} == expected
    assert len(found) == len(expected)
    assert list(found) == sorted(found)
    assert all(r.api_version == "v1" for r in found)
    assert spec == before


# --- missing ------------------------------------------------------------------------------------------

def test_missing_lists_required_references_absent_from_the_hub() -> None:
    refs = (ref(CM, "cfg"), ref(CM, "opt", optional=True), ref(SECRET, "cfg"), ref(SA, "runner"))
    assert deps.missing(refs, present={(CM, "cfg")}) == (ref(SECRET, "cfg"), ref(SA, "runner"))
    assert deps.missing(refs, present={(CM, "cfg"), (SECRET, "cfg"), (SA, "runner")}) == ()
    assert deps.missing((), present=()) == ()


# --- needed_copies and releasable ---------------------------------------------------------------------

def test_one_object_serves_several_spreads_only_where_they_run() -> None:
    shared, own = ref(CM, "shared"), ref(SECRET, "own")
    copies = deps.needed_copies({
        "ns/web": ((shared, own), ("c1", "c2")),
        "ns/api": ((shared,), ("c2", "c3")),
        "ns/idle": ((ref(CM, "idle"),), ()),
    })
    assert copies == {
        "c1": {shared: frozenset({"ns/web"}), own: frozenset({"ns/web"})},
        "c2": {shared: frozenset({"ns/web", "ns/api"}), own: frozenset({"ns/web"})},
        "c3": {shared: frozenset({"ns/api"})},
    }
    assert list(copies) == ["c1", "c2", "c3"]
    assert list(copies["c2"]) == [shared, own]


def test_a_copy_is_optional_only_when_every_spread_there_has_it_optional() -> None:
    copies = deps.needed_copies({
        "a": ((ref(CM, "x", optional=True),), ("c1", "c2")),
        "b": ((ref(CM, "x"),), ("c2",)),
    })
    assert copies == {"c1": {ref(CM, "x", optional=True): frozenset({"a"})},
                      "c2": {ref(CM, "x"): frozenset({"a", "b"})}}


def test_propagated_objects_of_other_groups_are_copies_too() -> None:
    pdb = Reference("policy/v1", "PodDisruptionBudget", "web")
    assert deps.needed_copies({"s": ((pdb,), ("c1",))}) == {"c1": {pdb: frozenset({"s"})}}
    assert deps.needed_copies({}) == {}
    assert deps.needed_copies({"s": ((), ("c1",))}) == {}


@pytest.mark.parametrize(("recorded", "still_needing", "orphaned", "expected"), [
    pytest.param({"a"}, set(), set(), True, id="last-needer-gone"),
    pytest.param({"a", "b"}, {"b"}, set(), False, id="another-spread-still-needs-it"),
    pytest.param({"a"}, {"c"}, set(), False, id="a-new-spread-needs-it"),
    pytest.param({"a"}, set(), {"a"}, False, id="orphaned-workload-may-use-it"),
    pytest.param({"a"}, set(), {"b"}, True, id="orphan-of-another-object"),
])
def test_releasable(recorded: set[str], still_needing: set[str], orphaned: set[str], expected: bool) -> None:
    assert deps.releasable(frozenset(recorded), still_needing=still_needing, orphaned=orphaned) is expected


# --- member_copy: per-kind rules -----------------------------------------------------------------

MARKS = {"fedspread.io/managed": "true"}
HUB_METADATA: dict[str, Any] = {
    "name": "x", "namespace": "apps", "uid": "u-1", "resourceVersion": "42", "generation": 3,
    "creationTimestamp": "2025-01-01T00:00:00Z", "deletionTimestamp": "2025-01-02T00:00:00Z",
    "selfLink": "/api/v1/x", "managedFields": [{"manager": "kubectl"}], "finalizers": ["f"],
    "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "u-0"}], "generateName": "x-",
    "labels": {"app": "web"},
    "annotations": {"note": "kept", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
}
KEPT_METADATA = {"name": "x", "namespace": "apps", "labels": {"app": "web", **MARKS},
                 "annotations": {"note": "kept"}}


def hub(api_version: str, kind: str, **body: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": copy.deepcopy(HUB_METADATA),
            "status": {"phase": "Bound"}, **body}


KIND_CASES = [
    pytest.param(hub("v1", "ConfigMap", data={"k": "v"}, binaryData={"b": "AA=="}, immutable=True),
                 {"data": {"k": "v"}, "binaryData": {"b": "AA=="}, "immutable": True}, id="ConfigMap"),
    pytest.param(hub("v1", "Secret", type="Opaque", data={"k": "dg=="}, stringData={"s": "v"}),
                 {"type": "Opaque", "data": {"k": "dg=="}, "stringData": {"s": "v"}}, id="Secret"),
    pytest.param(hub("v1", "Secret", type="kubernetes.io/dockerconfigjson",
                     data={".dockerconfigjson": "e30="}),
                 {"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "e30="}},
                 id="pull-Secret"),
    pytest.param(hub("v1", "ServiceAccount", secrets=[{"name": "x-token-abcde"}],
                     imagePullSecrets=[{"name": "pull"}], automountServiceAccountToken=False),
                 {"imagePullSecrets": [{"name": "pull"}], "automountServiceAccountToken": False},
                 id="ServiceAccount-drops-token-secrets"),
    pytest.param(hub("v1", "Service", spec={
        "type": "NodePort", "selector": {"app": "web"}, "clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"],
        "healthCheckNodePort": 31000, "externalTrafficPolicy": "Local",
        "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}, {"port": 443}]}),
        {"spec": {"type": "NodePort", "selector": {"app": "web"}, "externalTrafficPolicy": "Local",
                  "ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"port": 443}]}},
        id="Service-drops-allocations"),
    pytest.param(hub("policy/v1", "PodDisruptionBudget", spec={"minAvailable": 2, "selector": {}}),
                 {"spec": {"minAvailable": 2, "selector": {}}}, id="PodDisruptionBudget"),
    pytest.param(hub("policy/v1beta1", "PodDisruptionBudget", spec={"maxUnavailable": "50%"}),
                 {"spec": {"maxUnavailable": "50%"}}, id="PodDisruptionBudget-v1beta1"),
    pytest.param(hub("networking.k8s.io/v1", "NetworkPolicy",
                     spec={"podSelector": {}, "policyTypes": ["Ingress"]}),
                 {"spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}, id="NetworkPolicy"),
    pytest.param(hub("rbac.authorization.k8s.io/v1", "Role",
                     rules=[{"verbs": ["get"], "resources": ["pods"]}]),
                 {"rules": [{"verbs": ["get"], "resources": ["pods"]}]}, id="Role"),
    pytest.param(hub("rbac.authorization.k8s.io/v1", "RoleBinding",
                     subjects=[{"kind": "ServiceAccount", "name": "r"}],
                     roleRef={"kind": "Role", "name": "x"}),
                 {"subjects": [{"kind": "ServiceAccount", "name": "r"}],
                  "roleRef": {"kind": "Role", "name": "x"}},
                 id="RoleBinding"),
]


@pytest.mark.parametrize(("obj", "body"), KIND_CASES)
def test_member_copy_keeps_what_the_user_wrote(obj: dict[str, Any], body: dict[str, Any]) -> None:
    before = copy.deepcopy(obj)
    assert mc.member_copy(obj, marks=MARKS) == {
        "apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": KEPT_METADATA, **body}
    assert obj == before


def test_a_claim_loses_its_binding_but_keeps_its_storage_class() -> None:
    claim = hub("v1", "PersistentVolumeClaim", spec={
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": "fast", "volumeName": "pvc-123", "volumeMode": "Filesystem"})
    claim["metadata"]["annotations"].update({
        "pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
        "volume.beta.kubernetes.io/storage-provisioner": "p", "volume.kubernetes.io/selected-node": "n1",
        "volume.kubernetes.io/storage-provisioner": "p", "volume.beta.kubernetes.io/storage-class": "fast"})
    made = mc.member_copy(claim, marks=MARKS)
    assert made["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                            "storageClassName": "fast", "volumeMode": "Filesystem"}
    assert made["metadata"]["annotations"] == {
        "note": "kept", "volume.beta.kubernetes.io/storage-class": "fast"}


def test_marks_win_over_a_same_name_label_and_an_unlabelled_object_gets_them() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "x", "labels": {"fedspread.io/managed": "no"}}}
    assert mc.member_copy(obj, marks=MARKS)["metadata"] == {"name": "x", "labels": MARKS}
    bare = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    assert mc.member_copy(bare, marks={}) == bare


@pytest.mark.parametrize(("obj", "words"), [
    pytest.param({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                  "metadata": {"name": "t"}, "data": {"token": "x"}}, "token", id="token-Secret"),
    pytest.param({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}, "Deployment",
                 id="unsupported-kind"),
    pytest.param({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, "Pod", id="Pod"),
    pytest.param({"apiVersion": "example.com/v1", "kind": "Role", "metadata": {"name": "r"}},
                 "example.com/v1",
                 id="Role-of-another-group"),
    pytest.param({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, "no name", id="no-name"),
    pytest.param({"kind": "ConfigMap", "metadata": {"name": "x"}}, "apiVersion", id="no-apiVersion"),
])
def test_not_copyable(obj: dict[str, Any], words: str) -> None:
    with pytest.raises(mc.NotCopyable) as raised:
        mc.member_copy(obj, marks=MARKS)
    assert isinstance(raised.value, ValueError)
    assert words in raised.value.reason


# --- member_copy: property -----------------------------------------------------------------------

DROPPED_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
                    "ownerReferences", "selfLink", "deletionTimestamp", "finalizers")
_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                       lambda inner: (st.lists(inner, max_size=3)
                                      | st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                       max_leaves=8)
_KINDS = [("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "ServiceAccount"), ("v1", "PersistentVolumeClaim"),
          ("v1", "Service"), ("policy/v1", "PodDisruptionBudget"), ("networking.k8s.io/v1", "NetworkPolicy"),
          ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding")]
_ANNOTATION_KEYS = st.sampled_from(["note", mc.LAST_APPLIED_ANNOTATION, "pv.kubernetes.io/bind-completed",
                                    "volume.kubernetes.io/selected-node", "volume.beta.kubernetes.io/x"])


@st.composite
def hub_objects(draw: st.DrawFn) -> dict[str, Any]:
    api_version, kind = draw(st.sampled_from(_KINDS))
    metadata: dict[str, Any] = {"name": "x"}
    metadata.update({k: draw(_VALUES) for k in DROPPED_METADATA if draw(st.booleans())})
    label_keys = st.sampled_from(["app", "fedspread.io/managed"])
    metadata["labels"] = draw(st.dictionaries(label_keys, st.text(max_size=3)))
    metadata["annotations"] = draw(st.dictionaries(_ANNOTATION_KEYS, st.text(max_size=3)))
    spec: dict[str, Any] = draw(st.dictionaries(st.sampled_from(["selector", "clusterIP", "other"]), _VALUES))
    allocated = ("clusterIPs", "healthCheckNodePort", "volumeName")
    spec.update({k: draw(_VALUES) for k in allocated if draw(st.booleans())})
    port = st.fixed_dictionaries({"port": st.integers(1, 9)},
                                 optional={"nodePort": st.integers(30000, 30009)})
    spec["ports"] = draw(st.lists(port, max_size=3))
    obj = {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec,
           "status": draw(_VALUES), "data": draw(_VALUES), "secrets": [{"name": "t"}], "rules": draw(_VALUES)}
    if kind == "Secret":
        obj["type"] = draw(st.sampled_from(["Opaque", "kubernetes.io/tls"]))
    return obj


@hypothesis.given(hub_objects())
def test_member_copy_never_carries_a_dropped_field_nor_touches_its_input(obj: dict[str, Any]) -> None:
    before = copy.deepcopy(obj)
    made = mc.member_copy(obj, marks=MARKS)
    assert obj == before
    assert set(made) <= {"apiVersion", "kind", "metadata", "spec", "data", "type", "rules"}
    assert "status" not in made and "secrets" not in made
    assert set(made["metadata"]) <= {"name", "namespace", "labels", "annotations"}
    assert made["metadata"]["labels"].items() >= MARKS.items()
    annotations = made["metadata"].get("annotations", {})
    assert mc.LAST_APPLIED_ANNOTATION not in annotations
    if obj["kind"] == "Service":
        assert not {"clusterIP", "clusterIPs", "healthCheckNodePort"} & set(made["spec"])
        assert all("nodePort" not in port for port in made["spec"]["ports"])
    if obj["kind"] == "PersistentVolumeClaim":
        assert "volumeName" not in made["spec"]
        assert set(annotations) <= {"note"}
    made["metadata"]["labels"]["app"] = "changed"  # the copy shares nothing with its input
    for value in made.values():
        if isinstance(value, dict):
            value["added"] = 1
    assert obj == before


# --- divide_budget -------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "shares", "expected"), [
    pytest.param(4, {"a": 1, "b": 1}, {"a": 2, "b": 2}, id="even"),
    pytest.param(1, {"b": 1, "a": 1}, {"b": 0, "a": 1}, id="tie-to-the-name-first"),
    pytest.param(2, {"a": 1, "b": 3}, {"a": 0, "b": 2}, id="tie-to-the-larger-share"),
    pytest.param(3, {"a": 6, "b": 3, "c": 0}, {"a": 2, "b": 1, "c": 0}, id="share-0-gets-0"),
    pytest.param(5, {"a": 0, "b": 0}, {"a": 0, "b": 0}, id="no-replicas-anywhere"),
    pytest.param("50%", {"a": 3, "b": 0}, {"a": "50%", "b": "50%"}, id="percentage-copied"),
    pytest.param(0, {"a": 3}, {"a": 0}, id="zero"),
])
def test_divide_budget_table(
    value: int | str, shares: dict[str, int], expected: dict[str, int | str],
) -> None:
    assert mc.divide_budget(value, shares=shares) == expected


@pytest.mark.parametrize(("value", "shares"), [(-1, {"a": 1}), ("5", {"a": 1}), ("%", {"a": 1}),
                                               ("1.5%", {"a": 1}), (True, {"a": 1}), (2, {"a": -1})])
def test_divide_budget_refuses_what_the_apiserver_refuses(value: Any, shares: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        mc.divide_budget(value, shares=shares)


@hypothesis.given(st.integers(0, 500), st.dictionaries(st.sampled_from(["c0", "c1", "c2", "c3", "c4"]),
                                                       st.integers(0, 40), max_size=5))
def test_divide_budget_sums_to_the_value_within_one_of_the_exact_share(
    value: int, shares: dict[str, int],
) -> None:
    parts = mc.divide_budget(value, shares=shares)
    assert set(parts) == set(shares)
    ints = {cluster: part for cluster, part in parts.items() if isinstance(part, int)}
    assert len(ints) == len(parts)
    total = sum(shares.values())
    if total == 0:
        assert set(ints.values()) <= {0}
        return
    assert sum(ints.values()) == value
    for cluster, part in ints.items():
        assert abs(part - fractions.Fraction(value * shares[cluster], total)) < 1
        if shares[cluster] == 0:
            assert part == 0
