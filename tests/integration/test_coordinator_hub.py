"""The coordinator's hub side on the sandbox hub's real apiserver: watcher events and status writes.

Why these tests: the hub watcher and the status writer are the coordinator's only contact with
Kubernetes; their subtle parts (resume, parsing the apiserver's JSON, invalid specs the CRD schema
accepts, conflicts with concurrent writers, skipping unchanged statuses) only show on a real
apiserver with our CRDs installed.
"""

from __future__ import annotations

import datetime
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import conftest
import pytest
import waiting
from kubernetes.client import exceptions

from federation.api import cluster as cluster_api
from federation.api import common, names
from federation.api import spread as spread_api
from federation.coordinator.hub import status_writer
from federation.coordinator.hub import watcher as hub
from federation.coordinator.model import world as world_model
from tests.support import builders

HUB = "hub"
GROUP, VERSION = common.API_GROUP, common.API_VERSION
TIMEOUT = 30.0
SINCE = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


class Recorder:
    """Collects every HubEvent and feeds it into a World, as the coordinator would."""

    def __init__(self) -> None:
        self.world = world_model.World(clock=lambda: datetime.datetime.now(datetime.UTC))
        self.events: list[hub.HubEvent] = []
        self._lock = threading.Lock()

    def __call__(self, event: hub.HubEvent) -> None:
        with self._lock:
            self.events.append(event)
            hub.apply_to_world(self.world, event)

    def wait(self, predicate: Callable[[hub.HubEvent], bool], what: str) -> hub.HubEvent:
        def probe() -> hub.HubEvent | None:
            with self._lock:
                return next((e for e in self.events if predicate(e)), None)

        def seen() -> str:
            with self._lock:
                tail = [(e.kind, e.type, e.key) for e in self.events[-10:]]
            return f"no event: {what}; last events: {tail}"

        return waiting.wait_for(probe, timeout=TIMEOUT, message=seen)

    def entry(self, key: str) -> world_model.SpreadEntry | None:
        with self._lock:
            return self.world.spread(key)


@pytest.fixture
def recorder(clusters: conftest.Clusters) -> Iterator[Recorder]:
    """A running HubWatcher on the sandbox hub, feeding a Recorder; stopped after the test."""
    recording = Recorder()
    watcher = hub.HubWatcher(clusters.api(HUB), recording)
    watcher.start()
    try:
        assert watcher.wait_synced(TIMEOUT), "the hub watcher did not finish its first lists"
        yield recording
        assert watcher.alive, "a hub watch thread died during the test"
        assert watcher.errors == 0, "applying a hub event to the World raised (see the log)"
    finally:
        watcher.stop()


def spread_body(name: str, *, target: str, cap: int = 3,
                subset_names: tuple[str, str] = ("a", "b")) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "FederatedSpread", "metadata": {"name": name},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                 "subsets": [{"name": subset_names[0], "clusters": ["member-1"], "maxReplicas": cap},
                             {"name": subset_names[1], "clusters": ["member-2"]}]},
    }


def create_spread(clusters: conftest.Clusters, namespace: str, body: dict[str, Any]) -> None:
    clusters.custom(HUB).create_namespaced_custom_object(GROUP, VERSION, namespace, spread_api.PLURAL, body)


def read_spread(clusters: conftest.Clusters, namespace: str, name: str) -> dict[str, Any]:
    custom = clusters.custom(HUB)
    obj = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, spread_api.PLURAL, name)
    assert isinstance(obj, dict)
    return obj


def recorder_replicas(recorder: Recorder, key: str) -> int | None:
    entry = recorder.entry(key)
    return entry.replicas if entry is not None else None


