"""Adaptive tells the truth about room: in-flight replicas take theirs, waiting replicas stay waiting.

Two rules of the placement, each with the case that broke it:

- A spread scaled 4 -> 6 before its first pods bind: the cluster's inventory still shows room for
  4, but those 4 are the spread's own. With the pods' running counts given (the coordinator always
  gives them), held replicas that do not run yet take their room first, so the 2 new ones go to
  the next subset instead of joining 4 that already fill the cluster.
- Replicas that fit nowhere wait (Pending, counted as capacity-exhausted). That is state, not a
  one-round verdict: the next placement, given the last one's `waiting_clusters` and the running
  counts, places the still-not-running ones again — they keep waiting (CapacityExhausted stays
  true, the spread is not settled) until capacity frees somewhere in subset order, and then they
  go there.
"""

from __future__ import annotations

from federation.core import fit, placement
from tests.support.builders import member, pool, snapshot, spread_spec

ONE_CPU = fit.shape_from_pod_spec({"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]})
ONPREM_THEN_CLOUD = spread_spec({"name": "onprem", "clusters": ["dc1"]},
                                {"name": "cloud", "clusters": ["aws"]}, strategy="Adaptive")


def waiting_of(result: placement.Placement) -> dict[str, dict[str, int]]:
    return {s.name: dict(s.waiting_clusters) for s in result.subsets if s.waiting}


def test_own_replicas_in_flight_take_their_room_before_new_ones() -> None:
    room_for_4 = snapshot(member("dc1", pool(1, cpu="4")), member("aws", pool(1, cpu="4")))
    first = placement.place(ONPREM_THEN_CLOUD, replicas=4, snapshot=room_for_4, shape=ONE_CPU, running={})
    assert first.counts() == {"onprem": {"dc1": 4}, "cloud": {"aws": 0}}
    # Scaled to 6 before any pod binds: dc1's inventory still shows room for 4.
    scaled = placement.place(ONPREM_THEN_CLOUD, replicas=6, snapshot=room_for_4, shape=ONE_CPU,
                             current=first.counts(), running={})
    assert scaled.counts() == {"onprem": {"dc1": 4}, "cloud": {"aws": 2}}
    # Without running counts (a what-if that knows only the placement) held replicas are taken as
    # running, as before.
    blind = placement.place(ONPREM_THEN_CLOUD, replicas=6, snapshot=room_for_4, shape=ONE_CPU,
                            current=first.counts())
    assert blind.counts() == {"onprem": {"dc1": 6}, "cloud": {"aws": 0}}


def test_waiting_replicas_stay_waiting_until_capacity_frees_and_then_go_there() -> None:
    full_cloud = snapshot(member("dc1", pool(1, cpu="2")), member("aws", pool(1, cpu="2", used_cpu="2")))
    first = placement.place(ONPREM_THEN_CLOUD, replicas=4, snapshot=full_cloud, shape=ONE_CPU, running={})
    assert first.counts() == {"onprem": {"dc1": 4}, "cloud": {"aws": 0}}
    assert first.capacity_exhausted == 2 and waiting_of(first) == {"onprem": {"dc1": 2}}
    assert not placement.settled(first)
    # Two pods run on dc1 (its node is full now), two are Pending: still waiting, still exhausted.
    dc1_full = snapshot(member("dc1", pool(1, cpu="2", used_cpu="2")),
                        member("aws", pool(1, cpu="2", used_cpu="2")))
    running = {"onprem": {"dc1": 2}}
    second = placement.place(ONPREM_THEN_CLOUD, replicas=4, snapshot=dc1_full, shape=ONE_CPU,
                             current=first.counts(), running=running, waiting=waiting_of(first))
    assert second.counts() == first.counts()
    assert second.capacity_exhausted == 2 and waiting_of(second) == {"onprem": {"dc1": 2}}
    assert not placement.settled(second)
    # aws frees its node: the two waiting replicas go to the cloud subset, where they fit.
    aws_free = snapshot(member("dc1", pool(1, cpu="2", used_cpu="2")), member("aws", pool(1, cpu="2")))
    third = placement.place(ONPREM_THEN_CLOUD, replicas=4, snapshot=aws_free, shape=ONE_CPU,
                            current=second.counts(), running=running, waiting=waiting_of(second))
    assert third.counts() == {"onprem": {"dc1": 2}, "cloud": {"aws": 2}}
    assert third.capacity_exhausted == 0 and placement.settled(third)


def test_waiting_replicas_that_started_running_are_held_like_any_other() -> None:
    full = snapshot(member("dc1", pool(1, cpu="2", used_cpu="2")),
                    member("aws", pool(1, cpu="2", used_cpu="2")))
    current = {"onprem": {"dc1": 4}, "cloud": {"aws": 0}}
    # The scheduler found room after all (another workload left): all four run.
    result = placement.place(ONPREM_THEN_CLOUD, replicas=4, snapshot=full, shape=ONE_CPU, current=current,
                             running={"onprem": {"dc1": 4}}, waiting={"onprem": {"dc1": 2}})
    assert result.counts() == current and result.capacity_exhausted == 0
