"""Kubernetes Events on the sandbox: the recorder, the coordinator's spread Events, the agent's pod
and Deployment Events.

What runs: the real `EventRecorder` against the sandbox apiservers (events.k8s.io/v1); the real
`CoordinatorProcess` (placement in process) on the hub with stand-in agents; the agent's real
cache and reconciler on member-1. Events are read back the two ways an operator sees them: the
events.k8s.io/v1 list, and the core/v1 list filtered by `involvedObject.uid` (what
`kubectl describe` asks). Waits have deadlines; nothing asserts on timing.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from typing import Any

import hubside
import pytest
from conftest import Clusters
from hubside import events_of
from kubernetes import client
from waiting import wait_for

from agents import bookkeeping, outbox, runnable
from agents.cache import store as cache
from agents.controller import reconciler, workload
from federation.api import names
from federation.kube import events
from federation.rpc import assignment
from tests.support import builders

WAIT = 60.0
MEMBER = "member-1"


def described(api: client.ApiClient, namespace: str, uid: str) -> list[str]:
    """The reasons `kubectl describe` shows for the object of `uid` (core/v1, by involvedObject.uid)."""
    listing = json.loads(client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.uid={uid}", _preload_content=False).data)
    return sorted(e["reason"] for e in listing["items"])


# --- the recorder ---------------------------------------------------------------------------------


def test_repeated_events_become_one_series_and_a_flood_is_limited(clusters: Clusters, namespace: str) -> None:
    api = clusters.api("hub")
    made = client.CoreV1Api(api).create_namespaced_config_map(namespace, {"metadata": {"name": "cfg"}})
    regarding = events.ObjectRef("v1", "ConfigMap", "cfg", namespace=namespace, uid=made.metadata.uid)
    recorder = events.EventRecorder(api, controller=events.COORDINATOR, instance="test-instance")
    try:
        for _ in range(3):
            assert recorder.record(regarding, reason="Tested", note="the same note", action="Test")
        recorder.record(regarding, reason="Tested", note="another note", type=events.WARNING, action="Test")
        assert recorder.flush(WAIT), "the recorder never drained its queue"
        found = events_of(api, namespace, name="cfg", reason="Tested")
        by_note = {e["note"]: e for e in found}
        assert sorted(by_note) == ["another note", "the same note"], found
        same = by_note["the same note"]
        assert same["series"]["count"] == 3, same
        assert (same["type"], same["action"], same["reportingController"], same["reportingInstance"]) == (
            "Normal", "Test", "fedspread.io/coordinator", "test-instance")
        assert same["regarding"]["uid"] == made.metadata.uid
        assert "series" not in by_note["another note"] and by_note["another note"]["type"] == "Warning"
        assert described(api, namespace, made.metadata.uid) == ["Tested", "Tested"]
        assert recorder.counts == {"created": 2, "updated": 2}
    finally:
        recorder.close()
    assert not recorder.record(regarding, reason="Tested", note="after close", action="Test")

    limited = events.EventRecorder(api, controller=events.COORDINATOR, instance="test-instance",
                                   limits=events.Limits(per_object_burst=2, per_object_rate=0))
    try:
        for index in range(5):
            limited.record(regarding, reason="Flood", note=f"note {index}", action="Test")
        assert limited.flush(WAIT)
        assert len(events_of(api, namespace, name="cfg", reason="Flood")) == 2
        assert (limited.counts["created"], limited.counts["limited"]) == (2, 3)
    finally:
        limited.close()


# --- the coordinator: spread Events --------------------------------------------------------------------


def test_coordinator_records_placed_and_invalid_on_the_spread(sandbox: Any, clusters: Clusters,
                                                              namespace: str) -> None:
    hub = hubside.Hub(clusters, namespace)
    (dc1,) = hubside.names("dc1")
    with hubside.running_coordinator(sandbox, clusters, members=[dc1], use_ray=False) as process:
        agents = hubside.agents_for(f"127.0.0.1:{process.port}", {dc1: (2, "4")})
        try:
            key = hub.create(builders.deployment("web", 3, cpu="100m"), hubside.spread_body(
                "web", target="web", subsets=[{"name": "onprem", "clusters": [dc1]}]))
            hubside.wait_replicas(agents, key, {dc1: 3}, what="created")
            api = clusters.api("hub")
            placed = wait_for(lambda: events_of(api, namespace, name="web", reason="Placed"), timeout=WAIT,
                              message="no Placed Event regarding the spread")
            uid = hub.custom.get_namespaced_custom_object(
                hubside.GROUP, hubside.VERSION, namespace, "federatedspreads", "web")["metadata"]["uid"]
            assert placed[0]["note"] == f"placed 3 replicas: {dc1} 3"
            assert (placed[0]["type"], placed[0]["reportingController"]) == (
                "Normal", "fedspread.io/coordinator")
            assert placed[0]["regarding"] == {
                "apiVersion": "fedspread.io/v1alpha1", "kind": "FederatedSpread", "name": "web",
                "namespace": namespace, "uid": uid}

            mixed_caps = [{"name": "onprem", "clusters": [dc1], "maxReplicas": 2},
                          {"name": "cloud", "clusters": [dc1], "maxReplicas": "50%"}]
            hub.patch_spread("web", {"spec": {"subsets": mixed_caps}})
            invalid = wait_for(lambda: events_of(api, namespace, name="web", reason="Invalid"), timeout=WAIT,
                               message="no Invalid Event regarding the spread")
            assert invalid[0]["type"] == "Warning" and "mixes cap kinds" in invalid[0]["note"]
            assert described(api, namespace, uid) == ["Invalid", "Placed"]
            assert len(events_of(api, namespace, name="web", reason="Placed")) == 1, \
                "status writes that change no placement announce nothing"
        finally:
            hubside.stop_all(agents)


# --- the agent: a pod deleted for rescheduling ----------------------------------------------------------


@pytest.fixture
def rescheduler(clusters: Clusters) -> Iterator[tuple[bookkeeping.Bookkeeping, events.EventRecorder]]:
    """The agent's cache and reconciler on member-1, recording Events."""
    core, apps = clusters.core(MEMBER), clusters.apps(MEMBER)
    books, box = bookkeeping.Bookkeeping(), outbox.ReportOutbox()
    feed = cache.Cache(core, apps, watch_seconds=60)
    recorder = events.EventRecorder(clusters.api(MEMBER), controller=events.AGENT, instance="member-1")
    loop = reconciler.Reconciler(core, books, box, feed, heartbeat_seconds=5.0, recorder=recorder)
    stop = threading.Event()
    feed.start()
    thread = threading.Thread(target=loop.run, args=(stop, runnable.no_beat), name="reconciler", daemon=True)
    try:
        assert feed.wait_synced(WAIT), "the cache never finished its first list of member-1"
        thread.start()
        yield books, recorder
    finally:
        stop.set()
        feed.stop()
        thread.join(timeout=10)
        recorder.close()


