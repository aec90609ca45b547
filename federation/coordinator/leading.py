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

A leader that stalls gives up (`model.stall` decides when: a critical loop — hub events, timer —
not turning for the watchdog's limit plus `leader_stall_grace_seconds`, judged once the hub is
listed, and only while the hub answers this process). It logs one error line, counts it
(`leader_stall_stepdowns_total`), and steps down in the order that never makes two writers: it
halts the coordinator (`CoordinatorProcess.halt`: servers, agent streams, the status writer's
fence, Events) while still renewing, so nobody else acts before it has stopped acting; then it
stops renewing, removes its leader label and releases the Lease, so the standby takes over at its
next round; then it stops the rest (loops, Ray — a stalled thread may hold this up, never the
takeover). `run` returns `LOST_EXIT_CODE`, as on a lost lease. Should the halt itself not end
within `HALT_SECONDS`, the leader stops renewing without releasing: the Lease expires by itself.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable

from federation.coordinator import process as process_mod
from federation.coordinator.hub import leader, pod_label
from federation.coordinator.model import stall

log = logging.getLogger(__name__)

LOST_EXIT_CODE = 1
"""`run`'s answer when the Lease was lost: the process exits with it and restarts as a standby."""
POLL_SECONDS = 0.2
HALT_SECONDS = 60.0
"""A leader giving up renews while the coordinator halts, this long at most (each part of the halt
has its deadline; a status write on a hub that barely answers may take longer): past it, it stops
renewing and leaves the Lease to expire."""


class LeaderRun:
    """Run `coordinator` while `elector` says it leads; `run()` until a signal, a lost Lease or a stall."""

    def __init__(self, coordinator: process_mod.CoordinatorProcess, elector: leader.LeaderElector, *,
                 label: pod_label.LeaderLabel | None = None, judge: stall.StallJudge | None = None) -> None:
        """`label`: this pod's leader label (the Service routes to it); None: no pod to label.
        `judge`: when a stalled leader gives up; by default over the coordinator's watchdog, with
        its `leader_stall_grace_seconds`."""
        self.coordinator = coordinator
        self.elector = elector
        self.label = label
        self.judge = judge if judge is not None else stall.StallJudge(
            coordinator.watchdog, grace=coordinator.settings.leader_stall_grace_seconds)
        self.stalled: stall.Stall | None = None
        """Set when this leader gave up because it stalled."""
        self._stop = threading.Event()
        self._excused = False

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
        """Stand by, lead when elected, until SIGTERM/SIGINT (0), or the Lease is lost or given up
        on a stall (`LOST_EXIT_CODE`)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self._stop.set())
        try:
            self.standby()
            if not self._wait(self.elector.leading):
                return self._finish()
            if self.elector.lost.is_set():
                return self._finish()
            self.coordinator.start()
            if self._wait(self.coordinator.hub_synced):
                self.judge.begin()
                if self.label is not None:
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
        """Until `event`, a stop, a lost Lease or a stall to give up for; True when `event` came."""
        while not self._stop.is_set():
            if event.is_set():
                return True
            if self.elector.lost.is_set() or self._judge():
                return False
            self._stop.wait(POLL_SECONDS)
        return event.is_set()

    def _judge(self) -> bool:
        """Whether this leader gives up now (logged once, counted)."""
        if self.stalled is not None:
            return True
        found = self.judge.verdict(self._hub_answers)
        if found is None:
            if self.judge.hub_away and not self._excused:
                log.warning("a critical loop is stalled, but the hub does not answer either: keeping "
                            "the lease (a standby would meet the same hub)",
                            extra={"loops": ",".join(s.name for s in self.coordinator.watchdog.snapshot()
                                                     if s.stalled and s.critical)})
            self._excused = self.judge.hub_away
            return False
        self.stalled = found
        log.error("leader stalled: giving up the lease so that the standby takes over", extra={
            "identity": self.elector.identity, "loops": ",".join(found.loops),
            "stalled_seconds": round(found.seconds, 1), "grace_seconds": self.judge.grace})
        self.coordinator.metrics.stall_stepdowns.inc()
        return True

    def _hub_answers(self) -> bool:
        try:
            process_mod.probe_hub(self.coordinator.api)
        except process_mod.CoordinatorError:
            return False
        return True

    def _give_up(self) -> int:
        """Halt (renewing meanwhile), stop renewing, unlabel, release, then stop the rest."""
        halted = _within(self.coordinator.halt, seconds=HALT_SECONDS)
        self.elector.stop()
        if self.label is not None:
            self.label.mark(False, attempts=1)
        if halted is None:  # the rest of `stop` would wait on the same part
            log.error("the coordinator did not stop acting in time; the lease is left to expire",
                      extra={"waited_seconds": HALT_SECONDS})
            return LOST_EXIT_CODE
        if halted:
            self.elector.release()
        else:
            log.warning("the coordinator did not stop cleanly (a write may still be under way); the "
                        "lease is left to expire")
        self.coordinator.stop()
        return LOST_EXIT_CODE

    def _finish(self) -> int:
        if self.stalled is not None:
            return self._give_up()
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


def _within(call: Callable[[], bool], *, seconds: float) -> bool | None:
    """`call()` on a thread of its own; its answer, or None when it did not end within `seconds`
    (or raised: logged)."""
    answer: list[bool] = []

    def run() -> None:
        try:
            answer.append(call())
        except Exception:
            log.exception("stopping the coordinator failed")

    thread = threading.Thread(target=run, name="coordinator-halt", daemon=True)
    thread.start()
    thread.join(seconds)
    return answer[0] if answer else None
