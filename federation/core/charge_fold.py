"""A cluster's charge fold, recorded: the state before every charge, and where charges ran short.

Why: `overcommit.Ledger` answers "what each node holds with every spread's pending pods but spread
K's" — the fold of the charges in key order with K's skipped. When every charge fits whole in its
first pool the fold is a sum and K's share is subtracted; when a cluster is full it is not (a
charge takes what room is left, then spills to the next pool or to nothing), and folding every
other spread's charges again for every spread that asks costs O(spreads on the cluster) each time:
a cordon at 10,000 spreads x 100 clusters spent 70 s so. This module keeps what one fold knows so
that the question costs the charges it really changes, with the very same answer:

- `Record` holds, for the full fold, the state before each position (pools a charge did not
  change share their dict with the position before) and, per pool, the positions whose charge
  was *short* there (took less than it had left: the pool could not hold the rest).
- On whole nano-units (`integral`) what a charge adds depends only on how many pods it takes
  where, never on the state before. So without K, every later charge takes the same as in the
  full fold, and the states differ by a fixed `diff` (K's additions at first), until a charge is
  short at a pool where they differ: with more room it might take more. `without` jumps from one
  such charge to the next (bisecting the recorded shorts) and folds only those exactly, updating
  `diff`. It stops when no pool that differs can change any later take: each such pool either
  has less requested than in the full fold and no later charge short there, or no room for any
  pod of the ledger's requests in either fold (nothing will be charged there again). The answer is
  then the full fold's final state minus `diff`.
- `update` records the fold after one spread's charges changed the same way: the states before
  its position are kept, and after it a stretch where every charge takes what it took is the
  old states less `diff`, folding only where a charge may now take otherwise.
- `summed` is the fold of many charges at once when it is a sum: charges alike (first pool,
  requests, pods) added by kind, times how many, with a check that each kind still fits on the
  sum less its own additions (then every charge fit whole when folded in order); it declines
  otherwise, and the caller folds in order.

The unit tests compare it with the plain fold on random charges (`test_overcommit_ledger`,
`test_charge_fold`).
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import typing
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from federation.api import quantity
from federation.core import fit

Node = dict[str, quantity.Nanos]
"""What each node of one pool holds requested."""


class Item(typing.Protocol):
    """One charge: `pods` pods of one profile (`overcommit.Charge`)."""

    @property
    def profile(self) -> fit.Profile: ...

    @property
    def pods(self) -> int: ...


Admitted = Callable[[fit.Profile], tuple[int, ...]]
"""The pools (with nodes) admitting a profile's pods, in order (`Ledger.admitted`)."""


@dataclasses.dataclass
class Record:
    """The full fold of charges in key order, recorded (states are never changed in place)."""

    prefix: list[list[Node]]
    """prefix[i]: per pool, the state before the charges at position i; prefix[-1]: the fold."""
    shorts: list[list[int]]
    """Per pool, the positions (ascending, repeats allowed) whose charges ran short there."""

    def whole(self) -> bool:
        """Whether every charge fit whole where it was first admitted (no charge ran short)."""
        return not any(self.shorts)

    def append(self, pools: Sequence[fit.Pool], items: Sequence[Item], *, admitted: Admitted) -> None:
        """Charges appended after the last position: fold them onto the record (in place)."""
        state = list(self.prefix[-1])
        step(pools, state, items, admitted=admitted, position=len(self.prefix) - 1, shorts=self.shorts)
        self.prefix.append(state)


def record(pools: Sequence[fit.Pool], charges: Sequence[Sequence[Item]], *, admitted: Admitted) -> Record:
    """The fold of `charges` (per position, in key order) on `pools`, recorded.

    A fold only adds, so a pool with no slot left for some requests has none for the rest of it:
    such (pool, requests) pairs are remembered (`full`) and not counted again; at 600 spreads per
    cluster most positions after the pools fill meet only those."""
    prefix: list[list[Node]] = [[dict(p.requested) for p in pools]]
    shorts: list[list[int]] = [[] for _ in pools]
    state = list(prefix[-1])
    full: set[tuple[int, fit.Requests]] = set()
    for position in range(len(charges)):
        step(pools, state, charges[position], admitted=admitted, position=position, shorts=shorts, full=full)
        prefix.append(list(state))
    return Record(prefix, shorts)


