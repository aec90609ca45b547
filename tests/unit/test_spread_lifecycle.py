"""Deleting a spread, two spreads of one Deployment, and a changed targetRef, through the facade.

Why here: the rule is "do no harm" — a deleted spread's workloads are orphaned unless its
`deletionPolicy` says Delete, a removal because a cluster is no longer selected is not a deletion,
the newer of two spreads of one Deployment is refused and the older works on, and a live spread's
targetRef cannot move (what a resync removes, and what it leaves alone: test_resync_removals.py).
Hub events go through `hub.apply_to_world` as the coordinator applies them; what each agent is
sent is read from the streams' queues (no gRPC, no Kubernetes).
"""

from __future__ import annotations

import datetime
import queue
from typing import Any, cast

import pytest

from federation.api import problems
from federation.api import spread as spread_api
from federation.coordinator import facade
from federation.coordinator.hub import held_statuses, status_writer, statuses
from federation.coordinator.hub import watcher as hub
from federation.coordinator.model import lifecycle, loop, world
from federation.core import spread_status
from federation.rpc import agent_pb2
from tests.support import builders
from tests.support.clock import ManualClock

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
KEY = "shop/web"
TWO_SUBSETS: list[dict[str, Any]] = [
    {"name": "onprem", "clusters": ["dc1"], "maxReplicas": 3},
    {"name": "cloud", "clusters": ["aws"]},
]


def spread(name: str = "web", *, target: str = "web", created: str = "2025-01-01T00:00:00Z",
           policy: str | None = None, subsets: list[dict[str, Any]] | None = None,
           generation: int = 1) -> spread_api.FederatedSpread:
    spec: dict[str, Any] = {"targetRef": {"name": target}, "subsets": subsets or TWO_SUBSETS}
    if policy is not None:
        spec["deletionPolicy"] = policy
    return spread_api.FederatedSpread.model_validate({
        "metadata": {"name": name, "namespace": "shop", "generation": generation,
                     "creationTimestamp": created},
        "spec": spec})


def target(name: str = "web", replicas: int = 5) -> hub.WorkloadInfo:
    body = builders.deployment(name, replicas, namespace="shop")
    return hub.WorkloadInfo(kind="Deployment", namespace="shop", name=name, replicas=replicas, template=body)


def upsert(item: spread_api.FederatedSpread, *, replicas: int = 5) -> hub.HubEvent:
    return hub.HubEvent("spread", "MODIFIED", item.key, spread=item, generation=item.metadata.generation,
                        target=target(item.spec.target_ref.name, replicas))


def deleted(key: str) -> hub.HubEvent:
    return hub.HubEvent("spread", "DELETED", key)


class Federation:
    """A facade with streams for dc1, aws and gcp, fed hub events as the coordinator's loop does."""

    def __init__(self, *, applied: dict[str, list[str]] | None = None) -> None:
        self.clock = ManualClock(T0)
        self.coordinator = facade.Coordinator(world.World(self.clock), clock=self.clock, coordinator_id="t")
        model = self.coordinator.world
        for name in ("dc1", "aws", "gcp"):
            model.upsert_cluster(name, labels={})
            model.inventory(name, [builders.node_pool(4)])
        self.streams = {name: self.connect(name, applied=(applied or {}).get(name, []))
                        for name in ("dc1", "aws", "gcp")}

    def connect(self, name: str, *, applied: list[str]) -> facade.AgentStream:
        listed = [agent_pb2.AppliedSpread(spread=key) for key in applied]
        hello = agent_pb2.Hello(cluster_name=name, applied=listed)
        return self.coordinator.attach(hello, heartbeat_seconds=1)

    def apply(self, event: hub.HubEvent) -> None:
        with self.coordinator.lock:
            self.coordinator.publish(hub.apply_to_world(self.coordinator.world, event))

    def sent(self, name: str) -> list[agent_pb2.CoordinatorMessage]:
        """What cluster `name`'s stream was queued since the last call."""
        found: list[agent_pb2.CoordinatorMessage] = []
        while True:
            try:
                item = self.streams[name].outgoing.get_nowait()
            except queue.Empty:
                return found
            assert isinstance(item, agent_pb2.CoordinatorMessage)
            found.append(item)

    def wait(self, seconds: float) -> None:
        """`seconds` pass; the coordinator's timer then publishes what fell due (process.tick)."""
        since = self.clock()
        self.clock.advance(seconds)
        with self.coordinator.lock:
            self.coordinator.publish(loop.due(self.coordinator.world, since=since, now=self.clock()))

    def removals(self, name: str) -> list[agent_pb2.SpreadRemoval]:
        return [m.removal for m in self.sent(name) if m.WhichOneof("body") == "removal"]

    def drain(self) -> None:
        for name in self.streams:
            self.sent(name)


