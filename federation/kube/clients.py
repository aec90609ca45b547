"""The one way fedspread builds a Kubernetes client: kubeconfig, KUBECONFIG or in-cluster, then a probe.

Why one function: the coordinator (hub), the agent (its member), the demo and the sandbox all need
an `ApiClient`, and each used to pick its configuration and report failures its own way. Here the
rule is written once — an explicit kubeconfig file wins, else the KUBECONFIG environment variable
(as kubectl reads it), else the pod's in-cluster service account — with an optional context, and a
failure is one line naming where the configuration came from, or which server did not answer and
why. The probe (`GET /version`) has a deadline, so a wrong address fails at startup in seconds
instead of at the first real call.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping

from kubernetes import client, config

from federation.kube import deadlines, errors

PROBE_TIMEOUT = deadlines.PROBE
"""Seconds the startup probe waits for the apiserver's /version."""

KUBECONFIG_ENV = "KUBECONFIG"


class KubeUnavailable(Exception):
    """No usable Kubernetes API: the configuration cannot be loaded, or the apiserver did not answer.

    The message is one line. `source` says where the configuration came from ("kubeconfig FILE",
    "KUBECONFIG=...", "the in-cluster service account"), `server` is the apiserver's URL once known,
    `reason` the first line of what went wrong.
    """

    def __init__(self, message: str, *, source: str, server: str = "", reason: str = "",
                 in_cluster: bool = False) -> None:
        super().__init__(message)
        self.source = source
        self.server = server
        self.reason = reason
        self.in_cluster = in_cluster


class KubeConfigInvalid(KubeUnavailable):
    """The configuration could not be loaded (missing or malformed file, unknown context, not in a pod)."""


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:errors.MAX_REASON] if text else type(error).__name__


def _load(settings: client.Configuration, *, kubeconfig: pathlib.Path | None, context: str | None,
          environ: Mapping[str, str]) -> tuple[str, bool]:
    """Fill `settings`; returns (where the configuration came from, whether it is in-cluster)."""
    from_env = environ.get(KUBECONFIG_ENV, "").strip()
    if kubeconfig is not None:
        source, files = f"kubeconfig {kubeconfig}", str(kubeconfig)
        if not kubeconfig.is_file():
            raise KubeConfigInvalid(f"cannot use {source}: no such file", source=source,
                                    reason="no such file")
    elif from_env:
        source, files = f"{KUBECONFIG_ENV}={from_env}", from_env
    else:
        source = "the in-cluster service account"
        if context is not None:
            reason = f"context {context!r} needs a kubeconfig (none given, {KUBECONFIG_ENV} unset)"
            raise KubeConfigInvalid(f"cannot use {source}: {reason}", source=source, reason=reason,
                                    in_cluster=True)
        try:
            config.load_incluster_config(client_configuration=settings)  # type: ignore[no-untyped-call]
        except Exception as error:  # not in a pod, or its token/CA files are missing
            reason = _first_line(error)
            raise KubeConfigInvalid(f"cannot use {source}: {reason}", source=source, reason=reason,
                                    in_cluster=True) from error
        return source, True
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=files, context=context, client_configuration=settings)
    except Exception as error:  # YAML, missing fields, unknown context, unreadable certificates
        reason = _first_line(error)
        raise KubeConfigInvalid(f"cannot use {source}: {reason}", source=source, reason=reason) from error
    return source, False


def api_client(kubeconfig: pathlib.Path | None = None, *, context: str | None = None, probe: bool = False,
               probe_timeout: float = PROBE_TIMEOUT, pool_size: int | None = None,
               environ: Mapping[str, str] | None = None) -> client.ApiClient:
    """An ApiClient from `kubeconfig`, else $KUBECONFIG, else the in-cluster service account.

    `context` picks a context of the kubeconfig (default: its current-context). With `probe`, the
    apiserver must answer GET /version within `probe_timeout` seconds. `pool_size` sets the
    connection pool (one connection per concurrent call or watch). `environ` replaces os.environ
    (for tests). KubeConfigInvalid or KubeUnavailable, with a one-line message, when it cannot.
    """
    settings = client.Configuration()
    source, in_cluster = _load(settings, kubeconfig=kubeconfig, context=context,
                               environ=os.environ if environ is None else environ)
    if pool_size is not None:
        settings.connection_pool_maxsize = pool_size
    settings.retries = deadlines.URLLIB3_RETRIES
    api = client.ApiClient(settings)
    if probe:
        probe_server(api, timeout=probe_timeout, source=source, in_cluster=in_cluster)
    return api


def probe_server(api: client.ApiClient, *, timeout: float = PROBE_TIMEOUT, source: str = "",
                 in_cluster: bool = False) -> None:
    """GET /version within `timeout` seconds; KubeUnavailable naming the server and the reason."""
    server = str(api.configuration.host)
    try:
        with errors.translated():
            client.VersionApi(api).get_code(_request_timeout=timeout)
    except errors.KubeError as error:
        raise KubeUnavailable(f"cannot reach the apiserver at {server}: {error}", source=source,
                              server=server, reason=str(error), in_cluster=in_cluster) from error
    except Exception as error:  # e.g. an SSL or decoding error the client raises as itself
        reason = _first_line(error)
        raise KubeUnavailable(f"cannot reach the apiserver at {server}: {reason}", source=source,
                              server=server, reason=reason, in_cluster=in_cluster) from error
