"""A background sampler for sandbox tests that must hold "at every sample", not just at the end.

Why a helper of its own: the do-no-harm tests (partition, real loss, cordon, agent faults) each
watch the members' pods while faults happen, on a thread, every quarter second; the plumbing —
start with the `with` block, stop and join at its end, count samples so a test can prove it looked
— is the same, only what is looked at differs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import agentside
import conftest

PERIOD = 0.25


class Sampler:
    """Calls `observe()` every `period` seconds on a thread, from `with` entry to exit."""

    def __init__(self, observe: Callable[[], None], *, period: float = PERIOD, name: str = "sampler") -> None:
        self._observe = observe
        self._period = period
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            self._observe()
            self.samples += 1


def is_running(pod: Any) -> bool:
    """Running and not being deleted."""
    return bool(pod.status.phase == "Running" and not pod.metadata.deletion_timestamp)


def is_ready(pod: Any) -> bool:
    """Running, not being deleted, and its Ready condition True."""
    return is_running(pod) and any(c.type == "Ready" and c.status == "True"
                                   for c in pod.status.conditions or ())


def pods_where(clusters: conftest.Clusters, member: str, namespace: str, test: Callable[[Any], bool],
               *, name: str = "web") -> set[str]:
    """Names of the spread's ReplicaSet-owned pods in `member` that pass `test`."""
    return {p.metadata.name for p in agentside.owned(agentside.spread_pods(clusters, member, namespace, name))
            if test(p)}
