"""Overcommit protection per cluster: one ledger of node pools with every spread's pending pods charged.

Why: every spread is placed on capacity from which every *other* spread's placed-but-not-running
replicas are deducted (karmada#1385; the reference arithmetic on a whole snapshot is
`pending_deduction.deduct_pending`). Recomputing that per request would walk every spread and
cluster; the ledger keeps one cluster's charged state and answers from it, and is tested without
any coordinator.
"""

from __future__ import annotations

import bisect
import collections
import typing
from collections.abc import Hashable, Mapping, Sequence

from federation.api import quantity
from federation.core import charge_fold, fit

# --- the ledger: one cluster's pools with every spread's pending pods charged ---------------------


class Charge(typing.NamedTuple):
    """`pods` pending pods of one subset of a spread, on the ledger's cluster."""

    profile: fit.Profile
    pods: int


class _Share(typing.NamedTuple):
    """What one charge that fits whole in its first pool adds per node of that pool."""

    pool: int
    requests: fit.Requests
    pods: int
    additions: fit.Requests


State = tuple[Mapping[str, quantity.Nanos], ...]
"""Per pool of a ledger, what each node holds requested."""


class Ledger:
    """One cluster's node pools with the pending pods of spreads charged, spread by spread.

    Why: every spread is placed on capacity from which every *other* spread's pending pods are
    deducted (`deduct_pending`). Recomputing that per request walks every spread and cluster; the
    ledger keeps the charged state of one cluster and answers "free slots for these requests,
    without spread K's own charges" directly.

    The answer is always exactly `deduct_pending` with the charges in key order (and each spread's
    in subset order). It is cheap in the usual case: when every charge fits whole in its first
    admitting pool and the reported requests are whole nano-units ("additive"), the fold is a sum,
    so a spread's charges are taken out or replaced by subtraction and addition (a charge's
    additions are a function of the charge: nothing per charge is stored), and a round's charges
    set at once are added by kind, not one by one (`charge_fold.summed`). When a pool was short
    (a cluster full of pending pods), the ledger folds the charges again in order, from the
    changed spread's position on, keeping a record of the fold (`charge_fold.Record`) from which
    "without K's charges" costs the charges K's absence really changes (`charge_fold.without`).
    """

    def __init__(self, pools: Sequence[fit.Pool] = ()) -> None:
        self._charges: dict[str, tuple[Charge, ...]] = {}
        self._order: list[str] = []
        self._state: list[dict[str, quantity.Nanos]] = []  # per pool, each node with every charge: the fold
        self._additive = False  # every charge fits whole in its first pool, on whole nano-units: a sum
        self._largest: list[dict[fit.Requests, collections.Counter[int]]] | None = None
        self._slots: dict[fit.Requests, tuple[int, ...]] = {}
        self._without: dict[str, State] = {}
        self._frozen: State | None = None
        self._cached = 0
        """The version `_slots`, `_without` and `_sequence` hold answers for."""
        self._record: charge_fold.Record | None = None  # the fold recorded, when kept
        self._sequence: list[tuple[Charge, ...]] | None = None
        self._extent: tuple[set[fit.Requests], int] | None = None
        self.version = 0
        """Bumped whenever the fully charged state may have changed."""
        self.set_pools(pools)

    @property
    def pools(self) -> tuple[fit.Pool, ...]:
        """The cluster's node pools as reported, nothing charged."""
        return self._pools

    @property
    def allocatable(self) -> tuple[Mapping[str, quantity.Nanos], ...]:
        """Per pool, what one node offers."""
        return self._allocatable

    @property
    def nodes(self) -> tuple[int, ...]:
        """Per pool, its nodes."""
        return self._nodes

    def keys(self) -> list[str]:
        """Spreads with charges here, in key order."""
        return list(self._order)

    def charges(self, key: str) -> tuple[Charge, ...]:
        """Spread `key`'s charges here."""
        return self._charges.get(key, ())

    def set_pools(self, pools: Sequence[fit.Pool]) -> None:
        """The cluster reported new pools: charge everything on them again."""
        self._pools = tuple(pools)
        self._allocatable = tuple(p.allocatable for p in self._pools)
        self._nodes = tuple(p.count for p in self._pools)
        self._integral = all(type(v) is int for p in self._pools for v in p.requested.values())
        self._admitted: dict[Hashable, tuple[int, ...]] = {}
        self._admits: dict[Hashable, tuple[tuple[int, ...], ...]] = {}
        self._refold()

    def admitted(self, profile: fit.Profile) -> tuple[int, ...]:
        """The pools (with nodes) whose nodes admit the profile's pods, in order."""
        found = self._admitted.get(profile.admission)
        if found is None:
            found = self._admitted[profile.admission] = fit.admitting(self._pools, profile.shape)
        return found

    def admits(self, key: Hashable, profiles: Sequence[fit.Profile]) -> tuple[tuple[int, ...], ...]:
        """`admitted` of each profile, cached under `key` (equal keys: equal admissions)."""
        found = self._admits.get(key)
        if found is None:
            found = self._admits[key] = tuple(self.admitted(p) for p in profiles)
        return found

    def set_charges(self, key: str, charges: tuple[Charge, ...]) -> bool:
        """Replace spread `key`'s charges; whether anything changed."""
        old = self._charges.get(key, ())
        if old == charges:
            return False
        last = self._order[-1] == key if old else not self._order or key > self._order[-1]
        if old and not charges:
            del self._charges[key]
            self._order.remove(key)
        elif charges:
            if not old:
                bisect.insort(self._order, key)
            self._charges[key] = charges
        self.version += 1
        if last and (not old or self._additive):
            if old:  # additive: the fold without `key` is the sum without its shares
                self._record = None
                self._add(self._state, self._shares(old), sign=-1)
                self._count(old, sign=-1)
            if charges and not old and (done := self._record) is not None:  # appended to the record
                done.append(self._pools, charges, admitted=self.admitted)
                self._state, self._additive = [dict(node) for node in done.prefix[-1]], done.whole()
            elif charges:
                self._additive = self._apply(self._state, charges) and self._additive
                if not old and not self._additive:  # the fold stopped being a sum: record it now
                    self._recorded()
            self._count(charges, sign=1)
        elif self._additive and self._reshare(old, charges):
            self._record = None
        else:  # only `key`'s charges changed: fold again what that may change
            self._refold(change=(bisect.bisect_left(self._order, key), bool(old) - bool(charges)))
        return True

    def set_many(self, changes: Mapping[str, tuple[Charge, ...]]) -> bool:
        """`set_charges` of several spreads at once (a round's); whether anything changed. When
        they are at least half of the spreads charged here before or after, every charge is
        folded once, not spread by spread: the same answers, without a step per spread."""
        changed = {key: charges for key, charges in changes.items() if self._charges.get(key, ()) != charges}
        if not changed:
            return False
        if 2 * len(changed) < len(self._charges.keys() | changed.keys()):
            return any([self.set_charges(key, changed[key]) for key in sorted(changed, reverse=True)])
        for key, charges in changed.items():
            if charges:
                self._charges[key] = charges
            else:
                del self._charges[key]
        self._order = sorted(self._charges)
        self.version += 1
        self._largest, self._record = None, None
        self._state, self._additive = self._fold_all()
        return True

    def requested(self, key: str | None) -> State:
        """Per pool, what each node holds with every spread's charges but `key`'s (None: all)."""
        if key not in self._charges:
            return tuple(dict(node) for node in self._state)
        if not self._additive:
            self._fresh()
            found = self._without.get(key)
            if found is None:
                found = self._without[key] = tuple(
                    self._fold(skip=key)[0] if (done := self._recorded()) is None else charge_fold.without(
                        self._pools, done, self._in_order(), position=bisect.bisect_left(self._order, key),
                        admitted=self.admitted, requests=self._extents()[0], largest=self._extents()[1]))
            return tuple(dict(node) for node in found)
        state = [dict(node) for node in self._state]
        self._add(state, self._shares(self._charges[key]), sign=-1)
        return tuple(state)

    def slots(self, key: str | None, requests: fit.Requests) -> tuple[int, ...]:
        """Per pool, pods of `requests` that still fit with every spread's charges but `key`'s (None: all)."""
        if key in self._charges:
            return self._slots_on(self.requested(key), requests)
        self._fresh()
        found = self._slots.get(requests)
        if found is None:
            found = self._slots[requests] = self._slots_on(self._state, requests)
        return found

    def kinds(
        self, key: str | None, kinds: Sequence[fit.Requests]
    ) -> tuple[tuple[tuple[int, ...], ...], State]:
        """Per requests of `kinds`: `slots(key, ·)`; and the state they were counted on (per pool,
        what each node holds without `key`'s charges), a copy nothing changes afterwards, so that
        what binds (`fit.binding`) can be worked out from it later, only if asked."""
        if key in self._charges:
            state = self.requested(key)  # computed once for every kind; a fresh copy
            return tuple(self._slots_on(state, r) for r in kinds), state
        self._fresh()
        frozen = self._frozen
        if frozen is None:  # once per version, shared by every view built on it
            frozen = self._frozen = tuple(dict(node) for node in self._state)
        return tuple(self.slots(key, r) for r in kinds), frozen

    # --- internals ----------------------------------------------------------------------------

    def _fresh(self) -> None:
        """Forget cached answers of an older version (lazily: charging touches no cache)."""
        if self._cached != self.version:
            self._slots.clear()
            self._without.clear()
            self._frozen = None
            self._sequence = self._extent = None
            self._cached = self.version

    def _in_order(self) -> list[tuple[Charge, ...]]:
        """Every spread's charges in key order (as of the version `_fresh` saw)."""
        found = self._sequence = self._sequence or [self._charges[key] for key in self._order]
        return found

    def _extents(self) -> tuple[set[fit.Requests], int]:
        """Every charge's requests, and the most pods of one charge (what a pool may have to take)."""
        if self._extent is None:
            items = [item for charges in self._in_order() for item in charges]
            self._extent = {i.profile.requests for i in items}, max((i.pods for i in items), default=0)
        return self._extent

    def _recorded(self) -> charge_fold.Record | None:
        """The recorded fold of the charges as they are; None when not on whole nano-units."""
        if self._record is None and self._integral:
            self._fresh()
            self._record = charge_fold.record(self._pools, self._in_order(), admitted=self.admitted)
        return self._record

    def _slots_on(
        self, state: Sequence[Mapping[str, quantity.Nanos]], requests: fit.Requests
    ) -> tuple[int, ...]:
        pools = self._pools
        if len(pools) == 1:
            return (fit.slots(pools[0], state[0], requests),)
        return tuple(fit.slots(p, node, requests) for p, node in zip(pools, state, strict=True))

    def _shares(self, charges: Sequence[Charge]) -> list[_Share]:
        """What each charge adds to its first pool, were it whole there (additive mode)."""
        found = []
        for item in charges:
            admitted = self.admitted(item.profile)
            if admitted:
                first = admitted[0]
                requests = item.profile.requests
                additions = fit.additions(requests, pods=item.pods, count=self._pools[first].count)
                found.append(_Share(first, requests, item.pods, additions))
        return found

    @staticmethod
    def _add(state: list[dict[str, quantity.Nanos]], shares: Sequence[_Share], *, sign: int) -> None:
        for share in shares:
            node = state[share.pool]
            for name, amount in share.additions:
                node[name] = node.get(name, 0) + sign * amount

    def _apply(self, state: list[dict[str, quantity.Nanos]], charges: Sequence[Charge]) -> bool:
        """Charge in order onto `state` exactly (`deduct_pending`); whether all fit whole in a first pool."""
        whole = True
        for item in charges:
            admitted = self._admitted.get(item.profile.admission)
            if admitted is None:
                admitted = self.admitted(item.profile)
            if not admitted:
                continue
            requests, left = item.profile.requests, item.pods
            pool = self._pools[admitted[0]]
            node = state[admitted[0]]
            if self._integral and fit.slots(pool, node, requests) >= left:
                # Whole in its first pool, on whole nano-units: `charge` adds exactly the additions.
                for name, amount in fit.additions(requests, pods=left, count=pool.count):
                    node[name] = node.get(name, 0) + amount
                continue
            whole = False
            for index in admitted:
                pool = self._pools[index]
                take = min(left, fit.slots(pool, state[index], requests))
                if take:
                    fit.charge(state[index], requests, pods=take, count=pool.count)
                    left -= take
                if not left:
                    break
        return whole

    def _fold(self, *, skip: str | None) -> tuple[list[dict[str, quantity.Nanos]], bool]:
        """Every spread's charges but `skip`'s folded in key order; whether the fold is a sum."""
        ordered = [self._charges[key] for key in self._order if key != skip]
        if self._integral and (summed := charge_fold.summed(
                self._pools, ordered, admitted=self.admitted)) is not None:
            return summed, True  # each charge whole in its first pool: added by kind, not one by one
        state = [dict(p.requested) for p in self._pools]
        additive = self._integral
        for charges in ordered:
            additive = self._apply(state, charges) and additive
        return state, additive

    def _fold_all(self) -> tuple[list[dict[str, quantity.Nanos]], bool]:
        """Every charge folded, and whether that is a sum: added by kind where it is one, else (on
        whole nano-units) recorded once; the record, which `requested` reads, ends on the fold."""
        if not self._integral:
            return self._fold(skip=None)
        self._fresh()
        if (summed := charge_fold.summed(self._pools, self._in_order(), admitted=self.admitted)) is not None:
            return summed, True
        done = self._recorded()
        assert done is not None, "a ledger on whole nano-units records its fold"
        return [dict(node) for node in done.prefix[-1]], done.whole()

    def _refold(self, *, change: tuple[int, int] | None = None) -> None:
        """Fold every charge again; on whole nano-units recorded, and with `change` (the position of
        the only spread whose charges changed since the kept record, and `charge_fold.update`'s
        shift) only what that change may affect."""
        self.version += 1
        self._largest, kept, self._record = None, self._record, None
        if change is not None and kept is not None:
            self._fresh()
            self._record = charge_fold.update(
                self._pools, kept, self._in_order(), start=change[0], shift=change[1],
                admitted=self.admitted, requests=self._extents()[0], largest=self._extents()[1])
        if (done := self._record or self._recorded()) is None:
            self._state, self._additive = self._fold(skip=None)
        else:
            self._state, self._additive = [dict(node) for node in done.prefix[-1]], done.whole()

    def _counts(self) -> list[dict[fit.Requests, collections.Counter[int]]]:
        """Per pool, per requests, how many charges of each pod count it holds (built on first use)."""
        if self._largest is None:
            self._largest = [{} for _ in self._pools]
            for charges in self._charges.values():
                self._count(charges, sign=1)
        return self._largest

    def _count(self, charges: Sequence[Charge], *, sign: int) -> None:
        """Keep the counts in step with a change of charges, once they are built."""
        largest = self._largest
        if largest is None:
            return  # `_counts` builds them from the charges when first needed
        for share in self._shares(charges):
            counter = largest[share.pool].setdefault(share.requests, collections.Counter())
            counter[share.pods] += sign
            if counter[share.pods] <= 0:
                del counter[share.pods]

    def _reshare(self, old: tuple[Charge, ...], charges: tuple[Charge, ...]) -> bool:
        """Replace a spread's shares in the additive state if the sum stays the fold; False if unsure.

        Every charge keeps fitting whole in its first pool when, on the new state, a pool that grew
        still has room for the largest charge on it of each requests (a charge's own state when it
        is folded is at most the whole state), and each new charge fits with only itself taken out.
        """
        new = self._shares(charges)
        delta: dict[int, collections.Counter[str]] = {}
        for share, sign in [*((s, -1) for s in self._shares(old)), *((s, 1) for s in new)]:
            counter = delta.setdefault(share.pool, collections.Counter())
            for name, amount in share.additions:
                counter[name] += sign * int(amount)
        state = list(self._state)
        for index, counter in delta.items():
            node = dict(state[index])
            for name, amount in counter.items():
                node[name] = node.get(name, 0) + amount
            state[index] = node
        for share in new:
            alone = dict(state[share.pool])
            for name, amount in share.additions:
                alone[name] -= amount
            if fit.slots(self._pools[share.pool], alone, share.requests) < share.pods:
                return False
        self._count(old, sign=-1)  # `set_charges` has put the new charges in place already
        self._count(charges, sign=1)
        largest = self._counts()
        grew = [index for index, counter in delta.items() if any(v > 0 for v in counter.values())]
        for index in grew:
            for requests, counts in largest[index].items():
                if counts and fit.slots(self._pools[index], state[index], requests) < max(counts):
                    return False  # the caller folds again
        self._state = state
        return True
