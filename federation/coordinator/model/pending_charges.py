"""Per cluster, the pending pods every placed spread charges there; per spread, its pods' plan.

Why a module of its own: overcommit protection (karmada#1385) deducts every other spread's
placed-but-not-running pods from a cluster's room, and with thousands of spreads and clusters that
must not be recomputed for every request. So each cluster's node pools are parsed once per
inventory report into one `overcommit.Ledger`, with every placed spread's pending pods (placed
minus running) charged, updated only when a placement, a pod count, a spec or a template changes;
and each spread's pods are profiled once per spec or template change (`Plan`: per subset, the pod
its webhook admits, patch applied; subsets whose pods request the same share one kind), spreads
with equal pods sharing a signature. The member views (`member_views`) are built on these ledgers;
a round of several spreads lifts its spreads' charges out (`lift`) so the ledgers hold the round's
snapshot.

What it reads — the spreads, their last placements, the agents' pod counts — comes in as
read-only mappings of the World's records; it never writes them. A ledger that changes is reported
through `changed` (the member views built on it are stale).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence

from federation.api import cluster
from federation.coordinator.model import facts, selection_index
from federation.core import fit, overcommit, pending_deduction, placement, placement_round, status

Pods = Mapping[str, Mapping[str, Mapping[str, status.ClusterPods]]]
"""Per spread, per cluster, per subset: the pods agents counted."""


def _pending(placed: int, counted: status.ClusterPods | None) -> int:
    """Placed-but-not-running pods of one subset in one cluster: placed minus what its agent last
    reported running there (none reported: all placed are pending)."""
    return placed - (counted.running if counted is not None else 0)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a spread's spec and template give, computed once per change of either."""

    shape: fit.PodShape
    kinds: tuple[tuple[fit.Requests, ...], tuple[int, ...]]
    """The distinct requests of the subsets' pods, and each subset's number among them (`fit.kinds`)."""
    profiles: tuple[fit.Profile, ...]
    """Per subset in spec order: the pods the webhook admits into it (term, tolerations, patch)."""
    by_subset: dict[str, fit.Profile]
    signature: int
    """Equal for spreads whose pods have equal requests and admission per subset."""


