"""A rolling update keeps the spread on real members (issue 28): a template change on the hub with
`maxSurge: 25%`, watched on every member every quarter second.

The session's demo federation (`conftest.federation`: dc1, aws-eu, gcp-eu, each a real control
plane with its own agent, and the coordinator) runs a Deployment of 8 replicas over three ordered
subsets — `a` dc1 capped at 3, `b` dc1 capped at 1, `c` over dc1 and aws-eu (Balance, 2 each) — so
dc1 holds three subsets in one member Deployment (6 replicas, a surge of 2) and `c` spans two
clusters (aws-eu: 2 replicas, a surge of 1). The hub template then gains a readiness delay, and
each member's real Deployment controller rolls its pods with the default `maxUnavailable: 25%`
(a Ready pod removed before its replacement is Ready: the coordinator must not take the
rollout's surge for pods to keep, `PodReports.ready_for`, or it scales the member mid-rollout).
At every sample:

- no subset in any member holds more pods (of all revisions, not being deleted) than its quota
  there plus the member Deployment's surge — the webhook's bound (`federation.core.rollout`);
- no pod of the new revision is ever removed: old revisions go first;
- no member Deployment is scaled while it rolls (the coordinator keeps its placement).

In dc1, while both revisions run, the agent makes every old pod cheaper to delete than every new
one (`revision_deletion_costs`; the sandbox's ReplicaSet controller is patched to honour the
annotation, as 1.22 does), and the spread's status shows each subset's pods per revision. At the
end every member runs exactly the pods per subset it ran before, all of the new revision, and the
status shows no revisions any more.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import demo_scene
import pytest
import sampling
import waiting
from demo_scene import TIMEOUT, Apis

from federation.api import common, names
from federation.api import spread as spread_api
from federation.demo import environment
from tests.support import builders

LABEL = f"{names.SPREAD_LABEL}=web"
SUBSETS: list[dict[str, Any]] = [
    {"name": "a", "clusters": ["dc1"], "maxReplicas": 3},
    {"name": "b", "clusters": ["dc1"], "maxReplicas": 1},
    {"name": "c", "clusters": ["dc1", "aws-eu"], "clusterSpread": "Balance"},
]
REPLICAS = 8
WANT: demo_scene.Placement = {"a": {"dc1": 3}, "b": {"dc1": 1}, "c": {"dc1": 2, "aws-eu": 2}}
SURGE = {member: math.ceil(0.25 * sum(where.get(member, 0) for where in WANT.values()))
         for member in ("dc1", "aws-eu")}
"""The member Deployments' surge: 25% of their replicas, rounded up (dc1 6 → 2, aws-eu 2 → 1)."""


@pytest.fixture(scope="module")
def apis(federation: environment.Federation) -> Iterator[Apis]:
    with demo_scene.connect(federation) as connected:
        yield connected


def spread_body() -> dict[str, Any]:
    return {"apiVersion": f"{common.API_GROUP}/{common.API_VERSION}", "kind": spread_api.KIND,
            "metadata": {"name": "web"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "subsets": SUBSETS, "scheduleStrategy": {"type": "Fixed"}}}


def revision(pod: Any) -> str:
    return str((pod.metadata.labels or {}).get(names.REVISION_LABEL, ""))


def subset(pod: Any) -> str:
    return str((pod.metadata.annotations or {}).get(names.SUBSET_ANNOTATION, "-"))


def cost(pod: Any) -> int | None:
    value = (pod.metadata.annotations or {}).get(names.DELETION_COST_ANNOTATION)
    return int(value) if value is not None else None