def summed(
    pools: Sequence[fit.Pool], charges: Iterable[Sequence[Item]], *, admitted: Admitted
) -> list[Node] | None:
    """The fold of `charges` (in key order) on `pools` of whole nano-units, when it is a sum: every
    charge fits whole in its first admitting pool; None when one may not (fold them in order).

    Why: a round sets most of a cluster's charges at once, and folding them one by one costs a
    `fit.slots` and a `fit.additions` per charge, 80,000 of them in a full round of 10,000 spreads
    on 10 clusters each. Charges alike (the same first pool, requests and pods) add the same, so
    they are added by kind, times how many. Every charge fit whole in the fold in order if each
    kind still fits on the summed state less its own additions: what a charge meets when it is
    folded is at most that (no addition is negative, and less requested leaves no fewer slots).
    """
    alike: collections.Counter[tuple[fit.Profile, int]] = collections.Counter(
        (item.profile, item.pods) for items in charges for item in items)  # profiles hash by identity
    kinds: collections.Counter[tuple[int, fit.Requests, int]] = collections.Counter()
    for (profile, pods), times in alike.items():
        found = admitted(profile)
        if found:
            kinds[found[0], profile.requests, pods] += times
    state = [dict(p.requested) for p in pools]
    added: list[tuple[int, fit.Requests, int, fit.Requests]] = []
    for (index, requests, pods), times in kinds.items():
        count = pools[index].count
        if count <= 0:
            return None
        additions = fit.additions(requests, pods=pods, count=count)
        added.append((index, requests, pods, additions))
        node = state[index]
        for name, amount in additions:
            node[name] = node.get(name, 0) + times * amount
    for index, requests, pods, additions in added:
        alone = dict(state[index])
        for name, amount in additions:
            alone[name] -= amount
        if fit.slots(pools[index], alone, requests) < pods:
            return None
    return state


def update(
    pools: Sequence[fit.Pool], base: Record, charges: Sequence[Sequence[Item]], *, start: int, shift: int,
    admitted: Admitted, requests: Collection[fit.Requests], largest: int,
) -> Record:
    """The record of `charges`, which differ from those `base` recorded only at position `start`:
    `shift` is 1 when a spread's charges were removed there, -1 when added, 0 when changed. Like
    `without`, only the charges the change may affect are folded; the others take what they took."""
    last, old = len(charges), base.prefix
    prefix = old[:start + 1]
    shorts = [found[:bisect.bisect_left(found, start)] for found in base.shorts]
    state = list(prefix[-1])
    at = start
    if shift <= 0:  # the changed spread has charges at `start`
        step(pools, state, charges[start], admitted=admitted, position=start, shorts=shorts)
        prefix.append(list(state))
        at += 1
    while at < last:
        diff = _diff(old[at + shift], state)  # against the state before the same charges, in `base`
        reach = _reach(pools, base, diff, state, at=at, shift=shift, last=last, requests=requests,
                       largest=largest)
        if reach > at:  # up to `reach`, every charge takes what it took
            _carry(pools, base, diff, prefix=prefix, shorts=shorts, start=at, end=reach, shift=shift)
            at = reach
            if at == last:
                break
            state = list(prefix[-1])
        step(pools, state, charges[at], admitted=admitted, position=at, shorts=shorts)
        prefix.append(list(state))
        at += 1
    return Record(prefix, shorts)


def _carry(
    pools: Sequence[fit.Pool], base: Record, diff: Mapping[int, Mapping[str, quantity.Nanos]], *,
    prefix: list[list[Node]], shorts: list[list[int]], start: int, end: int, shift: int,
) -> None:
    """Positions `start` to `end` of a new record whose charges take what `base`'s took at
    `shift` positions further: the old states less `diff`, the old shorts."""
    if not diff:  # the very same states
        prefix.extend(base.prefix[start + 1 + shift:end + 1 + shift])
    made: dict[int, tuple[Node, Node]] = {}
    changed = [(index, delta, pools[index].requested) for index, delta in diff.items()]
    for position in range(start + 1 + shift, end + 1 + shift) if diff else ():
        found = list(base.prefix[position])
        for index, delta, reported in changed:  # a dict shared by several positions is converted once
            node = found[index]
            converted = made.get(id(node))
            if converted is None or converted[0] is not node:
                converted = made[id(node)] = node, _less(node, delta, reported)
            found[index] = converted[1]
        prefix.append(found)
    for index, positions in enumerate(base.shorts):
        begin, stop = bisect.bisect_left(positions, start + shift), bisect.bisect_left(positions, end + shift)
        shorts[index].extend(position - shift for position in positions[begin:stop])


def step(
    pools: Sequence[fit.Pool], state: list[Node], items: Sequence[Item], *, admitted: Admitted,
    position: int = 0, shorts: list[list[int]] | None = None,
    full: set[tuple[int, fit.Requests]] | None = None,
) -> None:
    """Charge one position's items onto `state` exactly as `pending_deduction.deduct_pending` does,
    on whole nano-units; a pool's dict is replaced, never changed (copy on write). Shorts go to
    `shorts`. `full`: (pool, requests) pairs known to have no slot left in `state` and in every
    state it will be (the caller only adds to it); found ones are added."""
    for item in items:
        found = admitted(item.profile)
        if not found:
            continue
        requests, left = item.profile.requests, item.pods
        for index in found:
            if full is not None and (index, requests) in full:
                if shorts is not None:
                    shorts[index].append(position)
                continue
            pool = pools[index]
            room = fit.slots(pool, state[index], requests)
            take = min(left, room)
            if take < left and shorts is not None:
                shorts[index].append(position)
            if take:
                node = state[index] = dict(state[index])
                for name, amount in _additions(requests, take, pool.count):
                    node[name] = node.get(name, 0) + amount
                left -= take
            if full is not None and take == room:
                full.add((index, requests))
            if not left:
                break