def placed(**settings: Any) -> Federation:
    fed = Federation()
    fed.apply(upsert(spread(**settings)))
    assert fed.coordinator.world.placements[KEY].counts() == {"onprem": {"dc1": 3}, "cloud": {"aws": 2}}
    fed.drain()
    return fed


# --- deletion policy ------------------------------------------------------------------------------


def test_deleting_a_spread_with_the_default_policy_orphans_it_in_every_cluster_holding_it() -> None:
    fed = placed()
    fed.apply(deleted(KEY))
    for name in ("dc1", "aws"):
        [removal] = fed.removals(name)
        assert (removal.spread, removal.orphan, removal.reason) == (KEY, True, "spread deleted")
    assert fed.removals("gcp") == [], "gcp never held the spread"


def test_deleting_a_spread_with_policy_delete_removes_its_workloads_once_no_recreation_came() -> None:
    fed = placed(policy="Delete")
    fed.apply(deleted(KEY))
    assert all(fed.removals(name) == [] for name in fed.streams), "held for a re-creation"
    fed.wait(lifecycle.RECREATE_GRACE.total_seconds() - 1)
    assert all(fed.removals(name) == [] for name in fed.streams), "held for a re-creation"
    fed.wait(1)
    for name in ("dc1", "aws"):
        [removal] = fed.removals(name)
        assert (removal.spread, removal.orphan) == (KEY, False)
    fed.wait(lifecycle.RECREATE_GRACE.total_seconds())
    assert all(fed.removals(name) == [] for name in fed.streams), "sent once"


def test_a_cluster_no_longer_selected_is_not_a_deletion() -> None:
    fed = placed()
    fed.apply(upsert(spread(subsets=[TWO_SUBSETS[0]], generation=2)))
    [removal] = fed.removals("aws")
    assert (removal.orphan, removal.reason) == (False, "cluster no longer selected")
    assert fed.removals("dc1") == []


def test_resync_after_a_deletion_follows_the_remembered_policy() -> None:
    fed = placed(policy="Delete")
    fed.coordinator.detach(fed.streams["aws"])  # aws is away when the spread is deleted
    fed.apply(deleted(KEY))
    fed.streams["aws"] = fed.connect("aws", applied=[KEY])
    assert fed.removals("aws") == [], "nothing deleted at a resync while the removal is held"
    fed.coordinator.detach(fed.streams["aws"])
    fed.wait(lifecycle.RECREATE_GRACE.total_seconds())
    assert [r.orphan for r in fed.removals("dc1")] == [False]
    fed.streams["aws"] = fed.connect("aws", applied=[KEY])
    [removal] = fed.removals("aws")
    assert (removal.spread, removal.orphan) == (KEY, False)


def test_resync_keeps_the_no_longer_selected_removal_non_orphaning() -> None:
    fed = placed()
    fed.apply(upsert(spread(subsets=[TWO_SUBSETS[0]], generation=2)))
    fed.coordinator.detach(fed.streams["aws"])
    fed.streams["aws"] = fed.connect("aws", applied=[KEY])
    assert fed.removals("aws") == []  # what runs there is not known before its report
    report = agent_pb2.PodCountsReport(full=True, sequence=1, lists_assigned=True, assigned=[KEY])
    report.spreads.add(spread=KEY, generation=1)  # its pods are gone
    fed.coordinator.receive(fed.streams["aws"], agent_pb2.AgentMessage(pod_counts=report))
    [removal] = fed.removals("aws")
    assert (removal.orphan, removal.reason) == (False, "cluster no longer selected")


def test_a_recreated_spread_forgets_the_old_delete_policy() -> None:
    fed = placed(policy="Delete")
    fed.apply(deleted(KEY))
    fed.apply(upsert(spread()))
    assert fed.coordinator.world.lifecycle.orphans(KEY)


