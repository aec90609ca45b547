"""JSON requests to a sandbox apiserver over the kubernetes client's connection pool, without models.

Why: the admission benchmark times pod creates from the client's side and runs a baseline webhook
whose cost is its API writes. The generated client spends more CPU building and walking model
objects (and sanitising dict bodies) than the request itself takes on loopback; that would put
Python overhead into both sides of the comparison. Here a request is one `json.dumps`, one
urllib3 call on the client's own pool (its TLS settings and token from the kubeconfig), and one
`json.loads` — the same for every caller, fedspread's burst and the baseline's status writes alike.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client, config

Json = dict[str, Any]


class RawError(Exception):
    """An HTTP error answer; `status` and the decoded `body` (a Status object, usually)."""

    def __init__(self, status: int, body: Any) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.body = body


def api_client(kubeconfig: str, *, pool_size: int = 16) -> client.ApiClient:
    """A generated-client ApiClient for `kubeconfig` whose pool keeps `pool_size` connections."""
    settings = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=settings)  # type: ignore[no-untyped-call]
    settings.connection_pool_maxsize = pool_size
    return client.ApiClient(settings)


class RawApi:
    """GET/POST/PUT/DELETE of JSON documents by path; thread-safe (urllib3's pool is)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        settings = api.configuration
        self._host = settings.host.rstrip("/")
        self._pool = api.rest_client.pool_manager
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        for auth in settings.auth_settings().values():
            if auth["in"] == "header" and auth["value"]:
                self._headers[auth["key"]] = auth["value"]

    def request(self, method: str, path: str, body: Any = None, *, timeout: float = 60.0,
                content_type: str = "application/json") -> Any:
        """The decoded answer of one request; RawError for an HTTP error status."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = self._headers if content_type == "application/json" else {
            **self._headers, "Content-Type": content_type}
        response = self._pool.request(method, self._host + path, body=data, headers=headers,
                                      timeout=timeout, retries=False)
        try:
            decoded = json.loads(response.data) if response.data else None
        except ValueError:  # e.g. "404 page not found" for a path nobody serves yet
            decoded = response.data.decode(errors="replace")
        if response.status >= 400:
            raise RawError(response.status, decoded)
        return decoded

    def get(self, path: str) -> Any:
        """GET `path`."""
        return self.request("GET", path)

    def text(self, path: str, *, timeout: float = 60.0) -> str:
        """GET `path` as text (e.g. /metrics); RawError for an HTTP error status."""
        headers = {**self._headers, "Accept": "text/plain"}
        response = self._pool.request("GET", self._host + path, headers=headers, timeout=timeout,
                                      retries=False)
        body = response.data.decode(errors="replace")
        if response.status >= 400:
            raise RawError(response.status, body)
        return body

    def post(self, path: str, body: Any) -> Any:
        """POST `body` to `path`."""
        return self.request("POST", path, body)

    def put(self, path: str, body: Any) -> Any:
        """PUT `body` at `path` (an update: 409 when its resourceVersion is stale)."""
        return self.request("PUT", path, body)

    def merge_patch(self, path: str, body: Any) -> Any:
        """PATCH `path` with a JSON merge patch."""
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str, body: Any = None) -> Any:
        """DELETE `path`, with optional DeleteOptions."""
        return self.request("DELETE", path, body)
