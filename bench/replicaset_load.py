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
"""

from __future__ import annotations

import os
import time
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


def replicasets_path(namespace: str, *, ours: bool = True) -> str:
    """The ReplicaSets of the benchmark's Deployment in `namespace` (`ours`), or all of them."""
    path = f"/apis/apps/v1/namespaces/{namespace}/replicasets"
    return f"{path}?labelSelector=app%3D{SELECTOR['app']}" if ours else path


def create(api: rawkube.RawApi, namespace: str) -> None:
    """Create the Deployment at 0 replicas (its ReplicaSet exists, with no pods, before this returns)."""
    api.post(deployments_path(namespace), deployment(namespace))
    client.wait_for(lambda: api.get(replicasets_path(namespace))["items"],
                    what=f"the ReplicaSet of {namespace}/{NAME}")


def stored(api: rawkube.RawApi, namespace: str) -> int:
    """The pods the namespace's ReplicaSets count in their status."""
    items = api.get(replicasets_path(namespace))["items"]
    return sum(int((item.get("status") or {}).get("replicas") or 0) for item in items)


def scale(api: rawkube.RawApi, namespace: str, *, replicas: int, deadline: float) -> client.Burst:
    """Scale the Deployment from 0 to `replicas` and wait until its ReplicaSet counts them all, or
    for `deadline` seconds at most."""
    load = os.getloadavg()[0]
    started, began = time.time(), time.perf_counter()
    api.merge_patch(f"{deployments_path(namespace, NAME)}/scale", {"spec": {"replicas": replicas}})
    seen = 0
    while time.perf_counter() - began < deadline:
        seen = stored(api, namespace)
        if seen >= replicas:
            break
        time.sleep(POLL)
    return client.Burst(started=started, seconds=time.perf_counter() - began, latencies=[], load=load,
                        lost=max(0, replicas - seen), completed=seen >= replicas, stored=seen)


def delete_all(api: rawkube.RawApi, namespace: str) -> None:
    """Delete every Deployment of `namespace` and wait until no ReplicaSet remains (the pods are
    left to `admission_client.delete_pods`, which removes them at once rather than one by one)."""
    options = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
    api.delete(deployments_path(namespace), options)
    client.wait_for(lambda: not api.get(replicasets_path(namespace, ours=False))["items"],
                    what=f"the ReplicaSets of {namespace} deleted")
