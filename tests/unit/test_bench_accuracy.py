"""The accuracy benchmark's definitions (issue 15), without a cluster.

Why: the benchmark runs on a whole federation and takes a minute, so its arithmetic is tested here:
how a pod's history is classified (accurate, rescheduled, waiting, unassigned), how long it was
Pending, what the summary counts, when another subset "had room", and that the scenario's
FederatedSpread is valid and turns the template into exactly the pods its room judgement assumes
(through the webhook's own mutation). The runner must list the benchmark, or `make bench` skips it.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import accuracy_pods as pods
from bench import accuracy_scenario as world
from bench import run as runner
from federation.api import spread as spread_api
from federation.core import mutation


def history(subset: str | None = "a", *, created: float = 0.0, running: float | None = None,
            deleted: float | None = None, room: tuple[str, ...] = ()) -> pods.PodHistory:
    return pods.PodHistory(cluster="c1", name="ns/p", subset=subset, created=created, running=running,
                           deleted=deleted, room_elsewhere=room)


@pytest.mark.parametrize(("pod", "expected"), [
    (history(running=2.0), "accurate"),
    (history(running=2.0, deleted=30.0), "accurate"),  # ran, then removed: it was placed right
    (history(deleted=15.0), "rescheduled"),  # deleted before it ever ran
    (history(running=16.0, deleted=15.0), "rescheduled"),  # seen Running only while terminating
    (history(), "waiting"),
    (history(None, running=1.0), "unassigned"),
])
def test_each_history_has_one_outcome(pod: pods.PodHistory, expected: pods.Outcome) -> None:
    assert pods.outcome(pod) == expected


def test_pending_lasts_until_running_deletion_or_the_end() -> None:
    assert pods.pending_seconds(history(created=1.0, running=3.5), end=100.0) == 2.5
    assert pods.pending_seconds(history(created=1.0, deleted=16.0), end=100.0) == 15.0
    assert pods.pending_seconds(history(created=1.0), end=12.0) == 11.0


def test_the_summary_counts_placed_pods_and_those_that_waited() -> None:
    found = pods.summarize([
        history(running=0.5), history(running=1.0), history(running=12.0, room=("b",)),
        history(deleted=15.0, room=("b", "c")),  # rescheduled, stuck while b and c had room
        history(created=5.0, deleted=16.0),  # rescheduled after 11 s, no room anywhere
        history(created=30.0),  # still waiting at the end, 8 s
        history(None, running=11.0, room=("b",)),  # no subset: waited, but is not "stuck in a subset"
    ], end=38.0)
    counts = (found.placed, found.accurate, found.rescheduled, found.waiting, found.unassigned)
    assert counts == (6, 3, 2, 1, 1)
    assert found.accuracy == 0.5
    assert found.pending_over_limit == 4
    assert found.stuck_with_room == 2
    assert (found.pending_p50_s, found.pending_max_s) == (11.0, 15.0)


def test_no_pods_is_no_inaccuracy() -> None:
    assert pods.summarize([], end=1.0).accuracy == 1.0


def test_percentiles_are_nearest_rank_over_every_sample() -> None:
    waited = pods.summarize([history(running=float(v)) for v in range(1, 101)], end=200.0)  # 1..100 s
    none = pods.summarize([], end=1.0)
    assert (waited.pending_p50_s, waited.pending_p99_s, none.pending_p50_s) == (50, 99, 0), (
        "nearest rank (admission_stats.percentile): a median would say 50.5")


# --- room ------------------------------------------------------------------------------------------


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", labels: dict[str, str] | None = None,
         taint: str | None = None) -> dict[str, Any]:
    taints = [{"key": taint, "effect": "NoSchedule"}] if taint else []
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "3"}}}


def need(cpu: str, memory: str = "1Gi", **selector: str) -> pods.Need:
    return pods.Need(resources=pods.milli_units({"cpu": cpu, "memory": memory}), selector=selector)


def test_a_node_offers_what_its_bound_pods_leave() -> None:
    bound = [pods.pod_requests({"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                                               {"resources": {"requests": {"cpu": "500m"}}}]})]
    room = pods.node_room(node("n1", labels={"pool": "x"}, taint="gpu"), bound)
    assert room.free == {"cpu": 2500, "memory": 7 * 2**30 * 1000, "pods": 2000}
    assert (room.labels, room.taints) == ({"pool": "x"}, frozenset({"gpu"}))


def test_pods_fit_node_by_node_on_matching_untainted_nodes() -> None:
    nodes = [pods.node_room(node("a", labels={"arch": "arm64"}), []),
             pods.node_room(node("b", cpu="16", memory="64Gi"), []),
             pods.node_room(node("g", cpu="16", memory="64Gi", taint="gpu"), [])]
    assert pods.fits(need("1500m"), nodes) == 2 + 3  # 2 by cpu on a; 3 by the pods limit on b
    assert pods.fits(need("1", memory="3Gi", arch="arm64"), nodes) == 2  # memory binds on a
    tolerant = pods.Need(resources=need("1").resources, tolerated=frozenset({"gpu"}))
    assert pods.fits(tolerant, nodes) == 9


def test_another_subset_has_room_below_its_cap_beyond_its_own_waiting_pods() -> None:
    nodes = {"c1": [pods.node_room(node("a"), [])], "c2": [pods.node_room(node("b"), [])]}
    subsets = [pods.SubsetRoom("a", "c1", need("1")), pods.SubsetRoom("b", "c2", need("1"), cap=2),
               pods.SubsetRoom("c", "c2", need("2"))]

    def others(placed: dict[str, int], unbound: dict[str, int]) -> tuple[str, ...]:
        return pods.subsets_with_room("a", subsets, nodes=nodes, placed=placed, unbound=unbound)

    assert others({}, {}) == ("b", "c")  # never the pod's own subset
    assert others({"b": 2}, {}) == ("c",)  # b is at its cap
    assert others({}, {"c": 2}) == ("b",)  # c's own 2 unbound pods take its 2 slots
    assert pods.spare(subsets[1], nodes=nodes, placed={"b": 1}, unbound={}) == 1


# --- the scenario ----------------------------------------------------------------------------------


def test_the_spread_is_valid_and_its_subsets_make_the_pods_the_room_judgement_assumes() -> None:
    scenario = world.scenario(world.QUICK)
    spread = spread_api.FederatedSpread.model_validate(scenario.spread())
    assert spread.spec.schedule_strategy.type == "Adaptive"
    template = scenario.deployment(1)["spec"]["template"]
    specs = scenario.spread()["spec"]["subsets"]
    for subset, spec in zip(scenario.subsets, specs, strict=True):
        pod = mutation.mutate_pod(template, subset=subset.name, preferred_terms=[], tolerations=[],
                                  required_term=spec.get("requiredNodeSelectorTerm"), patch=spec.get("patch"))
        (container,) = pod["spec"]["containers"]
        assert container["resources"]["requests"] == subset.pod.requests(), subset.name
        terms = pod["spec"].get("affinity", {}).get("nodeAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
        required = {e["key"]: e["values"][0] for t in terms for e in t["matchExpressions"]}
        assert {**pod["spec"].get("nodeSelector", {}), **required} == dict(subset.pod.selector), subset.name
    assert any("nodeSelector" in s.get("patch", {}).get("spec", {}) for s in specs), "a patch pins a pool"


def test_the_full_size_is_bigger_and_both_only_scale_up() -> None:
    for size in (world.QUICK, world.FULL):
        assert list(size.steps) == sorted(set(size.steps)), size
    assert world.FULL.nodes > world.QUICK.nodes and world.FULL.steps[-1] > world.QUICK.steps[-1]


def test_the_runner_runs_the_accuracy_benchmark() -> None:
    assert "accuracy" in runner.BENCHMARKS
