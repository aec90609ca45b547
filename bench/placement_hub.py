"""One placement point with the hub, the status pass and TLS in: what the rest of the benchmark leaves out.

Why: every other placement point feeds spreads to the World in process and writes no status
(`bench.placement.LEFT_OUT`), which measures the placement engine but not what a user waits for
after `kubectl apply`: the hub apiserver storing the objects, the coordinator's watch of them,
one hub event applied (and published) at a time by its single hub-events worker, and the status
pass writing each changed spread's status. This point runs the whole coordinator process
(`CoordinatorProcess`, as `fedspread coordinator` wires it, in-process backend) against a real
hub apiserver (a sandbox hub: etcd, kube-apiserver, the CRDs), with the same stand-in agents as
the other points (`bench.placement_swarm`, one live stream per cluster; each Hello registers a
MemberCluster on the hub as a real agent's does). The spreads and their hub Deployments are
created through the hub's API, one after another, as a user's `kubectl apply` of many files would.

What one run records, all from the first create:

- `created_s`: every Deployment and FederatedSpread stored by the hub (the client's side);
- `placed_s`: every spread holds a placement in the coordinator (each came in on the watch);
- `delivered_s`: every agent holds every message those placements sent (as `delivered_s` of the
  other points: the stand-in agents' own clock);
- `status_s`: every spread's status on the hub shows its placement (`observedGeneration` of its
  generation and a `Placed` condition): what `kubectl get fsp` shows;
- `status_writes`: the status pass's writes meanwhile, and the coordinator's CPU time.

Compare with the point `base` of the same run (the same federation fed in process): the difference
is what the hub, the status pass and mutual TLS on every stream cost together (`base+tls` has
TLS alone). What it still leaves out is in its `left_out`: the stand-in agents share one client
certificate, so the check that a Hello names its certificate's cluster is off.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import urllib3
from kubernetes import client

from bench import placement_events, placement_swarm, placement_world
from bench.placement_world import Shape
from federation.api import common
from federation.certs import transport
from federation.coordinator import process as process_mod
from federation.coordinator import startup
from federation.sandbox import hubsetup, launcher

Report = Callable[[str], None]

HUB_POINT = "base+hub"
REQUEST_TIMEOUT = 30.0
CLEANUP_ERRORS = (client.ApiException, urllib3.exceptions.HTTPError, OSError)
"""What a clean-up delete may meet and go on past: the API's refusal, the connection's errors."""
POLL_SECONDS = 0.5
STATUS_POLL_SECONDS = 2.0
"""Listing every spread to check its status is itself load on the hub: not more often than this."""
DELIVERY_TIMEOUT = 3600.0
INVENTORY_TIMEOUT = 600.0
SYNC_TIMEOUT = 120.0
PLURAL = "federatedspreads"
LEFT_OUT = {"identity": "the stand-in agents share one client certificate, so the check that a "
                        "Hello names the cluster of its certificate is off"}
"""What this point still leaves out (recorded as the other points' `left_out`)."""


def deployment(index: int, shape: Shape, *, namespace: str) -> dict[str, Any]:
    """Spread `index`'s hub Deployment: its replicas and pod template (`placement_world.template`)."""
    name = placement_world.spread_name(index)
    labels = {"app": name}
    container = {"name": "app", "image": "app:1",
                 "resources": {"requests": placement_world.requests(index, shape)}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"replicas": placement_world.replicas_of(index), "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def federated_spread(index: int, shape: Shape, *, namespace: str) -> dict[str, Any]:
    """Spread `index` as the object a user applies (`placement_world.spread_fields`)."""
    fields = placement_world.spread_fields(index, shape)
    return {"apiVersion": common.GROUP_VERSION, "kind": "FederatedSpread",
            "metadata": {"name": fields["metadata"]["name"], "namespace": namespace},
            "spec": {**fields["spec"], "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                                     "name": fields["metadata"]["name"]}}}


def shown(item: dict[str, Any]) -> bool:
    """Whether a FederatedSpread's status shows its placement at its generation."""
    status, meta = item.get("status") or {}, item.get("metadata") or {}
    return (status.get("observedGeneration") == meta.get("generation")
            and any(c.get("type") == "Placed" for c in status.get("conditions") or ()))


def wait_until(predicate: Callable[[], bool], *, timeout: float, what: str,
               every: float = POLL_SECONDS) -> float:
    """Poll `predicate` until true; the monotonic time it was. TimeoutError after `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(every)
    return time.monotonic()


@contextlib.contextmanager
def hub_sandbox(report: Report) -> Iterator[pathlib.Path]:
    """A sandbox of a hub alone (etcd, kube-apiserver, the CRDs); its kubeconfig, stopped after."""
    with tempfile.TemporaryDirectory(prefix="fedspread-bench-hub-") as scratch:
        directory = pathlib.Path(scratch) / "sandbox"
        state = launcher.up(directory, members=[], profiles={}, crds=hubsetup.bundled_crds(), report=report)
        try:
            yield pathlib.Path(state.hub.kubeconfig)
        finally:
            launcher.down(directory, remove=False)


def measure(shape: Shape, *, report: Report) -> dict[str, Any]:
    """The point on a hub sandbox of its own (`measure_on`)."""
    with hub_sandbox(report) as kubeconfig:
        return measure_on(kubeconfig, shape, namespace_prefix="ns", report=report)


def measure_on(kubeconfig: pathlib.Path, shape: Shape, *, namespace_prefix: str,
               report: Report) -> dict[str, Any]:
    """One run on the hub of `kubeconfig`, whose namespaces `<prefix>0..` this creates; what it
    leaves there (spreads, MemberClusters `c0000...`) is removed after, with the coordinator stopped.
    Every agent stream is mutual TLS, as `fedspread coordinator` serves it
    (`placement_swarm.certificates`)."""
    api = startup.hub_client(kubeconfig)
    namespaces = [f"{namespace_prefix}{n}" for n in range(min(shape.spreads, placement_world.NAMESPACES))]
    try:  # what a failed run made is removed too: a namespace created before the one that failed
        for namespace in namespaces:
            client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}},
                                                   _request_timeout=REQUEST_TIMEOUT)
        return _served(kubeconfig, shape, namespaces=namespaces, report=report)
    finally:
        _clean(api, namespaces=namespaces, shape=shape)


def _served(kubeconfig: pathlib.Path, shape: Shape, *, namespaces: list[str],
            report: Report) -> dict[str, Any]:
    """The run itself, the coordinator serving its stand-in agents over mutual TLS; stopped after."""
    with tempfile.TemporaryDirectory(prefix="fedspread-bench-hub-tls-") as scratch:
        tls = placement_swarm.certificates(pathlib.Path(scratch))
        settings = startup.CoordinatorConfig(
            hub_kubeconfig=kubeconfig, listen="127.0.0.1:0", use_ray=False,
            heartbeat_seconds=placement_swarm.HEARTBEAT_SECONDS,
            tls=transport.TLSFiles(tls / "coordinator.crt", tls / "coordinator.key", tls / "ca.crt"))
        coordinator = process_mod.CoordinatorProcess(settings)
        # The stand-in agents share one client certificate; a real agent's names its cluster, and
        # the check of that name (one comparison per Hello) is all this leaves out.
        coordinator.agents.require_identity = False
        recorder = placement_events.Recorder(coordinator.coordinator)
        try:
            coordinator.start()
            if not coordinator.hub_synced.wait(SYNC_TIMEOUT):
                raise TimeoutError("the coordinator did not list the hub")
            agents = placement_swarm.Agents(f"127.0.0.1:{coordinator.port}", shape, tls)
            try:
                report(f"hub point: {agents.ready['streams']} streams open")
                return _run(kubeconfig, coordinator, recorder, agents, shape=shape, namespaces=namespaces)
            finally:
                agents.close()
        finally:
            recorder.close()
            coordinator.stop()


def _run(kubeconfig: pathlib.Path, coordinator: process_mod.CoordinatorProcess,
         recorder: placement_events.Recorder, agents: placement_swarm.Agents, *, shape: Shape,
         namespaces: list[str]) -> dict[str, Any]:
    model, lock = coordinator.world, coordinator.coordinator.lock

    def reported() -> bool:
        with lock:
            return sum(1 for c in model.snapshot_for("").clusters if c.node_pools) == shape.clusters

    wait_until(reported, timeout=INVENTORY_TIMEOUT, what="every agent's inventory")
    custom = client.CustomObjectsApi(startup.hub_client(kubeconfig))
    namespace_of = {index: namespaces[index % len(namespaces)] for index in range(shape.spreads)}
    keys = {f"{namespace_of[i]}/{placement_world.spread_name(i)}" for i in range(shape.spreads)}
    writes = collections.Counter(coordinator.statuses.writer.writes)
    recorder.take()
    cpu = time.process_time()
    since, created = _create(kubeconfig, shape, namespaces=namespaces)

    def placed() -> bool:
        with lock:
            return keys <= set(model.placements)

    placed_at = wait_until(placed, timeout=DELIVERY_TIMEOUT, what="every spread placed")
    sent, _ = recorder.take()
    delivered = placement_events.held(agents.ask, recorder, since=since, sent=sent, timeout=DELIVERY_TIMEOUT)

    checking = [0.0]  # this process's CPU spent checking, not the coordinator's

    def statuses_shown() -> bool:
        started = time.process_time()
        found = custom.list_cluster_custom_object(common.API_GROUP, common.API_VERSION, PLURAL,
                                                  _request_timeout=REQUEST_TIMEOUT)
        mine = [i for i in found["items"] if i["metadata"]["namespace"] in namespace_of.values()]
        done = len(mine) == shape.spreads and all(shown(i) for i in mine)
        checking[0] += time.process_time() - started
        return done

    status_at = wait_until(statuses_shown, timeout=DELIVERY_TIMEOUT, what="every spread's status",
                      every=STATUS_POLL_SECONDS)
    return {"created_s": round(created - since, 3), "placed_s": round(placed_at - since, 3),
            "delivered_s": round(delivered, 3), "status_s": round(status_at - since, 3),
            "messages": len(sent), "status_writes": dict(coordinator.statuses.writer.writes - writes),
            "status_seconds": coordinator.settings.status_seconds,
            "coordinator_cpu_s": round(time.process_time() - cpu - checking[0], 3),
            "streams": agents.ready["streams"], "left_out": dict(LEFT_OUT)}


def _create(kubeconfig: pathlib.Path, shape: Shape, *, namespaces: list[str]) -> tuple[float, float]:
    """Create every Deployment and spread from a child process (`create`), as a user's client
    would: its CPU is not the coordinator's. When it started and ended (CLOCK_MONOTONIC, which every
    process of the machine shares)."""
    child = subprocess.run(
        [sys.executable, "-m", "bench.placement_hub", "--kubeconfig", str(kubeconfig),
         "--shape", json.dumps(dataclasses.asdict(shape)), "--namespaces", *namespaces],
        capture_output=True, text=True, timeout=DELIVERY_TIMEOUT,
        env={**os.environ, "PYTHONPATH": os.getcwd()})
    if child.returncode != 0:
        raise RuntimeError(f"creating the spreads failed: {child.stderr.strip()[-2000:]}")
    found = json.loads(child.stdout.strip().splitlines()[-1])
    return float(found["started"]), float(found["ended"])


def create(kubeconfig: pathlib.Path, shape: Shape, *, namespaces: Sequence[str]) -> tuple[float, float]:
    """Every spread's Deployment, then the spread, one after another (a spread without its target
    waits); when it started and ended (`time.monotonic`)."""
    api = startup.hub_client(kubeconfig)
    apps, custom = client.AppsV1Api(api), client.CustomObjectsApi(api)
    since = time.monotonic()
    for index in range(shape.spreads):
        namespace = namespaces[index % len(namespaces)]
        apps.create_namespaced_deployment(namespace, deployment(index, shape, namespace=namespace),
                                          _request_timeout=REQUEST_TIMEOUT)
        custom.create_namespaced_custom_object(common.API_GROUP, common.API_VERSION, namespace, PLURAL,
                                               federated_spread(index, shape, namespace=namespace),
                                               _request_timeout=REQUEST_TIMEOUT)
    return since, time.monotonic()


def _clean(api: client.ApiClient, *, namespaces: list[str], shape: Shape) -> None:
    """Remove what the run made on the hub: its spreads and Deployments, its namespaces, and the
    MemberClusters its agents registered (cluster-scoped). One by one, not by namespace: a hub
    without a namespace controller (the sandbox's runs the HPA controller alone) never empties a
    deleted namespace. A delete that fails (the object was never made, the hub did not answer in
    time) does not stop the others."""
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    for namespace in namespaces:
        with contextlib.suppress(*CLEANUP_ERRORS):
            custom.delete_collection_namespaced_custom_object(
                common.API_GROUP, common.API_VERSION, namespace, PLURAL, _request_timeout=REQUEST_TIMEOUT)
        with contextlib.suppress(*CLEANUP_ERRORS):
            apps.delete_collection_namespaced_deployment(namespace, _request_timeout=REQUEST_TIMEOUT)
        with contextlib.suppress(*CLEANUP_ERRORS):
            core.delete_namespace(namespace, _request_timeout=REQUEST_TIMEOUT)
    for index in range(shape.clusters):
        with contextlib.suppress(*CLEANUP_ERRORS):
            custom.delete_cluster_custom_object(common.API_GROUP, common.API_VERSION, "memberclusters",
                                                placement_world.cluster_name(index),
                                                _request_timeout=REQUEST_TIMEOUT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.placement_hub",
        description="The hub point's client (run by bench.placement --hub): create the Deployments and "
                    "FederatedSpreads of a benchmark federation on a hub, one after another, and print "
                    "how long it took as one JSON line.")
    parser.add_argument("--kubeconfig", type=pathlib.Path, required=True, help="the hub's kubeconfig")
    parser.add_argument("--shape", type=placement_world.parse_shape, required=True,
                        help="the federation (bench.placement_world.Shape as JSON)")
    parser.add_argument("--namespaces", nargs="+", required=True,
                        help="existing namespaces to deal the spreads to, in turn")
    options = parser.parse_args(argv)
    started, ended = create(options.kubeconfig, options.shape, namespaces=options.namespaces)
    print(json.dumps({"started": started, "ended": ended}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
