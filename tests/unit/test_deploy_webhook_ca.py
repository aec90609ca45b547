"""deploy/README.md's overlay that gives the coordinator's validating webhook its caBundle renders.

Why: deploy/coordinator ships the ValidatingWebhookConfiguration without a `caBundle` (the CA is
the installer's); the README's overlay is what makes the hub's apiserver trust the coordinator.
It is rendered from the README's own blocks with the build's kubectl (kustomize v2), as an
installer would, so that the documented patch keeps matching the manifest.
"""

from __future__ import annotations

import base64
import pathlib
import re
import subprocess
from typing import Any

import pytest
import yaml

from federation.coordinator.hub import registration
from federation.sandbox import build

REPO = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CA = b"-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n"


def overlay_blocks() -> list[tuple[str, str]]:
    return re.findall(r"<!-- deploy-webhook-file: (\S+) -->\n```yaml\n(.*?)```",
                      (DEPLOY / "README.md").read_text(), flags=re.DOTALL)


def render(tmp_path: pathlib.Path, *, ca: str) -> list[dict[str, Any]]:
    try:
        kubectl = build.kubectl()
    except build.BuildError as error:
        pytest.fail(f"no kubectl from the build: {error}")
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "coordinator").symlink_to(DEPLOY / "coordinator")
    (tmp_path / "crds").symlink_to(REPO / "crds")
    hub = tmp_path / "deploy" / "hub"  # beside the base, where the README says to put it
    hub.mkdir()
    for name, body in overlay_blocks():
        (hub / name).write_text(body.replace("<base64 -w0 ca.crt>", ca))
    result = subprocess.run([str(kubectl), "kustomize", str(hub)], capture_output=True, text=True,
                            check=False, timeout=60)
    assert result.returncode == 0, f"kubectl kustomize {hub} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def test_the_readme_has_the_two_files() -> None:
    assert [name for name, _ in overlay_blocks()] == ["kustomization.yaml", "webhook-ca.yaml"]


def test_both_webhooks_get_the_ca_and_nothing_else_changes(tmp_path: pathlib.Path) -> None:
    bundle = base64.b64encode(CA).decode("ascii")
    docs = render(tmp_path, ca=bundle)
    (webhook,) = [d for d in docs if d["kind"] == registration.KIND]
    assert [hook["name"] for hook in webhook["webhooks"]] == [registration.SPREADS_WEBHOOK,
                                                              registration.CLUSTERS_WEBHOOK]
    for hook in webhook["webhooks"]:
        assert base64.b64decode(hook["clientConfig"].pop("caBundle")) == CA
    base = yaml.safe_load((DEPLOY / "coordinator" / "webhook.yaml").read_text())
    assert webhook["webhooks"] == base["webhooks"], "the patch only adds the caBundles"
