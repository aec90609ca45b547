"""Leader election on a `coordination.k8s.io/v1` Lease in the hub: the API calls around the decision.

Why here: two coordinator pods run for availability, and only one may act (place, write statuses,
serve agents). The rule is pure (`model.election.Candidate`, client-go's semantics); this module
reads the Lease, writes it conditionally on the resourceVersion it read (a conflict means another
candidate won the race), and tells the process when it started and when it stopped leading.

Every call has a deadline (`CALL_TIMEOUT`, and never past the renew deadline while leading). A
failed call is not retried on the spot: the next round, one retry period later, is the retry, and
the renew deadline bounds how long a leader keeps acting on failed renewals. `on_stopped` runs at
most once, from the election thread, when the lease is lost (not on `release`).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from kubernetes import client

from federation.coordinator.model import election
from federation.kube import event_series

log = logging.getLogger(__name__)

CALL_TIMEOUT = 5.0
"""Deadline of one Lease read or write (shortened to what is left of the renew deadline)."""
MIN_CALL_TIMEOUT = 0.5


@dataclasses.dataclass(frozen=True)
class LeaseSettings:
    """Where the Lease is and how the election is timed (`--leader-election-namespace`, `--lease-name`)."""

    namespace: str
    name: str
    timing: election.Timing = dataclasses.field(default_factory=election.Timing)


def default_identity() -> str:
    """POD_NAME (downward API) or the host name, plus a random suffix: a restarted container is a
    new candidate, never mistaken for the holder it replaced."""
    base = os.environ.get("POD_NAME") or socket.gethostname() or "coordinator"
    return f"{base}_{secrets.token_hex(4)}"


class LeaderElector:
    """Campaigns on a thread (`start`); `leading` is set while this process leads."""

    def __init__(
        self, api: client.ApiClient, settings: LeaseSettings, *, identity: str | None = None,
        on_stopped: Callable[[], None] = lambda: None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.identity = identity or default_identity()
        self.candidate = election.Candidate(self.identity, timing=settings.timing)
        self.leading = threading.Event()
        self.lost = threading.Event()
        self._leases = client.CoordinationV1Api(api)
        self._on_stopped = on_stopped
        self._monotonic = monotonic
        self._stop = threading.Event()
        self._lock = threading.Lock()
        """One Lease write at a time: a round of the thread, or `release`."""
        self._version: str | None = None
        self._acquired_at: str | None = None
        self._transitions = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="coordinator-leader-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop campaigning (does not release; `release` does)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=CALL_TIMEOUT * 2)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                if self._stop.is_set():
                    return
                try:
                    self.round()
                except Exception:  # one odd answer must not end the campaign
                    log.exception("leader election round failed")
            if self.lost.is_set():
                return
            self._stop.wait(self.candidate.wait_seconds(jitter_draw=random.random()))

    def round(self) -> None:
        """Read the Lease, decide, write if the decision says so; notice a lost lease."""
        if self.candidate.lost(now=self._monotonic()):
            self._lose("renew deadline passed without a successful renewal")
            return
        try:
            lease = self._leases.read_namespaced_lease(self.settings.name, self.settings.namespace,
                                                       _request_timeout=self._timeout())
        except client.ApiException as error:
            if error.status != 404:
                log.warning("cannot read the lease", extra={"status": error.status, "reason": error.reason})
                return
            lease = None
        except Exception as error:  # unreachable hub, timeout: next round
            log.warning("cannot read the lease", extra={"error": str(error)[:200]})
            return
        seen = _seen(lease)
        was_leading = self.candidate.leading
        action = self.candidate.decide(seen, now=self._monotonic())
        if was_leading and not self.candidate.leading:
            self._lose(f"the lease is held by {seen.holder if seen else '?'}")
            return
        if action is election.Action.STAND_BY:
            return
        if self._write(action, lease, seen) and self.candidate.wrote(now=self._monotonic()):
            log.info("leading", extra={"identity": self.identity, "lease": self.settings.name,
                                       "namespace": self.settings.namespace})
            self.leading.set()

    def release(self) -> None:
        """On a clean stop, after the process stopped acting: give the Lease up (holder "") so a
        standby takes over at its next round instead of after the lease duration."""
        self._stop.set()
        with self._lock:
            if not self.candidate.leading or self._version is None:
                return
            self.candidate.step_down()
            self.leading.clear()
            try:
                self._replace(holder="", version=self._version, lease_seconds=1)
                log.info("lease released", extra={"lease": self.settings.name})
            except Exception as error:  # it expires on its own
                log.warning("cannot release the lease; it expires by itself",
                            extra={"error": str(error)[:200]})

    # --- calls -----------------------------------------------------------------------------

    def _timeout(self) -> float:
        renewed = self.candidate.renewed_at
        if renewed is None:
            return CALL_TIMEOUT
        left = self.settings.timing.renew_deadline_seconds - (self._monotonic() - renewed)
        return max(MIN_CALL_TIMEOUT, min(CALL_TIMEOUT, left))

    def _write(self, action: election.Action, lease: Any, seen: election.Seen | None) -> bool:
        transitions = self.candidate.next_transitions(seen)
        now = event_series.micro_time(datetime.datetime.now(datetime.UTC))
        acquired = self._acquired_at if action is election.Action.RENEW and self._acquired_at else now
        try:
            if action is election.Action.CREATE:
                body = self._body(holder=self.identity, acquired=acquired, renewed=now,
                                  transitions=transitions, version=None)
                made = self._leases.create_namespaced_lease(self.settings.namespace, cast(Any, body),
                                                            _request_timeout=self._timeout())
            else:
                assert seen is not None
                made = self._replace(holder=self.identity, version=seen.version, acquired=acquired,
                                     transitions=transitions)
        except client.ApiException as error:
            if error.status in (409, 404):  # another candidate wrote first, or it was deleted
                log.info("lost the race for the lease", extra={"status": error.status})
            else:
                log.warning("cannot write the lease", extra={"status": error.status, "reason": error.reason})
            return False
        except Exception as error:
            log.warning("cannot write the lease", extra={"error": str(error)[:200]})
            return False
        self._version = made.metadata.resource_version if made.metadata else None
        self._acquired_at, self._transitions = acquired, transitions
        return True

    def _replace(self, *, holder: str, version: str, acquired: str | None = None,
                 transitions: int | None = None, lease_seconds: float | None = None) -> Any:
        now = event_series.micro_time(datetime.datetime.now(datetime.UTC))
        body = self._body(holder=holder, acquired=acquired or self._acquired_at or now, renewed=now,
                          transitions=self._transitions if transitions is None else transitions,
                          version=version, lease_seconds=lease_seconds)
        return self._leases.replace_namespaced_lease(
            self.settings.name, self.settings.namespace, cast(Any, body), _request_timeout=self._timeout())

    def _body(self, *, holder: str, acquired: str, renewed: str, transitions: int, version: str | None,
              lease_seconds: float | None = None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.settings.name, "namespace": self.settings.namespace}
        if version is not None:
            metadata["resourceVersion"] = version  # the write fails with 409 if it changed since
        seconds = lease_seconds if lease_seconds is not None else self.settings.timing.lease_seconds
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": max(1, round(seconds)),
                         "acquireTime": acquired, "renewTime": renewed, "leaseTransitions": transitions}}

    def _lose(self, why: str) -> None:
        self.leading.clear()
        self.candidate.step_down()
        if not self.lost.is_set():
            self.lost.set()
            log.error("leadership lost: stopping", extra={"identity": self.identity, "why": why})
            self._on_stopped()


def _seen(lease: Any) -> election.Seen | None:
    if lease is None:
        return None
    spec = lease.spec
    return election.Seen(holder=spec.holder_identity or "",
                         lease_seconds=float(spec.lease_duration_seconds or 0),
                         version=lease.metadata.resource_version, transitions=spec.lease_transitions or 0)
