"""The CRDs in crds/ are generated from the API models, structural, and documented."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
import yaml
from click.testing import CliRunner

from federation import cli
from federation.api import crd, spread, structural
from federation.sandbox import hubsetup

REPO = pathlib.Path(__file__).resolve().parents[2]
CRDS = REPO / "crds"
SPREADS = "fedspread.io_federatedspreads.yaml"
CLUSTERS = "fedspread.io_memberclusters.yaml"

# Keywords a structural apiextensions.k8s.io/v1 schema may use (the subset fedspread needs).
ALLOWED_KEYWORDS = {
    "type", "description", "properties", "required", "items", "additionalProperties", "enum",
    "format", "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minItems", "maxItems", "uniqueItems", "nullable", "anyOf",
    "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields", "default",
}
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def schema_of(name: str) -> dict[str, Any]:
    version = crd.generate_crds()[name]["spec"]["versions"][0]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with a readable path; properties as `.name`, items as `[]`."""
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if "items" in node:
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}.*")


def properties(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every named property (not array items or map values), with its path."""
    for child_path, child in walk(node, path):
        for name, sub in child.get("properties", {}).items():
            yield f"{child_path}.{name}", sub


def node_at(name: str, path: str) -> dict[str, Any]:
    return dict(walk(schema_of(name)))[path]


# --- drift -------------------------------------------------------------------------------------


def test_committed_crds_match_the_models() -> None:
    generated = crd.generate_crds()
    on_disk = sorted(p.name for p in CRDS.glob("*.yaml"))
    assert on_disk == sorted(generated), (
        "crds/ holds other files than the models give; run `fedspread crds` and commit crds/"
    )
    for name, definition in generated.items():
        assert (CRDS / name).read_text() == crd.render(definition), (
            f"crds/{name} is out of date with federation/api; run `fedspread crds` and commit it"
        )
    assert (CRDS / crd.KUSTOMIZATION).read_text() == crd.generated_files()[crd.KUSTOMIZATION], (
        f"crds/{crd.KUSTOMIZATION} is out of date; run `fedspread crds` and commit it"
    )


def test_kustomization_lists_every_crd_and_is_not_taken_for_one() -> None:
    listed = yaml.safe_load(crd.generated_files()[crd.KUSTOMIZATION])
    assert listed == {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                      "resources": sorted(crd.generate_crds())}
    # `kubectl apply -f crds/` and the sandbox (hubsetup.bundled_crds) take every *.yaml as a CRD.
    assert not crd.KUSTOMIZATION.endswith((".yaml", ".yml", ".json"))
    bundled = hubsetup.bundled_crds()
    assert [p.name for p in bundled] == sorted(crd.generate_crds())
    assert all(yaml.safe_load(p.read_text())["kind"] == "CustomResourceDefinition" for p in bundled)


def test_cli_check_passes_on_the_committed_crds() -> None:
    result = CliRunner().invoke(cli.main, ["crds", "--check", "--output-dir", str(CRDS)])
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output


def test_cli_writes_then_check_passes(tmp_path: pathlib.Path) -> None:
    out, api = tmp_path / "deep" / "crds", tmp_path / "docs" / "api.md"
    where = ["--output-dir", str(out), "--reference", str(api)]
    runner = CliRunner()
    failed = runner.invoke(cli.main, ["crds", "--check", *where])
    assert failed.exit_code == 1
    assert "run `fedspread crds`" in failed.output and f"out of date: {api}" in failed.output
    written = runner.invoke(cli.main, ["crds", *where])
    assert written.exit_code == 0, written.output
    assert sorted(p.name for p in out.iterdir()) == [crd.KUSTOMIZATION, SPREADS, CLUSTERS]
    assert api.read_text().startswith("# API reference")
    assert runner.invoke(cli.main, ["crds", "--check", *where]).exit_code == 0


def test_stale_files_finds_missing_changed_and_leftover_files(tmp_path: pathlib.Path) -> None:
    assert crd.stale_files(tmp_path / "absent") == [crd.KUSTOMIZATION, SPREADS, CLUSTERS]
    crd.write_crds(tmp_path)
    assert crd.stale_files(tmp_path) == []
    (tmp_path / CLUSTERS).write_text((tmp_path / CLUSTERS).read_text() + "# edited\n")
    leftover = tmp_path / "fedspread.io_oldkinds.yaml"
    leftover.write_text(crd.HEADER + "kind: CustomResourceDefinition\n")
    handwritten = tmp_path / "kustomization.yaml"
    handwritten.write_text("resources: []\n")
    assert crd.stale_files(tmp_path) == [CLUSTERS, leftover.name]
    (tmp_path / crd.KUSTOMIZATION).write_text("resources: []\n")
    assert crd.stale_files(tmp_path) == [crd.KUSTOMIZATION, CLUSTERS, leftover.name]
    crd.write_crds(tmp_path)
    assert crd.stale_files(tmp_path) == []
    assert not leftover.exists()
    assert handwritten.exists(), "files fedspread did not generate are left alone"


def test_render_is_stable_and_headed() -> None:
    again = crd.generate_crds()
    for name, definition in crd.generate_crds().items():
        text = crd.render(definition)
        assert text.startswith("# Generated by `fedspread crds` from federation/api; do not edit.\n")
        assert text == crd.render(again[name])
        assert "&id" not in text and "*id" not in text, "no YAML anchors or aliases"
        assert yaml.safe_load(text) == definition


# --- shape of the definitions ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "plural", "short", "scope"),
    [
        (SPREADS, "FederatedSpread", "federatedspreads", "fsp", "Namespaced"),
        (CLUSTERS, "MemberCluster", "memberclusters", "mc", "Cluster"),
    ],
)
def test_names_scope_and_version(name: str, kind: str, plural: str, short: str, scope: str) -> None:
    definition = crd.generate_crds()[name]
    assert definition["apiVersion"] == "apiextensions.k8s.io/v1"
    assert definition["kind"] == "CustomResourceDefinition"
    assert definition["metadata"]["name"] == f"{plural}.fedspread.io"
    spec = definition["spec"]
    assert spec["group"] == "fedspread.io"
    assert spec["scope"] == scope
    assert spec["names"] == {
        "kind": kind, "listKind": f"{kind}List", "plural": plural,
        "singular": kind.lower(), "shortNames": [short], "categories": ["fedspread"],
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_printer_columns() -> None:
    def columns(name: str) -> list[tuple[str, str, str]]:
        version = crd.generate_crds()[name]["spec"]["versions"][0]
        return [(c["name"], c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]

    assert columns(SPREADS) == [
        ("Kind", "string", ".spec.targetRef.kind"),
        ("Target", "string", ".spec.targetRef.name"),
        ("Replicas", "integer", ".status.replicas"),
        ("Ready", "integer", ".status.readyReplicas"),
        ("Unplaced", "integer", ".status.unplacedReplicas"),
        ("Valid", "string", '.status.conditions[?(@.type=="Valid")].status'),
        ("Placed", "string", '.status.conditions[?(@.type=="Placed")].status'),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]
    assert columns(CLUSTERS) == [
        ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
        ("Region", "string", r".metadata.labels.topology\.fedspread\.io/region"),
        ("Agent", "string", ".status.agentVersion"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]


def test_printer_column_paths_exist_in_the_schema() -> None:
    for name in (SPREADS, CLUSTERS):
        paths = dict(walk(schema_of(name)))
        version = crd.generate_crds()[name]["spec"]["versions"][0]
        for column in version["additionalPrinterColumns"]:
            path = column["jsonPath"]
            if path.startswith(".metadata."):
                continue
            path = re.sub(r'\[\?\(@\.type=="\w+"\)\]', "[]", path)
            assert path in paths, f"{name}: printer column {column['name']} points at {path}"


# --- structural schema -------------------------------------------------------------------------


@pytest.mark.parametrize("name", [SPREADS, CLUSTERS])
def test_schema_is_structural(name: str) -> None:
    root = schema_of(name)
    assert root["type"] == "object"
    assert root["properties"]["metadata"] == {"type": "object"}, "the apiserver owns metadata"
    assert root["properties"]["apiVersion"]["type"] == "string"
    assert root["properties"]["kind"]["type"] == "string"
    for path, node in walk(root):
        where = f"{name}: {path or '<root>'}"
        assert set(node) <= ALLOWED_KEYWORDS, f"{where}: {set(node) - ALLOWED_KEYWORDS}"
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node, where
            assert node["anyOf"] == INT_OR_STRING, where
        else:
            assert isinstance(node.get("type"), str), f"{where}: every node needs a type"
            assert "anyOf" not in node, f"{where}: anyOf only in the int-or-string form"
        if node.get("x-kubernetes-preserve-unknown-fields"):
            assert node["type"] == "object", where
        if "additionalProperties" in node:
            assert isinstance(node["additionalProperties"], dict), f"{where}: no boolean form"
            assert "properties" not in node, f"{where}: properties and additionalProperties"
        for bound in ("exclusiveMinimum", "exclusiveMaximum"):
            if bound in node:
                assert node[bound] is True, f"{where}: v1 wants the boolean form of {bound}"
                assert ("minimum" if bound == "exclusiveMinimum" else "maximum") in node, where
        for key in node.get("required", []):
            assert key in node["properties"], f"{where}: required {key} is not a property"
        if "enum" in node:
            assert all(isinstance(v, str) for v in node["enum"]), where


@pytest.mark.parametrize("name", [SPREADS, CLUSTERS])
def test_every_property_has_a_description(name: str) -> None:
    missing = [
        path for path, node in properties(schema_of(name))
        if path != ".metadata" and not node.get("description")
    ]
    assert missing == [], f"{name}: give these fields pydantic.Field(description=...)"


@pytest.mark.parametrize("name", [SPREADS, CLUSTERS])
def test_no_json_schema_leftovers(name: str) -> None:
    text = crd.render(crd.generate_crds()[name])
    for word in ("$ref", "$defs", "oneOf", "allOf", "const:", "title:"):
        assert word not in text, f"{name} contains {word}"


# --- defaults the hub stores -------------------------------------------------------------------

STORED_DEFAULTS = {
    ".spec.deletionPolicy": "Orphan",
    ".spec.propagateDependencies": True,
    ".spec.failover": {},
    ".spec.failover.clusterLostSeconds": 60,
    ".spec.scheduleStrategy": {},
    ".spec.scheduleStrategy.type": "Fixed",
    ".spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds": 30,
    ".spec.scheduleStrategy.adaptive.unschedulableSeconds": 300,
}
"""Every field whose default decides what fedspread deletes or moves (docs/decisions.md), and the
parents that hold them: the apiserver stores these, so `kubectl get -o yaml` shows them."""


def apiserver_defaulted(value: Any, node: dict[str, Any]) -> Any:
    """`value` defaulted as the apiserver does (apiextensions structural defaulting: a missing
    property with a default is set, then its own properties are defaulted inside it)."""
    if isinstance(value, dict) and "properties" in node:
        out = dict(value)
        for name, sub in node["properties"].items():
            if name not in out and "default" in sub:
                out[name] = sub["default"]
            if name in out and out[name] is not None:
                out[name] = apiserver_defaulted(out[name], sub)
        return out
    if isinstance(value, list) and "items" in node:
        return [apiserver_defaulted(item, node["items"]) for item in value]
    return value


@pytest.mark.parametrize("name", [SPREADS, CLUSTERS])
def test_the_crd_defaults_exactly_the_fields_that_decide_what_is_deleted_or_moved(name: str) -> None:
    found = {path: node["default"] for path, node in walk(schema_of(name)) if "default" in node}
    assert found == (STORED_DEFAULTS if name == SPREADS else {})
    stored = {path.removeprefix("FederatedSpread") for path in structural.APISERVER_DEFAULTS}
    assert stored == set(STORED_DEFAULTS)


@pytest.mark.parametrize("spec", [
    pytest.param({}, id="nothing-set"),
    pytest.param({"scheduleStrategy": {"type": "Adaptive", "adaptive": {}}}, id="adaptive-without-timings"),
    pytest.param({"scheduleStrategy": {"type": "Adaptive"}, "failover": {}}, id="empty-failover"),
    pytest.param({"deletionPolicy": "Delete", "failover": {"clusterLostSeconds": 5}}, id="all-set"),
])
def test_what_the_apiserver_stores_is_what_the_models_default_to(spec: dict[str, Any]) -> None:
    """A spread written without the defaulted fields means the same before and after the
    apiserver fills them in, and the stored object shows every defaulted field."""
    body = {"targetRef": {"name": "web"}, "subsets": [{"name": "a", "clusters": ["dc1"]}], **spec}
    stored = apiserver_defaulted(body, schema_of(SPREADS)["properties"]["spec"])
    model = spread.FederatedSpreadSpec
    assert model.model_validate(stored) == model.model_validate(body)
    assert stored["deletionPolicy"] == body.get("deletionPolicy", "Orphan")
    assert stored["failover"]["clusterLostSeconds"] == body.get("failover", {}).get("clusterLostSeconds", 60)
    assert stored["scheduleStrategy"]["type"] == spec.get("scheduleStrategy", {}).get("type", "Fixed")
    if "adaptive" in stored["scheduleStrategy"]:
        assert stored["scheduleStrategy"]["adaptive"] == {"rescheduleCriticalSeconds": 30,
                                                          "unschedulableSeconds": 300}


def test_defaults_validate_against_their_own_schema() -> None:
    """apiextensions refuses a CRD whose default (with its children's defaults applied) does not
    validate; the structural checks here: type, enum, bounds."""
    for path, node in walk(schema_of(SPREADS)):
        if "default" not in node:
            continue
        value = apiserver_defaulted(node["default"], node)
        kinds = {"string": str, "integer": int, "object": dict, "boolean": bool}
        assert isinstance(value, kinds[node["type"]]), path
        assert value in node.get("enum", [value]), path
        if node["type"] == "integer":
            assert node.get("minimum", value) < value <= node.get("maximum", value), path


def test_a_default_the_model_does_not_have_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = {**structural.APISERVER_DEFAULTS, "FederatedSpread.spec.targetRef.name": "no default"}
    monkeypatch.setattr(structural, "APISERVER_DEFAULTS", wrong)
    with pytest.raises(ValueError, match="no default"):
        crd.generate_crds()
    monkeypatch.setattr(structural, "APISERVER_DEFAULTS", {"FederatedSpread.spec.nothing": "gone"})
    with pytest.raises(ValueError, match="does not have"):
        crd.generate_crds()


def test_max_replicas_is_int_or_string() -> None:
    node = node_at(SPREADS, ".spec.subsets[].maxReplicas")
    assert node["x-kubernetes-int-or-string"] is True
    assert node["anyOf"] == INT_OR_STRING


def test_patch_keeps_unknown_fields() -> None:
    node = node_at(SPREADS, ".spec.subsets[].patch")
    assert node["type"] == "object"
    assert node["x-kubernetes-preserve-unknown-fields"] is True
    assert "properties" not in node


def test_constraints_carry_over() -> None:
    schema = dict(walk(schema_of(SPREADS)))
    name = schema[".spec.subsets[].name"]
    assert (name["pattern"], name["minLength"], name["maxLength"]) == (
        spread.SUBSET_NAME_PATTERN, 1, 63)
    assert schema[".spec.subsets"]["minItems"] == 1
    assert schema[".spec.targetRef.name"]["minLength"] == 1
    lost = schema[".spec.failover.clusterLostSeconds"]
    assert (lost["type"], lost["minimum"], lost["exclusiveMinimum"]) == ("integer", 0, True)
    weight = schema[".spec.subsets[].preferredNodeSelectorTerms[].weight"]
    assert (weight["minimum"], weight["maximum"]) == (1, 100)
    assert schema[".spec.scheduleStrategy.type"]["enum"] == ["Fixed", "Adaptive"]
    assert schema[".spec.subsets[].clusterSpread"]["enum"] == ["Fill", "Balance", "Capacity"]
    assert schema[".spec.targetRef.kind"]["enum"] == ["Deployment", "ReplicaSet", "StatefulSet", "Job"]
    assert schema[".spec.targetRef.apiVersion"]["enum"] == ["apps/v1", "batch/v1"]
    assert schema[".spec.subsets[].tolerations[].effect"]["enum"] == [
        "", "NoSchedule", "PreferNoSchedule", "NoExecute"]


def test_required_optional_maps_and_times() -> None:
    schema = dict(walk(schema_of(SPREADS)))
    assert schema[""]["required"] == ["spec"]
    assert schema[".spec"]["required"] == ["targetRef", "subsets"]
    assert schema[".spec.subsets[]"]["required"] == ["name"]
    assert schema[".spec.subsets[].clusters"]["nullable"] is True
    assert schema[".spec.subsets[].clusterSelector"]["nullable"] is True
    creating = schema[".status.subsetStatuses[].creatingPods"]
    assert creating["type"] == "object"
    assert creating["additionalProperties"] == {"type": "string", "format": "date-time"}
    assert schema[".status.subsetStatuses[].clusters"]["type"] == "array"  # named entries, not a map
    assert schema[".status.subsetStatuses[].clusters[]"]["required"] == ["cluster"]
    assert schema[".status.conditions[].lastTransitionTime"]["format"] == "date-time"
    clusters = dict(walk(schema_of(CLUSTERS)))
    assert "required" not in clusters[""], "a MemberCluster's spec has defaults"
    assert clusters[".spec.taints[]"]["required"] == ["key", "effect"]
    assert clusters[".status.lastHeartbeatTime"]["format"] == "date-time"


# --- the converter refuses what a CRD cannot say -----------------------------------------------


class _Union(pydantic.BaseModel):
    choice: int | list[str] = pydantic.Field(description="Either.")


class _Undocumented(pydantic.BaseModel):
    count: int = 0


def _kind_with(spec_type: type[pydantic.BaseModel]) -> type[pydantic.BaseModel]:
    return pydantic.create_model(
        "Probe", spec=(spec_type, pydantic.Field(description="The spec.")))


@pytest.mark.parametrize(
    ("spec_type", "message"),
    [
        pytest.param(_Union, "cannot express a union", id="union"),
        pytest.param(_Undocumented, "no description", id="undocumented-field"),
    ],
)
def test_converter_refuses_what_a_crd_cannot_say(
    spec_type: type[pydantic.BaseModel], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        structural.openapi_schema(_kind_with(spec_type))
