"""The agent's inventory reporter keeps its pools within `--max-node-pools` and says when it cannot.

Why: the budget is the agent's flag; a member with more kinds of node than the budget reports one
pool per kind, over it, and that must be visible in the agent's log once, not on every recount.
"""

from __future__ import annotations

import logging

import pytest
from click.testing import CliRunner

from agents import outbox
from agents.cache import heap
from agents.cache import store as cache_mod
from agents.inventory import reporter
from federation.api import quantity
from federation.cli import agent as agent_cli
from federation.core import inventory

ALLOC = {"cpu": "8", "memory": "32Gi", "pods": "110"}


class FakeCache:
    """The cache's reading side as the reporter uses it: nodes, usage and a version."""

    def __init__(self, nodes: list[inventory.NodeView], usage: list[inventory.PodUsage]) -> None:
        self.node_views, self.usages, self.changes = nodes, usage, 0

    def version(self, *kinds: str) -> int:
        assert set(kinds) == {cache_mod.NODES, cache_mod.USAGE}
        return self.changes

    def nodes(self) -> list[inventory.NodeView]:
        return list(self.node_views)

    def usage(self) -> list[inventory.PodUsage]:
        return list(self.usages)


def member(*, racks: int, nodes: int = 40) -> FakeCache:
    """`nodes` nodes in `racks` racks (a label: a class each), each loaded differently."""
    views = [inventory.NodeView(name=f"n{i:02d}", labels={"rack": str(i % racks)}, allocatable=ALLOC)
             for i in range(nodes)]
    usage = [inventory.PodUsage(f"n{i:02d}", {"cpu": quantity.parse_quantity(f"{i * 100}m")})
             for i in range(nodes)]
    return FakeCache(views, usage)


def test_pools_stay_within_the_budget_and_cover_every_node() -> None:
    found = reporter.InventoryReporter(member(racks=3), outbox.ReportOutbox(), max_pools=7).pools()
    assert len(found) <= 7 and sum(p.count for p in found) == 40
    exact = reporter.InventoryReporter(member(racks=3), outbox.ReportOutbox(), max_pools=40).pools()
    assert len(exact) == 40


def test_classes_over_the_budget_warn_once(caplog: pytest.LogCaptureFixture) -> None:
    cache = member(racks=5)
    report = reporter.InventoryReporter(cache, outbox.ReportOutbox(), max_pools=3)
    with caplog.at_level(logging.WARNING, logger=reporter.LOG.name):
        assert len(report.pools()) == 5
        cache.changes += 1
        assert len(report.pools()) == 5
    assert [(r.getMessage(), getattr(r, "max_pools", None)) for r in caplog.records] == [
        ("inventory over its pool budget: 5 node classes (labels, taints, allocatable) exceed max_pools; "
         "one pool per class", 3)]


def test_the_agent_command_takes_the_budget() -> None:
    result = CliRunner().invoke(agent_cli.agent_command, ["--help"])
    assert result.exit_code == 0 and "--max-node-pools" in result.output
    refused = CliRunner().invoke(agent_cli.agent_command, [
        "--cluster", "c1", "--coordinator", "127.0.0.1:1", "--insecure", "--max-node-pools", "0"])
    assert refused.exit_code == 2 and "--max-node-pools" in refused.output


def test_a_pool_rebuild_gives_freed_heap_back_and_a_cached_answer_does_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[bool] = []
    monkeypatch.setattr(heap, "release", lambda: trims.append(True) or True)
    cache = member(racks=3)
    report = reporter.InventoryReporter(cache, outbox.ReportOutbox())
    report.pools()
    report.pools()  # nothing changed: the pools are not built again
    assert trims == [True]
    cache.changes += 1
    report.pools()
    assert trims == [True, True]
