"""A stand-in agent for coordinator tests: the real agent link, bookkeeping and outbox, no cluster.

Why not a fake: the coordinator's contract is the wire (Hello, Welcome, full resync, deltas,
removals, pings, reports), and the agent's own `Link` is what speaks it in production. What the
stand-in leaves out is the member cluster: its inventory is a fixed node pool, and its pod counts
(and member Deployment status) are whatever the test reports — so a test can say "these pods are
running" without running them. Like the real agent's reconciler, it sends a full PodCountsReport
after every Welcome and whenever its assignments change, listing the spreads it holds as counted
(no pods unless the test reported some): a coordinator keeps an unverified cluster's share whole
("unknown is not zero"), so a stand-in that never reported would hold its share for good.
"""

from __future__ import annotations

import datetime
import threading

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
        self.outbox = outbox_mod.ReportOutbox()
        self.link = link_mod.Link(
            link_mod.LinkSettings(target, name, labels={names.REGION_LABEL: region}, credentials=credentials,
                                  heartbeat_seconds=0.5, backoff_initial_seconds=0.05,
                                  backoff_cap_seconds=0.5),
            bookkeeping=self.bookkeeping, outbox=self.outbox)
        self.outbox.put_inventory(outbox_mod.inventory_message(
            [builders.node_pool(nodes, cpu=cpu)],
            sequence=1, observed_at=datetime.datetime.now(datetime.UTC)))
        self._sequence = 0
        self._reported: dict[str, tuple[dict[str, agent_pb2.PodCounts], agent_pb2.WorkloadStatus]] = {}
        """Per spread: what the test said runs there (per subset) and its member Deployment status."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reporter: threading.Thread | None = None

    def start(self) -> StandInAgent:
        """Connect (in the background) and start reporting counts; returns self."""
        self._stop.clear()
        self.link.start()
        self._reporter = threading.Thread(
            target=self._report_changes, name=f"standin-{self.name}", daemon=True)
        self._reporter.start()
        return self

    def stop(self) -> None:
        """Go silent: end the stream and stop heartbeats; the assignments stay in the bookkeeping."""
        self._stop.set()
        self.link.stop()
        if self._reporter is not None:
            self._reporter.join(5)

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
        Deployment whose status says the same; other spreads' reported pods stay as they were."""
        ready = running if ready is None else ready
        with self._lock:
            self._reported[key] = (
                {subset: agent_pb2.PodCounts(running=running, ready=ready)},
                agent_pb2.WorkloadStatus(replicas=running, ready_replicas=ready, available_replicas=ready,
                                         updated_replicas=running))
            self._send()

    def _report_changes(self) -> None:
        """After each Welcome and each change of the held assignments: a full report, as the real
        agent's reconciler sends one after its cache is synced."""
        seen: tuple[int, frozenset[str]] | None = None
        while not self._stop.wait(0.05):
            now = (self.link.connects, frozenset(a.spread for a in self.bookkeeping.assignments()))
            if now != seen and self.link.connected:
                seen = now
                with self._lock:
                    self._send()

    def _send(self) -> None:
        """Queue a full report of every reported spread, listing the held assignments as counted."""
        self._sequence += 1
        report = agent_pb2.PodCountsReport(full=True, sequence=self._sequence, lists_assigned=True,
                                           first_after_start=self._sequence == 1)
        report.observed_at.FromDatetime(datetime.datetime.now(datetime.UTC))
        report.assigned.extend(sorted({a.spread for a in self.bookkeeping.assignments()}))
        for key, (subsets, workload) in sorted(self._reported.items()):
            item = report.spreads.add(spread=key)
            for subset, counts in sorted(subsets.items()):
                item.subsets.add(subset=subset, counts=counts)
            item.workload.CopyFrom(workload)
        self.outbox.put_counts(agent_pb2.AgentMessage(pod_counts=report))
