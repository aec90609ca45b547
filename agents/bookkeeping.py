"""The agent's shared state: assignments, the pods it has seen, and creatingPods/deletingPods.

Why one lock-guarded object: the webhook decides a pod's subset from the quota table and the
pods already counted, and two concurrent admissions must never both take a subset's last slot.
Kruise serialises that through the apiserver (an optimistic-lock update of the CR per
pod); here the decision is local, so a mutex around "count, choose, record" is the whole
concurrency story — and it costs microseconds, not a round trip.

Counting follows Kruise: a subset's pods are those the controller's cache has seen (not being
deleted, not finished) plus `creating` entries the cache has not seen yet; `deleting` entries are
pods the webhook saw go but the cache still lists. Entries expire (30 s / 15 s) in case the
create or delete never happened. Quotas are counted per pod-template revision (kruise#834), so a
rolling update's new pods fill the subsets in order while the old ones drain, and no subset takes
more than its quota plus the member workload's surge of all revisions (`federation.core.rollout`).

Those counts are kept as a running tally per (revision, subset), moved one pod at a time by the
webhook's calls and recounted when the controller hands over a new snapshot: an admission reads
a few numbers instead of walking every pod of the spread (at 1,000 pods that walk alone was a
millisecond, under the lock every admission shares). The records and the tally are `pod_ledger`'s;
this module keeps them under its lock and decides with them.

A fresh bookkeeping knows no pod: an agent that restarts in a cluster full of a spread's pods
would, until the controller's first recount, see every subset empty and admit new pods into full
subsets (found by the agent fault tests: a scale made while the agent was down, applied the
moment it reconnected, overfilled the first subset). So the agent's bookkeeping is made with
`count_wait`: `admit` for a spread whose pods were never counted (`observe`) waits up to that
long for the first count and otherwise raises `NotCounted` — the webhook then refuses the pod
for now, and its ReplicaSet retries a moment later.

A StatefulSet's pod is admitted by its name alone (`federation.core.ordinals`): the subset whose
ordinal range holds its ordinal in this cluster, no count read, so no wait for one either.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import threading
from collections.abc import Iterable, Mapping

import pydantic

from agents.pod_ledger import (
    CREATING_TTL,
    DELETING_TTL,
    FINISHED_PHASES,
    Pending,
    PodRecord,
    SpreadBook,
    SubsetCounts,
)
from federation import clock as clock_mod
from federation.api import common, names
from federation.core import ordinals, quotas, rollout, workload_kinds
from federation.rpc import assignment as assignment_mod


def _term(value: Mapping[str, object] | None) -> common.NodeSelectorTerm | None:
    """A subset's required node-selector term as the matching rules read it (None: any node);
    one that does not parse matches no node."""
    if value is None:
        return None
    try:
        return common.NodeSelectorTerm.model_validate(value)
    except pydantic.ValidationError:
        return common.NodeSelectorTerm()


class NotCounted(Exception):
    """The spread's pods have not been counted yet: no subset can be chosen within quota."""


