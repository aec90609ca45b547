"""Two real `fedspread coordinator --leader-elect` processes on the sandbox hub: one leads, one stands by.

Stand-in agents (the real agent link) reach "the coordinator" through one gRPC target naming both
processes' ports (pick_first: the first that accepts), as a Service would route them to the ready
pod: the standby binds no gRPC port, so only the leader is ever reached. What must hold:

* **Killed mid-scale.** The leader is SIGKILLed right after a `kubectl scale`: the standby takes
  the Lease once it expires (eventually, within a generous bound), follows the scale, and nothing
  that no rule asked for happens — no cluster's replicas ever go down (a scale up only adds), and
  the quotas handed out never sum above what the user asked for, at any sample.
* **Clean stop.** SIGTERM makes the leader release the Lease: with a lease of 120 s, the standby
  takes over long before the lease could have expired, so it was the release. The leader label
  (what the Service selects) is on the leader's pod only: a stale one on the standby's pod is
  removed, and it moves with the lead.
* **Lost lease.** A leader that finds the Lease held by another stops acting and exits (status 1).
* **Stalled leader.** The leader's placement shards hang (its own `SpreadShard` Ray actors
  SIGSTOPped — the standby's are other processes — as a Ray node that stops answering would). A
  new spread arrives, named so that it lands on the shard that placed the first one, and is placed
  in the leader's own process (a round of one spread never goes to the shards); then a label edit
  of the MemberCluster both spreads use makes a round of both, which goes to the shards (a call on
  an open connection waits; a first call to a frozen actor would fail to connect after Ray's
  connect timeout and end the round): the leader's hub-events loop waits on it under the
  coordinator's lock, its timer waits on the lock, while its election thread keeps renewing.
  Once they have not turned for the watchdog's limit plus the grace, the leader says so once,
  counts it in /metrics (which still answers), stops acting and releases the Lease: the standby
  takes over within a lease duration and a start (its agents' failover grace counted from then,
  though it stood by for minutes), places both spreads as they were, and nothing that ran moved (sampled all
  along). When the shards answer again, the old leader finishes stopping and exits 1, as on a
  lost lease.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pathlib
import signal
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import conftest
import hubside
import pytest
import sampling
import waiting
from kubernetes import client

from federation.api import names
from federation.coordinator.model import routing
from tests.support import builders, standin_agent

TIMEOUT = 90.0
"""Generous: a takeover needs the lease duration (15 s) plus a start; this only bounds a hang."""
LEASE = "fedspread-coordinator-test"
LONG_LEASE = ["--lease-duration-seconds", "120", "--renew-deadline-seconds", "10"]
STALL_GRACE = 5.0
"""The leader's --leader-stall-grace-seconds here (the default, 60 s, would only make the test wait)."""
STALL_TIMEOUT = 15.0 + STALL_GRACE + TIMEOUT
"""Generous: the hub-events loop's limit (15 s) plus the grace before a stalled leader
gives up; this only bounds a hang."""
GAVE_UP = "leader stalled: giving up the lease"
STEPDOWNS = "fedspread_coordinator_leader_stall_stepdowns_total"
SPREAD_SHARDS = 2
"""`fedspread coordinator`'s default `--spread-shards`."""


