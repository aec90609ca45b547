"""The sent-assignments ledger: a publish sends only what changed, to the clusters concerned."""

from __future__ import annotations

from federation.coordinator.wire import deliveries
from federation.rpc import agent_pb2


def assignment(key: str, *, quota: int, generation: int = 1) -> agent_pb2.SpreadAssignment:
    message = agent_pb2.SpreadAssignment(spread=key, generation=generation, replicas=quota)
    message.subsets.add(name="a", index=0, quota=quota)
    return message


def test_the_same_assignment_is_sent_once_and_a_new_generation_alone_is_not_news() -> None:
    ledger = deliveries.SentLedger()
    first = assignment("shop/web", quota=2)
    assert ledger.deliver("dc1", "shop/web", first, reason="") is first
    assert ledger.deliver("dc1", "shop/web", assignment("shop/web", quota=2, generation=2), reason="") is None
    changed = assignment("shop/web", quota=3, generation=3)
    assert ledger.deliver("dc1", "shop/web", changed, reason="") is changed


def test_holders_drive_which_clusters_a_publish_visits_and_removals_follow_them() -> None:
    ledger = deliveries.SentLedger()
    ledger.deliver("dc1", "shop/web", assignment("shop/web", quota=1), reason="")
    ledger.deliver("aws", "shop/web", assignment("shop/web", quota=1), reason="")
    assert ledger.holders("shop/web") == {"dc1", "aws"}
    assert ledger.clusters_for("shop/web", {"gcp": None}) == ["aws", "dc1", "gcp"]
    removal = ledger.deliver("aws", "shop/web", None, reason="cluster no longer selected")
    assert isinstance(removal, agent_pb2.SpreadRemoval) and removal.generation == 2
    assert ledger.holders("shop/web") == {"dc1"}
    assert ledger.deliver("aws", "shop/web", None, reason="again") is None  # nothing held: nothing sent


def test_reset_and_forget_replace_what_a_cluster_holds() -> None:
    ledger = deliveries.SentLedger()
    ledger.deliver("dc1", "shop/old", assignment("shop/old", quota=1), reason="")
    kept = assignment("shop/web", quota=2)
    ledger.reset("dc1", {"shop/web": kept})  # a full resync sent exactly this
    assert ledger.holders("shop/old") == frozenset() and ledger.holders("shop/web") == {"dc1"}
    assert ledger.deliver("dc1", "shop/web", assignment("shop/web", quota=2), reason="") is None
    ledger.forget("dc1")
    assert ledger.holders("shop/web") == frozenset()
    assert ledger.deliver("dc1", "shop/web", kept, reason="") is kept  # a new stream gets it again
