"""The node simulator's way to the apiserver: raw JSON requests and a resumable list+watch.

Why raw JSON: hundreds of pods must not fall behind, and the generated client's model decoding cost
more CPU than the requests themselves; the kubernetes client's authenticated connection pool is kept
(sized to the simulator's workers). Why one list+watch for every collection: the pod loop and the
volume provisioner both need "everything, then every change, resumed after a broken connection" —
resumed from the last resourceVersion, relisted only on 410 Gone, as an informer does.
"""

from __future__ import annotations

import copy
import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

WATCH_SECONDS = 300
Json = dict[str, Any]


class ApiError(Exception):
    """A non-2xx answer from the apiserver (or a watch's ERROR event)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message[:300]}")
        self.status = status


class Api:
    """Raw-JSON requests on the kubernetes client's authenticated connection pool."""

    def __init__(self, api: Any, pool_size: int) -> None:
        from kubernetes import client

        configuration = copy.deepcopy(api.configuration)
        configuration.connection_pool_maxsize = pool_size
        self.client, self.host = client.ApiClient(configuration), configuration.host

    def call(self, method: str, path: str, body: Json | None = None, *, stream: bool = False,
             ok: tuple[int, ...] = (), decode: bool = True, **query: Any) -> Any:
        """One request's JSON answer (`stream`: the unread response); None if its error is in `ok`
        or if not `decode` (a pod's JSON costs more CPU to decode than its request)."""
        headers = {"User-Agent": "fedspread-nodesim", "Accept": "application/json", "Content-Type":
                   "application/strategic-merge-patch+json" if method == "PATCH" else "application/json"}
        self.client.update_params_for_auth(headers, [], ["BearerToken"], path, method, body)
        url = f"{self.host}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        answer = self.client.rest_client.request(  # type: ignore[no-untyped-call]
            method, url, headers=headers, body=body,
            _request_timeout=(5, WATCH_SECONDS + 30 if stream else 30))
        if stream and 200 <= answer.status <= 299:
            return answer.response
        data = answer.read()  # all of it, or the connection does not go back to the pool
        if answer.status not in ok and not 200 <= answer.status <= 299:
            raise ApiError(answer.status, data.decode(errors="replace"))
        return json.loads(data or b"{}") if decode and answer.status not in ok else None


def object_key(item: Json) -> str:
    """`namespace/name` (or `name` for a cluster-scoped object)."""
    meta = item["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


class ListWatch:
    """Every object of one collection, then every change: `on_list(keys)` after each fresh list (the
    keys it holds: what is missing from it was deleted meanwhile), then `on_event(type, object)`
    for each listed object (ADDED) and each watch event but bookmarks."""

    def __init__(self, api: Api, path: str, *, on_event: Callable[[str, Json], None],
                 on_list: Callable[[set[str]], None] = lambda keys: None, warn: Callable[[str], None],
                 stop: threading.Event, **query: str) -> None:
        self.api, self.path = api, path
        self.query: dict[str, Any] = dict(query)  # Any: passed on as keywords
        self.on_event, self.on_list, self.warn, self.stop = on_event, on_list, warn, stop
        self.version: str | None = None
        self.stream: Any = None

    def _events(self) -> Iterator[Json]:
        """With no resourceVersion to resume from, a fresh list (as ADDED events); then a watch."""
        if self.version is None:
            listing = self.api.call("GET", self.path, **self.query)
            self.on_list({object_key(item) for item in listing["items"]})
            yield from ({"type": "ADDED", "object": item} for item in listing["items"])
            self.version = listing["metadata"]["resourceVersion"]
        self.stream = self.api.call("GET", self.path, stream=True, watch="true", allowWatchBookmarks="true",
                                    resourceVersion=self.version, timeoutSeconds=WATCH_SECONDS, **self.query)
        buffer = b""
        try:
            for chunk in self.stream.stream(amt=None, decode_content=False):
                *lines, buffer = (buffer + chunk).split(b"\n")
                for event in (json.loads(line) for line in lines if line.strip()):
                    yield event
                    self.version = event["object"]["metadata"]["resourceVersion"]
        finally:
            self.stream.close()
            self.stream.release_conn()

    def run(self) -> None:
        """List, then watch until `stop`: resume from the last resourceVersion, relist only on 410 Gone."""
        while not self.stop.is_set():
            try:
                for event in self._events():
                    if event["type"] == "ERROR":
                        raise ApiError(event["object"].get("code") or 500, event["object"].get("message", ""))
                    if event["type"] != "BOOKMARK":
                        self.on_event(event["type"], event["object"])
            except Exception as error:
                if isinstance(error, ApiError) and error.status == 410:
                    self.version = None  # too old to resume from: relist
                elif not self.stop.is_set():
                    self.warn(f"watch of {self.path} interrupted ({error}); resuming")
                    self.stop.wait(1.0)

    def cut(self) -> None:
        """Cut the watch's connection (at shutdown: the stream would otherwise wait for news)."""
        if self.stream is not None:
            self.stream.shutdown()
