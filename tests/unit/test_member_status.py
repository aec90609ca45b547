"""The member Deployment's status in the agent's PodCountsReport (SpreadPodCounts.workload).

Why these tests: the coordinator adds the members' Deployment statuses up into the hub Deployment's
status, so the agent must read them from the cached Deployment, put them in every report, and send
a new report when only the status changed (readyReplicas going up), not only when pods did. The
cache is faked here: what it feeds the reconciler is all that matters, and the real watch is
covered by the integration tests.
"""

from __future__ import annotations

import datetime
import threading
from typing import Any

from agents import bookkeeping, outbox, pod_ledger, runnable
from agents.cache import store as cache
from agents.cache import views
from agents.controller import reconciler
from federation.api import names
from federation.rpc import assignment

AT0 = datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)


def member_deployment(*, spread: str = "web-spread", status: dict[str, Any] | None = None,
                      federation: str = "prod") -> dict[str, Any]:
    """Deployment shop/web as the apiserver returns it, labelled for `spread` by `federation`."""
    return {"metadata": {"name": "web", "namespace": "shop", "uid": "u1",
                         "labels": {names.SPREAD_LABEL: spread, names.FEDERATION_LABEL: federation},
                         "annotations": {"fedspread.io/spread-key": f"shop/{spread}", "other.io/x": "1",
                                         names.SPREAD_UID_ANNOTATION: "spread-uid-1"}},
            "spec": {"replicas": 4}, "status": status or {}}


def assigned() -> assignment.Assignment:
    """Spread shop/web-spread, whose member Deployment is shop/web."""
    return assignment.Assignment(
        spread="shop/web-spread", generation=3, namespace="shop", workload="web", replicas=4,
        template={}, template_revision="r", subsets=(assignment.SubsetRule(name="a", index=0, quota=4),),
        subset_count=1, spread_uid="spread-uid-1", federation="prod")


def test_deployment_view_keeps_the_status_counters() -> None:
    view = views.workload_view(member_deployment(status={
        "observedGeneration": 3, "replicas": 4, "readyReplicas": 2, "updatedReplicas": 4,
        "availableReplicas": 2, "unavailableReplicas": 2, "conditions": [{"type": "Available"}]}))
    assert view.status == views.DeploymentStatus(observed_generation=3, replicas=4, ready_replicas=2,
                                                 updated_replicas=4, available_replicas=2,
                                                 unavailable_replicas=2)
    assert view.annotations == {"fedspread.io/spread-key": "shop/web-spread",
                                names.SPREAD_UID_ANNOTATION: "spread-uid-1"}
    assert view.federation == "prod"
    # apps/v1 leaves zero counters out; a new Deployment has no status at all.
    assert views.workload_view(member_deployment()).status == views.DeploymentStatus()
    assert views.deployment_status({"readyReplicas": "2", "replicas": True}) == views.DeploymentStatus()


def test_a_status_change_alone_makes_a_different_view() -> None:
    # The cache stores (and signals) a view only when it differs from the one it holds.
    three = views.workload_view(member_deployment(status={"replicas": 4, "readyReplicas": 3}))
    four = views.workload_view(member_deployment(status={"replicas": 4, "readyReplicas": 4}))
    assert three != four
    assert four == views.workload_view(member_deployment(status={
        "replicas": 4, "readyReplicas": 4, "conditions": [{"type": "Progressing"}]}))


def counts() -> dict[str, dict[str, pod_ledger.SubsetCounts]]:
    return {"shop/a": {"s0": pod_ledger.SubsetCounts(running=2, ready=1)}, "shop/b": {}}


def test_counts_message_carries_the_workload_status() -> None:
    status = views.DeploymentStatus(observed_generation=7, replicas=2, ready_replicas=1, updated_replicas=2,
                                    available_replicas=1, unavailable_replicas=1)
    message = outbox.counts_message(counts(), sequence=3, generations={"shop/a": 4}, observed_at=AT0,
                                    workloads={"shop/a": status, "shop/b": None})
    first, second = message.pod_counts.spreads
    assert (first.spread, first.generation, first.subsets[0].counts.ready) == ("shop/a", 4, 1)
    assert first.HasField("workload")
    workload = first.workload
    assert (workload.observed_generation, workload.replicas, workload.ready_replicas,
            workload.updated_replicas, workload.available_replicas,
            workload.unavailable_replicas) == (7, 2, 1, 2, 1, 1)
    assert second.spread == "shop/b" and not second.HasField("workload"), "no Deployment: no workload"


