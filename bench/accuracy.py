"""Placement accuracy: does each replica land in a (subset, cluster) where it can run?

The claim: with the Adaptive strategy the coordinator takes into each subset only what fits on its
nodes — fitting the pod the subset really creates, its patch applied — so a replica placed
somewhere runs there, and overflow goes to the next subset at once instead of through the agent's
reschedule (a pod stuck Pending for `rescheduleCriticalSeconds`, deleted, its subset marked, a
replacement in the next subset). What a wrong fit costs is exactly what this counts: replicas
that had to be rescheduled, and pods that waited Pending.

How it is measured, on a sandbox of its own (stopped before `run` returns):

1. the demo's federation (`federation.demo.environment`: sandbox, coordinator placing in-process
   with `--no-ray`, one agent per member, mTLS) with the members of `accuracy_scenario`: mixed node
   pools in `acc-mixed`, plain nodes in `acc-plain`;
2. the other workloads created in the members; the spread waits until they run and the
   coordinator's inventory shows their requests;
3. the hub Deployment (template 500m/512Mi) and its FederatedSpread (four subsets whose patches
   change requests and node selectors), then `kubectl scale` in steps; after each step the
   benchmark waits until every replica runs and none is Pending or terminating for 3 s
   (`settled`), or STEP_TIMEOUT;
4. every pod of the spread is followed by a watch (`accuracy_watch`) from creation to deletion;
   the figures are `accuracy_pods.summarize` of those histories (the definitions are there).

Result keys (bench/README.md): accuracy_pct (and `share`, the same as a fraction), `stuck_pending`
(= stuck_with_room), placed, accurate, rescheduled, waiting, unassigned,
pending_over_10s, stuck_with_room, pending p50/p99/max, measured_s (the steps), wall_s (with the
sandbox), steps (per step: replicas, settled, seconds, the coordinator's placement, what ran where
and the room each subset had left), and details (the scenario, the pods that waited).
"""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile
import time
import typing
from collections.abc import Callable
from typing import Any

from kubernetes import client

from bench import accuracy_pods, accuracy_watch
from bench import accuracy_scenario as world
from federation import sdk
from federation.demo import environment, story
from federation.kube import clients

Report = Callable[[str], None]
Json = dict[str, Any]

STEP_TIMEOUT = 240.0
"""Seconds a step may take to settle; a step that does not is recorded (settled: false), not fatal."""
QUIET_SECONDS = 3.0
POLL_SECONDS = 0.5
READY_TIMEOUT = 120.0
"""Seconds for the other workloads to run and the coordinator to see them."""
REQUEST_TIMEOUT = 10.0


class Run:
    """One measurement on a started federation: the other workloads, the spread, the steps."""

    def __init__(self, federation: environment.Federation, scenario: world.Scenario, *,
                 report: Report) -> None:
        self.federation, self.scenario, self.report = federation, scenario, report
        self.hub = clients.api_client(pathlib.Path(federation.kubeconfig("hub")))
        self.watch = accuracy_watch.PodWatch(
            {m.name: federation.kubeconfig(m.name) for m in scenario.members},
            namespace=world.NAMESPACE, spread=world.NAME, subsets=[s.room() for s in scenario.subsets])

    def other_workloads(self) -> None:
        """Create the workloads that are not ours; wait until they run and the coordinator sees them."""
        for member in self.scenario.members:
            api = clients.api_client(pathlib.Path(self.federation.kubeconfig(member.name)))
            story.ensure_namespace(api, world.OTHERS)
            for workload in (w for w in self.scenario.workloads if w.cluster == member.name):
                body = typing.cast(client.V1Deployment, workload.deployment())  # a dict body is sent as is
                client.AppsV1Api(api).create_namespaced_deployment(world.OTHERS, body,
                                                                   _request_timeout=REQUEST_TIMEOUT)
        wanted = {m.name: sum(w.replicas for w in self.scenario.workloads if w.cluster == m.name)
                  for m in self.scenario.members}
        cpu = {m.name: self.scenario.requested_cpu(m.name) for m in self.scenario.members}
        deadline = time.monotonic() + READY_TIMEOUT
        with self.federation.placement_client(timeout=REQUEST_TIMEOUT) as placements:
            while True:
                running = {n: self.watch.running(cluster=n, namespace=world.OTHERS) for n in wanted}
                seen = {c.name: accuracy_pods.milli_units({"cpu": c.requested.get("cpu", "0")})["cpu"]
                        for c in placements.clusters()}
                if running == wanted and all(seen.get(n, 0) >= cpu[n] for n in cpu):
                    self.report(f"other workloads running: {running}; the coordinator sees them")
                    return
                self._alive()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"other workloads: {running} running of {wanted}, the coordinator "
                                       f"sees requested cpu {seen} of {cpu} (milli)")
                time.sleep(POLL_SECONDS)

    def steps(self) -> list[Json]:
        """Create the spread at the first step's size, scale through the rest; each step's record."""
        records = []
        with self.federation.placement_client(timeout=REQUEST_TIMEOUT) as placements:
            for number, replicas in enumerate(self.scenario.size.steps):
                started = time.monotonic()
                if number == 0:
                    story.create_workload(self.hub, world.NAMESPACE, spread=self.scenario.spread(),
                                          deployment=self.scenario.deployment(replicas))
                else:
                    story.scale_target(self.hub, world.NAMESPACE, world.NAME, replicas=replicas)
                settled = self.settle(replicas)
                record = {"replicas": replicas, "settled": settled,
                          "seconds": round(time.monotonic() - started, 1),
                          "placement": _placement(placements), "running": self.watch.by_subset(),
                          "room_left": self.watch.room_left()}
                self.report(f"step {number + 1}: {replicas} replicas "
                            f"{'settled' if settled else 'NOT settled'} in {record['seconds']} s, "
                            f"running {record['running']}")
                records.append(record)
        return records

    def settle(self, replicas: int) -> bool:
        """Until every replica runs and none is Pending or terminating for QUIET_SECONDS (True), or
        STEP_TIMEOUT (False); judges the pods that reach PENDING_LIMIT meanwhile."""
        deadline, quiet_since = time.monotonic() + STEP_TIMEOUT, None
        while time.monotonic() < deadline:
            self.watch.check()
            now = time.monotonic()
            if self.watch.counts() == (replicas, 0, 0):
                quiet_since = quiet_since or now
                if now - quiet_since >= QUIET_SECONDS:
                    return True
            else:
                quiet_since = None
            self._alive()
            time.sleep(POLL_SECONDS)
        return False

    def _alive(self) -> None:
        failed = self.federation.failed()
        if failed:
            raise environment.DemoError("a process of the federation stopped:\n" + "\n".join(failed))


