"""`topologySpread` and floors on real members: three regions scaled up and down, the skew kept at every
step in the members' own pods, deletion costs followed by the real controller, a floor kept.

The session's demo federation (`conftest.federation`: dc1, aws-eu, gcp-eu, each a real control
plane with its own agent, and the coordinator) is relabelled for this test only, one region per
member (`test.fedspread.io/region`: r1, r2, r3), so the three domains are three real clusters with
live agents. The spread (Fixed) lists four ordered subsets — `a` dc1 capped at 2, `b` aws-eu, `c`
gcp-eu with a floor of 2, `d` dc1 again — under `maxSkew: 1` over that key. Without the rule `a` and
`b` would take everything; with it, each step's Running pods, per cluster and per subset annotation,
must be exactly the rule's answer, and their regions within one pod of each other:

- 6: the floor first (c 2), then a 2, b 2 — 2/2/2;
- 9: b 3, c 3 and, with `a` capped, the fourth subset `d` takes dc1's third — 3/3/3;
- 5: `d` leaves first (the last subset), then c down to its floor, then b — 2/1/2; in dc1 the real
  ReplicaSet controller removes `d`'s pod, whose deletion cost the agent set lowest, and `a`'s two
  pods run on — one of them replaced just before, so the newest pod, which the controller would
  remove first were the costs equal;
- 4: `a` gives, `c` stays at its floor 2 although it is a later subset than `b` — 1/1/2 (without
  the floor `c` would have given first: 2/2/1 at 5, 2/1/1 at 4); the placement and the
  coordinator's explanation name "floor 2".

What this proves and what the unit tests prove is written down in docs/decisions.md ("Issue 25:
what the sandbox test proves").
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import demo_scene
import pytest
import waiting
from demo_scene import TIMEOUT, Apis, Seen

from federation.api import cluster, common, names
from federation.api import spread as spread_api
from federation.demo import environment
from tests.support import builders

KEY = "test.fedspread.io/region"
LABEL = f"{names.SPREAD_LABEL}=web"
"""The label selector of the spread's pods in the members."""
REGIONS = {"dc1": "r1", "aws-eu": "r2", "gcp-eu": "r3"}
SUBSETS: list[dict[str, Any]] = [
    {"name": "a", "clusters": ["dc1"], "maxReplicas": 2},
    {"name": "b", "clusters": ["aws-eu"]},
    {"name": "c", "clusters": ["gcp-eu"], "minReplicas": 2},
    {"name": "d", "clusters": ["dc1"]},
]
STEPS: list[tuple[int, demo_scene.Placement]] = [
    (6, {"a": {"dc1": 2}, "b": {"aws-eu": 2}, "c": {"gcp-eu": 2}, "d": {"dc1": 0}}),
    (9, {"a": {"dc1": 2}, "b": {"aws-eu": 3}, "c": {"gcp-eu": 3}, "d": {"dc1": 1}}),
    (5, {"a": {"dc1": 2}, "b": {"aws-eu": 1}, "c": {"gcp-eu": 2}, "d": {"dc1": 0}}),
    (4, {"a": {"dc1": 1}, "b": {"aws-eu": 1}, "c": {"gcp-eu": 2}, "d": {"dc1": 0}}),
]


@pytest.fixture(scope="module")
def apis(federation: environment.Federation) -> Iterator[Apis]:
    with demo_scene.connect(federation) as connected:
        yield connected


def relabel(apis: Apis, regions: dict[str, str | None]) -> None:
    for name, region in regions.items():
        apis.custom().patch_cluster_custom_object(common.API_GROUP, common.API_VERSION, cluster.PLURAL, name,
                                                  {"metadata": {"labels": {KEY: region}}})


@pytest.fixture
def regions(apis: Apis) -> Iterator[None]:
    """One test region per member, as the coordinator sees them; removed afterwards."""
    assert set(REGIONS) == set(apis.members)
    relabel(apis, dict(REGIONS))
    try:
        waiting.wait_for(lambda: {c.name: c.labels.get(KEY) for c in apis.placements.clusters()} == REGIONS,
                         timeout=TIMEOUT, message="the coordinator never saw the test regions")
        yield
    finally:
        relabel(apis, dict.fromkeys(REGIONS))


def spread_body() -> dict[str, Any]:
    return {"apiVersion": f"{common.API_GROUP}/{common.API_VERSION}", "kind": spread_api.KIND,
            "metadata": {"name": "web"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "subsets": SUBSETS, "topologySpread": [{"topologyKey": KEY, "maxSkew": 1}],
                     "scheduleStrategy": {"type": "Fixed"}}}