def test_a_spread_deleted_with_policy_delete_and_created_again_adopts_instead_of_deleting() -> None:
    # kubectl replace --force: the delete and the create arrive as two hub events, a moment apart.
    # The held Delete becomes a release sent before the new spread's assignment (its agents adopt
    # the released Deployment); nothing deletes it later.
    fed = placed(policy="Delete")
    fed.apply(deleted(KEY))
    fed.clock.advance(1)
    fed.apply(upsert(spread(policy="Delete", generation=1)))
    for name in ("dc1", "aws"):
        sent = fed.sent(name)
        assert [m.WhichOneof("body") for m in sent] == ["removal", "assignment"], (name, sent)
        assert (sent[0].removal.orphan, sent[0].removal.reason) == (True, lifecycle.RECREATED)
    fed.wait(lifecycle.RECREATE_GRACE.total_seconds() * 2)
    assert all(fed.removals(name) == [] for name in fed.streams), "a later delete"
    fed.apply(deleted(KEY))  # the new spread's own deletion is held and settled in its turn
    fed.wait(lifecycle.RECREATE_GRACE.total_seconds())
    assert [r.orphan for r in fed.removals("dc1")] == [False]


def test_a_held_delete_is_never_sent_after_the_recreated_spreads_assignment() -> None:
    # Created again with another target: the old Deployment is not claimed, but a removal of the
    # key sent after the new assignment would remove that assignment too; it is released instead.
    fed = placed(policy="Delete")
    fed.apply(deleted(KEY))
    fed.apply(upsert(spread(target="web-v2")))
    kinds = {name: [m.WhichOneof("body") for m in fed.sent(name)] for name in ("dc1", "aws")}
    assert all(k == ["removal", "assignment"] for k in kinds.values()), kinds
    fed.wait(lifecycle.RECREATE_GRACE.total_seconds())
    assert all(fed.removals(name) == [] for name in fed.streams)


# --- one spread per target ------------------------------------------------------------------------


def test_the_newer_spread_of_a_target_is_refused_and_the_older_works_undisturbed() -> None:
    fed = placed()
    fed.apply(upsert(spread("web-2", created="2025-01-02T00:00:00Z")))
    assert "shop/web-2" not in fed.coordinator.world.placements
    refusal = fed.coordinator.world.lifecycle.refusals()["shop/web-2"]
    assert refusal.reason == lifecycle.TARGET_CONFLICT and KEY in refusal.message
    assert all(fed.sent(name) == [] for name in fed.streams), "the older spread must not be disturbed"
    assert KEY not in fed.coordinator.world.lifecycle.refusals()


def test_order_of_arrival_does_not_matter_before_anything_is_placed() -> None:
    model = world.World(ManualClock(T0))
    newer, older = spread("a-newer", created="2025-01-02T00:00:00Z"), spread("z-older")
    hub.apply_to_world(model, upsert(newer))
    hub.apply_to_world(model, upsert(older))
    assert [e.key for e in model.spreads()] == ["shop/z-older"]
    assert set(model.lifecycle.refusals()) == {"shop/a-newer"}


def test_same_creation_time_is_decided_by_name() -> None:
    model = world.World(ManualClock(T0))
    hub.apply_to_world(model, upsert(spread("b")))
    hub.apply_to_world(model, upsert(spread("a")))
    assert [e.key for e in model.spreads()] == ["shop/a"]


def test_a_placed_holder_is_never_displaced_by_an_older_late_claimant() -> None:
    fed = placed(created="2025-01-05T00:00:00Z")
    fed.apply(upsert(spread("older", created="2025-01-01T00:00:00Z")))
    assert set(fed.coordinator.world.placements) == {KEY}
    assert fed.coordinator.world.lifecycle.refusals()["shop/older"].reason == lifecycle.TARGET_CONFLICT
    assert all(fed.sent(name) == [] for name in fed.streams)


def test_deleting_the_holder_admits_the_next_spread() -> None:
    fed = placed()
    fed.apply(upsert(spread("web-2", created="2025-01-02T00:00:00Z", policy="Delete")))
    fed.apply(deleted(KEY))
    model = fed.coordinator.world
    assert set(model.placements) == {"shop/web-2"} and model.lifecycle.refusals() == {}
    assert model.placements["shop/web-2"].counts() == {"onprem": {"dc1": 3}, "cloud": {"aws": 2}}
    kinds = {name: [m.WhichOneof("body") for m in fed.sent(name)] for name in ("dc1", "aws")}
    assert all(k == ["removal", "assignment"] for k in kinds.values()), kinds


# --- targetRef is immutable -----------------------------------------------------------------------


