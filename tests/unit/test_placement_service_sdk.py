"""PlacementService and the SDK over a real gRPC server: every SDK method, every error mapping, and
`fedspread get` through click — no Ray, no hub; placements come from an InMemorySource. Each SDK
test runs against both clients (`PlacementClient` and `AsyncPlacementClient`, through
`tests.support.sdk_clients`): the asyncio client must answer exactly what the synchronous one does."""

from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib
import threading
import time
import tomllib
from collections.abc import Iterator

import grpc
import pytest
import yaml
from click import testing

from federation import cli, sdk
from federation.api import cluster, common, names, problems, spread
from federation.coordinator.services import aio_server, placement_requests, placement_service
from federation.coordinator.wire import convert
from federation.core import placement
from federation.core import usage as usage_rules
from federation.rpc import placement_pb2, placement_pb2_grpc
from tests.support import in_memory_source, sdk_clients

SPREAD_YAML = """
apiVersion: fedspread.io/v1alpha1
kind: FederatedSpread
metadata: {name: web, namespace: shop}
spec:
  targetRef: {name: web}
  subsets:
  - {name: onprem, clusters: [dc1], maxReplicas: 4}
  - name: eu
    clusterSelector: {matchLabels: {topology.fedspread.io/region: eu}}
  scheduleStrategy: {type: Adaptive}
"""
BAD_SPREAD_YAML = """
kind: FederatedSpread
metadata: {name: web, namespace: shop}
spec:
  targetRef: {name: web}
  subsets:
  - {name: onprem, clusters: [dc1], maxReplicas: "150%"}
  - {name: eu, bogus: 1}
"""
NOW = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.UTC)


def _pool(count: int, pods: int) -> cluster.NodePool:
    return cluster.NodePool(count=count, allocatable={"cpu": "8", "memory": "32Gi", "pods": str(pods)})


CLUSTERS = [
    convert.ClusterRecord(name="dc1", labels={names.REGION_LABEL: "onprem"}, node_pools=(_pool(1, 3),),
                          last_heartbeat=NOW, agent_version="0.1.0"),
    convert.ClusterRecord(name="aws-eu", labels={names.REGION_LABEL: "eu"}, node_pools=(_pool(2, 10),),
                          agent_version="0.1.0"),
    convert.ClusterRecord(name="gcp-eu", labels={names.REGION_LABEL: "eu"}, ready=False,
                          taints=(common.Taint(key="cordon", effect="NoSchedule"),)),
]


def _spec() -> spread.FederatedSpreadSpec:
    return placement_requests.parse_spread(SPREAD_YAML)


def _snapshot() -> cluster.CapacitySnapshot:
    return cluster.CapacitySnapshot(clusters=[c.to_capacity() for c in CLUSTERS])


def _record(replicas: int, *, generation: int = 1) -> convert.PlacementRecord:
    result = placement.place(_spec(), replicas=replicas, snapshot=_snapshot())
    return convert.PlacementRecord(
        key="shop/web", placement=result, spec=_spec(), generation=generation, computed_at=NOW,
        ready={"onprem": {"dc1": 2}, "eu": {"aws-eu": 1}},
        conditions=[common.Condition(type="Placed", status="True", reason="AllPlaced")],
    )


@pytest.fixture()
def source() -> in_memory_source.InMemorySource:
    store = in_memory_source.InMemorySource(clusters=list(CLUSTERS))
    store.put("shop/web", _record(8))
    store.put("other/api", convert.PlacementRecord(
        key="", placement=placement.place(_spec(), replicas=2, snapshot=_snapshot())))
    return store


@pytest.fixture()
def target(source: in_memory_source.InMemorySource) -> Iterator[str]:
    server = aio_server.AioServer(workers=4)
    placement_service.add_to_server(server.server, source)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None)


@pytest.fixture(params=sdk_clients.FLAVOURS, ids=repr)
def flavour(request: pytest.FixtureRequest) -> sdk_clients.Flavour:
    chosen: sdk_clients.Flavour = request.param
    return chosen


@pytest.fixture()
def client(target: str, flavour: sdk_clients.Flavour) -> Iterator[sdk_clients.Client]:
    with flavour.connect(target, timeout=5.0) as connected:
        yield connected


# --- queries --------------------------------------------------------------------------------------


