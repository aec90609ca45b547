"""The agent's shape (issue 24 §3): one loop contract started from one list, per-part settings that
the command line fills, and the workload code per kind behind a strategy."""

from __future__ import annotations

import json
import logging
import pathlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from kubernetes import client
from kubernetes.client import exceptions

from agents import bookkeeping, bootstrap, outbox, runnable
from agents import main as agents_main
from agents.cache import views
from agents.controller import kinds, workload, workload_loop
from agents.link import client as link_mod
from bench import standin_coordinator
from federation import cli, logs
from federation import watchdog as watchdog_mod
from federation.api import names
from federation.rpc import assignment

WAIT = 10.0


# --- one loop contract, one list ------------------------------------------------------------------


class Loop:
    """A runnable that records what happens to it; it waits on an event of its own, as the link and
    the workload loop do, so only `interrupt` ends it promptly."""

    def __init__(self, name: str, seen: list[tuple[str, str]], *, critical: bool = True) -> None:
        self.name = name
        self.period = 1.0
        self.critical = critical
        self._seen = seen
        self.started = threading.Event()
        self._wake = threading.Event()

    def run(self, stop: threading.Event, beat: runnable.Beat) -> None:
        self.started.set()
        while not stop.is_set():
            beat()
            self._wake.wait(60)

    def interrupt(self) -> None:
        self._seen.append(("interrupt", self.name))
        self._wake.set()


def test_loops_are_watched_and_started_in_list_order_and_stopped_in_reverse() -> None:
    seen: list[tuple[str, str]] = []
    first, second, last = Loop("first", seen), Loop("second", seen, critical=False), Loop("last", seen)
    dog = watchdog_mod.Watchdog("test")
    stop = threading.Event()
    loops = runnable.Loops([first, second, last], stop=stop, watchdog=dog)

    def before_last() -> None:
        assert first.started.wait(WAIT) and second.started.wait(WAIT), "the earlier loops run already"
        seen.append(("before", "last"))

    loops.start(before={"last": before_last})
    assert last.started.wait(WAIT)
    assert {s.name: s.critical for s in dog.snapshot()} == {"first": True, "second": False, "last": True}
    assert sorted(t.name for t in threading.enumerate() if t.name.startswith("agent-")) == [
        "agent-first", "agent-last", "agent-second"]
    loops.stop(after={"last": lambda: seen.append(("after", "last"))})
    # Each loop sleeps 60 s between rounds, longer than a join waits: only an interrupt ended them.
    assert not [t.name for t in threading.enumerate() if t.name.startswith("agent-") and t.is_alive()]
    assert stop.is_set()
    assert seen == [("before", "last"),
                    ("interrupt", "last"), ("interrupt", "second"), ("interrupt", "first"), ("after", "last")]
    assert not [t for t in threading.enumerate() if t.name.startswith("agent-")]
    loops.stop()  # twice is fine


def test_a_failing_step_before_a_loop_leaves_it_and_the_later_ones_unstarted() -> None:
    seen: list[tuple[str, str]] = []
    first, last = Loop("first", seen), Loop("last", seen)
    loops = runnable.Loops([first, last], stop=threading.Event(), watchdog=watchdog_mod.Watchdog("test"))

    def refuse() -> None:
        raise RuntimeError("registration refused")

    with pytest.raises(RuntimeError):
        loops.start(before={"last": refuse})
    assert first.started.wait(WAIT) and not last.started.is_set()
    loops.stop(after={"last": lambda: seen.append(("after", "last"))})
    assert seen == [("interrupt", "first"), ("after", "last")], "only what started is interrupted"


def test_the_agent_starts_its_five_loops_from_one_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bootstrap, "api_client", lambda *_, **__: client.ApiClient())  # no probe
    agent = agents_main.Agent(agents_main.AgentConfig(
        agents_main.LinkSettings("127.0.0.1:1", "dc1", heartbeat_seconds=7.0),
        webhook=agents_main.WebhookSettings(port=0, register=False),
        metrics=agents_main.MetricsSettings(port=0)))
    try:
        found = [(r.name, r.critical, r.period) for r in agent.loops.runnables]
        # the link's period: the longest wait after a refusal (twice misconfigured_backoff_seconds)
        assert found == [("workload", True, 1.0), ("reconciler", True, 1.0), ("reporter", False, 7.0),
                         ("usage", False, 15.0), ("link", False, 30.0)]
        assert agent.settings.cluster == "dc1"
    finally:
        agent.stop()  # never started: stopping is safe