def test_watcher_follows_spread_and_its_deployment(
        clusters: conftest.Clusters, namespace: str, recorder: Recorder) -> None:
    key = f"{namespace}/spread"
    clusters.apps(HUB).create_namespaced_deployment(namespace, builders.deployment("web", 3, cpu="100m"))
    create_spread(clusters, namespace, spread_body("spread", target="web"))

    added = recorder.wait(lambda e: e.kind == "spread" and e.key == key and e.type == "ADDED", "spread ADDED")
    assert added.spread is not None and added.valid and added.generation == 1
    recorder.wait(lambda e: e.kind == "deployment" and e.key == f"{namespace}/web", "deployment event")
    entry = waiting.wait_for(lambda: recorder.entry(key) if recorder_replicas(recorder, key) == 3 else None,
                             timeout=TIMEOUT, message="the World never saw the spread with 3 replicas")
    assert entry.template is not None and "status" not in entry.template
    assert entry.template["spec"]["template"]["spec"]["containers"][0]["name"] == "app"

    clusters.apps(HUB).patch_namespaced_deployment("web", namespace, {"spec": {"replicas": 5}})
    scaled = recorder.wait(lambda e: e.kind == "deployment" and e.workload is not None
                           and e.workload.key == f"{namespace}/web" and e.workload.replicas == 5,
                           "deployment event with 5 replicas")
    assert scaled.type == "MODIFIED"
    waiting.wait_for(lambda: (e := recorder.entry(key)) and e.replicas == 5, timeout=TIMEOUT,
                     message="the World never saw the scale to 5")

    clusters.custom(HUB).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, spread_api.PLURAL, "spread",
        [{"op": "replace", "path": "/spec/subsets/0/maxReplicas", "value": 4}],
        _content_type="application/json-patch+json")
    edited = recorder.wait(lambda e: e.kind == "spread" and e.key == key and e.type == "MODIFIED"
                           and e.spread is not None and e.spread.spec.subsets[0].max_replicas == 4,
                           "spread MODIFIED with maxReplicas 4")
    assert edited.generation == 2
    waiting.wait_for(lambda: (e := recorder.entry(key)) and e.generation == 2 and e.replicas == 5,
                     timeout=TIMEOUT, message="the World never saw the edit")

    clusters.custom(HUB).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, spread_api.PLURAL, "spread")
    recorder.wait(lambda e: e.kind == "spread" and e.key == key and e.type == "DELETED", "spread DELETED")
    waiting.wait_for(lambda: recorder.entry(key) is None, timeout=TIMEOUT,
                     message="the World still has the deleted spread")


def test_watcher_reports_member_clusters(clusters: conftest.Clusters, recorder: Recorder) -> None:
    name = f"mc-{uuid.uuid4().hex[:8]}"
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MemberCluster",
            "metadata": {"name": name, "labels": {names.REGION_LABEL: "eu"}},
            "spec": {"taints": [{"key": "fedspread.io/cordon", "effect": "NoSchedule"}]}}
    custom = clusters.custom(HUB)
    custom.create_cluster_custom_object(GROUP, VERSION, cluster_api.PLURAL, body)
    try:
        event = recorder.wait(lambda e: e.kind == "cluster" and e.key == name and e.type == "ADDED",
                              "MemberCluster ADDED")
        assert event.cluster is not None
        assert event.cluster.labels == {names.REGION_LABEL: "eu"}
        assert [(t.key, t.effect) for t in event.cluster.taints] == [("fedspread.io/cordon", "NoSchedule")]
        assert name in recorder.world.cluster_names()
    finally:
        custom.delete_cluster_custom_object(GROUP, VERSION, cluster_api.PLURAL, name)
    recorder.wait(lambda e: e.kind == "cluster" and e.key == name and e.type == "DELETED",
                  "MemberCluster DELETED")
    assert name in recorder.world.cluster_names()  # the hub object is not the cluster: kept


def test_invalid_spread_is_reported_and_the_watcher_keeps_going(
        clusters: conftest.Clusters, namespace: str, recorder: Recorder) -> None:
    create_spread(clusters, namespace, spread_body("twice", target="web", subset_names=("same", "same")))
    bad = recorder.wait(lambda e: e.kind == "spread" and e.key == f"{namespace}/twice",
                        "invalid spread event")
    assert bad.spread is None and not bad.valid and bad.generation == 1
    found = [(p.path, p.message) for p in bad.problems]
    assert any(path == "spec.subsets[1].name" and "duplicate" in text for path, text in found), found
    assert recorder.entry(f"{namespace}/twice") is None

    create_spread(clusters, namespace, spread_body("fine", target="web"))
    good = recorder.wait(lambda e: e.kind == "spread" and e.key == f"{namespace}/fine", "the next spread")
    assert good.valid and good.spread is not None


def spread_status(ready: int, *, message: str = "placed") -> spread_api.FederatedSpreadStatus:
    return spread_api.FederatedSpreadStatus(
        observed_generation=1, replicas=3, ready_replicas=ready,
        placement=[spread_api.ClusterPlacementStatus(cluster="member-1", replicas=3, ready_replicas=ready)],
        subset_statuses=[spread_api.SubsetStatus(name="a", replicas=3, missing_replicas=0,
                                                 clusters=[spread_api.SubsetClusterStatus(
                                                     cluster="member-1", replicas=3)])],
        conditions=[common.Condition(type="Placed", status="True", reason="AllPlaced", message=message,
                                     last_transition_time=SINCE)],
    )