class PendingCharges:
    """Per-cluster ledgers of placed spreads' pending pods, and each spread's pod plan."""

    def __init__(
        self, spreads: Mapping[str, facts.SpreadEntry], placed: Mapping[str, placement.Placement], *,
        pods: Pods, changed: Callable[[str], None],
    ) -> None:
        self._spreads = spreads
        self._placed = placed
        self._pods_by_spread = pods
        self._changed = changed
        """Told of each cluster whose ledger (so its member view) may have changed."""
        self._plans: dict[str, Plan] = {}
        self._signatures: dict[Hashable, int] = {}
        self._ledgers: dict[str, overcommit.Ledger] = {}
        self._charged: dict[str, set[str]] = {}
        self._stale: set[str] = set()
        """Spreads whose charges in the ledgers must be recomputed before the next view."""
        self._lifted: set[str] = set()
        """Spreads of a round whose charges are out of the ledgers until they are stored (`lift`)."""

    def ledger(self, name: str) -> overcommit.Ledger | None:
        """Cluster `name`'s ledger (None: no pools reported and nothing charged there)."""
        return self._ledgers.get(name)

    def charged_at(self, key: str) -> Collection[str]:
        """The clusters where spread `key`'s pending pods are charged."""
        return self._charged.get(key, ())

    def set_pools(self, name: str, pools: Sequence[cluster.NodePool]) -> None:
        """Cluster `name`'s agent reported these node pools."""
        numbers = [fit.pool_of(p) for p in pools]
        ledger = self._ledgers.get(name)
        if ledger is None:
            self._ledgers[name] = overcommit.Ledger(numbers)
        else:
            ledger.set_pools(numbers)
        self._changed(name)

    def forget_pools(self, name: str) -> None:
        """Cluster `name` was deleted: it has no pools left (its charges go with their spreads)."""
        ledger = self._ledgers.get(name)
        if ledger is not None:
            ledger.set_pools(())
        self._changed(name)

    def forget_plan(self, key: str) -> None:
        """Spread `key`'s spec or template changed: its shapes and charges are computed again."""
        self._plans.pop(key, None)
        self._stale.add(key)

    def mark_stale(self, keys: Iterable[str]) -> None:
        """The pods of spreads `keys` changed: recompute their charges before the next view."""
        self._stale.update(keys)

    def is_stale(self, key: str) -> bool:
        """Whether spread `key`'s charges wait to be recomputed (or were lifted for a round)."""
        return key in self._stale or key in self._lifted

    def lift(self, keys: Iterable[str]) -> None:
        """A round places spreads `keys` against one snapshot (`loop.recompute`): take their pending
        pods out of the ledgers (their new placements replace them), every other spread's charges
        brought up to date first, so the ledgers then hold the round's snapshot. A lifted spread
        stays out, and counts as stale, until it is charged again (`recharge`, or `stored` then
        `settle`, through the World's `store`) or `restore`d."""
        self.settle()
        changes: dict[str, dict[str, tuple[overcommit.Charge, ...]]] = {}
        for key in keys:
            for name in self._charged.pop(key, ()):
                changes.setdefault(name, {})[key] = ()
            self._lifted.add(key)
        self._charge(changes)

    def restore(self) -> None:
        """Charge the spreads still lifted again from their stored placements (a round that did not
        finish: its spreads keep their last placements, and their charges with them)."""
        self.mark_stale(self._lifted)
        self._lifted = set()

    def snapshot_pools(self) -> Mapping[str, Sequence[fit.Pool]]:
        """Per cluster, its node pools with what the ledger holds now as `requested` (after `lift`:
        the round's snapshot), read lazily: a round reads only the clusters it charges."""
        self.settle()
        return placement_round.LedgerPools(self._ledgers)

    def plan(self, key: str) -> Plan:
        """Spread `key`'s pod shape and per-subset profiles (ValueError: a malformed template)."""
        plan = self._plans.get(key)
        if plan is None:
            entry = self._spreads[key]
            shape = fit.shape_from_deployment(entry.template) if entry.template else fit.empty_shape()
            plain = fit.profile(shape)  # subsets injecting nothing share the pod's own profile
            shapes = [fit.with_subset(shape, subset) for subset in entry.spec.subsets]
            profiles = tuple(plain if s is shape else fit.profile(s) for s in shapes)
            kinds = fit.kinds([p.requests for p in profiles])
            signature = (kinds, tuple(p.admission for p in profiles))
            number = self._signatures.setdefault(signature, len(self._signatures))
            by_subset = {s.name: p for s, p in zip(entry.spec.subsets, profiles, strict=True)}
            plan = self._plans[key] = Plan(shape, kinds, profiles, by_subset, number)
        return plan

    def _charges_of(
        self, key: str, occupied: selection_index.Occupancy | None = None
    ) -> dict[str, tuple[overcommit.Charge, ...]]:
        """Spread `key`'s pending pods per cluster: placed minus running, per subset in placement order."""
        last = self._placed.get(key)
        if last is None or key not in self._spreads:
            return {}
        plan = self.plan(key)
        pods = self._pods_by_spread.get(key, {})
        found: dict[str, list[overcommit.Charge]] = {}
        for subset, counts in occupied if occupied is not None else selection_index.occupancy(last):
            profile = plan.by_subset.get(subset)
            if profile is None:
                continue
            for name, placed in counts:
                count = _pending(placed, pods.get(name, {}).get(subset) if pods else None)
                if count > 0:
                    found.setdefault(name, []).append(overcommit.Charge(profile, count))
        return {name: tuple(items) for name, items in found.items()}

    def recharge(self, key: str, occupied: selection_index.Occupancy | None = None) -> set[str]:
        """Bring spread `key`'s charges in the ledgers up to date; the clusters where they changed."""
        return self._recharged({key: self._charges_of(key, occupied)})

    def stored(self, key: str) -> None:
        """Spread `key` of a round was stored: its charges are brought up to date with the round's
        others, all at once, by the next `settle` (`loop.recompute` settles once it stored them all)."""
        self._lifted.discard(key)
        self._stale.add(key)

    def settle(self) -> None:
        """Recompute the charges of every stale spread, all at once (ValueError: a malformed
        template, and nothing changed)."""
        if self._stale:
            self._recharged({key: self._charges_of(key) for key in sorted(self._stale)})
            self._stale = set()  # a set never shrinks: an emptied big one still costs its table to scan

    def _recharged(self, found: Mapping[str, Mapping[str, tuple[overcommit.Charge, ...]]]) -> set[str]:
        """Charge each spread of `found` (its new charges per cluster) instead of what it charged;
        the clusters where charges changed."""
        changes: dict[str, dict[str, tuple[overcommit.Charge, ...]]] = {}
        for key, new in found.items():
            for name in self._charged.get(key, set()) | new.keys():
                changes.setdefault(name, {})[key] = new.get(name, ())
            if new:
                self._charged[key] = set(new)
            else:
                self._charged.pop(key, None)
            self._stale.discard(key)
            self._lifted.discard(key)
        return self._charge(changes)

    def _charge(self, changes: Mapping[str, Mapping[str, tuple[overcommit.Charge, ...]]]) -> set[str]:
        """Per cluster, set the charges of the spreads given there (`Ledger.set_many`: a round's at
        once); the clusters whose ledger changed."""
        changed: set[str] = set()
        for name, charges in changes.items():
            ledger = self._ledgers.get(name)
            if ledger is None:
                if not any(charges.values()):
                    continue
                ledger = self._ledgers[name] = overcommit.Ledger()
                self._changed(name)
            if ledger.set_many(charges):
                changed.add(name)
                self._changed(name)
        return changed

    def pending_pods(self, *, besides: str | None = None) -> list[pending_deduction.PendingPods]:
        """Placed-but-not-running pods of every spread but `besides` (None: of every spread), with
        each subset's shape: by spread key, then subset in placement order, then cluster
        (ValueError: a malformed template)."""
        found: list[pending_deduction.PendingPods] = []
        for key in sorted(self._placed):
            if key == besides or key not in self._spreads:
                continue
            plan = self.plan(key)
            pods = self._pods_by_spread.get(key, {})
            for result in self._placed[key].subsets:
                profile = plan.by_subset.get(result.name)
                if profile is None:
                    continue
                for name, placed in sorted(result.clusters.items()):
                    count = _pending(placed, pods.get(name, {}).get(result.name))
                    if count > 0:
                        found.append(pending_deduction.PendingPods(
                            cluster=name, shape=profile.shape, count=count))
        return found
