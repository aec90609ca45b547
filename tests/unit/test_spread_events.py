"""Which Events a FederatedSpread's status change is worth (`core.spread_events`), word for word."""

from __future__ import annotations

import datetime
from typing import Any

from federation.api import common, rebalance, spread
from federation.core import spread_events


def condition(kind: str, status: str, reason: str = "", message: str = "") -> common.Condition:
    return common.Condition(type=kind, status=status, reason=reason, message=message)


def status(clusters: dict[str, int] | None = None, *, subsets: dict[str, int] | None = None,
           conditions: list[common.Condition] | None = None, **fields: Any) -> spread.FederatedSpreadStatus:
    placed = clusters or {}
    return spread.FederatedSpreadStatus(
        replicas=sum(placed.values()),
        placement=[spread.ClusterPlacementStatus(cluster=n, replicas=r) for n, r in placed.items()],
        subset_statuses=[spread.SubsetStatus(name=n, replicas=r) for n, r in (subsets or {}).items()],
        conditions=conditions or [condition("Valid", "True", "SpecValid")], **fields)


def reasons(found: list[spread_events.SpreadEvent]) -> list[tuple[str, str]]:
    return [(e.reason, e.type) for e in found]


def test_a_new_placement_is_placed_and_an_unchanged_one_says_nothing() -> None:
    first = status({"dc1": 4, "aws-eu": 2})
    found = spread_events.spread_events(None, first)
    assert [(e.reason, e.type, e.note, e.action) for e in found] == [
        ("Placed", "Normal", "placed 6 replicas: dc1 4, aws-eu 2", "Place")]
    ready_changed = first.model_copy(update={"ready_replicas": 6})
    assert spread_events.spread_events(first, ready_changed) == []
    assert spread_events.spread_events(None, status()) == [], "nothing placed, nothing before: silent"
    short = status({"dc1": 1}, unplaced_replicas=2)
    assert spread_events.spread_events(first, short)[0].note == "placed 1 replica: dc1 1; 2 not placed"


def test_adaptive_overflow_to_a_later_subset() -> None:
    before = status({"dc1": 4}, subsets={"onprem": 4, "cloud": 0})
    after = status({"dc1": 4, "aws-eu": 2}, subsets={"onprem": 4, "cloud": 2})
    found = spread_events.spread_events(before, after, adaptive=True)
    assert reasons(found) == [("Placed", "Normal"), ("Overflowed", "Normal")]
    assert found[1].note == "subset cloud now holds 2 (was 0): the subsets before it are full (onprem 4)"
    assert reasons(spread_events.spread_events(before, after)) == [("Placed", "Normal")], "Fixed: no overflow"


def test_a_lost_clusters_replicas_moving_is_a_failover() -> None:
    before, after = status({"dc1": 4, "aws-eu": 2}), status({"aws-eu": 6})
    found = spread_events.spread_events(before, after, lost=frozenset({"dc1"}))
    assert reasons(found) == [("FailedOver", "Warning"), ("Placed", "Normal")]
    assert found[0].note == "cluster lost, its replicas moved: dc1 (4); now aws-eu 6"
    assert reasons(spread_events.spread_events(before, after)) == [("Placed", "Normal")], \
        "a cluster that is heard (cordoned, deselected) is no failover"


