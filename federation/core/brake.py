"""The failover brake: when losing clusters looks like the coordinator's own fault, move nothing.

Why: a cluster is lost when the coordinator has not heard its agent for `clusterLostSeconds`, and
failover then places the lost cluster's replicas elsewhere. That is right when one cluster dies. It
is wrong when the silence is on the coordinator's side — its own network is cut, its node is
overloaded, every agent is being upgraded more slowly than the timeout: then every cluster looks
lost at once, the first agent to reconnect receives every replica and the others, on their return,
are told to delete healthy pods. Karmada and Kubernetes' node lifecycle controller stop evicting
when too many members go unhealthy at once for the same reason.

So, per spread: when more than half of the clusters it can select are lost at the same time, or
the coordinator hears from no agent at all, failover is suspended — the spread is placed as if its
lost clusters were still ready, which keeps its replicas where they are — until enough return.

When the brake lifts (enough clusters came back), the clusters still silent get one more
`clusterLostSeconds` before their replicas move: agents come back one by one after a partition,
and the last one must not be failed over the instant the one before it reconnects.

Pure: the coordinator's model keeps one `BrakeState` per spread and asks `next_state` on every
placement; the status shows it as the `FailoverSuspended` condition.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection

CONDITION = "FailoverSuspended"


def suspends(*, selectable: int, lost: int, heard_from_any: bool) -> bool:
    """Whether losing `lost` of the `selectable` clusters points at the coordinator's side."""
    if lost <= 0:
        return False
    return not heard_from_any or 2 * lost > selectable


@dataclasses.dataclass(frozen=True)
class BrakeState:
    """A spread's brake: the lost clusters treated as ready, since when, and when it lifted."""

    clusters: frozenset[str]
    """Lost clusters the spread's placement treats as ready (its replicas there stay)."""
    since: datetime.datetime
    """When failover was suspended."""
    lifted_at: datetime.datetime | None = None
    """When enough clusters returned; `clusters` then keep their replicas for one more grace."""

    @property
    def suspended(self) -> bool:
        """Failover is suspended now (not merely in the grace after lifting)."""
        return self.lifted_at is None

    def grace_ends(self, grace: datetime.timedelta) -> datetime.datetime | None:
        """When the grace after lifting ends (None while still suspended)."""
        return None if self.lifted_at is None else self.lifted_at + grace


def next_state(
    previous: BrakeState | None, *, selectable: Collection[str], lost: Collection[str],
    heard_from_any: bool, now: datetime.datetime, grace: datetime.timedelta,
    falling_silent: Collection[str] = (),
) -> BrakeState | None:
    """The spread's brake after looking at its clusters now (None: failover works normally).

    `selectable` are the clusters its subsets can select, `lost` those of them that are lost,
    `heard_from_any` whether any agent of the federation is heard, `grace` the spread's
    `clusterLostSeconds`. `falling_silent` are clusters not lost yet but silent for a good part
    of the limit: they count toward the brake, because agents cut off together fall silent a
    heartbeat apart and are declared lost a tick apart — judged one at a time, the first would be
    failed over before the others are seen.
    """
    chosen = frozenset(selectable)
    still_lost = frozenset(lost) & chosen
    silent = still_lost | (frozenset(falling_silent) & chosen)
    if suspends(selectable=len(chosen), lost=len(silent), heard_from_any=heard_from_any) and still_lost:
        since = previous.since if previous is not None and previous.suspended else now
        return BrakeState(clusters=still_lost, since=since)
    if previous is None:
        return None
    lifted_at = previous.lifted_at if previous.lifted_at is not None else now
    held = previous.clusters & still_lost
    if not held or now - lifted_at > grace:
        return None
    return BrakeState(clusters=held, since=previous.since, lifted_at=lifted_at)


def describe(state: BrakeState, *, selectable: int) -> str:
    """The condition message for a brake that holds or is in its grace."""
    names = ", ".join(sorted(state.clusters))
    if state.suspended:
        return (f"failover suspended: {len(state.clusters)} of {selectable} clusters this spread can "
                f"select are silent ({names}), which points at the coordinator's side; their replicas "
                "stay where they are until enough clusters return")
    return (f"failover resumed; {names} keep their replicas for one more clusterLostSeconds "
            "unless they return")
