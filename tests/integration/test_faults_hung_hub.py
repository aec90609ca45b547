"""Fault: the hub's apiserver stops answering without closing its connections, then answers again.

A coordinator (in-process, on the session's Ray) reaches the sandbox hub through a TCP proxy
(`tests.support.tcp_proxy`); two stand-in agents hold a placed spread. The proxy then hangs:
every connection, open or new, stays open and nothing is forwarded — the fault that froze the
status loop before every call had a deadline. Meanwhile the spread is edited on the hub directly.

While the hub hangs:
* the coordinator stays alive and keeps serving: placements through the SDK, quotas in the
  agents, exactly as before the hang (DESIGN.md §3a: a hung hub causes no failover, no removal,
  no change at all), sampled all along;
* the watchdog reports the status loop stalled — a structured warning and
  `fedspread_coordinator_loop_stalled{loop="status"}` = 1 — while hub events and timer keep
  turning, so readiness stays SERVING (a slow hub is no reason to turn agents away);
* a status write ends at its deadline (`federation.kube.deadlines`): the writer counts a failure
  although the hub never answered, which it could not without a read timeout.

When the proxy answers again (it resets the connections that lived through the hang, as they
carried nothing since), the watches resume, the edit is placed, the status is written, and the
watchdog says once that the status loop turns again. A real silent watch would be cut by its own
read deadline (`deadlines.watch`: 330 s) instead of the reset; that part is not waited for here.
No timed assertions: every wait is `waiting.wait_for` with a generous deadline.
"""

from __future__ import annotations

import contextlib
import logging
import pathlib
import threading
from collections.abc import Iterator
from typing import Any

import conftest
import grpc
import hubside
import pytest
import waiting
import yaml

from federation import sdk
from federation.coordinator import process as coordinator_main
from federation.sandbox import state
from tests.support import builders, grpc_probes, tcp_proxy

TIMEOUT = 180.0
"""Generous: a status write on the hung hub ends after its read deadline and urllib3's one retry."""
CRITICAL = {"hub-events", "timer"}


@contextlib.contextmanager
def coordinator_behind(proxy: tcp_proxy.TcpProxy, sandbox: state.SandboxState, clusters: conftest.Clusters,
                       *, members: list[str], directory: pathlib.Path,
                       ) -> Iterator[coordinator_main.CoordinatorProcess]:
    """A CoordinatorProcess whose every hub call goes through `proxy`: its kubeconfig is the hub's
    with the server's address replaced (the address family is the same, so the certificate fits)."""
    kubeconfig = yaml.safe_load(pathlib.Path(sandbox.hub.kubeconfig).read_text())
    for entry in kubeconfig["clusters"]:
        entry["cluster"]["server"] = f"https://{proxy.target}"
    proxied = directory / "hub-through-proxy.kubeconfig"
    proxied.write_text(yaml.safe_dump(kubeconfig))
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
    caplog.set_level(logging.WARNING, logger="fedspread.watchdog")
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
        hung = seen[:next((i for i, (held, _, _) in enumerate(seen) if held == after), len(seen))]
        assert hung, "nothing was sampled while the hub hung"
        assert all(held == before for held, _, _ in hung), "a placement changed while the hub hung"
        assert not any(stalled & CRITICAL for _, stalled, _ in seen), "hub events or the timer stalled"
        assert {health for _, _, health in seen} == {"SERVING"}, "readiness changed because of the hub"
        assert process.watcher.alive, "a hub watch thread died"
    records = [r for r in caplog.records if getattr(r, "loop", None) == "status"]
    assert [r.getMessage() for r in records][:1] == ["loop stalled: no turn within its limit"]
    assert "loop turns again after a stall" in [r.getMessage() for r in records]