def test_conditions_that_turn_bad_are_warnings_once() -> None:
    calm = status({"dc1": 2}, conditions=[
        condition("Valid", "True"), condition("Placed", "True", "AllPlaced"),
        condition("CapacityExhausted", "False", "CapacityAvailable"),
        condition("Conflict", "False", "NoConflict")])
    stormy = status({"dc1": 2}, conditions=[
        condition("Valid", "True"),
        condition("Placed", "False", "BeyondCaps", "1 replica of 3 could not be placed"),
        condition("CapacityExhausted", "True", "NoCapacity", "2 replicas wait Pending"),
        condition("Conflict", "True", "MemberDeploymentNotOwned", "1 cluster left alone"),
        condition("FailoverSuspended", "True", "ClustersSilent", "3 of 4 clusters silent")])
    found = spread_events.spread_events(calm, stormy)
    assert [(e.reason, e.type, e.note) for e in found] == [
        ("NotPlaced", "Warning", "1 replica of 3 could not be placed"),
        ("CapacityExhausted", "Warning", "2 replicas wait Pending"),
        ("FailoverSuspended", "Warning", "3 of 4 clusters silent"),
        ("Conflict", "Warning", "1 cluster left alone")]
    assert spread_events.spread_events(stormy, stormy) == [], "a state that holds is not announced again"
    lifted = status({"dc1": 2},
                    conditions=[condition("FailoverSuspended", "False", "ClustersReturned", "heard")])
    assert reasons(spread_events.spread_events(stormy, lifted)) == [("FailoverResumed", "Normal")]
    assert ("FailoverResumed", "Normal") not in reasons(spread_events.spread_events(None, lifted)), \
        "resumed only after a suspension"


def test_invalid_conflicting_and_refused_specs() -> None:
    valid = status({"dc1": 2})
    invalid = status({"dc1": 2}, conditions=[condition("Valid", "False", "InvalidSpec", "subsets[1]: bad")])
    found = spread_events.spread_events(valid, invalid)
    assert [(e.reason, e.type, e.note) for e in found] == [("Invalid", "Warning", "subsets[1]: bad")]
    other = status({"dc1": 2}, conditions=[condition("Valid", "False", "InvalidSpec", "subsets[0]: bad")])
    assert reasons(spread_events.spread_events(invalid, other)) == [("Invalid", "Warning")], "new problems"
    assert spread_events.spread_events(invalid, invalid) == []
    held = status(conditions=[condition("Valid", "False", "TargetConflict", "spread a holds web")])
    assert reasons(spread_events.spread_events(None, held, conflicts=frozenset({"TargetConflict"}))) == [
        ("Conflict", "Warning")]
    assert reasons(spread_events.spread_events(None, held)) == [("Refused", "Warning")]


def test_a_failback_step_is_told_when_it_starts_ends_or_stops_not_while_it_waits() -> None:
    """Read from `status.rebalancing`, so a step that ends and the next that starts within one
    status write are both told."""
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    t1, t2 = t0 + datetime.timedelta(minutes=1), t0 + datetime.timedelta(minutes=2)

    def rebalancing(*, started: datetime.datetime | None = None, last: datetime.datetime | None = None,
                    outcome: str | None = None) -> spread.FederatedSpreadStatus:
        step = None if started is None else {"started": started, "moves": [
            {"fromSubset": "eu", "fromCluster": "aws", "toSubset": "onprem", "toCluster": "dc1",
             "replicas": 1}]}
        return status({"dc1": 2}, rebalancing=rebalance.RebalancingStatus.model_validate(
            {"step": step, "lastMove": last, "lastOutcome": outcome}))

    started = rebalancing(started=t0)
    found = spread_events.spread_events(status({"dc1": 2}), started)
    assert [(e.reason, e.type, e.note, e.action) for e in found] == [
        ("RebalanceStarted", "Normal", "failback step started: 1 from eu/aws to onprem/dc1", "Rebalance")]
    assert spread_events.spread_events(started, started) == [], "a step in flight is not announced again"
    finished_and_next = rebalancing(started=t2, last=t1, outcome="Finished")
    assert reasons(spread_events.spread_events(started, finished_and_next)) == [
        ("Rebalanced", "Normal"), ("RebalanceStarted", "Normal")]
    stopped = rebalancing(last=t2, outcome="Stopped")
    assert reasons(spread_events.spread_events(finished_and_next, stopped)) == [
        ("RebalanceStopped", "Warning")]
    assert spread_events.spread_events(stopped, stopped) == []
    unseen = rebalancing(last=t2 + datetime.timedelta(minutes=1), outcome="Finished")
    assert reasons(spread_events.spread_events(stopped, unseen)) == [
        ("RebalanceStarted", "Normal"), ("Rebalanced", "Normal")], "a step begun and ended between writes"