class Pair:
    """Coordinators "a" and "b" under election on one Lease in the test's namespace."""

    def __init__(self, sandbox: Any, *, ray: str, logs: pathlib.Path, namespace: str,
                 clusters: conftest.Clusters) -> None:
        self.namespace, self.clusters = namespace, clusters
        self.sandbox, self.ray, self.logs = sandbox, ray, logs
        self.commands: dict[str, hubside.CoordinatorCommand] = {}
        self.ports = {name: hubside.free_port() for name in ("a", "b")}

    def command(self, name: str, *extra: str) -> hubside.CoordinatorCommand:
        made = hubside.CoordinatorCommand(
            self.sandbox.hub.kubeconfig, port=self.ports[name], ray_address=self.ray,
            log=self.logs / f"coordinator-{name}.log", env={"POD_NAME": f"coordinator-{name}"},
            extra=["--leader-elect", "--leader-election-namespace", self.namespace, "--lease-name", LEASE,
                   *extra])
        self.commands[name] = made
        return made

    @property
    def target(self) -> str:
        """Both coordinators, as one gRPC target: the agents reach whichever listens."""
        return "ipv4:" + ",".join(f"127.0.0.1:{port}" for port in self.ports.values())

    def lease(self) -> Any:
        try:
            return client.CoordinationV1Api(self.clusters.api(hubside.HUB)).read_namespaced_lease(
                LEASE, self.namespace)
        except client.ApiException as error:
            if error.status == 404:
                return None
            raise

    def leader(self) -> str | None:
        """"a" or "b" by the Lease's holder; None when nobody holds it."""
        lease = self.lease()
        holder = (lease.spec.holder_identity or "") if lease is not None else ""
        return holder.split("_")[0].removeprefix("coordinator-") or None

    def wait_leader(self, name: str) -> None:
        waiting.wait_for(lambda: self.leader() == name, timeout=TIMEOUT, message=lambda: (
            f"coordinator {name} never took the lease (holder: {self.leader()}); logs in {self.logs}"))

    def wait_standing_by(self, name: str) -> None:
        log = self.logs / f"coordinator-{name}.log"
        waiting.wait_for(lambda: log.exists() and "standing by for the lease" in log.read_text(),
                         timeout=TIMEOUT, message=f"coordinator {name} never stood by; see {log}")

    def stop(self) -> None:
        for command in self.commands.values():
            command.stop()

    def pod(self, name: str, *, labels: dict[str, str]) -> None:
        """A stand-in for coordinator `name`'s pod (never scheduled): what it labels."""
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"coordinator-{name}", "labels": labels},
                "spec": {"automountServiceAccountToken": False,
                         "containers": [{"name": "coordinator", "image": "fedspread"}]}}
        self.clusters.core(hubside.HUB).create_namespaced_pod(self.namespace, body)

    def labelled(self) -> set[str]:
        """Which coordinators' pods carry the leader label."""
        pods = self.clusters.core(hubside.HUB).list_namespaced_pod(
            self.namespace, label_selector=f"{names.LEADER_LABEL}=true").items
        return {pod.metadata.name.removeprefix("coordinator-") for pod in pods}


@pytest.fixture
def pair(sandbox: Any, local_ray: str, tmp_path: pathlib.Path, namespace: str,
         clusters: conftest.Clusters) -> Iterator[Pair]:
    made = Pair(sandbox, ray=local_ray, logs=tmp_path, namespace=namespace, clusters=clusters)
    try:
        yield made
    finally:
        made.stop()


class Watch:
    """At every sample: quotas summed never above the most asked; no cluster below its floor."""

    def __init__(self, agents: dict[str, standin_agent.StandInAgent], key: str) -> None:
        self.agents, self.key = agents, key
        self.asked = 0
        self.floor: dict[str, int] = {}
        self.violations: list[str] = []

    def observe(self) -> None:
        replicas = hubside.replicas_of(self.agents, self.key)
        total = sum(sum(agent.quotas(self.key).values()) for agent in self.agents.values())
        if total > self.asked:
            self.violations.append(f"{total} replicas handed out, {self.asked} asked for")
        for name, floor in self.floor.items():
            if (replicas[name] or 0) < floor:
                self.violations.append(f"{name} went down to {replicas[name]} from {floor}")


def fixed_spread(capped: str, elastic: str) -> list[dict[str, Any]]:
    return [{"name": "onprem", "clusters": [capped], "maxReplicas": 3},
            {"name": "cloud", "clusters": [elastic]}]


Agents = dict[str, standin_agent.StandInAgent]


def start_federation(pair: Pair, hub: hubside.Hub, *extra: str) -> tuple[Agents, list[str], str]:
    """a leads, b stands by, two agents, spread "web" of 4: 3 on capped, 1 on elastic."""
    capped, elastic = hubside.names("capped", "elastic")
    hubside.delete_member_clusters(pair.clusters.custom(hubside.HUB), [capped, elastic])
    pair.command("a", *extra).start()
    pair.wait_leader("a")
    pair.command("b", *extra).start()
    pair.wait_standing_by("b")
    agents = hubside.agents_for(pair.target, {capped: (3, "4"), elastic: (5, "4")})
    key = hub.create(builders.deployment("web", 4, cpu="100m"),
                     hubside.spread_body("web", target="web", subsets=fixed_spread(capped, elastic)))
    hubside.wait_replicas(agents, key, {capped: 3, elastic: 1}, what="created under a")
    return agents, [capped, elastic], key


