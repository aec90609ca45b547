"""Kubernetes Events (events.k8s.io/v1) from the coordinator and the agents, never in their way.

Why a recorder of our own: `kubectl describe` shows an object's Events, and operators look there
first ("why did my pods move?"). But an Event is a side note: writing one must never slow, block or
break the decision it reports, and an event storm (a flapping cluster, thousands of pods) must not
flood the apiserver. So, as client-go's EventRecorder:

* `record` only puts the occurrence on a bounded queue and returns; one background thread writes.
  A full queue drops the occurrence and counts it (`dropped`), as does a 403 for an Event in a
  namespace being deleted (`NAMESPACE_TERMINATING`: the Event would go with the namespace).
* The same (object, reason, note) again within `event_series.SERIES_WINDOW` bumps the existing
  Event's `series` (count, lastObservedTime) with a merge patch instead of creating an object.
* Token buckets, one per object and one overall, gate every write: a new Event beyond them is
  dropped (`limited`); a series bump beyond them is kept in memory and written when a token is
  free (the count is never lost, only late).
* Every call has a deadline (`_request_timeout`); 429, 5xx and connection errors are retried with
  tenacity (bounded, jittered) over a client of its own (a copy of the caller's configuration,
  two connections, urllib3's retries off); every failure is counted and logged quietly (one
  warning a minute at most), never raised into the caller.
* What it did is counted by outcome (`OUTCOMES`, `outcomes()`): the coordinator and the agent
  export the counts as `..._events_total{outcome}` (`federation.event_metrics`).

The rules (keys, series decisions, buckets, bodies) are pure, in `federation.kube.event_series`.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import datetime
import json
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import tenacity
import urllib3
from kubernetes import client
from kubernetes.client import exceptions

from federation import clock as clock_mod
from federation.kube import event_series as es
from federation.kube.event_series import NORMAL, WARNING, ObjectRef

__all__ = ["AGENT", "COORDINATOR", "NORMAL", "OUTCOMES", "WARNING", "EventRecorder", "Limits", "ObjectRef",
           "instance_name"]

LOG = logging.getLogger(__name__)

COORDINATOR = "fedspread.io/coordinator"
"""`reportingController` of the coordinator's Events (its `reportingInstance`: `instance_name()`)."""
AGENT = "fedspread.io/agent"
"""`reportingController` of an agent's Events (its `reportingInstance`: the member cluster's name)."""
MERGE_PATCH = "application/merge-patch+json"
IDLE_SECONDS = 1.0
"""The worker looks at series waiting for a token at least this often."""
PRUNE_SECONDS = 60.0
WARN_EVERY_SECONDS = 60.0
CREATED, UPDATED, DROPPED, LIMITED, FAILED = "created", "updated", "dropped", "limited", "failed"
OUTCOMES = (CREATED, UPDATED, DROPPED, LIMITED, FAILED)
NAMESPACE_TERMINATING = "NamespaceTerminating"
"""The cause of the apiserver's 403 for an object created in a namespace being deleted: the Event
is dropped (its namespace goes, and the Event with it), not a failure to report."""
"""What the recorder counts: a new Event written; a repeat folded into an existing Event's series
(deduplicated), its count written; an occurrence not queued (queue full, or the recorder closed);
a new Event refused by the token buckets; a write that failed after its retries."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """How much the recorder may write. The per-object bucket is client-go's spam filter (a burst
    of 25, then one every 5 minutes); the overall one caps the whole process."""

    queue_size: int = 1000
    per_object_burst: float = 25.0
    per_object_rate: float = 1 / 300
    overall_burst: float = 100.0
    overall_rate: float = 5.0
    timeout: float = 5.0
    """Seconds each API call may take."""
    attempts: int = 3
    """Tries per write (the first included) on 429, 5xx and connection errors."""
    max_wait: float = 2.0


def _own_client(api_client: client.ApiClient) -> client.ApiClient:
    """A client like `api_client` with its own small pool and no urllib3 retries: Events never
    take a connection the caller needs, and tenacity is their one retry policy (urllib3's own
    would multiply the attempts and log a warning for each)."""
    settings = copy.deepcopy(api_client.configuration)
    settings.retries = False
    settings.connection_pool_maxsize = 2
    return client.ApiClient(settings)


def instance_name(environ: Mapping[str, str] | None = None) -> str:
    """This process's name for `reportingInstance`: $POD_NAME (the Downward API), else the host name."""
    found = (os.environ if environ is None else environ).get("POD_NAME", "").strip()
    return found or socket.gethostname()