def test_a_pod_deleted_for_rescheduling_gets_a_rescheduled_event(
        clusters: Clusters, namespace: str,
        rescheduler: tuple[bookkeeping.Bookkeeping, events.EventRecorder]) -> None:
    books, _ = rescheduler
    strategy = assignment.Strategy(type="Adaptive", reschedule_critical_seconds=3, unschedulable_seconds=60)
    rules = (assignment.SubsetRule(name="big", index=0, quota=1), assignment.SubsetRule(name="small", index=1,
                                                                                         quota=1))
    value = assignment.Assignment(
        spread=assignment.spread_key(namespace, "ad"), generation=1, namespace=namespace, workload="ad",
        replicas=2, template={}, template_revision="r1", subsets=rules, subset_count=2, strategy=strategy,
        spread_uid="uid-ad", federation="test-fed")
    books.set_assignment(value)
    # Only a pod whose owner chain leads to the spread's marked member Deployment is the spread's
    # (agents/owners.py): the pod names that Deployment (0 replicas, selecting none of ours) as its
    # controller.
    owner_template = builders.deployment("ad-owner", 0, cpu="10m", image="registry.example/app:1.0")
    made = clusters.apps(MEMBER).create_namespaced_deployment(namespace, workload.render(
        dataclasses.replace(value, replicas=0, template=owner_template)))
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "ad", "uid": made.metadata.uid,
             "controller": True}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "big-0", "labels": {names.SPREAD_LABEL: "ad", "app": "ad"},
                        "annotations": {names.SUBSET_ANNOTATION: "big"}, "ownerReferences": [owner]},
           "spec": {"terminationGracePeriodSeconds": 0,  # no node has 8 cpu: it stays Unschedulable
                    "containers": [{"name": "app", "image": "registry.example/app:1.0",
                                    "resources": {"requests": {"cpu": "8", "memory": "64Mi"}}}]}}
    uid = clusters.core(MEMBER).create_namespaced_pod(namespace, pod).metadata.uid
    api = clusters.api(MEMBER)
    found = wait_for(lambda: events_of(api, namespace, name="big-0", reason="Rescheduled"), timeout=WAIT,
                     message="no Rescheduled Event regarding the stuck pod")
    event = found[0]
    assert event["regarding"]["uid"] == uid and event["type"] == "Normal"
    assert (event["reportingController"], event["reportingInstance"]) == ("fedspread.io/agent", "member-1")
    assert event["note"].startswith("deleted to reschedule: unschedulable in subset big since ")
    assert f"spread {namespace}/ad skips that subset for 60s" in event["note"]


