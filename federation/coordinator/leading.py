"""A coordinator that acts only while it holds the hub's Lease: standby, leader, exit on loss.

Why a wrapper and not a mode of `process.CoordinatorProcess`: the simplest design that can never
have two writers is to not start the coordinator at all until it leads. The standby is a
constructed `CoordinatorProcess` (its placement backend ready, Ray joined) that serves only
/metrics and the health-only port (NOT_SERVING for "" and the services, SERVING for "liveness",
which the pod's readiness asks) and binds no gRPC or webhook port: no agent stream, no SDK call,
no webhook decision reaches it (nor does the Service, which selects the leader's label). It
watches the hub all along but applies and writes nothing (`hub.warm_events` keeps the newest
event per object). When it wins the Lease it `start()`s as a coordinator that starts alone, but
from those events instead of a new listing: the World is built from them through the one path,
the placements recorded in the spreads' status are the starting point (do no harm:
nothing that runs is moved), `mark_hub_synced`, then it serves, and labels its pod
(`hub.pod_label`): the Service selects that label, so only the leader is reached.

A leader that fails to renew for the renew deadline stops at once (servers, agent streams,
statuses, loops) and `run` returns `LOST_EXIT_CODE`, so `fedspread coordinator` exits and the
kubelet restarts the container as a new standby (client-go's OnStoppedLeading). A clean stop
(SIGTERM) stops the coordinator first, then releases the Lease, so a standby takes over at its
next round instead of after the lease duration.
"""

from __future__ import annotations

import logging
import signal
import threading

from federation.coordinator import process as process_mod
from federation.coordinator.hub import leader, pod_label

log = logging.getLogger("fedspread.coordinator.leading")

LOST_EXIT_CODE = 1
"""`run`'s answer when the Lease was lost: the process exits with it and restarts as a standby."""
POLL_SECONDS = 0.2


class LeaderRun:
    """Run `coordinator` while `elector` says it leads; `run()` until a signal or a lost Lease."""

    def __init__(self, coordinator: process_mod.CoordinatorProcess, elector: leader.LeaderElector, *,
                 label: pod_label.LeaderLabel | None = None) -> None:
        """`label`: this pod's leader label (the Service routes to it); None: no pod to label."""
        self.coordinator = coordinator
        self.elector = elector
        self.label = label
        self._stop = threading.Event()

    def standby(self) -> None:
        """Check the hub, serve health (NOT_SERVING) and metrics, campaign; CoordinatorError on
        problems the user can fix (as `CoordinatorProcess.start`)."""
        process_mod.probe_hub(self.coordinator.api)
        self.coordinator.observe()
        self.coordinator.warm()  # watch the hub now, so leading begins from it without listing
        if self.label is not None:
            self.label.mark(False)  # a restarted container's pod may still carry it
        self.elector.start()
        log.info("standing by for the lease", extra={"identity": self.elector.identity,
                                                    "lease": self.elector.settings.name,
                                                    "namespace": self.elector.settings.namespace})

    def run(self) -> int:
        """Stand by, lead when elected, until SIGTERM/SIGINT (0) or the Lease is lost (`LOST_EXIT_CODE`)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self._stop.set())
        try:
            self.standby()
            if not self._wait(self.elector.leading):
                return self._finish()
            if self.elector.lost.is_set():
                return self._finish()
            self.coordinator.start()
            if self._wait(self.coordinator.hub_synced) and self.label is not None:
                self.label.mark(True)
            self._wait(self.elector.lost)
        except process_mod.CoordinatorError:
            self._finish()
            raise
        return self._finish()

    def stop(self) -> None:
        """Ask `run` to stop cleanly (what SIGTERM does)."""
        self._stop.set()

    def _wait(self, event: threading.Event) -> bool:
        """Until `event`, a stop, or a lost Lease; True when `event` came."""
        while not self._stop.is_set():
            if event.is_set():
                return True
            if self.elector.lost.is_set():
                return False
            self._stop.wait(POLL_SECONDS)
        return event.is_set()

    def _finish(self) -> int:
        lost = self.elector.lost.is_set()
        if lost:
            self.coordinator.stop()  # stop acting at once: servers, agent streams, statuses, loops
            self.elector.stop()
            if self.label is not None:
                self.label.mark(False, attempts=1)
            return LOST_EXIT_CODE
        if self.label is not None and self.elector.leading.is_set():
            self.label.mark(False)  # the Service stops sending new connections here
        self.coordinator.stop()
        self.elector.release()  # only then give the Lease up: never two writers
        return 0