def _retriable(error: BaseException) -> bool:
    if isinstance(error, exceptions.ApiException):
        status = error.status if isinstance(error.status, int) else 0
        return status == 429 or status >= 500
    return isinstance(error, (urllib3.exceptions.HTTPError, OSError))


class EventRecorder:
    """Writes Events for one reporting controller/instance; `record` never blocks nor raises."""

    def __init__(self, api_client: client.ApiClient, *, controller: str, instance: str,
                 limits: Limits = Limits(), clock: clock_mod.Clock = clock_mod.utcnow,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._events = client.EventsV1Api(_own_client(api_client))
        self.controller, self.instance = controller, instance
        self.limits = limits
        self._clock, self._monotonic = clock, monotonic
        self._queue: queue.Queue[es.Occurrence | threading.Event | None] = queue.Queue(limits.queue_size)
        self._series: dict[es.DedupKey, es.Series] = {}
        self._waiting: dict[es.DedupKey, es.Series] = {}
        """Series whose last bumps wait for a token."""
        self._buckets: dict[tuple[str, str, str, str], es.TokenBucket] = {}
        self._overall = es.TokenBucket(limits.overall_rate, limits.overall_burst)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._closed = False
        self._pruned = monotonic()
        self._warned = float("-inf")
        self.counts: collections.Counter[str] = collections.Counter()
        """By outcome (`OUTCOMES`); an outcome not met yet is absent (`outcomes()` lists them all)."""

    # --- the caller's side ---------------------------------------------------------------------

    def record(self, regarding: ObjectRef, *, reason: str, note: str, type: es.EventType = NORMAL,
               action: str) -> bool:
        """Queue an Event about `regarding`; False when it was dropped (queue full or closed)."""
        if self._closed:
            self.counts[DROPPED] += 1
            return False
        occurrence = es.Occurrence(regarding=regarding, reason=reason, note=note, type=type, action=action)
        self._ensure_worker()
        try:
            self._queue.put_nowait(occurrence)
        except queue.Full:
            self.counts[DROPPED] += 1
            return False
        return True

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until everything queued before this call is handled; False on timeout."""
        done = threading.Event()
        self._ensure_worker()
        try:
            self._queue.put(done, timeout=timeout)
        except queue.Full:
            return False
        return done.wait(timeout)

    def outcomes(self) -> dict[str, int]:
        """Every outcome's count so far (0 for those not met yet), for metrics."""
        counts = dict(self.counts)  # one C-level copy: the worker may count meanwhile
        return {outcome: counts.get(outcome, 0) for outcome in OUTCOMES}

    def close(self, timeout: float = 5.0) -> bool:
        """Stop the worker after what is queued (within `timeout`); later records are dropped.
        True when the worker has ended (nothing more is written), False if it still writes."""
        self._closed = True
        thread = self._thread
        if thread is None or not thread.is_alive():
            return True
        with contextlib.suppress(queue.Full):  # then the worker, a daemon thread, dies with the process
            self._queue.put(None, timeout=timeout)
        thread.join(timeout)
        return not thread.is_alive()

    def _ensure_worker(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="events", daemon=True)
                self._thread.start()

    # --- the worker ------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            try:
                item: es.Occurrence | threading.Event | None = self._queue.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                if self._closed:
                    return
                item = threading.Event()  # idle: look at the series waiting for a token
            if item is None:
                self._write_waiting()
                return
            try:
                if isinstance(item, es.Occurrence):
                    self._handle(es.clean(item))
                self._write_waiting()
                self._prune()
            except Exception as error:  # a bug here must not end the worker
                self._failed("event worker", error)
            finally:
                if isinstance(item, threading.Event):
                    item.set()

    def _handle(self, occurrence: es.Occurrence) -> None:
        key, now = es.dedup_key(occurrence), self._clock()
        series = self._series.get(key)
        if series is not None and es.next_step(series, now=now) == es.UPDATE:
            es.observe(series, now=now)
            self._update(occurrence, series)
            return
        if not self._admit(occurrence):
            self.counts[LIMITED] += 1
            return
        created = self._create(occurrence, now=now)
        if created is not None:
            self._series[key] = created

    def _admit(self, occurrence: es.Occurrence) -> bool:
        now = self._monotonic()
        limits = self.limits
        bucket = self._buckets.setdefault(
            es.object_key(occurrence), es.TokenBucket(limits.per_object_rate, limits.per_object_burst))
        return es.admit(bucket, self._overall, now=now)

    def _create(self, occurrence: es.Occurrence, *, now: datetime.datetime) -> es.Series | None:
        namespace = es.event_namespace(occurrence.regarding)
        name = es.event_name(occurrence, first_seen=now)
        body = es.event_body(occurrence, name=name, namespace=namespace, now=now,
                             controller=self.controller, instance=self.instance)
        try:
            self._call(lambda: self._events.create_namespaced_event(
                namespace, cast(Any, body), _request_timeout=self.limits.timeout, _preload_content=False))
        except Exception as error:
            self._failed(f"create event {namespace}/{name}", error)
            return None
        self.counts[CREATED] += 1
        return es.Series(occurrence=occurrence, name=name, namespace=namespace, first=now, last=now)

    def _update(self, occurrence: es.Occurrence, series: es.Series) -> None:
        """Write the series' count if a token allows (else it waits for `_write_waiting`)."""
        key = es.dedup_key(occurrence)
        if not self._admit(occurrence):
            self._waiting[key] = series
            return
        self._waiting.pop(key, None)
        patch = es.series_patch(series)
        try:
            self._call(lambda: self._events.patch_namespaced_event(
                series.name, series.namespace, patch, _content_type=MERGE_PATCH,
                _request_timeout=self.limits.timeout, _preload_content=False))
        except exceptions.ApiException as error:
            if error.status == 404:  # the apiserver expired it (events live an hour): start anew
                self._series.pop(key, None)
                created = self._create(occurrence, now=series.last)
                if created is not None:
                    self._series[key] = created
                return
            self._failed(f"update event {series.namespace}/{series.name}", error)
        except Exception as error:
            self._failed(f"update event {series.namespace}/{series.name}", error)
        else:
            self.counts[UPDATED] += 1
        series.written = series.count  # after a failure too: the next occurrence writes the count

    def _write_waiting(self) -> None:
        """Write the series bumps that waited for a token, as far as tokens allow."""
        for key, series in list(self._waiting.items()):
            if self._series.get(key) is not series:  # replaced by a newer Event of the same key
                del self._waiting[key]
                continue
            self._update(series.occurrence, series)

    def _prune(self) -> None:
        """Forget series past their window and full buckets (they would change nothing)."""
        now = self._monotonic()
        if now - self._pruned < PRUNE_SECONDS:
            return
        self._pruned = now
        wall = self._clock()
        for done in [k for k, s in self._series.items()
                     if s.written >= s.count and es.next_step(s, now=wall) == es.CREATE]:
            del self._series[done]
        for idle in [k for k, b in self._buckets.items() if b.full(now)]:
            del self._buckets[idle]

    def _call(self, call: Callable[[], Any]) -> Any:
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_retriable),
            stop=tenacity.stop_after_attempt(self.limits.attempts),
            wait=tenacity.wait_random_exponential(multiplier=0.2, max=self.limits.max_wait),
            reraise=True)
        response = retrying(call)
        data = getattr(response, "data", b"")
        return json.loads(data) if data else None

    def _failed(self, what: str, error: BaseException) -> None:
        status = getattr(error, "status", None)
        if status == 403 and NAMESPACE_TERMINATING in str(getattr(error, "body", "") or ""):
            self.counts[DROPPED] += 1  # its namespace is going away, and the Event with it
            LOG.debug("event dropped: its namespace is being deleted", extra={"what": what})
            return
        self.counts[FAILED] += 1
        reason = str(getattr(error, "reason", "") or error).strip().splitlines()[:1]
        fields = {"what": what, "status": status, "controller": self.controller, "instance": self.instance,
                  "reason": reason[0][:200] if reason else type(error).__name__}
        now = self._monotonic()
        if now - self._warned >= WARN_EVERY_SECONDS:
            self._warned = now
            LOG.warning("event not written (further failures within a minute are logged at debug)",
                        extra=fields)
        else:
            LOG.debug("event not written", extra=fields)