def test_leader_killed_mid_scale_standby_takes_over_and_only_the_scale_moves(
        pair: Pair, clusters: conftest.Clusters, namespace: str) -> None:
    hub = hubside.Hub(clusters, namespace)
    agents, (capped, elastic), key = start_federation(pair, hub)
    watch = Watch(agents, key)
    watch.asked, watch.floor = 10, {capped: 3, elastic: 1}
    try:
        with sampling.Sampler(watch.observe, period=0.05, name="ha-watch") as sampler:
            hub.scale("web", 10)
            time.sleep(0.2)  # mid-scale: the leader may or may not have handled it
            pair.commands["a"].kill()
            pair.wait_leader("b")
            hubside.wait_replicas(agents, key, {capped: 3, elastic: 7}, what="after the takeover")
        assert sampler.samples > 20, f"the watch ran only {sampler.samples} times"
        assert watch.violations == [], watch.violations[:5]

        def written() -> bool:
            status = hub.spread_status("web")
            placed = {p["cluster"]: p["replicas"] for p in status.get("placement") or [] if p["replicas"]}
            return status.get("replicas") == 10 and placed == {capped: 3, elastic: 7}

        waiting.wait_for(written, timeout=TIMEOUT,
                         message=lambda: f"the new leader never wrote the status: {hub.spread_status('web')}")
        assert pair.commands["b"].alive, f"the new leader exited; see {pair.logs}"
        # b watched the hub while standing by and began from that, without listing it anew. Waited
        # for: a may have placed and written the scale before it was killed, so the status and the
        # agents can be right while b, which holds the Lease, is still starting.
        b_log = pair.commands["b"].log
        waiting.wait_for(lambda: "starting from the hub as watched while standing by" in b_log.read_text(),
                         timeout=TIMEOUT, message=f"the new leader did not start from its watch; see {b_log}")
    finally:
        hubside.stop_all(agents)
        pair.stop()
        hubside.delete_member_clusters(clusters.custom(hubside.HUB), [capped, elastic])


def test_clean_stop_releases_the_lease_to_the_standby(
        pair: Pair, clusters: conftest.Clusters, namespace: str) -> None:
    hub = hubside.Hub(clusters, namespace)
    pair.pod("a", labels={})
    pair.pod("b", labels={names.LEADER_LABEL: "true"})  # left by a predecessor: b must remove it
    agents, (capped, elastic), key = start_federation(pair, hub, *LONG_LEASE)
    watch = Watch(agents, key)
    watch.asked, watch.floor = 4, {capped: 3, elastic: 1}
    try:
        waiting.wait_for(lambda: pair.labelled() == {"a"}, timeout=TIMEOUT,
                         message=lambda: f"the Service would select {pair.labelled()}, not the leader a")
        with sampling.Sampler(watch.observe, period=0.05, name="ha-watch"):
            pair.commands["a"].stop()
            first = pair.commands["a"].process
            assert first is not None and first.returncode == 0, \
                f"a clean stop exited {first and first.returncode}"
            # 60 s < the 120 s lease: only the release lets b in this soon.
            waiting.wait_for(lambda: pair.leader() == "b", timeout=60, message=lambda: (
                f"b never took the lease after a's clean stop (holder: {pair.leader()}); see {pair.logs}"))
            hub.scale("web", 6)
            watch.asked = 6
            hubside.wait_replicas(agents, key, {capped: 3, elastic: 3}, what="b follows a scale")
        assert watch.violations == [], watch.violations[:5]
        waiting.wait_for(lambda: pair.labelled() == {"b"}, timeout=TIMEOUT,
                         message=lambda: f"the Service would select {pair.labelled()}, not the leader b")
    finally:
        hubside.stop_all(agents)
        pair.stop()
        hubside.delete_member_clusters(clusters.custom(hubside.HUB), [capped, elastic])


def test_a_leader_that_finds_another_holder_stops_and_exits(pair: Pair) -> None:
    leader = pair.command("a")
    leader.start()
    pair.wait_leader("a")
    lease = pair.lease()
    lease.spec.holder_identity = "someone-else"
    lease.spec.lease_duration_seconds = 120
    client.CoordinationV1Api(pair.clusters.api(hubside.HUB)).replace_namespaced_lease(
        LEASE, pair.namespace, lease)  # its resourceVersion: a conditional write, as a rival's
    assert leader.process is not None
    code = leader.process.wait(TIMEOUT)
    assert code == 1, f"the deposed leader exited {code}; see {leader.log}"
    assert "leadership lost" in leader.log.read_text()
    assert pair.leader() is None or pair.leader() == "someone-else"


def spread_shards() -> set[int]:
    """Process ids of the `SpreadShard` actors on the session's Ray (its head runs under this
    process, so its workers are our descendants; nobody else's Ray is looked at)."""
    parents: dict[int, int] = {}
    titles: dict[int, bytes] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            titles[int(entry.name)] = (entry / "cmdline").read_bytes()
    ours, grown = {os.getpid()}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in ours} - ours
        ours |= more
        grown = bool(more)
    return {pid for pid in ours if titles.get(pid, b"").startswith(b"ray::SpreadShard")}


def beside(namespace: str, spread: str) -> str:
    """A spread name whose key the coordinator places on the same SpreadShard as `spread`'s."""
    shard = routing.shard_of(f"{namespace}/{spread}", shards=SPREAD_SHARDS)
    return next(name for name in (f"late-{i}" for i in itertools.count())
                if routing.shard_of(f"{namespace}/{name}", shards=SPREAD_SHARDS) == shard)


