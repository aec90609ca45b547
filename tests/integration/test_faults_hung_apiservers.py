"""Faults: an apiserver (the hub's, a member's) stops answering without closing its connections.

The fault that froze loops before every call had a deadline: a TCP proxy (`tests.support.tcp_proxy`)
in front of the real apiserver hangs — every connection, open or new, stays open and nothing is
forwarded — and later answers again (resetting the connections that lived through the hang, as
they carried nothing since). A real silent watch would be cut by its own read deadline
(`deadlines.watch`: 330 s) instead of the reset; that part is not waited for here. No timed
assertions: every wait is `waiting.wait_for` with a generous deadline.

**Hub.** A coordinator (in-process, on the session's Ray) reaches the sandbox hub through a TCP proxy
through the proxy; two stand-in agents hold a placed spread. The proxy then hangs, and
meanwhile the spread is edited on the hub directly.

While the hub hangs:
* the coordinator stays alive and keeps serving: placements through the SDK, quotas in the
  agents, exactly as before the hang (when in doubt keep what runs: a hung hub causes no failover,
  no removal, no change at all), sampled all along;
* the watchdog reports the status loop stalled — a structured warning and
  `fedspread_coordinator_loop_stalled{loop="status"}` = 1 — while hub events and timer keep
  turning, so readiness stays SERVING (a slow hub is no reason to turn agents away);
* a status write ends at its deadline (`federation.kube.deadlines`): the writer counts a failure
  although the hub never answered, which it could not without a read timeout.

When the proxy answers again, the watches resume, the edit is placed, the status is written, and
the watchdog says once that the status loop turns again.

**Member.** A real agent (in-process, `agents.main.Agent`) reaches member-1 through the proxy;
the proxy hangs, then a spread is created for it: its workload loop must create the member
Deployment and cannot. The watchdog reports the workload loop stalled (metric) and /readyz answers
503 (a controller loop is critical), while the agent stays connected to its coordinator; when the
proxy answers again the Deployment is created and /readyz is 200 again.
"""

from __future__ import annotations

import contextlib
import logging
import pathlib
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import conftest
import grpc
import hubside
import pytest
import waiting
import yaml

from agents import main as agents_main
from federation import sdk
from federation.coordinator import process as coordinator_main
from federation.sandbox import state
from tests.support import builders, grpc_probes, tcp_proxy

TIMEOUT = 180.0
"""Generous: a status write on the hung hub ends after its read deadline and urllib3's one retry."""
CRITICAL = {"hub-events", "timer"}
MEMBER = "member-1"


def through(proxy: tcp_proxy.TcpProxy, kubeconfig: str, directory: pathlib.Path) -> pathlib.Path:
    """A copy of `kubeconfig` whose server is `proxy` (the address family is the same, so the
    apiserver's certificate still fits)."""
    document = yaml.safe_load(pathlib.Path(kubeconfig).read_text())
    for entry in document["clusters"]:
        entry["cluster"]["server"] = f"https://{proxy.target}"
    proxied = directory / f"through-{proxy.port}.kubeconfig"
    proxied.write_text(yaml.safe_dump(document))
    return proxied


@contextlib.contextmanager
def coordinator_behind(proxy: tcp_proxy.TcpProxy, sandbox: state.SandboxState, clusters: conftest.Clusters,
                       *, members: list[str], directory: pathlib.Path,
                       ) -> Iterator[coordinator_main.CoordinatorProcess]:
    """A CoordinatorProcess whose every hub call goes through `proxy`."""
    proxied = through(proxy, sandbox.hub.kubeconfig, directory)
    custom = clusters.custom(hubside.HUB)
    hubside.delete_member_clusters(custom, members)
    config = coordinator_main.CoordinatorConfig(
        hub_kubeconfig=proxied, listen=f"127.0.0.1:{hubside.free_port()}",
        heartbeat_seconds=1.0, status_seconds=0.5, tick_seconds=0.25)
    process = coordinator_main.CoordinatorProcess(config)
    try:
        process.start()
        yield process
    finally:
        process.stop()
        hubside.delete_member_clusters(custom, members)


