"""The SDK's placement, explanation and simulation of spreads of a ReplicaSet, a StatefulSet and a Job
(issue 24 §1: "the SDK ... with the semantics a user of that kind expects"), both clients.

- placement and explain answer for every kind as for a Deployment;
- explain names each StatefulSet subset's ordinals per cluster (its pods' names there), since a
  StatefulSet's subsets are ordinal ranges and ordinals repeat in every cluster;
- simulate reads the template of the spread's kind: a Job's `parallelism` is the quantity (1 when
  unset), a template of another kind or an Indexed Job is refused at `templateJson`, and a
  StatefulSet percentage it cannot honour at its field path — as `fedspread simulate` does.

A PlacementService over an in-memory source on a loopback port, as test_topology_shown.py."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from federation import sdk
from federation.api import spread
from federation.coordinator.services import aio_server, placement_service
from federation.coordinator.wire import convert
from federation.core import placement
from tests.support import builders, in_memory_source, sdk_clients

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
SPECS: dict[str, dict[str, Any]] = {
    "shop/web": {"targetRef": {"kind": "ReplicaSet", "name": "web"},
                 "subsets": [{"name": "onprem", "clusters": ["dc1"], "maxReplicas": 2},
                             {"name": "cloud", "clusters": ["aws"]}]},
    "shop/db": {"targetRef": {"kind": "StatefulSet", "name": "db"},
                "subsets": [{"name": "a", "clusters": ["dc1"], "maxReplicas": 2},
                            {"name": "b", "clusters": ["dc1"], "maxReplicas": 2},
                            {"name": "c", "clusters": ["aws"]}]},
    "shop/work": {"targetRef": {"apiVersion": "batch/v1", "kind": "Job", "name": "work"},
                  "subsets": [{"name": "first", "clusters": ["dc1"], "maxReplicas": 3},
                              {"name": "rest", "clusters": ["aws"]}]},
}
QUANTITIES = {"shop/web": 3, "shop/db": 5, "shop/work": 5}
CLUSTERS = {"clusters": [
    {"name": name, "nodePools": [{"count": 2, "allocatable": {"cpu": "4", "pods": "110"}}]}
    for name in ("dc1", "aws")]}


def snapshot() -> Any:
    return builders.snapshot(builders.member("dc1", builders.pool(2)),
                             builders.member("aws", builders.pool(2)))


@pytest.fixture()
def target() -> Iterator[str]:
    """A PlacementService holding a placed spread of each kind on dc1 and aws."""
    now = snapshot()
    records = [convert.ClusterRecord(name=c.name, labels=dict(c.labels), node_pools=tuple(c.node_pools))
               for c in now.clusters]
    source = in_memory_source.InMemorySource(clusters=records)
    for key, body in SPECS.items():
        spec = spread.FederatedSpreadSpec.model_validate(body)
        source.put(key, convert.PlacementRecord(
            key=key, placement=placement.place(spec, replicas=QUANTITIES[key], snapshot=now), spec=spec,
            generation=1, computed_at=NOW))
    server = aio_server.AioServer(workers=2)
    placement_service.add_to_server(server.server, source)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


def job(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "work"},
            "spec": {**spec, "template": {"spec": {"restartPolicy": "Never",
                                                   "containers": [{"name": "w", "image": "w"}]}}}}


def placed(found: sdk.SpreadPlacement) -> dict[str, dict[str, int]]:
    return {s.name: s.clusters for s in found.subsets}


@pytest.mark.parametrize("flavour", sdk_clients.FLAVOURS, ids=repr)
def test_placement_and_explain_answer_for_each_kind(target: str, flavour: sdk_clients.Flavour) -> None:
    with flavour.connect(target, timeout=5.0) as client:
        assert placed(client.placement("shop/web")) == {"onprem": {"dc1": 2}, "cloud": {"aws": 1}}
        assert placed(client.placement("shop/work")) == {"first": {"dc1": 3}, "rest": {"aws": 2}}
        assert placed(client.placement("shop/db")) == {"a": {"dc1": 2}, "b": {"dc1": 2}, "c": {"aws": 1}}
        assert [p.spread for p in client.placements("shop")] == ["shop/db", "shop/web", "shop/work"]
        why = client.explain("shop/work")
        assert [(s.name, s.reasons, [c.replicas for c in s.clusters]) for s in why.subsets] == [
            ("first", ["cap 3", "cap 3 reached"], [3]), ("rest", [], [2])]
        replicaset = client.explain("shop/web")
        assert [c.reasons for s in replicaset.subsets for c in s.clusters] == [[], []], \
            "no ordinals for a ReplicaSet"


@pytest.mark.parametrize("flavour", sdk_clients.FLAVOURS, ids=repr)
def test_explain_names_each_statefulset_subsets_ordinals_per_cluster(
        target: str, flavour: sdk_clients.Flavour) -> None:
    with flavour.connect(target, timeout=5.0) as client:
        why = client.explain("shop/db")
    shown = {(s.name, c.cluster): c.reasons for s in why.subsets for c in s.clusters}
    assert shown == {("a", "dc1"): ["ordinals 0-1 (db-0 to db-1)"],
                     ("b", "dc1"): ["ordinals 2-3 (db-2 to db-3)"],
                     ("c", "aws"): ["ordinal 0 (db-0)"]}, "ranges are per cluster: aws numbers from 0"


@pytest.mark.parametrize("flavour", sdk_clients.FLAVOURS, ids=repr)
def test_simulate_reads_a_jobs_parallelism_and_refuses_what_the_kind_cannot_do(
        target: str, flavour: sdk_clients.Flavour) -> None:
    work = {"metadata": {"name": "work", "namespace": "shop"}, "spec": SPECS["shop/work"]}
    with flavour.connect(target, timeout=5.0) as client:
        simulated = client.simulate(work, template=job(parallelism=4, completions=12), clusters=CLUSTERS)
        assert (simulated.replicas, placed(simulated)) == (4, {"first": {"dc1": 3}, "rest": {"aws": 1}})
        assert client.simulate(work, template=job(), clusters=CLUSTERS).replicas == 1, \
            "parallelism unset: 1, as the apiserver defaults it"

        with pytest.raises(sdk.InvalidRequest) as indexed:
            client.simulate(work, template=job(parallelism=2, completions=4, completionMode="Indexed"),
                            clusters=CLUSTERS)
        assert [p.path for p in indexed.value.problems] == ["templateJson"]
        assert "Indexed" in indexed.value.problems[0].message

        db = {"metadata": {"name": "db", "namespace": "shop"}, "spec": SPECS["shop/db"]}
        with pytest.raises(sdk.InvalidRequest) as other_kind:
            client.simulate(db, template=builders.deployment("db", 3), clusters=CLUSTERS)
        assert other_kind.value.problems[0].message == (
            "expected a StatefulSet object (the spread's targetRef kind), got Deployment")
        statefulset = {**builders.deployment("db", 3), "kind": "StatefulSet"}
        assert client.simulate(db, template=statefulset, clusters=CLUSTERS).replicas == 3

        shared = {"metadata": db["metadata"], "spec": {**SPECS["shop/db"], "subsets": [
            {"name": "a", "clusters": ["dc1"], "maxReplicas": "40%"}, {"name": "b", "clusters": ["dc1"]}]}}
        with pytest.raises(sdk.InvalidRequest) as percentage:
            client.simulate(shared, replicas=5, clusters=CLUSTERS)
        assert [p.path for p in percentage.value.problems] == ["spec.subsets[0].maxReplicas"]
