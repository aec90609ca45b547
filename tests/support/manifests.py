"""deploy/ rendered with the build's kubectl, for the tests that check the manifests.

Why in one place: every deploy test must read what `kubectl apply -k` would apply — the real
kustomize of the kubectl `fedspread sandbox build` caches, not a hand-parsed copy of the files.
"""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any

import yaml

Doc = dict[str, Any]
DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy"


def render(kubectl: pathlib.Path, directory: pathlib.Path) -> list[Doc]:
    """`kubectl kustomize directory`, parsed."""
    result = subprocess.run([str(kubectl), "kustomize", str(directory)], capture_output=True, text=True,
                            check=False, timeout=60)
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


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