def signal_all(pids: set[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def scrape(port: int, name: str) -> float | None:
    """One sample of a coordinator's /metrics by name (no labels); None when absent."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


def test_a_leader_whose_shards_hang_gives_the_lease_up_and_the_standby_takes_over(
        pair: Pair, clusters: conftest.Clusters, namespace: str) -> None:
    hub = hubside.Hub(clusters, namespace)
    capped, elastic = hubside.names("capped", "elastic")
    hubside.delete_member_clusters(clusters.custom(hubside.HUB), [capped, elastic])
    metrics_port = hubside.free_port()
    others = spread_shards()  # earlier tests' actors on their way out, if any: not a's
    pair.command("a", "--metrics-port", str(metrics_port), "--ray-round-min-spreads", "2",  # 2: the shards
                 "--leader-stall-grace-seconds", str(STALL_GRACE)).start()
    pair.wait_leader("a")
    agents = hubside.agents_for(pair.target, {capped: (3, "4"), elastic: (5, "4")})
    frozen: set[int] = set()
    try:
        key = hub.create(builders.deployment("web", 4, cpu="100m"),
                         hubside.spread_body("web", target="web", subsets=fixed_spread(capped, elastic)))
        hubside.wait_replicas(agents, key, {capped: 3, elastic: 1}, what="created under a")
        waiting.wait_for(lambda: len(spread_shards() - others) == 2, timeout=TIMEOUT,
                         message=lambda: f"a's two SpreadShard actors never showed: {spread_shards()}")
        mine = spread_shards() - others
        pair.command("b").start()  # its own actors, started after a's were counted
        pair.wait_standing_by("b")
        watch = Watch(agents, key)
        watch.asked, watch.floor = 4, {capped: 3, elastic: 1}
        log = pair.commands["a"].log
        with sampling.Sampler(watch.observe, period=0.05, name="ha-watch") as sampler:
            frozen = mine
            signal_all(frozen, signal.SIGSTOP)
            late_name = beside(namespace, "web")
            late = hub.create(builders.deployment(late_name, 2, cpu="100m"), hubside.spread_body(
                late_name, target=late_name, subsets=[{"name": "cloud", "clusters": [elastic]}]))
            hubside.wait_replicas(agents, late, {capped: 0, elastic: 2}, timeout=TIMEOUT,
                                  what="a places a round of one in its own process")
            clusters.custom(hubside.HUB).patch_cluster_custom_object(  # a round of both: the shards
                hubside.GROUP, hubside.VERSION, "memberclusters", elastic,
                {"metadata": {"labels": {"fedspread-test/touched": "yes"}}})
            waiting.wait_for(lambda: GAVE_UP in log.read_text(), timeout=STALL_TIMEOUT,
                             message=lambda: f"a never gave up; its log ends: {log.read_text()[-3000:]}")
            waiting.wait_for(lambda: scrape(metrics_port, STEPDOWNS) == 1, timeout=TIMEOUT,
                             message="a's /metrics never counted the give-up")
            pair.wait_leader("b")
            hubside.wait_replicas(agents, late, {capped: 0, elastic: 2}, timeout=TIMEOUT,
                                  what="b places the late spread as it was")
            hubside.wait_replicas(agents, key, {capped: 3, elastic: 1}, what="web after the takeover")
        assert sampler.samples > 20, f"the watch ran only {sampler.samples} times"
        assert watch.violations == [], watch.violations[:5]
        assert log.read_text().count(GAVE_UP) == 1
        assert "leadership lost" not in log.read_text(), "a gave up; it did not lose the lease"

        def written() -> bool:
            placed = {name: {p["cluster"]: p["replicas"] for p in
                             hub.spread_status(name).get("placement") or [] if p["replicas"]}
                      for name in ("web", late_name)}
            return placed == {"web": {capped: 3, elastic: 1}, late_name: {elastic: 2}}

        waiting.wait_for(written, timeout=TIMEOUT, message=lambda: (
            f"b never wrote the statuses: {hub.spread_status('web')}, {hub.spread_status(late_name)}"))
        signal_all(frozen, signal.SIGCONT)  # the shards answer again: a finishes stopping
        first = pair.commands["a"].process
        assert first is not None
        assert first.wait(TIMEOUT) == 1, f"a stalled leader must exit as on a lost lease; see {log}"
        assert pair.commands["b"].alive and pair.leader() == "b"
    finally:
        signal_all(frozen, signal.SIGCONT)
        hubside.stop_all(agents)
        pair.stop()
        hubside.delete_member_clusters(clusters.custom(hubside.HUB), [capped, elastic])
