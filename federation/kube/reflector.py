"""List, then watch, one Kubernetes resource forever: client-go's reflector, on raw JSON.

Why one module: the agent's cache (nodes, pods, Deployments of a member cluster) and the
coordinator's hub watcher (FederatedSpreads, MemberClusters, Deployments) need the same stream
handling, and that is where the subtle parts are. It lives in `federation` because agents may import
federation but federation may never import agents.

* The list is paginated (`limit`/`continue`) and delivered object by object, so a 20,000-pod
  cluster never holds every pod's JSON at once.
* The watch resumes from the last resourceVersion it saw (bookmarks keep that fresh), so an
  ordinary stream timeout or a dropped connection costs nothing.
* Only `410 Gone` (the version fell out of the apiserver's window) forces a relist; a relist
  reports only what changed meanwhile: ADDED/MODIFIED by resourceVersion, and DELETED (a stub
  with just namespace and name) for the objects that vanished. Consumers therefore see one kind of
  event stream whether it came from a list or a watch; SYNCED follows the first complete list.
* Any other error (apiserver restart, network) is retried forever with capped, jittered
  exponential backoff and logged quietly: agent and coordinator must outlive their apiserver's
  hiccups. A watch that ends at once without any event counts as a failure too (no spinning).

Responses are requested with `_preload_content=False` and parsed with `json`: the generated
client's model deserialisation is an order of magnitude slower than the network here.

What it remembers per object is kept small, because an agent on a big member follows 100,000 pods:
the resourceVersion as an int when it is a plain decimal (etcd's always are; `compact_version`),
and one key string, which a consumer taking `emit_keyed` receives and can key its own map by
instead of building another copy.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

from federation.kube import deadlines, errors

LOG = logging.getLogger(__name__)

Json = dict[str, Any]
EventType = Literal["ADDED", "MODIFIED", "DELETED", "SYNCED"]
Emit = Callable[[EventType, Json], None]
"""Receives every change: (ADDED|MODIFIED|DELETED, object), and (SYNCED, {}) once."""
KeyedEmit = Callable[[EventType, str, Json], None]
"""`Emit` with the object's key (`key(object)`, "" for SYNCED): the very string the reflector keeps,
so a consumer's map keyed by it shares the string instead of holding a copy of its own."""
MAX_VERSION_DIGITS = 19
"""The longest decimal resourceVersion kept as an int: etcd's revisions are int64."""

BACKOFF_BASE = 0.5
BACKOFF_MAX = 8.0
"""client-go waits up to 30 s; here an apiserver restart (the commonest outage: ~10 s of refused
connections) would then leave the cache stale for up to 30 s more after the apiserver is back —
longer than the webhook's creatingPods entries live (30 s), so pods admitted meanwhile could be
forgotten. With 8 s the member-restart fault test sees the watches relist seconds after /readyz."""
QUICK_END = 1.0
"""A watch that ends sooner than this without any event counts as a failure (backoff)."""
_CHANGES: dict[str, EventType] = {"ADDED": "ADDED", "MODIFIED": "MODIFIED", "DELETED": "DELETED"}


class WatchError(Exception):
    """An ERROR event other than 410 on the watch stream."""


def backoff(failures: int) -> float:
    """Seconds to wait after `failures` consecutive failures: capped exponential, jittered."""
    ceiling: float = min(BACKOFF_MAX, BACKOFF_BASE * 2.0 ** min(failures - 1, 16))
    return ceiling * random.uniform(0.5, 1.0)


def key(obj: Mapping[str, Any]) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def compact_version(version: object) -> int | str:
    """A resourceVersion as the reflector remembers it: an int when the text is a canonical decimal
    (etcd's revisions; 28 bytes instead of a 50-odd-byte string per object), else the text itself.

    Only text that `str(int(text))` gives back becomes an int, so two versions compare equal
    compacted exactly when their texts do: resourceVersions are opaque strings to clients.
    """
    text = str(version)
    if (0 < len(text) <= MAX_VERSION_DIGITS and text.isascii() and text.isdigit()
            and (text[0] != "0" or text == "0")):
        return int(text)
    return text


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status", None)
    return status if isinstance(status, int) else None


