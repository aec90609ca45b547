"""The coordinator reaches the hub through its pod's service account when no kubeconfig is given.

Why: deploy/coordinator runs it in a pod of the hub, with a ServiceAccount and RBAC instead of a
kubeconfig file; outside a pod, leaving the flag out must say what to do, not print a traceback.
"""

from __future__ import annotations

import pathlib

import pytest
from click.testing import CliRunner
from kubernetes.config import incluster_config

from federation import cli
from federation.coordinator import process as coordinator_main


@pytest.fixture
def pod(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """What the kubelet gives a pod: the apiserver's address in env, a token and the cluster CA."""
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    monkeypatch.delenv("KUBECONFIG", raising=False)  # it would win over the service account
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    return ca


@pytest.fixture
def outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)


def test_without_a_kubeconfig_the_pods_service_account_is_used(pod: pathlib.Path) -> None:
    api = coordinator_main.hub_client(None)
    assert api.configuration.host == "https://10.96.0.1:443"
    assert api.configuration.ssl_ca_cert == str(pod)
    assert api.configuration.auth_settings()["BearerToken"]["value"].lower() == "bearer sa-token"


@pytest.mark.usefixtures("outside")
def test_outside_a_pod_without_a_kubeconfig_says_what_to_give() -> None:
    with pytest.raises(coordinator_main.CoordinatorError, match="no --hub-kubeconfig given") as raised:
        coordinator_main.hub_client(None)
    assert "give --hub-kubeconfig FILE" in str(raised.value)


def test_a_given_kubeconfig_still_wins(pod: pathlib.Path, tmp_path: pathlib.Path) -> None:
    with pytest.raises(coordinator_main.CoordinatorError, match="no such file"):
        coordinator_main.hub_client(tmp_path / "absent")


@pytest.mark.usefixtures("outside")
def test_command_without_the_flag_fails_in_one_line() -> None:
    result = CliRunner().invoke(cli.main, ["coordinator", "--no-ray", "--insecure"])
    assert result.exit_code == 1
    assert result.output.startswith("error: no --hub-kubeconfig given")
    assert "Traceback" not in result.output


def test_help_says_the_flag_is_optional() -> None:
    text = CliRunner().invoke(cli.main, ["coordinator", "--help"]).output
    options = text.partition("Options:")[2]
    section = options[options.index("--hub-kubeconfig FILE"):options.index("--ray-address")]
    assert "[required]" not in section
    assert "service account" in " ".join(section.split())
