"""Writing what the coordinator decided back to the hub: spread, member and workload statuses.

Why its own module: status writes are the coordinator's only writes of hub objects (besides the
Events it records about them, federation.kube.events), and they must be cheap and safe under churn.

* Writes only when something changed: the current status is read first and compared with
  `status.status_changed` (order of conditions and sub-second times do not count), so a status
  already right costs a read, not a write, and does not wake every watcher of the object (and the
  status pass does not even ask for the read while the watch says nothing changed:
  `hub.held_statuses`).
* Optimistic concurrency: every patch carries the resourceVersion it was computed from, so a
  concurrent change (a user editing labels, another writer) yields 409 and the write is re-read
  and re-applied instead of silently racing. 409, 429 and 5xx are retried with tenacity, bounded
  attempts and jittered exponential backoff; anything else (404: the object is gone) is raised.
* Merge patches (RFC 7386) computed as a diff against what was read, so fields that disappeared
  from the new status are removed (null) rather than left behind.
* The hub has no workload controller, so the hub workload's status is ours to write: the
  aggregate of the members' workloads of its kind, so `kubectl get deploy` (`rs`, `sts`, `job`)
  on the hub tells the truth and `kubectl wait --for=condition=complete job/...` returns.
* A fence (`close`, then `wait_idle`): no write starts after the first, the one under way has
  ended after the second.
  A leader that gives its Lease up closes it before the release, so a status thread stalled
  somewhere (it cannot be joined) never writes over the next leader's statuses when it wakes.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import pydantic
import tenacity
from kubernetes import client
from kubernetes.client import exceptions

from federation.api import cluster as cluster_api
from federation.api import common
from federation.api import spread as spread_api
from federation.core import job_status
from federation.core import status as status_core
from federation.kube import deadlines

LOG = logging.getLogger(__name__)

Json = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
DEPLOYMENT_FIELDS = ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas",
                     "unavailableReplicas")
REPLICASET_FIELDS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")
STATEFULSET_FIELDS = ("replicas", "readyReplicas", "updatedReplicas")
JOB_FIELDS = ("active", "succeeded", "failed", "startTime", "completionTime", "conditions")
STATUS_FIELDS: Mapping[str, tuple[str, ...]] = {"Deployment": DEPLOYMENT_FIELDS,
                                                 "ReplicaSet": REPLICASET_FIELDS,
                                                 "StatefulSet": STATEFULSET_FIELDS,
                                                 "Job": JOB_FIELDS}
"""Per `targetRef.kind`, the hub workload's status fields the coordinator writes (a Job's are
`federation.core.job_status.to_status_dict`'s, not only counts)."""
WRITERS = 4
"""A status pass's writes run side by side on this many threads (`side_by_side`); the fence
(`close`, `wait_idle`) covers every one."""
_Item = TypeVar("_Item")
CLOSE_SECONDS = 2 * (deadlines.CONNECT + 2 * deadlines.READ)
"""`wait_idle` waits this long at most for the write under way: its read and its patch, each
connecting and reading twice at most (urllib3's one read retry, `deadlines.URLLIB3_RETRIES`)."""


@dataclasses.dataclass(frozen=True)
class _StatusApi:
    """The `/status` calls of one workload kind, and the name its writes are counted under."""

    counter: str
    read: Callable[..., Any]
    patch: Callable[..., Any]


class WriterClosed(Exception):
    """The writer was closed (`StatusWriter.close`): this process no longer writes statuses."""


