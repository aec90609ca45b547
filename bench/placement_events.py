"""The placement benchmark's events, timed from the event to every affected agent holding its share.

Why end to end and per event: a user scales a Deployment, creates a spread, loses capacity in a
cluster or drains one, and waits until the member clusters hold their new quotas. So each event
here is made the way the coordinator meets it — a new hub target or spread fed to its World and
published; reports arriving over the cluster's own stream (a grown inventory where replicas wait
for room; a shrunk one followed by the UnschedulableReports of the subsets whose pods no longer fit,
as an agent sends them for pods stuck Pending: a shrink alone moves nothing, since placed replicas
stay where they are until their pods say otherwise); a NoExecute taint on a MemberCluster — and its
latency runs from the event to the arrival, in the stand-in agents'
process (bench/placement_swarm.py), of the last assignment or removal the coordinator sent for
it. The messages of an event are the ones `Recorder` saw the coordinator queue while handling it;
each is matched on the far side by its fingerprint, so an earlier message of the same spread does
not count. Beside the latency, each sample says how many spreads the coordinator placed again
(`replaced`: an event that places nothing again measures nothing), how many messages it sent,
and how long the coordinator held its lock for it (`inside_ms`).

Every percentile is nearest-rank over all samples of its kind (`admission_stats.percentile`); the
number of samples is stated beside it (a p99 of 20 samples is their largest).
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from bench import admission_stats, placement_swarm, placement_world
from federation.api import common, names
from federation.coordinator import facade
from federation.rpc import agent_pb2

Sent = dict[tuple[str, str], placement_swarm.Message | bytes]
"""Per (cluster, spread), the last message queued: an object, or a SpreadShard's serialized
assignment as the coordinator queued it (`AgentStream.send_assignment`)."""
Ask = Callable[[str, dict[str, Any]], dict[str, Any]]
"""Send the stand-in agents a command (`placement_swarm`'s protocol) and return their answer."""
DRAIN = common.Taint(key="fedspread.io/maintenance", effect="NoExecute")


class Recorder:
    """What the coordinator queues to each agent, per (cluster, spread), and the spreads it places.

    It wraps `AgentStream.send` and `AgentStream.send_assignment` (every message to every agent
    goes through one of them: the second queues a SpreadShard's bytes), the coordinator's
    `publish`, and its `detach` (to count streams that ended), keeping references only:
    fingerprints are computed after the timing.
    """

    def __init__(self, coordinator: facade.Coordinator) -> None:
        self._lock = threading.Lock()
        self._sent: Sent = {}
        self._placed = 0
        self._reports: dict[str, int] = {}
        self._detached = 0
        self._watching: set[tuple[str, str]] = set()
        self._later: dict[tuple[str, str], list[placement_swarm.Message | bytes]] = {}
        self._original_send = facade.AgentStream.send
        self._original_send_assignment = facade.AgentStream.send_assignment
        self._coordinator = coordinator
        recorder, send, publish = self, facade.AgentStream.send, coordinator.publish
        send_assignment = facade.AgentStream.send_assignment
        receive, detach = coordinator.receive, coordinator.detach

        def record(key: tuple[str, str], message: placement_swarm.Message | bytes) -> None:
            with recorder._lock:
                recorder._sent[key] = message
                if key in recorder._watching:
                    recorder._later.setdefault(key, []).append(message)

        def recording_send(stream: facade.AgentStream, **body: Any) -> None:
            send(stream, **body)
            message = body.get("assignment") or body.get("removal")
            if message is not None:
                record((stream.cluster, message.spread), message)

        def recording_send_assignment(stream: facade.AgentStream, *, spread: str, message: bytes) -> None:
            send_assignment(stream, spread=spread, message=message)
            record((stream.cluster, spread), message)

        def counting_publish(keys: Iterable[str]) -> Any:
            answer = publish(keys)
            with recorder._lock:
                recorder._placed += len(answer.placements)
            return answer

        def noting_receive(stream: facade.AgentStream, message: agent_pb2.AgentMessage) -> None:
            receive(stream, message)
            if message.WhichOneof("body") in ("inventory", "unschedulable"):
                with recorder._lock:
                    recorder._reports[stream.cluster] = recorder._reports.get(stream.cluster, 0) + 1

        def counting_detach(stream: facade.AgentStream) -> None:
            detach(stream)
            with recorder._lock:
                recorder._detached += 1

        facade.AgentStream.send = recording_send  # type: ignore[method-assign]
        facade.AgentStream.send_assignment = recording_send_assignment  # type: ignore[method-assign]
        coordinator.publish = counting_publish  # type: ignore[method-assign]
        coordinator.receive = noting_receive  # type: ignore[method-assign]
        coordinator.detach = counting_detach  # type: ignore[method-assign]

    def take(self) -> tuple[Sent, int]:
        """The messages and placements since the last take; from now on, what is sent after them to
        the same (cluster, spread) is kept too (`later`)."""
        with self._lock:
            sent, placed = self._sent, self._placed
            self._sent, self._placed = {}, 0
            self._watching, self._later = set(sent), {}
        return sent, placed

    def later(self, key: tuple[str, str]) -> list[placement_swarm.Message | bytes]:
        """What was sent to (cluster, spread) `key` after the last take's message: a stream's outbox
        keeps only the newest message per spread, so a newer one may replace it before it is
        written, and the agent then holds that one instead."""
        with self._lock:
            return list(self._later.get(key, ()))

    def reports(self, cluster: str) -> int:
        """Inventory and unschedulable reports `cluster`'s agent has had applied."""
        with self._lock:
            return self._reports.get(cluster, 0)

    @property
    def detached(self) -> int:
        """Agent streams that ended on the coordinator's side (detached from the facade) so far."""
        with self._lock:
            return self._detached

    def close(self) -> None:
        facade.AgentStream.send = self._original_send  # type: ignore[method-assign]
        facade.AgentStream.send_assignment = self._original_send_assignment  # type: ignore[method-assign]


@dataclasses.dataclass(frozen=True)
class Sample:
    """One event: its end-to-end latency and what it made the coordinator do."""

    latency_s: float
    """From the event (before the coordinator's lock is taken) until the agents hold its messages."""
    inside_s: float | None
    """How long the coordinator held its lock for it; None for reports (applied on its stream)."""
    replaced: int
    messages: int
    lock_wait_s: float | None = None
    """How long the event waited for the coordinator's lock (inside the latency); None for reports."""
    collector_s: float = 0.0
    """Seconds this process's cycle collector ran while the event was timed (every thread): a slow
    sample told apart from a collection that landed on it."""


def held(ask: Ask, recorder: Recorder, *, since: float, sent: Sent, timeout: float) -> float:
    """Seconds from `since` until the agents hold every message of `sent`, or one sent after it to
    the same (cluster, spread) (`Recorder.later`)."""
    pairs = []
    for (cluster, key), message in sent.items():
        prints = (placement_swarm.fingerprint(m) for m in (message, *recorder.later((cluster, key))))
        pairs.append([cluster, key, *prints])
    answer = ask("expect", {"since": since, "pairs": pairs, "timeout": timeout})
    if "latency_s" not in answer:
        raise TimeoutError(f"{answer.get('missing')} of {len(pairs)} messages never arrived: {answer}")
    return float(answer["latency_s"])


def _locked_event(coordinator: facade.Coordinator, recorder: Recorder, ask: Ask,
                  change: Callable[[], set[str]], *, timeout: float) -> Sample:
    """An event made under the coordinator's lock: `change` the World, publish what it affects."""
    recorder.take()
    since = time.monotonic()  # before the lock: waiting for it is part of what the user waits for
    with coordinator.lock:
        acquired = time.monotonic()
        coordinator.publish(change())
        inside = time.monotonic() - acquired
    sent, placed = recorder.take()
    return Sample(held(ask, recorder, since=since, sent=sent, timeout=timeout), inside, placed, len(sent),
                  lock_wait_s=acquired - since)


def scale_up(coordinator: facade.Coordinator, recorder: Recorder, ask: Ask, *, index: int,
             shape: placement_world.Shape, timeout: float) -> Sample:
    """Spread `index`'s hub Deployment gains a replica."""
    key = placement_world.spread(index, shape).key
    replicas = placement_world.replicas_of(index) + 1
    template = placement_world.template(index, shape)
    return _locked_event(coordinator, recorder, ask, lambda: coordinator.world.set_target(
        key, replicas=replicas, template=template) | {key}, timeout=timeout)


def new_spread(coordinator: facade.Coordinator, recorder: Recorder, ask: Ask, *, index: int,
               shape: placement_world.Shape, timeout: float) -> Sample:
    """Spread `index` is created (with its hub Deployment)."""
    item = placement_world.spread(index, shape)

    def create() -> set[str]:
        return placement_world.add_spread(coordinator.world, item, index=index, shape=shape)

    return _locked_event(coordinator, recorder, ask, create, timeout=timeout)


def taint(coordinator: facade.Coordinator, recorder: Recorder, ask: Ask, *, index: int,
          shape: placement_world.Shape, drained: bool, timeout: float) -> Sample:
    """Cluster `index` is drained (a NoExecute taint on its MemberCluster) or given back."""
    name = placement_world.cluster_name(index)
    labels = {names.REGION_LABEL: placement_world.region_of(index, shape)}
    return _locked_event(coordinator, recorder, ask, lambda: coordinator.world.upsert_cluster(
        name, labels=labels, taints=[DRAIN] if drained else []), timeout=timeout)


def capacity(coordinator: facade.Coordinator, recorder: Recorder, ask: Ask, *, index: int,
             change: int, stuck: Sequence[tuple[str, str]] = (), timeout: float) -> Sample:
    """Cluster `index`'s agent reports `change` nodes more (fewer when negative) over its stream,
    then the (spread, subset)s of `stuck` as unschedulable (their pods no longer fit: Pending)."""
    name = placement_world.cluster_name(index)
    recorder.take()
    before = recorder.reports(name)
    asked = {"cluster": index, "change": change, "stuck": [list(pair) for pair in stuck]}
    since = float(ask("capacity", asked)["at"])
    deadline = time.monotonic() + timeout
    while recorder.reports(name) < before + 1 + len(stuck):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}'s reports were never applied")
        time.sleep(0.005)
    sent, placed = recorder.take()
    return Sample(held(ask, recorder, since=since, sent=sent, timeout=timeout), None, placed, len(sent))


