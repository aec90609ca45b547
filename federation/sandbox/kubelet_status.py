"""What a kubelet would report for a pod on a simulated node: the node simulator's pure pod rule.

Why apart from the simulator's loops: this is the one place that decides what the sandbox's pods
look like to controllers (Ready for a ReplicaSet, Succeeded/Failed for a Job), and it is a pure
function of the pod and the clock, tested as such. Containers never run; the status says what
a kubelet would have written:

* a pod whose `restartPolicy` is `Always` (the default) runs forever: init containers completed,
  each container started after its startupProbe's initialDelaySeconds, ready after its
  readinessProbe's too, the pod Ready when every container is and every readiness gate is True;
* any other pod runs to completion: each container runs `sandbox.fedspread.io/run-seconds` (default
  3) and exits with `sandbox.fedspread.io/exit-code` (default 0); the pod then goes Succeeded (0) or
  Failed (not 0) with its containers terminated (`Completed` or `Error`), except that under
  `OnFailure` a container that fails restarts at once, over and over (its restartCount grows, its
  lastState holds the failure; a kubelet would back off between restarts, the sandbox does not),
  which is what a Job's backoffLimit counts for such pods.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from typing import Any

RUN_SECONDS = "sandbox.fedspread.io/run-seconds"
EXIT_CODE = "sandbox.fedspread.io/exit-code"
DEFAULT_RUN_SECONDS = 3.0
RESTART_SECONDS = 1.0
"""The shortest run of a container that fails and restarts (`OnFailure`): run-seconds 0 would spin."""
Json = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Completion:
    """How the containers of a pod that is not restarted for ever end."""

    seconds: float
    exit_code: int
    restarts: bool  # OnFailure and a failing exit code: the container runs again after each run


def stamp(moment: datetime.datetime | None = None, *, micro: bool = False) -> str:
    """An RFC 3339 time as the apiserver writes it (seconds, or microseconds for a Lease)."""
    moment = moment or datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def completion(pod: Json) -> Completion | None:
    """How the pod's containers end, from its annotations; None for a pod restarted for ever (Always).
    A value that is not a number (seconds: finite, >= 0; exit code: 0..255) is ignored for its default."""
    policy = pod["spec"].get("restartPolicy") or "Always"
    if policy == "Always":
        return None
    annotations = pod["metadata"].get("annotations") or {}
    try:
        seconds = float(annotations.get(RUN_SECONDS, DEFAULT_RUN_SECONDS))
    except ValueError:
        seconds = DEFAULT_RUN_SECONDS
    if not math.isfinite(seconds) or seconds < 0:
        seconds = DEFAULT_RUN_SECONDS
    try:
        code = int(annotations.get(EXIT_CODE, "0"))
    except ValueError:
        code = 0
    code = code if 0 <= code <= 255 else 0
    return Completion(seconds=seconds, exit_code=code, restarts=policy == "OnFailure" and code != 0)


def pod_status(pod: Json, *, now: datetime.datetime, pod_ip: str, host_ip: str) -> tuple[Json, float | None]:
    """What a kubelet reports for a bound pod at `now`, and in how many seconds that next changes
    (the module's docstring says what it reports). The apiserver sets qosClass on create."""
    spec, status, uid = pod["spec"], pod.get("status") or {}, pod["metadata"]["uid"]
    begun = status.get("startTime") if status.get("phase") == "Running" else None
    start = datetime.datetime.fromisoformat(begun.replace("Z", "+00:00")) if begun else now
    elapsed, at, ends = (now - start).total_seconds(), stamp(start), completion(pod)
    waits: list[float] = []
    runs, finished = 0, False  # runs: the failed runs before the current one (OnFailure)
    if ends is not None and ends.restarts:
        period = max(ends.seconds, RESTART_SECONDS)
        runs = int(elapsed // period)
        waits.append((runs + 1) * period - elapsed)
    elif ends is not None:
        finished = elapsed >= ends.seconds
        waits.extend([] if finished else [ends.seconds - elapsed])
    run_start = start + datetime.timedelta(seconds=runs * (max(ends.seconds, RESTART_SECONDS) if ends else 0))
    in_run = (now - run_start).total_seconds()

    def ended(code: int, began: datetime.datetime, cid: str, *, after: float) -> Json:
        return {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "startedAt": stamp(began),
                "finishedAt": stamp(began + datetime.timedelta(seconds=after)), "containerID": cid}

    def container(c: Json, init: bool) -> Json:
        image, cid = c.get("image") or "sim", f"sim://{uid}-{c['name']}"
        startup, readiness = (float((c.get(p) or {}).get("initialDelaySeconds") or 0)
                              for p in ("startupProbe", "readinessProbe"))
        entry = {"name": c["name"], "image": image, "imageID": f"sim://{image}", "containerID": cid,
                 "restartCount": 0 if init else runs}
        if init:
            return {**entry, "started": False, "ready": True,
                    "state": {"terminated": ended(0, start, cid, after=0)}}
        if finished and ends is not None:
            return {**entry, "started": False, "ready": False,
                    "state": {"terminated": ended(ends.exit_code, start, cid, after=ends.seconds)}}
        waits.extend(d - in_run for d in (startup, startup + readiness) if d > in_run)
        if runs and ends is not None:
            previous = run_start - datetime.timedelta(seconds=max(ends.seconds, RESTART_SECONDS))
            entry["lastState"] = {"terminated": ended(ends.exit_code, previous, cid, after=ends.seconds)}
        return {**entry, "started": in_run >= startup, "ready": in_run >= startup + readiness,
                "state": {"running": {"startedAt": stamp(run_start)}}}

    containers = [container(c, False) for c in spec["containers"]]
    have = {c["type"]: c for c in status.get("conditions") or []}
    ok = all(c["ready"] for c in containers)
    gated = ok and any(have.get(g["conditionType"], {}).get("status") != "True"
                       for g in spec.get("readinessGates") or [])
    phase = "Running" if not finished or ends is None else "Succeeded" if ends.exit_code == 0 else "Failed"
    unready = "PodCompleted" if phase == "Succeeded" else "ContainersNotReady"

    def condition(kind: str, value: bool, reason: str = "") -> Json:
        text, old = str(value), have.get(kind, {})
        return {"type": kind, "status": text, "lastProbeTime": None, "reason": None if value else reason,
                "lastTransitionTime": old["lastTransitionTime"] if old.get("status") == text else stamp(now)}

    return {
        "phase": phase, "hostIP": host_ip, "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": at,
        "conditions": [condition("Initialized", True), condition("PodScheduled", True),
                       condition("ContainersReady", ok, unready),
                       condition("Ready", ok and not gated, "ReadinessGatesNotReady" if gated else unready)],
        "containerStatuses": containers,
        "initContainerStatuses": [container(c, True) for c in spec.get("initContainers") or []],
    }, min(waits, default=None)


def signature(status: Json) -> tuple[Any, ...]:
    """The part of a pod status whose change needs a write."""
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    containers = [(c["name"], c.get("started"), c.get("ready"), c.get("restartCount"), *c.get("state", {}))
                  for c in status.get("containerStatuses", [])]
    return status.get("phase"), conditions.get("Ready"), conditions.get("ContainersReady"), *containers
