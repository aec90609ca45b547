"""What the agent's Hello lists as applied: the assignments held and the Deployments marked as ours.

Why: nothing on the agent deletes a member Deployment because no assignment names it, so the
coordinator must learn from the Hello what the cluster runs, uids included, to send the removals
it has reasons for — also after an agent restart, when the bookkeeping is empty. Row by row on
`agents.link.hello.listing`, then through a real `Link` against the stand-in coordinator with a
cache that lists its Deployments late (the first Hello waits for it, up to a deadline).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
from typing import Any

import pytest

from agents import bookkeeping as bookkeeping_mod
from agents import outbox as outbox_mod
from agents import ownership, pod_ledger
from agents.cache import views
from agents.link import client as link_mod
from agents.link import hello as hello_mod
from bench import standin_coordinator
from federation.api import names
from federation.rpc import assignment as assignment_mod

CLUSTER = "member-1"
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
DEADLINE = 10.0
VALUE = assignment_mod.Assignment(
    spread="shop/web", generation=4, namespace="shop", workload="web", replicas=2, template={},
    template_revision="rev-4", subsets=(), subset_count=0, spread_uid="uid-web", federation="prod")


def deployment(name: str, *, federation: str = "prod", uid: str | None = None,
               key: str | None = None) -> views.WorkloadView:
    annotations = {names.SPREAD_KEY_ANNOTATION: key or f"shop/{name}"}
    if uid != "":
        annotations[names.SPREAD_UID_ANNOTATION] = uid or f"uid-{name}"
    return views.WorkloadView(namespace="shop", name=name, uid=f"k8s-{name}", spread_label=name,
                                replicas=1, annotations=annotations, federation=federation)


def rows(assignments: list[assignment_mod.Assignment], deployments: list[views.WorkloadView],
         federation: str = "prod") -> list[tuple[str, int, str, str]]:
    return [(a.spread, a.generation, a.template_revision, a.spread_uid)
            for a in hello_mod.listing(assignments, deployments, federation=federation)]


def test_assignments_are_listed_with_generation_revision_and_uid() -> None:
    assert rows([VALUE], [deployment("web")]) == [("shop/web", 4, "rev-4", "uid-web")]


def test_a_marked_deployment_without_assignment_is_listed_at_generation_zero() -> None:
    assert rows([VALUE], [deployment("web"), deployment("api")]) == [
        ("shop/api", 0, "", "uid-api"), ("shop/web", 4, "rev-4", "uid-web")]


def test_a_deployment_of_an_earlier_spread_of_the_key_is_listed_beside_the_assignment() -> None:
    assert rows([VALUE], [deployment("web", uid="uid-old")]) == [
        ("shop/web", 0, "", "uid-old"), ("shop/web", 4, "rev-4", "uid-web")]


@pytest.mark.parametrize("other", [
    pytest.param(deployment("api", federation="staging"), id="another federation's"),
    pytest.param(deployment("api", federation=""), id="released (unmarked)"),
    pytest.param(deployment("api", uid=""), id="no spread uid"),
])
def test_deployments_not_marked_as_ours_are_not_listed(other: views.WorkloadView) -> None:
    assert rows([], [other]) == []


def test_before_any_welcome_nothing_is_listed_without_an_expected_federation() -> None:
    assert rows([], [deployment("api")], federation="") == []


class LateCache:
    """A cache that lists its Deployments only when `listed` is set (as a slow first list)."""

    def __init__(self, *items: views.WorkloadView) -> None:
        self.items = list(items)
        self.listed = threading.Event()

    def wait_synced(self, timeout: float, *, kinds: tuple[str, ...] = ()) -> bool:
        return self.listed.wait(timeout)

    def workloads(self) -> list[views.WorkloadView]:
        return self.items if self.listed.is_set() else []

    def spread_pods(self, spread: str) -> list[views.SpreadPod]:
        return [pod("a", subset="first")] if self.listed.is_set() and spread == "shop/api" else []


def pod(name: str, *, subset: str | None, phase: str = "Running", deleting: bool = False,
        owned: bool = True) -> views.SpreadPod:
    record = pod_ledger.PodRecord(name=name, subset=subset, revision="r1", phase=phase, ready=True,
                                  node_name="n1", created=T0, deleting=deleting, owned=owned)
    return views.SpreadPod(namespace="shop", spread="shop/web", uid=f"uid-{name}", record=record)


def start_link(standin: standin_coordinator.StandinCoordinator, cache: LateCache, **options: Any
               ) -> link_mod.Link:
    link = link_mod.Link(link_mod.LinkSettings(standin.target, CLUSTER, heartbeat_seconds=0.2,
                                               backoff_initial_seconds=0.05, backoff_cap_seconds=0.5,
                                               **options),
                         bookkeeping=bookkeeping_mod.Bookkeeping(), outbox=outbox_mod.ReportOutbox(),
                         cache=cache,
                         federation=ownership.FederationState("prod"))
    link.start()
    return link


def test_the_first_hello_waits_for_the_cache_and_lists_the_deployments_marked_as_ours() -> None:
    cache = LateCache(deployment("api"), deployment("web", federation="staging"))
    with standin_coordinator.StandinCoordinator(federation_id="prod") as standin:
        link = start_link(standin, cache)
        try:
            threading.Timer(0.5, cache.listed.set).start()
            hello = standin.wait_message(CLUSTER, "hello", timeout=DEADLINE)
            listed = [(a.spread, a.generation, a.spread_uid, dict(a.subset_pods)) for a in hello.applied]
            assert listed == [("shop/api", 0, "uid-api", {"first": 1})]  # over the wire, with its pods
            assert link.wait_connected(DEADLINE)
        finally:
            link.stop()


def test_past_the_deadline_the_hello_goes_without_them_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agents.link")
    cache = LateCache(deployment("api"))
    with standin_coordinator.StandinCoordinator(federation_id="prod") as standin:
        link = start_link(standin, cache, cache_wait_seconds=0.3)
        try:
            hello = standin.wait_message(CLUSTER, "hello", timeout=DEADLINE)
            assert list(hello.applied) == [] and link.wait_connected(DEADLINE)
            assert any("not listed yet" in r.getMessage() for r in caplog.records)
            cache.listed.set()
            mark = standin.mark(CLUSTER)
            standin.stop()  # the next stream's Hello lists what the cache holds by then
            standin.start()
            hello = standin.wait_message(CLUSTER, "hello", since=mark, timeout=DEADLINE)
            assert [a.spread for a in hello.applied] == ["shop/api"]
        finally:
            link.stop()


def test_an_assignment_of_the_hello_keeps_its_generation_when_its_deployment_is_listed_too() -> None:
    value = dataclasses.replace(VALUE, federation="")
    assert rows([value], [deployment("web")]) == [("shop/web", 4, "rev-4", "uid-web")]


def test_each_entry_counts_the_spreads_pods_per_subset() -> None:
    """Unknown is not zero: the Hello says how many pods of the spread hold a place per subset
    (made by a controller, not being deleted, not finished; those of no subset under ""), the
    same counts on every entry of the spread, so that a restarted agent whose pods grew while it
    was away is not sent a quota below them before it reports — per subset, never raising
    another's quota."""
    pods = {"shop/web": [pod("a", subset="first"), pod("b", subset="first"), pod("c", subset="second"),
                         pod("gone", subset="first", deleting=True), pod("done", subset="second",
                                                                         phase="Succeeded"),
                         pod("bare", subset="first", owned=False), pod("new", subset=None)]}
    workloads = [deployment("web"), deployment("web", uid="uid-old"), deployment("api")]
    listed = hello_mod.listing([VALUE], workloads, federation="prod", pods_of=lambda key: pods.get(key, []))
    found = {(a.spread, a.spread_uid): dict(a.subset_pods) for a in listed}
    assert found == {("shop/web", "uid-web"): {"first": 2, "second": 1, "": 1},
                     ("shop/web", "uid-old"): {"first": 2, "second": 1, "": 1}, ("shop/api", "uid-api"): {}}