def test_a_hung_hub_stalls_only_the_status_loop_and_the_coordinator_recovers(
        sandbox: state.SandboxState, clusters: conftest.Clusters, namespace: str, local_ray: str,
        caplog: pytest.LogCaptureFixture, tmp_path: pathlib.Path) -> None:
    capped, elastic = hubside.names("capped", "elastic")
    hub = hubside.Hub(clusters, namespace)
    key = f"{namespace}/web"

    def subsets(cap: int) -> list[dict[str, Any]]:
        return [{"name": "onprem", "clusters": [capped], "maxReplicas": cap},
                {"name": "cloud", "clusters": [elastic]}]

    before, after = {capped: 2, elastic: 2}, {capped: 1, elastic: 3}
    caplog.set_level(logging.WARNING, logger="federation.watchdog")
    with tcp_proxy.TcpProxy(f"127.0.0.1:{sandbox.hub.port}") as proxy, \
            coordinator_behind(proxy, sandbox, clusters, members=[capped, elastic],
                               directory=tmp_path) as process:
        target = f"127.0.0.1:{process.port}"
        agents = hubside.agents_for(target, {capped: (3, "4"), elastic: (3, "4")})
        channel = grpc.insecure_channel(target)
        seen: list[tuple[dict[str, int | None], frozenset[str], str]] = []
        sampling = threading.Event()

        def sample() -> None:  # what agents hold, what is stalled, readiness: all through the hang
            while not sampling.wait(0.25):
                seen.append((hubside.replicas_of(agents, key), process.watchdog.stalled(),
                             grpc_probes.status(channel)))

        sampler = threading.Thread(target=sample, daemon=True)
        try:
            hub.create(builders.deployment("web", 4, cpu="100m"),
                       hubside.spread_body("web", target="web", subsets=subsets(2)))
            hubside.wait_replicas(agents, key, before, what="placed before the hang")
            waiting.wait_for(lambda: hub.spread_status("web").get("replicas") == 4, timeout=TIMEOUT,
                             message=lambda: f"no status before the hang: {hub.spread_status('web')}")
            failures = sum(process.statuses.writer.failures.values())

            proxy.hang()
            sampler.start()
            hub.patch_spread("web", {"spec": {"subsets": subsets(1)}})  # the hub takes it; nobody hears
            waiting.wait_for(lambda: process.metrics.value("loop_stalled", {"loop": "status"}) == 1,
                             timeout=TIMEOUT, message=lambda: f"the status loop never reported stalled: "
                             f"{process.watchdog.snapshot()}")
            waiting.wait_for(lambda: sum(process.statuses.writer.failures.values()) > failures,
                             timeout=TIMEOUT,
                             message="no status write ended while the hub hung: no deadline?")
            with sdk.PlacementClient(target) as placements:
                assert placements.placement(key).clusters == before, "the SDK serves the last placement"
            assert grpc_probes.status(channel) == "SERVING"
            assert not process.watchdog.critical_stalled()

            released = len(seen)  # samples before this one were taken while the hub hung
            proxy.release()
            hubside.wait_replicas(agents, key, after, timeout=TIMEOUT, what="the edit made during the hang")
            waiting.wait_for(lambda: {p["cluster"]: p["replicas"] for p in
                                      hub.spread_status("web").get("placement") or []} == after,
                             timeout=TIMEOUT,
                             message=lambda: f"status never caught up: {hub.spread_status('web')}")
            waiting.wait_for(lambda: process.metrics.value("loop_stalled", {"loop": "status"}) == 0,
                             timeout=TIMEOUT, message="the status loop never reported turning again")
        finally:
            sampling.set()
            if sampler.is_alive():
                sampler.join(10)
            channel.close()
            hubside.stop_all(agents)
        # Only the hang is judged: once the hub answers, the edit reaches the two agents one after
        # the other, and a sample may fall between the two deliveries.
        hung = seen[:released]
        assert hung, "nothing was sampled while the hub hung"
        changed = [held for held, _, _ in hung if held != before]
        assert not changed, f"a placement changed while the hub hung: {changed[:3]}"
        assert not any(stalled & CRITICAL for _, stalled, _ in seen), "hub events or the timer stalled"
        answers = {health for _, _, health in seen}  # a probe that timed out under load is no answer
        assert "SERVING" in answers and "NOT_SERVING" not in answers, "readiness changed because of the hub"
        assert process.watcher.alive, "a hub watch thread died"
    records = [r for r in caplog.records if getattr(r, "loop", None) == "status"]
    assert [r.getMessage() for r in records][:1] == ["loop stalled: no turn within its limit"]
    assert "loop turns again after a stall" in [r.getMessage() for r in records]


