"""A stand-in agent for coordinator tests: the real agent link, bookkeeping and outbox, no cluster.

Why not a fake: the coordinator's contract is the wire (Hello, Welcome, full resync, deltas,
removals, pings, reports), and the agent's own `Link` is what speaks it in production. What the
stand-in leaves out is the member cluster: its inventory is a fixed node pool, and its pod counts
(and member Deployment status) are whatever the test reports — so a test can say "these pods are
running" without running them.
"""

from __future__ import annotations

import datetime

from agents import bookkeeping as bookkeeping_mod
from agents import outbox as outbox_mod
from agents.link import client as link_mod
from federation.api import names
from federation.rpc import agent_pb2
from tests.support import builders


class StandInAgent:
    """One member cluster's agent: `nodes` nodes of `cpu` CPUs in one pool named "std"."""

    def __init__(
        self, target: str, *, name: str, nodes: int = 3, cpu: str = "4", region: str = "eu",
        bookkeeping: bookkeeping_mod.Bookkeeping | None = None,
        credentials: link_mod.Credentials | None = None,
    ) -> None:
        """`credentials`: mTLS to the coordinator (e.g. from `fedspread certs agent`); None: plaintext."""
        self.name = name
        self.bookkeeping = bookkeeping if bookkeeping is not None else bookkeeping_mod.Bookkeeping()
        self.outbox = outbox_mod.Outbox()
        self.link = link_mod.Link(
            target, cluster=name, bookkeeping=self.bookkeeping, outbox=self.outbox,
            labels={names.REGION_LABEL: region}, heartbeat_seconds=0.5, credentials=credentials,
            backoff_initial_seconds=0.05, backoff_cap_seconds=0.5)
        self.outbox.put_inventory(outbox_mod.inventory_message(
            [builders.node_pool(nodes, cpu=cpu)],
            sequence=1, observed_at=datetime.datetime.now(datetime.UTC)))
        self._sequence = 0

    def start(self) -> StandInAgent:
        """Connect (in the background); returns self."""
        self.link.start()
        return self

    def stop(self) -> None:
        """Go silent: end the stream and stop heartbeats; the assignments stay in the bookkeeping."""
        self.link.stop()

    def replicas(self, key: str) -> int | None:
        """This cluster's replicas of spread `key` as last assigned; None without an assignment."""
        current = self.bookkeeping.assignment(key)
        return None if current is None else current.replicas

    def quotas(self, key: str) -> dict[str, int]:
        """Per subset, this cluster's quota of spread `key` (empty without an assignment)."""
        current = self.bookkeeping.assignment(key)
        return {} if current is None else {s.name: s.quota for s in current.subsets}

    def report_running(self, key: str, *, subset: str, running: int, ready: int | None = None) -> None:
        """Report `running` pods of `subset` (all Ready unless `ready` says otherwise), and a member
        Deployment whose status says the same."""
        ready = running if ready is None else ready
        self._sequence += 1
        report = agent_pb2.PodCountsReport(full=True, sequence=self._sequence)
        report.observed_at.FromDatetime(datetime.datetime.now(datetime.UTC))
        item = report.spreads.add(spread=key)
        item.subsets.add(subset=subset, counts=agent_pb2.PodCounts(running=running, ready=ready))
        item.workload.CopyFrom(agent_pb2.WorkloadStatus(
            replicas=running, ready_replicas=ready, available_replicas=ready, updated_replicas=running))
        self.outbox.put_counts(agent_pb2.AgentMessage(pod_counts=report))
