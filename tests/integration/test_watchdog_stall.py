"""A coordinator loop that stops turning is seen: logged, and readiness NOT_SERVING until it turns.

The stall is real, not simulated: the test holds the coordinator's one lock (what a deadlock in
the facade would do), so the timer loop — which takes it every tick — stops turning. The
coordinator (in-process, on the sandbox hub) must then say so: a structured warning naming the
loop, its gRPC health NOT_SERVING for readiness (the timer is critical: it drives failover) while
`liveness` stays SERVING; once the lock is free again the loop turns, the recovery is logged once
and the coordinator is SERVING again. The metrics are read after the release (collecting them
takes the same lock). Waits are `waiting.wait_for` with generous deadlines, no timing asserted.
"""

from __future__ import annotations

import logging

import conftest
import grpc
import hubside
import pytest
import waiting

from federation.coordinator.services import health
from federation.sandbox import state
from tests.support import grpc_probes

TIMEOUT = 90.0


def test_a_stuck_timer_loop_makes_the_coordinator_unready_until_it_turns_again(
        sandbox: state.SandboxState, clusters: conftest.Clusters, local_ray: str,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="federation.watchdog")
    with hubside.running_coordinator(sandbox, clusters, members=[]) as process, \
            grpc.insecure_channel(f"127.0.0.1:{process.port}") as channel:
        waiting.wait_for(lambda: grpc_probes.status(channel) == "SERVING", timeout=TIMEOUT,
                         message="the coordinator never listed the hub")
        with process.coordinator.lock:  # the timer's next tick waits here
            waiting.wait_for(lambda: "timer" in process.watchdog.stalled(), timeout=TIMEOUT,
                             message=lambda: f"no timer stall reported: {process.watchdog.snapshot()}")
            waiting.wait_for(lambda: grpc_probes.status(channel) == "NOT_SERVING", timeout=TIMEOUT,
                             message="readiness stayed SERVING with the timer stalled")
            assert grpc_probes.status(channel, health.LIVENESS) == "SERVING", "a stall must not restart it"
        waiting.wait_for(lambda: grpc_probes.status(channel) == "SERVING", timeout=TIMEOUT,
                         message="readiness never came back after the timer turned again")
        assert process.metrics.value("loop_stalled", {"loop": "timer"}) == 0
        assert {s.name: s.stalls for s in process.watchdog.snapshot()}["timer"] == 1
    timer = [r.getMessage() for r in caplog.records if getattr(r, "loop", None) == "timer"]
    assert timer == ["loop stalled: no turn within its limit", "loop turns again after a stall"]