def test_status_writer_writes_only_changes(clusters: conftest.Clusters, namespace: str) -> None:
    create_spread(clusters, namespace, spread_body("s", target="web"))
    writer = status_writer.StatusWriter(clusters.api(HUB))
    assert writer.write_spread(f"{namespace}/s", spread_status(1)) is True
    written = read_spread(clusters, namespace, "s")
    assert written["status"]["readyReplicas"] == 1
    assert written["status"]["placement"] == [{"cluster": "member-1", "replicas": 3, "readyReplicas": 1}]
    assert written["status"]["conditions"][0]["reason"] == "AllPlaced"

    assert writer.write_spread(f"{namespace}/s", spread_status(1)) is False
    assert read_spread(clusters, namespace, "s")["metadata"]["resourceVersion"] == \
        written["metadata"]["resourceVersion"]
    assert (writer.writes["spread"], writer.skips["spread"]) == (1, 1)

    shrunk = spread_api.FederatedSpreadStatus(observed_generation=1, replicas=0)
    assert writer.write_spread(f"{namespace}/s", shrunk) is True
    status = read_spread(clusters, namespace, "s").get("status") or {}
    assert "placement" not in status or status["placement"] == [], status
    assert status.get("readyReplicas", 0) == 0

    with pytest.raises(exceptions.ApiException) as missing:
        writer.write_spread(f"{namespace}/absent", spread_status(1))
    assert missing.value.status == 404


BUMP_PAUSE = 0.02
"""Seconds between the concurrent bumps of the conflict test (a bump itself takes a few ms)."""


def test_status_writer_retries_conflicts(clusters: conftest.Clusters, namespace: str) -> None:
    create_spread(clusters, namespace, spread_body("busy", target="web"))
    custom = clusters.custom(HUB)
    writer = status_writer.StatusWriter(clusters.api(HUB), attempts=40, max_wait=0.2)
    stop = threading.Event()
    bumps = 0

    def bump() -> None:
        nonlocal bumps
        while not stop.is_set():
            custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, spread_api.PLURAL, "busy",
                {"metadata": {"labels": {"bump": str(bumps)}}})
            bumps += 1
            # A pause between bumps: writes still meet 409s (the test waits for one), but a writer
            # that re-reads is not outrun on every one of its attempts, as by a bumper in a tight
            # loop on a busy machine (40 conflicts in a row were seen once).
            stop.wait(BUMP_PAUSE)

    bumper = threading.Thread(target=bump, name="bumper", daemon=True)
    bumper.start()
    last = 0
    try:
        def write_until_conflicted() -> bool:
            nonlocal last
            last += 1
            assert writer.write_spread(f"{namespace}/busy", spread_status(last % 4, message=f"write {last}"))
            return writer.retries["spread"] > 0 and last >= 10
        waiting.wait_for(write_until_conflicted, timeout=60, interval=0,
                         message=lambda: f"no 409 met in {last} writes against {bumps} concurrent bumps")
    finally:
        stop.set()
        bumper.join(10)
    assert writer.writes["spread"] == last
    status = read_spread(clusters, namespace, "busy")["status"]
    assert status["conditions"][0]["message"] == f"write {last}"
    assert status["readyReplicas"] == last % 4


def test_hub_deployment_status_is_written(clusters: conftest.Clusters, namespace: str) -> None:
    apps = clusters.apps(HUB)
    apps.create_namespaced_deployment(namespace, builders.deployment("web", 3, cpu="100m"))
    writer = status_writer.StatusWriter(clusters.api(HUB))
    fields = {"replicas": 3, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 3,
              "unavailableReplicas": 1}
    assert writer.write_deployment_status(namespace, "web", fields) is True
    status = apps.read_namespaced_deployment_status("web", namespace).status
    assert status is not None
    assert (status.replicas, status.ready_replicas, status.available_replicas) == (3, 2, 2)
    assert (status.updated_replicas, status.unavailable_replicas, status.observed_generation) == (3, 1, 1)
    assert writer.write_deployment_status(namespace, "web", fields) is False
    assert (writer.writes["deployment"], writer.skips["deployment"]) == (1, 1)
