"""Recovery benchmark: an agent killed, until its replicas' replacements run in the survivors.

Why beside `failover`: that benchmark measures quota re-convergence — from the tick that declares a
cluster lost to the survivors' in-memory quotas — with detection left out (a setting) and pods not
started. A user sees something else: a member's agent dies, and some time later the spread again
runs all its replicas where agents answer. This measures that, end to end, on the sandbox:

* the demo's federation (`federation.demo.environment`: real control planes, the coordinator
  placing in-process, one real agent per member over mTLS) with two members of one region, room
  for every replica in either;
* a spread of `replicas` over the region (`Balance`, `clusterLostSeconds` stated in the result),
  every pod Running and Ready first;
* the agent of one member SIGKILLed (no goodbye: it cannot deregister), then polled every 0.1 s:
  when the coordinator's placement (the SDK) no longer gives the dead member replicas
  (`placed_s`: detection included), and when the survivor runs as many Ready pods of the spread as
  the spread has replicas (`running_s`: the replacements scheduled, started and Ready).

The dead member's pods keep running unmanaged (do no harm: a lost cluster is never told to delete);
they are not counted. Detection counts from the victim's last heartbeat, not from the kill, so
`placed_s` can be a heartbeat interval under `clusterLostSeconds`; `after_placement_s` is the
rest: from the new placement to the replacements Ready.
"""

from __future__ import annotations

import os
import pathlib
import signal
import tempfile
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from federation import sdk
from federation.api import common, names
from federation.demo import environment, story
from federation.kube import clients
from federation.sandbox import nodesim

Report = Callable[[str], None]
Json = dict[str, Any]

VICTIM, SURVIVOR = "rec-a", "rec-b"
NAMESPACE, NAME = "shop", "web"
LOST_SECONDS = 10
"""The spread's `failover.clusterLostSeconds`: the detection part of the figure, a setting."""
QUICK, FULL = 8, 40
"""Replicas: each member has room for all of them."""
POLL_SECONDS = 0.1
TIMEOUT = 300.0
REQUEST_TIMEOUT = 10.0


def members(replicas: int) -> list[environment.MemberPlan]:
    """Two members of region eu, each with room for every replica (100m each, 4-cpu nodes)."""
    nodes = max(2, replicas // 20 + 1)
    return [environment.MemberPlan.of_groups(name, "eu", [nodesim.NodeGroup(
        prefix=f"{name}-node", count=nodes, allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
        labels={"topology.kubernetes.io/region": "eu"})]) for name in (VICTIM, SURVIVOR)]


def spread() -> Json:
    """The FederatedSpread: one subset, the region, balanced; failover after LOST_SECONDS."""
    return {"apiVersion": f"{common.API_GROUP}/{common.API_VERSION}", "kind": "FederatedSpread",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME},
                     "subsets": [{"name": "eu", "clusterSpread": "Balance",
                                  "clusterSelector": {"matchLabels": {names.REGION_LABEL: "eu"}}}],
                     "failover": {"clusterLostSeconds": LOST_SECONDS}}}


def deployment(replicas: int) -> Json:
    """The hub Deployment (100m, 64Mi per pod)."""
    labels = {"app": NAME}
    container = {"name": "main", "image": "web:1",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def ready_pods(api: client.ApiClient) -> int:
    """Pods of the spread in one member that are Running and Ready and not being deleted."""
    found = client.CoreV1Api(api).list_namespaced_pod(
        NAMESPACE, label_selector=f"{names.SPREAD_LABEL}={NAME}", _request_timeout=REQUEST_TIMEOUT)
    count = 0
    for pod in found.items:
        meta, state = pod.metadata, pod.status
        if meta is None or meta.deletion_timestamp is not None or state is None or state.phase != "Running":
            continue
        count += any(c.type == "Ready" and c.status == "True" for c in state.conditions or ())
    return count


def wait(what: str, check: Callable[[], bool], *, federation: environment.Federation) -> float:
    """Poll `check` until true; the monotonic time it first was. TimeoutError after TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        failed = federation.failed()  # the killed agent is in `stopped`: not a failure
        if failed:
            raise environment.DemoError("a process of the federation stopped:\n" + "\n".join(failed))
        time.sleep(POLL_SECONDS)
    raise TimeoutError(f"{what}: not within {TIMEOUT:.0f} s")


def placed_on(placements: sdk.PlacementClient, cluster: str) -> int:
    """Replicas the coordinator's placement gives `cluster`."""
    return int(placements.placement(f"{NAMESPACE}/{NAME}").clusters.get(cluster, 0))


def measure(replicas: int, *, report: Report, directory: pathlib.Path | None = None) -> Json:
    """The benchmark with `replicas` on a federation of its own, stopped before this returns."""
    with tempfile.TemporaryDirectory(prefix="fedspread-bench-recovery-") as temporary:
        where = directory or pathlib.Path(temporary)
        with environment.Federation(where, members=members(replicas), report=report, ray=False) as federation:
            hub = clients.api_client(pathlib.Path(federation.kubeconfig("hub")))
            apis = {name: clients.api_client(pathlib.Path(federation.kubeconfig(name)))
                    for name in (VICTIM, SURVIVOR)}
            story.create_workload(hub, NAMESPACE, spread=spread(), deployment=deployment(replicas))
            with federation.placement_client(timeout=REQUEST_TIMEOUT) as placements:
                wait("every replica Ready", lambda: sum(ready_pods(api) for api in apis.values()) == replicas,
                     federation=federation)
                before = {name: placed_on(placements, name) for name in apis}
                report(f"{replicas} replicas Ready: {before}; killing the agent of {VICTIM}")
                victim = federation.agents[VICTIM]
                federation.stopped.add(VICTIM)
                killed = time.monotonic()
                os.killpg(victim.popen.pid, signal.SIGKILL)
                placed = wait("the placement moves the lost member's replicas",
                              lambda: placed_on(placements, VICTIM) == 0, federation=federation)
                running = wait("the survivor runs every replica",
                               lambda: ready_pods(apis[SURVIVOR]) >= replicas, federation=federation)
                unmanaged = ready_pods(apis[VICTIM])
    found = {"replicas": replicas, "moved_replicas": before[VICTIM], "cluster_lost_seconds": LOST_SECONDS,
             "placed_s": round(placed - killed, 2), "running_s": round(running - killed, 2),
             "after_placement_s": round(running - placed, 2),
             "unmanaged_ready_pods": unmanaged,
             "method": "agent SIGKILLed; placed_s until the SDK's placement gives the lost member 0 "
                       "(detection included); running_s until the survivor has Ready pods for every "
                       "replica (polled every 0.1 s); the lost member's pods keep running, uncounted"}
    report(f"{before[VICTIM]} replicas moved: placed {found['placed_s']} s, running {found['running_s']} s "
           f"after the kill (clusterLostSeconds {LOST_SECONDS})")
    return found


def run(*, quick: bool, report: Callable[[str], None]) -> dict[str, Any]:
    """The runner's entry point (bench/run.py)."""
    return measure(QUICK if quick else FULL, report=report)