def test_counts_message_workload_of_a_fresh_deployment_and_none_given() -> None:
    # A Deployment whose controller has written nothing yet still reports (all zeros).
    fresh = outbox.counts_message(counts(), sequence=1, generations={}, observed_at=AT0,
                                  workloads={"shop/a": views.DeploymentStatus()})
    assert fresh.pod_counts.spreads[0].HasField("workload")
    plain = outbox.counts_message(counts(), sequence=1, generations={}, observed_at=AT0)
    assert not any(s.HasField("workload") for s in plain.pod_counts.spreads)


class FakeCache:
    """What the reconciler reads of the cache: no pods, the Deployments a test puts, change waits."""

    def autoscalers(self, kind: str, namespace: str, name: str) -> tuple[str, ...]:
        return ()  # no member HPA

    def __init__(self) -> None:
        self.deployments: dict[tuple[str, str], views.WorkloadView] = {}
        self.waited: list[tuple[str, ...]] = []
        self.stop = threading.Event()
        self.synced = True  # listed everything: the reconciler counts pods only then

    def spread_snapshot(self, spread: str) -> tuple[int, list[views.SpreadPod]]:
        return 0, []

    def deployment(self, namespace: str, name: str) -> views.WorkloadView | None:
        return self.deployments.get((namespace, name))

    def member_workload(self, kind: str, namespace: str, name: str) -> views.WorkloadView | None:
        return self.deployment(namespace, name) if kind == "Deployment" else None

    def replicasets_of(self, deployment_uid: str) -> frozenset[int | str]:
        return frozenset()

    def revisions_of(self, deployment_uid: str) -> tuple[str, ...]:
        return ()

    def version(self, *kinds: str) -> int:
        return 0

    def wait_for_change(self, since: int, *, timeout: float, kinds: tuple[str, ...] = ()) -> int:
        self.waited.append(kinds)
        self.stop.set()
        return since


def reported_workload(box: outbox.ReportOutbox) -> Any:
    """The workload of the latest PodCountsReport's only spread (None when unset)."""
    (message,) = [m for m in box.latest() if m.WhichOneof("body") == "pod_counts"]
    (item,) = message.pod_counts.spreads
    return item.workload if item.HasField("workload") else None


def test_a_deployment_status_change_alone_sends_a_new_report() -> None:
    books, box, fake = bookkeeping.Bookkeeping(clock=lambda: AT0), outbox.ReportOutbox(), FakeCache()
    books.set_assignment(assigned())
    loop = reconciler.Reconciler(None, books, box, fake,  # type: ignore[arg-type]
                                 clock=lambda: AT0, heartbeat_seconds=3600)
    assert loop.reconcile_once().counts_sent
    assert reported_workload(box) is None, "no member Deployment yet"
    assert not loop.reconcile_once().counts_sent, "nothing changed, no beat due"

    fake.deployments["shop", "web"] = views.workload_view(member_deployment(spread="other"))
    assert not loop.reconcile_once().counts_sent, "another spread's Deployment is not the member's"
    fake.deployments["shop", "web"] = views.workload_view(member_deployment(federation="staging"))
    assert not loop.reconcile_once().counts_sent, "another federation's Deployment is not the member's"

    fake.deployments["shop", "web"] = views.workload_view(member_deployment(status={"replicas": 4}))
    assert loop.reconcile_once().counts_sent
    assert (reported_workload(box).replicas, reported_workload(box).ready_replicas) == (4, 0)
    assert not loop.reconcile_once().counts_sent

    fake.deployments["shop", "web"] = views.workload_view(
        member_deployment(status={"replicas": 4, "readyReplicas": 3}))
    assert loop.reconcile_once().counts_sent, "readyReplicas went up: report at once"
    assert reported_workload(box).ready_replicas == 3

    del fake.deployments["shop", "web"]
    assert loop.reconcile_once().counts_sent, "the Deployment went away"
    assert reported_workload(box) is None


def test_counts_message_carries_conflicts() -> None:
    message = outbox.counts_message(counts(), sequence=1, generations={}, observed_at=AT0,
                                    conflicts={"shop/b": "Deployment shop/b was not created by fedspread"})
    first, second = message.pod_counts.spreads
    assert (first.conflict, second.conflict) == ("", "Deployment shop/b was not created by fedspread")


def test_deployment_changes_wake_the_reconciler() -> None:
    fake = FakeCache()
    loop = reconciler.Reconciler(None, bookkeeping.Bookkeeping(), outbox.ReportOutbox(), fake,  # type: ignore[arg-type]
                                 heartbeat_seconds=3600)
    loop.run(fake.stop, runnable.no_beat, interval=0.01, min_gap=0.0)
    assert fake.waited, "the loop never waited for a cache change"
    assert cache.DEPLOYMENTS in fake.waited[0] and cache.SPREAD_PODS in fake.waited[0]
