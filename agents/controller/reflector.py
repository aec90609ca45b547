"""List, then watch, one Kubernetes resource forever: client-go's reflector, on raw JSON.

Why its own module: the cache runs four of these (nodes, bound pods, spread pods, fedspread
Deployments), and the stream handling is where the subtle parts are:

* the list is paginated (`limit`/`continue`) and converted page by page, so a 20,000-pod cluster
  never holds every pod's JSON at once;
* the watch resumes from the last resourceVersion it saw (bookmarks keep that fresh), so an
  ordinary stream timeout or a dropped connection costs nothing;
* only `410 Gone` (the version fell out of the apiserver's window) forces a relist;
* any other error (apiserver restart, network) is retried forever with capped, jittered
  exponential backoff — the agent must outlive its apiserver's hiccups — and logged quietly.

Responses are requested with `_preload_content=False` and parsed with `json`: the generated
client's model deserialisation is an order of magnitude slower than the network here.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

LOG = logging.getLogger(__name__)

Json = dict[str, Any]
BACKOFF_BASE = 0.5
BACKOFF_MAX = 30.0
CONNECT_TIMEOUT = 10.0
LIST_TIMEOUT = 120.0
QUICK_END = 1.0
"""A watch that ends sooner than this without any event counts as a failure (backoff)."""


@dataclasses.dataclass(frozen=True)
class Sink:
    """Where a reflector delivers what it sees."""

    replace: Callable[[Iterator[Json]], None]
    """A fresh list: every object now (objects not in it are gone). Consumes the iterator."""
    apply: Callable[[str, Json], None]
    """One watch event: ADDED, MODIFIED or DELETED, and the object."""
    synced: Callable[[], None]
    """Called after the first complete list (wake up whoever waits for it)."""


class Gone(Exception):
    """The resourceVersion is too old (HTTP 410): list again."""


class WatchError(Exception):
    """An ERROR event other than 410 on the watch stream."""


def backoff(failures: int) -> float:
    """Seconds to wait after `failures` consecutive failures: capped exponential, jittered."""
    ceiling: float = min(BACKOFF_MAX, BACKOFF_BASE * 2.0 ** min(failures - 1, 16))
    return ceiling * random.uniform(0.5, 1.0)


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status", None)
    return status if isinstance(status, int) else None


class Reflector:
    """Keeps a Sink in step with one resource, from a generated client's list function."""

    def __init__(self, kind: str, lister: Callable[..., Any], *, sink: Sink, stop: threading.Event,
                 label_selector: str | None = None, field_selector: str | None = None,
                 watch_seconds: int = 300, page_size: int = 500) -> None:
        self.kind = kind
        self._lister = lister
        self._sink = sink
        self._stop = stop
        self._selectors = {"label_selector": label_selector, "field_selector": field_selector}
        self._watch_seconds = watch_seconds
        self._page_size = page_size
        self._version: str | None = None
        self._response: Any = None
        self.synced = False

    def run(self) -> None:
        """List and watch until the stop event is set."""
        failures = 0
        while not self._stop.is_set():
            try:
                if self._version is None:
                    self._sink.replace(self._pages())
                    if not self.synced:
                        self.synced = True
                        self._sink.synced()
                        LOG.debug("listed kind=%s version=%s", self.kind, self._version)
                started = time.monotonic()
                if self._watch() or time.monotonic() - started >= QUICK_END:
                    failures = 0
                elif not self._stop.is_set():  # ended at once with nothing: do not spin on it
                    failures += 1
                    self._stop.wait(backoff(failures))
            except Gone:
                LOG.info("watch expired, relisting kind=%s", self.kind)
                self._version = None
            except Exception as error:
                if self._stop.is_set():
                    break
                if _status(error) == 410:
                    self._version = None
                    continue
                failures += 1
                if failures & (failures - 1) == 0:  # 1st, 2nd, 4th, 8th ... failure: stay quiet
                    LOG.warning("watch interrupted kind=%s failures=%d error=%s",
                                self.kind, failures, str(error)[:300])
                self._stop.wait(backoff(failures))

    def close(self) -> None:
        """Cut the current watch connection (after setting the stop event)."""
        response = self._response
        if response is None:
            return
        try:
            response.shutdown()
        except Exception as error:  # already closed, or an older urllib3
            LOG.debug("closing watch kind=%s error=%s", self.kind, error)

    def _pages(self) -> Iterator[Json]:
        """Every object, page by page; sets the list's resourceVersion at the end."""
        token: str | None = None
        version = ""
        while True:
            response = self._lister(limit=self._page_size, _continue=token, _preload_content=False,
                                    _request_timeout=(CONNECT_TIMEOUT, LIST_TIMEOUT), **self._selectors)
            body = json.loads(response.data)
            yield from body.get("items") or ()
            meta = body.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            token = meta.get("continue") or None
            if not token:
                break
        self._version = version

    def _lines(self, response: Any) -> Iterator[Json]:
        buffer = b""
        for chunk in response.stream(amt=None, decode_content=False):
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                if line.strip():
                    yield json.loads(line)
        if buffer.strip():
            yield json.loads(buffer)

    def _watch(self) -> int:
        """Apply events until the server ends the stream (timeoutSeconds) or the stop event; how
        many events (bookmarks included) arrived."""
        response = self._lister(
            watch=True, resource_version=self._version, allow_watch_bookmarks=True,
            timeout_seconds=self._watch_seconds, _preload_content=False,
            _request_timeout=(CONNECT_TIMEOUT, self._watch_seconds + 30), **self._selectors)
        self._response = response
        received = 0
        try:
            if self._stop.is_set():
                return received
            for event in self._lines(response):
                received += 1
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone()
                    raise WatchError(f"{obj.get('code')}: {obj.get('message')}")
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._sink.apply(str(kind), obj)
                if version:
                    self._version = str(version)
                if self._stop.is_set():
                    break
            return received
        finally:
            self._response = None
            response.release_conn()
