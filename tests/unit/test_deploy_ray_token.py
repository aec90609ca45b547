"""deploy/README.md's Ray token overlay renders, and gives the head, the workers and the
coordinator the same token, from the same Secret, the way the coordinator's join check reads it.

Why: a Ray cluster that requires a token refuses a coordinator without it, and the README's
overlay is the documented way to give it to all three. A second description drifts, so the
overlay is rendered from the README's own blocks with the build's kubectl (kustomize v2), as
test_deploy_render.py does for deploy/ itself.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
from typing import Any

import pytest
import yaml

from federation.coordinator import ray_join
from federation.sandbox import build

REPO = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SECRET = {"secretKeyRef": {"name": "fedspread-ray-token", "key": "auth_token"}}


def overlay_blocks() -> list[tuple[str, str]]:
    return re.findall(r"<!-- deploy-coordinator-file: (\S+) -->\n```yaml\n(.*?)```",
                      (DEPLOY / "README.md").read_text(), flags=re.DOTALL)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    try:
        kubectl = build.kubectl()
    except build.BuildError as error:
        pytest.fail(f"no kubectl from the build: {error}")
    root = tmp_path_factory.mktemp("repo")
    (root / "deploy").mkdir()
    (root / "deploy" / "coordinator").symlink_to(DEPLOY / "coordinator")
    (root / "crds").symlink_to(REPO / "crds")
    hub = root / "deploy" / "hub"  # beside the base, where the README says to put it
    hub.mkdir()
    for name, body in overlay_blocks():
        (hub / name).write_text(body)
    result = subprocess.run([str(kubectl), "kustomize", str(hub)], capture_output=True, text=True,
                            check=False, timeout=60)
    assert result.returncode == 0, f"kubectl kustomize {hub} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def token_env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])
            if e["name"].startswith("RAY_AUTH")}


def test_the_readme_has_the_three_files() -> None:
    assert [name for name, _ in overlay_blocks()] == [
        "kustomization.yaml", "ray-token.yaml", "ray-token-coordinator.yaml"]


def test_head_workers_and_coordinator_share_one_token(rendered: list[dict[str, Any]]) -> None:
    (ray_cluster,) = [d for d in rendered if d["kind"] == "RayCluster"]
    (deployment,) = [d for d in rendered if d["kind"] == "Deployment"]
    pods = [ray_cluster["spec"]["headGroupSpec"]["template"],
            *(group["template"] for group in ray_cluster["spec"]["workerGroupSpecs"]),
            deployment["spec"]["template"]]
    for pod in pods:
        (only,) = pod["spec"]["containers"]
        assert token_env(only) == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": SECRET}, only["name"]
    resolved = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "from-the-secret"}
    assert ray_join.token(resolved) == ray_join.Token("from-the-secret", "RAY_AUTH_TOKEN")
