"""Worked examples: seed 001's four scenarios lifted to clusters, and every rule of DESIGN §3.

Each case states a situation and the exact placement a person would expect; ids read as sentences.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from federation.api import cluster, spread
from federation.core import fit, pending_deduction, placement, quotas
from tests.support.builders import CORDON_TAINT_KEY, member, pool, snapshot, spread_spec

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)




ONE_CPU = fit.shape_from_pod_spec({"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]})


def region_eu() -> dict[str, Any]:
    return {"matchLabels": {"topology.fedspread.io/region": "eu"}}


@dataclasses.dataclass
class Case:
    id: str
    spec: spread.FederatedSpreadSpec
    snapshot: cluster.CapacitySnapshot
    replicas: int
    expected: dict[str, dict[str, int]]
    unplaced: int = 0
    waiting: int = 0
    shape: fit.PodShape = dataclasses.field(default_factory=fit.empty_shape)
    current: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)


def tainted(entry: dict[str, Any], effect: str) -> dict[str, Any]:
    """A snapshot cluster with one cluster taint of `effect`."""
    return {**entry, "taints": [{"key": CORDON_TAINT_KEY, "effect": effect}]}


def tolerating(spec: spread.FederatedSpreadSpec, *tolerations: dict[str, Any]) -> spread.FederatedSpreadSpec:
    """`spec` with clusterTolerations `tolerations` (camelCase documents)."""
    return spec.model_copy(update={
        "cluster_tolerations": [spread.ClusterToleration.model_validate(t) for t in tolerations]})


def with_taints(entry: dict[str, Any], *effects: str) -> dict[str, Any]:
    """A snapshot cluster with one cluster taint per effect, each under its own key."""
    return {**entry, "taints": [{"key": f"taint-{i}", "effect": e} for i, e in enumerate(effects)]}


EU_BALANCE = spread_spec({"name": "eu", "clusterSpread": "Balance",
                          "clusterSelector": {"matchLabels": {"topology.fedspread.io/region": "eu"}}})
ONPREM_THEN_CLOUD = spread_spec({"name": "onprem", "clusters": ["dc1"]},
                                {"name": "cloud", "clusters": ["aws-eu"]})
ONPREM_4_CLOUD_4 = {"onprem": {"dc1": 4}, "cloud": {"aws-eu": 4}}


BIG = snapshot(member("dc1", pool(10)), member("aws-eu", pool(10), region="eu"),
               member("gcp-eu", pool(10), region="eu"), member("azure-eu", pool(10), region="eu"))

CASES = [
    # --- seed 001, scenario 1: the base pool holds at most N, the rest go elastic --------------
    Case("seed1: on-prem capped at 30, the rest to the cloud",
         spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 30},
              {"name": "cloud", "clusters": ["aws-eu"]}),
         BIG, 40, {"onprem": {"dc1": 30}, "cloud": {"aws-eu": 10}}),
    Case("seed1: below the cap everything stays on-prem",
         spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 30},
              {"name": "cloud", "clusters": ["aws-eu"]}),
         BIG, 20, {"onprem": {"dc1": 20}, "cloud": {"aws-eu": 0}}),
    # --- seed 001, scenario 2: prefer on-prem, overflow when it is full -----------------------
    Case("seed2: adaptive overflow when on-prem has room for 12 one-cpu pods",
         spread_spec({"name": "onprem", "clusters": ["dc1"]},
              {"name": "cloud", "clusterSelector": region_eu(), "clusterSpread": "Fill"},
              strategy="Adaptive"),
         snapshot(member("dc1", pool(2, cpu="8", used_cpu="2")),
                  member("aws-eu", pool(10), region="eu")),
         20, {"onprem": {"dc1": 12}, "cloud": {"aws-eu": 8}}, shape=ONE_CPU),
    Case("seed2: fixed strategy ignores capacity and leaves pods pending on-prem",
         spread_spec({"name": "onprem", "clusters": ["dc1"]}, {"name": "cloud", "clusters": ["aws-eu"]}),
         snapshot(member("dc1", pool(2, cpu="8", used_cpu="2")), member("aws-eu", pool(10))),
         20, {"onprem": {"dc1": 20}, "cloud": {"aws-eu": 0}}, shape=ONE_CPU),
    # --- seed 001, scenario 3: 1:1:3 across three clusters -------------------------------------
    Case("seed3: 20%/20%/60% of 10 is 2/2/6",
         spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": "20%"},
              {"name": "b", "clusters": ["aws-eu"], "maxReplicas": "20%"},
              {"name": "c", "clusters": ["gcp-eu"], "maxReplicas": "60%"}),
         BIG, 10, {"a": {"dc1": 2}, "b": {"aws-eu": 2}, "c": {"gcp-eu": 6}}),
    Case("DESIGN: 20%/20%/60% of 7 is 2/1/4 by largest remainder",
         spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": "20%"},
              {"name": "b", "clusters": ["aws-eu"], "maxReplicas": "20%"},
              {"name": "c", "clusters": ["gcp-eu"], "maxReplicas": "60%"}),
         BIG, 7, {"a": {"dc1": 2}, "b": {"aws-eu": 1}, "c": {"gcp-eu": 4}}),
    Case("DESIGN: 34%/33%/33% of 10 is 4/3/3, not Kruise's 4/4/4",
         spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": "34%"},
              {"name": "b", "clusters": ["aws-eu"], "maxReplicas": "33%"},
              {"name": "c", "clusters": ["gcp-eu"], "maxReplicas": "33%"}),
         BIG, 10, {"a": {"dc1": 4}, "b": {"aws-eu": 3}, "c": {"gcp-eu": 3}}),
    Case("percentages under 100%: the unbounded subset takes the rest",
         spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": "30%"},
              {"name": "rest", "clusters": ["aws-eu"]}),
         BIG, 5, {"a": {"dc1": 2}, "rest": {"aws-eu": 3}}),
    # --- seed 001, scenario 4: per-architecture node pools with their own patches --------------
    Case("seed4: x86 pool first, arm pool when x86 is full",
         spread_spec({"name": "x86", "clusters": ["dc1"],
               "requiredNodeSelectorTerm": {"matchExpressions": [
                   {"key": "arch", "operator": "In", "values": ["x86"]}]},
               "patch": {"spec": {"containers": [{"name": "main", "resources": {"limits": {"cpu": "2"}}}]}}},
              {"name": "arm", "clusters": ["dc1"],
               "requiredNodeSelectorTerm": {"matchExpressions": [
                   {"key": "arch", "operator": "In", "values": ["arm"]}]},
               "tolerations": [{"key": "arch", "operator": "Equal", "value": "arm", "effect": "NoSchedule"}],
               "patch": {"spec": {"containers": [{"name": "main", "resources": {"limits": {"cpu": "1"}}}]}}},
              strategy="Adaptive"),
         snapshot(member("dc1", pool(1, pods=4, labels={"arch": "x86"}),
                         pool(2, pods=5, labels={"arch": "arm"},
                              taints=[{"key": "arch", "value": "arm", "effect": "NoSchedule"}]))),
         9, {"x86": {"dc1": 4}, "arm": {"dc1": 5}}),
    Case("untolerated node taint: the arm pool admits nothing without the toleration",
         spread_spec({"name": "arm", "clusters": ["dc1"],
               "requiredNodeSelectorTerm": {"matchExpressions": [
                   {"key": "arch", "operator": "In", "values": ["arm"]}]}},
              {"name": "cloud", "clusters": ["aws-eu"]}, strategy="Adaptive"),
         snapshot(member("dc1", pool(2, labels={"arch": "arm"},
                                     taints=[{"key": "arch", "value": "arm", "effect": "NoSchedule"}])),
                  member("aws-eu", pool(1))),
         3, {"arm": {"dc1": 0}, "cloud": {"aws-eu": 3}}),
    # --- DESIGN §3: dividing inside a multi-cluster subset -------------------------------------
    Case("Fill takes region clusters by name, each up to its capacity",
         spread_spec({"name": "eu", "clusterSelector": region_eu(), "clusterSpread": "Fill"},
                     strategy="Adaptive"),
         snapshot(member("gcp-eu", pool(1, pods=4), region="eu"),
                  member("aws-eu", pool(1, pods=3), region="eu")),
         5, {"eu": {"aws-eu": 3, "gcp-eu": 2}}),
    Case("Fill with listed clusters follows the listed order",
         spread_spec({"name": "eu", "clusters": ["gcp-eu", "aws-eu"], "clusterSpread": "Fill"},
                     strategy="Adaptive"),
         snapshot(member("gcp-eu", pool(1, pods=4), region="eu"),
                  member("aws-eu", pool(1, pods=3), region="eu")),
         5, {"eu": {"gcp-eu": 4, "aws-eu": 1}}),
    Case("Balance splits 7 over three clusters as 3/2/2",
         spread_spec({"name": "eu", "clusterSelector": region_eu(), "clusterSpread": "Balance"}),
         BIG, 7, {"eu": {"aws-eu": 3, "azure-eu": 2, "gcp-eu": 2}}),
    Case("Balance respects capacity in Adaptive and gives the rest to the others",
         spread_spec({"name": "eu", "clusterSelector": region_eu(), "clusterSpread": "Balance"},
              strategy="Adaptive"),
         snapshot(member("aws-eu", pool(1, pods=1), region="eu"), member("gcp-eu", pool(1), region="eu")),
         6, {"eu": {"aws-eu": 1, "gcp-eu": 5}}),
    Case("Capacity splits in proportion to free capacity (30:10 -> 3:1)",
         spread_spec({"name": "eu", "clusterSelector": region_eu(), "clusterSpread": "Capacity"},
              strategy="Adaptive"),
         snapshot(member("aws-eu", pool(3, pods=10), region="eu"),
                  member("gcp-eu", pool(1, pods=10), region="eu")),
         8, {"eu": {"aws-eu": 6, "gcp-eu": 2}}),
    Case("Capacity in Fixed uses simulated capacity as weights but no limit",
         spread_spec({"name": "eu", "clusterSelector": region_eu()}),
         snapshot(member("aws-eu", pool(1, pods=3), region="eu"),
                  member("gcp-eu", pool(1, pods=1), region="eu")),
         8, {"eu": {"aws-eu": 6, "gcp-eu": 2}}),
    # --- DESIGN §3: unready and cordoned clusters ----------------------------------------------
    Case("an unready cluster takes nothing, its share goes to the next subset (Fixed)",
         spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 5},
              {"name": "cloud", "clusters": ["aws-eu"]}),
         snapshot(member("dc1", pool(10), ready=False), member("aws-eu", pool(10))),
         8, {"onprem": {"dc1": 0}, "cloud": {"aws-eu": 8}}),
    Case("a cordoned cluster takes nothing, its region neighbours take its share (Adaptive)",
         spread_spec({"name": "eu", "clusterSelector": region_eu(), "clusterSpread": "Balance"},
              strategy="Adaptive"),
         snapshot(member("aws-eu", pool(10), region="eu", cordoned=True),
                  member("gcp-eu", pool(10), region="eu")),
         4, {"eu": {"aws-eu": 0, "gcp-eu": 4}}),
    # --- cordons: NoSchedule keeps what runs, NoExecute moves it, PreferNoSchedule changes nothing --
    Case("a NoSchedule cordon keeps its running replicas; new ones go to the neighbours",
         EU_BALANCE, snapshot(tainted(member("aws-eu", pool(10), region="eu"), "NoSchedule"),
                              member("gcp-eu", pool(10), region="eu")),
         8, {"eu": {"aws-eu": 3, "gcp-eu": 5}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("a NoSchedule cordon keeps its replicas under Adaptive too",
         spread_spec({"name": "eu", "clusterSelector": region_eu(), "clusterSpread": "Balance"},
                     strategy="Adaptive"),
         snapshot(tainted(member("aws-eu", pool(10), region="eu"), "NoSchedule"),
                  member("gcp-eu", pool(10), region="eu")),
         6, {"eu": {"aws-eu": 3, "gcp-eu": 3}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("a NoExecute cordon moves its replicas to the neighbours",
         EU_BALANCE, snapshot(tainted(member("aws-eu", pool(10), region="eu"), "NoExecute"),
                              member("gcp-eu", pool(10), region="eu")),
         6, {"eu": {"aws-eu": 0, "gcp-eu": 6}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("a PreferNoSchedule taint changes nothing: new replicas are balanced over both",
         EU_BALANCE, snapshot(tainted(member("aws-eu", pool(10), region="eu"), "PreferNoSchedule"),
                              member("gcp-eu", pool(10), region="eu")),
         8, {"eu": {"aws-eu": 4, "gcp-eu": 4}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    # --- clusterTolerations: a tolerated taint cordons nothing for that spread ---------------------
    Case("a tolerated NoSchedule cordon takes new replicas",
         tolerating(EU_BALANCE, {"key": CORDON_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}),
         snapshot(tainted(member("aws-eu", pool(10), region="eu"), "NoSchedule"),
                  member("gcp-eu", pool(10), region="eu")),
         8, {"eu": {"aws-eu": 4, "gcp-eu": 4}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("a tolerated NoExecute cordon keeps its replicas",
         tolerating(EU_BALANCE, {"key": CORDON_TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}),
         snapshot(tainted(member("aws-eu", pool(10), region="eu"), "NoExecute"),
                  member("gcp-eu", pool(10), region="eu")),
         6, {"eu": {"aws-eu": 3, "gcp-eu": 3}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("a tolerated NoExecute cordon takes new replicas too",
         tolerating(EU_BALANCE, {"key": CORDON_TAINT_KEY, "operator": "Equal", "effect": "NoExecute"}),
         snapshot(tainted(member("aws-eu", pool(10), region="eu"), "NoExecute"),
                  member("gcp-eu", pool(10), region="eu")),
         8, {"eu": {"aws-eu": 4, "gcp-eu": 4}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("Exists with an empty key tolerates every taint of every effect",
         tolerating(EU_BALANCE, {"operator": "Exists"}),
         snapshot(with_taints(member("aws-eu", pool(10), region="eu"), "NoSchedule", "NoExecute"),
                  member("gcp-eu", pool(10), region="eu")),
         8, {"eu": {"aws-eu": 4, "gcp-eu": 4}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("a NoSchedule toleration does not tolerate NoExecute: the replicas move",
         tolerating(EU_BALANCE, {"operator": "Exists", "effect": "NoSchedule"}),
         snapshot(tainted(member("aws-eu", pool(10), region="eu"), "NoExecute"),
                  member("gcp-eu", pool(10), region="eu")),
         6, {"eu": {"aws-eu": 0, "gcp-eu": 6}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("tolerating NoExecute of two taints leaves the NoSchedule cordon",
         tolerating(EU_BALANCE, {"key": "taint-1", "operator": "Exists", "effect": "NoExecute"}),
         snapshot(with_taints(member("aws-eu", pool(10), region="eu"), "NoSchedule", "NoExecute"),
                  member("gcp-eu", pool(10), region="eu")),
         8, {"eu": {"aws-eu": 3, "gcp-eu": 5}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("an untolerated cordon behaves as without tolerations (another key, another value)",
         tolerating(EU_BALANCE, {"key": "other", "operator": "Exists"},
                    {"key": CORDON_TAINT_KEY, "operator": "Equal", "value": "x"}),
         snapshot(tainted(member("aws-eu", pool(10), region="eu"), "NoSchedule"),
                  member("gcp-eu", pool(10), region="eu")),
         8, {"eu": {"aws-eu": 3, "gcp-eu": 5}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("a timed NoExecute toleration holds while its time cannot be judged (no timeAdded, no clock)",
         tolerating(EU_BALANCE, {"key": CORDON_TAINT_KEY, "operator": "Exists", "effect": "NoExecute",
                                 "tolerationSeconds": 300}),
         snapshot(tainted(member("aws-eu", pool(10), region="eu"), "NoExecute"),
                  member("gcp-eu", pool(10), region="eu")),
         6, {"eu": {"aws-eu": 3, "gcp-eu": 3}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("tolerationSeconds does not matter to a NoSchedule taint",
         tolerating(EU_BALANCE, {"key": CORDON_TAINT_KEY, "operator": "Exists", "tolerationSeconds": 60}),
         snapshot(tainted(member("aws-eu", pool(10), region="eu"), "NoSchedule"),
                  member("gcp-eu", pool(10), region="eu")),
         8, {"eu": {"aws-eu": 4, "gcp-eu": 4}}, current={"eu": {"aws-eu": 3, "gcp-eu": 3}}),
    Case("scale-down under a NoSchedule cordon trims the lowest-priority subset first (the cordoned keeps)",
         ONPREM_THEN_CLOUD,
         snapshot(tainted(member("dc1", pool(10)), "NoSchedule"), member("aws-eu", pool(10))),
         6, {"onprem": {"dc1": 4}, "cloud": {"aws-eu": 2}}, current=ONPREM_4_CLOUD_4),
    Case("scale-down gives a cordoned lowest-priority subset no extra protection",
         ONPREM_THEN_CLOUD,
         snapshot(member("dc1", pool(10)), tainted(member("aws-eu", pool(10)), "NoSchedule")),
         6, {"onprem": {"dc1": 4}, "cloud": {"aws-eu": 2}}, current=ONPREM_4_CLOUD_4),
    Case("scale-up never adds to a cordoned cluster, even the first subset's",
         ONPREM_THEN_CLOUD,
         snapshot(tainted(member("dc1", pool(10)), "NoSchedule"), member("aws-eu", pool(10))),
         9, {"onprem": {"dc1": 4}, "cloud": {"aws-eu": 5}}, current={"onprem": {"dc1": 4}}),
    Case("a cordoned cluster keeps no more than its subset's cap",
         spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 2},
                     {"name": "cloud", "clusters": ["aws-eu"]}),
         snapshot(tainted(member("dc1", pool(10)), "NoSchedule"), member("aws-eu", pool(10))),
         5, {"onprem": {"dc1": 2}, "cloud": {"aws-eu": 3}},
         current={"onprem": {"dc1": 4}, "cloud": {"aws-eu": 1}}),
    Case("a cluster named by a subset but absent from the snapshot gets zero",
         spread_spec({"name": "a", "clusters": ["ghost", "dc1"], "clusterSpread": "Balance"}),
         snapshot(member("dc1", pool(1))),
         3, {"a": {"ghost": 0, "dc1": 3}}),
    # --- DESIGN §3: nothing dropped silently ---------------------------------------------------
    Case("beyond every cap: unplaced",
         spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": 3},
              {"name": "b", "clusters": ["aws-eu"], "maxReplicas": 2}),
         BIG, 9, {"a": {"dc1": 3}, "b": {"aws-eu": 2}}, unplaced=4),
    Case("no capacity anywhere: wait in the highest-priority subset with cap room",
         spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": 4},
              {"name": "b", "clusters": ["aws-eu"]}, strategy="Adaptive"),
         snapshot(member("dc1", pool(1, pods=2)), member("aws-eu", pool(1, pods=3))),
         10, {"a": {"dc1": 4}, "b": {"aws-eu": 6}}, waiting=5),
    Case("capacity exhausted and caps full: waiting first, then unplaced",
         spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": 4},
              {"name": "b", "clusters": ["aws-eu"], "maxReplicas": 4}, strategy="Adaptive"),
         snapshot(member("dc1", pool(1, pods=1)), member("aws-eu", pool(1, pods=1))),
         10, {"a": {"dc1": 4}, "b": {"aws-eu": 4}}, unplaced=2, waiting=6),
    Case("every cluster unready: all unplaced",
         spread_spec({"name": "a", "clusters": ["dc1"]}, strategy="Adaptive"),
         snapshot(member("dc1", pool(1), ready=False)),
         3, {"a": {"dc1": 0}}, unplaced=3),
    Case("disableSimulationSchedule: adaptive without node capacity limits",
         spread_spec({"name": "a", "clusters": ["dc1"]}, {"name": "b", "clusters": ["aws-eu"]},
              strategy="Adaptive", disableSimulationSchedule=True),
         snapshot(member("dc1", pool(1, pods=1)), member("aws-eu", pool(1))),
         5, {"a": {"dc1": 5}, "b": {"aws-eu": 0}}),
    Case("two subsets sharing one node pool never promise the same slot twice",
         spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": 3},
              {"name": "b", "clusters": ["dc1"]}, {"name": "c", "clusters": ["aws-eu"]},
              strategy="Adaptive"),
         snapshot(member("dc1", pool(1, pods=5)), member("aws-eu", pool(1))),
         8, {"a": {"dc1": 3}, "b": {"dc1": 2}, "c": {"aws-eu": 3}}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_placement(case: Case) -> None:
    result = placement.place(case.spec, replicas=case.replicas, snapshot=case.snapshot, shape=case.shape,
                             current=case.current)
    assert result.counts() == case.expected
    assert result.unplaced == case.unplaced
    assert result.capacity_exhausted == case.waiting
    assert result.placed + result.unplaced == case.replicas


def test_json_shape_lists_every_subset_and_every_snapshot_cluster() -> None:
    result = placement.place(
        spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 2},
             {"name": "eu", "clusterSelector": region_eu(), "clusterSpread": "Balance"}),
        replicas=2, snapshot=BIG,
    )
    assert result.to_json() == {
        "replicas": 2, "unplaced": 0,
        "clusters": {"dc1": 2, "aws-eu": 0, "gcp-eu": 0, "azure-eu": 0},
        "subsets": [{"name": "onprem", "replicas": 2, "clusters": {"dc1": 2}, "reasons": ["cap 2 reached"]},
                    {"name": "eu", "replicas": 0, "clusters": {"aws-eu": 0, "azure-eu": 0, "gcp-eu": 0},
                     "reasons": []}],
    }


STICKY = spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 10},
              {"name": "cloud", "clusters": ["aws-eu"]}, strategy="Adaptive")


def test_capacity_change_alone_moves_no_replica() -> None:
    small = snapshot(member("dc1", pool(1, pods=4)), member("aws-eu", pool(1)))
    first = placement.place(STICKY, replicas=8, snapshot=small)
    assert first.counts() == {"onprem": {"dc1": 4}, "cloud": {"aws-eu": 4}}
    grown = snapshot(member("dc1", pool(1, pods=50)), member("aws-eu", pool(1)))
    again = placement.place(STICKY, replicas=8, snapshot=grown, current=first.counts())
    assert again.counts() == first.counts()
    # Only new replicas follow the new capacity.
    more = placement.place(STICKY, replicas=12, snapshot=grown, current=first.counts())
    assert more.counts() == {"onprem": {"dc1": 8}, "cloud": {"aws-eu": 4}}


def test_scale_down_removes_lowest_priority_subset_first() -> None:
    roomy = snapshot(member("dc1", pool(1)), member("aws-eu", pool(1)))
    current = {"onprem": {"dc1": 6}, "cloud": {"aws-eu": 6}}
    down = placement.place(STICKY, replicas=8, snapshot=roomy, current=current)
    assert down.counts() == {"onprem": {"dc1": 6}, "cloud": {"aws-eu": 2}}
    further = placement.place(STICKY, replicas=4, snapshot=roomy, current=down.counts())
    assert further.counts() == {"onprem": {"dc1": 4}, "cloud": {"aws-eu": 0}}


def test_cap_shrink_trims_the_subset_and_refills_below() -> None:
    roomy = snapshot(member("dc1", pool(1)), member("aws-eu", pool(1)))
    tighter = spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 3},
                   {"name": "cloud", "clusters": ["aws-eu"]})
    result = placement.place(tighter, replicas=8, snapshot=roomy,
                             current={"onprem": {"dc1": 8}, "cloud": {"aws-eu": 0}})
    assert result.counts() == {"onprem": {"dc1": 3}, "cloud": {"aws-eu": 5}}


@pytest.mark.parametrize(("added_seconds_ago", "aws"), [(299, 3), (300, 0), (301, 0)])
def test_a_timed_noexecute_toleration_keeps_replicas_until_it_ends(added_seconds_ago: int, aws: int) -> None:
    spec = tolerating(EU_BALANCE, {"key": CORDON_TAINT_KEY, "operator": "Exists", "effect": "NoExecute",
                                   "tolerationSeconds": 300})
    added = (NOW - datetime.timedelta(seconds=added_seconds_ago)).isoformat()
    cordoned = {**member("aws-eu", pool(10), region="eu"),
                "taints": [{"key": CORDON_TAINT_KEY, "effect": "NoExecute", "timeAdded": added}]}
    both = snapshot(cordoned, member("gcp-eu", pool(10), region="eu"))
    current = {"eu": {"aws-eu": 3, "gcp-eu": 3}}
    result = placement.place(spec, replicas=6, snapshot=both, current=current, now=NOW)
    assert result.counts() == {"eu": {"aws-eu": aws, "gcp-eu": 6 - aws}}


def test_failover_moves_replicas_off_an_unready_cluster() -> None:
    current = {"eu": {"aws-eu": 3, "gcp-eu": 3}}
    spread_eu = spread_spec({"name": "eu", "clusterSelector": region_eu(), "clusterSpread": "Balance"})
    lost = snapshot(member("aws-eu", pool(1), region="eu", ready=False),
                    member("gcp-eu", pool(1), region="eu"))
    result = placement.place(spread_eu, replicas=6, snapshot=lost, current=current)
    assert result.counts() == {"eu": {"aws-eu": 0, "gcp-eu": 6}}
    back = snapshot(member("aws-eu", pool(1), region="eu"), member("gcp-eu", pool(1), region="eu"))
    # `place` alone keeps what `current` says (stability); the coordinator counts a returning
    # cluster's running pods in `current` again (`World.current_for`, tests/unit/test_handover.py).
    assert placement.place(spread_eu, replicas=6, snapshot=back, current=result.counts()).counts() == \
        result.counts()


def test_unschedulable_mark_skips_the_pair_until_it_expires() -> None:
    adaptive = spread_spec({"name": "a", "clusters": ["dc1"]}, {"name": "b", "clusters": ["aws-eu"]},
                    strategy="Adaptive", unschedulableSeconds=300)
    roomy = snapshot(member("dc1", pool(1)), member("aws-eu", pool(1)))
    mark = placement.UnschedulableMark(subset="a", cluster="dc1", since=NOW)
    current = {"a": {"dc1": 5}}
    running = {"a": {"dc1": 2}}
    marked = placement.place(adaptive, replicas=5, snapshot=roomy, current=current, running=running,
                             unschedulable=[mark], now=NOW + datetime.timedelta(seconds=10))
    # The 3 pending replicas are released and go to the next subset; running ones stay.
    assert marked.counts() == {"a": {"dc1": 2}, "b": {"aws-eu": 3}}
    assert any("unschedulable" in r for r in marked.subsets[0].reason_texts)
    expired = placement.place(adaptive, replicas=7, snapshot=roomy, current=marked.counts(),
                              unschedulable=[mark], now=NOW + datetime.timedelta(seconds=301))
    assert expired.counts() == {"a": {"dc1": 4}, "b": {"aws-eu": 3}}


def test_overcommit_protection_two_spreads_share_a_small_cluster() -> None:
    small = snapshot(member("dc1", pool(1, cpu="4")), member("aws-eu", pool(4)))
    first = spread_spec({"name": "onprem", "clusters": ["dc1"]}, {"name": "cloud", "clusters": ["aws-eu"]},
                 strategy="Adaptive")
    a = placement.place(first, replicas=3, snapshot=small, shape=ONE_CPU)
    assert a.counts() == {"onprem": {"dc1": 3}, "cloud": {"aws-eu": 0}}
    # Spread A's 3 replicas are placed but not running yet: B must not see their room as free.
    reduced = pending_deduction.deduct_pending(small, [pending_deduction.PendingPods("dc1", ONE_CPU, 3)])
    b = placement.place(first, replicas=3, snapshot=reduced, shape=ONE_CPU)
    assert b.counts() == {"onprem": {"dc1": 1}, "cloud": {"aws-eu": 2}}


def test_quota_tables_and_local_subset_choice() -> None:
    result = placement.place(
        spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 3},
             {"name": "eu", "clusterSelector": region_eu(), "clusterSpread": "Balance"},
             {"name": "spill", "clusters": ["dc1"]}),
        replicas=7, snapshot=BIG,
    )
    tables = quotas.cluster_quotas(result)
    assert [(q.subset, q.quota) for q in tables["dc1"].subsets] == [("onprem", 3), ("eu", 0), ("spill", 0)]
    assert tables["aws-eu"].replicas == 2 and tables["dc1"].replicas == 3
    assert sum(t.replicas for t in tables.values()) == result.placed
    dc1 = tables["dc1"].subsets
    assert quotas.choose_subset(dc1, assigned={"onprem": 2}, adaptive=True) == "onprem"
    assert quotas.choose_subset(dc1, assigned={"onprem": 3}, adaptive=True) is None
    assert quotas.choose_subset(dc1, assigned={}, adaptive=True, unschedulable={"onprem"}) is None
    # Fixed ignores marks: the marked subset still takes the pod.
    assert quotas.choose_subset(dc1, assigned={}, adaptive=False, unschedulable={"onprem"}) == "onprem"


def test_explanations_name_the_binding_constraint() -> None:
    result = placement.place(
        spread_spec({"name": "onprem", "clusters": ["dc1"], "maxReplicas": 5},
             {"name": "eu", "clusterSelector": region_eu(), "clusterSpread": "Fill"}, strategy="Adaptive"),
        replicas=9,
        snapshot=snapshot(member("dc1", pool(1)), member("aws-eu", pool(1, pods=2), region="eu"),
                          member("gcp-eu", pool(1), region="eu", cordoned=True)),
    )
    onprem, eu = result.subsets
    assert onprem.reason_texts[0] == "cap 5 reached"
    assert "gcp-eu: cordoned (NoSchedule): takes no new replicas" in eu.reason_texts
    assert eu.capacity == 2 and eu.replicas == 4 and eu.waiting == 2


def test_explanations_say_what_a_cordon_keeps() -> None:
    result = placement.place(
        EU_BALANCE, replicas=8, current={"eu": {"aws-eu": 3, "gcp-eu": 3}},
        snapshot=snapshot(tainted(member("aws-eu", pool(10), region="eu"), "NoSchedule"),
                          tainted(member("gcp-eu", pool(10), region="eu"), "NoExecute"),
                          member("azure-eu", pool(10), region="eu")),
    )
    (eu,) = result.subsets
    assert eu.clusters == {"aws-eu": 3, "azure-eu": 5, "gcp-eu": 0}
    assert "aws-eu: cordoned (NoSchedule): keeps its 3 running, takes no new replicas" in eu.reason_texts
    assert "gcp-eu: cordoned (NoExecute): its replicas move, takes no new replicas" in eu.reason_texts


def test_fixed_ignores_unschedulable_marks() -> None:
    fixed = spread_spec({"name": "a", "clusters": ["dc1"], "maxReplicas": 5},
                        {"name": "b", "clusters": ["aws-eu"]})
    mark = placement.UnschedulableMark(subset="a", cluster="dc1", since=NOW)
    result = placement.place(fixed, replicas=7, snapshot=BIG, current={"a": {"dc1": 5}},
                             running={"a": {"dc1": 2}}, unschedulable=[mark], now=NOW)
    assert result.counts() == {"a": {"dc1": 5}, "b": {"aws-eu": 2}}
    assert not any("unschedulable" in r for r in result.subsets[0].reason_texts)
    fresh = placement.place(fixed, replicas=7, snapshot=BIG, unschedulable=[mark], now=NOW)
    assert fresh.counts() == {"a": {"dc1": 5}, "b": {"aws-eu": 2}}