def readyz(agent: agents_main.Agent) -> int:
    """The agent's /readyz status code, over HTTPS verified with its serving CA."""
    context = ssl.create_default_context(cadata=agent.serving.ca_pem.decode())
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{agent.webhook.port}/readyz", context=context,
                                    timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_a_hung_member_stalls_the_workload_loop_and_the_agent_is_unready_until_it_answers(
        sandbox: state.SandboxState, clusters: conftest.Clusters, namespace: str, local_ray: str,
        tmp_path: pathlib.Path) -> None:
    (name,) = hubside.names("m1")
    hub = hubside.Hub(clusters, namespace)
    apps = clusters.apps(MEMBER)

    def stalled(loop: str) -> float | None:
        return agent.metrics.registry.get_sample_value("fedspread_agent_loop_stalled", {"loop": loop})

    def member_deployment() -> bool:
        found = apps.list_namespaced_deployment(namespace, field_selector="metadata.name=web").items
        return bool(found) and found[0].spec.replicas == 2

    with tcp_proxy.TcpProxy(f"127.0.0.1:{sandbox.cluster(MEMBER).port}") as proxy, \
            hubside.running_coordinator(sandbox, clusters, members=[name]) as process:
        agent = agents_main.Agent(agents_main.AgentConfig(
            agents_main.LinkSettings(f"127.0.0.1:{process.port}", name, heartbeat_seconds=1.0),
            kubeconfig=through(proxy, sandbox.cluster(MEMBER).kubeconfig, tmp_path),
            webhook=agents_main.WebhookSettings(port=hubside.free_port(), register=False),
            metrics=agents_main.MetricsSettings(port=0)))
        agent.start()
        try:
            waiting.wait_for(lambda: agent.link.connected and readyz(agent) == 200, timeout=TIMEOUT,
                             message="the agent never became ready and connected")
            proxy.hang()
            everything = [{"name": "all", "clusters": [name]}]
            hub.create(builders.deployment("web", 2, cpu="10m"),
                       hubside.spread_body("web", target="web", subsets=everything))
            waiting.wait_for(lambda: stalled("workload") == 1, timeout=TIMEOUT,
                             message=lambda: f"the workload loop never reported stalled: "
                             f"{agent.watchdog.snapshot()}")
            waiting.wait_for(lambda: readyz(agent) == 503, timeout=TIMEOUT,
                             message="/readyz never said 503 while the workload loop was stalled")
            assert agent.link.connected, "the agent lost its coordinator over a hung member"
            assert not member_deployment()
            proxy.release()
            waiting.wait_for(member_deployment, timeout=TIMEOUT,
                             message="the member Deployment was never created after the hang")
            waiting.wait_for(lambda: stalled("workload") == 0 and readyz(agent) == 200, timeout=TIMEOUT,
                             message="the agent never became ready again")
        finally:
            if proxy.hung:
                proxy.release()
            agent.stop()