def test_placement_returns_what_was_put(client: sdk_clients.Client) -> None:
    got = client.placement("shop/web")
    expected = _record(8).placement
    assert got.to_json(include_ready=False) == expected.to_json()
    assert got.to_json()["ready"] == {"dc1": 2, "aws-eu": 1, "gcp-eu": 0}
    assert got.spread == "shop/web"
    assert got.generation == 1
    assert got.computed_at == NOW
    assert [s.cap for s in got.subsets] == ["4", ""]
    assert got.subsets[0].ready == {"dc1": 2}
    assert got.conditions == [sdk.Condition(type="Placed", status="True", reason="AllPlaced")]


def test_placements_lists_by_key_and_filters_namespace(client: sdk_clients.Client) -> None:
    assert [p.spread for p in client.placements()] == ["other/api", "shop/web"]
    assert [p.spread for p in client.placements("shop")] == ["shop/web"]
    assert client.placements("nowhere") == []


def test_list_placements_pages(target: str) -> None:
    with grpc.insecure_channel(target) as channel:
        stub = placement_pb2_grpc.PlacementServiceStub(channel)
        first = stub.ListPlacements(placement_pb2.ListPlacementsRequest(page_size=1), timeout=5)
        second = stub.ListPlacements(placement_pb2.ListPlacementsRequest(
            page_size=1, page_token=first.next_page_token), timeout=5)
    assert [p.spread for p in first.placements] == ["other/api"]
    assert [p.spread for p in second.placements] == ["shop/web"]
    assert second.next_page_token == ""


def test_clusters_returns_what_was_put(client: sdk_clients.Client) -> None:
    found = client.clusters()
    assert [c.name for c in found] == ["aws-eu", "dc1", "gcp-eu"]
    dc1 = found[1]
    assert dc1.ready and not dc1.cordoned and dc1.node_count == 1
    assert dc1.labels == {names.REGION_LABEL: "onprem"}
    assert dc1.last_heartbeat == NOW and dc1.agent_version == "0.1.0"
    assert found[0].allocatable == {"cpu": "16", "memory": "64Gi", "pods": "20"}
    assert not found[2].ready and found[2].cordoned
    assert found[2].taints == [sdk.types.Taint(key="cordon", value="", effect="NoSchedule")]
    assert found[2].last_heartbeat is None
    assert found[0].node_pools == []
    assert client.clusters(include_node_pools=True)[0].node_pools[0].count == 2


def test_explain_gives_caps_capacities_and_reasons(client: sdk_clients.Client) -> None:
    why = client.explain("shop/web")
    assert why.spread == "shop/web"
    assert why.placement == client.placement("shop/web")
    onprem, eu = why.subsets
    assert (onprem.name, onprem.cap, onprem.replicas) == ("onprem", "4", 3)
    assert onprem.capacity == 3
    assert any("capacity" in r for r in onprem.reasons)
    gcp = next(c for c in eu.clusters if c.cluster == "gcp-eu")
    assert not gcp.ready and gcp.cordoned and gcp.reasons == ["not ready"]
    assert gcp.free_capacity == 0  # its snapshot has no nodes
    aws = next(c for c in eu.clusters if c.cluster == "aws-eu")
    assert aws.free_capacity == 20  # 2 nodes x 10 pod slots, nothing requested yet
    assert why.reasons == []


# --- errors ---------------------------------------------------------------------------------------


def test_missing_spread_raises_spread_not_found(client: sdk_clients.Client, target: str) -> None:
    with pytest.raises(sdk.SpreadNotFound, match="no spread shop/gone") as caught:
        client.placement("shop/gone")
    assert caught.value.code == "NOT_FOUND"
    with pytest.raises(sdk.SpreadNotFound):
        client.explain("shop/gone")
    with grpc.insecure_channel(target) as channel:
        stub = placement_pb2_grpc.PlacementServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raw:
            stub.GetPlacement(placement_pb2.GetPlacementRequest(spread="shop/gone"), timeout=5)
    assert raw.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("key", ["noslash", "/web", "shop/", "a/b/c", ""])
def test_bad_key_raises_invalid_request(client: sdk_clients.Client, key: str) -> None:
    with pytest.raises(sdk.InvalidRequest, match="namespace/name") as caught:
        client.placement(key)
    assert caught.value.code == "INVALID_ARGUMENT"


