"""The admission benchmark's load through the member's real ReplicaSet controller: a Deployment of
the spread's pods scaled from 0 to M.

Why beside the client's own creates (`admission_client.burst`): this is how pods reach a webhook in
a cluster — the ReplicaSet controller creates them in its slow-start batches (1, 2, 4, ...
concurrent creates, at most 500 per sync), at its client's rate limit (the sandbox's
controller-manager runs with 100 requests/s, bursts of 200), and retries refused creates with its own
backoff. Nobody here can time those creates one by one: their latency is the apiserver's request
histogram (`apiserver_metrics`), and `burst_s` runs from the scale request until the ReplicaSet's
status counts all M pods (polled every `POLL` seconds, so within that of the truth). A load that
has not finished by its deadline is recorded as incomplete with the pods it did store.

Whose Deployment: the baseline's is the benchmark's own. fedspread's agent assigns subsets only to
pods whose owner chain leads to the member Deployment it manages (a pod of another controller is
admitted untouched), so for fedspread the Deployment scaled is the agent's own, by a new
assignment from the stand-in coordinator (`member`), as the coordinator scales it in a
federation; its burst clock starts when that assignment is sent (the agent's apply adds tens of
milliseconds the baseline's direct scale does not have).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from bench import admission_client as client
from bench import rawkube

Json = dict[str, Any]

NAME = f"{client.SPREAD}-load"
POLL = 0.1
SELECTOR = {"app": f"{client.SPREAD}-bench"}
"""The pods' own label (not the spread's), which no other workload of the namespace selects."""


def deployment(namespace: str) -> Json:
    """The benchmark's Deployment of the spread's pods, at 0 replicas."""
    pod = client.pod_body()
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": namespace},
            "spec": {"replicas": 0, "selector": {"matchLabels": SELECTOR}, "template": template}}


def deployments_path(namespace: str, name: str | None = None) -> str:
    """The Deployments of `namespace`, or one of them."""
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    return f"{path}/{name}" if name else path


def replicasets_path(namespace: str, *, ours: bool = True, app: str = SELECTOR["app"]) -> str:
    """The ReplicaSets of the benchmark's Deployment in `namespace` (`ours`; `app`: the pods'
    `app` label, the member Deployment's when the agent owns it), or all of them."""
    path = f"/apis/apps/v1/namespaces/{namespace}/replicasets"
    return f"{path}?labelSelector=app%3D{app}" if ours else path


def create(api: rawkube.RawApi, namespace: str) -> None:
    """Create the Deployment at 0 replicas (its ReplicaSet exists, with no pods, before this returns)."""
    api.post(deployments_path(namespace), deployment(namespace))
    client.wait_for(lambda: api.get(replicasets_path(namespace))["items"],
                    what=f"the ReplicaSet of {namespace}/{NAME}")


def stored(api: rawkube.RawApi, namespace: str, *, app: str = SELECTOR["app"]) -> int:
    """The pods the ReplicaSets of the Deployment whose pods carry `app` count in their status."""
    items = api.get(replicasets_path(namespace, app=app))["items"]
    return sum(int((item.get("status") or {}).get("replicas") or 0) for item in items)


def scale(api: rawkube.RawApi, namespace: str, *, replicas: int, deadline: float,
          member: Callable[[int], None] | None = None) -> client.Burst:
    """Scale the Deployment from 0 to `replicas` and wait until its ReplicaSet counts them all, or
    for `deadline` seconds at most. `member`: scale the agent's own member Deployment instead (a
    new assignment: fedspread assigns subsets only to pods of the Deployment it manages)."""
    load = os.getloadavg()[0]
    app = client.SPREAD if member is not None else SELECTOR["app"]
    started, began = time.time(), time.perf_counter()
    if member is not None:
        member(replicas)
    else:
        api.merge_patch(f"{deployments_path(namespace, NAME)}/scale", {"spec": {"replicas": replicas}})
    seen = 0
    while time.perf_counter() - began < deadline:
        seen = stored(api, namespace, app=app)
        if seen >= replicas:
            break
        time.sleep(POLL)
    return client.Burst(started=started, seconds=time.perf_counter() - began, latencies=[], load=load,
                        lost=max(0, replicas - seen), completed=seen >= replicas, stored=seen)


def drain_member(api: rawkube.RawApi, namespace: str, member: Callable[[int], None], *,
                 deadline: float) -> None:
    """Scale the agent's member Deployment back to 0 (before its agent stops: nothing else would)
    and wait until its ReplicaSets count no pod."""
    member(0)
    client.wait_for(lambda: stored(api, namespace, app=client.SPREAD) == 0,
                    what=f"the member Deployment of {namespace} at 0", timeout=deadline)


def delete_all(api: rawkube.RawApi, namespace: str) -> None:
    """Delete every Deployment of `namespace` and wait until no ReplicaSet remains (the pods are
    left to `admission_client.delete_pods`, which removes them at once rather than one by one)."""
    options = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
    api.delete(deployments_path(namespace), options)
    client.wait_for(lambda: not api.get(replicasets_path(namespace, ours=False))["items"],
                    what=f"the ReplicaSets of {namespace} deleted")
