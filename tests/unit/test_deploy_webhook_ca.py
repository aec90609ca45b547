"""deploy/README.md's overlay that gives the coordinator's validating webhook its caBundle renders.

Why: deploy/coordinator ships the ValidatingWebhookConfiguration without a `caBundle` (the CA is
the installer's); the README's overlay is what makes the hub's apiserver trust the coordinator.
It is rendered from the README's own blocks with the build's kustomize (`manifests.render`), as an
installer would, so that the documented patch keeps matching the manifest.
"""

from __future__ import annotations

import base64
import pathlib
from typing import Any

import yaml

from federation.coordinator.hub import registration
from tests.support.manifests import DEPLOY, hub_overlay, readme_blocks
from tests.support.manifests import render as kustomize_build

CA = b"-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n"


def overlay_blocks() -> list[tuple[str, str]]:
    return readme_blocks("deploy-webhook-file")


def render(tmp_path: pathlib.Path, *, ca: str) -> list[dict[str, Any]]:
    blocks = [(name, body.replace("<base64 -w0 ca.crt>", ca)) for name, body in overlay_blocks()]
    return kustomize_build(hub_overlay(tmp_path, blocks))


def test_the_readme_has_the_two_files() -> None:
    assert [name for name, _ in overlay_blocks()] == ["kustomization.yaml", "webhook-ca.yaml"]


def test_every_webhook_gets_the_ca_and_nothing_else_changes(tmp_path: pathlib.Path) -> None:
    bundle = base64.b64encode(CA).decode("ascii")
    docs = render(tmp_path, ca=bundle)
    (webhook,) = [d for d in docs if d["kind"] == registration.KIND]
    assert [hook["name"] for hook in webhook["webhooks"]] == [registration.SPREADS_WEBHOOK,
                                                              registration.CLUSTERS_WEBHOOK,
                                                              registration.HPAS_WEBHOOK]
    for hook in webhook["webhooks"]:
        assert base64.b64decode(hook["clientConfig"].pop("caBundle")) == CA
    base = yaml.safe_load((DEPLOY / "coordinator" / "webhook.yaml").read_text())
    assert webhook["webhooks"] == base["webhooks"], "the patch only adds the caBundles"