def test_unexpected_failure_is_internal_not_unknown(target: str,
                                                    source: in_memory_source.InMemorySource,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(namespace: str | None) -> list[convert.PlacementRecord]:
        raise RuntimeError("boom")

    monkeypatch.setattr(source, "placements", broken)
    with grpc.insecure_channel(target) as channel:
        stub = placement_pb2_grpc.PlacementServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raw:
            stub.ListPlacements(placement_pb2.ListPlacementsRequest(), timeout=5)
    assert raw.value.code() == grpc.StatusCode.INTERNAL
    assert "boom" not in raw.value.details()


def test_unreachable_coordinator_raises_quickly(flavour: sdk_clients.Flavour) -> None:
    start = time.monotonic()
    with flavour.connect("127.0.0.1:1", timeout=2.0) as client, \
            pytest.raises(sdk.CoordinatorUnavailable, match=r"coordinator at 127\.0\.0\.1:1"):
        client.placement("shop/web")
    assert time.monotonic() - start < 5


def test_a_closed_client_refuses_with_an_sdk_error(target: str, flavour: sdk_clients.Flavour) -> None:
    with flavour.connect(target, timeout=5.0) as client:
        assert client.placement("shop/web").replicas == 8
        client.close()
        with pytest.raises(sdk.FedspreadError, match=f"client of the coordinator at {target} is closed"):
            client.placement("shop/web")
        with pytest.raises(sdk.FedspreadError, match="is closed"):
            next(client.watch("shop/web"))


# --- simulate -------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["yaml", "dict", "model"])
def test_simulate_matches_the_core(client: sdk_clients.Client, form: str) -> None:
    parsed = problems.validate(spread.FederatedSpread,
                               yaml.safe_load(SPREAD_YAML), what="spread")
    given = {"yaml": SPREAD_YAML, "dict": parsed.model_dump(by_alias=True, exclude_none=True,
                                                            mode="json"), "model": parsed}[form]
    got = client.simulate(given, replicas=12)
    expected = placement.place(parsed.spec, replicas=12, snapshot=_snapshot())
    assert got.to_json(include_ready=False) == expected.to_json()
    assert got.spread == "" and got.ready == {}
    assert got.capacity_exhausted == expected.capacity_exhausted


def test_simulate_uses_template_replicas_and_requests(client: sdk_clients.Client) -> None:
    template = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 5, "template": {
        "spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "4"}}}]}}}}
    got = client.simulate(SPREAD_YAML, template=template)
    assert got.replicas == 5
    assert got.subsets[0].clusters == {"dc1": 2}  # 8 cpu / 4 cpu per pod


def test_simulate_on_a_given_snapshot(client: sdk_clients.Client) -> None:
    snapshot = cluster.CapacitySnapshot(clusters=[cluster.ClusterCapacity(name="dc1")])
    got = client.simulate(SPREAD_YAML, replicas=3, clusters=snapshot)
    assert got.clusters == {"dc1": 3}


def test_simulate_invalid_spread_lists_every_problem_path(client: sdk_clients.Client) -> None:
    with pytest.raises(sdk.InvalidRequest) as caught:
        client.simulate(BAD_SPREAD_YAML, replicas=3)
    paths = {p.path for p in caught.value.problems}
    assert "spec.subsets[0].maxReplicas" in paths
    assert "spec.subsets[1].bogus" in paths
    assert "spec.subsets[1].maxReplicas" not in paths
    for path in paths:
        assert path in str(caught.value)


@pytest.mark.parametrize(("kwargs", "path"), [
    ({"spread_input": "a: [unclosed"}, ""),
    ({"spread_input": SPREAD_YAML}, "replicas"),
    ({"spread_input": SPREAD_YAML, "replicas": 1, "template": "{not json"}, "templateJson"),
    ({"spread_input": SPREAD_YAML, "replicas": 1, "clusters": {"clusters": [{"nme": "x"}]}},
     "clusters[0].name"),
])
def test_simulate_other_invalid_inputs(client: sdk_clients.Client, kwargs: dict, path: str) -> None:
    with pytest.raises(sdk.InvalidRequest) as caught:
        client.simulate(**kwargs)
    assert path in [p.path for p in caught.value.problems]


# --- watch ----------------------------------------------------------------------------------------


def test_watch_yields_current_then_updates(client: sdk_clients.Client,
                                           source: in_memory_source.InMemorySource) -> None:
    stream = client.watch("shop/web", timeout=10)
    first = next(stream)
    assert first.replicas == 8
    timer = threading.Timer(0.2, lambda: source.put("shop/web", _record(10, generation=2)))
    timer.start()
    try:
        second = next(stream)
    finally:
        timer.cancel()
    assert (second.replicas, second.generation) == (10, 2)
    source.remove("shop/web")
    assert list(stream) == []  # deleted: the watch ends


def test_watch_unknown_spread_raises(client: sdk_clients.Client) -> None:
    with pytest.raises(sdk.SpreadNotFound):
        next(client.watch("shop/gone", timeout=5))


def test_watch_ends_quietly_at_its_timeout(client: sdk_clients.Client) -> None:
    start = time.monotonic()
    assert [p.replicas for p in client.watch("shop/web", timeout=0.5)] == [8]
    assert time.monotonic() - start < 5


def test_watch_many_reports_added_and_deleted(target: str,
                                              source: in_memory_source.InMemorySource) -> None:
    kind = placement_pb2.PlacementEvent
    with grpc.insecure_channel(target) as channel:
        stub = placement_pb2_grpc.PlacementServiceStub(channel)
        call = stub.WatchPlacement(placement_pb2.WatchPlacementRequest(namespace="shop"), timeout=10)
        initial = next(call)
        assert (initial.type, initial.spread) == (kind.TYPE_INITIAL, "shop/web")
        source.put("shop/new", _record(1))
        added = next(call)
        source.remove("shop/web")
        deleted = next(call)
        call.cancel()
    assert (added.type, added.spread) == (kind.TYPE_ADDED, "shop/new")
    assert (deleted.type, deleted.spread) == (kind.TYPE_DELETED, "shop/web")


# --- fedspread get --------------------------------------------------------------------------------


def test_get_placement_json_has_the_design_shape(target: str) -> None:
    result = testing.CliRunner().invoke(
        cli.main, ["get", "placement", "shop/web", "-o", "json", "--coordinator", target, "--insecure"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert set(shown) == {"replicas", "unplaced", "clusters", "subsets", "ready"}
    assert shown["ready"] == {"aws-eu": 1, "dc1": 2, "gcp-eu": 0}
    assert shown["subsets"][1] == {"name": "eu", "replicas": 5, "clusters": {"aws-eu": 5, "gcp-eu": 0},
                                   "reasons": ["gcp-eu: not ready"]}


def test_get_placement_table_and_env_coordinator(target: str) -> None:
    result = testing.CliRunner().invoke(cli.main, ["get", "placement", "shop/web"],
                                        env={"FEDSPREAD_COORDINATOR": target, "FEDSPREAD_INSECURE": "1"})
    assert result.exit_code == 0, result.output
    assert "onprem" in result.output and "dc1=2/3" in result.output
    assert "Placed=True AllPlaced" in result.output


def test_get_placement_missing_spread_is_one_line_exit_1(target: str) -> None:
    result = testing.CliRunner().invoke(
        cli.main, ["get", "placement", "shop/gone", "--coordinator", target, "--insecure"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == ["error: no spread shop/gone"]


def test_get_placement_unreachable_is_one_line_exit_1() -> None:
    result = testing.CliRunner().invoke(
        cli.main, ["get", "placement", "shop/web", "--coordinator", "127.0.0.1:1", "--timeout", "2",
                   "--insecure"])
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1
    assert "unreachable" in result.output


def test_get_clusters_json_and_table(target: str) -> None:
    runner = testing.CliRunner()
    as_json = runner.invoke(cli.main, ["get", "clusters", "-o", "json", "--coordinator", target,
                                       "--insecure"])
    assert as_json.exit_code == 0, as_json.output
    names = [c["name"] for c in json.loads(as_json.output)["clusters"]]
    assert names == ["aws-eu", "dc1", "gcp-eu"]
    table = runner.invoke(cli.main, ["get", "clusters", "--coordinator", target, "--insecure"])
    assert table.exit_code == 0, table.output
    assert "gcp-eu" in table.output and "NO" in table.output


def test_get_help_explains_the_commands() -> None:
    result = testing.CliRunner().invoke(cli.main, ["get", "placement", "--help"])
    assert result.exit_code == 0
    assert "FEDSPREAD_COORDINATOR" in result.output and "-n, --namespace" in result.output
    assert "kubectl fedspread get placement" in result.output


def test_get_placement_takes_kubectl_namespaces_and_yaml(target: str) -> None:
    runner = testing.CliRunner()
    flags = ["--coordinator", target, "--insecure"]
    as_yaml = runner.invoke(cli.main, ["get", "placement", "web", "-n", "shop", "-o", "yaml", *flags])
    assert as_yaml.exit_code == 0, as_yaml.output
    shown = yaml.safe_load(as_yaml.output)
    assert shown["ready"] == {"aws-eu": 1, "dc1": 2, "gcp-eu": 0}
    from_env = runner.invoke(cli.main, ["get", "placement", "web", "-o", "json", *flags],
                             env={"FEDSPREAD_NAMESPACE": "shop"})
    assert from_env.exit_code == 0 and json.loads(from_env.output) == shown
    default = runner.invoke(cli.main, ["get", "placement", "web", *flags])
    assert default.exit_code == 1 and "no spread default/web" in default.output
    clash = runner.invoke(cli.main, ["get", "placement", "shop/web", "-n", "other", *flags])
    assert clash.exit_code == 2 and "give one" in clash.output
    wide = runner.invoke(cli.main, ["get", "placement", "shop/web", "-o", "wide", *flags],
                         env={"COLUMNS": "200"})
    assert wide.exit_code == 0 and "ready" in wide.output, wide.output
    clusters = runner.invoke(cli.main, ["get", "clusters", "-o", "wide", *flags], env={"COLUMNS": "250"})
    assert clusters.exit_code == 0 and "taints" in clusters.output and "pools" in clusters.output


def test_the_package_is_typed_and_installs_the_kubectl_plugin() -> None:
    root = pathlib.Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())
    scripts = project["project"]["scripts"]
    assert scripts["kubectl-fedspread"] == scripts["fedspread"] == "federation.cli:main"
    assert (root / "federation" / "py.typed").exists()
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["federation"]


def test_a_rollout_shows_each_subsets_pods_per_revision(source: in_memory_source.InMemorySource,
                                                        target: str, flavour: sdk_clients.Flavour) -> None:
    """While the member workload rolls (two template revisions), the SDK, `get -o json` and the
    table say how many of each subset's pods are of which revision; a steady spread shows none."""
    rolling = dataclasses.replace(_record(8), revisions={"eu": {"rev-new": 2, "rev-old": 3}})
    source.put("shop/web", rolling)
    with flavour.connect(target, timeout=5.0) as connected:
        got = connected.placement("shop/web")
        steady = connected.placement("other/api")
    assert [s.revisions for s in got.subsets] == [{}, {"rev-new": 2, "rev-old": 3}]
    assert all(not s.revisions for s in steady.subsets)
    flags = ["--coordinator", target, "--insecure"]
    shown = json.loads(testing.CliRunner().invoke(
        cli.main, ["get", "placement", "shop/web", "-o", "json", *flags]).output)
    assert [s.get("revisions") for s in shown["subsets"]] == [None, {"rev-new": 2, "rev-old": 3}]
    table = testing.CliRunner().invoke(cli.main, ["get", "placement", "shop/web", *flags],
                                       env={"COLUMNS": "200"})
    assert "rolling out, eu: rev-new 2, rev-old 3" in table.output, table.output


def test_get_placement_shows_the_usage_the_hubs_hpas_read(source: in_memory_source.InMemorySource,
                                                          target: str) -> None:
    """A live spread's usage (GetPlacement): one line in the table, once a metric beyond the Ready
    pods has a value, naming the members left out; `"usage"` in the JSON."""
    values = {name: usage_rules.MetricValue(name, milli, timestamp=0.0, window_seconds=15.0)
              for name, milli in ((usage_rules.CPU_UTILIZATION, 65_000),
                                  (usage_rules.READY_REPLICAS, 3_000))}
    source.put("shop/web", dataclasses.replace(_record(8), usage=usage_rules.FederationUsage(
        values=values, ready_pods=3, unmeasured_pods=1, without_metrics=("gcp-eu",))))
    table = testing.CliRunner().invoke(
        cli.main, ["get", "placement", "shop/web", "--coordinator", target, "--insecure"])
    assert table.exit_code == 0, table.output
    assert ("usage: fedspread-cpu-utilization 65, fedspread-ready-replicas 3 (over 3 Ready pods, 1 counted "
            "at the average); no metrics API: gcp-eu") in " ".join(table.output.split())
    shown = json.loads(testing.CliRunner().invoke(cli.main, [
        "get", "placement", "shop/web", "-o", "json", "--coordinator", target, "--insecure"]).output)
    assert shown["usage"] == {"metrics": {"fedspread-cpu-utilization": "65", "fedspread-ready-replicas": "3"},
                              "readyPods": 3, "unmeasuredPods": 1, "withoutMetrics": ["gcp-eu"], "stale": []}
    source.put("shop/web", dataclasses.replace(_record(8), usage=usage_rules.FederationUsage(
        values={usage_rules.READY_REPLICAS: values[usage_rules.READY_REPLICAS]}, ready_pods=3,
        unmeasured_pods=0)))
    quiet = testing.CliRunner().invoke(
        cli.main, ["get", "placement", "shop/web", "--coordinator", target, "--insecure"])
    assert quiet.exit_code == 0 and "usage:" not in quiet.output, "Ready pods alone: no usage line"
