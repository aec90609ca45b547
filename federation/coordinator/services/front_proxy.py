"""Who is asking the metrics API: the hub's aggregator, by its front-proxy client certificate, for a user.

Why: the coordinator's `external.metrics.k8s.io` server is reached through the hub apiserver's
aggregation layer, which authenticates the user and then calls us with ITS front-proxy client
certificate and the user in request headers (`X-Remote-User`, `X-Remote-Group`). Anyone who reaches
our port could send those headers, so — as every aggregated API server does (the "requestheader"
authenticator) — the headers are believed only on a connection whose client certificate the
front-proxy CA signed, and, when the hub names allowed names, whose CN is one of them.

Where the trust comes from: the hub publishes it in `kube-system/extension-apiserver-authentication`
(`requestheader-client-ca-file`, `requestheader-allowed-names`, `requestheader-username-headers`,
`requestheader-group-headers`, `requestheader-extra-headers-prefix`). `FrontProxyTrust` reads it
(each read with a deadline, transient errors retried with jitter, `tenacity`), writes the CA to a
private file that the TLS context reloads when it changes (`federation.kube.webhook_tls`), and
reads it again every `REFRESH_SECONDS`, or sooner (at most every `MIN_REFRESH_SECONDS`) after a
connection failed, which is what a rotated CA looks like: no restart needed.

The TLS layer verifies a certificate that is presented (one from another CA fails the handshake);
`identify` then refuses a request without one, or with a CN not allowed (401).

A hub whose ConfigMap cannot be read, or names no front-proxy CA (its apiserver runs without the
aggregation layer's flags), does not stop the coordinator: placement must never depend on an
optional API. The server then trusts a throwaway CA whose key nobody holds (every request: 401,
saying why), logs the reason, and keeps reading the ConfigMap every `MIN_REFRESH_SECONDS`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import tenacity
from kubernetes import client

from federation.certs import pki
from federation.coordinator.wire import access
from federation.kube import deadlines, errors, webhook_clients

LOG = logging.getLogger(__name__)

CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"
REFRESH_SECONDS = 60.0
"""The ConfigMap is read again this often."""
MIN_REFRESH_SECONDS = 10.0
"""...and, after a failed connection, no sooner than this after the last read."""
READ_TIMEOUT = deadlines.PROBE
ATTEMPTS = 3


class TrustUnavailable(Exception):
    """The hub's ConfigMap could not be read or holds no front-proxy CA; the message says which."""


@dataclasses.dataclass(frozen=True)
class RequestHeaderConfig:
    """The front-proxy settings of one hub (its ConfigMap's `requestheader-*` keys)."""

    client_ca: str
    """PEM of the CA(s) that sign the front proxy's client certificate."""
    allowed_names: frozenset[str] = frozenset()
    """CNs allowed; empty: any certificate the CA signed."""
    username_headers: tuple[str, ...] = ("x-remote-user",)
    group_headers: tuple[str, ...] = ("x-remote-group",)
    extra_prefixes: tuple[str, ...] = ("x-remote-extra-",)