@functools.lru_cache(maxsize=4096)
def _additions(requests: fit.Requests, pods: int, count: int) -> fit.Requests:
    """`fit.additions`, remembered: a fold meets the same few (requests, pods, count) again and
    again, and the answer is a function of them."""
    return fit.additions(requests, pods=pods, count=count)


def without(
    pools: Sequence[fit.Pool], done: Record, charges: Sequence[Sequence[Item]], *, position: int,
    admitted: Admitted, requests: Collection[fit.Requests], largest: int,
) -> list[Node]:
    """The fold with the charges at `position` skipped (see the module docstring); `requests`: every
    request of the ledger's charges (a pool with room for none of them takes nothing more). The
    dicts returned may be the record's: read them, never change them."""
    prefix, last = done.prefix, len(charges)
    state = list(prefix[position])
    at = position + 1
    while at < last:
        diff = _diff(prefix[at], state)
        if not diff:
            return list(prefix[last])
        reach = _reach(pools, done, diff, state, at=at, shift=0, last=last, requests=requests,
                       largest=largest)
        if reach == last:
            return _minus(pools, prefix[last], diff)
        if reach > at:  # every charge before `reach` takes the same: jump
            state, at = _minus(pools, prefix[reach], diff), reach
        step(pools, state, charges[at], admitted=admitted)
        at += 1
    return state


def _reach(
    pools: Sequence[fit.Pool], base: Record, diff: Mapping[int, Mapping[str, quantity.Nanos]],
    state: Sequence[Node], *, at: int, shift: int, last: int, requests: Collection[fit.Requests],
    largest: int,
) -> int:
    """How far (a position up to `last`) every charge from `at` on takes what it took in `base`,
    `shift` positions further, when the states before `at` differ by `diff`; `at` itself when the
    charge there must be folded. A differing pool lets charges through up to its next short one
    when it holds less than in `base`; when it holds more (some amount of `diff` is negative),
    only while it keeps room for `largest` pods of every one of `requests` (found by bisection:
    the states only grow). A pool with room for none in both folds takes nothing more."""
    before = base.prefix[at + shift]
    reach = last
    for index, delta in diff.items():
        pool = pools[index]
        if _full(pool, before[index], requests) and _full(pool, state[index], requests):
            continue
        found = base.shorts[index]
        later = bisect.bisect_left(found, at + shift)
        bound = found[later] - shift if later < len(found) else last
        if any(amount < 0 for amount in delta.values()):
            low, high = at - 1, bound  # the last position with room for `largest`, `at - 1` if none
            while low < high:
                middle = (low + high + 1) // 2
                node = _less(base.prefix[middle + shift][index], delta, pool.requested)
                if all(fit.slots(pool, node, kind) >= largest for kind in requests):
                    low = middle
                else:
                    high = middle - 1
            bound = max(low, at)
        reach = min(reach, bound)
        if reach == at:
            break
    return reach


def _diff(full: Sequence[Mapping[str, quantity.Nanos]], state: Sequence[Mapping[str, quantity.Nanos]]
          ) -> dict[int, dict[str, quantity.Nanos]]:
    """Per pool whose states differ: full minus state, per resource (zeros left out)."""
    found: dict[int, dict[str, quantity.Nanos]] = {}
    for index, (mine, theirs) in enumerate(zip(full, state, strict=True)):
        if mine is theirs or mine == theirs:
            continue
        delta = {name: amount for name in mine.keys() | theirs.keys()
                 if (amount := mine.get(name, 0) - theirs.get(name, 0))}
        if delta:
            found[index] = delta
    return found


def _minus(
    pools: Sequence[fit.Pool], full: Sequence[Node], diff: Mapping[int, Mapping[str, quantity.Nanos]]
) -> list[Node]:
    """`full` with `diff` taken off its pools (fresh dicts where they differ, shared elsewhere). A
    resource left at 0 that the pool did not report is dropped, as the fold never charged it
    (charges add positive amounts only)."""
    state = list(full)
    for at, delta in diff.items():
        state[at] = _less(state[at], delta, pools[at].requested)
    return state


def _less(node: Node, delta: Mapping[str, quantity.Nanos], reported: Mapping[str, quantity.Nanos]) -> Node:
    """A copy of `node` less `delta` (`_minus` of one pool, whose report is `reported`)."""
    found = dict(node)
    for name, amount in delta.items():
        left = found.get(name, 0) - amount
        if left or name in reported:
            found[name] = left
        else:
            found.pop(name, None)
    return found


def _full(pool: fit.Pool, node: Mapping[str, quantity.Nanos], requests: Collection[fit.Requests]) -> bool:
    """Whether no pod of any of `requests` fits in the pool any more."""
    return all(fit.slots(pool, node, found) == 0 for found in requests)
