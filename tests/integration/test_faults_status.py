"""Fault: a storm of 409 Conflicts on status writes, from writers bumping the same objects.

The coordinator's `StatusWriter` (with the settings the coordinator uses) writes a sequence of
statuses to three FederatedSpreads and their hub Deployments, one writer thread per spread, while
a seed-chosen number of other writers keep patching the same objects' labels as fast as they can,
each bump a new resourceVersion: every status patch computed from an older read gets 409.

What must hold: every status lands (read back right after its write, and the last one at the
end — none lost); a write takes at most the writer's bounded number of attempts, and when a
write runs out of them under the storm it says so with the 409 (never another error, never a
hang) and the next try — what the coordinator's next status pass does — lands; the storm really
caused conflicts (otherwise the test proved nothing).
"""

from __future__ import annotations

import functools
import random
import threading
import time
from typing import Any

import conftest
import hubside
import pytest
from kubernetes.client import exceptions

from federation.api import common
from federation.api import spread as spread_api
from federation.coordinator.hub import status_writer
from tests.support import builders, soak

SPREADS = ("s0", "s1", "s2")
WRITES = 8
TIMEOUT = 120.0


def status(number: int) -> spread_api.FederatedSpreadStatus:
    """The `number`th status of a sequence: every one differs from the one before."""
    return spread_api.FederatedSpreadStatus(
        observed_generation=1, replicas=3, ready_replicas=number % 4,
        placement=[spread_api.ClusterPlacementStatus(cluster="member-1", replicas=3,
                                                     ready_replicas=number % 4)],
        conditions=[common.Condition(type="Placed", status="True", reason="AllPlaced",
                                     message=f"write {number}")])


class Writer:
    """One spread's statuses, written in order; records attempts, give-ups and what it read back."""

    def __init__(self, hub: hubside.Hub, writer: status_writer.StatusWriter, name: str) -> None:
        self.hub, self.writer, self.name = hub, writer, name
        self.key = f"{hub.namespace}/{name}"
        self.most_attempts = 0
        self.gave_up = 0
        self.problems: list[str] = []
        self.written = 0

    def _attempt(self, call: Any) -> bool:
        """One call; True when it landed. A 409 after every attempt is a give-up; any other error,
        or a give-up after another number of attempts, is a problem."""
        before = sum(self.writer.retries.values())
        try:
            call()
            landed = True
        except exceptions.ApiException as error:
            if error.status != 409:
                self.problems.append(f"{self.name}: {error.status} {error.reason}")
            self.gave_up += 1
            landed = False
        attempts = sum(self.writer.retries.values()) - before + 1
        self.most_attempts = max(self.most_attempts, attempts)
        if not landed and attempts != self.writer.attempts:
            self.problems.append(f"{self.name}: gave up after {attempts} attempts, "
                                 f"not {self.writer.attempts}")
        return landed

    def run(self, deadline: float) -> None:
        """Write WRITES statuses (and the hub Deployment's counts), each until it lands."""
        for number in range(WRITES):
            fields = {"replicas": 3, "readyReplicas": number % 4}
            calls = (functools.partial(self.writer.write_spread, self.key, status(number)),
                     functools.partial(self.writer.write_deployment_status, self.hub.namespace, self.name,
                                       fields))
            for call in calls:
                while not self._attempt(call):  # the coordinator's next status pass tries again
                    if time.monotonic() > deadline or len(self.problems) > 5:
                        return
            found = self.hub.spread_status(self.name)
            message = (found.get("conditions") or [{}])[0].get("message")
            if message != f"write {number}" or found.get("readyReplicas", 0) != number % 4:
                self.problems.append(f"{self.name}: write {number} did not land, the hub has {found}")
            self.written += 1


def storm(hub: hubside.Hub, rng: random.Random, stop: threading.Event, bumps: list[int]) -> None:
    """Patch the spreads' and Deployments' labels in a loop, at a random pace, until `stop`."""
    while not stop.is_set():
        name = rng.choice(SPREADS)
        label = {"metadata": {"labels": {"bump": str(rng.getrandbits(32))}}}
        if rng.random() < 0.5:
            hub.custom.patch_namespaced_custom_object(
                common.API_GROUP, common.API_VERSION, hub.namespace, spread_api.PLURAL, name, label)
        else:
            hub.apps.patch_namespaced_deployment(name, hub.namespace, label)
        bumps[0] += 1
        stop.wait(rng.uniform(0.0, 0.004))


@pytest.mark.parametrize("seed", soak.seeds(3))
def test_status_writes_land_through_a_409_storm_with_bounded_attempts(
        seed: int, clusters: conftest.Clusters, namespace: str) -> None:
    rng = random.Random(seed)
    hub = hubside.Hub(clusters, namespace)
    for name in SPREADS:
        hub.create(builders.deployment(name, 3, cpu="100m"), hubside.spread_body(
            name, target=name, subsets=[{"name": "a", "clusters": ["member-1"]}]))
    writers = [Writer(hub, status_writer.StatusWriter(clusters.api(hubside.HUB)), name) for name in SPREADS]
    stop, bumps = threading.Event(), [0]
    bumpers = [threading.Thread(target=storm, args=(hub, random.Random(seed * 100 + i), stop, bumps),
                                daemon=True) for i in range(rng.randint(2, 5))]
    deadline = time.monotonic() + TIMEOUT
    threads = [threading.Thread(target=w.run, args=(deadline,), daemon=True) for w in writers]
    for thread in [*bumpers, *threads]:
        thread.start()
    try:
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()) + 5)
    finally:
        stop.set()
        for thread in bumpers:
            thread.join(10)
    what = f"seed {seed} ({len(bumpers)} bumpers, {bumps[0]} bumps)"
    assert not any(t.is_alive() for t in threads), f"{what}: a writer hung"
    assert [p for w in writers for p in w.problems] == [], what
    landed = [w.written for w in writers]
    assert landed == [WRITES] * len(writers), f"{what}: writes landed {landed}"
    retries = sum(sum(w.writer.retries.values()) for w in writers)
    assert retries > 0, f"{what}: the storm caused no conflict; nothing was tested"
    assert max(w.most_attempts for w in writers) <= writers[0].writer.attempts, what
    for w in writers:  # the last status is the one on the hub, with the storm over
        last = hub.spread_status(w.name)
        assert last["conditions"][0]["message"] == f"write {WRITES - 1}", f"{what}: {w.name} has {last}"
        ready = hub.deployment_status(w.name)["ready_replicas"]
        assert ready == (WRITES - 1) % 4, f"{what}: {w.name} Deployment has {ready} ready"
    print(f"{what}: {retries} retries, {sum(w.gave_up for w in writers)} give-ups, "
          f"most attempts {max(w.most_attempts for w in writers)}")
