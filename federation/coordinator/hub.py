"""Watching the hub: FederatedSpreads, MemberClusters and Deployments, as typed events.

Why: the coordinator's World must follow the hub without missing a change and without a restart
losing anything. Each resource is listed, then watched from the list's resourceVersion (bookmarks
keep it fresh, so a stream timeout or a dropped connection costs nothing); only `410 Gone` forces a
relist, and a relist reports the objects that vanished meanwhile as DELETED. Other errors
(apiserver restart, network) are retried forever with capped, jittered backoff and logged quietly.

The pattern is the agent's reflector (`agents/controller/reflector.py`); federation may not import
agents, so it is restated here, smaller, around one emit function.

Events are emitted under one lock, so a consumer sees them in one order across the three streams;
`on_event` should be quick (enqueue). A spread that fails our validation (the CRD schema cannot
express every rule) does not stop the watcher: its event carries the problems, so the coordinator
can report `Valid=False`. Spread events also carry the spread's target Deployment as last seen,
so `apply_to_world` works whichever of the two the hub reports first.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

from kubernetes import client

from federation.api import cluster as cluster_api
from federation.api import common, problems
from federation.api import spread as spread_api
from federation.coordinator import assignments
from federation.coordinator import world as world_model

LOG = logging.getLogger(__name__)

Json = dict[str, Any]
Kind = Literal["spread", "cluster", "deployment"]
EventType = Literal["ADDED", "MODIFIED", "DELETED", "SYNCED"]
BACKOFF_BASE = 0.5
BACKOFF_MAX = 30.0
CONNECT_TIMEOUT = 10.0
LIST_TIMEOUT = 120.0
QUICK_END = 1.0
"""A watch ending sooner than this without any event counts as a failure (backoff)."""


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    """What the coordinator needs of a MemberCluster."""

    name: str
    labels: dict[str, str]
    taints: tuple[common.Taint, ...]


@dataclasses.dataclass(frozen=True)
class DeploymentInfo:
    """A hub Deployment: its `spec.replicas` and the trimmed object (no status, stable metadata)."""

    namespace: str
    name: str
    replicas: int | None
    template: dict[str, Any]

    @property
    def key(self) -> str:
        """`namespace/name`."""
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True)
class HubEvent:
    """One change seen on the hub; SYNCED (empty key) marks the end of a kind's first list."""

    kind: Kind
    type: EventType
    key: str = ""
    spread: spread_api.FederatedSpread | None = None
    problems: tuple[problems.Problem, ...] = ()
    generation: int | None = None
    cluster: ClusterInfo | None = None
    deployment: DeploymentInfo | None = None
    target: DeploymentInfo | None = None
    """For spread events: the Deployment its targetRef names, as last seen (None if not seen)."""

    @property
    def valid(self) -> bool:
        """False for an object that failed validation (see `problems`)."""
        return not self.problems


def backoff(failures: int) -> float:
    """Seconds to wait after `failures` consecutive failures: capped exponential, jittered."""
    ceiling: float = min(BACKOFF_MAX, BACKOFF_BASE * 2.0 ** min(failures - 1, 16))
    return ceiling * random.uniform(0.5, 1.0)


def _key(obj: Json) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


class _Gone(Exception):
    """The resourceVersion fell out of the apiserver's window (HTTP 410): list again."""