class Bookkeeping:
    """Thread-safe assignments and per-spread pod bookkeeping for one member cluster."""

    def __init__(self, clock: clock_mod.Clock = clock_mod.utcnow, *, count_wait: float | None = None) -> None:
        self._lock = threading.Lock()
        self._counted_changed = threading.Condition(self._lock)
        self._clock = clock
        self._assignments: dict[str, assignment_mod.Assignment] = {}
        self._books: dict[str, SpreadBook] = collections.defaultdict(SpreadBook)
        self._count_wait = count_wait
        """None: admit from whatever is known (tests, models). Else: seconds `admit` waits for a
        spread's first count before raising NotCounted."""
        self._counted: set[str] = set()
        """Spreads whose pods `observe` has counted at least once."""
        self._surges: dict[str, tuple[assignment_mod.Assignment, int]] = {}
        """The surge of each spread's member workload, with the assignment it was read from."""

    # --- assignments (from the link) -----------------------------------------------------------

    def set_assignment(self, value: assignment_mod.Assignment) -> None:
        """Install or replace a spread's assignment.

        An assignment of another spec (generation or uid) ends the spread's local marks it does not
        echo: a local mark only bridges the time until the coordinator echoes it, and the
        coordinator spends its marks when an edit changes the subsets or the strategy type
        (`model.marks.spent`). Kept, a mark the coordinator no longer has kept new pods out of a
        subset the coordinator gave their quota: they were admitted into no subset, for as long as
        the mark had left (found by `make soak`)."""
        with self._lock:
            before = self._assignments.get(value.spread)
            self._assignments[value.spread] = value
            book = self._books.get(value.spread)
            if (before is None or book is None or not book.local_marks
                    or (before.generation, before.spread_uid) == (value.generation, value.spread_uid)):
                return
            echoed = {rule.name for rule in value.subsets if rule.unschedulable_until is not None}
            for subset in [s for s in book.local_marks if s not in echoed]:
                del book.local_marks[subset]

    def remove_assignment(self, spread: str) -> None:
        """Forget a spread entirely."""
        with self._lock:
            self._assignments.pop(spread, None)
            self._surges.pop(spread, None)
            self._books.pop(spread, None)
            self._counted.discard(spread)

    def counted(self, spread: str) -> bool:
        """Whether `observe` has counted the spread's pods since its assignment was installed."""
        with self._lock:
            return spread in self._counted

    def assignment(self, spread: str) -> assignment_mod.Assignment | None:
        """The current assignment of `spread`, if any."""
        with self._lock:
            return self._assignments.get(spread)

    def assignments(self) -> list[assignment_mod.Assignment]:
        """Every current assignment."""
        with self._lock:
            return list(self._assignments.values())

    def spread_of(self, namespace: str, labels: Mapping[str, str] | None) -> assignment_mod.Assignment | None:
        """The assignment a pod belongs to, by its fedspread.io/spread label and namespace."""
        name = (labels or {}).get(names.SPREAD_LABEL)
        if not name:
            return None
        with self._lock:
            return self._assignments.get(assignment_mod.spread_key(namespace, name))

    # --- webhook ---------------------------------------------------------------------------------

    def _assigned(self, book: SpreadBook, revision: str) -> dict[str, int]:
        return {subset: n for (rev, subset), n in book.tally.items() if rev == revision}

    def _surge(self, value: assignment_mod.Assignment) -> int:
        """The member workload's surge here (`rollout.workload_surge`), read once per assignment."""
        if self._surges.get(value.spread, (None, 0))[0] is not value:
            spec = (value.template or {}).get("spec") or {}
            self._surges[value.spread] = (value, rollout.workload_surge(spec, kind=value.kind,
                                                                        replicas=value.replicas))
        return self._surges[value.spread][1]

    def _blocked(self, spread: assignment_mod.Assignment, book: SpreadBook,
                 now: datetime.datetime) -> set[str]:
        blocked = {r.name for r in spread.subsets if not r.schedulable(now)}
        blocked |= {s for s, until in book.local_marks.items() if now < until}
        return blocked

    def admit(self, spread: str, pod_name: str, *, revision: str, dry_run: bool = False
              ) -> assignment_mod.SubsetRule | None:
        """Choose the subset for a new pod and, unless dry-run, record it in creatingPods.

        None when the spread is unknown or every subset is full or unschedulable here; NotCounted
        when made with `count_wait` and the spread's pods were not counted within that time.
        """
        now = self._clock()
        with self._lock:
            current = self._assignments.get(spread)
            if current is None:
                return None
            if _by_ordinal(current):
                chosen = _ordinal_subset(current, pod_name)
                if chosen is not None and not dry_run:
                    book = self._books[spread]
                    before = book.holder(pod_name)
                    book.creating[pod_name] = Pending(subset=chosen, revision=revision, since=now)
                    book.moved(before, book.holder(pod_name))
                return current.rule(chosen) if chosen is not None else None
            if self._count_wait is not None and spread not in self._counted:
                if not self._counted_changed.wait_for(lambda: spread in self._counted, self._count_wait):
                    raise NotCounted(f"the pods of spread {spread} are not counted yet")
                current = self._assignments.get(spread)
                if current is None:
                    return None
            book = self._books[spread]
            table = [quotas.SubsetQuota(subset=r.name, index=r.index, quota=r.quota) for r in current.subsets]
            counts = book.revision_counts()
            own = book.holder(pod_name) if pod_name in book.creating else None
            if own is not None and own[0] != revision:
                own = None
            if own is not None:  # admitted before (a retried call): its entry is replaced, not counted
                counts[own[0]][own[1]] -= 1
            chosen = rollout.choose(table, counts=counts, revision=revision, surge=self._surge(current),
                                    adaptive=current.strategy.adaptive,
                                    unschedulable=self._blocked(current, book, now),
                                    previous=own[1] if own is not None else None)
            if chosen is None:
                return None
            if not dry_run:
                before = book.holder(pod_name)
                book.creating[pod_name] = Pending(subset=chosen, revision=revision, since=now)
                book.moved(before, book.holder(pod_name))
            return current.rule(chosen)

    def note_deleting(self, spread: str, pod_name: str, *, subset: str | None = None) -> str | None:
        """Record a pod being deleted or evicted; returns its subset (None if it had none)."""
        now = self._clock()
        with self._lock:
            book = self._books[spread]
            known = book.observed.get(pod_name)
            entry = book.creating.get(pod_name)
            chosen = subset or (known.subset if known else None) or (entry.subset if entry else None)
            if chosen is None:
                return None
            revision = known.revision if known else (entry.revision if entry else "")
            before = book.holder(pod_name)
            book.deleting[pod_name] = Pending(subset=chosen, revision=revision, since=now)
            book.moved(before, book.holder(pod_name))
            return chosen

    # --- controller ------------------------------------------------------------------------------

    def observe(self, spread: str, pods: Iterable[PodRecord]) -> None:
        """Replace what the cache sees of a spread's pods (all of them: call it only with a synced
        cache); settles creating/deleting entries; the spread counts as counted from now on."""
        with self._lock:
            book = self._books[spread]
            book.observed = {p.name: p for p in pods}
            book.matched = {n: s for n, s in book.matched.items()
                            if n in book.observed and book.observed[n].subset is None}
            for name, subset in book.matched.items():
                book.observed[name] = dataclasses.replace(book.observed[name], subset=subset)
            for name in [n for n in book.creating if n in book.observed]:
                del book.creating[name]
            for name in [n for n in book.deleting if n not in book.observed]:
                del book.deleting[name]
            book.recount()
            if spread not in self._counted:
                self._counted.add(spread)
                self._counted_changed.notify_all()

    def match_by_node(self, spread: str, nodes: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
        """Give observed pods of no subset, bound to a node, the subset their node matches
        (`quotas.match_by_node`, per template revision, oldest pods first, among the subsets below
        quota + surge of all revisions, as the webhook chooses) and count them there from now on;
        returns the new matches (pod name -> subset). `nodes`: name -> labels."""
        with self._lock:
            current = self._assignments.get(spread)
            book = self._books[spread]
            waiting = sorted((p for p in book.observed.values() if p.subset is None and p.active
                              and p.owned and p.node_name and p.name not in book.deleting),
                             key=lambda p: (p.created, p.name))
            if current is None or not waiting:
                return {}
            table = [quotas.SubsetQuota(subset=r.name, index=r.index, quota=r.quota) for r in current.subsets]
            terms = {r.name: _term(r.required_term) for r in current.subsets}
            found: dict[str, str] = {}
            surge = self._surge(current)
            for pod in waiting:  # one at a time: each match counts toward the bound of the next
                everything = rollout.totals(book.revision_counts())
                allowed = [row for row in table if everything.get(row.subset, 0) < row.quota + surge]
                match = quotas.match_by_node([(pod.name, pod.node_name)], allowed, terms=terms, nodes=nodes,
                                             assigned=self._assigned(book, pod.revision))
                for name, subset in match.items():
                    before = book.holder(name)
                    book.matched[name] = subset
                    book.observed[name] = dataclasses.replace(book.observed[name], subset=subset)
                    book.moved(before, book.holder(name))
                    found[name] = subset
            return found

    def expire(self) -> int:
        """Drop creating entries older than 30 s and deleting entries older than 15 s."""
        now = self._clock()
        dropped = 0
        with self._lock:
            for book in self._books.values():
                for entries, ttl in ((book.creating, CREATING_TTL), (book.deleting, DELETING_TTL)):
                    for name in [n for n, e in entries.items() if now - e.since > ttl]:
                        before = book.holder(name)
                        del entries[name]
                        book.moved(before, book.holder(name))
                        dropped += 1
                for subset in [s for s, until in book.local_marks.items() if now >= until]:
                    del book.local_marks[subset]
        return dropped

    def mark_unschedulable(self, spread: str, subset: str, *, until: datetime.datetime) -> None:
        """Keep new pods out of `subset` here until `until` (before the coordinator echoes it)."""
        with self._lock:
            self._books[spread].local_marks[subset] = until

    def marked(self, spread: str) -> dict[str, datetime.datetime]:
        """Local unschedulable marks of a spread that are still active."""
        now = self._clock()
        with self._lock:
            return {s: u for s, u in self._books[spread].local_marks.items() if now < u}

    def unechoed_marks(self) -> list[tuple[assignment_mod.Assignment, str, datetime.datetime]]:
        """The active local marks the current assignments do not echo, as (assignment, subset,
        since): what to report again once a new stream's resync is complete. A coordinator that
        restarted has lost its marks, and the agent reported each mark once; without them, this
        agent keeps new pods out of a subset the coordinator gives them, and they are admitted
        into no subset until the mark runs out (found by `make soak`). `since` is the mark's end
        less the spread's `unschedulableSeconds`, so the coordinator's mark ends with this one."""
        now = self._clock()
        found = []
        with self._lock:
            for spread, value in sorted(self._assignments.items()):
                book = self._books.get(spread)
                echoed = {rule.name for rule in value.subsets if rule.unschedulable_until is not None}
                for subset, until in sorted(book.local_marks.items() if book else ()):
                    if now < until and subset not in echoed:
                        since = until - datetime.timedelta(seconds=value.strategy.unschedulable_seconds)
                        found.append((value, subset, since))
        return found

    def pods(self, spread: str) -> list[PodRecord]:
        """The observed pods of a spread."""
        with self._lock:
            return list(self._books[spread].observed.values())

    def pending_entries(self, spread: str) -> tuple[dict[str, Pending], dict[str, Pending]]:
        """Copies of (creatingPods, deletingPods) of a spread."""
        with self._lock:
            book = self._books[spread]
            return dict(book.creating), dict(book.deleting)

    def unassigned(self, spread: str) -> SubsetCounts:
        """Active pods of the spread in no subset of its assignment, by state: none recorded (not
        matched by their node either), or one the assignment no longer has (a subset removed or
        renamed: its pods still run and count until they are gone)."""
        with self._lock:
            current = self._assignments.get(spread)
            names = {r.name for r in current.subsets} if current else set()
            pods = [p for p in self._books[spread].observed.values()
                    if (p.subset is None or p.subset not in names) and p.active]
            running = [p for p in pods if p.phase == "Running"]
            pending = [p for p in pods if p.phase == "Pending"]
            return SubsetCounts(running=len(running), ready=sum(p.ready for p in running),
                                pending=len(pending),
                                unschedulable=sum(p.unschedulable_since is not None for p in pending))

    def counts(self, spread: str) -> dict[str, SubsetCounts]:
        """Pods per subset by state (for reports and status).

        A pod being deleted — a deletingPods entry, or a deletionTimestamp in the cache — is
        counted once, as `deleting`: not as running, pending or creating, however far its delete
        has got (webhook only, grace period, entry expired). `revisions`: the pods holding each
        subset's quota per template revision (the admission tally; pods of no revision left out).
        """
        with self._lock:
            book = self._books[spread]
            current = self._assignments.get(spread)
            names = [r.name for r in current.subsets] if current else []
            tally = {n: collections.Counter[str]() for n in names}
            for entry in book.deleting.values():
                if entry.subset in tally:
                    tally[entry.subset]["deleting"] += 1
            for pod in book.observed.values():
                if pod.subset not in tally or pod.phase in FINISHED_PHASES or pod.name in book.deleting:
                    continue
                bucket = tally[pod.subset]
                if pod.deleting:
                    bucket["deleting"] += 1
                elif pod.phase == "Running":
                    bucket["running"] += 1
                    bucket["ready"] += int(pod.ready)
                elif pod.phase == "Pending":
                    bucket["pending"] += 1
                    bucket["unschedulable"] += int(pod.unschedulable_since is not None)
            for name, entry in book.creating.items():
                if entry.subset in tally and name not in book.deleting and name not in book.observed:
                    tally[entry.subset]["creating"] += 1
            revisions: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)
            for (revision, subset), count in sorted(book.tally.items()):
                if revision and count > 0:
                    revisions[subset].append((revision, count))
            return {n: SubsetCounts(**tally[n], revisions=tuple(revisions[n])) for n in names}


def _by_ordinal(value: assignment_mod.Assignment) -> bool:
    """Whether `value`'s kind orders scale-down by ordinal ranges (a StatefulSet)."""
    try:
        return workload_kinds.policy_for(value.api_version, value.kind).scale_down_order == "ordinals"
    except workload_kinds.UnsupportedKind:
        return False


def _ordinal_subset(value: assignment_mod.Assignment, pod_name: str) -> str | None:
    """The subset whose ordinal range in this cluster holds pod `pod_name`'s ordinal; None for a
    name that is not one of the member StatefulSet's pods, or an ordinal beyond every range."""
    ordinal = ordinals.ordinal_of(pod_name, statefulset=value.workload) if value.workload else None
    if ordinal is None:
        return None
    rules = sorted(value.subsets, key=lambda r: r.index)
    return ordinals.subset_for_ordinal(ordinal, ordinals.ordinal_ranges([(r.name, r.quota) for r in rules]))
