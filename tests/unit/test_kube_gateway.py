"""The one Kubernetes client gateway and the one error translation.

Why: every process builds its client through `federation.kube.clients.api_client`, so its rule
(--kubeconfig, else KUBECONFIG, else in-cluster; an optional context; a bounded probe failing in
one line) is checked here once. `federation.kube.errors` must name 404/409/410 and timeouts and
keep the client's exception as `__cause__`.
"""

from __future__ import annotations

import pathlib
import socket
import time

import pytest
import urllib3
import yaml
from kubernetes.client import exceptions
from kubernetes.config import incluster_config

from federation.kube import clients, errors


def write_kubeconfig(path: pathlib.Path, servers: dict[str, str], *, current: str) -> pathlib.Path:
    """A kubeconfig with one cluster, user and context per entry of `servers` (context name -> URL)."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": n, "cluster": {"server": url}} for n, url in servers.items()],
        "users": [{"name": n, "user": {"token": f"token-{n}"}} for n in servers],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in servers],
    }))
    return path


@pytest.fixture
def pod(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))


@pytest.fixture
def two(tmp_path: pathlib.Path) -> pathlib.Path:
    return write_kubeconfig(tmp_path / "two", {"alpha": "https://alpha.example:6443",
                                               "beta": "https://beta.example:6443"}, current="alpha")


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed when the block ends: connections are refused


@pytest.mark.usefixtures("pod")
def test_an_explicit_kubeconfig_wins_over_kubeconfig_env_and_the_pod(two: pathlib.Path,
                                                                   tmp_path: pathlib.Path) -> None:
    other = write_kubeconfig(tmp_path / "other", {"gamma": "https://gamma.example:6443"}, current="gamma")
    api = clients.api_client(two, environ={"KUBECONFIG": str(other)})
    assert api.configuration.host == "https://alpha.example:6443"


@pytest.mark.usefixtures("pod")
def test_kubeconfig_env_wins_over_the_pod(two: pathlib.Path) -> None:
    api = clients.api_client(None, environ={"KUBECONFIG": str(two)})
    assert api.configuration.host == "https://alpha.example:6443"


@pytest.mark.usefixtures("pod")
def test_without_either_the_pods_service_account_is_used() -> None:
    api = clients.api_client(None, environ={})
    assert api.configuration.host == "https://10.96.0.1:443"


def test_context_picks_the_cluster(two: pathlib.Path) -> None:
    assert clients.api_client(two, context="beta").configuration.host == "https://beta.example:6443"
    via_env = clients.api_client(None, context="beta", environ={"KUBECONFIG": str(two)})
    assert via_env.configuration.host == "https://beta.example:6443"


def test_an_unknown_context_is_one_line(two: pathlib.Path) -> None:
    with pytest.raises(clients.KubeConfigInvalid) as raised:
        clients.api_client(two, context="nope")
    assert str(raised.value).startswith(f"cannot use kubeconfig {two}: ")
    assert len(str(raised.value).splitlines()) == 1 and raised.value.__cause__ is not None


def test_a_missing_file_and_no_pod_are_one_line(tmp_path: pathlib.Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(clients.KubeConfigInvalid, match="no such file"):
        clients.api_client(tmp_path / "absent")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(clients.KubeConfigInvalid) as raised:
        clients.api_client(None, environ={})
    assert raised.value.in_cluster and "in-cluster service account" in str(raised.value)
    with pytest.raises(clients.KubeConfigInvalid, match="needs a kubeconfig"):
        clients.api_client(None, context="beta", environ={})


def test_an_unreachable_server_fails_the_probe_in_one_line(tmp_path: pathlib.Path, closed_port: int) -> None:
    server = f"http://127.0.0.1:{closed_port}"
    kubeconfig = write_kubeconfig(tmp_path / "closed", {"closed": server}, current="closed")
    api = clients.api_client(kubeconfig)  # no probe: nothing is dialled yet
    started = time.monotonic()
    with pytest.raises(clients.KubeUnavailable) as raised:
        clients.api_client(kubeconfig, probe=True, probe_timeout=2)
    assert time.monotonic() - started < 10
    message = str(raised.value)
    assert message.startswith(f"cannot reach the apiserver at {server}: ") and len(message.splitlines()) == 1
    assert "refused" in message.lower()
    assert isinstance(raised.value.__cause__, errors.Unreachable)
    assert api.configuration.host == server


@pytest.mark.parametrize(("status", "kind"), [
    (404, errors.NotFound), (409, errors.Conflict), (410, errors.Gone), (504, errors.Timeout),
    (500, errors.KubeError),
])
def test_api_statuses_become_our_exceptions(status: int, kind: type[errors.KubeError]) -> None:
    original = exceptions.ApiException(status=status, reason="Because")
    with pytest.raises(kind) as raised, errors.translated("read deployment shop/web"):
        raise original
    assert type(raised.value) is kind
    assert raised.value.__cause__ is original
    assert raised.value.status == status and raised.value.reason == "Because"
    assert str(raised.value) == f"read deployment shop/web: {status} Because"


def test_network_errors_become_timeout_or_unreachable() -> None:
    pool = urllib3.HTTPConnectionPool("127.0.0.1", 1)
    timed_out = urllib3.exceptions.ReadTimeoutError(pool, "/version", "Read timed out.")
    with pytest.raises(errors.Timeout) as raised, errors.translated():
        raise timed_out
    assert raised.value.__cause__ is timed_out and raised.value.status is None
    refused = urllib3.exceptions.MaxRetryError(pool, "/version", ConnectionRefusedError("Connection refused"))
    with pytest.raises(errors.Unreachable, match="Connection refused") as unreachable, errors.translated():
        raise refused
    assert unreachable.value.__cause__ is refused


def test_other_errors_pass_through() -> None:
    with pytest.raises(KeyError), errors.translated():
        raise KeyError("not ours")
