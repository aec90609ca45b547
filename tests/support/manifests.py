"""deploy/ rendered with the build's kustomize, for the tests that check the manifests.

Why in one place: every deploy test must read what `kubectl apply -k` would apply — the real
kustomize, not a hand-parsed copy of the files — and all of them the same one: the pinned
kustomize 4.5.4 `fedspread sandbox build` caches (`build.kustomize()`), the oldest that knows the
fields deploy/ uses (kubectl >= 1.24 has it). Never a kustomize or kubectl found on PATH, and not the
sandbox's kubectl 1.20, whose kustomize v2 predates those fields. The README's kustomization
blocks are read here too, so that the tests render exactly what the README tells people to write.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import yaml

from federation.sandbox import build

Doc = dict[str, Any]
REPO = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


def kustomize() -> pathlib.Path:
    """The build's kustomize (fetched into the cache if missing); a clear failure, not a skip,
    when it cannot be had."""
    try:
        return build.kustomize()
    except build.BuildError as error:
        pytest.fail(f"no kustomize from the build: {error}")


def render(directory: pathlib.Path) -> list[Doc]:
    """`kustomize build directory`, parsed; any warning on stderr fails too."""
    result = subprocess.run([str(kustomize()), "build", str(directory)], capture_output=True, text=True,
                            check=False, timeout=60)
    assert result.returncode == 0, f"kustomize build {directory} failed:\n{result.stderr}"
    assert not result.stderr.strip(), f"kustomize build {directory} warned:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def readme_blocks(tag: str, readme: pathlib.Path = DEPLOY / "README.md") -> list[tuple[str, str]]:
    """The (file name, yaml text) blocks of `readme` marked `<!-- tag: NAME -->`, in order."""
    return re.findall(rf"<!-- {re.escape(tag)}: (\S+) -->\n```yaml\n(.*?)```", readme.read_text(),
                      flags=re.DOTALL)


def hub_overlay(root: pathlib.Path, blocks: Sequence[tuple[str, str]]) -> pathlib.Path:
    """`blocks` written as an overlay of deploy/coordinator beside it, `root`/deploy/hub, as the
    README says to put it (deploy/coordinator and crds/ are linked into `root`); its directory."""
    (root / "deploy").mkdir()
    (root / "deploy" / "coordinator").symlink_to(DEPLOY / "coordinator")
    (root / "crds").symlink_to(REPO / "crds")
    hub = root / "deploy" / "hub"
    hub.mkdir()
    for name, body in blocks:
        (hub / name).write_text(body)
    return hub


def pod_templates(docs: Sequence[Doc]) -> Iterator[tuple[str, Doc]]:
    """Every pod template of `docs` by "Kind/name[/group]": Deployments' and a RayCluster's groups."""
    for doc in docs:
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] == "Deployment":
            yield name, doc["spec"]["template"]
        elif doc["kind"] == "RayCluster":
            yield f"{name}/head", doc["spec"]["headGroupSpec"]["template"]
            for group in doc["spec"].get("workerGroupSpecs", []):
                yield f"{name}/{group['groupName']}", group["template"]