class Watch:
    """What the sampler saw: bound violations, new-revision pods, cost order and status revisions."""

    def __init__(self, apis: Apis, namespace: str, old: dict[str, set[str]]) -> None:
        self.apis, self.namespace, self.old = apis, namespace, old
        self.lock = threading.Lock()
        self.over: list[str] = []
        self.new_pods: dict[str, set[str]] = {m: set() for m in apis.members}
        self.mixed_in_dc1 = 0
        self.ordered_in_dc1 = 0
        self.status_revisions: list[dict[str, list[tuple[str, int]]]] = []
        self.live_revisions: list[dict[str, dict[str, int]]] = []
        """What `fedspread get placement` (the SDK) showed per subset per revision, when any."""
        self.errors: list[str] = []
        self.member_replicas: dict[str, list[int]] = {m: [] for m in apis.members}
        """Each member Deployment's spec.replicas as sampled, when it changed."""
        self.timeline: list[str] = []
        """What dc1 and aws-eu ran, per sample where it changed (for a failure's message)."""

    def observe(self) -> None:
        try:
            pods = {m: [p for p in self.apis.core(m).list_namespaced_pod(
                            self.namespace, label_selector=LABEL).items
                        if p.metadata.deletion_timestamp is None] for m in self.apis.members}
            spread = self.apis.custom().get_namespaced_custom_object(
                common.API_GROUP, common.API_VERSION, self.namespace, spread_api.PLURAL, "web")
            deployments = {m: self.apis.apps(m).list_namespaced_deployment(self.namespace).items
                           for m in self.apis.members}
            placed = self.apis.placements.placement(f"{self.namespace}/web")
            live = {s.name: s.revisions for s in placed.subsets if s.revisions}
        except Exception as error:  # a slow apiserver: this sample is lost, the next one counts
            with self.lock:
                self.errors.append(str(error)[:200])
            return
        with self.lock:
            for member, found in pods.items():
                per_subset: dict[str, int] = {}
                for pod in found:
                    per_subset[subset(pod)] = per_subset.get(subset(pod), 0) + 1
                    if revision(pod) not in self.old[member]:
                        self.new_pods[member].add(pod.metadata.name)
                for name, count in per_subset.items():
                    bound = WANT.get(name, {}).get(member, 0) + SURGE.get(member, 0)
                    if count > bound:
                        self.over.append(f"{member}/{name}: {count} pods > quota + surge {bound}")
            self._costs(pods["dc1"])
            self._note(pods, deployments)
            for member, found_deployments in deployments.items():
                for deployment in found_deployments:
                    seen = self.member_replicas[member]
                    if not seen or seen[-1] != deployment.spec.replicas:
                        seen.append(deployment.spec.replicas)
            shown = {s["name"]: [(r["revision"], r["replicas"]) for r in s["revisions"]]
                     for s in (spread.get("status") or {}).get("subsetStatuses") or () if s.get("revisions")}
            if shown:
                self.status_revisions.append(shown)
            if live:
                self.live_revisions.append(live)

    def _note(self, pods: dict[str, list[Any]], deployments: dict[str, list[Any]]) -> None:
        line = []
        for member in ("dc1", "aws-eu"):
            shown = sorted(f"{subset(p)}:{'new' if revision(p) not in self.old[member] else 'old'}"
                           f"{'+' if sampling.is_ready(p) else '-'}{cost(p)}" for p in pods[member])
            replicas = [d.spec.replicas for d in deployments[member]]
            line.append(f"{member} {replicas} {' '.join(shown)}")
        text = " | ".join(line)
        if not self.timeline or self.timeline[-1] != text:
            self.timeline.append(text)

    def _costs(self, pods: list[Any]) -> None:
        old = [cost(p) for p in pods if revision(p) in self.old["dc1"]]
        new = [cost(p) for p in pods if revision(p) not in self.old["dc1"]]
        if not old or not new:
            return
        self.mixed_in_dc1 += 1
        old_costs = [c for c in old if c is not None]
        new_costs = [c for c in new if c is not None]
        if len(old_costs) == len(old) and len(new_costs) == len(new) and max(old_costs) < min(new_costs):
            self.ordered_in_dc1 += 1