def _names(data: Mapping[str, str], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """A ConfigMap value that is a JSON list of strings (lower-cased), else `default`."""
    text = data.get(key)
    if not text:
        return default
    try:
        values = json.loads(text)
    except ValueError as error:
        raise TrustUnavailable(f"{key} is not a JSON list: {error}") from None
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise TrustUnavailable(f"{key} is not a JSON list of strings")
    return tuple(value.lower() for value in values)


def parse(data: Mapping[str, str]) -> RequestHeaderConfig:
    """The settings from the ConfigMap's data; TrustUnavailable without a front-proxy CA (the hub
    apiserver runs without `--requestheader-client-ca-file`: it cannot aggregate)."""
    pem = data.get("requestheader-client-ca-file") or ""
    if "BEGIN CERTIFICATE" not in pem:
        raise TrustUnavailable(f"{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} has no requestheader-client-ca-file: "
                               "the hub apiserver needs --requestheader-client-ca-file (its aggregation "
                               "layer) for the external metrics API")
    return RequestHeaderConfig(
        client_ca=pem,
        allowed_names=frozenset(_names(data, "requestheader-allowed-names", ())),
        username_headers=_names(data, "requestheader-username-headers", ("x-remote-user",)),
        group_headers=_names(data, "requestheader-group-headers", ("x-remote-group",)),
        extra_prefixes=_names(data, "requestheader-extra-headers-prefix", ("x-remote-extra-",)))


def identify(config: RequestHeaderConfig | str, *, certificate: Mapping[str, Any] | None,
             headers: Mapping[str, tuple[str, ...]]) -> access.User | str:
    """The user the front proxy vouches for, or why the request is not authenticated.

    `certificate` is the peer's, already verified against `config.client_ca` by TLS (None: none);
    `config` a string: no settings could be read from the hub yet, and that is why.
    """
    if isinstance(config, str):
        return f"the coordinator could not read the hub's front-proxy settings yet: {config}"
    if not certificate:
        return ("a client certificate signed by the hub's front-proxy CA is required: this API is "
                "served through the hub apiserver (kubectl get --raw /apis/external.metrics.k8s.io/...)")
    name = webhook_clients.common_name(dict(certificate))
    if config.allowed_names and name not in config.allowed_names:
        return f"client certificate CN {name[:64]!r} is not among the front proxy's allowed names"
    user = next((value.strip() for header in config.username_headers
                 for value in headers.get(header, ()) if value.strip()), "")
    if not user:
        return f"the front proxy named no user ({', '.join(config.username_headers)})"
    groups = tuple(value.strip() for header in config.group_headers for value in headers.get(header, ())
                   if value.strip())
    return access.User(name=user, groups=groups, extra=extra_of(config, headers))


def extra_of(config: RequestHeaderConfig,
             headers: Mapping[str, tuple[str, ...]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The user's extra attributes from the front proxy's `<prefix><key>` headers, as the
    apiserver's requestheader authenticator reads them: the key is the header name after the
    prefix, lower-cased, then percent-decoded (so a key may hold `/` or upper case); each header
    value is one value, in order. Sorted by key; empty keys and values are dropped."""
    found: dict[str, list[str]] = {}
    prefixes = tuple(p.lower() for p in config.extra_prefixes)
    for header, values in headers.items():
        name = header.lower()
        prefix = next((p for p in prefixes if name.startswith(p)), None)
        if prefix is None:
            continue
        key = urllib.parse.unquote(name[len(prefix):])
        kept = [value.strip() for value in values if value.strip()]
        if key and kept:
            found.setdefault(key, []).extend(kept)
    return tuple(sorted((key, tuple(values)) for key, values in found.items()))


def _transient(error: BaseException) -> bool:
    if isinstance(error, errors.Unreachable | errors.Timeout):
        return True
    return isinstance(error, errors.KubeError) and error.status is not None and \
        (error.status == 429 or error.status >= 500)


def configmap_reader(api: client.ApiClient, *, timeout: float = READ_TIMEOUT,
                     attempts: int = ATTEMPTS) -> Callable[[], Mapping[str, str]]:
    """Reads the hub's ConfigMap: each call with a deadline, transient errors retried (jittered,
    `attempts` in all); TrustUnavailable otherwise."""
    core = client.CoreV1Api(api)

    def once() -> Mapping[str, str]:
        with errors.translated(f"read {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}"):
            found = core.read_namespaced_config_map(CONFIGMAP_NAME, CONFIGMAP_NAMESPACE,
                                                    _request_timeout=timeout)
        return dict(found.data or {})

    def read() -> Mapping[str, str]:
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_transient), stop=tenacity.stop_after_attempt(attempts),
            wait=tenacity.wait_random_exponential(multiplier=0.2, max=2.0), reraise=True)
        try:
            return retrying(once)
        except errors.KubeError as error:
            hint = "" if error.status != 403 else (
                " (the coordinator needs the RoleBinding to extension-apiserver-authentication-reader"
                " in kube-system: deploy/external-metrics)")
            raise TrustUnavailable(f"cannot read {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}: {error}{hint}") \
                from error

    return read


class FrontProxyTrust:
    """The hub's front-proxy settings, kept current; its `client_auth` feeds the TLS context."""

    def __init__(self, read: Callable[[], Mapping[str, str]], *, directory: pathlib.Path | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """Reads once: TrustUnavailable when the hub has no usable front-proxy CA now."""
        self._read = read
        self._clock = clock
        self._own_directory = directory is None
        self.directory = directory or pathlib.Path(tempfile.mkdtemp(prefix="fedspread-front-proxy-"))
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.ca_file = self.directory / "front-proxy-ca.crt"
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()
        self._config: RequestHeaderConfig | str
        try:
            self._config = parse(read())
            self._write(self._config.client_ca)
            self._read_at = clock()
        except TrustUnavailable as error:
            LOG.error("the external metrics API answers 401 until the hub's front-proxy settings can be "
                      "read", extra={"error": str(error)})
            self._config = str(error)
            self._write(pki.CertificateAuthority.create("fedspread-no-front-proxy-yet").cert_pem.decode())
            self._read_at = clock() - REFRESH_SECONDS
        self.client_auth = webhook_clients.ClientAuth(self.ca_file)
        """What the TLS context asks of a caller: a certificate signed by the CA (the file follows it)."""
        self.refreshes = 0

    @property
    def config(self) -> RequestHeaderConfig | str:
        """The settings last read; while none could be read, why."""
        with self._lock:
            return self._config

    def _write(self, pem: str) -> None:
        """Replace the CA file atomically (a new inode: the TLS context sees the change)."""
        handle, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        with os.fdopen(handle, "w") as out:
            out.write(pem)
        os.replace(temporary, self.ca_file)

    def due(self, *, failed: bool = False) -> bool:
        """Whether a read is due now (`failed`: a connection just failed)."""
        with self._lock:
            age, unread = self._clock() - self._read_at, isinstance(self._config, str)
        return age >= (MIN_REFRESH_SECONDS if failed or unread else REFRESH_SECONDS)

    def refresh(self, *, failed: bool = False) -> bool:
        """Read the ConfigMap again if due (one reader at a time); True when it changed. A failed
        read keeps the settings last read (logged), and is tried again when next due."""
        if not self.due(failed=failed) or not self._refreshing.acquire(blocking=False):
            return False
        try:
            with self._lock:
                self._read_at = self._clock()
            try:
                config = parse(self._read())
            except TrustUnavailable as error:
                LOG.warning("keeping the front-proxy settings last read", extra={"error": str(error)})
                return False
            self.refreshes += 1
            with self._lock:
                changed, self._config = config != self._config, config
            if changed:
                self._write(config.client_ca)
                LOG.info("front-proxy settings changed on the hub; using the new ones")
            return changed
        finally:
            self._refreshing.release()

    def close(self) -> None:
        """Remove the CA file (and the directory made for it)."""
        self.ca_file.unlink(missing_ok=True)
        if self._own_directory:
            with contextlib.suppress(OSError):
                self.directory.rmdir()