def test_changing_the_target_ref_is_refused_and_the_last_valid_spec_stays_in_force() -> None:
    fed = placed()
    before = fed.coordinator.world.placements[KEY]
    fed.apply(upsert(spread(target="api", subsets=[TWO_SUBSETS[1]], generation=2)))
    model = fed.coordinator.world
    entry = model.spread(KEY)
    assert entry is not None and entry.spec.target_ref.name == "web" and entry.generation == 1
    assert model.placements[KEY] is before
    assert all(fed.sent(name) == [] for name in fed.streams)
    refusal = model.lifecycle.refusals()[KEY]
    assert (refusal.reason, refusal.generation) == (lifecycle.TARGET_REF_IMMUTABLE, 2)
    assert "delete" in refusal.message and "'api'" in refusal.message
    fed.apply(upsert(spread(generation=3)))  # changed back: in force again
    assert KEY not in model.lifecycle.refusals()


def invalid(key: str, *, policy: str, generation: int = 3) -> hub.HubEvent:
    """A version of spread `key` that fails validation, its deletionPolicy as written."""
    return hub.HubEvent("spread", "MODIFIED", key, problems=(problems.Problem("spec.subsets", "bad"),),
                        generation=generation, deletion_policy=policy)


@pytest.mark.parametrize(("in_force", "edit", "orphan"), [
    pytest.param("Delete", upsert(spread(target="api", policy="Orphan", generation=2)), True,
                 id="refused-edit-to-orphan-is-heeded"),
    pytest.param("Delete", invalid(KEY, policy="Orphan"), True, id="invalid-edit-to-orphan-is-heeded"),
    pytest.param("Delete", invalid(KEY, policy=""), True, id="invalid-edit-dropping-the-policy-orphans"),
    pytest.param("Delete", upsert(spread(target="api", policy="Delete", generation=2)), False,
                 id="refused-edit-still-saying-delete-deletes"),
    pytest.param("Orphan", upsert(spread(target="api", policy="Delete", generation=2)), True,
                 id="refused-edit-to-delete-is-not-in-force"),
    pytest.param("Orphan", invalid(KEY, policy="Delete"), True, id="invalid-edit-to-delete-is-not-in-force"),
])
def test_a_spread_deleted_after_an_edit_not_in_force_deletes_only_if_both_say_delete(
        in_force: str, edit: hub.HubEvent, orphan: bool) -> None:
    """The last valid spec stays in force for placing; deletion deletes only what both the spec in
    force and the latest version (what `kubectl get` shows) say to delete."""
    fed = placed(policy=in_force)
    fed.apply(edit)
    assert fed.coordinator.world.spread(KEY) is not None and KEY in fed.coordinator.world.placements
    fed.drain()
    fed.apply(deleted(KEY))
    fed.wait(lifecycle.RECREATE_GRACE.total_seconds() + 1)  # a delete is held for a re-creation first
    for name in ("dc1", "aws"):
        assert [r.orphan for r in fed.removals(name)] == [orphan], name


def test_an_edit_back_in_force_decides_the_deletion_again() -> None:
    fed = placed(policy="Delete")
    fed.apply(upsert(spread(target="api", policy="Orphan", generation=2)))  # refused
    fed.apply(upsert(spread(policy="Delete", generation=3)))  # in force again
    fed.drain()
    fed.apply(deleted(KEY))
    fed.wait(lifecycle.RECREATE_GRACE.total_seconds() + 1)  # a delete is held for a re-creation first
    assert [r.orphan for r in fed.removals("dc1")] == [False]


def test_a_refused_spread_shows_valid_false_with_its_reason_and_keeps_the_rest() -> None:
    base = spread_status.spread_status(
        placement=placed().coordinator.world.placements[KEY], spec=spread().spec, generation=1,
        reports={}, marks=[], previous=None, now=T0)
    got = spread_status.refused_spread_status(base, generation=2, reason=lifecycle.TARGET_REF_IMMUTABLE,
                                              message="no", now=T0)
    valid = [c for c in got.conditions if c.type == "Valid"]
    assert [(c.status, c.reason, c.observed_generation) for c in valid] == [
        ("False", lifecycle.TARGET_REF_IMMUTABLE, 2)]
    assert got.observed_generation == base.observed_generation and got.placement == base.placement


# --- the hub's statuses ---------------------------------------------------------------------------