def merge_patch(old: Any, new: Any) -> Any:
    """The RFC 7386 merge patch turning `old` into `new` (removed keys become None)."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return new
    patch: Json = {k: None for k in old if k not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = merge_patch(old[key], value)
    return patch


def _retriable(error: BaseException) -> bool:
    status = getattr(error, "status", None)
    if not isinstance(error, exceptions.ApiException) or not isinstance(status, int):
        return False
    return status in (409, 429) or status >= 500


class StatusWriter:
    """Writes statuses to the hub only when they changed, retrying conflicts by re-reading."""

    def __init__(self, api_client: client.ApiClient, *, attempts: int = 10, max_wait: float = 2.0) -> None:
        self._custom = client.CustomObjectsApi(api_client)
        self._apps = client.AppsV1Api(api_client)
        self._batch = client.BatchV1Api(api_client)
        self.attempts = attempts
        """Tries per write (the first included) before a 409/429/5xx is raised to the caller."""
        self._max_wait = max_wait
        self.writes: collections.Counter[str] = collections.Counter()
        """Patches applied, by kind ("spread", "cluster", "deployment", "replicaset")."""
        self.skips: collections.Counter[str] = collections.Counter()
        """Writes skipped because nothing changed, by kind."""
        self.retries: collections.Counter[str] = collections.Counter()
        """Attempts repeated after 409/429/5xx, by kind."""
        self.failures: collections.Counter[str] = collections.Counter()
        """Writes given up, by kind: retries exhausted, or an error not worth retrying (a 404, the
        object being gone, is not counted: nothing was there to write)."""
        self._fence = threading.Condition()
        """Guards `closed` and `_in_flight`: an attempt starts only while not closed, and
        `wait_idle` waits until no attempt runs. Writes of different objects may run side by side
        (the status pass writes with a few threads)."""
        self._in_flight = 0
        self.closed = False

    def close(self) -> None:
        """Write nothing more: no attempt (nor retry) starts after this; `wait_idle` waits for the
        ones under way. Safe to call twice."""
        with self._fence:
            self.closed = True

    def wait_idle(self, timeout: float = CLOSE_SECONDS) -> bool:
        """Wait for the attempts under way, if any (`timeout`); False when one still runs then."""
        with self._fence:
            if not self._fence.wait_for(lambda: self._in_flight == 0, timeout=timeout):
                LOG.warning("a status write still runs after the writer was closed",
                            extra={"waited": timeout})
                return False
        return True

    def _count(self, counter: collections.Counter[str], kind: str) -> None:
        with self._fence:  # counted from several threads
            counter[kind] += 1

    # --- public writes -------------------------------------------------------------------------

    def write_spread(self, key: str, status: spread_api.FederatedSpreadStatus, *,
                     applied: Callable[[Json], None] | None = None) -> bool:
        """Set a FederatedSpread's status (`namespace/name`); True when a patch was applied, and
        then `applied` is given the object as read before the patch (its old status, its uid)."""
        namespace, _, name = key.partition("/")
        args = (common.API_GROUP, common.API_VERSION, namespace, spread_api.PLURAL, name)

        def read() -> Json:
            return self._raw(self._custom.get_namespaced_custom_object_status(*args, _preload_content=False,
                _request_timeout=deadlines.CALL))

        def patch(body: Json) -> None:
            self._custom.patch_namespaced_custom_object_status(*args, body, _content_type=MERGE_PATCH,
                _request_timeout=deadlines.CALL)

        return self._write_model("spread", key, read=read, patch=patch, new=status, applied=applied)

    def write_member_cluster(self, name: str, status: cluster_api.MemberClusterStatus) -> bool:
        """Set a MemberCluster's status; True when a patch was applied."""
        args = (common.API_GROUP, common.API_VERSION, cluster_api.PLURAL, name)

        def read() -> Json:
            return self._raw(self._custom.get_cluster_custom_object_status(*args, _preload_content=False,
                _request_timeout=deadlines.CALL))

        def patch(body: Json) -> None:
            self._custom.patch_cluster_custom_object_status(*args, body, _content_type=MERGE_PATCH,
                _request_timeout=deadlines.CALL)

        return self._write_model("cluster", name, read=read, patch=patch, new=status)

    def write_workload_status(self, kind: str, namespace: str, name: str, fields: Mapping[str, Any], *,
                              observed: bool = True) -> bool:
        """Set a hub workload's replica counts, and with `observed` (every member's controller has
        observed the current template: `core.status.observed_everywhere`) its observedGeneration;
        without, the observedGeneration written before stays, so `kubectl rollout status` on the hub
        waits. `kind` is its `targetRef.kind` (Deployment, ReplicaSet, StatefulSet; a Job's go to
        `write_job_status`); True when patched."""
        api = self._status_api(kind)
        unknown = set(fields) - set(STATUS_FIELDS[kind])
        if unknown:
            raise ValueError(f"not {kind} status replica fields: {sorted(unknown)}")
        if kind == "Job":
            return self.write_job_status(namespace, name, fields)

        def attempt() -> bool:
            obj = self._raw(api.read(name, namespace, _preload_content=False,
                                     _request_timeout=deadlines.CALL))
            old = obj.get("status") or {}
            wanted: Json = {k: int(v) for k, v in fields.items()}
            generation = (obj.get("metadata") or {}).get("generation")
            if isinstance(generation, int) and observed:
                wanted["observedGeneration"] = generation
            if all(old.get(k, 0) == v for k, v in wanted.items()):
                self._count(self.skips, api.counter)
                return False
            body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "status": wanted}
            api.patch(name, namespace, body, _content_type=MERGE_PATCH, _request_timeout=deadlines.CALL)
            self._count(self.writes, api.counter)
            return True

        return self._retrying(api.counter, f"{namespace}/{name}", attempt)

    def write_job_status(self, namespace: str, name: str, fields: Mapping[str, Any]) -> bool:
        """Set a hub Job's status (`job_status.to_status_dict`: every key, null or empty where
        unknown); True when patched. A hub Job whose status already says Complete or Failed is left
        as it is (`job_status.finished`: a finished Job stays finished, as the Job controller keeps
        it). An absent key, a null, 0 and an empty list compare equal (the apiserver omits them)."""
        api = self._status_api("Job")

        def attempt() -> bool:
            obj = self._raw(api.read(name, namespace, _preload_content=False,
                                     _request_timeout=deadlines.CALL))
            old = obj.get("status") or {}
            same = all((old.get(k) or None) == (v or None) for k, v in fields.items())
            if job_status.finished(old) or same:
                self._count(self.skips, api.counter)
                return False
            body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                    "status": dict(fields)}
            api.patch(name, namespace, body, _content_type=MERGE_PATCH, _request_timeout=deadlines.CALL)
            self._count(self.writes, api.counter)
            return True

        return self._retrying(api.counter, f"{namespace}/{name}", attempt)

    def clear_workload_status(self, kind: str, namespace: str, name: str) -> bool:
        """Remove what `write_workload_status` wrote (a spread of this workload was deleted:
        fedspread no longer vouches for any replica); True when patched, False when there was
        nothing to remove or the workload is gone. A finished hub Job's status is kept (Complete or
        Failed is a result, not a count of running replicas)."""
        api = self._status_api(kind)
        written = (*STATUS_FIELDS[kind], *(() if kind == "Job" else ("observedGeneration",)))

        def attempt() -> bool:
            try:
                obj = self._raw(api.read(name, namespace, _preload_content=False,
                                         _request_timeout=deadlines.CALL))
            except exceptions.ApiException as error:
                if error.status == 404:
                    return False
                raise
            present = [k for k in written if k in (obj.get("status") or {})]
            if not present or (kind == "Job" and job_status.finished(obj.get("status") or {})):
                self._count(self.skips, api.counter)
                return False
            body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                    "status": dict.fromkeys(present)}
            api.patch(name, namespace, body, _content_type=MERGE_PATCH, _request_timeout=deadlines.CALL)
            self._count(self.writes, api.counter)
            return True

        return self._retrying(api.counter, f"{namespace}/{name}", attempt)

    def write_deployment_status(self, namespace: str, name: str, fields: Mapping[str, int]) -> bool:
        """`write_workload_status` of a hub Deployment."""
        return self.write_workload_status("Deployment", namespace, name, fields)

    def _status_api(self, kind: str) -> _StatusApi:
        if kind == "Deployment":
            return _StatusApi("deployment", self._apps.read_namespaced_deployment_status,
                              self._apps.patch_namespaced_deployment_status)
        if kind == "ReplicaSet":
            return _StatusApi("replicaset", self._apps.read_namespaced_replica_set_status,
                              self._apps.patch_namespaced_replica_set_status)
        if kind == "StatefulSet":
            return _StatusApi("statefulset", self._apps.read_namespaced_stateful_set_status,
                              self._apps.patch_namespaced_stateful_set_status)
        if kind == "Job":
            return _StatusApi("job", self._batch.read_namespaced_job_status,
                              self._batch.patch_namespaced_job_status)
        raise ValueError(f"no hub status is written for kind {kind!r}")

    # --- internals -----------------------------------------------------------------------------

    @staticmethod
    def _raw(response: Any) -> Json:
        body: Json = json.loads(response.data)
        return body

    def _write_model(self, kind: str, key: str, *, read: Callable[[], Json], patch: Callable[[Json], None],
                     new: pydantic.BaseModel, applied: Callable[[Json], None] | None = None) -> bool:
        wanted: Json = new.model_dump(mode="json", by_alias=True, exclude_none=True)
        model = type(new)

        def attempt() -> bool:
            obj = read()
            raw_old = obj.get("status")
            try:
                old = model.model_validate(raw_old) if isinstance(raw_old, dict) else None
            except pydantic.ValidationError:
                old = None  # unreadable: overwrite it
            if not status_core.status_changed(old, new):
                self._count(self.skips, kind)
                return False
            body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                    "status": merge_patch(raw_old if isinstance(raw_old, dict) else {}, wanted)}
            patch(body)
            self._count(self.writes, kind)
            if applied is not None:
                applied(obj)
            return True

        return self._retrying(kind, key, attempt)

    def _retrying(self, kind: str, key: str, attempt: Callable[[], bool]) -> bool:
        def note(state: tenacity.RetryCallState) -> None:
            self._count(self.retries, kind)
            error = state.outcome.exception() if state.outcome else None
            LOG.debug("status write retry",
                      extra={"kind": kind, "key": key, "attempt": state.attempt_number,
                             "status": getattr(error, "status", None)})

        def fenced() -> bool:
            with self._fence:
                if self.closed:
                    raise WriterClosed(f"{kind} {key}: the status writer is closed")
                self._in_flight += 1
            try:
                return attempt()
            finally:
                with self._fence:
                    self._in_flight -= 1
                    self._fence.notify_all()

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_retriable),
            stop=tenacity.stop_after_attempt(self.attempts),
            wait=tenacity.wait_random_exponential(multiplier=0.05, max=self._max_wait),
            before_sleep=note,
            reraise=True,
        )
        try:
            result: bool = retrying(fenced)
        except WriterClosed:
            raise
        except Exception as error:
            if getattr(error, "status", None) != 404:
                self._count(self.failures, kind)
            raise
        return result


def side_by_side(work: Callable[[_Item], None], items: Sequence[_Item], *,
                 stopped: Callable[[], bool]) -> None:
    """`work` on every item, by up to `WRITERS` threads: each write is a round trip or two to the
    hub, and one after another a status pass of a thousand new spreads took half a minute. The
    first item goes alone, and the rest not at all once `stopped()` (the hub did not answer): a
    hub that does not answer ends a pass after one deadline, not after `WRITERS` of them."""
    if not items:
        return
    work(items[0])
    rest = items[1:]
    if not rest or stopped():
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(WRITERS, len(rest)),
                                               thread_name_prefix="status-write") as pool:
        for done in [pool.submit(work, item) for item in rest]:
            done.result()  # a bug in one item's work is the caller's, as when they ran in turn