# --- settings from the command line ---------------------------------------------------------------


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[agents_main.AgentConfig]]:
    """The AgentConfig `fedspread agent` builds (the agent itself refuses to start)."""
    configs: list[agents_main.AgentConfig] = []

    def refuse(settings: agents_main.AgentConfig) -> None:
        configs.append(settings)
        raise agents_main.AgentError("not in this test")

    monkeypatch.setattr(agents_main, "Agent", refuse)
    monkeypatch.setattr(logs, "configure", lambda level: None)
    yield configs


def test_the_flags_left_alone_give_each_parts_defaults(captured: list[agents_main.AgentConfig]) -> None:
    result = CliRunner().invoke(cli.main, ["agent", "--insecure", "--cluster", "dc1",
                                           "--coordinator", "hub:7443"])
    assert result.exit_code == 1 and "not in this test" in result.output
    [config] = captured
    assert config.link == agents_main.LinkSettings("hub:7443", "dc1", labels={})
    assert (config.kubeconfig, config.context) == (None, None)
    assert config.federation_id == names.DEFAULT_FEDERATION_ID
    assert config.webhook == agents_main.WebhookSettings()
    assert config.metrics == agents_main.MetricsSettings()
    assert config.inventory == agents_main.InventorySettings()


def test_each_flag_reaches_its_parts_settings(captured: list[agents_main.AgentConfig],
                                              tmp_path: pathlib.Path) -> None:
    ca = tmp_path / "clients.crt"
    ca.write_text("not read here")
    result = CliRunner().invoke(cli.main, [
        "agent", "--insecure", "--cluster", "dc1", "--coordinator", "hub:7443", "--label", "region=eu",
        "--heartbeat-seconds", "2.5", "--webhook-port", "0", "--webhook-url-host", "10.0.0.1",
        "--webhook-service", "sys/hook", "--no-register-webhook", "--deregister-on-exit",
        "--webhook-name", "hook-2", "--webhook-namespace-label", "team=a", "--metrics-port", "0",
        "--max-node-pools", "7", "--webhook-client-ca", str(ca), "--webhook-allowed-cn", "apiserver",
        "--federation-id", "prod"])
    assert result.exit_code == 1, result.output
    [config] = captured
    assert config.link == agents_main.LinkSettings("hub:7443", "dc1", labels={"region": "eu"},
                                                   heartbeat_seconds=2.5)
    assert config.webhook == agents_main.WebhookSettings(
        port=0, url_host="10.0.0.1", name="hook-2", namespace_selector={"team": "a"}, service=("sys", "hook"),
        register=False, deregister_on_exit=True, client_ca=ca, allowed_cns=("apiserver",))
    assert (config.metrics.port, config.inventory.max_node_pools, config.federation_id) == (0, 7, "prod")


# --- the workload loop -------------------------------------------------------------------------------


class FakeSync:
    """What the workload loop calls of WorkloadSync, recorded; `fail` makes the next removal fail."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.fail = False
        self.rounds = threading.Semaphore(0)

    def remove(self, spread: str, *, federation: str) -> int:
        if self.fail:
            self.fail = False
            raise RuntimeError("apiserver away")
        self.calls.append(("remove", spread, federation))
        return 1

    def release(self, spread: str, *, federation: str) -> int:
        self.calls.append(("release", spread, federation))
        return 1

    def sync_once(self) -> dict[str, int]:
        self.calls.append(("sync",))
        self.rounds.release()
        return {}


def test_the_workload_loop_applies_removals_before_a_round_and_retries_a_failed_one() -> None:
    sync = FakeSync()
    loop = workload_loop.WorkloadLoop(sync)  # type: ignore[arg-type]
    assert (loop.name, loop.critical, loop.period) == ("workload", True, 1.0)
    stop, beats = threading.Event(), threading.Semaphore(0)
    sync.fail = True
    loop.removed("shop/a", orphan=False, federation="prod")
    loop.removed("shop/b", orphan=True, federation="prod")
    thread = threading.Thread(target=loop.run, args=(stop, beats.release), daemon=True)
    thread.start()
    try:
        assert sync.rounds.acquire(timeout=WAIT), "a round after the failed removal was retried"
        # the failed removal went back to the end of the queue, as it always did
        assert sync.calls[:3] == [("release", "shop/b", "prod"), ("remove", "shop/a", "prod"), ("sync",)]
        assert beats.acquire(timeout=WAIT)
    finally:
        stop.set()
        loop.interrupt()
        thread.join(WAIT)
    assert not thread.is_alive()


# --- the workload per kind ---------------------------------------------------------------------------


def test_every_kind_has_a_strategy_and_other_kinds_say_why() -> None:
    strategy = kinds.strategy_for("apps/v1", "Deployment")
    assert (strategy.policy.kind, strategy.policy.uses_deletion_cost) == ("Deployment", True)
    strategy = kinds.strategy_for("apps/v1", "ReplicaSet")
    assert (strategy.policy.kind, strategy.policy.uses_deletion_cost) == ("ReplicaSet", True)
    strategy = kinds.strategy_for("apps/v1", "StatefulSet")
    assert (strategy.policy.kind, strategy.policy.uses_deletion_cost) == ("StatefulSet", False)
    strategy = kinds.strategy_for("batch/v1", "Job")
    assert (strategy.policy.kind, strategy.policy.uses_deletion_cost) == ("Job", False)
    with pytest.raises(kinds.KindNotServed, match="Job is served as batch/v1"):
        kinds.strategy_for("apps/v1", "Job")
    with pytest.raises(kinds.KindNotServed, match="unsupported workload kind apps/v1 CronTab; supported: "):
        kinds.strategy_for("apps/v1", "CronTab")


class FakeApps:
    """Deployments by (namespace, name), as JSON."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}

    def read_namespaced_deployment(self, name: str, namespace: str, **_: Any) -> Any:
        if (namespace, name) not in self.items:
            raise exceptions.ApiException(status=404)
        return type("Response", (), {"data": json.dumps(self.items[namespace, name])})()

    def create_namespaced_deployment(self, namespace: str, body: Any, **_: Any) -> None:
        self.items[namespace, body["metadata"]["name"]] = body


