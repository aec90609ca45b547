"""deploy/README.md's Ray token overlay renders, and gives the head, the workers and the
coordinator the same token, from the same Secret, the way the coordinator's join check reads it.

Why: a Ray cluster that requires a token refuses a coordinator without it, and the README's
overlay is the documented way to give it to all three. A second description drifts, so the
overlay is rendered from the README's own blocks with the build's kustomize (`manifests.render`),
as test_deploy_render.py does for deploy/ itself.
"""

from __future__ import annotations

from typing import Any

import pytest

from federation.coordinator import ray_join
from tests.support.manifests import hub_overlay, readme_blocks, render

SECRET = {"secretKeyRef": {"name": "fedspread-ray-token", "key": "auth_token"}}


def overlay_blocks() -> list[tuple[str, str]]:
    return readme_blocks("deploy-coordinator-file")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return render(hub_overlay(tmp_path_factory.mktemp("repo"), overlay_blocks()))


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