def _placement(placements: sdk.PlacementClient) -> dict[str, dict[str, int]]:
    """The coordinator's placement of the spread: replicas per subset, per cluster (zeros left out)."""
    try:
        placed = placements.placement(f"{world.NAMESPACE}/{world.NAME}")
    except sdk.SpreadNotFound:
        return {}
    return {s.name: {c: n for c, n in s.clusters.items() if n} for s in placed.subsets}


def result(histories: list[accuracy_pods.PodHistory], *, end: float, steps: list[Json],
           scenario: world.Scenario) -> Json:
    """The result document of one run (bench/README.md names its keys)."""
    summary = accuracy_pods.summarize(histories, end=end)
    waited = [h for h in histories if accuracy_pods.pending_seconds(h, end=end) > accuracy_pods.PENDING_LIMIT]
    first = min((h.created for h in histories), default=end)
    return {
        "replicas": scenario.size.steps[-1],
        "accuracy_pct": round(summary.accuracy * 100, 2),
        "share": round(summary.accuracy, 4),
        "stuck_pending": summary.stuck_with_room,
        **{k: v for k, v in dataclasses.asdict(summary).items()
           if k not in ("accuracy", "pending_over_limit")},
        "pending_over_10s": summary.pending_over_limit,
        "steps": steps,
        "details": {
            "scenario": scenario.describe(),
            "waited": [{"pod": h.name, "cluster": h.cluster, "subset": h.subset,
                        "outcome": accuracy_pods.outcome(h),
                        "pending_s": round(accuracy_pods.pending_seconds(h, end=end), 1),
                        "at_s": round(h.created - first, 1), "room_elsewhere": list(h.room_elsewhere)}
                       for h in sorted(waited, key=lambda h: h.created)],
            "method": {
                "accurate": "became Running in the (subset, cluster) it was admitted to before any deletion",
                "rescheduled": "deleted before it ever ran (the run only scales up)",
                "pending": "first seen to Running, deletion or the end of the run (watch events, "
                           "this process's clock)",
                "stuck_with_room": "Pending > 10 s while another subset's cluster had a node with room for "
                                   "one of its pods beyond its own unbound ones, below its cap (may "
                                   "over-count, never under-count)",
                "settled": f"all replicas Running, none Pending or terminating, for {QUIET_SECONDS:.0f} s",
            },
        },
    }


def measure(size: world.Size, *, report: Report, directory: pathlib.Path | None = None) -> Json:
    """The benchmark at `size` on a federation of its own (in `directory`, or a temporary one),
    stopped before this returns."""
    scenario = world.scenario(size)
    wall = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fedspread-bench-accuracy-") as temporary:
        where = directory or pathlib.Path(temporary)
        with environment.Federation(where, members=scenario.members, report=report, ray=False) as federation:
            run = Run(federation, scenario, report=report)
            try:
                run.watch.start()
                run.other_workloads()
                began = time.monotonic()
                steps = run.steps()
                run.watch.check()
                end = time.monotonic()
                histories = run.watch.histories()
            finally:
                run.watch.stop()
    found = result(histories, end=end, steps=steps, scenario=scenario)
    found["measured_s"] = round(end - began, 1)
    found["wall_s"] = round(time.monotonic() - wall, 1)
    report(f"accuracy {found['accuracy_pct']} % of {found['placed']} placed, {found['rescheduled']} "
           f"rescheduled, {found['pending_over_10s']} Pending > 10 s, {found['stuck_with_room']} of them "
           f"while another subset had room")
    return found


def run(*, quick: bool, report: Callable[[str], None]) -> dict[str, Any]:
    """The accuracy benchmark: the quick or the full size of `accuracy_scenario`."""
    return measure(world.QUICK if quick else world.FULL, report=report)
