"""What the agents last reported of each spread's pods, and which of those reports still hold.

Why a store of its own: pod counts are the coordinator's only evidence of what runs where, and two
rules read them with different trust. Overcommit protection and status take the last report as
it is. The handover rule (`federation.core.handover`) must not count a pod as Ready on stale
evidence: a cluster that was lost kept its last report while it was away, and its pods may have
died meanwhile. So a cluster found lost is marked *unverified* until its agent sends a full report
again; until then its pods are kept (never told to go) but not counted as Ready.

What a lost cluster holds is the larger of two pieces of evidence: its last report, and the share
it was last told to run before its replicas moved away (`away`). The report alone is not enough: an
agent reports pod counts when they change, so one that dies a moment after its pods became Ready
may have last said "0 running" — while its Deployment, which keeps the last assigned replicas,
runs them all.

**Unknown is not zero.** A report is evidence only for the spreads its agent held the assignment
of (with a synced cache) when it counted (`PodCountsReport.assigned`): a restarted agent's first
reports list none, and its silence about a spread is not "no pods here". So a cluster's counts of
a spread are *verified* only by a report that lists the spread, made since the coordinator
started, since the cluster's stream was last (re)opened, and since it was last found lost. Until
then its last known counts stand, its pods do not count as Ready, and what it holds (its last
report, the share it ran before it was lost, or — after a coordinator restart — the share the hub
status recorded, whichever is most) is kept whole (`unverified_for`). Agents older than the
`assigned` field verify every spread with each full report, as before.

Reports arrive per cluster; readers ask per spread. Both shapes are kept (`by_spread` is shared
with the member views, which charge every spread's pending pods), and the World tells this store
what happened. Pure: no clock, no I/O; used under the coordinator's lock.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Mapping, Sequence

from federation.core import placement, status

PerSubset = dict[str, status.ClusterPods]


class PodReports:
    """Per cluster and per spread, the last pod counts, member Deployment statuses and conflicts."""

    def __init__(self) -> None:
        self.by_cluster: dict[str, dict[str, PerSubset]] = {}
        """Per cluster, per spread key, per subset: the last counts each spread was reported with."""
        self.by_spread: dict[str, dict[str, PerSubset]] = {}
        """The same counts per spread key, per cluster (read, as a read-only mapping, by the
        pending-pod ledgers, `pending_charges`)."""
        self._workloads: dict[str, dict[str, status.WorkloadStatus]] = {}
        self._conflicts: dict[str, dict[str, str]] = {}
        self._dependency_conflicts: dict[str, dict[str, tuple[str, ...]]] = {}
        """Per cluster, per spread: the objects it needs there that the member has without our mark."""
        self._misplaced: dict[str, dict[str, str]] = {}
        """Per cluster, per spread: its agent's report of StatefulSet pods in the wrong subset."""
        self._autoscalers: dict[str, dict[str, tuple[str, ...]]] = {}
        """Per cluster, per spread: the member HPAs ("namespace/name") that scale its member workload."""
        self._verified: dict[str, set[str] | None] = {}
        """Per cluster, the spreads a report verified since the coordinator started, the stream
        opened and the cluster was last lost; None: every spread (an agent that lists nothing)."""
        self._gone: dict[str, set[str]] = {}
        """Per cluster, the spreads it was sent a removal of and no assignment since: a report made
        before it applied the removal (still in flight) says nothing about them any more."""
        self._away: dict[str, dict[str, dict[str, int]]] = {}
        """Per cluster not heard since, per spread key, per subset: the share it ran before it was
        lost, or its share in the placement a restarted coordinator read from the hub."""
        self._delivered: dict[str, dict[str, dict[str, int]]] = {}
        """Per cluster, per spread key, per subset: the quotas of the last assignment it was sent
        (kept when its stream ends: an agent enforces its last quotas while disconnected). A
        share placed while no stream could carry it never reached the agent, so it is not what the
        cluster runs once lost."""

    # --- events --------------------------------------------------------------------------------

    def report(
        self, name: str, counts: Mapping[str, Mapping[str, status.ClusterPods]], *,
        workloads: Mapping[str, status.WorkloadStatus] | None = None,
        conflicts: Mapping[str, str] | None = None, assigned: Collection[str] | None = None,
        dependency_conflicts: Mapping[str, Sequence[str]] | None = None,
        misplaced: Mapping[str, str] | None = None,
        autoscalers: Mapping[str, Sequence[str]] | None = None,
    ) -> set[str] | None:
        """A full report from `name`'s agent; the spread keys whose counts changed or that it
        verified (their counts count now), or None when the report says nothing new.

        `assigned`: the spreads the report is evidence for (None: every spread, from an agent
        that does not say); the last known counts of every other spread stand."""
        gone = self._gone.get(name, set())
        if gone:
            counts = {key: per_subset for key, per_subset in counts.items() if key not in gone}
            assigned = None if assigned is None else [key for key in assigned if key not in gone]
        self._workloads[name] = {k: v for k, v in (workloads or {}).items() if k not in gone}
        self._conflicts[name] = {k: v for k, v in (conflicts or {}).items() if k not in gone}
        self._dependency_conflicts[name] = {k: tuple(v) for k, v in (dependency_conflicts or {}).items()
                                            if k not in gone and v}
        self._misplaced[name] = {k: v for k, v in (misplaced or {}).items() if k not in gone and v}
        self._autoscalers[name] = {k: tuple(v) for k, v in (autoscalers or {}).items() if k not in gone and v}
        old = self.by_cluster.get(name, {})
        if assigned is None:
            evidence: set[str] = set(old) | set(counts)
            new = {key: dict(per_subset) for key, per_subset in counts.items()}
        else:
            evidence = set(assigned)
            new = {key: per_subset for key, per_subset in old.items() if key not in evidence}
            new.update((key, dict(counts[key])) for key in evidence if key in counts)
        before = self._verified.setdefault(name, set())
        verified = set() if before is None else evidence - before
        if assigned is None:
            self._verified[name] = None
        elif before is not None:
            before |= evidence
        held = self._away.get(name)
        if held is not None:
            for key in evidence:
                held.pop(key, None)
            if assigned is None or not held:
                self._away.pop(name, None)
        if old == new:
            return verified or None
        self.by_cluster[name] = new
        for key in set(old) - set(new):
            self.by_spread.get(key, {}).pop(name, None)
        for key, per_subset in new.items():
            self.by_spread.setdefault(key, {})[name] = per_subset
        return verified | {k for k in set(old) | set(new) if old.get(k) != new.get(k)}

    def lost(self, name: str) -> None:
        """`name` was found lost: its last report no longer proves that its pods are Ready."""
        self._verified[name] = set()

    def reconnected(self, name: str) -> set[str]:
        """`name`'s agent opened a new stream: it may have restarted, so nothing it reported
        before is verified until it reports again (what it held stands meanwhile). The spreads
        with pods counted there: their Ready pods there no longer count, so a handover elsewhere
        must keep its pods until these are verified again (place them again)."""
        self._verified[name] = set()
        return {key for key, per_subset in self.by_cluster.get(name, {}).items()
                if any(pods.active for pods in per_subset.values())}

    def sent(self, name: str, key: str, *, quotas: Mapping[str, int] | None = None) -> None:
        """Cluster `name` was sent an assignment of spread `key` with `quotas` per subset: its
        reports count for it again."""
        if quotas is not None:
            self._delivered.setdefault(name, {})[key] = dict(quotas)
        gone = self._gone.get(name)
        if gone is not None:
            gone.discard(key)

    def removed(self, name: str, key: str) -> set[str]:
        """Cluster `name` was sent the removal of spread `key`: what it reported of the spread no
        longer concerns the spread (its workload is deleted or released), nor does what a report
        still in flight says of it, until it is sent the spread again. The keys affected."""
        self._gone.setdefault(name, set()).add(key)
        self._delivered.get(name, {}).pop(key, None)
        self._away.get(name, {}).pop(key, None)
        per_spread = self.by_cluster.get(name)
        if per_spread is None or per_spread.pop(key, None) is None:
            return set()
        self.by_spread.get(key, {}).pop(name, None)
        return {key}

    def released(self, name: str, key: str) -> None:
        """Cluster `name` was sent an orphaning removal of spread `key`: its workload runs on,
        released, and a spread of the same key adopts it (re-creation). Its pods are not gone, so
        their counts stand — unverified until a report made after it is sent the spread again:
        nothing may be removed there on the strength of a report that no longer lists them. Nor
        are they fewer than the last quotas it was sent: the released workload's ReplicaSet goes on
        creating toward them, unreported (held as while away, until such a report)."""
        verified = self._verified.get(name)
        if verified is not None:
            verified.discard(key)
        delivered = self._delivered.get(name, {}).pop(key, None)
        if delivered:  # its ReplicaSet goes on toward the last quotas: pods not reported yet count
            held = self._away.setdefault(name, {}).setdefault(key, {})
            for subset, quota in delivered.items():
                if quota:
                    held[subset] = max(held.get(subset, 0), quota)

    def recorded(self, key: str, counts: Mapping[str, Mapping[str, int]]) -> None:
        """A restarted coordinator read spread `key`'s placement from its hub status: until each
        cluster reports the spread again, it holds (at least) its recorded share."""
        for subset, per_cluster in counts.items():
            for name, share in per_cluster.items():
                if share and not self.verified(name, key):
                    held = self._away.setdefault(name, {}).setdefault(key, {})
                    held[subset] = max(held.get(subset, 0), share)

    def announced(self, name: str, key: str, pods: Mapping[str, int]) -> bool:
        """Cluster `name`'s agent said in its Hello that it runs `pods` pods of spread `key` per
        subset. Until a report verifies the spread there, the cluster holds at least that many in
        each subset (per subset: a count put in another subset would raise that subset's quota
        above what runs there, and its cap). Whether what it holds grew."""
        if self.verified(name, key):
            return False
        held = self.held_by(name, key)
        grown = {subset: count for subset, count in pods.items() if count > held.get(subset, 0)}
        if not grown:
            return False
        self._away.setdefault(name, {})[key] = {**held, **grown}
        return True

    def remember_away(self, key: str, old: placement.Placement, *, lost: Collection[str]) -> None:
        """Spread `key` is placed anew; of its previous placement `old`, remember the shares of the
        `lost` clusters (the largest seen while each is away): what they run meanwhile — no more
        than each was last sent (`sent`): a share placed while its agent was disconnected never
        reached it, and holding it would keep a phantom share until a report the agent, never
        assigned the spread, cannot make."""
        for subset in old.subsets if lost else ():
            for name in lost:
                delivered = self._delivered.get(name, {}).get(key, {})
                share = min(subset.clusters.get(name, 0), delivered.get(subset.name, 0))
                if share:
                    held = self._away.setdefault(name, {}).setdefault(key, {})
                    held[subset.name] = max(held.get(subset.name, 0), share)

    def forget(self, name: str) -> set[str]:
        """`name`'s MemberCluster was deleted; the spreads that had pods counted there."""
        keys = set(self.by_cluster.pop(name, {}))
        for key in keys:
            self.by_spread.get(key, {}).pop(name, None)
        self._workloads.pop(name, None)
        self._conflicts.pop(name, None)
        self._dependency_conflicts.pop(name, None)
        self._misplaced.pop(name, None)
        self._autoscalers.pop(name, None)
        self._verified.pop(name, None)
        self._away.pop(name, None)
        self._gone.pop(name, None)
        self._delivered.pop(name, None)
        return keys

    # --- readers -------------------------------------------------------------------------------

    def verified(self, name: str, key: str) -> bool:
        """Whether cluster `name`'s counts of spread `key` are verified (module docstring)."""
        found = self._verified.get(name, set())
        return found is None or key in found

    def pods_for(self, key: str) -> dict[str, dict[str, status.ClusterPods]]:
        """Spread `key`'s pod counts per subset per cluster (clusters by name)."""
        found: dict[str, dict[str, status.ClusterPods]] = {}
        per_cluster = self.by_spread.get(key, {})
        for name in sorted(per_cluster):
            for subset, pods in per_cluster[name].items():
                found.setdefault(subset, {})[name] = pods
        return found

    def running_for(self, key: str) -> dict[str, dict[str, int]]:
        """Spread `key`'s running pods per subset per cluster, as last reported."""
        return {subset: {name: pods.running for name, pods in per_cluster.items()}
                for subset, per_cluster in self.pods_for(key).items()}

    def ready_for(self, key: str, *, usable: Container[str]) -> dict[str, dict[str, int]]:
        """Spread `key`'s verified Ready pods per subset per cluster, of the `usable` clusters only
        (a lost cluster's report, or an unverified one's, proves nothing).

        While the member workload rolls there (the subset's pods are of more than one template
        revision), its Ready pods count at most the quota the cluster was last sent for that
        subset: the pods above it are the workload's own surge, not pods a lowered share would
        remove — counted, the handover would keep them by raising the share, and the member would
        grow with every surge it makes."""
        found: dict[str, dict[str, int]] = {}
        for name, per_subset in self.by_spread.get(key, {}).items():
            if name in usable and self.verified(name, key):
                delivered = self._delivered.get(name, {}).get(key)
                for subset, pods in per_subset.items():
                    ready = pods.ready
                    if len(pods.revisions) > 1 and delivered is not None and subset in delivered:
                        ready = min(ready, delivered[subset])
                    if ready:
                        found.setdefault(subset, {})[name] = ready
        return found

    def holding(self, key: str) -> frozenset[str]:
        """The clusters whose last report counts pods of spread `key` (running, pending, being
        created or being deleted): they keep its assignment until their pods are gone."""
        return frozenset(name for name, per_subset in self.by_spread.get(key, {}).items()
                         if any(pods.active or pods.deleting for pods in per_subset.values()))

    def holders(self, key: str) -> frozenset[str]:
        """The clusters that hold pods of spread `key` as far as the coordinator knows: by their
        last report (`holding`), or by what they ran before they were lost or what the hub status
        recorded, until they report again."""
        return self.holding(key) | frozenset(name for name, held in self._away.items() if held.get(key))

    def held_by(self, name: str, key: str, *, pending_too: bool = False) -> dict[str, int]:
        """What cluster `name` holds of spread `key` per subset, as far as the coordinator knows:
        its last report's running pods (`pending_too`: every active pod, pending and being created
        too), or the share it ran before it was lost, whichever is more in all — compared whole,
        not subset by subset: pods still labelled with a subset the spread has since renamed or
        moved are the same pods as the share they serve, not more of them."""
        reported = {subset: pods.active if pending_too else pods.running
                    for subset, pods in self.by_spread.get(key, {}).get(name, {}).items()}
        away = self._away.get(name, {}).get(key, {})
        held = dict(away) if sum(away.values()) > sum(reported.values()) else reported
        return {subset: count for subset, count in held.items() if count}

    def unverified_for(self, key: str, *, usable: Collection[str],
                       departing: Collection[str] = ()) -> dict[str, dict[str, int]]:
        """Of the `usable` clusters whose counts of spread `key` are not verified, what each holds
        per subset (`held_by`): what the handover keeps until they report again. A `departing`
        cluster (no subset selects it) holds its pending pods too: kept, it is sent the spread,
        and so reports it; left out, a workload released there (a spread deleted under `Orphan`
        and created again) whose pods never ran was never sent the spread, never verified, and
        stayed unmanaged for good (found by `make soak`)."""
        found: dict[str, dict[str, int]] = {}
        for name in self.holders(key):  # a cluster that holds nothing of the spread has nothing to keep
            if name in usable and not self.verified(name, key):
                for subset, count in self.held_by(name, key, pending_too=name in departing).items():
                    found.setdefault(subset, {})[name] = count
        return found

    def workloads_for(self, key: str) -> dict[str, status.WorkloadStatus]:
        """Spread `key`'s member Deployment status per cluster, as agents last reported it."""
        return {name: found[key] for name, found in sorted(self._workloads.items()) if key in found}

    def dependency_conflicts_for(self, key: str) -> dict[str, tuple[str, ...]]:
        """Per cluster, the objects spread `key` needs there that the member has without our mark
        (left alone), as agents last reported them."""
        return {name: found[key] for name, found in sorted(self._dependency_conflicts.items())
                if key in found}

    def misplaced_for(self, key: str) -> dict[str, str]:
        """Per cluster, spread `key`'s StatefulSet pods whose ordinal maps to another subset now
        (the agents' words), as agents last reported them."""
        return {name: found[key] for name, found in sorted(self._misplaced.items()) if key in found}

    def autoscalers_for(self, key: str) -> dict[str, tuple[str, ...]]:
        """Per cluster, the member HPAs that scale spread `key`'s member workload (left alone), as
        agents last reported them."""
        return {name: found[key] for name, found in sorted(self._autoscalers.items()) if key in found}

    def conflicts_for(self, key: str) -> dict[str, str]:
        """Spread `key`'s ownership conflicts per cluster, as agents last reported them."""
        return {name: found[key] for name, found in sorted(self._conflicts.items()) if key in found}