class FakeCache:
    def autoscalers(self, kind: str, namespace: str, name: str) -> tuple[str, ...]:
        return ()  # no member HPA

    def __init__(self, apps: FakeApps) -> None:
        self.apps = apps

    def deployment(self, namespace: str, name: str) -> views.WorkloadView | None:
        item = self.apps.items.get((namespace, name))
        return None if item is None else views.workload_view(item)

    def member_workload(self, kind: str, namespace: str, name: str) -> views.WorkloadView | None:
        return self.deployment(namespace, name) if kind == "Deployment" else None


def value(name: str, *, kind: str = "Deployment", api_version: str = "apps/v1",
          template: dict[str, Any] | None = None) -> assignment.Assignment:
    return assignment.Assignment(
        spread=f"shop/{name}", generation=1, namespace="shop", workload=name, replicas=2,
        template=template or {},
        template_revision="r", subsets=(), subset_count=0, spread_uid=f"uid-{name}", federation="prod",
        kind=kind, api_version=api_version)


def test_a_workload_the_agent_cannot_write_fails_its_spread_alone_and_is_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    apps, books = FakeApps(), bookkeeping.Bookkeeping()
    books.set_assignment(value("web"))
    indexed = {"spec": {"completionMode": "Indexed", "completions": 4, "template": {}}}
    books.set_assignment(value("db", kind="Job", api_version="batch/v1", template=indexed))
    sync = workload.WorkloadSync(apps, books, FakeCache(apps))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        assert sync.sync_once() == {workload.CREATED: 1, workload.FAILED: 1}
        assert sync.sync_once() == {workload.UNCHANGED: 1, workload.FAILED: 1}
    assert list(apps.items) == [("shop", "web")]
    assert apps.items["shop", "web"]["kind"] == "Deployment"
    refused = [r for r in caplog.records if "workload not written" in r.getMessage()]
    assert len(refused) == 1
    assert getattr(refused[0], "spread", None) == "shop/db"
    assert "completionMode" in getattr(refused[0], "error", "")


# --- the link as a runnable --------------------------------------------------------------------------


def test_the_link_runs_on_the_callers_thread_and_an_interrupt_ends_it_at_once() -> None:
    coordinator = standin_coordinator.StandinCoordinator().start()
    try:
        link = link_mod.Link(link_mod.LinkSettings(coordinator.target, "dc1", heartbeat_seconds=0.2,
                                                   backoff_initial_seconds=0.05, backoff_cap_seconds=0.3),
                             bookkeeping=bookkeeping.Bookkeeping(), outbox=outbox.ReportOutbox())
        assert (link.name, link.critical) == ("link", False)
        stop, beats = threading.Event(), threading.Semaphore(0)
        thread = threading.Thread(target=link.run, args=(stop, beats.release), daemon=True)
        thread.start()
        assert link.wait_connected(WAIT) and link.running
        assert beats.acquire(timeout=WAIT)
        stop.set()
        link.interrupt()
        thread.join(WAIT)
        assert not thread.is_alive(), "the interrupt ended the link's run"
        assert not link.connected and not link.running
    finally:
        coordinator.stop()
