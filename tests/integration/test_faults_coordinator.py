"""Fault: the coordinator SIGKILLed mid-scale and started again, at moments drawn from a seed.

A real `fedspread coordinator` process (joining the session's Ray) places two spreads on two
stand-in agents (the real agent link, `tests/support/standin_agent.py`); the hub Deployments are
scaled and the coordinator is killed a random moment later — before, during or after it handled
the scale — sometimes scaled again while it is down, then started again. What must hold:

* **Never above a cap.** A sampler reads what every agent enforces, every 20 ms, for the whole
  test: no subset's quota in any cluster above its `maxReplicas`, and no spread's quotas summed
  over the clusters above the largest replica count the user ever asked for (a restarted
  coordinator must not hand out a quota twice).
* **Same placement as an undisturbed run.** After the restart the agents hold exactly what the
  pure placement (`federation.core.placement.place`) gives for the final replica counts.
* **No spread forgotten.** Both spreads are served by the SDK and have their status on the hub,
  and a scale after the restart is followed.
"""

from __future__ import annotations

import pathlib
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import conftest
import hubside
import pytest
import waiting

from federation import sdk
from federation.api import cluster as cluster_api
from federation.api import spread as spread_api
from federation.core import placement
from tests.support import builders, soak, standin_agent

TIMEOUT = 90.0
NODES = {"capped": 3, "elastic": 5}


@pytest.fixture
def hub(clusters: conftest.Clusters, namespace: str) -> hubside.Hub:
    return hubside.Hub(clusters, namespace)


@pytest.fixture
def coordinator(sandbox: Any, local_ray: str, tmp_path: pathlib.Path) -> Iterator[hubside.CoordinatorCommand]:
    command = hubside.CoordinatorCommand(sandbox.hub.kubeconfig, port=hubside.free_port(),
                                         ray_address=local_ray, log=tmp_path / "coordinator.log")
    try:
        yield command
    finally:
        command.stop()


def subsets_of(capped: str, elastic: str) -> dict[str, list[dict[str, Any]]]:
    """Two spreads, Fixed: web fills capped up to 3; api takes 2 on elastic, 4 on capped, the rest
    on elastic again (one cluster in two subsets)."""
    return {
        "web": [{"name": "onprem", "clusters": [capped], "maxReplicas": 3},
                {"name": "cloud", "clusters": [elastic]}],
        "api": [{"name": "first", "clusters": [elastic], "maxReplicas": 2},
                {"name": "second", "clusters": [capped], "maxReplicas": 4},
                {"name": "rest", "clusters": [elastic]}],
    }