def _stub(object_key: str) -> Json:
    """The object a relist reports as DELETED: only its namespace and name are known."""
    namespace, _, name = object_key.rpartition("/")
    return {"metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}


class Reflector:
    """Follows one resource from a generated client's list function, delivering changes to `emit`.

    Exactly one of `emit` and `emit_keyed` (which also receives the object's key) is given. It is
    called from the reflector's thread only; if it raises, the stream counts as failed and the
    event comes again (after backoff), so it should not raise for an event it cannot use.
    """

    def __init__(self, kind: str, lister: Callable[..., Any], *, emit: Emit | None = None,
                 emit_keyed: KeyedEmit | None = None, stop: threading.Event,
                 label_selector: str | None = None, field_selector: str | None = None,
                 watch_seconds: int = deadlines.WATCH_SECONDS, page_size: int = 500,
                 beat: Callable[[], None] | None = None) -> None:
        if emit is not None and emit_keyed is None:
            self._emit = _unkeyed(emit)
        elif emit_keyed is not None and emit is None:
            self._emit = emit_keyed
        else:
            raise TypeError("Reflector takes exactly one of emit and emit_keyed")
        self.kind = kind
        self._lister = lister
        self._stop = stop
        self._selectors = {"label_selector": label_selector, "field_selector": field_selector}
        self._watch_seconds = watch_seconds
        self._page_size = page_size
        self._beat = beat if beat is not None else _nothing
        """Called at every turn: each attempt to list or watch, each page, each watch event (a
        `federation.watchdog` heartbeat; a quiet watch turns only when it ends, `deadlines.watch`)."""
        self._version: str | None = None
        self._known: dict[str, int | str] = {}  # key -> compact_version(resourceVersion), as last emitted
        self._response: Any = None
        self.synced = threading.Event()
        """Set after the first complete list (just before SYNCED is emitted)."""

    def run(self) -> None:
        """List and watch until the stop event is set."""
        failures = 0
        while not self._stop.is_set():
            self._beat()
            try:
                if self._version is None:
                    self._relist()
                started = time.monotonic()
                if self._watch() or time.monotonic() - started >= QUICK_END:
                    failures = 0
                elif not self._stop.is_set():  # ended at once with nothing: do not spin on it
                    failures += 1
                    self._stop.wait(backoff(failures))
            except errors.Gone:
                LOG.info("watch expired, relisting", extra={"kind": self.kind})
                self._version = None
            except Exception as error:
                if self._stop.is_set():
                    break
                if _status(error) == 410:
                    self._version = None
                    continue
                failures += 1
                if failures & (failures - 1) == 0:  # 1st, 2nd, 4th, 8th ... failure: stay quiet
                    LOG.warning("watch interrupted",
                                extra={"kind": self.kind, "failures": failures,
                                       "error": str(error)[:300]})
                self._stop.wait(backoff(failures))

    def close(self) -> None:
        """Cut the current watch connection (after setting the stop event)."""
        response = self._response
        if response is None:
            return
        try:
            response.shutdown()
        except Exception as error:  # already closed, or an older urllib3
            LOG.debug("closing watch", extra={"kind": self.kind, "error": error})

    def _relist(self) -> None:
        """List everything; emit what changed since the last list or watch event, then SYNCED once."""
        seen: set[str] = set()
        try:
            for obj in self._pages():
                object_key = key(obj)
                version = compact_version((obj.get("metadata") or {}).get("resourceVersion"))
                seen.add(object_key)
                old = self._known.get(object_key)
                if old != version:
                    self._emit("ADDED" if old is None else "MODIFIED", object_key, obj)
                    self._known[object_key] = version  # an existing entry keeps its key string
            for object_key in [k for k in self._known if k not in seen]:  # in the order first seen
                self._emit("DELETED", object_key, _stub(object_key))
                del self._known[object_key]
        except BaseException:
            self._version = None  # failed part way (emit raised after the last page): list again
            raise
        if not self.synced.is_set():
            self.synced.set()
            self._emit("SYNCED", "", {})
        LOG.debug("listed", extra={"kind": self.kind, "version": self._version, "objects": len(seen)})

    def _pages(self) -> Iterator[Json]:
        """Every object, page by page; sets the list's resourceVersion at the end."""
        token: str | None = None
        version = ""
        while True:
            response = self._lister(limit=self._page_size, _continue=token, _preload_content=False,
                                    _request_timeout=deadlines.LIST, **self._selectors)
            body = json.loads(response.data)
            self._beat()
            yield from body.get("items") or ()
            meta = body.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            token = meta.get("continue") or None
            if not token:
                break
        self._version = version

    def _watch(self) -> int:
        """Emit events until the server ends the stream (timeoutSeconds) or the stop event; how
        many events (bookmarks included) arrived."""
        response = self._lister(
            watch=True, resource_version=self._version, allow_watch_bookmarks=True,
            timeout_seconds=self._watch_seconds, _preload_content=False,
            _request_timeout=deadlines.watch(self._watch_seconds), **self._selectors)
        self._response = response
        received = 0
        try:
            if self._stop.is_set():  # stopped before close() could see this response
                return received
            for event in _lines(response):
                received += 1
                self._beat()
                self._event(event)
                if self._stop.is_set():
                    break
            return received
        finally:
            self._response = None
            response.release_conn()

    def _event(self, event: Json) -> None:
        """One watch event: emit a change, remember its resourceVersion (bookmarks too)."""
        type_, obj = event.get("type"), event.get("object") or {}
        if type_ == "ERROR":
            if obj.get("code") == 410:
                raise errors.Gone("the watch's resourceVersion is too old", status=410)
            raise WatchError(f"{obj.get('code')}: {obj.get('message')}")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        change = _CHANGES.get(str(type_))
        if change is not None:
            object_key = key(obj)
            self._emit(change, object_key, obj)
            if change == "DELETED":
                self._known.pop(object_key, None)
            else:
                self._known[object_key] = compact_version(version)
        if version:
            self._version = str(version)


def _nothing() -> None:
    """The beat of a reflector nobody watches."""


def _unkeyed(emit: Emit) -> KeyedEmit:
    """`emit` called as a `KeyedEmit` (the key left out)."""

    def deliver(change: EventType, _key: str, obj: Json) -> None:
        emit(change, obj)

    return deliver


def _lines(response: Any) -> Iterator[Json]:
    """The JSON documents of a watch stream, one a line, however the chunks split them."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        *lines, buffer = (buffer + chunk).split(b"\n")
        for line in lines:
            if line.strip():
                yield json.loads(line)
    if buffer.strip():
        yield json.loads(buffer)