class _Stream:
    """List, then watch, one resource; delivers (type, object) pairs to `emit`."""

    def __init__(self, kind: Kind, lister: Callable[..., Any], *, emit: Callable[[Kind, str, Json], None],
                 stop: threading.Event, watch_seconds: int) -> None:
        self.kind = kind
        self._lister = lister
        self._emit = emit
        self._stop = stop
        self._watch_seconds = watch_seconds
        self._version: str | None = None
        self._known: dict[str, str] = {}  # key -> resourceVersion
        self._response: Any = None
        self.synced = threading.Event()

    def run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                if self._version is None:
                    self._relist()
                started = time.monotonic()
                if self._watch() or time.monotonic() - started >= QUICK_END:
                    failures = 0
                else:  # ended at once with nothing: do not spin on it
                    failures += 1
                    self._stop.wait(backoff(failures))
            except _Gone:
                LOG.info("watch expired, relisting kind=%s", self.kind)
                self._version = None
            except Exception as error:
                if self._stop.is_set():
                    break
                if getattr(error, "status", None) == 410:
                    self._version = None
                    continue
                failures += 1
                if failures & (failures - 1) == 0:  # 1st, 2nd, 4th, 8th ... failure only
                    LOG.warning("hub watch interrupted kind=%s failures=%d error=%s",
                                self.kind, failures, str(error)[:300])
                self._stop.wait(backoff(failures))

    def close(self) -> None:
        response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception as error:  # already closed
                LOG.debug("closing hub watch kind=%s error=%s", self.kind, error)

    def _relist(self) -> None:
        seen: set[str] = set()
        for obj in self._pages():
            key, version = _key(obj), str((obj.get("metadata") or {}).get("resourceVersion"))
            seen.add(key)
            old = self._known.get(key)
            if old != version:
                self._known[key] = version
                self._emit(self.kind, "ADDED" if old is None else "MODIFIED", obj)
        for key in set(self._known) - seen:
            del self._known[key]
            namespace, _, name = key.rpartition("/")
            gone: Json = {"metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}
            self._emit(self.kind, "DELETED", gone)
        if not self.synced.is_set():
            self.synced.set()
            self._emit(self.kind, "SYNCED", {})
        LOG.debug("listed kind=%s version=%s objects=%d", self.kind, self._version, len(seen))

    def _pages(self) -> Iterator[Json]:
        token: str | None = None
        version = ""
        while True:
            response = self._lister(limit=500, _continue=token, _preload_content=False,
                                    _request_timeout=(CONNECT_TIMEOUT, LIST_TIMEOUT))
            body = json.loads(response.data)
            yield from body.get("items") or ()
            meta = body.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            token = meta.get("continue") or None
            if not token:
                break
        self._version = version

    def _watch(self) -> int:
        response = self._lister(
            watch=True, resource_version=self._version, allow_watch_bookmarks=True,
            timeout_seconds=self._watch_seconds, _preload_content=False,
            _request_timeout=(CONNECT_TIMEOUT, self._watch_seconds + 30))
        self._response = response
        received = 0
        try:
            buffer = b""
            for chunk in response.stream(amt=None, decode_content=False):
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in filter(bytes.strip, lines):
                    received += 1
                    self._event(json.loads(line))
                if self._stop.is_set():
                    break
            return received
        finally:
            self._response = None
            response.release_conn()

    def _event(self, event: Json) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone()
            raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            key = _key(obj)
            if kind == "DELETED":
                self._known.pop(key, None)
            else:
                self._known[key] = str(version)
            self._emit(self.kind, str(kind), obj)
        if version:
            self._version = str(version)


def parse_spread(obj: Json) -> tuple[spread_api.FederatedSpread | None, tuple[problems.Problem, ...]]:
    """The validated spread, or None and every problem with it."""
    try:
        return problems.validate(spread_api.FederatedSpread, obj, what=_key(obj)), ()
    except problems.InvalidInput as error:
        return None, tuple(error.problems)


def parse_cluster(obj: Json) -> tuple[ClusterInfo | None, tuple[problems.Problem, ...]]:
    """Name, labels and taints of a MemberCluster, or None and its problems."""
    try:
        member = problems.validate(cluster_api.MemberCluster, obj, what=_key(obj))
    except problems.InvalidInput as error:
        return None, tuple(error.problems)
    return ClusterInfo(member.metadata.name, dict(member.metadata.labels), tuple(member.spec.taints)), ()


def parse_deployment(obj: Json) -> DeploymentInfo:
    """A hub Deployment's replicas and its trimmed object."""
    meta = obj.get("metadata") or {}
    replicas = (obj.get("spec") or {}).get("replicas")
    return DeploymentInfo(
        namespace=str(meta.get("namespace")), name=str(meta.get("name")),
        replicas=replicas if isinstance(replicas, int) else None,
        template=assignments.trimmed_template(obj),
    )


class HubWatcher:
    """Three list-then-watch threads on the hub, delivering HubEvents to `on_event`."""

    def __init__(self, api_client: client.ApiClient, on_event: Callable[[HubEvent], None], *,
                 watch_seconds: int = 300) -> None:
        custom = client.CustomObjectsApi(api_client)
        apps = client.AppsV1Api(api_client)
        self._on_event = on_event
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._deployments: dict[str, DeploymentInfo] = {}
        self.errors = 0
        """How many times `on_event` raised (logged and survived)."""
        listers: dict[Kind, Callable[..., Any]] = {
            "spread": functools.partial(custom.list_cluster_custom_object, common.API_GROUP,
                                        common.API_VERSION, spread_api.PLURAL),
            "cluster": functools.partial(custom.list_cluster_custom_object, common.API_GROUP,
                                         common.API_VERSION, cluster_api.PLURAL),
            "deployment": apps.list_deployment_for_all_namespaces,
        }
        self._streams = [_Stream(kind, lister, emit=self._emit, stop=self._stop, watch_seconds=watch_seconds)
                         for kind, lister in listers.items()]
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start the three watch threads (daemons)."""
        for stream in self._streams:
            thread = threading.Thread(target=stream.run, name=f"hub-watch-{stream.kind}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching: cut the streams and join the threads."""
        self._stop.set()
        for stream in self._streams:
            stream.close()
        for thread in self._threads:
            thread.join(timeout)

    def wait_synced(self, timeout: float) -> bool:
        """Whether every kind finished its first list within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        return all(s.synced.wait(max(0.0, deadline - time.monotonic())) for s in self._streams)

    @property
    def alive(self) -> bool:
        """Every watch thread is running."""
        return bool(self._threads) and all(t.is_alive() for t in self._threads)

    def _emit(self, kind: Kind, type_: str, obj: Json) -> None:
        with self._lock:
            event = self._convert(kind, type_, obj)
            try:
                self._on_event(event)
            except Exception:
                self.errors += 1
                LOG.exception("hub event handler failed kind=%s type=%s key=%s", kind, type_, event.key)

    def _convert(self, kind: Kind, type_: str, obj: Json) -> HubEvent:
        event_type: EventType = type_  # type: ignore[assignment]
        if type_ == "SYNCED":
            return HubEvent(kind, event_type)
        key = _key(obj)
        if kind == "deployment":
            info = parse_deployment(obj)
            if type_ == "DELETED":
                self._deployments.pop(key, None)
            else:
                self._deployments[key] = info
            return HubEvent(kind, event_type, key, deployment=info)
        if type_ == "DELETED":
            return HubEvent(kind, event_type, key)
        if kind == "cluster":
            member, found = parse_cluster(obj)
            return HubEvent(kind, event_type, key, cluster=member, problems=found)
        item, found = parse_spread(obj)
        generation = (obj.get("metadata") or {}).get("generation")
        target_name = item.spec.target_ref.name if item is not None else None
        namespace = key.partition("/")[0]
        target = self._deployments.get(f"{namespace}/{target_name}") if target_name else None
        return HubEvent(kind, event_type, key, spread=item, problems=found,
                        generation=generation if isinstance(generation, int) else None, target=target)


def apply_to_world(world: world_model.World, event: HubEvent) -> set[str]:
    """Apply one hub event to the World; the spread keys it affects.

    An invalid spread keeps its last valid version in the World (nothing is torn down because of
    a typo); the coordinator reports the problems in the spread's status instead.
    """
    if event.type == "SYNCED":
        return set()
    if event.kind == "spread":
        if event.type == "DELETED":
            return world.delete_spread(event.key)
        if event.spread is None:
            return set()
        affected = world.upsert_spread(event.spread)
        if event.target is not None:
            affected |= world.set_target(event.key, replicas=event.target.replicas,
                                         template=event.target.template)
        return affected
    if event.kind == "cluster":
        if event.type == "DELETED":
            return world.delete_cluster(event.key)
        if event.cluster is None:
            return set()
        return world.upsert_cluster(event.cluster.name, labels=event.cluster.labels,
                                    taints=event.cluster.taints)
    info = event.deployment
    if info is None:
        return set()
    targeted: set[str] = set()
    for entry in world.spreads():
        if entry.key.partition("/")[0] == info.namespace and entry.spec.target_ref.name == info.name:
            if event.type == "DELETED":
                targeted |= world.set_target(entry.key, replicas=None, template=None)
            else:
                targeted |= world.set_target(entry.key, replicas=info.replicas, template=info.template)
    return targeted
