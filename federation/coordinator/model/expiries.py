"""What ends with time and brings a spread back to be placed: marks and timed tolerations.

Why apart from the loop (`model.loop.due` asks both): each is a scan of the spreads for a window
that closed between two ticks of the coordinator's timer — an agent's unschedulable mark whose
`unschedulableSeconds` passed (the marked subset may take replicas in that cluster again), a
`clusterTolerations` entry's `tolerationSeconds` on a NoExecute taint that ran out (the replicas
on that cluster move now). Both read the World and change nothing.
"""

from __future__ import annotations

import datetime

from federation.api import cluster
from federation.coordinator.model import world as world_model


def tolerations_expired(
    world: world_model.World, *, since: datetime.datetime, now: datetime.datetime
) -> set[str]:
    """Spreads with a timed clusterToleration (`tolerationSeconds`) of a NoExecute cluster taint
    that ended in (since, now]: their replicas on that cluster move now."""
    expired = set()
    for entry in world.spreads():
        timed = [t for t in entry.spec.cluster_tolerations if t.toleration_seconds is not None]
        if timed and any(since < end <= now for name in world.selected(entry.key)
                         for end in cluster.toleration_ends(world.taints_of(name), tolerations=timed)):
            expired.add(entry.key)
    return expired


def marks_expired(world: world_model.World, *, since: datetime.datetime, now: datetime.datetime) -> set[str]:
    """Spreads with an unschedulable mark whose window ended in (since, now]: the marked subset
    may take replicas in that cluster again, so they are placed anew (the timer's second duty)."""
    expired = set()
    for entry in world.spreads():
        seconds = entry.spec.schedule_strategy.adaptive_settings().unschedulable_seconds
        window = datetime.timedelta(seconds=seconds)
        if any(since < mark.since + window <= now for mark in world.marks_for(entry.key)):
            expired.add(entry.key)
    return expired
