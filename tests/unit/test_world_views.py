"""The World's incremental placement inputs equal the straightforward ones, on random event sequences.

`World.view_for` answers from per-cluster ledgers, cached shapes and selections, shared member views
and indexes, all kept up to date as events arrive. The reference here recomputes everything from the
facts each time, the way the coordinator did before issue 7: every other placed spread's pending
pods (placed minus running, each subset's shape from the template), `deduct_pending` on the whole
`snapshot_for`, then `placement_view.view_of`. Random worlds get random events — inventories, pod counts,
labels, cordons, heartbeats and a moving clock, spread edits, template changes, scaling, deletions
and recompute rounds, in-process or through a parallel batch — and after every event the two
must agree exactly, as must the rounds' placements (a round of several against one snapshot: the
reference gives `placement_round` the whole deducted snapshot and `view_of` with the room).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Collection, Sequence
from typing import Any

import hypothesis
import strategies as fs
from hypothesis import strategies as st

from federation.api import cluster, common, names
from federation.api import spread as spread_api
from federation.coordinator.model import loop, world
from federation.core import (
    apportion,
    fit,
    handover,
    pending_deduction,
    placement,
    placement_round,
    placement_view,
    status,
)
from tests.support import builders
from tests.support.clock import ManualClock

PROPERTY = hypothesis.settings(
    max_examples=150, deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow, hypothesis.HealthCheck.data_too_large],
)
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
NAMES = fs.CLUSTER_NAMES[:4]
KEYS = ("shop/a", "shop/b", "shop/c")


# --- the reference: everything recomputed from the facts ----------------------------------------


def reference_shape(entry: world.SpreadEntry) -> fit.PodShape:
    return fit.shape_from_deployment(entry.template) if entry.template else fit.empty_shape()


def reference_pending(model: world.World, key: str | Collection[str]) -> list[pending_deduction.PendingPods]:
    """Every other placed spread's placed-but-not-running pods (the pre-issue-7 `pending_of_others`);
    `key` a collection: the pending pods of every spread outside it (a round's snapshot)."""
    besides = {key} if isinstance(key, str) else set(key)
    pending = []
    for other in model.spreads():
        last = model.placements.get(other.key)
        if other.key in besides or last is None:
            continue
        shape = reference_shape(other)
        running = model.pods.running_for(other.key)
        specs = {s.name: s for s in other.spec.subsets}
        for result in last.subsets:
            if result.name not in specs:
                continue
            subset_shape = fit.with_subset(shape, specs[result.name])
            for name, placed in sorted(result.clusters.items()):
                count = placed - running.get(result.name, {}).get(name, 0)
                if count > 0:
                    pending.append(pending_deduction.PendingPods(
                        cluster=name, shape=subset_shape, count=count))
    return pending


def reference_snapshot(model: world.World, key: str) -> cluster.CapacitySnapshot:
    """`snapshot_for`, plus each decommissioned cluster whose MemberCluster is gone: it stays out of
    every selection, even where a subset names it."""
    known = model.snapshot_for(key)
    listed = {c.name for c in known.clusters}
    retired = [cluster.ClusterCapacity(name=name, ready=False, decommissioned=True)
               for name in NAMES if name not in listed and model.decommissioned(name)]
    return cluster.CapacitySnapshot(clusters=[*known.clusters, *retired])


def reference_view(model: world.World, key: str) -> placement_view.View:
    entry = model.spread(key)
    assert entry is not None
    snapshot = pending_deduction.deduct_pending(reference_snapshot(model, key), reference_pending(model, key))
    return placement_view.view_of(entry.spec, snapshot=snapshot, shape=reference_shape(entry))


def selectable(view: placement_view.View) -> placement_view.View:
    """`view` listing the clusters the spread can select, as the coordinator's placements do."""
    return dataclasses.replace(view, names=tuple(view.members))


def check(model: world.World) -> None:
    for entry in model.spreads():
        view, reference = model.view_for(entry.key), reference_view(model, entry.key)
        assert view == selectable(reference), entry.key  # view_of lists every cluster
        assert model.pending_pods(besides=entry.key) == reference_pending(model, entry.key)
        snapshot = reference_snapshot(model, entry.key)
        selected = {n for s in entry.spec.subsets for n in placement_view.selected_clusters(s, snapshot)}
        ready = {n for n in selected if model.ready(n, after=entry.lost_after)}
        assert model.ready_selected(entry.key) == ready


# --- random worlds and events ---------------------------------------------------------------------


def template(cpu: str | None, *, selector: str | None, tolerate: bool, replicas: int = 1) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "app", "image": "web"}]}
    if cpu is not None:
        pod["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    if selector is not None:
        pod["nodeSelector"] = {fs.POOL_TYPE_LABEL: selector}
    if tolerate:
        pod["tolerations"] = [{"key": fs.NODE_TAINT_KEY, "operator": "Exists"}]
    return {"spec": {"replicas": replicas, "template": {"spec": pod}}}


templates = st.builds(
    template, st.sampled_from((None, "0", "250m", "333m", "1", "3")),
    selector=st.none() | st.sampled_from(fs.POOL_TYPES), tolerate=st.booleans(),
)


CLUSTER_TOLERATIONS: list[list[dict[str, Any]]] = [
    [], [], [{"operator": "Exists"}],
    [{"key": builders.CORDON_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
]
"""Spreads with equal pods share cached member views; some tolerate the cordon, some do not."""


@st.composite
def spreads(draw: st.DrawFn, key: str, *, simulating: bool = False) -> spread_api.FederatedSpread:
    """A spread `key` over the clusters; `simulating`: Adaptive with simulation (capacity binds)."""
    adaptive: dict[str, Any] = {"strategy_types": ("Adaptive",), "simulation": True} if simulating else {}
    spec = draw(fs.spreads(list(NAMES), max_subsets=3, patches=True, **adaptive))
    data = spec.model_dump(by_alias=True, mode="json")
    data["failover"] = {"clusterLostSeconds": draw(st.sampled_from((30, 60)))}
    data["clusterTolerations"] = draw(st.sampled_from(CLUSTER_TOLERATIONS))
    # Some spread their replicas across regions: their views carry the clusters' labels.
    data["topologySpread"] = draw(st.sampled_from(([], [{"topologyKey": names.REGION_LABEL, "maxSkew": 1}])))
    namespace, name = key.split("/")
    return spread_api.FederatedSpread.model_validate(
        {"metadata": {"name": name, "namespace": namespace}, "spec": data})


@st.composite
def inventories(draw: st.DrawFn) -> list[cluster.NodePool]:
    pools = [cluster.NodePool.model_validate(draw(fs.node_pools(i))) for i in range(draw(st.integers(0, 2)))]
    if pools and draw(st.integers(0, 3)) == 0:
        pools[0] = pools[0].model_copy(update={"requested": {**pools[0].requested, "cpu": "1e-12"}})
    return pools


def pod_report(model: world.World, name: str, draw: st.DrawFn) -> dict[str, dict[str, status.ClusterPods]]:
    """Some of what is placed on `name` runs (sometimes more than placed: an agent's view may lead)."""
    report: dict[str, dict[str, status.ClusterPods]] = {}
    for key, result in model.placements.items():
        for subset in result.subsets:
            placed = subset.clusters.get(name, 0)
            if placed and draw(st.booleans()):
                running = draw(st.integers(0, placed + 1))
                report.setdefault(key, {})[subset.name] = status.ClusterPods(running=running)
    return report


Event = Callable[[world.World], Any]


def draw_event(model: world.World, clock: ManualClock, data: st.DataObject) -> tuple[str, Event]:
    """A random event, as a function applied to the world under test and to its twin alike."""
    kind = data.draw(st.sampled_from((
        "recompute", "recompute", "recompute", "inventory", "pods", "labels", "beat", "clock",
        "spread", "template", "scale", "delete-spread", "delete-cluster", "mark",
    )))
    name = data.draw(st.sampled_from(NAMES))
    key = data.draw(st.sampled_from(KEYS))
    entry = model.spread(key)
    if kind == "recompute":
        keys = data.draw(st.just(list(KEYS)) | st.lists(st.sampled_from(KEYS), min_size=1, unique=True))
        parallel = data.draw(st.booleans())
        return kind, lambda m: (keys, parallel)
    if kind == "inventory":
        pools = data.draw(inventories())
        return kind, lambda m: m.inventory(name, pools)
    if kind == "pods":
        report = pod_report(model, name, data.draw)
        return kind, lambda m: m.pod_counts(name, report)
    if kind == "labels":
        labels = {names.REGION_LABEL: data.draw(st.sampled_from(fs.REGIONS))}
        cordoned = data.draw(st.integers(0, 3)) == 0
        effect = data.draw(st.sampled_from(["NoSchedule", "NoExecute"]))
        taints = [common.Taint(key=builders.CORDON_TAINT_KEY, effect=effect)] if cordoned else []
        retired = data.draw(st.integers(0, 4)) == 0  # decommissioned: in no spread's selection
        return kind, lambda m: m.upsert_cluster(name, labels=labels, taints=taints, decommission=retired)
    if kind == "beat":
        return kind, lambda m: m.heartbeat(name)
    if kind == "clock":
        seconds = data.draw(st.sampled_from((10, 31, 45, 61)))
        return kind, lambda m: None if m is not model else clock.advance(seconds)
    if kind == "spread":
        item = data.draw(spreads(key))
        return kind, lambda m: m.upsert_spread(item)
    if kind == "template":
        replicas, pod = data.draw(st.integers(0, 12)), data.draw(templates)
        return kind, lambda m: m.set_target(key, replicas=replicas, template=pod)
    if kind == "scale" and entry is not None:
        replicas, pod = data.draw(st.integers(0, 20)), entry.template
        return kind, lambda m: m.set_target(key, replicas=replicas, template=pod)
    if kind == "delete-spread":
        return kind, lambda m: m.delete_spread(key)
    if kind == "delete-cluster":
        return kind, lambda m: m.delete_cluster(name)
    if kind == "mark" and entry is not None:
        subset = data.draw(st.sampled_from([s.name for s in entry.spec.subsets]))
        since = clock()
        return kind, lambda m: m.unschedulable(name, spread=key, subset=subset, since=since)
    return "nothing", lambda m: None


def reference_round(
    twin: world.World, keys: Sequence[str], *, now: datetime.datetime, replaced: list[int] | None = None,
) -> dict[str, Any]:
    """The round on the reference's inputs: one spread placed on the world as it is; several
    against one snapshot (`placement_round.place_round`: every spread outside the round's pending
    pods deducted from the whole `snapshot_for`, each spread's view `view_of` that snapshot with
    the room it is placed against), the failover brake decided for each, in key order, first.
    `replaced`, given, gets the number of spreads placed again."""
    entries = []
    for key in sorted(set(keys)):
        entry = twin.spread(key)
        if entry is None:
            twin.drop(key)
        elif entry.replicas is not None:
            entries.append(entry)
    kept = {e.key: loop.brake_for(twin, e, now=now) for e in entries}  # not what is compared here
    round_keys = [e.key for e in entries]
    outside = reference_pending(twin, round_keys) if len(entries) > 1 else []

    def place(key: str, room: placement_view.Room | None) -> placement_round.Placed:
        entry = twin.spread(key)
        assert entry is not None and entry.replicas is not None
        shape = reference_shape(entry)
        if room is None:  # one spread: the view the world shows it
            view = reference_view(twin, key)
        else:
            snapshot = pending_deduction.deduct_pending(reference_snapshot(twin, key), outside)
            view = placement_view.view_of(entry.spec, snapshot=snapshot, shape=shape, room=room)
        view = placement_view.holding(selectable(view), kept[key])
        running = twin.pods.running_for(key)
        result = placement.place_view(
            entry.spec, replicas=entry.replicas, view=view, current=twin.current_for(key), running=running,
            unschedulable=twin.marks_for(key), now=now, waiting=twin.waiting_for(key),
            # in a round of several, each spread's own remainder phase (the coordinator's rule)
            remainder_phase=apportion.phase_of(key) if len(entries) > 1 else None,
        )
        usable = twin.ready_selected(key)  # the handover, as the coordinator's loop applies it
        result = handover.keep_ready(
            result, replicas=entry.replicas, ready=twin.pods.ready_for(key, usable=usable),
            unverified=twin.pods.unverified_for(key, usable=usable))
        profiles = placement_round.profiles_of(entry.spec, shape)
        return placement_round.Placed(
            result, placement_round.charges_of(result, running=running, profiles=profiles), profiles)

    if len(entries) == 1:
        answers = {round_keys[0]: place(round_keys[0], None).result}
        if replaced is not None:
            replaced.append(0)
    elif entries:
        snapshot = pending_deduction.deduct_pending(reference_snapshot(twin, round_keys[0]), outside)
        pools = {c.name: tuple(fit.pool_of(p) for p in c.node_pools) for c in snapshot.clusters}
        settled = placement_round.place_round(round_keys, pools=pools, place=place)
        answers = {key: found.result for key, found in settled.placed.items()}
        if replaced is not None:
            replaced.append(len(settled.replaced))
    else:
        answers = {}
        if replaced is not None:
            replaced.append(0)
    for key in round_keys:
        twin.store(key, answers[key])
        twin.settled_placement(key, held=kept[key])  # as the loop's `_store`: the clusters it was placed with
    return answers


@PROPERTY
@hypothesis.given(data=st.data())
def test_views_and_rounds_equal_the_straightforward_reference(data: st.DataObject) -> None:
    clock = ManualClock(T0)
    model, twin = world.World(clock), world.World(clock)
    setup: list[Event] = []
    for name in NAMES:
        labels = {names.REGION_LABEL: data.draw(st.sampled_from(fs.REGIONS))}
        pools = data.draw(inventories())
        setup.append(lambda m, n=name, l=labels, p=pools: (  # noqa: E741
            m.upsert_cluster(n, labels=l), m.inventory(n, p), m.heartbeat(n)))
    for key in KEYS:
        item, replicas, pod = data.draw(spreads(key)), data.draw(st.integers(0, 12)), data.draw(templates)
        setup.append(lambda m, k=key, i=item, r=replicas, t=pod: (
            m.upsert_spread(i), m.set_target(k, replicas=r, template=t)))
    for event in setup:
        event(model)
        event(twin)
    check(model)
    for _step in range(data.draw(st.integers(1, 16))):
        kind, event = draw_event(model, clock, data)
        if kind == "recompute":
            keys, parallel = event(model)
            batch = loop.answer_all if parallel else None
            result = loop.recompute(model, keys, now=clock(), place_batch=batch)
            assert result.placements == reference_round(twin, keys, now=clock())
            assert model.placements == twin.placements
        else:
            event(model)
            event(twin)
        check(model)



def test_the_reference_round_keeps_the_clusters_a_spread_was_placed_with() -> None:
    """Regression: the reference must record, as the loop's `_store` does, the ready clusters each
    spread was placed with (`settled_placement`); otherwise every ready cluster looks returned from
    failover, `current_for` counts what its agent reports running, and a NoSchedule-cordoned cluster
    whose report leads the placement keeps more than it was given (the views were equal)."""
    clock = ManualClock(T0)
    model, twin = world.World(clock), world.World(clock)
    item = spread_api.FederatedSpread.model_validate({
        "metadata": {"name": "a", "namespace": "shop"},
        "spec": {"targetRef": {"name": "web"}, "scheduleStrategy": {"type": "Fixed"}, "subsets": [
            {"name": "home", "clusters": ["c0"], "maxReplicas": 2}, {"name": "rest", "clusters": ["c1"]}]},
    })
    pod = template("1", selector=None, tolerate=False)
    region = {names.REGION_LABEL: fs.REGIONS[0]}
    cordon = [common.Taint(key=builders.CORDON_TAINT_KEY, effect="NoSchedule")]
    report = {"shop/a": {"rest": status.ClusterPods(running=3)}}  # the agent's count leads the placement

    def apply(event: Event) -> None:
        event(model)
        event(twin)

    for name in ("c0", "c1"):
        apply(lambda m, n=name: (m.upsert_cluster(n, labels=region), m.inventory(n, [builders.node_pool(2)]),
                                 m.heartbeat(n)))
    apply(lambda m: (m.upsert_spread(item), m.set_target("shop/a", replicas=4, template=pod)))
    first = loop.recompute(model, ["shop/a"], now=clock())
    assert first.placements == reference_round(twin, ["shop/a"], now=clock())
    assert first.placements["shop/a"].counts() == {"home": {"c0": 2}, "rest": {"c1": 2}}
    apply(lambda m: m.pod_counts("c1", report))
    apply(lambda m: m.upsert_cluster("c1", labels=region, taints=cordon))
    apply(lambda m: m.set_target("shop/a", replicas=5, template=pod))
    check(model)
    second = loop.recompute(model, ["shop/a"], now=clock())
    assert second.placements == reference_round(twin, ["shop/a"], now=clock())
    assert second.placements["shop/a"].counts()["rest"] == {"c1": 2}  # keeps what it was given, takes nothing


@PROPERTY
@hypothesis.given(data=st.data())
def test_contended_rounds_equal_the_reference(data: st.DataObject) -> None:
    """Rounds of several spreads on clusters of a few pod slots each, where the snapshot answers
    promise room twice and are placed again: the coordinator's round (its ledgers lifted, the room
    a contended spread is placed against built from them) equals `placement_round` given the
    reference's inputs, through either backend, and so does what it counts as placed again."""
    clock = ManualClock(T0)
    model, twin = world.World(clock), world.World(clock)
    setup: list[Event] = []
    for name in NAMES:
        labels = {names.REGION_LABEL: data.draw(st.sampled_from(fs.REGIONS))}
        slots = data.draw(st.integers(1, 4))
        pools = [builders.node_pool(1, cpu="2", pods=str(slots))]
        setup.append(lambda m, n=name, l=labels, p=pools: (  # noqa: E741
            m.upsert_cluster(n, labels=l), m.inventory(n, p), m.heartbeat(n)))
    for key in KEYS:
        item, replicas = data.draw(spreads(key, simulating=True)), data.draw(st.integers(0, 8))
        pod = data.draw(st.builds(template, st.sampled_from(("0", "250m", "1")), selector=st.none(),
                                  tolerate=st.booleans()))
        setup.append(lambda m, k=key, i=item, r=replicas, t=pod: (
            m.upsert_spread(i), m.set_target(k, replicas=r, template=t)))
    for event in setup:
        event(model)
        event(twin)
    for _step in range(data.draw(st.integers(1, 4))):
        keys = data.draw(st.just(list(KEYS)) | st.lists(st.sampled_from(KEYS), min_size=2, unique=True))
        batch = loop.answer_all if data.draw(st.booleans()) else None
        result = loop.recompute(model, keys, now=clock(), place_batch=batch)
        replaced: list[int] = []
        assert result.placements == reference_round(twin, keys, now=clock(), replaced=replaced)
        assert [result.replaced] == replaced
        hypothesis.event("placed again" if result.replaced else "nothing placed again")
        assert model.placements == twin.placements
        check(model)
        name = data.draw(st.sampled_from(NAMES))
        report = pod_report(model, name, data.draw)
        for m in (model, twin):
            m.pod_counts(name, report)