def summary(samples: list[Sample]) -> dict[str, Any]:
    """Latency p50/p99/max (ms) over every sample that sent a message, and each sample's in order
    (`samples_ms`), with the medians of what the events did. A sample that sent nothing has no
    delivery to time: it is counted in `sent_nothing`, not averaged in as 0 ms, and when no sample
    sent anything the latencies are None."""
    if not samples:
        return {"n": 0}
    latencies = [s.latency_s for s in samples if s.messages]
    found: dict[str, Any] = {
        "n": len(samples), "sent_nothing": len(samples) - len(latencies),
        "p50_ms": admission_stats.milliseconds(latencies, 50, digits=1) if latencies else None,
        "p99_ms": admission_stats.milliseconds(latencies, 99, digits=1) if latencies else None,
        "max_ms": round(max(latencies) * 1000, 1) if latencies else None,
        "replaced_median": statistics.median(s.replaced for s in samples),
        "messages_median": statistics.median(s.messages for s in samples)}
    found["n_timed"] = len(latencies)
    # Every sample's latency in the order they ran (None: it sent nothing), so that a tail can be
    # told from a trend: the first samples after a full round meet what the round left to do.
    found["samples_ms"] = [round(s.latency_s * 1000, 1) if s.messages else None for s in samples]
    inside = [s.inside_s for s in samples if s.inside_s is not None]
    if inside:
        found["inside_p50_ms"] = admission_stats.milliseconds(inside, 50, digits=1)
    found["collector_samples_ms"] = [round(s.collector_s * 1000, 1) for s in samples]
    waits = [s.lock_wait_s for s in samples if s.lock_wait_s is not None]
    if waits:
        found["lock_wait_p99_ms"] = admission_stats.milliseconds(waits, 99, digits=1)
    return found