def test_a_template_change_rolls_every_member_within_quota_plus_surge_and_keeps_the_spread(
        apis: Apis) -> None:
    namespace = f"rollout-{uuid.uuid4().hex[:6]}"
    key = f"{namespace}/web"
    workload = builders.deployment("web", REPLICAS, cpu="10m")
    workload["spec"]["strategy"] = {"type": "RollingUpdate",
                                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    waiting.wait_for(lambda: demo_scene.idle(apis), timeout=TIMEOUT, message="the federation is not idle")
    apis.core("hub").create_namespace({"metadata": {"name": namespace}})
    try:
        apis.apps("hub").create_namespaced_deployment(namespace, workload)
        apis.custom().create_namespaced_custom_object(
            common.API_GROUP, common.API_VERSION, namespace, spread_api.PLURAL, spread_body())
        last: list[demo_scene.Seen] = []

        def placed() -> demo_scene.Seen | None:
            last[:] = [demo_scene.observe(apis, key, LABEL)]
            return last[0] if demo_scene.reached(last[0], WANT, set()) else None

        before = waiting.wait_for(placed, timeout=TIMEOUT, interval=0.5, message=lambda: (
            f"never placed {WANT}; last seen {last[0].describe() if last else 'nothing'}"))
        old = {m: {revision(p) for p in pods} for m, pods in before.pods.items()}
        counts = {m: before.counts(m) for m in before.pods}

        watch = Watch(apis, namespace, old)
        with sampling.Sampler(watch.observe, name="rollout-sampler") as sampler:
            probe = {"readinessProbe": {"exec": {"command": ["true"]}, "initialDelaySeconds": 3}}
            apis.apps("hub").patch_namespaced_deployment("web", namespace, {"spec": {"template": {"spec": {
                "containers": [{"name": "app", **probe}]}}}})

            def rolled() -> demo_scene.Seen | None:
                last[:] = [demo_scene.observe(apis, key, LABEL)]
                seen = last[0]
                done = demo_scene.reached(seen, WANT, set()) and all(
                    revision(p) not in old[m] for m, pods in seen.pods.items() for p in pods)
                ready = all(sampling.is_ready(p) for pods in seen.pods.values() for p in pods)
                return seen if done and ready else None

            after = waiting.wait_for(rolled, timeout=TIMEOUT, interval=0.5, message=lambda: (
                f"the rollout never ended at {WANT}; last seen {last[0].describe() if last else 'nothing'}"))
            waiting.wait_for(lambda: not status_revisions(apis, namespace), timeout=TIMEOUT, message=lambda: (
                f"the status still shows revisions: {status_revisions(apis, namespace)}"))
        assert sampler.samples >= 8, sampler.samples
        assert len(watch.errors) < sampler.samples // 2, watch.errors
        assert watch.over == [], f"{watch.over[:5]}; seen:\n" + "\n".join(watch.timeline)
        changed = {m: seen for m, seen in watch.member_replicas.items() if len(seen) > 1}
        assert not changed, f"a member Deployment was scaled during its rollout: {changed}; seen:\n" + (
            "\n".join(watch.timeline))
        assert {m: after.counts(m) for m in after.pods} == counts, "the spread per member after the rollout"
        for member, names_seen in watch.new_pods.items():
            gone = names_seen - {p.metadata.name for p in after.pods[member]}
            assert not gone, f"new-revision pods removed in {member} during the rollout: {gone}"
        assert watch.mixed_in_dc1, "the sampler never saw both revisions in dc1"
        assert watch.ordered_in_dc1, "the agent never made dc1's old pods cheaper than its new ones"
        assert any(len({r for rows in shown.values() for r, _ in rows}) > 1
                   for shown in watch.status_revisions), f"never two revisions: {watch.status_revisions}"
        assert any(len({r for row in live.values() for r in row}) > 1 for live in watch.live_revisions), \
            f"`get placement` never showed two revisions: {watch.live_revisions}"
    finally:
        demo_scene.clean_up(apis, namespace, workload, "web")


def status_revisions(apis: Apis, namespace: str) -> list[Any]:
    spread = apis.custom().get_namespaced_custom_object(
        common.API_GROUP, common.API_VERSION, namespace, spread_api.PLURAL, "web")
    subsets = (spread.get("status") or {}).get("subsetStatuses") or ()
    return [s["revisions"] for s in subsets if s.get("revisions")]
