"""Scaling a spread to zero keeps its member workloads, at 0 replicas.

Why: "a cluster gets a spread only while it has replicas of it" would remove every member
Deployment when the hub Deployment is scaled to 0 — a normal act (a nightly shutdown, a
suspended environment) after which member HPAs and PodDisruptionBudgets point at nothing and
the next scale-up recreates everything. The rule: at 0 replicas, every cluster that holds the
spread keeps its assignment (zero quotas), as `kubectl scale --replicas=0` keeps a Deployment.

Driven on `fedmodel.Federation` (the real coordinator facade, the agents' real bookkeeping and
link rules, modelled member controllers).
"""

from __future__ import annotations

import fedmodel as fm

from federation.api import names
from tests.support import builders
from tests.support.clock import ManualClock

SUBSETS = [{"name": "onprem", "clusters": ["dc1"], "maxReplicas": 2},
           {"name": "cloud", "clusters": ["aws", "gcp"], "clusterSpread": "Balance"}]


def federation() -> fm.Federation:
    fed = fm.Federation(ManualClock(fm.T0), dict.fromkeys(fm.CLUSTERS, 4))
    for name in fm.CLUSTERS:
        fed.world.upsert_cluster(name, labels={names.REGION_LABEL: name})
        fed.connect(name)
    item = builders.federated_spread(fm.NAME, SUBSETS, namespace=fm.NAMESPACE, generation=1)
    with fed.coordinator.lock:
        fed.coordinator.publish(fed.world.upsert_spread(item))
    scale(fed, 6)
    return fed


def scale(fed: fm.Federation, replicas: int) -> None:
    template = builders.deployment(fm.NAME, replicas, namespace=fm.NAMESPACE, cpu=None, image="web:1")
    with fed.coordinator.lock:
        fed.coordinator.publish(fed.world.set_target(fm.KEY, replicas=replicas, template=template))
    fed.pump()
    for _ in range(3):
        for name in fm.CLUSTERS:
            fed.controller_round(name)


def test_scaled_to_zero_every_member_keeps_its_workload_at_zero() -> None:
    fed = federation()
    assert {n: len(m.pods) for n, m in fed.members.items()} == {"dc1": 2, "aws": 2, "gcp": 2}
    scale(fed, 0)
    for name, member in fed.members.items():
        assert not member.pods, name
        assert member.book.assignment(fm.KEY) is not None, f"{name}'s workload was removed at 0"
        assert member.deployment_replicas == 0 and not any(member.quotas().values()), name
        assert member.seen["removal"] == 0, name


def test_scaling_up_again_from_zero_uses_the_kept_workloads() -> None:
    fed = federation()
    scale(fed, 0)
    scale(fed, 6)
    assert {n: len(m.pods) for n, m in fed.members.items()} == {"dc1": 2, "aws": 2, "gcp": 2}
    assert all(m.seen["removal"] == 0 for m in fed.members.values())


def test_a_cluster_without_replicas_after_the_scale_up_is_removed_as_before() -> None:
    # The zero rule is for a spread at 0 only: scaled to 2 (all in dc1), aws and gcp hold no
    # replicas any more and, once their pods are gone, their workloads are removed.
    fed = federation()
    scale(fed, 0)
    scale(fed, 2)
    assert len(fed.members["dc1"].pods) == 2
    for name in ("aws", "gcp"):
        assert fed.members[name].book.assignment(fm.KEY) is None, name
        assert fed.members[name].seen["removal"] == 1, name
