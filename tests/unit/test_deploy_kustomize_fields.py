"""No kustomization of ours uses a field kustomize has deprecated, so `kubectl apply -k` stays quiet.

Why: kustomize v5 (kubectl >= 1.27) prints a warning for every deprecated field on every apply,
and a later kustomize drops them. deploy/ used them for years because its tests rendered with
kustomize v2; it now renders with 4.5.4 and the current fields (`resources`, `labels`, `patches`).
This test keeps the old ones from coming back anywhere people copy a kustomization from: every
kustomization file under deploy/, the one `fedspread crds` generates, and the README blocks of a
Kustomization (README.md, deploy/README.md, docs/). The list is kustomize v5's: the fields its
`CheckDeprecatedFields` warns about, `commonLabels` (v5.5), and the ones `kustomize edit fix`
rewrites silently.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from federation.api import crd
from tests.support.manifests import DEPLOY, REPO

DEPRECATED = {
    "bases": "resources",
    "commonLabels": "labels (with includeSelectors: true where selectors must match)",
    "patchesJson6902": "patches (with a target)",
    "patchesStrategicMerge": "patches",
    "vars": "replacements",
    "imageTags": "images",
    "helmChartInflationGenerator": "helmCharts",
}
GENERATOR_DEPRECATED = {"envSource": "envs"}
"""Fields deprecated inside each configMapGenerator/secretGenerator entry."""
FILE_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KUSTOMIZATION_FIELDS = {"resources", "patches", "labels", "images", "namespace", "configMapGenerator",
                        "secretGenerator", "components", "replacements", *DEPRECATED}
"""Fields that make a README yaml block a kustomization, even one that forgot `kind`."""
READMES = (REPO / "README.md", DEPLOY / "README.md", *sorted((REPO / "docs").glob("*.md")))


def deprecated_fields(kustomization: Mapping[str, Any]) -> list[str]:
    """What in `kustomization` is deprecated, each with its replacement; empty when nothing is."""
    found = [f"{field} (use {DEPRECATED[field]})" for field in kustomization if field in DEPRECATED]
    for generators in ("configMapGenerator", "secretGenerator"):
        for entry in kustomization.get(generators) or []:
            found += [f"{generators}[{entry.get('name')}].{field} (use {use})"
                      for field, use in GENERATOR_DEPRECATED.items() if field in entry]
    return found


def kustomization_files() -> list[pathlib.Path]:
    return sorted(p for name in FILE_NAMES for root in (DEPLOY, REPO / "crds") for p in root.rglob(name))


def readme_kustomizations() -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every ```yaml block of the READMEs that is a Kustomization, by "file:line"."""
    for readme in READMES:
        text = readme.read_text()
        for match in re.finditer(r"```ya?ml\n(.*?)```", text, flags=re.DOTALL):
            where = f"{readme.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}"
            for doc in yaml.safe_load_all(match.group(1)):
                if isinstance(doc, dict) and (doc.get("kind") == "Kustomization" or (
                        "metadata" not in doc and KUSTOMIZATION_FIELDS & doc.keys())):
                    yield where, doc


def test_the_checker_names_every_deprecated_field() -> None:
    old = {"bases": ["../base"], "commonLabels": {"a": "b"}, "patchesJson6902": [],
           "patchesStrategicMerge": ["p.yaml"], "vars": [], "imageTags": [],
           "helmChartInflationGenerator": [], "resources": ["x.yaml"],
           "configMapGenerator": [{"name": "c", "envSource": "c.env"}]}
    assert [f.split(" ")[0] for f in deprecated_fields(old)] == [
        *DEPRECATED, "configMapGenerator[c].envSource"]
    current = {"resources": ["../base"], "labels": [{"pairs": {"a": "b"}, "includeSelectors": True}],
               "patches": [{"path": "p.yaml"}], "commonAnnotations": {"a": "b"},
               "configMapGenerator": [{"name": "c", "envs": ["c.env"]}]}
    assert deprecated_fields(current) == []


def test_every_kustomization_is_found() -> None:
    found = [str(p.relative_to(REPO)) for p in kustomization_files()]
    assert found == sorted([
        "crds/Kustomization", "deploy/agent/base/kustomization.yaml", "deploy/agent/kustomization.yaml",
        "deploy/agent/overlays/example/kustomization.yaml", "deploy/coordinator/kustomization.yaml",
        "deploy/external-metrics/kustomization.yaml", "deploy/monitoring/agent/kustomization.yaml",
        "deploy/monitoring/coordinator/kustomization.yaml"])
    assert len(list(readme_kustomizations())) == 4, \
        "the hub webhook, external metrics, Ray token and cert-manager overlays"


@pytest.mark.parametrize("path", kustomization_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_kustomization_file_uses_a_deprecated_field(path: pathlib.Path) -> None:
    kustomization = yaml.safe_load(path.read_text())
    assert deprecated_fields(kustomization) == [], f"{path.relative_to(REPO)}"
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert kustomization["kind"] == "Kustomization"


def test_the_generated_kustomization_uses_none() -> None:
    generated = yaml.safe_load(crd.generated_files()[crd.KUSTOMIZATION])
    assert deprecated_fields(generated) == []
    assert generated["kind"] == "Kustomization"


def test_no_readme_kustomization_uses_a_deprecated_field() -> None:
    for where, kustomization in readme_kustomizations():
        assert deprecated_fields(kustomization) == [], where
        assert kustomization.get("kind") == "Kustomization", f"{where}: say apiVersion and kind"