def undisturbed(subsets: list[dict[str, Any]], replicas: int,
                names: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per cluster, per subset: the quotas the pure placement gives (what an undisturbed
    coordinator would have handed out)."""
    spec = spread_api.FederatedSpreadSpec.model_validate(
        {"targetRef": {"name": "x"}, "subsets": subsets, "scheduleStrategy": {"type": "Fixed"}})
    snapshot = cluster_api.CapacitySnapshot.model_validate({"clusters": [
        {"name": names[base], "nodePools": [{"count": count, "allocatable": {"cpu": "4", "pods": 110}}]}
        for base, count in NODES.items()]})
    result = placement.place(spec, replicas=replicas, snapshot=snapshot)
    return {name: {s.name: s.clusters.get(name, 0) for s in result.subsets} for name in names.values()}


class Sampler:
    """Reads every agent's quotas every 20 ms and records each sample that breaks a cap."""

    def __init__(self, agents: dict[str, standin_agent.StandInAgent],
                 caps: dict[tuple[str, str, str], int], keys: list[str]) -> None:
        self.agents, self.caps, self.keys = agents, caps, keys
        self.asked: dict[str, int] = {}
        """Per spread key: the largest replica count ever asked for."""
        self.violations: list[str] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="quota-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.samples += 1
            for key in self.keys:
                total = 0
                for name, agent in self.agents.items():
                    quotas = agent.quotas(key)
                    total += sum(quotas.values())
                    for subset, quota in quotas.items():
                        cap = self.caps.get((key, subset, name))
                        if cap is not None and quota > cap:
                            self.violations.append(f"{key} {subset}@{name}: quota {quota} > cap {cap}")
                if total > self.asked.get(key, 0):
                    self.violations.append(f"{key}: {total} replicas handed out, at most "
                                           f"{self.asked.get(key)} ever asked for")


def quotas_of(agents: dict[str, standin_agent.StandInAgent], key: str) -> dict[str, dict[str, int]]:
    """What each agent enforces for spread `key`, per subset."""
    return {name: agent.quotas(key) for name, agent in agents.items()}


@pytest.mark.parametrize("seed", soak.seeds(1))
def test_coordinator_killed_mid_scale_converges_to_the_undisturbed_placement(
        seed: int, clusters: conftest.Clusters, hub: hubside.Hub,
        coordinator: hubside.CoordinatorCommand) -> None:
    rng = random.Random(seed)
    capped, elastic = hubside.names("capped", "elastic")
    named = {"capped": capped, "elastic": elastic}
    custom = clusters.custom(hubside.HUB)
    hubside.delete_member_clusters(custom, [capped, elastic])
    subsets = subsets_of(capped, elastic)
    replicas = {"web": 2, "api": 3}
    coordinator.start()
    agents = hubside.agents_for(coordinator.target, {capped: (NODES["capped"], "4"),
                                                     elastic: (NODES["elastic"], "4")})
    keys = {name: f"{hub.namespace}/{name}" for name in subsets}
    caps = {(keys[spread], s["name"], c): s["maxReplicas"] for spread, items in subsets.items()
            for s in items if "maxReplicas" in s for c in s["clusters"]}
    sampler = Sampler(agents, caps, list(keys.values()))

    def scale(name: str, count: int) -> None:
        replicas[name] = count
        sampler.asked[keys[name]] = max(sampler.asked.get(keys[name], 0), count)
        hub.scale(name, count)

    def converged(what: str) -> None:
        for name, key in keys.items():
            expected = undisturbed(subsets[name], replicas[name], named)

            def holds(key: str = key, expected: dict[str, dict[str, int]] = expected) -> bool:
                # A cluster with no replicas of the spread is sent nothing (no quotas, not zeros).
                return quotas_of(agents, key) == {
                    name: quotas if any(quotas.values()) else {} for name, quotas in expected.items()}

            def seen(key: str = key, expected: dict[str, dict[str, int]] = expected) -> str:
                return (f"seed {seed}, {what}: {key} quotas are {quotas_of(agents, key)}, the undisturbed "
                        f"placement is {expected}; coordinator log {coordinator.log}")

            waiting.wait_for(holds, timeout=TIMEOUT, message=seen)

    try:
        with sampler:
            for name in subsets:
                sampler.asked[keys[name]] = replicas[name]
                hub.create(builders.deployment(name, replicas[name], cpu="100m"),
                           hubside.spread_body(name, target=name, subsets=subsets[name]))
            converged("created")

            for name in subsets:  # the scale the coordinator is killed in the middle of
                scale(name, rng.randint(1, 14))
            time.sleep(rng.uniform(0.0, 1.5))  # a random moment: before, during or after handling it
            coordinator.kill()
            waiting.wait_for(lambda: not any(a.link.connected for a in agents.values()), timeout=TIMEOUT,
                             message=f"seed {seed}: an agent still reports its stream up after the kill")
            if rng.random() < 0.5:  # the user scales again while nobody is placing
                scale(rng.choice(sorted(subsets)), rng.randint(1, 14))
            time.sleep(rng.uniform(0.0, 2.0))  # down for a random while: agents enforce what they had
            welcomed = {name: agent.link.connects for name, agent in agents.items()}
            coordinator.start()
            waiting.wait_for(  # the new coordinator has welcomed every agent
                lambda: all(a.link.connects > welcomed[n] for n, a in agents.items()),
                timeout=TIMEOUT, message=lambda: (
                    f"seed {seed}: not every agent reconnected: {[a.link.connects for a in agents.values()]} "
                    f"welcomes (before the kill: {list(welcomed.values())}); see {coordinator.log}"))
            converged(f"after the restart (replicas {replicas})")

            scale("web", rng.choice([n for n in range(7) if n != replicas["web"]]))  # a real change
            converged(f"after a scale to {replicas['web']} following the restart")
        assert sampler.samples > 100, f"seed {seed}: the sampler ran only {sampler.samples} times"
        assert sampler.violations == [], f"seed {seed}: {sampler.violations[:5]}"

        with sdk.PlacementClient(coordinator.target) as client:
            def serving() -> dict[str, dict[str, int]] | None:
                found = {p.spread: p.clusters for p in client.placements(hub.namespace)}
                return found if sorted(found) == sorted(keys.values()) else None

            served = waiting.wait_for(serving, timeout=TIMEOUT, message=lambda: (
                f"seed {seed}: a spread was forgotten: the SDK serves "
                f"{[p.spread for p in client.placements(hub.namespace)]}"))
        for name, key in keys.items():
            want = {c: sum(q.values()) for c, q in undisturbed(subsets[name], replicas[name], named).items()}
            assert served[key] == want, f"seed {seed}: the SDK serves {served[key]} for {key}, not {want}"

            def written(name: str = name, want: dict[str, int] = want) -> bool:
                status = hub.spread_status(name)
                placed = {p["cluster"]: p["replicas"] for p in status.get("placement") or [] if p["replicas"]}
                return status.get("replicas") == replicas[name] and \
                    placed == {c: n for c, n in want.items() if n}

            waiting.wait_for(written, timeout=TIMEOUT, message=lambda name=name, want=want: (
                f"seed {seed}: {name} status is {hub.spread_status(name)}, placement should be {want}"))
        assert coordinator.alive, f"seed {seed}: the restarted coordinator exited; see {coordinator.log}"
    finally:
        hubside.stop_all(agents)
        coordinator.stop()
        hubside.delete_member_clusters(custom, [capped, elastic])