class RecordingWriter:
    """Stands in for `status_writer.StatusWriter`: records every write, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def write_spread(self, key: str, new: spread_api.FederatedSpreadStatus) -> bool:
        self.calls.append(("spread", (key, new)))
        return True

    def write_workload_status(self, kind: str, namespace: str, name: str, fields: dict[str, int], *,
                              observed: bool = True) -> bool:
        self.calls.append((kind.lower(), (f"{namespace}/{name}", fields)))
        return True

    def clear_workload_status(self, kind: str, namespace: str, name: str) -> bool:
        self.calls.append(("clear", f"{namespace}/{name}"))
        return True

    def write_member_cluster(self, name: str, new: Any) -> bool:
        return True

    def kinds(self) -> list[tuple[str, str]]:
        found = [(kind, args if isinstance(args, str) else args[0]) for kind, args in self.calls]
        self.calls.clear()
        return found


def status_pass(fed: Federation) -> tuple[statuses.StatusPass, RecordingWriter]:
    writer = RecordingWriter()
    return statuses.StatusPass(fed.coordinator, cast(status_writer.StatusWriter, writer),
                               agent_versions={}, member_status_seconds=60), writer


class ClosedWriter(RecordingWriter):
    """A writer closed by a leader that stopped acting (`StatusWriter.close`): refuses every write."""

    def write_spread(self, key: str, new: spread_api.FederatedSpreadStatus) -> bool:
        self.calls.append(("spread", (key, new)))
        raise status_writer.WriterClosed(f"spread {key}: the status writer is closed")


def test_a_closed_writer_ends_the_pass_at_its_first_refusal() -> None:
    fed = placed()
    fed.apply(upsert(spread("web-2", created="2025-01-02T00:00:00Z")))
    writer = ClosedWriter()
    passes = statuses.StatusPass(fed.coordinator, cast(status_writer.StatusWriter, writer),
                                 agent_versions={}, member_status_seconds=60)
    passes.run(T0)
    assert writer.kinds() == [("spread", "shop/web")], "nothing is tried after the refusal"


def test_deleting_a_spread_clears_its_hub_deployment_status_once() -> None:
    fed = placed()
    passes, writer = status_pass(fed)
    passes.run(T0)
    assert ("deployment", "shop/web") in writer.kinds()
    fed.apply(deleted(KEY))
    passes.spread_deleted(KEY, target=spread_api.TargetRef(name="web"))
    passes.run(T0)
    assert writer.kinds() == [("clear", "shop/web")]
    passes.run(T0)
    assert writer.kinds() == [], "cleared once; nothing left to write"


def test_a_successor_spread_writes_the_counts_instead_of_a_clear() -> None:
    fed = placed()
    fed.apply(upsert(spread("web-2", created="2025-01-02T00:00:00Z")))
    passes, writer = status_pass(fed)
    passes.run(T0)
    spread_writes = {key: new for kind, (key, new) in writer.calls if kind == "spread"}
    valid = [c for c in spread_writes["shop/web-2"].conditions if c.type == "Valid"]
    assert [(c.status, c.reason) for c in valid] == [("False", lifecycle.TARGET_CONFLICT)]
    writer.kinds()
    fed.apply(deleted(KEY))
    passes.spread_deleted(KEY, target=spread_api.TargetRef(name="web"))
    passes.hub_changed("deployment", "shop/web")  # the watch's echo of the first pass's write
    passes.run(T0)
    done = writer.kinds()
    assert ("clear", "shop/web") not in done and ("deployment", "shop/web") in done


def test_a_pass_reads_only_what_a_watch_event_or_its_own_failure_left_unknown() -> None:
    fed = placed()
    passes, writer = status_pass(fed)
    passes.run(T0)
    assert {("spread", KEY), ("deployment", KEY)} <= set(writer.kinds())
    passes.run(T0 + datetime.timedelta(seconds=2))
    assert writer.kinds() == [], "nothing changed and no event came: the hub holds what was written"
    passes.hub_changed("spread", KEY)  # e.g. someone edited the status, or our write's echo
    passes.hub_changed("configmap", KEY)  # not a status this pass writes
    passes.run(T0 + datetime.timedelta(seconds=4))
    assert writer.kinds() == [("spread", KEY)], "only the spread the event was for is read again"
    passes.hub_changed("deployment", KEY, deleted=True)
    passes.run(T0 + datetime.timedelta(seconds=6))
    assert writer.kinds() == [("deployment", KEY)]


def test_what_the_hub_holds_is_read_again_after_the_reread_period() -> None:
    fed = placed()
    passes, writer = status_pass(fed)
    passes.run(T0)
    writer.kinds()
    passes.run(T0 + datetime.timedelta(seconds=held_statuses.REREAD_SECONDS - 1))
    assert writer.kinds() == []
    passes.run(T0 + datetime.timedelta(seconds=held_statuses.REREAD_SECONDS))
    assert {("spread", KEY), ("deployment", KEY)} <= set(writer.kinds())
