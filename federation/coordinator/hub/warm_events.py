"""A standby's view of the hub: the latest event per object, handed over whole when it leads.

Why: a standby coordinator that waits cold must list every FederatedSpread, MemberCluster and
Deployment of the hub when it wins the Lease, and the federation waits for that listing. A warm
standby watches the hub all along (the same `watcher.HubWatcher`, the same reflectors), but must
neither place nor write, so it cannot apply what it sees to a World that acts. It keeps, per
object, only the newest event instead: an object first seen and changed since is one ADDED event
carrying its latest state, an object gone before the takeover is nothing. At the takeover,
`drain` returns them in the order the objects were first seen, with each kind's SYNCED after
its first list and each spread's target Deployment as it is now, which is what a cold start's
listing would have delivered, only already at hand. The coordinator applies them through its one
path (`watcher.apply_to_world`): placements seeded from the statuses the old leader wrote last,
do no harm, then `mark_hub_synced`.

Memory is one event per hub object (what the World holds anyway); the buffer never grows with the
number of changes, however long the standby waits.
"""

from __future__ import annotations

import dataclasses
import threading

from federation.coordinator.hub import watcher
from federation.coordinator.model import lifecycle


class WarmEvents:
    """The newest HubEvent per (kind, key), in first-seen order; SYNCED once per kind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[tuple[str, str], watcher.HubEvent] = {}
        self._drained = False
        self.seen = 0
        """Events taken in (for the standby's log and tests)."""

    def put(self, event: watcher.HubEvent) -> None:
        """Keep `event` as its object's newest (the watcher's `on_event` while standing by)."""
        slot = (event.kind, event.key)
        with self._lock:
            if self._drained:
                raise RuntimeError("the warm events were already handed over")
            self.seen += 1
            if event.type == "SYNCED":
                self._latest.setdefault(slot, event)
                return
            if event.type == "DELETED":
                self._latest.pop(slot, None)  # never applied: gone is the same as never seen
                return
            kept = self._latest.get(slot)
            # A cold start lists an object as ADDED whatever happened to it before; keep the
            # object's place (first seen) and its newest state.
            self._latest[slot] = event if kept is None and event.type == "ADDED" else \
                dataclasses.replace(event, type="ADDED")

    def drain(self) -> list[watcher.HubEvent]:
        """Every kept event, once: what a listing at this moment would deliver, in order."""
        with self._lock:
            self._drained = True
            events, self._latest = list(self._latest.values()), {}
        workloads = {(e.workload.kind, e.key): e.workload for e in events if e.workload is not None}
        return [_retargeted(e, workloads) if e.kind == "spread" else e for e in events]

    def __len__(self) -> int:
        with self._lock:
            return len(self._latest)


def _retargeted(event: watcher.HubEvent,
                workloads: dict[tuple[str, str], watcher.WorkloadInfo]) -> watcher.HubEvent:
    """A spread's event with its target workload as it is now: the one it carries was current
    when the spread last changed, and applied after a newer workload event it would undo it."""
    if event.spread is None:
        return event
    namespace = event.key.partition("/")[0]
    ref = lifecycle.in_force(event.spread).spec.target_ref
    target = workloads.get((ref.kind, f"{namespace}/{ref.name}"))
    return event if target is event.target else dataclasses.replace(event, target=target)