def pods_of(seen: Seen, member: str, subset: str) -> dict[str, int]:
    """Pod name → deletion cost, for `member`'s pods of `subset` (a missing cost reads as 0)."""
    found = {}
    for pod in seen.pods[member]:
        annotations = pod.metadata.annotations or {}
        if annotations.get(names.SUBSET_ANNOTATION) == subset:
            found[pod.metadata.name] = int(annotations.get(names.DELETION_COST_ANNOTATION, "0"))
    return found


def reach(apis: Apis, key: str, want: demo_scene.Placement, *, what: str) -> Seen:
    """Wait until the coordinator places `want` and the members run exactly those pods."""
    last: list[Seen] = []

    def probe() -> Seen | None:
        last[:] = [demo_scene.observe(apis, key, LABEL)]
        return last[0] if demo_scene.reached(last[0], want, set()) else None

    found: Seen = waiting.wait_for(probe, timeout=TIMEOUT, interval=0.5, message=lambda: (
        f"{what}: wanted {want}; last seen {last[0].describe() if last else 'nothing'}"))
    return found


def newest_in_a(apis: Apis, key: str, seen: Seen, want: demo_scene.Placement) -> Seen:
    """Delete one of `a`'s pods in dc1: its replacement (admitted into `a`, whose quota it lacks) is
    now dc1's newest pod, younger than `d`'s. The ReplicaSet controller removes the newest pods
    first when deletion costs are equal, so only the costs can spare it on the next scale-down."""
    victim = next(iter(pods_of(seen, "dc1", "a")))
    apis.core("dc1").delete_namespaced_pod(victim, key.partition("/")[0], grace_period_seconds=0)
    waiting.wait_for(lambda: victim not in pods_of(demo_scene.observe(apis, key, LABEL), "dc1", "a"),
                     timeout=TIMEOUT, message=f"{victim} was never deleted")
    return reach(apis, key, want, what=f"{victim} replaced in subset a")


def cheapest_is(seen: Seen, member: str, *, cheap: str, dear: str) -> bool:
    """Every pod of subset `cheap` in `member` costs less to delete than every pod of `dear`."""
    low, high = pods_of(seen, member, cheap).values(), pods_of(seen, member, dear).values()
    return bool(low) and bool(high) and max(low) < min(high)


def test_three_regions_keep_their_skew_and_a_floor_through_scaling_on_real_members(
        apis: Apis, regions: None) -> None:
    namespace = f"topology-{uuid.uuid4().hex[:6]}"
    key = f"{namespace}/web"
    workload = builders.deployment("web", STEPS[0][0], cpu="10m")
    waiting.wait_for(lambda: demo_scene.idle(apis), timeout=TIMEOUT, message="the federation is not idle")
    apis.core("hub").create_namespace({"metadata": {"name": namespace}})
    try:
        apis.apps("hub").create_namespaced_deployment(namespace, workload)
        apis.custom().create_namespaced_custom_object(
            common.API_GROUP, common.API_VERSION, namespace, spread_api.PLURAL, spread_body())
        in_dc1: dict[str, dict[str, int]] = {}
        for replicas, want in STEPS:
            apis.apps("hub").patch_namespaced_deployment_scale(
                "web", namespace, {"spec": {"replicas": replicas}})
            seen = reach(apis, key, want, what=f"at {replicas} replicas")
            per_region = {REGIONS[member]: len(pods) for member, pods in seen.pods.items()}
            assert sum(per_region.values()) == replicas
            assert max(per_region.values()) - min(per_region.values()) <= 1, (replicas, per_region)
            if replicas == 9:
                seen = newest_in_a(apis, key, seen, want)
                waiting.wait_for(
                    lambda: cheapest_is(demo_scene.observe(apis, key, LABEL), "dc1", cheap="d", dear="a"),
                    timeout=TIMEOUT, message="the agent never made d's pod in dc1 cheaper than a's")
                in_dc1 = {s: pods_of(seen, "dc1", s) for s in ("a", "d")}
            if replicas == 5:  # the real controller followed the costs: d's pod went, a's two run on
                assert set(pods_of(seen, "dc1", "a")) == set(in_dc1["a"]), (in_dc1, seen.describe())
        explained = {s.name: s.reasons for s in apis.placements.explain(key).subsets}
        assert "floor 2" in explained["c"], explained
        assert apis.placements.placement(key).subsets[2].reasons == ["floor 2"]
    finally:
        demo_scene.clean_up(apis, namespace, workload, "web")