def test_member_deployments_get_created_updated_and_deleted_events(clusters: Clusters,
                                                                  namespace: str) -> None:
    core, apps = clusters.core(MEMBER), clusters.apps(MEMBER)
    books = bookkeeping.Bookkeeping()
    recorder = events.EventRecorder(clusters.api(MEMBER), controller=events.AGENT, instance="member-1")
    sync = workload.WorkloadSync(apps, books, cache.Cache(core, apps), core_api=core, recorder=recorder)
    template = builders.deployment("web", 9, namespace="hub-ns", cpu="10m", image="registry.example/app:1.0")
    web = assignment.Assignment(
        spread=assignment.spread_key(namespace, "web"), generation=1, namespace=namespace, workload="web",
        replicas=2, template=template, template_revision="r1",
        subsets=(assignment.SubsetRule(name="a", index=0, quota=2),), subset_count=1,
        strategy=assignment.Strategy(), spread_uid="uid-web", federation="test-fed")
    try:
        books.set_assignment(web)
        assert sync.sync_once() == {workload.CREATED: 1}
        books.set_assignment(dataclasses.replace(web, replicas=3, generation=2))
        assert sync.sync_once() == {workload.UPDATED: 1}
        uid = apps.read_namespaced_deployment("web", namespace).metadata.uid
        books.remove_assignment(web.spread)
        assert sync.remove(web.spread, federation="test-fed") == 1
        assert recorder.flush(WAIT)
    finally:
        recorder.close()
    api = clusters.api(MEMBER)
    notes = {reason: [(e["regarding"]["kind"], e["regarding"]["uid"], e["note"])
                      for e in events_of(api, namespace, name="web", reason=reason)]
             for reason in ("Created", "Updated", "Deleted")}
    spread = f"{namespace}/web"
    assert notes == {
        "Created": [("Deployment", uid, f"created with 2 replicas for spread {spread}")],
        "Updated": [("Deployment", uid, f"updated for spread {spread} (generation 2): 2 -> 3 replicas")],
        "Deleted": [("Deployment", uid,
                     f"deleted: the coordinator removed spread {spread} from this cluster")],
    }
