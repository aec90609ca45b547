"""The sandbox kubelet's check of what a pod needs before it starts (`federation/sandbox/pod_refs.py`):
the first required object missing from the pod's namespace, with the reason a kubelet reports."""

from __future__ import annotations

from typing import Any

import pytest

from federation.sandbox import pod_refs


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "shop"},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}], **spec}}


NEEDS_ALL = pod(volumes=[{"name": "c", "configMap": {"name": "web-config"}}],
                imagePullSecrets=[{"name": "registry"}], serviceAccountName="web-runner")


@pytest.mark.parametrize(("present", "expected"), [
    pytest.param({"configmaps/web-config", "secrets/registry", "serviceaccounts/web-runner"}, None,
                 id="all-there"),
    pytest.param({"secrets/registry", "serviceaccounts/web-runner"},
                 ("CreateContainerConfigError", "configmap 'web-config' not found"), id="configmap-missing"),
    pytest.param({"configmaps/web-config", "serviceaccounts/web-runner"},
                 ("ErrImagePull", "image pull secret 'registry' not found: the registry refused"),
                 id="pull-secret-missing"),
    pytest.param({"configmaps/web-config", "secrets/registry"},
                 ("CreateContainerConfigError", "serviceaccount 'web-runner' not found"),
                 id="account-missing"),
])
def test_the_first_missing_required_object_blocks_the_pod(
        present: set[str], expected: tuple[str, str] | None) -> None:
    asked: list[str] = []

    def exists(path: str) -> bool:
        asked.append(path)
        return path.removeprefix("/api/v1/namespaces/shop/") in present

    assert pod_refs.blocking(NEEDS_ALL, exists=exists) == expected
    assert all(path.startswith("/api/v1/namespaces/shop/") for path in asked)


def test_an_optional_object_and_the_default_account_never_block() -> None:
    optional = pod(volumes=[{"name": "c", "configMap": {"name": "maybe", "optional": True}}],
                   serviceAccountName="default")
    assert pod_refs.blocking(optional, exists=lambda _path: False) is None


def test_a_waiting_pod_is_pending_and_not_ready_with_the_reason_on_every_container() -> None:
    status = pod_refs.waiting_status(NEEDS_ALL, reason="ErrImagePull", message="m", host_ip="10.0.0.1")
    assert status["phase"] == "Pending"
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "False"
    assert [c["state"] for c in status["containerStatuses"]] == [
        {"waiting": {"reason": "ErrImagePull", "message": "m"}}]
